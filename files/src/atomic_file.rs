//! The atomic publisher's file-system steps: a private directory (its creation made durable
//! by an fsync of the parent), a unique temp sibling (created with `create_new`, mode 0600,
//! written and fsynced), an atomic rename over the destination, and an fsync of the
//! directory. Every step goes through a [`FileSystem`]: [`RealFs`] in production, a
//! fault-injecting or recording one in tests.
//!
//! A reader of the destination sees the old complete file or the new complete file, never a
//! mix: the new bytes are complete and durable in the temp file before the rename, and
//! rename(2) replaces the directory entry atomically. Temp siblings share one prefix so that
//! a later publication (holding the serialized transaction, so no temp can be live) removes
//! the ones a crash left behind. `models/src/crash.rs` checks this order against every crash
//! outcome.

use std::fs::{DirBuilder, File, OpenOptions, TryLockError};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Reads `source` to its end if it holds at most `max` bytes; otherwise returns its first
/// `max + 1` bytes, so the caller refuses it without a huge or endless input being read whole.
pub fn read_capped(source: impl Read, max: usize) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    source
        .take(u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1))
        .read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// [`read_capped`] of the file `path`. A symlink at `path` is not followed: it fails
/// (`ELOOP`), so a planted link can neither lead a reader out of the directory it trusts nor
/// pass for an absent file.
pub fn read_bounded(path: &Path, max: usize) -> io::Result<Vec<u8>> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    read_capped(file, max)
}

/// Mode of every directory solewriter creates.
pub const DIR_MODE: u32 = 0o700;
/// Mode of every file solewriter creates.
pub const FILE_MODE: u32 = 0o600;

/// The operating-system calls of the atomic publisher and the project lock: the file system
/// (with its kernel locks), and the random source of temp-file names, holder tokens and lock
/// nonces. Passed as `&dyn FileSystem`: one
/// indirect call per operation is nothing next to the system call (an fsync costs
/// milliseconds), and it keeps the store and lease types free of a type parameter.
pub trait FileSystem: Send + Sync {
    /// Creates the directory `path` (mode 0700); fails if it exists.
    fn create_dir(&self, path: &Path) -> io::Result<()>;
    /// Creates the file `path` exclusively (`O_CREAT | O_EXCL`, mode 0600).
    fn create_new(&self, path: &Path) -> io::Result<File>;
    /// Writes all of `bytes` to `file`.
    fn write_all(&self, file: &mut File, bytes: &[u8]) -> io::Result<()>;
    /// Fsyncs a file's data and metadata.
    fn sync_file(&self, file: &File) -> io::Result<()>;
    /// Atomically renames `from` over `to` (same directory).
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Fsyncs a directory, making creations, renames and removals inside it durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// Removes the file `path`.
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    /// Gives the file `from` a second name `to` (`link(2)`); fails if `to` exists.
    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Takes `file`'s kernel lock (`flock(LOCK_EX | LOCK_NB)`) without blocking.
    fn try_lock(&self, file: &File) -> Result<(), TryLockError> {
        file.try_lock()
    }
    /// Fills `bytes` from the operating system's random source (temp-file names, holder
    /// tokens, lock nonces). Part of this seam so that a test can make it fail.
    fn fill_random(&self, bytes: &mut [u8]) -> io::Result<()> {
        getrandom::fill(bytes).map_err(|e| io::Error::other(e.to_string()))
    }
}

/// The operating system's file system.
#[derive(Clone, Copy, Debug)]
pub struct RealFs;

impl FileSystem for RealFs {
    fn create_dir(&self, path: &Path) -> io::Result<()> {
        DirBuilder::new().mode(DIR_MODE).create(path)
    }

    fn create_new(&self, path: &Path) -> io::Result<File> {
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(FILE_MODE)
            .open(path)
    }

    fn write_all(&self, file: &mut File, bytes: &[u8]) -> io::Result<()> {
        file.write_all(bytes)
    }

    fn sync_file(&self, file: &File) -> io::Result<()> {
        file.sync_all()
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::hard_link(from, to)
    }
}

/// Why a directory cannot be used.
#[derive(Debug)]
pub enum DirError {
    /// It exists but is a symlink or not a directory.
    Unsafe(&'static str),
    /// The OS refused.
    Io(io::Error),
}

/// Ensures `path` is a real directory (not a symlink), creating it with mode 0700 if absent
/// and then fsyncing the parent, so that the new directory's entry survives a power loss
/// (without it, a file published inside could vanish with the directory). The parent must
/// already be a real directory.
///
/// A directory found already there is not fsynced in its parent: callers whose durability
/// depends on an earlier creation (which may have failed before its fsync) use
/// [`make_private_dir`] and fsync the parent until they have seen one success.
pub fn ensure_private_dir(fs: &dyn FileSystem, path: &Path) -> Result<(), DirError> {
    if make_private_dir(fs, path)? {
        fs.sync_dir(parent_of(path)).map_err(DirError::Io)?;
    }
    Ok(())
}

/// Ensures `path` is a real directory (not a symlink), creating it with mode 0700 if absent.
/// Returns whether this call created it. Nothing is fsynced.
pub fn make_private_dir(fs: &dyn FileSystem, path: &Path) -> Result<bool, DirError> {
    match path.symlink_metadata() {
        Ok(meta) if meta.file_type().is_symlink() => Err(DirError::Unsafe("is a symlink")),
        Ok(meta) if !meta.is_dir() => Err(DirError::Unsafe("is not a directory")),
        Ok(_) => Ok(false),
        Err(e) if e.kind() == io::ErrorKind::NotFound => match fs.create_dir(path) {
            Ok(()) => Ok(true),
            // Created concurrently by another writer: check what is there now.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => make_private_dir(fs, path),
            Err(e) => Err(DirError::Io(e)),
        },
        Err(e) => Err(DirError::Io(e)),
    }
}

/// The directory containing `path` (`.` for a bare name).
pub fn parent_of(path: &Path) -> &Path {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

fn temp_prefix(file_name: &str) -> String {
    format!(".{file_name}.tmp-")
}

/// Removes every temp sibling of `file_name` in `dir` (left by a crashed, frozen or superseded
/// writer). A temp removed meanwhile by someone else (its writer, another sweep) is not an
/// error. Returns how many this call removed.
pub fn remove_orphans(fs: &dyn FileSystem, dir: &Path, file_name: &str) -> io::Result<usize> {
    let prefix = temp_prefix(file_name);
    let mut removed = 0;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry
            .file_name()
            .to_str()
            .is_some_and(|n| n.starts_with(&prefix))
        {
            match fs.remove_file(&entry.path()) {
                Ok(()) => removed += 1,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(removed)
}

/// A written, fsynced temp sibling. Dropped without [`TempFile::rename_into_place`], it is
/// removed.
pub struct TempFile<'f> {
    fs: &'f dyn FileSystem,
    path: PathBuf,
    dest: PathBuf,
    live: bool,
}

impl std::fmt::Debug for TempFile<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TempFile")
            .field("path", &self.path)
            .field("live", &self.live)
            .finish_non_exhaustive()
    }
}

impl<'f> TempFile<'f> {
    /// Creates a unique temp sibling of `dir/file_name` (never overwriting anything), writes
    /// `bytes` and fsyncs it. On failure the temp file is removed.
    pub fn write(
        fs: &'f dyn FileSystem,
        dir: &Path,
        file_name: &str,
        bytes: &[u8],
    ) -> io::Result<Self> {
        let mut nonce = [0u8; 8];
        fs.fill_random(&mut nonce)?;
        let suffix = solewriter_core::hex::encode(&nonce);
        let path = dir.join(format!("{}{suffix}", temp_prefix(file_name)));
        let mut file = fs.create_new(&path)?;
        let temp = TempFile {
            fs,
            path,
            dest: dir.join(file_name),
            live: true,
        };
        fs.write_all(&mut file, bytes)?;
        fs.sync_file(&file)?;
        Ok(temp)
    }

    /// The temp file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Atomically renames the temp file over the destination. The caller then fsyncs the
    /// directory ([`FileSystem::sync_dir`]) to make the rename durable.
    pub fn rename_into_place(mut self) -> io::Result<PathBuf> {
        self.fs.rename(&self.path, &self.dest)?;
        self.live = false;
        Ok(std::mem::take(&mut self.dest))
    }
}

impl Drop for TempFile<'_> {
    fn drop(&mut self) {
        if self.live {
            let _ = self.fs.remove_file(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn write_rename_and_orphans() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("d");
        ensure_private_dir(&RealFs, &sub).unwrap();
        assert_eq!(
            sub.metadata().unwrap().permissions().mode() & 0o777,
            DIR_MODE
        );
        let t = TempFile::write(&RealFs, &sub, "current.json", b"one").unwrap();
        assert_eq!(
            t.path().metadata().unwrap().permissions().mode() & 0o777,
            FILE_MODE
        );
        let dest = t.rename_into_place().unwrap();
        RealFs.sync_dir(&sub).unwrap();
        assert_eq!(std::fs::read(&dest).unwrap(), b"one");
        let dropped = TempFile::write(&RealFs, &sub, "current.json", b"two").unwrap();
        let dropped_path = dropped.path().to_owned();
        drop(dropped);
        assert!(
            !dropped_path.exists(),
            "an unrenamed temp is removed on drop"
        );
        std::fs::write(sub.join(".current.json.tmp-crashed"), b"x").unwrap();
        std::fs::write(sub.join("unrelated"), b"x").unwrap();
        assert_eq!(remove_orphans(&RealFs, &sub, "current.json").unwrap(), 1);
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
            ensure_private_dir(&RealFs, &link),
            Err(DirError::Unsafe("is a symlink"))
        ));
        let file = dir.path().join("file");
        std::fs::write(&file, b"").unwrap();
        assert!(matches!(
            ensure_private_dir(&RealFs, &file),
            Err(DirError::Unsafe("is not a directory"))
        ));
    }
}
