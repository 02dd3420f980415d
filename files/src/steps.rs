//! The file effects of one run of a lease machine (`solewriter_core::projection::machine`): the target
//! lock, the target directory chain, the temp sibling, the document in place (its first
//! bytes, read by a grant), the rename, the orphan sweep and the directory fsync. The rename
//! keeps the document it replaces under a second name ([`OldDocument`]) and the directory
//! fsync's step removes that name first: the deletion of the old document, many times a
//! rename's cost, runs after the transaction, holding no lock, instead of inside the rename.
//! Every executor of the machines hands the file family of effects (`FileEffect`) to
//! [`FileSteps::execute`] and keeps only the store's and the clock's for itself, so the file
//! half of a publication is one implementation whichever store runs the SQL.
//!
//! A run holds its directory chain open: the runtime root, `hook-projections` and the target
//! directory are each opened once (`O_DIRECTORY`, and `O_NOFOLLOW` below the root; owner and
//! mode checked on the held descriptor), and every later step — the lock file, the temp file,
//! the rename, the sweep, the fsyncs, the read of `current.json` — is relative to those
//! handles. No path is resolved again after it was checked, so a directory swapped for a
//! symlink in the middle of a run cannot lead a write out of the runtime root.

use crate::atomic_file::{
    make_private_dir, open_private_dir, open_regular, remove_orphans_but, DirError, DirHandle,
    FileSystem, OldDocument, Opened, TempFile,
};
use crate::error::{FileError, Result};
use crate::runtime::{RuntimeRoot, CURRENT_FILE};
use crate::target_lock::{dir_error, projections_dir, TargetLock};
use solewriter_core::projection::machine::{Answer, FileEffect, LeaseInput};
use solewriter_core::projection::target::TargetId;
use solewriter_core::projection::EPOCH_PREFIX_BYTES;
use std::collections::HashSet;
use std::io::Read;
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

fn io(step: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> FileError {
    let path = path.to_owned();
    move |source| FileError::Io { step, path, source }
}

/// What a step needs of `hook-projections`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Need {
    /// Only if it exists (a read).
    Existing,
    /// Created if absent, its creation fsynced in the root at once (the target lock).
    Durable,
    /// Created if absent, its creation left for [`FileEffect::SyncParents`] (a publication).
    Prepared,
}

/// The file state of one machine run: the target lock it holds, the held directory chain and
/// the temp file.
pub struct FileSteps<'a> {
    root: &'a RuntimeRoot,
    target: &'a TargetId,
    fs: &'a dyn FileSystem,
    durable: &'a DurableDirs,
    timeout: Duration,
    // Field order is drop order, which matters only when a run unwinds (a panic): the temp
    // file and the replaced document are removed before the target lock is let go.
    temp: Option<TempFile<'a>>,
    /// The document the rename replaced, deleted by the directory fsync's step (outside the
    /// locks) or when the run ends.
    old_document: Option<OldDocument<'a>>,
    lock: Option<TargetLock>,
    /// What the wait for the target lock left of the busy timeout: the store's transaction
    /// waits at most that long (one busy timeout for all the waits of a run).
    wait_left: Option<Duration>,
    /// The held runtime root, `hook-projections` and target directory, each opened once.
    root_dir: Option<DirHandle>,
    projections: Option<DirHandle>,
    target_dir: Option<DirHandle>,
    /// Once the chain is prepared: each directory of it not yet known durable, with its
    /// held parent.
    unverified: Option<Vec<(DirHandle, PathBuf)>>,
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
            old_document: None,
            lock: None,
            wait_left: None,
            root_dir: None,
            projections: None,
            target_dir: None,
            unverified: None,
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
    pub fn execute<E: From<FileError>>(
        &mut self,
        effect: FileEffect<'_, E>,
    ) -> Answer<LeaseInput<E>> {
        let into = |r: Result<()>| r.map_err(E::from);
        match effect {
            FileEffect::LockTarget(ask) => ask.answer(into(self.lock_target())),
            FileEffect::PrepareDir(ask) => ask.answer(self.prepare_dir().map_err(E::from)),
            FileEffect::SyncParents(ask) => ask.answer(into(self.sync_parents())),
            FileEffect::ReadCurrent(ask) => ask.answer(self.read_current().map_err(E::from)),
            FileEffect::RemoveOrphans(ask) => ask.answer(into(self.remove_orphans())),
            FileEffect::WriteTemp(bytes, ask) => ask.answer(into(self.write_temp(bytes))),
            FileEffect::RemoveTemp(ask) => {
                // Dropping an unrenamed temp file removes it.
                self.temp = None;
                ask.answer(Ok(()))
            }
            FileEffect::Rename(ask) => ask.answer(into(self.rename())),
            FileEffect::SyncDir(ask) => ask.answer(into(self.sync_dir())),
            FileEffect::UnlockTarget(ask) => {
                self.lock = None;
                ask.answer(Ok(()))
            }
        }
    }

    /// The first [`EPOCH_PREFIX_BYTES`] bytes of the document in place, if there is one
    /// (what [`FileEffect::ReadCurrent`] answers). It is opened relative to the held target
    /// directory, non-blocking and `fstat`-checked: a FIFO, device or socket is
    /// [`FileError::NotRegularFile`]; a symlink (not followed) or a directory is no document.
    pub fn read_current(&mut self) -> Result<Option<Vec<u8>>> {
        let Some(dir) = self.held_target()? else {
            return Ok(None);
        };
        let path = dir.join(CURRENT_FILE);
        let read = |file: std::fs::File| {
            let mut bytes = Vec::new();
            file.take(EPOCH_PREFIX_BYTES as u64)
                .read_to_end(&mut bytes)
                .map(|_| bytes)
        };
        match open_regular(&dir, Path::new(CURRENT_FILE)).and_then(|opened| match opened {
            Opened::File(file) => read(file).map(Ok),
            Opened::NotRegular(kind) => Ok(Err(kind)),
        }) {
            Ok(Ok(bytes)) => Ok(Some(bytes)),
            Ok(Err(kind)) => Err(FileError::NotRegularFile { path, kind }),
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
        let dir = match self.held_projections(Need::Durable) {
            Ok(dir) => dir?,
            Err(e) => return Some(Err(e)),
        };
        match TargetLock::acquire_in(&dir, self.target, Instant::now(), self.timeout) {
            Ok(lock) => {
                self.lock = Some(lock);
                self.wait_left = Some(deadline.saturating_duration_since(Instant::now()));
                Some(Ok(()))
            }
            Err(FileError::Busy { .. }) if Instant::now() < deadline => None,
            Err(e) => Some(Err(e)),
        }
    }

    fn lock_target(&mut self) -> Result<()> {
        let deadline = Instant::now() + self.timeout;
        let dir = self
            .held_projections(Need::Durable)?
            .ok_or_else(|| self.not_prepared("lock target"))?;
        self.lock = Some(TargetLock::acquire_in(
            &dir,
            self.target,
            deadline,
            self.timeout,
        )?);
        self.wait_left = Some(deadline.saturating_duration_since(Instant::now()));
        Ok(())
    }

    fn write_temp(&mut self, bytes: &[u8]) -> Result<()> {
        let dir = self.prepared("write temp file")?;
        let temp = TempFile::write(self.fs, &dir, CURRENT_FILE, bytes)
            .map_err(io("write temp file", dir.path()))?;
        self.temp = Some(temp);
        Ok(())
    }

    fn rename(&mut self) -> Result<()> {
        let Some(temp) = self.temp.take() else {
            return Err(FileError::Io {
                step: "rename into place",
                path: self.root.target_dir(self.target),
                source: std::io::Error::other("no temp file to rename"),
            });
        };
        let dir = temp.path();
        let (path, old_document) = temp
            .rename_keeping_old()
            .map_err(io("rename into place", parent(&dir)))?;
        self.renamed = Some(path);
        self.old_document = old_document;
        Ok(())
    }

    fn remove_orphans(&mut self) -> Result<()> {
        let dir = self.prepared("remove orphan temp files")?;
        let keep = self.old_document.as_ref().map(OldDocument::name);
        remove_orphans_but(self.fs, &dir, CURRENT_FILE, keep)
            .map(drop)
            .map_err(io("remove orphan temp files", dir.path()))
    }

    /// Deletes the replaced document, then fsyncs the directory (the rename and the
    /// deletion both made durable).
    fn sync_dir(&mut self) -> Result<()> {
        self.old_document = None;
        let dir = self.prepared("sync directory")?;
        self.fs
            .sync_dir(&dir)
            .map_err(|source| FileError::NotDurable {
                path: dir.join(CURRENT_FILE),
                source,
            })
    }

    /// The held runtime root, opened on first use.
    fn held_root(&mut self) -> Result<DirHandle> {
        if let Some(dir) = &self.root_dir {
            return Ok(dir.clone());
        }
        let dir = self.root.open()?;
        self.root_dir = Some(dir.clone());
        Ok(dir)
    }

    /// The held `hook-projections`, opened (and checked) on first use: `None` if it does not
    /// exist and `need` does not create it.
    fn held_projections(&mut self, need: Need) -> Result<Option<DirHandle>> {
        if let Some(dir) = &self.projections {
            return Ok(Some(dir.clone()));
        }
        let root = self.held_root()?;
        let name = self.root.projections_name();
        let dir = match need {
            Need::Durable => projections_dir(&root, name)?,
            Need::Prepared => {
                make_private_dir(self.fs, &root, name)
                    .map_err(|e| dir_error(&root, name, e))?
                    .0
            }
            Need::Existing => match open_private_dir(&root, name) {
                Ok(dir) => dir,
                Err(DirError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Ok(None)
                }
                Err(DirError::Io(source)) => {
                    return Err(io("read the document in place", &root.join(name))(source))
                }
                Err(e) => return Err(dir_error(&root, name, e)),
            },
        };
        self.projections = Some(dir.clone());
        Ok(Some(dir))
    }

    /// The held target directory for a read, opened (and checked) on first use: `None` if it
    /// (or `hook-projections`) does not exist.
    fn held_target(&mut self) -> Result<Option<DirHandle>> {
        if let Some(dir) = &self.target_dir {
            return Ok(Some(dir.clone()));
        }
        let Some(parent) = self.held_projections(Need::Existing)? else {
            return Ok(None);
        };
        let name = self.target.as_str();
        let dir = match open_private_dir(&parent, name) {
            Ok(dir) => dir,
            Err(DirError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(DirError::Io(source)) => {
                return Err(io("read the document in place", &parent.join(name))(source))
            }
            Err(e) => return Err(dir_error(&parent, name, e)),
        };
        self.target_dir = Some(dir.clone());
        Ok(Some(dir))
    }

    /// The held target directory, once [`FileEffect::PrepareDir`] has held it.
    fn prepared(&self, step: &'static str) -> Result<DirHandle> {
        match (&self.unverified, &self.target_dir) {
            (Some(_), Some(dir)) => Ok(dir.clone()),
            _ => Err(self.not_prepared(step)),
        }
    }

    fn not_prepared(&self, step: &'static str) -> FileError {
        FileError::Io {
            step,
            path: self.root.target_dir(self.target),
            source: std::io::Error::other("the directory chain was not prepared"),
        }
    }

    /// Makes sure `<root>/hook-projections/<target>` exists as a real directory chain (mode
    /// 0700, no symlinks, owned by this user, writable by no one else) below an existing root,
    /// and holds each directory of it open. True when every directory of the chain is already
    /// known durable (its creation was fsynced in its parent).
    fn prepare_dir(&mut self) -> Result<bool> {
        let root = self.held_root()?;
        let projections = self
            .held_projections(Need::Prepared)?
            .ok_or_else(|| self.not_prepared("create directory"))?;
        let target = match &self.target_dir {
            Some(dir) => dir.clone(),
            None => {
                let name = self.target.as_str();
                let dir = make_private_dir(self.fs, &projections, name)
                    .map_err(|e| dir_error(&projections, name, e))?
                    .0;
                self.target_dir = Some(dir.clone());
                dir
            }
        };
        let unverified: Vec<(DirHandle, PathBuf)> =
            [(root, &projections), (projections.clone(), &target)]
                .into_iter()
                .filter(|(_, dir)| !self.durable.contains(dir.path()))
                .map(|(parent, dir)| (parent, dir.path().to_owned()))
                .collect();
        let verified = unverified.is_empty();
        self.unverified = Some(unverified);
        Ok(verified)
    }

    /// Fsyncs the held parent of every directory of the chain not yet known durable,
    /// remembering each one that now is. Until one fsync of a parent succeeded, every
    /// publication retries it: a directory made by a publication that failed (or crashed)
    /// before that fsync is never taken for durable.
    fn sync_parents(&mut self) -> Result<()> {
        let Some(unverified) = &self.unverified else {
            return Err(self.not_prepared("sync parent directory"));
        };
        for (parent, dir) in unverified {
            self.fs
                .sync_dir(parent)
                .map_err(io("sync parent directory", parent.path()))?;
            self.durable.insert(dir.clone());
        }
        Ok(())
    }
}

/// The directory containing `path`.
fn parent(path: &Path) -> &Path {
    path.parent().unwrap_or(path)
}
