//! The CLI's error: one line saying what failed and what was left untouched, and a distinct
//! exit code per class of failure.
//!
//! | code | class      | meaning                                                          |
//! |------|------------|------------------------------------------------------------------|
//! | 0    | —          | success                                                          |
//! | 2    | usage      | bad command line (printed by clap)                               |
//! | 3    | config     | configuration file or flag missing, malformed or refused         |
//! | 4    | store      | store missing, existing, foreign, unreadable, busy or corrupt    |
//! | 5    | rejected   | input refused: submission, target tuple, target id, not admitted |
//! | 6    | fenced     | lease held by another holder, or the holder was fenced / expired |
//! | 7    | io         | a file-system step failed, a document is missing or torn, or the |
//! |      |            | directory given to `lock status` does not exist                  |
//! | 8    | invariant  | the demo observed a broken invariant                             |

use solewriter::Error as LibError;
use std::fmt;

/// The class of a failure; each has its own exit code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// Bad command line.
    Usage,
    /// Configuration missing or refused.
    Config,
    /// The store could not be used.
    Store,
    /// Input refused.
    Rejected,
    /// Held by another holder, or fenced.
    Fenced,
    /// File-system failure, or a missing or torn document.
    Io,
    /// The demo saw a broken invariant.
    Invariant,
}

impl Class {
    /// The process exit code of this class.
    pub fn exit_code(self) -> u8 {
        match self {
            Class::Usage => 2,
            Class::Config => 3,
            Class::Store => 4,
            Class::Rejected => 5,
            Class::Fenced => 6,
            Class::Io => 7,
            Class::Invariant => 8,
        }
    }
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

/// The class of a library error.
pub fn classify(error: &LibError) -> Class {
    match error {
        LibError::NotAdmitted(_) | LibError::Rejected(_) => Class::Rejected,
        LibError::Fenced(_) | LibError::LeaseExpired(_) => Class::Fenced,
        LibError::ReleaseFailed { cause, .. } => classify(cause),
        LibError::Io { .. }
        | LibError::UnsafeRuntimeDir { .. }
        | LibError::NotDurable { .. }
        | LibError::PublishedNotReleased { .. }
        | LibError::NotPublished { .. }
        | LibError::Read { .. }
        | LibError::Document(_) => Class::Io,
        LibError::StoreMissing { .. }
        | LibError::ForeignSchema { .. }
        | LibError::SchemaVersion { .. }
        | LibError::Unreadable { .. }
        | LibError::Busy { .. }
        | LibError::Sqlite(_)
        | LibError::CorruptRow(_)
        | LibError::InconsistentLease(_)
        | LibError::EpochExhausted
        | LibError::Random(_) => Class::Store,
        // The library's error is non-exhaustive: a variant added later is a store failure
        // until it is classified here.
        _ => Class::Store,
    }
}

impl From<LibError> for CliError {
    fn from(error: LibError) -> Self {
        CliError::new(classify(&error), error.to_string())
    }
}

/// Result alias of the CLI.
pub type CliResult<T> = Result<T, CliError>;
