//! The one fault-injection and observation seam of the adapter tests: a file system that is
//! the real one, except that a test's [`Script`] sees every call first (and may fail it) and
//! learns how each call ended.
#![allow(dead_code)]

use solewriter_files::atomic_file::{DirHandle, FileSystem, RealFs};
use std::fs::{File, TryLockError};
use std::io;
use std::path::Path;

/// One call through the [`FileSystem`] seam, with the paths it names (the held directory's
/// path joined with the name; the real call goes through the held directory).
#[derive(Clone, Copy, Debug)]
pub enum Call<'a> {
    CreateDir(&'a Path),
    CreateNew(&'a Path),
    Write,
    SyncFile,
    Rename { from: &'a Path, to: &'a Path },
    SyncDir(&'a Path),
    RemoveFile(&'a Path),
    HardLink { from: &'a Path, to: &'a Path },
    TryLock,
    FillRandom,
}

impl Call<'_> {
    /// The seam method's name.
    pub fn name(&self) -> &'static str {
        match self {
            Call::CreateDir(_) => "create_dir",
            Call::CreateNew(_) => "create_new",
            Call::Write => "write_all",
            Call::SyncFile => "sync_file",
            Call::Rename { .. } => "rename",
            Call::SyncDir(_) => "sync_dir",
            Call::RemoveFile(_) => "remove_file",
            Call::HardLink { .. } => "hard_link",
            Call::TryLock => "try_lock",
            Call::FillRandom => "fill_random",
        }
    }
}

/// What a test does at each call.
pub trait Script: Send + Sync {
    /// Runs before the real call; an error is the call's result (the real call is not made,
    /// except that a failed write has written the first half of its bytes, as a full disk
    /// leaves a short write).
    fn before(&self, call: Call<'_>) -> io::Result<()>;

    /// Runs after the real call was made, with whether it succeeded.
    fn after(&self, _call: Call<'_>, _succeeded: bool) {}
}

/// The real file system, run under `S`.
pub struct ScriptedFs<S>(pub S);

impl<S: Script> ScriptedFs<S> {
    fn run<T>(&self, call: Call<'_>, real: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
        self.0.before(call)?;
        let result = real();
        self.0.after(call, result.is_ok());
        result
    }
}

impl<S: Script> FileSystem for ScriptedFs<S> {
    fn create_dir(&self, parent: &DirHandle, name: &str) -> io::Result<()> {
        let path = parent.join(name);
        self.run(Call::CreateDir(&path), || RealFs.create_dir(parent, name))
    }
    fn create_new(&self, dir: &DirHandle, name: &str) -> io::Result<File> {
        let path = dir.join(name);
        self.run(Call::CreateNew(&path), || RealFs.create_new(dir, name))
    }
    fn write_all(&self, file: &mut File, bytes: &[u8]) -> io::Result<()> {
        if let Err(e) = self.0.before(Call::Write) {
            RealFs.write_all(file, &bytes[..bytes.len() / 2])?;
            return Err(e);
        }
        let result = RealFs.write_all(file, bytes);
        self.0.after(Call::Write, result.is_ok());
        result
    }
    fn sync_file(&self, file: &File) -> io::Result<()> {
        self.run(Call::SyncFile, || RealFs.sync_file(file))
    }
    fn rename(&self, dir: &DirHandle, from: &str, to: &str) -> io::Result<()> {
        let (from_path, to_path) = (dir.join(from), dir.join(to));
        let call = Call::Rename {
            from: &from_path,
            to: &to_path,
        };
        self.run(call, || RealFs.rename(dir, from, to))
    }
    fn sync_dir(&self, dir: &DirHandle) -> io::Result<()> {
        self.run(Call::SyncDir(dir.path()), || RealFs.sync_dir(dir))
    }
    fn remove_file(&self, dir: &DirHandle, name: &str) -> io::Result<()> {
        let path = dir.join(name);
        self.run(Call::RemoveFile(&path), || RealFs.remove_file(dir, name))
    }
    fn hard_link(&self, dir: &DirHandle, from: &str, to: &str) -> io::Result<()> {
        let (from_path, to_path) = (dir.join(from), dir.join(to));
        let call = Call::HardLink {
            from: &from_path,
            to: &to_path,
        };
        self.run(call, || RealFs.hard_link(dir, from, to))
    }
    fn try_lock(&self, file: &File) -> Result<(), TryLockError> {
        self.0.before(Call::TryLock).map_err(TryLockError::Error)?;
        let result = RealFs.try_lock(file);
        self.0.after(Call::TryLock, result.is_ok());
        result
    }
    fn fill_random(&self, bytes: &mut [u8]) -> io::Result<()> {
        self.run(Call::FillRandom, || RealFs.fill_random(bytes))
    }
}
