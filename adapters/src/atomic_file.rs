//! The atomic publisher's file-system steps: a private directory, a unique temp sibling
//! (created with `create_new`, mode 0600, written and fsynced), an atomic rename over the
//! destination, and an fsync of the directory.
//!
//! A reader of the destination sees the old complete file or the new complete file, never a
//! mix: the new bytes are complete and durable in the temp file before the rename, and
//! rename(2) replaces the directory entry atomically. Temp siblings share one prefix so that
//! a later publication (holding the serialized transaction, so no temp can be live) removes
//! the ones a crash left behind.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Mode of every directory solewriter creates.
pub const DIR_MODE: u32 = 0o700;
/// Mode of every file solewriter creates.
pub const FILE_MODE: u32 = 0o600;

/// Why a directory cannot be used.
#[derive(Debug)]
pub enum DirError {
    /// It exists but is a symlink or not a directory.
    Unsafe(&'static str),
    /// The OS refused.
    Io(io::Error),
}

/// Ensures `path` is a real directory (not a symlink), creating it with mode 0700 if absent.
/// The parent must already be a real directory.
pub fn ensure_private_dir(path: &Path) -> Result<(), DirError> {
    match path.symlink_metadata() {
        Ok(meta) if meta.file_type().is_symlink() => Err(DirError::Unsafe("is a symlink")),
        Ok(meta) if !meta.is_dir() => Err(DirError::Unsafe("is not a directory")),
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            match DirBuilder::new().mode(DIR_MODE).create(path) {
                Ok(()) => Ok(()),
                // Created concurrently by another writer: check what is there now.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => ensure_private_dir(path),
                Err(e) => Err(DirError::Io(e)),
            }
        }
        Err(e) => Err(DirError::Io(e)),
    }
}

fn temp_prefix(file_name: &str) -> String {
    format!(".{file_name}.tmp-")
}

/// Removes every temp sibling of `file_name` in `dir` (left by a crashed writer). Only call
/// while holding the exclusion that every temp creator also holds. Returns how many.
pub fn remove_orphans(dir: &Path, file_name: &str) -> io::Result<usize> {
    let prefix = temp_prefix(file_name);
    let mut removed = 0;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry
            .file_name()
            .to_str()
            .is_some_and(|n| n.starts_with(&prefix))
        {
            std::fs::remove_file(entry.path())?;
            removed += 1;
        }
    }
    Ok(removed)
}

/// A written, fsynced temp sibling. Dropped without [`TempFile::rename_into_place`], it is
/// removed.
#[derive(Debug)]
pub struct TempFile {
    path: PathBuf,
    dest: PathBuf,
    live: bool,
}

impl TempFile {
    /// Creates a unique temp sibling of `dir/file_name` (never overwriting anything), writes
    /// `bytes` and fsyncs it. On failure the temp file is removed.
    pub fn write(dir: &Path, file_name: &str, bytes: &[u8]) -> io::Result<Self> {
        let mut nonce = [0u8; 8];
        getrandom::fill(&mut nonce).map_err(|e| io::Error::other(e.to_string()))?;
        let suffix: String = nonce.iter().map(|b| format!("{b:02x}")).collect();
        let path = dir.join(format!("{}{suffix}", temp_prefix(file_name)));
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(FILE_MODE)
            .open(&path)?;
        let temp = TempFile {
            path,
            dest: dir.join(file_name),
            live: true,
        };
        file.write_all(bytes)?;
        file.sync_all()?;
        Ok(temp)
    }

    /// The temp file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Atomically renames the temp file over the destination. The caller then fsyncs the
    /// directory ([`sync_dir`]) to make the rename durable.
    pub fn rename_into_place(mut self) -> io::Result<PathBuf> {
        std::fs::rename(&self.path, &self.dest)?;
        self.live = false;
        Ok(std::mem::take(&mut self.dest))
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if self.live {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Fsyncs a directory, making renames and creations inside it durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn write_rename_and_orphans() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("d");
        ensure_private_dir(&sub).unwrap();
        assert_eq!(
            sub.metadata().unwrap().permissions().mode() & 0o777,
            DIR_MODE
        );
        let t = TempFile::write(&sub, "current.json", b"one").unwrap();
        assert_eq!(
            t.path().metadata().unwrap().permissions().mode() & 0o777,
            FILE_MODE
        );
        let dest = t.rename_into_place().unwrap();
        sync_dir(&sub).unwrap();
        assert_eq!(std::fs::read(&dest).unwrap(), b"one");
        let dropped = TempFile::write(&sub, "current.json", b"two").unwrap();
        let dropped_path = dropped.path().to_owned();
        drop(dropped);
        assert!(
            !dropped_path.exists(),
            "an unrenamed temp is removed on drop"
        );
        std::fs::write(sub.join(".current.json.tmp-crashed"), b"x").unwrap();
        std::fs::write(sub.join("unrelated"), b"x").unwrap();
        assert_eq!(remove_orphans(&sub, "current.json").unwrap(), 1);
        assert!(sub.join("unrelated").exists());
        assert_eq!(std::fs::read(&dest).unwrap(), b"one");
    }

    #[test]
    fn symlinks_and_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        std::fs::create_dir(&real).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        assert!(matches!(
            ensure_private_dir(&link),
            Err(DirError::Unsafe("is a symlink"))
        ));
        let file = dir.path().join("file");
        std::fs::write(&file, b"").unwrap();
        assert!(matches!(
            ensure_private_dir(&file),
            Err(DirError::Unsafe("is not a directory"))
        ));
    }
}
