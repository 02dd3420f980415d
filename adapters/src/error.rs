//! The adapters' error type. Every variant says what failed and what was left untouched.

use solewriter_core::projection::adoption::AdoptionRefused;
use solewriter_core::projection::lease::{DeadlinePassed, Fenced, ForeignEpoch, InconsistentLease};
use solewriter_core::projection::machine::publish_many::BatchRefused;
use solewriter_core::projection::machine::ProtocolError;
use solewriter_core::projection::target::TargetId;
use solewriter_core::projection::watermark::SubmissionRejected;
use solewriter_core::projection::DocumentError;
pub use solewriter_files::FileError;
use std::path::PathBuf;

/// Everything that can go wrong in the store, the publisher and the reader.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// `open` was given a path with no database, or a database without the two tables.
    /// Nothing was created.
    #[error("no store at {path} (initialize it explicitly); nothing was created")]
    StoreMissing {
        /// The store path.
        path: PathBuf,
    },
    /// The database holds a table of solewriter's names in another shape (or one of the two
    /// tables only, or an object attached to them), or is not in WAL mode. Nothing was changed.
    #[error("{path} does not hold a solewriter store ({reason}); nothing was changed")]
    ForeignSchema {
        /// The store path.
        path: PathBuf,
        /// What did not match.
        reason: String,
    },
    /// The store has another schema version. Nothing was changed.
    #[error(
        "store {path} has schema version {found}, this build needs {expected}; nothing was changed"
    )]
    SchemaVersion {
        /// The store path.
        path: PathBuf,
        /// The version the tables carry.
        found: i64,
        /// The version this build reads.
        expected: i64,
    },
    /// The store is of another profile than the one asked for (a store's profile is fixed
    /// when it is made; schema-1 stores are of the generic profile). Nothing was changed.
    #[error("store {path} is of profile {found}, not {wanted}; nothing was changed")]
    ProfileMismatch {
        /// The store path.
        path: PathBuf,
        /// The store's profile.
        found: &'static str,
        /// The profile asked for.
        wanted: &'static str,
    },
    /// Something does not fit the store's profile: a publication's consumer binding (the
    /// Memory Core profile publishes one with every document, the generic profile none) or a
    /// channel's declared watermark kind (the generic profile publishes integers only).
    /// Nothing was written.
    #[error("{0}; nothing was written")]
    Profile(String),
    /// The file cannot be read as a SQLite database. Nothing was changed.
    #[error("store {path} is unreadable ({reason}); nothing was changed")]
    Unreadable {
        /// The store path.
        path: PathBuf,
        /// The SQLite error.
        reason: String,
    },
    /// SQLite's write lock was not obtained within the configured busy timeout. (The target's
    /// lock not obtained is the file effects' `Busy`, in [`Error::File`]: of the same kind.)
    #[error("store is busy (write lock not obtained within {timeout_ms} ms); nothing was written")]
    Busy {
        /// The configured busy timeout.
        timeout_ms: u64,
    },
    /// Any other SQLite failure. The transaction was rolled back.
    #[error("store operation failed ({0}); the transaction was rolled back")]
    Sqlite(#[source] rusqlite::Error),
    /// A stored row breaks solewriter's invariants. Nothing was written.
    #[error("store holds a corrupt row ({0}); nothing was written")]
    CorruptRow(String),
    /// A lease row is inconsistent. Nothing was written.
    #[error(transparent)]
    InconsistentLease(#[from] InconsistentLease),
    /// The target has not been admitted. Nothing was written.
    #[error("target {0} is not admitted; nothing was written")]
    NotAdmitted(TargetId),
    /// A submission was rejected. Nothing was written.
    #[error("submission rejected ({0}); nothing was written")]
    Rejected(#[from] SubmissionRejected),
    /// The holder was fenced: it no longer holds the lease. `current.json` was not touched.
    #[error("publication fenced ({0}); current.json was not touched")]
    Fenced(Fenced),
    /// The lease reached its expiry before the rename: the publication aborted (no renewal).
    /// `current.json` was not touched, the temp file was removed, the lease was released
    /// (if that release fails, the error is wrapped in [`Error::ReleaseFailed`]).
    #[error("{0}; current.json was not touched")]
    LeaseExpired(DeadlinePassed),
    /// The tables of the Memory Core's JavaScript writer were not adopted: something in them
    /// is not what that writer stores, or cannot be carried over. Nothing was changed.
    #[error("adoption refused: {0}")]
    AdoptionRefused(#[from] AdoptionRefused),
    /// The fencing epoch cannot be raised any further. Nothing was written.
    #[error("fencing epoch exhausted for this target; nothing was written")]
    EpochExhausted,
    /// The document in place carries an epoch no grant of this store can have produced (a
    /// planted file, or one left by another store). Nothing was granted or written; an
    /// operator inspects and removes `current.json`.
    #[error(transparent)]
    ForeignEpoch(ForeignEpoch),
    /// `current.json` was replaced (a complete document composed from committed rows), but
    /// the conditional release did not commit: the lease stays held until it expires.
    #[error("current.json at {path} was replaced, but the lease release did not commit ({reason}); the lease expires on its own")]
    PublishedNotReleased {
        /// The published path.
        path: PathBuf,
        /// Why the release or the commit failed.
        reason: String,
    },
    /// A publication failed with `cause`, and the conditional release that every failure path
    /// performs did not commit either: the lease stays held until it expires.
    #[error("{cause}; the conditional release did not commit ({reason}), so the lease stays held until it expires")]
    ReleaseFailed {
        /// The publication's own error.
        cause: Box<Error>,
        /// Why the release or the commit failed.
        reason: String,
    },
    /// A batch of publications was refused before anything was touched (no target, or a
    /// target given twice).
    #[error(transparent)]
    Batch(#[from] BatchRefused),
    /// The OS random source failed. Nothing was written.
    #[error("random source failed ({0}); nothing was written")]
    Random(String),
    /// A bug in this library's executor of a machine (an answer to an effect the machine did
    /// not ask for): reported instead of a panic. The open transaction was rolled back.
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
    /// A document could not be composed (a channel's envelope does not fit it, or it would
    /// exceed its bound). Nothing was written.
    #[error(transparent)]
    Document(#[from] DocumentError),
    /// A file effect, or a read of a published document, failed: the file effects' own error
    /// (`FileError`), wrapped, with its own variants — the target lock busy, a file-system step
    /// (`current.json` was not touched, the temp file was removed, the lease was released), an
    /// unsafe runtime directory, a directory fsync failed after the rename (`NotDurable`: the
    /// new document is visible but may not survive power loss), no document published yet, a
    /// document unreadable or malformed. Its kind is the wrapped error's.
    #[error(transparent)]
    File(#[from] FileError),
    /// No newer document was published before the wait's timeout. Nothing was read.
    #[error("no document newer than {} at {path} within {timeout_ms} ms", after_epoch.map_or_else(|| "none".to_owned(), |e| format!("epoch {e}")))]
    WatchTimedOut {
        /// The watched `current.json`.
        path: PathBuf,
        /// The epoch the wait had to exceed (`None`: any document).
        after_epoch: Option<u64>,
        /// The wait's timeout.
        timeout_ms: u64,
    },
}

/// Result alias.
pub type Result<T> = std::result::Result<T, Error>;

pub use solewriter_core::ErrorKind;

impl Error {
    /// Who must act on this error. A [`Error::ReleaseFailed`] is of its cause's kind.
    pub fn kind(&self) -> ErrorKind {
        match self {
            // What the core's outcomes carry is of the kind the core gives it.
            Error::Fenced(fenced) => fenced.kind(),
            Error::LeaseExpired(passed) => passed.kind(),
            Error::InconsistentLease(inconsistent) => inconsistent.kind(),
            Error::ForeignEpoch(foreign) => foreign.kind(),
            Error::Document(document) => document.kind(),
            Error::File(file) => file.kind(),
            Error::Batch(refused) => solewriter_core::error_kind::Classified::kind(refused),
            Error::ReleaseFailed { cause, .. } => cause.kind(),
            // The adapter's own errors (some of them also what a core outcome becomes here:
            // `NotAdmitted`, `EpochExhausted`, `CorruptRow`; `lease::tests` checks each such
            // outcome keeps the core's kind).
            Error::NotAdmitted(_) | Error::Rejected(_) | Error::Profile(_) => ErrorKind::Input,
            Error::Busy { .. } | Error::WatchTimedOut { .. } => ErrorKind::Contention,
            Error::PublishedNotReleased { .. } => ErrorKind::PartialSuccess,
            Error::StoreMissing { .. }
            | Error::ForeignSchema { .. }
            | Error::SchemaVersion { .. }
            | Error::ProfileMismatch { .. }
            | Error::Unreadable { .. }
            | Error::Sqlite(_)
            | Error::CorruptRow(_)
            | Error::AdoptionRefused(_)
            | Error::EpochExhausted
            | Error::Random(_)
            | Error::Protocol(_) => ErrorKind::Environment,
        }
    }

    /// The same failure, reported once more (for each further target of a batch whose shared
    /// transaction it failed, or for each caller of a [`crate::projection::group`] batch that
    /// failed as a whole): a busy store, an SQLite failure, a profile mismatch and a failed
    /// random source as they were, anything else as an SQLite failure carrying its message —
    /// of the same kind for every error a store effect, a token or a composition fails with.
    pub(crate) fn again(&self) -> Error {
        use rusqlite::ffi;
        match self {
            Error::Busy { timeout_ms } => Error::Busy {
                timeout_ms: *timeout_ms,
            },
            Error::Sqlite(rusqlite::Error::SqliteFailure(code, message)) => {
                Error::Sqlite(rusqlite::Error::SqliteFailure(*code, message.clone()))
            }
            Error::Profile(message) => Error::Profile(message.clone()),
            Error::Random(message) => Error::Random(message.clone()),
            other => Error::Sqlite(rusqlite::Error::SqliteFailure(
                ffi::Error::new(ffi::SQLITE_ERROR),
                Some(other.to_string()),
            )),
        }
    }

    /// Whether the same call may succeed if made again later, unchanged: only contention.
    pub fn is_retryable(&self) -> bool {
        self.kind().is_retryable()
    }
}

/// The adapter's error is what a core outcome carries when one of its effects failed: the
/// outcome takes its kind from here.
impl solewriter_core::error_kind::Classified for Error {
    fn kind(&self) -> ErrorKind {
        Error::kind(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use solewriter_core::projection::lease::Fenced;

    /// A file effect's error is wrapped whole: its kind, its message and its source are the
    /// wrapped error's, so a host sees one kind whichever executor ran the effect.
    #[test]
    fn a_file_error_is_wrapped_with_its_kind_and_message() {
        use solewriter_files::FileError as F;
        let io = || std::io::Error::other("x");
        let files = [
            F::Busy { timeout_ms: 5 },
            F::Io {
                step: "rename",
                path: PathBuf::new(),
                source: io(),
            },
            F::UnsafeRuntimeDir {
                path: PathBuf::new(),
                reason: "a symlink",
            },
            F::NotDurable {
                path: PathBuf::new(),
                source: io(),
            },
            F::Document(DocumentError::Malformed("x".into())),
            F::NotPublished {
                path: PathBuf::new(),
            },
            F::Read {
                path: PathBuf::new(),
                source: io(),
            },
        ];
        let kinds: Vec<ErrorKind> = files.iter().map(F::kind).collect();
        assert_eq!(
            kinds,
            [
                ErrorKind::Contention,
                ErrorKind::Environment,
                ErrorKind::Environment,
                ErrorKind::PartialSuccess,
                ErrorKind::Environment,
                ErrorKind::Environment,
                ErrorKind::Environment,
            ]
        );
        for (file, kind) in files.into_iter().zip(kinds) {
            let text = file.to_string();
            let error = Error::from(file);
            assert!(matches!(error, Error::File(_)), "{text}");
            assert_eq!(error.kind(), kind, "{text}");
            assert_eq!(
                error.is_retryable(),
                kind == ErrorKind::Contention,
                "{text}"
            );
            assert_eq!(error.to_string(), text, "the wrapped error's message");
        }
    }

    /// A failure of a batch's shared transaction, reported again for each further target:
    /// a busy store stays busy, an SQLite failure keeps its code and message, a profile
    /// mismatch and a failed random source stay themselves, anything else keeps its message;
    /// the kind is the original's for every error a store effect, a token or a composition
    /// fails with.
    #[test]
    fn an_error_reported_again_keeps_its_kind_and_its_message() {
        use rusqlite::ffi;
        let sqlite = |code, message: &str| {
            Error::Sqlite(rusqlite::Error::SqliteFailure(
                ffi::Error::new(code),
                Some(message.into()),
            ))
        };
        let busy = Error::Busy { timeout_ms: 7 };
        assert!(matches!(busy.again(), Error::Busy { timeout_ms: 7 }));
        let full = sqlite(ffi::SQLITE_FULL, "disk full");
        let again = full.again();
        assert_eq!(again.to_string(), full.to_string());
        assert!(matches!(
            again,
            Error::Sqlite(rusqlite::Error::SqliteFailure(e, _)) if e.code == rusqlite::ErrorCode::DiskFull
        ));
        let corrupt = Error::CorruptRow("commit without a transaction".into());
        let again = corrupt.again();
        assert!(again.to_string().contains(&corrupt.to_string()), "{again}");
        let profile = Error::Profile("a Memory Core store publishes a binding".into());
        assert!(
            matches!(profile.again(), Error::Profile(m) if m == "a Memory Core store publishes a binding")
        );
        let random = Error::Random("no entropy".into());
        assert!(matches!(random.again(), Error::Random(m) if m == "no entropy"));
        for error in [busy, full, corrupt, profile, random] {
            assert_eq!(error.again().kind(), error.kind(), "{error}");
        }
    }

    #[test]
    fn errors_are_grouped_by_who_must_act() {
        let busy = || Error::Busy { timeout_ms: 5 };
        let cases = [
            (
                Error::NotAdmitted(TargetId::parse(&"a".repeat(64)).unwrap()),
                ErrorKind::Input,
            ),
            (busy(), ErrorKind::Contention),
            (Error::Fenced(Fenced::Released), ErrorKind::LostAuthority),
            (Error::EpochExhausted, ErrorKind::Environment),
            (
                Error::ForeignEpoch(solewriter_core::projection::lease::ForeignEpoch {
                    target_id: TargetId::parse(&"a".repeat(64)).unwrap(),
                    document_epoch: 9,
                    row_epoch: 1,
                }),
                ErrorKind::Environment,
            ),
            (
                Error::PublishedNotReleased {
                    path: PathBuf::new(),
                    reason: String::new(),
                },
                ErrorKind::PartialSuccess,
            ),
            (
                Error::ReleaseFailed {
                    cause: Box::new(busy()),
                    reason: String::new(),
                },
                ErrorKind::Contention,
            ),
        ];
        for (error, kind) in cases {
            assert_eq!(error.kind(), kind, "{error}");
            assert_eq!(
                error.is_retryable(),
                kind == ErrorKind::Contention,
                "{error}"
            );
        }
    }
}
