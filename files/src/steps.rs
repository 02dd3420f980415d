//! The file effects of one run of a lease machine (`solewriter_core::projection::machine`): the target
//! lock, the target directory chain, the temp sibling, the document in place (read by a grant),
//! the rename, the orphan sweep and the directory fsync.
//! Every executor of the machines hands the file family of effects (`FileEffect`) to
//! [`FileSteps::execute`] and keeps only the store's and the clock's for itself, so the file
//! half of a publication is one implementation whichever store runs the SQL.

use crate::atomic_file::{
    make_private_dir, parent_of, read_bounded, remove_orphans, DirError, FileSystem, TempFile,
};
use crate::error::{Error, Result};
use crate::runtime::{RuntimeRoot, CURRENT_FILE, PROJECTIONS_DIR};
use crate::target_lock::TargetLock;
use solewriter_core::projection::machine::{Answer, FileEffect};
use solewriter_core::projection::target::TargetId;
use solewriter_core::projection::MAX_DOCUMENT_BYTES;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Target directories whose creation has been seen fsynced in their parent (shared by the
/// runs of one store, or of one process).
#[derive(Debug, Default)]
pub struct DurableDirs(Mutex<HashSet<PathBuf>>);

impl DurableDirs {
    fn contains(&self, dir: &Path) -> bool {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(dir)
    }

    fn insert(&self, dir: PathBuf) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).insert(dir);
    }
}

fn io(step: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> Error {
    let path = path.to_owned();
    move |source| Error::Io { step, path, source }
}

/// The file state of one machine run: the target lock it holds, the target directory and the
/// temp file.
pub struct FileSteps<'a> {
    root: &'a RuntimeRoot,
    target: &'a TargetId,
    fs: &'a dyn FileSystem,
    durable: &'a DurableDirs,
    timeout: Duration,
    // Field order is drop order, which matters only when a run unwinds (a panic): the temp
    // file is removed before the target lock is let go.
    temp: Option<TempFile<'a>>,
    lock: Option<TargetLock>,
    /// What the wait for the target lock left of the busy timeout: the store's transaction
    /// waits at most that long (one busy timeout for all the waits of a run).
    wait_left: Option<Duration>,
    /// The target directory and the directories of its chain not yet known durable.
    dir: Option<(PathBuf, Vec<PathBuf>)>,
    renamed: Option<PathBuf>,
}

impl std::fmt::Debug for FileSteps<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileSteps")
            .field("target", &self.target)
            .field("locked", &self.lock.is_some())
            .field("temp", &self.temp)
            .finish_non_exhaustive()
    }
}

impl<'a> FileSteps<'a> {
    /// The file steps of a run on `target` under `root`, through `fs`; the target lock is
    /// waited for at most `timeout` (the busy timeout).
    pub fn new(
        root: &'a RuntimeRoot,
        target: &'a TargetId,
        fs: &'a dyn FileSystem,
        durable: &'a DurableDirs,
        timeout: Duration,
    ) -> Self {
        FileSteps {
            root,
            target,
            fs,
            durable,
            timeout,
            temp: None,
            lock: None,
            wait_left: None,
            dir: None,
            renamed: None,
        }
    }

    /// Until when the store's transaction may be waited for, if it is begun now: what the
    /// wait for the target lock (taken right before the transaction) left of the busy timeout.
    pub fn wait_deadline(&self) -> Option<Instant> {
        self.wait_left.map(|left| Instant::now() + left)
    }

    /// Where the rename put the document, once (taken).
    pub fn take_renamed(&mut self) -> Option<PathBuf> {
        self.renamed.take()
    }

    /// Executes a file effect (the target lock, the directory chain, the temp file, the
    /// rename, the directory fsync) and answers it.
    pub fn execute<E: From<Error>>(&mut self, effect: FileEffect<'_, E>) -> Answer<E> {
        let into = |r: Result<()>| r.map_err(E::from);
        match effect {
            FileEffect::LockTarget(ask) => ask.answer(into(self.lock_target())),
            FileEffect::PrepareDir(ask) => ask.answer(self.prepare_dir().map_err(E::from)),
            FileEffect::SyncParents(ask) => ask.answer(into(self.sync_parents())),
            FileEffect::ReadCurrent(ask) => ask.answer(self.read_current().map_err(E::from)),
            FileEffect::RemoveOrphans(ask) => {
                let dir = self.target_dir();
                ask.answer(into(
                    remove_orphans(self.fs, &dir, CURRENT_FILE)
                        .map(drop)
                        .map_err(io("remove orphan temp files", &dir)),
                ))
            }
            FileEffect::WriteTemp(bytes, ask) => ask.answer(into(self.write_temp(bytes))),
            FileEffect::RemoveTemp(ask) => {
                // Dropping an unrenamed temp file removes it.
                self.temp = None;
                ask.answer(Ok(()))
            }
            FileEffect::Rename(ask) => ask.answer(into(self.rename())),
            FileEffect::SyncDir(ask) => {
                let dir = self.target_dir();
                ask.answer(into(self.fs.sync_dir(&dir).map_err(|source| {
                    Error::NotDurable {
                        path: dir.join(CURRENT_FILE),
                        source,
                    }
                })))
            }
            FileEffect::UnlockTarget(ask) => {
                self.lock = None;
                ask.answer(Ok(()))
            }
        }
    }

    /// The bytes of the document in place, if there is one.
    fn read_current(&self) -> Result<Option<Vec<u8>>> {
        let path = self.target_dir().join(CURRENT_FILE);
        // `read_bounded` reads one byte past the bound: enough to know it is no document.
        match read_bounded(&path, MAX_DOCUMENT_BYTES) {
            Ok(bytes) => Ok(Some(bytes)),
            // No file, or something at its path that solewriter never writes (a symlink,
            // which is not followed; a directory): no document, no epoch.
            Err(e)
                if e.kind() == std::io::ErrorKind::NotFound
                    || matches!(e.raw_os_error(), Some(libc::ELOOP | libc::EISDIR)) =>
            {
                Ok(None)
            }
            Err(source) => Err(io("read the document in place", &path)(source)),
        }
    }

    /// One attempt at the target lock, for an executor that waits between attempts itself (on
    /// a timer, instead of a sleeping thread): `None` while another holds it and the busy
    /// timeout, counted from `since` (the first attempt), has not passed — try again later,
    /// the effect still unanswered; otherwise what [`FileEffect::LockTarget`] answers: the
    /// lock taken, `Busy` once the timeout passed, or another failure.
    pub fn try_lock_target(&mut self, since: Instant) -> Option<Result<()>> {
        let deadline = since + self.timeout;
        match TargetLock::acquire(self.root, self.target, Instant::now(), self.timeout) {
            Ok(lock) => {
                self.lock = Some(lock);
                self.wait_left = Some(deadline.saturating_duration_since(Instant::now()));
                Some(Ok(()))
            }
            Err(Error::Busy { .. }) if Instant::now() < deadline => None,
            Err(e) => Some(Err(e)),
        }
    }

    fn lock_target(&mut self) -> Result<()> {
        let deadline = Instant::now() + self.timeout;
        self.lock = Some(TargetLock::acquire(
            self.root,
            self.target,
            deadline,
            self.timeout,
        )?);
        self.wait_left = Some(deadline.saturating_duration_since(Instant::now()));
        Ok(())
    }

    fn write_temp(&mut self, bytes: &[u8]) -> Result<()> {
        let dir = self.target_dir();
        let temp = TempFile::write(self.fs, &dir, CURRENT_FILE, bytes)
            .map_err(io("write temp file", &dir))?;
        self.temp = Some(temp);
        Ok(())
    }

    fn rename(&mut self) -> Result<()> {
        let dir = self.target_dir();
        let Some(temp) = self.temp.take() else {
            return Err(Error::Io {
                step: "rename into place",
                path: dir,
                source: std::io::Error::other("no temp file to rename"),
            });
        };
        let path = temp
            .rename_into_place()
            .map_err(io("rename into place", &dir))?;
        self.renamed = Some(path);
        Ok(())
    }

    fn target_dir(&self) -> PathBuf {
        match &self.dir {
            Some((dir, _)) => dir.clone(),
            None => self.root.target_dir(self.target),
        }
    }

    /// Makes sure `<root>/hook-projections/<target>` exists as a real directory chain (mode
    /// 0700, no symlinks) below an existing root. True when every directory of the chain is
    /// already known durable (its creation was fsynced in its parent).
    fn prepare_dir(&mut self) -> Result<bool> {
        self.root.check_root()?;
        let mut dir = self.root.path().to_owned();
        let mut unverified = Vec::new();
        for part in [PROJECTIONS_DIR, self.target.as_str()] {
            dir.push(part);
            make_private_dir(self.fs, &dir).map_err(|e| match e {
                DirError::Unsafe(reason) => Error::UnsafeRuntimeDir {
                    path: dir.clone(),
                    reason,
                },
                DirError::Io(source) => io("create directory", &dir)(source),
            })?;
            if !self.durable.contains(&dir) {
                unverified.push(dir.clone());
            }
        }
        let verified = unverified.is_empty();
        self.dir = Some((dir, unverified));
        Ok(verified)
    }

    /// Fsyncs the parent of every directory of the chain not yet known durable, remembering
    /// each one that now is. Until one fsync of a parent succeeded, every publication
    /// retries it: a directory made by a publication that failed (or crashed) before that
    /// fsync is never taken for durable.
    fn sync_parents(&mut self) -> Result<()> {
        let Some((_, unverified)) = &self.dir else {
            return Err(Error::Io {
                step: "sync parent directory",
                path: self.root.target_dir(self.target),
                source: std::io::Error::other("the directory chain was not prepared"),
            });
        };
        for dir in unverified {
            let parent = parent_of(dir);
            self.fs
                .sync_dir(parent)
                .map_err(io("sync parent directory", parent))?;
            self.durable.insert(dir.clone());
        }
        Ok(())
    }
}
