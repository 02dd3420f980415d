//! The runtime root, the output paths derived from it, and the reader hooks use.
//!
//! The only path solewriter writes for a target is
//! `<runtime_root>/hook-projections/<target_id>/current.json`; the target id is 64 lowercase
//! hex characters, so no input can name or escape a path.

use crate::atomic_file::{open_regular, read_capped, DirHandle, Opened};
use crate::error::{Error, Result};
use solewriter_core::projection::target::TargetId;
use solewriter_core::projection::{DocumentError, ProjectionDocument, MAX_DOCUMENT_BYTES};
use std::path::{Path, PathBuf};

/// Directory under the runtime root holding one directory per target.
pub const PROJECTIONS_DIR: &str = "hook-projections";
/// The published file's name.
pub const CURRENT_FILE: &str = "current.json";

/// The host-owned runtime root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuntimeRoot(PathBuf);

impl RuntimeRoot {
    /// Wraps the host's runtime root directory.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        RuntimeRoot(path.into())
    }

    /// The root itself.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// `<root>/hook-projections/<target_id>`.
    pub fn target_dir(&self, target: &TargetId) -> PathBuf {
        self.0.join(PROJECTIONS_DIR).join(target.as_str())
    }

    /// `<root>/hook-projections/<target_id>/current.json`.
    pub fn current_path(&self, target: &TargetId) -> PathBuf {
        self.target_dir(target).join(CURRENT_FILE)
    }

    /// Holds the root open (`O_DIRECTORY`; a symlink at the root itself is the host's to
    /// arrange, and is followed): every later step of a run is relative to this handle.
    pub fn open(&self) -> Result<DirHandle> {
        DirHandle::open(&self.0).map_err(|source| match source.raw_os_error() {
            Some(libc::ENOTDIR) => Error::UnsafeRuntimeDir {
                path: self.0.clone(),
                reason: "runtime root is not a directory",
            },
            _ => Error::Io {
                step: "open runtime root",
                path: self.0.clone(),
                source,
            },
        })
    }
}

/// The bytes of `target`'s `current.json` under `root`, read once and bounded (at most one byte
/// past [`MAX_DOCUMENT_BYTES`]), whatever its format: `NotPublished` when there is none. It is
/// opened non-blocking, no symlink followed, and `fstat`-checked
/// ([`crate::atomic_file::open_regular`]): a FIFO, device or socket at its path is
/// [`Error::NotRegularFile`], never waited on.
pub fn read_current(root: &RuntimeRoot, target: &TargetId) -> Result<Vec<u8>> {
    let path = root.current_path(target);
    let read = match open_regular(rustix::fs::CWD, &path) {
        Ok(Opened::File(file)) => read_capped(file, MAX_DOCUMENT_BYTES),
        Ok(Opened::NotRegular(kind)) => return Err(Error::NotRegularFile { path, kind }),
        Err(e) => Err(e),
    };
    match read {
        Ok(bytes) => Ok(bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(Error::NotPublished { path }),
        Err(source) => Err(Error::Read { path, source }),
    }
}

/// Reads and validates the published document of `target`. Returns the whole document or an
/// error, never a partial document. At most one byte past [`MAX_DOCUMENT_BYTES`] is read: a
/// larger file is [`DocumentError::TooLarge`].
pub fn read_projection(root: &RuntimeRoot, target: &TargetId) -> Result<ProjectionDocument> {
    let doc = ProjectionDocument::parse(&read_current(root, target)?)?;
    if &doc.target_id != target {
        return Err(DocumentError::Malformed(format!(
            "document names target {}, expected {target}",
            doc.target_id
        ))
        .into());
    }
    Ok(doc)
}
