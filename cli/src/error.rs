//! The CLI's error: one line saying what failed and what was left untouched, and the exit code
//! of its [`Class`] — what a script must tell apart, designed once here and printed by
//! `--help` ([`exit_code_table`]) and docs/cli.md.
//!
//! Library errors are classed by who must act ([`solewriter::ErrorKind`]), in one table
//! ([`class_of_kind`]): input refused, contention (retry), lost authority, partial success;
//! the environment is split into the store, a missing or corrupt published document, and the
//! other file-system failures. The few errors a script tells apart from their kind's class (a
//! refused lock clear, a ledger snapshot past its bound, ...) are listed beside their product
//! ([`classify_lock`], [`classify_ledger`]); no other module classes an error.

use solewriter::ledger::{LedgerError, SnapshotState};
use solewriter::project_lock::LockError;
use solewriter::{Error as LibError, ErrorKind, FileError};
use std::fmt;

/// The class of a failure; each has its own exit code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// Bad command line.
    Usage,
    /// Configuration missing or refused.
    Config,
    /// The store cannot be used.
    Store,
    /// Input refused (for `ledger build`: a history past the snapshot bound).
    Rejected,
    /// Held by another live holder (a lease, the project lock), the store is busy, or the
    /// repository moved under a ledger build: the same command may succeed later.
    Retry,
    /// A file-system, OS or `git` step failed.
    Io,
    /// The demo (or a ledger command) saw a broken invariant.
    Invariant,
    /// The holder's authority is gone (fenced, or its lease expired before the rename; a
    /// ledger build that lost the project lock before its rename).
    LostAuthority,
    /// No document has been published for the target yet.
    NotPublished,
    /// The published document is torn, malformed, foreign or too large; or the ledger
    /// snapshot holds a fact that `git` now contradicts, or one not of its kind.
    CorruptDocument,
    /// A submission at the stored watermark with other content: the channel is degraded.
    Conflict,
    /// Part of the work took effect (`current.json` or the ledger snapshot replaced, but not
    /// durably or not released).
    Partial,
    /// `lock clear` refused: the kernel lock is held, the owner is known, or another nonce.
    Refused,
}

impl Class {
    /// Every class, in exit-code order.
    pub const ALL: [Class; 13] = [
        Class::Usage,
        Class::Config,
        Class::Store,
        Class::Rejected,
        Class::Retry,
        Class::Io,
        Class::Invariant,
        Class::LostAuthority,
        Class::NotPublished,
        Class::CorruptDocument,
        Class::Conflict,
        Class::Partial,
        Class::Refused,
    ];

    /// The process exit code of this class.
    pub fn exit_code(self) -> u8 {
        match self {
            Class::Usage => 2,
            Class::Config => 3,
            Class::Store => 4,
            Class::Rejected => 5,
            Class::Retry => 6,
            Class::Io => 7,
            Class::Invariant => 8,
            Class::LostAuthority => 9,
            Class::NotPublished => 10,
            Class::CorruptDocument => 11,
            Class::Conflict => 12,
            Class::Partial => 13,
            Class::Refused => 14,
        }
    }

    /// What the class means to a script, one line.
    pub fn meaning(self) -> &'static str {
        match self {
            Class::Usage => {
                "usage: bad command line (unknown command or flag, bad or missing value)"
            }
            Class::Config => {
                "config: configuration file, key or flag missing, malformed or refused"
            }
            Class::Store => {
                "store: missing, foreign, not WAL, wrong version, unreadable or corrupt"
            }
            Class::Rejected => {
                "rejected: input refused (submission, tuple, name, id, unadmitted target, nonce, a ledger past its bound)"
            }
            Class::Retry => {
                "retry later: the lease or project lock is held by a live holder, the store is busy, or the repository moved"
            }
            Class::Io => {
                "io: a file-system, OS or git step failed (nothing, or what the message says, was done)"
            }
            Class::Invariant => "invariant: the demo (or a ledger command) saw a broken check",
            Class::LostAuthority => {
                "lost authority: fenced, the lease expired, or the project lock was lost, before the rename"
            }
            Class::NotPublished => "not published: no current.json for the target yet",
            Class::CorruptDocument => {
                "corrupt document: current.json torn, malformed, foreign or too large; a ledger fact contradicted or malformed"
            }
            Class::Conflict => {
                "conflict: same watermark, other content; channel degraded, envelope discarded"
            }
            Class::Partial => {
                "partial: current.json or the ledger replaced, but not durably or the lease or lock not released"
            }
            Class::Refused => {
                "refused: lock clear — kernel lock held, owner known, or another nonce; nothing removed"
            }
        }
    }
}

/// The exit-code table printed by `--help`.
pub fn exit_code_table() -> String {
    let mut table = String::from("Exit codes:\n   0  success (a replayed submission included)\n");
    for class in Class::ALL {
        table.push_str(&format!(
            "  {:>2}  {}\n",
            class.exit_code(),
            class.meaning()
        ));
    }
    table.push_str("Every failure prints one line on stderr: `solewriter: error: <message>`.");
    table
}

/// A failure of a CLI command: its class and its one-line message.
#[derive(Debug)]
pub struct CliError {
    /// The class (exit code).
    pub class: Class,
    /// What failed and what was left untouched.
    pub message: String,
}

impl CliError {
    /// An error of `class` with `message`.
    pub fn new(class: Class, message: impl Into<String>) -> Self {
        CliError {
            class,
            message: message.into(),
        }
    }

    /// A configuration error.
    pub fn config(message: impl Into<String>) -> Self {
        Self::new(Class::Config, message)
    }

    /// A usage error.
    pub fn usage(message: impl Into<String>) -> Self {
        Self::new(Class::Usage, message)
    }

    /// An I/O error during `step` on `path`.
    pub fn io(step: &str, path: &std::path::Path, source: &std::io::Error) -> Self {
        Self::new(
            Class::Io,
            format!("{step} {} failed: {source}", path.display()),
        )
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// The exit-code table of the library's errors, keyed by who must act: the class of each
/// kind, `None` for the environment's, which is split by what a script does next (each
/// product's `classify` below). A product's error that a script tells apart from its kind's
/// class is listed there, beside its product.
pub fn class_of_kind(kind: ErrorKind) -> Option<Class> {
    match kind {
        ErrorKind::Input => Some(Class::Rejected),
        ErrorKind::Contention => Some(Class::Retry),
        ErrorKind::LostAuthority => Some(Class::LostAuthority),
        ErrorKind::PartialSuccess => Some(Class::Partial),
        // `ErrorKind` is non-exhaustive: a kind added later is an environment failure until
        // it is classed here.
        _ => None,
    }
}

/// The class of a library error: its kind's ([`class_of_kind`]), the environment split by
/// what a script does next.
pub fn classify(error: &LibError) -> Class {
    class_of_kind(error.kind()).unwrap_or_else(|| match error {
        LibError::ReleaseFailed { cause, .. } => classify(cause),
        LibError::Protocol(_) => Class::Invariant,
        LibError::File(FileError::NotPublished { .. }) => Class::NotPublished,
        LibError::Document(_) | LibError::File(FileError::Document(_)) => Class::CorruptDocument,
        // A document in the runtime directory that no grant of this store produced.
        LibError::File(_) | LibError::Random(_) | LibError::ForeignEpoch(_) => Class::Io,
        _ => Class::Store,
    })
}

/// The class of a project lock error: a refused clear is a class of its own, a lock found
/// lost is the file system's (as the lock commands meet it: a record removed or replaced
/// under them), a bug of the lock's executor is a broken invariant; otherwise its kind's
/// ([`class_of_kind`]), the environment's the file system's.
pub fn classify_lock(error: &LockError) -> Class {
    match error {
        LockError::ClearRefused { .. } => Class::Refused,
        LockError::Lost { .. } => Class::Io,
        LockError::Protocol(_) => Class::Invariant,
        other => class_of_kind(other.kind()).unwrap_or(Class::Io),
    }
}

/// The class of a ledger error (the table in `ledger_error` says why each): a lock error is
/// classed as the lock commands class it; a lock lost after the snapshot was replaced is
/// partial success, a snapshot past its bound the caller's input to fix (ask less), a nested
/// demand a broken invariant, a fact contradicted or not of its kind a corrupt document;
/// otherwise its kind's ([`class_of_kind`]), the environment's the file system's.
pub fn classify_ledger(error: &LedgerError) -> Class {
    match error {
        LedgerError::Lock(lock) => classify_lock(lock),
        LedgerError::LockLost {
            snapshot: SnapshotState::Replaced,
            ..
        } => Class::Partial,
        LedgerError::SnapshotTooLarge(_) => Class::Rejected,
        LedgerError::NestedInterpretation { .. } => Class::Invariant,
        LedgerError::Conflict(_) | LedgerError::Consumer(_) => Class::CorruptDocument,
        other => class_of_kind(other.kind()).unwrap_or(Class::Io),
    }
}

impl From<LibError> for CliError {
    fn from(error: LibError) -> Self {
        CliError::new(classify(&error), error.to_string())
    }
}

/// Result alias of the CLI.
pub type CliResult<T> = Result<T, CliError>;

#[cfg(test)]
mod tests {
    use super::*;

    /// The environment's errors the process tests cannot provoke — a file step's failure and
    /// the random source's — are I/O failures (exit 7), not a broken store (4).
    #[test]
    fn file_and_random_failures_are_io() {
        let io = LibError::File(FileError::Io {
            step: "write temp file",
            path: "runtime/x".into(),
            source: std::io::Error::other("disk gone"),
        });
        assert_eq!(classify(&io), Class::Io);
        assert_eq!(classify(&LibError::Random("no entropy".into())), Class::Io);
    }

    /// The project lock's and the ledger's errors keep their exit codes: their kind's class,
    /// but for the ones a script tells apart.
    #[test]
    fn lock_and_ledger_errors_keep_their_codes() {
        use solewriter::project_lock::ClearRefused;
        let io = || std::io::Error::other("disk gone");
        let busy = || LockError::Busy {
            lock: "project.lock".into(),
            owner: None,
        };
        let lost = || LockError::Lost {
            lock: "project.lock".into(),
            reason: "the record is gone".into(),
        };
        let locks = [
            (busy(), 6),
            (lost(), 7),
            (
                LockError::ClearRefused {
                    lock: "project.lock".into(),
                    refused: Box::new(ClearRefused::Held(None)),
                },
                14,
            ),
            (
                LockError::NoDirectory {
                    dir: "project".into(),
                },
                7,
            ),
            (LockError::Random("no entropy".into()), 7),
        ];
        for (error, code) in locks {
            assert_eq!(classify_lock(&error).exit_code(), code, "{error}");
        }
        let ledgers = [
            (LedgerError::Lock(busy()), 6),
            (
                LedgerError::LockLost {
                    snapshot: SnapshotState::Untouched,
                    source: lost(),
                },
                9,
            ),
            (
                LedgerError::LockLost {
                    snapshot: SnapshotState::Replaced,
                    source: lost(),
                },
                13,
            ),
            (
                LedgerError::Release {
                    snapshot: SnapshotState::Untouched,
                    source: lost(),
                },
                7,
            ),
            (
                LedgerError::Release {
                    snapshot: SnapshotState::Replaced,
                    source: lost(),
                },
                13,
            ),
            (LedgerError::Consumer("not a fact".into()), 11),
            (
                LedgerError::Io {
                    step: "rename",
                    path: "ledger".into(),
                    source: io(),
                },
                7,
            ),
            (
                LedgerError::NotDurable {
                    path: "ledger".into(),
                    source: io(),
                },
                13,
            ),
        ];
        for (error, code) in ledgers {
            assert_eq!(classify_ledger(&error).exit_code(), code, "{error}");
        }
    }
}
