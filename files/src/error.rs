//! The file effects' error type. The adapters' error wraps it whole (`FileError::File`), and the
//! Node addon gives each variant its own code, so a host sees the same error whichever
//! executor ran the effect.

use solewriter_core::projection::DocumentError;
use solewriter_core::ErrorKind;
use std::path::PathBuf;

/// What a file effect or a read of a published document failed with.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// The target lock was not obtained within the busy timeout. Nothing was touched.
    #[error(
        "store is busy (target lock not obtained within {timeout_ms} ms); nothing was written"
    )]
    Busy {
        /// The busy timeout.
        timeout_ms: u64,
    },
    /// A file-system step failed. `current.json` was not touched.
    #[error("publication failed at `{step}` on {path}: {source}; current.json was not touched")]
    Io {
        /// The step.
        step: &'static str,
        /// The path involved.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A runtime directory is not a plain directory (a symlink, a file), or (`hook-projections`,
    /// a target directory) is not owned by this user or is writable by group or others.
    /// Nothing was written.
    #[error("runtime directory {path} is unsafe ({reason}); nothing was written")]
    UnsafeRuntimeDir {
        /// The offending path.
        path: PathBuf,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// Something that is not a regular file (a FIFO, a device, a socket) is where a document
    /// is read. It was neither read nor waited on; nothing was written.
    #[error("{path} is a {kind}, not a regular file; it was not read and nothing was written")]
    NotRegularFile {
        /// The offending path.
        path: PathBuf,
        /// What it is instead.
        kind: &'static str,
    },
    /// `current.json` was replaced but its directory fsync failed: the replacement may not
    /// survive a power loss.
    #[error("current.json at {path} was replaced but its directory fsync failed ({source}); the new document may not survive power loss")]
    NotDurable {
        /// The published path.
        path: PathBuf,
        /// The fsync error.
        #[source]
        source: std::io::Error,
    },
    /// A document could not be read as a projection.
    #[error(transparent)]
    Document(#[from] DocumentError),
    /// No projection has been published for the target yet.
    #[error("no projection published at {path}")]
    NotPublished {
        /// The expected path.
        path: PathBuf,
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

impl FileError {
    /// Who must act on this error: the kind the adapters' error of the same name has.
    pub fn kind(&self) -> ErrorKind {
        match self {
            FileError::Busy { .. } => ErrorKind::Contention,
            FileError::NotDurable { .. } => ErrorKind::PartialSuccess,
            FileError::Document(document) => document.kind(),
            FileError::Io { .. }
            | FileError::UnsafeRuntimeDir { .. }
            | FileError::NotRegularFile { .. }
            | FileError::NotPublished { .. }
            | FileError::Read { .. } => ErrorKind::Environment,
        }
    }

    /// Whether the same call may succeed if made again later, unchanged: only contention.
    pub fn is_retryable(&self) -> bool {
        self.kind().is_retryable()
    }
}

/// Result alias.
pub(crate) type Result<T> = std::result::Result<T, FileError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_busy_target_lock_is_retryable() {
        let busy = FileError::Busy { timeout_ms: 5 };
        assert_eq!(busy.kind(), ErrorKind::Contention);
        assert!(busy.is_retryable());
        let gone = FileError::NotPublished {
            path: PathBuf::new(),
        };
        assert_eq!(gone.kind(), ErrorKind::Environment);
        assert!(!gone.is_retryable());
    }
}
