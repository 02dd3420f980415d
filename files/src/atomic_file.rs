//! The atomic publisher's file-system steps, every one relative to a directory held open
//! ([`DirHandle`]: opened once, `O_DIRECTORY | O_NOFOLLOW`, owner and mode checked): a private
//! directory (its creation made durable by an fsync of the parent), a unique temp sibling
//! (created exclusively, mode 0600, no symlink followed, written and fsynced), an atomic
//! rename over the destination inside the same held directory (optionally keeping the
//! replaced file under a second name, [`OldDocument`], so that the rename does not delete it),
//! and an fsync of that directory. No path is resolved again once its directory is held, so a directory swapped
//! for a symlink meanwhile cannot lead a step elsewhere. Every step goes through a
//! [`FileSystem`]: [`RealFs`] in production, a fault-injecting or recording one in tests.
//!
//! A reader of the destination sees the old complete file or the new complete file, never a
//! mix: the new bytes are complete and durable in the temp file before the rename, and
//! rename(2) replaces the directory entry atomically. Temp siblings share one prefix so that
//! a later publication (holding the serialized transaction, so no temp can be live) removes
//! the ones a crash left behind. `models/src/crash.rs` checks this order against every crash
//! outcome.
//!
//! Files read under a lock are opened non-blocking and `fstat`-checked to be regular files
//! ([`open_regular`]): a FIFO or a device planted at their name is refused, never waited on.

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use std::fs::{File, TryLockError};
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Reads `source` to its end if it holds at most `max` bytes; otherwise returns its first
/// `max + 1` bytes, so the caller refuses it without a huge or endless input being read whole.
pub fn read_capped(source: impl Read, max: usize) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    source
        .take(u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1))
        .read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// [`read_capped`] of the file `path`, opened by [`open_regular`]: a symlink at `path` is not
/// followed (`ELOOP`), so a planted link can neither lead a reader out of the directory it
/// trusts nor pass for an absent file; a directory is `EISDIR`; anything else that is not a
/// regular file (a FIFO, a device, a socket) is refused (`InvalidData`) without being waited on.
pub fn read_bounded(path: &Path, max: usize) -> io::Result<Vec<u8>> {
    match open_regular(rustix::fs::CWD, path)? {
        Opened::File(file) => read_capped(file, max),
        Opened::NotRegular(kind) => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{} is a {kind}, not a regular file", path.display()),
        )),
    }
}

/// What [`open_regular`] found.
#[derive(Debug)]
pub enum Opened {
    /// A regular file, open for reading.
    File(File),
    /// Something else (a FIFO, a device, a socket), named; not read, and never waited on.
    NotRegular(&'static str),
}

/// The name of a file type, for messages.
fn kind_name(file_type: FileType) -> &'static str {
    match file_type {
        FileType::RegularFile => "regular file",
        FileType::Directory => "directory",
        FileType::Symlink => "symlink",
        FileType::Fifo => "FIFO",
        FileType::Socket => "socket",
        FileType::CharacterDevice => "character device",
        FileType::BlockDevice => "block device",
        FileType::Unknown => "file of unknown type",
    }
}

/// Opens `name` relative to `dir` for reading, if it is a regular file: its type is looked at
/// first (`fstatat`, no symlink followed), so a device is never opened; then it is opened
/// `O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC` (a FIFO put there meanwhile cannot block
/// the open) and the open file is `fstat`-checked again. A symlink is `ELOOP` and a directory
/// `EISDIR`, as an open with `O_NOFOLLOW` and a read would answer.
pub fn open_regular(dir: impl AsFd, name: &Path) -> io::Result<Opened> {
    let dir = dir.as_fd();
    let refuse = |file_type: FileType| match file_type {
        FileType::RegularFile => Ok(None),
        FileType::Symlink => Err(io::Error::from_raw_os_error(libc::ELOOP)),
        FileType::Directory => Err(io::Error::from_raw_os_error(libc::EISDIR)),
        other => Ok(Some(Opened::NotRegular(kind_name(other)))),
    };
    let seen = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)?;
    if let Some(refused) = refuse(FileType::from_raw_mode(seen.st_mode))? {
        return Ok(refused);
    }
    let fd = rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let opened = rustix::fs::fstat(&fd)?;
    if let Some(refused) = refuse(FileType::from_raw_mode(opened.st_mode))? {
        return Ok(refused);
    }
    Ok(Opened::File(File::from(fd)))
}

/// Mode of every directory solewriter creates.
pub const DIR_MODE: u32 = 0o700;
/// Mode of every file solewriter creates.
pub const FILE_MODE: u32 = 0o600;

/// A directory held open (`O_RDONLY | O_DIRECTORY | O_CLOEXEC`, and `O_NOFOLLOW` for every
/// directory solewriter makes or checks), with the path it was opened at. Every step inside it
/// goes through the descriptor; the path serves messages and test observations only and is
/// never resolved again. Cheap to clone (the clones share the descriptor).
#[derive(Clone, Debug)]
pub struct DirHandle {
    fd: Arc<OwnedFd>,
    path: PathBuf,
}

impl DirHandle {
    fn open_with(
        dir: BorrowedFd<'_>,
        name: &Path,
        follow: bool,
        path: PathBuf,
    ) -> io::Result<Self> {
        let mut flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        if !follow {
            flags |= OFlags::NOFOLLOW;
        }
        let fd = rustix::fs::openat(dir, name, flags, Mode::empty())?;
        Ok(DirHandle {
            fd: Arc::new(fd),
            path,
        })
    }

    /// Opens the directory `path`, following symlinks (a host's root: its own to arrange).
    pub fn open(path: &Path) -> io::Result<Self> {
        Self::open_with(rustix::fs::CWD, path, true, path.to_owned())
    }

    /// Opens the directory `path` without following a symlink at its last component (`ELOOP`).
    pub fn open_nofollow(path: &Path) -> io::Result<Self> {
        Self::open_with(rustix::fs::CWD, path, false, path.to_owned())
    }

    /// Opens the directory `name` inside this one, no symlink followed (`ELOOP`; a file
    /// that is no directory is `ENOTDIR`).
    pub fn open_at(&self, name: &str) -> io::Result<Self> {
        Self::open_with(self.fd.as_fd(), Path::new(name), false, self.join(name))
    }

    /// The path this directory was opened at (for messages; never resolved again).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The path of `name` inside this directory (for messages).
    pub fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// Refuses a directory this user does not own or that group or others may write
    /// (`solewriter_core::project_lock::ownership::refuse_lock_dir`), judged on the held
    /// descriptor (`fstat`).
    pub fn check_private(&self) -> Result<(), DirError> {
        let seen = rustix::fs::fstat(self).map_err(|e| DirError::Io(e.into()))?;
        let uid = rustix::process::geteuid().as_raw();
        match solewriter_core::project_lock::ownership::refuse_lock_dir(
            seen.st_uid,
            uid,
            seen.st_mode,
        ) {
            Some(reason) => Err(DirError::Unsafe(reason)),
            None => Ok(()),
        }
    }
}

impl AsFd for DirHandle {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// The operating-system calls of the atomic publisher and the project lock: the file system
/// (with its kernel locks), and the random source of temp-file names, holder tokens and lock
/// nonces. Every call on a name is relative to a held directory ([`DirHandle`]). Passed as
/// `&dyn FileSystem`: one indirect call per operation is nothing next to the system call (an
/// fsync costs milliseconds), and it keeps the store and lease types free of a type parameter.
pub trait FileSystem: Send + Sync {
    /// Creates the directory `name` in `parent` (`mkdirat`, mode 0700); fails if it exists.
    fn create_dir(&self, parent: &DirHandle, name: &str) -> io::Result<()>;
    /// Creates the file `name` in `dir` exclusively (`openat` with `O_CREAT | O_EXCL |
    /// O_NOFOLLOW`, mode 0600), open for writing.
    fn create_new(&self, dir: &DirHandle, name: &str) -> io::Result<File>;
    /// Writes all of `bytes` to `file`.
    fn write_all(&self, file: &mut File, bytes: &[u8]) -> io::Result<()>;
    /// Fsyncs a file's data and metadata.
    fn sync_file(&self, file: &File) -> io::Result<()>;
    /// Atomically renames `from` over `to`, both in `dir` (`renameat`).
    fn rename(&self, dir: &DirHandle, from: &str, to: &str) -> io::Result<()>;
    /// Fsyncs the held directory, making creations, renames and removals inside it durable.
    fn sync_dir(&self, dir: &DirHandle) -> io::Result<()>;
    /// Removes the file `name` from `dir` (`unlinkat`).
    fn remove_file(&self, dir: &DirHandle, name: &str) -> io::Result<()>;
    /// Gives the file `from` of `dir` a second name `to` there (`linkat`); fails if `to`
    /// exists.
    fn hard_link(&self, dir: &DirHandle, from: &str, to: &str) -> io::Result<()>;
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
    fn create_dir(&self, parent: &DirHandle, name: &str) -> io::Result<()> {
        Ok(rustix::fs::mkdirat(
            parent,
            name,
            Mode::from_raw_mode(DIR_MODE),
        )?)
    }

    fn create_new(&self, dir: &DirHandle, name: &str) -> io::Result<File> {
        let fd = rustix::fs::openat(
            dir,
            name,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(FILE_MODE),
        )?;
        Ok(File::from(fd))
    }

    fn write_all(&self, file: &mut File, bytes: &[u8]) -> io::Result<()> {
        file.write_all(bytes)
    }

    fn sync_file(&self, file: &File) -> io::Result<()> {
        file.sync_all()
    }

    fn rename(&self, dir: &DirHandle, from: &str, to: &str) -> io::Result<()> {
        Ok(rustix::fs::renameat(dir, from, dir, to)?)
    }

    fn sync_dir(&self, dir: &DirHandle) -> io::Result<()> {
        Ok(rustix::fs::fsync(dir)?)
    }

    fn remove_file(&self, dir: &DirHandle, name: &str) -> io::Result<()> {
        Ok(rustix::fs::unlinkat(dir, name, AtFlags::empty())?)
    }

    fn hard_link(&self, dir: &DirHandle, from: &str, to: &str) -> io::Result<()> {
        Ok(rustix::fs::linkat(dir, from, dir, to, AtFlags::empty())?)
    }
}

/// Why a directory cannot be used.
#[derive(Debug)]
pub enum DirError {
    /// It exists but is a symlink or not a directory, is not owned by this user, or is
    /// writable by group or others.
    Unsafe(&'static str),
    /// The OS refused.
    Io(io::Error),
}

/// Holds the directory `name` of `parent` open, creating it with mode 0700 if absent, and
/// then fsyncs `parent`, so that the new directory's entry survives a power loss (without
/// it, a file published inside could vanish with the directory).
///
/// A directory found already there is not fsynced in its parent: callers whose durability
/// depends on an earlier creation (which may have failed before its fsync) use
/// [`make_private_dir`] and fsync the parent until they have seen one success.
pub fn ensure_private_dir(
    fs: &dyn FileSystem,
    parent: &DirHandle,
    name: &str,
) -> Result<DirHandle, DirError> {
    let (dir, created) = make_private_dir(fs, parent, name)?;
    if created {
        fs.sync_dir(parent).map_err(DirError::Io)?;
    }
    Ok(dir)
}

/// Holds the existing directory `name` of `parent` open ([`open_private_dir`]), or creates it
/// (mode 0700) and holds it. Returns it and whether this call created it. Nothing is fsynced.
pub fn make_private_dir(
    fs: &dyn FileSystem,
    parent: &DirHandle,
    name: &str,
) -> Result<(DirHandle, bool), DirError> {
    let mut created = false;
    loop {
        match open_private_dir(parent, name) {
            Ok(dir) => return Ok((dir, created)),
            Err(DirError::Io(e)) if e.kind() == io::ErrorKind::NotFound && !created => {
                match fs.create_dir(parent, name) {
                    Ok(()) => created = true,
                    // Created concurrently by another writer: open what is there now.
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                    Err(e) => return Err(DirError::Io(e)),
                }
            }
            Err(e) => return Err(e),
        }
    }
}

/// Holds the existing directory `name` of `parent` open (`O_DIRECTORY | O_NOFOLLOW`) and
/// checks it on the held descriptor ([`DirHandle::check_private`]): a symlink, a file that is
/// no directory, a directory of another user or one that group or others may write is
/// [`DirError::Unsafe`]; an absent one is `DirError::Io` of kind `NotFound`.
pub fn open_private_dir(parent: &DirHandle, name: &str) -> Result<DirHandle, DirError> {
    let dir = parent.open_at(name).map_err(|e| match e.raw_os_error() {
        // Linux answers `ENOTDIR` for a symlink opened `O_DIRECTORY | O_NOFOLLOW`: look at
        // what is there to say which (only for the message; nothing was opened).
        Some(libc::ELOOP | libc::ENOTDIR) => {
            match rustix::fs::statat(parent, name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(seen) if FileType::from_raw_mode(seen.st_mode) != FileType::Symlink => {
                    DirError::Unsafe("is not a directory")
                }
                _ => DirError::Unsafe("is a symlink"),
            }
        }
        _ => DirError::Io(e),
    })?;
    dir.check_private()?;
    Ok(dir)
}

fn temp_prefix(file_name: &str) -> String {
    format!(".{file_name}.tmp-")
}

/// Removes every temp sibling of `file_name` in the held `dir` (left by a crashed, frozen or
/// superseded writer), listing the held directory itself. A temp removed meanwhile by someone
/// else (its writer, another sweep) is not an error. Returns how many this call removed.
pub fn remove_orphans(fs: &dyn FileSystem, dir: &DirHandle, file_name: &str) -> io::Result<usize> {
    remove_orphans_but(fs, dir, file_name, None)
}

/// [`remove_orphans`], leaving the sibling named `keep` (the caller's own [`OldDocument`]
/// document, which it removes later, holding fewer locks).
pub fn remove_orphans_but(
    fs: &dyn FileSystem,
    dir: &DirHandle,
    file_name: &str,
    keep: Option<&str>,
) -> io::Result<usize> {
    let prefix = temp_prefix(file_name);
    let mut removed = 0;
    // `read_from` reads through its own descriptor of the held directory (`openat(fd, ".")`).
    for entry in rustix::fs::Dir::read_from(dir)? {
        let entry = entry?;
        let Some(name) = entry
            .file_name()
            .to_str()
            .ok()
            .filter(|n| n.starts_with(&prefix) && Some(*n) != keep)
        else {
            continue;
        };
        match fs.remove_file(dir, name) {
            Ok(()) => removed += 1,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(removed)
}

/// A written, fsynced temp sibling in a held directory. Dropped without
/// [`TempFile::rename_into_place`], it is removed.
pub struct TempFile<'f> {
    fs: &'f dyn FileSystem,
    dir: DirHandle,
    name: String,
    dest: String,
    live: bool,
}

impl std::fmt::Debug for TempFile<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TempFile")
            .field("path", &self.path())
            .field("live", &self.live)
            .finish_non_exhaustive()
    }
}

impl<'f> TempFile<'f> {
    /// Creates a unique temp sibling of `file_name` in the held `dir` (never overwriting
    /// anything), writes `bytes` and fsyncs it. On failure the temp file is removed.
    pub fn write(
        fs: &'f dyn FileSystem,
        dir: &DirHandle,
        file_name: &str,
        bytes: &[u8],
    ) -> io::Result<Self> {
        let mut nonce = [0u8; 8];
        fs.fill_random(&mut nonce)?;
        let suffix = solewriter_core::hex::encode(&nonce);
        let name = format!("{}{suffix}", temp_prefix(file_name));
        let mut file = fs.create_new(dir, &name)?;
        let temp = TempFile {
            fs,
            dir: dir.clone(),
            name,
            dest: file_name.to_owned(),
            live: true,
        };
        fs.write_all(&mut file, bytes)?;
        fs.sync_file(&file)?;
        Ok(temp)
    }

    /// The temp file's path (for messages).
    pub fn path(&self) -> PathBuf {
        self.dir.join(&self.name)
    }

    /// The temp file's name in its directory.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Atomically renames the temp file over the destination, inside the held directory;
    /// returns the destination's path. The caller then fsyncs the directory
    /// ([`FileSystem::sync_dir`]) to make the rename durable.
    pub fn rename_into_place(mut self) -> io::Result<PathBuf> {
        self.fs.rename(&self.dir, &self.name, &self.dest)?;
        self.live = false;
        Ok(self.dir.join(&self.dest))
    }

    /// [`Self::rename_into_place`], the document it replaces kept under a second name first
    /// (a hard link named after this temp file, so it shares the temp prefix): the rename then
    /// only drops one of that document's links, and the document is deleted — its blocks
    /// freed, which takes the file system many times a rename's time — when the returned
    /// [`OldDocument`] is dropped, after the caller has let its locks go. With no document in
    /// place (or one the file system refuses to link) nothing is kept and the rename replaces
    /// it as [`Self::rename_into_place`] does. The rename's effect on the destination is the
    /// same either way; a crash before the second name is removed leaves it to the next sweep
    /// ([`remove_orphans`]).
    pub fn rename_keeping_old(self) -> io::Result<(PathBuf, Option<OldDocument<'f>>)> {
        let name = format!("{}.old", self.name);
        let old = self
            .fs
            .hard_link(&self.dir, &self.dest, &name)
            .ok()
            .map(|()| OldDocument {
                fs: self.fs,
                dir: self.dir.clone(),
                name,
            });
        // A failed rename drops `old` here: its second name goes, the document stays.
        Ok((self.rename_into_place()?, old))
    }
}

/// The document a rename replaced ([`TempFile::rename_keeping_old`]), still linked under a
/// name of its own; removing that name (dropping this) deletes it.
pub struct OldDocument<'f> {
    fs: &'f dyn FileSystem,
    dir: DirHandle,
    name: String,
}

impl OldDocument<'_> {
    /// Its name in its directory.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl std::fmt::Debug for OldDocument<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OldDocument")
            .field("path", &self.dir.join(&self.name))
            .finish_non_exhaustive()
    }
}

impl Drop for OldDocument<'_> {
    fn drop(&mut self) {
        // Best effort: a name left behind is a temp sibling, which the next sweep removes.
        let _ = self.fs.remove_file(&self.dir, &self.name);
    }
}

impl Drop for TempFile<'_> {
    fn drop(&mut self) {
        if self.live {
            let _ = self.fs.remove_file(&self.dir, &self.name);
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
        let top = DirHandle::open(dir.path()).unwrap();
        let sub = ensure_private_dir(&RealFs, &top, "d").unwrap();
        assert_eq!(
            sub.path().metadata().unwrap().permissions().mode() & 0o777,
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
        let dropped_path = dropped.path();
        drop(dropped);
        assert!(
            !dropped_path.exists(),
            "an unrenamed temp is removed on drop"
        );
        std::fs::write(sub.join(".current.json.tmp-crashed"), b"x").unwrap();
        std::fs::write(sub.join("unrelated"), b"x").unwrap();
        assert_eq!(remove_orphans(&RealFs, &sub, "current.json").unwrap(), 1);
        assert!(!sub.join(".current.json.tmp-crashed").exists());
        assert!(sub.join("unrelated").exists());
        assert_eq!(std::fs::read(&dest).unwrap(), b"one");
    }

    #[test]
    fn a_replaced_document_is_kept_under_a_temp_name_until_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let top = DirHandle::open(dir.path()).unwrap();
        let write = |bytes: &[u8]| TempFile::write(&RealFs, &top, "current.json", bytes).unwrap();
        let (dest, kept) = write(b"one").rename_keeping_old().unwrap();
        assert!(kept.is_none(), "nothing was in place");
        let (_, kept) = write(b"two").rename_keeping_old().unwrap();
        let kept = kept.expect("the replaced document is kept");
        let name = kept.name().to_owned();
        assert!(name.starts_with(".current.json.tmp-") && name.ends_with(".old"));
        assert!(format!("{kept:?}").contains(&name), "{kept:?}");
        assert_eq!(std::fs::read(top.join(&name)).unwrap(), b"one");
        assert_eq!(std::fs::read(&dest).unwrap(), b"two");
        // The sweep spares the caller's own second name, and only it.
        std::fs::write(top.join(".current.json.tmp-crashed.old"), b"x").unwrap();
        assert_eq!(
            remove_orphans_but(&RealFs, &top, "current.json", Some(&name)).unwrap(),
            1
        );
        assert!(top.join(&name).exists());
        drop(kept);
        assert!(!top.join(&name).exists(), "dropped, the second name goes");
        assert_eq!(std::fs::read(&dest).unwrap(), b"two");
    }

    #[test]
    fn symlinks_files_and_open_directories_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let top = DirHandle::open(dir.path()).unwrap();
        let real = dir.path().join("real");
        std::fs::create_dir(&real).unwrap();
        std::os::unix::fs::symlink(&real, dir.path().join("link")).unwrap();
        assert!(matches!(
            ensure_private_dir(&RealFs, &top, "link"),
            Err(DirError::Unsafe("is a symlink"))
        ));
        std::fs::write(dir.path().join("file"), b"").unwrap();
        assert!(matches!(
            ensure_private_dir(&RealFs, &top, "file"),
            Err(DirError::Unsafe("is not a directory"))
        ));
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(matches!(
            ensure_private_dir(&RealFs, &top, "real"),
            Err(DirError::Unsafe("is writable by group or others"))
        ));
    }

    #[test]
    fn only_regular_files_are_opened_for_reading() {
        let dir = tempfile::tempdir().unwrap();
        let top = DirHandle::open(dir.path()).unwrap();
        std::fs::write(dir.path().join("file"), b"x").unwrap();
        assert!(matches!(
            open_regular(&top, Path::new("file")),
            Ok(Opened::File(_))
        ));
        std::os::unix::fs::symlink("file", dir.path().join("link")).unwrap();
        let errno = |name: &str| {
            open_regular(&top, Path::new(name))
                .unwrap_err()
                .raw_os_error()
        };
        assert_eq!(errno("link"), Some(libc::ELOOP));
        std::fs::create_dir(dir.path().join("dir")).unwrap();
        assert_eq!(errno("dir"), Some(libc::EISDIR));
        rustix::fs::mknodat(&top, "fifo", FileType::Fifo, Mode::from_raw_mode(0o600), 0).unwrap();
        assert!(matches!(
            open_regular(&top, Path::new("fifo")),
            Ok(Opened::NotRegular("FIFO"))
        ));
        let err = read_bounded(&dir.path().join("fifo"), 10).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
    }
}
