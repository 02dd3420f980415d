//! The adapters' error type. Every variant says what failed and what was left untouched.

use solewriter_core::projection::adoption::AdoptionRefused;
use solewriter_core::projection::lease::{DeadlinePassed, Fenced, InconsistentLease};
use solewriter_core::projection::machine::ProtocolError;
use solewriter_core::projection::target::TargetId;
use solewriter_core::projection::watermark::SubmissionRejected;
use solewriter_core::projection::DocumentError;
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
    /// SQLite's write lock, or the target's lock, was not obtained within the configured busy
    /// timeout.
    #[error("store is busy (its write lock or the target's lock not obtained within {timeout_ms} ms); nothing was written")]
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
    /// A file-system step of publication failed. `current.json` was not touched, the temp
    /// file was removed, and the lease was released (if that release fails, the error is
    /// wrapped in [`Error::ReleaseFailed`]).
    #[error("publication failed at `{step}` on {path}: {source}; current.json was not touched")]
    Io {
        /// The publication step.
        step: &'static str,
        /// The path involved.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The runtime directory is not a plain directory (a symlink, a file). Nothing was written.
    #[error("runtime directory {path} is unsafe ({reason}); nothing was written")]
    UnsafeRuntimeDir {
        /// The offending path.
        path: PathBuf,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// `current.json` was replaced and readers see the new document, but the directory fsync
    /// failed, so the replacement may not survive a power loss (the previous complete
    /// document would reappear). The lease was released (if that release fails, the error is
    /// wrapped in [`Error::ReleaseFailed`]); publish again to make it durable.
    #[error("current.json at {path} was replaced but its directory fsync failed ({source}); the new document may not survive power loss")]
    NotDurable {
        /// The published path.
        path: PathBuf,
        /// The fsync error.
        #[source]
        source: std::io::Error,
    },
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
    /// The OS random source failed. Nothing was written.
    #[error("random source failed ({0}); nothing was written")]
    Random(String),
    /// A bug in this library's executor of a machine (an answer to an effect the machine did
    /// not ask for): reported instead of a panic. The open transaction was rolled back.
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
    /// A document could not be composed or read.
    #[error(transparent)]
    Document(#[from] DocumentError),
    /// No projection has been published for the target yet.
    #[error("no projection published at {path}")]
    NotPublished {
        /// The expected path.
        path: PathBuf,
    },
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
    /// Reading a published projection failed.
    #[error("reading {path} failed: {source}")]
    Read {
        /// The path.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

impl From<solewriter_files::Error> for Error {
    /// Each file error is the adapters' error of the same name.
    fn from(e: solewriter_files::Error) -> Self {
        use solewriter_files::Error as F;
        match e {
            F::Busy { timeout_ms } => Error::Busy { timeout_ms },
            F::Io { step, path, source } => Error::Io { step, path, source },
            F::UnsafeRuntimeDir { path, reason } => Error::UnsafeRuntimeDir { path, reason },
            F::NotDurable { path, source } => Error::NotDurable { path, source },
            F::Document(e) => Error::Document(e),
            F::NotPublished { path } => Error::NotPublished { path },
            F::Read { path, source } => Error::Read { path, source },
        }
    }
}

/// Result alias.
pub type Result<T> = std::result::Result<T, Error>;

pub use solewriter_core::ErrorKind;

impl Error {
    /// Who must act on this error. A [`Error::ReleaseFailed`] is of its cause's kind.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::NotAdmitted(_) | Error::Rejected(_) | Error::Profile(_) => ErrorKind::Input,
            Error::Busy { .. } | Error::WatchTimedOut { .. } => ErrorKind::Contention,
            Error::Fenced(_) | Error::LeaseExpired(_) => ErrorKind::LostAuthority,
            Error::NotDurable { .. } | Error::PublishedNotReleased { .. } => {
                ErrorKind::PartialSuccess
            }
            Error::ReleaseFailed { cause, .. } => cause.kind(),
            Error::StoreMissing { .. }
            | Error::ForeignSchema { .. }
            | Error::SchemaVersion { .. }
            | Error::ProfileMismatch { .. }
            | Error::Unreadable { .. }
            | Error::Sqlite(_)
            | Error::CorruptRow(_)
            | Error::InconsistentLease(_)
            | Error::AdoptionRefused(_)
            | Error::EpochExhausted
            | Error::Io { .. }
            | Error::UnsafeRuntimeDir { .. }
            | Error::Random(_)
            | Error::Protocol(_)
            | Error::Document(_)
            | Error::NotPublished { .. }
            | Error::Read { .. } => ErrorKind::Environment,
        }
    }

    /// Whether the same call may succeed if made again later, unchanged: only contention.
    pub fn is_retryable(&self) -> bool {
        self.kind().is_retryable()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use solewriter_core::projection::lease::Fenced;

    /// A file effect's error is the adapters' error of the same name and of the same kind, so
    /// a host sees one kind whichever executor ran the effect.
    #[test]
    fn a_file_error_keeps_its_kind_in_the_adapters_error() {
        use solewriter_files::Error as F;
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
        let name = |debug: String| debug.split([' ', '(', '{']).next().unwrap().to_owned();
        for (file, kind) in files.into_iter().zip(kinds) {
            let (text, named) = (file.to_string(), name(format!("{file:?}")));
            let error = Error::from(file);
            assert_eq!(error.kind(), kind, "{text}");
            assert_eq!(name(format!("{error:?}")), named, "the same name");
            if named != "Busy" {
                assert_eq!(error.to_string(), text, "the same message");
            }
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
