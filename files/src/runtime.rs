//! The runtime root, the output paths derived from it, and the reader hooks use.
//!
//! The only path solewriter writes for a target is
//! `<runtime_root>/hook-projections/<target_id>/current.json` — or, for a root made with
//! [`RuntimeRoot::projections_at`], `<projections>/<target_id>/current.json`; the target id is
//! hex digits only, so no input can name or escape a path.

use crate::atomic_file::{open_regular, read_capped, DirHandle, Opened};
use crate::error::{FileError, Result};
use solewriter_core::projection::target::TargetId;
use solewriter_core::projection::{DocumentError, ProjectionDocument, MAX_DOCUMENT_BYTES};
use std::path::{Path, PathBuf};

/// Directory under the runtime root holding one directory per target (unless the root was made
/// with [`RuntimeRoot::projections_at`]).
pub const PROJECTIONS_DIR: &str = "hook-projections";
/// The published file's name.
pub const CURRENT_FILE: &str = "current.json";

/// The host-owned runtime root, and the name of the directory in it that holds one directory per
/// target (`hook-projections` unless made with [`RuntimeRoot::projections_at`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuntimeRoot {
    root: PathBuf,
    projections: String,
}

impl RuntimeRoot {
    /// Wraps the host's runtime root directory: documents under `<root>/hook-projections/`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        RuntimeRoot {
            root: path.into(),
            projections: PROJECTIONS_DIR.to_owned(),
        }
    }

    /// The root whose documents live directly under `projections` (`<projections>/<target_id>/
    /// current.json`), a directory of any name: its parent is the runtime root (it must exist
    /// when a publication runs; `projections` itself is made, mode 0700, on first use, and must
    /// then be the effective user's and not group- or other-writable, as `hook-projections` must).
    /// `None` for a path with no parent or whose last component is not a plain UTF-8 name (`/`,
    /// `..`, `.`).
    pub fn projections_at(projections: impl AsRef<Path>) -> Option<Self> {
        let path = projections.as_ref();
        let name = match path.components().next_back()? {
            std::path::Component::Normal(name) => name.to_str()?,
            _ => return None,
        };
        let parent = path.parent()?;
        let root = if parent.as_os_str().is_empty() {
            Path::new(".")
        } else {
            parent
        };
        Some(RuntimeRoot {
            root: root.to_path_buf(),
            projections: name.to_owned(),
        })
    }

    /// The root itself.
    pub fn path(&self) -> &Path {
        &self.root
    }

    /// The name of the directory of the root that holds one directory per target.
    pub fn projections_name(&self) -> &str {
        &self.projections
    }

    /// `<root>/hook-projections/<target_id>` (the root's projections directory).
    pub fn target_dir(&self, target: &TargetId) -> PathBuf {
        self.root.join(&self.projections).join(target.as_str())
    }

    /// `<root>/hook-projections/<target_id>/current.json`.
    pub fn current_path(&self, target: &TargetId) -> PathBuf {
        self.target_dir(target).join(CURRENT_FILE)
    }

    /// Holds the root open (`O_DIRECTORY`; a symlink at the root itself is the host's to
    /// arrange, and is followed): every later step of a run is relative to this handle.
    pub fn open(&self) -> Result<DirHandle> {
        DirHandle::open(&self.root).map_err(|source| match source.raw_os_error() {
            Some(libc::ENOTDIR) => FileError::UnsafeRuntimeDir {
                path: self.root.clone(),
                reason: "runtime root is not a directory",
            },
            _ => FileError::Io {
                step: "open runtime root",
                path: self.root.clone(),
                source,
            },
        })
    }
}

/// The bytes of `target`'s `current.json` under `root`, read once and bounded (at most one byte
/// past [`MAX_DOCUMENT_BYTES`]), whatever its format: `NotPublished` when there is none. It is
/// opened non-blocking, no symlink followed, and `fstat`-checked
/// ([`crate::atomic_file::open_regular`]): a FIFO, device or socket at its path is
/// [`FileError::NotRegularFile`], never waited on.
pub fn read_current(root: &RuntimeRoot, target: &TargetId) -> Result<Vec<u8>> {
    let path = root.current_path(target);
    let read = match open_regular(rustix::fs::CWD, &path) {
        Ok(Opened::File(file)) => read_capped(file, MAX_DOCUMENT_BYTES),
        Ok(Opened::NotRegular(kind)) => return Err(FileError::NotRegularFile { path, kind }),
        Err(e) => Err(e),
    };
    match read {
        Ok(bytes) => Ok(bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(FileError::NotPublished { path }),
        Err(source) => Err(FileError::Read { path, source }),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_projections_directory_is_split_into_its_parent_and_its_name() {
        let root = RuntimeRoot::projections_at("/srv/mc/projections").unwrap();
        assert_eq!(root.path(), Path::new("/srv/mc"));
        assert_eq!(root.projections_name(), "projections");
        let relative = RuntimeRoot::projections_at("projections").unwrap();
        assert_eq!(relative.path(), Path::new("."));
        for refused in ["/", "", "a/..", "."] {
            assert_eq!(RuntimeRoot::projections_at(refused), None, "{refused}");
        }
        assert_eq!(
            RuntimeRoot::new("/srv/mc").projections_name(),
            PROJECTIONS_DIR
        );
    }
}
