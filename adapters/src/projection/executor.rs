//! The executor of the core's lease machines (`solewriter_core::projection::machine`): one `match` that
//! carries out each effect the machine names — against the SQLite store, the file system
//! and the per-target kernel lock — and hands the result back. It decides nothing: every
//! decision, and the order of every step, is the machine's, which is exactly the sequence the
//! model checkers explore (`solewriter-models` executes the same machines).

use crate::atomic_file::{make_private_dir, parent_of, remove_orphans, DirError, TempFile};
use crate::error::Error;
use crate::projection::publication::PublishProbe;
use crate::projection::rows;
use crate::projection::runtime::{CURRENT_FILE, PROJECTIONS_DIR};
use crate::projection::store::{ProjectionStore, WriteTx};
use crate::projection::target_lock::TargetLock;
use rusqlite::Connection;
use solewriter_core::projection::machine::{drive, Effect, Input, Machine};
use solewriter_core::projection::target::TargetId;
use std::path::PathBuf;
use std::time::Instant;

/// The state one run of a machine needs: the locks it holds, the open transaction, the
/// target directory and the temp file.
pub(crate) struct Executor<'s> {
    store: &'s ProjectionStore,
    target: &'s TargetId,
    epoch: u64,
    probe: &'s dyn PublishProbe,
    // Field order is drop order, which matters only when a run unwinds (a panic): the temp
    // file is removed, then the transaction rolls back, then the target lock is let go — the
    // reverse of the order they were taken in.
    temp: Option<TempFile<'s>>,
    tx: Option<WriteTx<'s>>,
    lock: Option<TargetLock>,
    /// When waiting for the locks of this run ends: one busy timeout for all of them.
    deadline: Option<Instant>,
    /// The target directory and the directories of its chain not yet known durable.
    dir: Option<(PathBuf, Vec<PathBuf>)>,
    /// Where the rename put the document.
    pub(crate) renamed: Option<PathBuf>,
}

fn io(step: &'static str, path: &std::path::Path) -> impl FnOnce(std::io::Error) -> Error {
    let path = path.to_owned();
    move |source| Error::Io { step, path, source }
}

fn result<T>(r: Result<T, Error>, ok: impl FnOnce(T) -> Input<Error>) -> Input<Error> {
    match r {
        Ok(v) => ok(v),
        Err(e) => Input::Failed(e),
    }
}

impl<'s> Executor<'s> {
    /// An executor for a machine on `target` (the grant's `epoch`, for the probe).
    pub(crate) fn new(
        store: &'s ProjectionStore,
        target: &'s TargetId,
        epoch: u64,
        probe: &'s dyn PublishProbe,
    ) -> Self {
        Executor {
            store,
            target,
            epoch,
            probe,
            temp: None,
            tx: None,
            lock: None,
            deadline: None,
            dir: None,
            renamed: None,
        }
    }

    /// Runs `machine` to its end.
    pub(crate) fn run<M: Machine<Error>>(&mut self, machine: &mut M) {
        drive(machine, |effect| Some(self.execute(effect)));
    }

    /// The connection of the open transaction, or the plain connection outside one.
    fn conn(&self) -> &Connection {
        match &self.tx {
            Some(tx) => tx,
            None => &self.store.conn,
        }
    }

    fn execute(&mut self, effect: Effect<'_>) -> Input<Error> {
        self.probe.before(effect.name(), self.target, self.epoch);
        let store = self.store;
        let fs = &*store.fs;
        let target = self.target;
        match effect {
            Effect::ReadCommittedLease => result(
                rows::read_lease(&store.conn, target).map_err(|e| store.busy_aware(e)),
                Input::Lease,
            ),
            Effect::LockTarget => {
                let timeout = store.busy_timeout();
                let deadline = *self.deadline.insert(Instant::now() + timeout);
                result(
                    TargetLock::acquire(&store.options.runtime_root, target, deadline, timeout),
                    |lock| {
                        self.lock = Some(lock);
                        Input::Done
                    },
                )
            }
            Effect::Begin => {
                // Every machine takes the target lock first, which sets the deadline.
                let deadline = self.deadline.unwrap_or_else(Instant::now);
                result(store.begin_by(deadline), |tx| {
                    self.tx = Some(tx);
                    Input::Done
                })
            }
            Effect::ReadLease => result(rows::read_lease(self.conn(), target), Input::Lease),
            Effect::ReadClock => Input::Clock(store.options.clock.now()),
            Effect::ReadChannels => {
                result(rows::read_channels(self.conn(), target), Input::Channels)
            }
            Effect::WriteGrant(plan) => {
                result(rows::write_acquire(self.conn(), plan), Input::Written)
            }
            Effect::WriteRelease(plan) => {
                result(rows::execute_release(self.conn(), plan), Input::Written)
            }
            Effect::PrepareDir => result(self.prepare_dir(), |verified| Input::Dir { verified }),
            Effect::SyncParents => result(self.sync_parents(), |()| Input::Done),
            Effect::RemoveOrphans => {
                let dir = self.target_dir();
                result(
                    remove_orphans(fs, &dir, CURRENT_FILE)
                        .map_err(io("remove orphan temp files", &dir)),
                    |_| Input::Done,
                )
            }
            Effect::WriteTemp(bytes) => {
                let dir = self.target_dir();
                result(
                    TempFile::write(fs, &dir, CURRENT_FILE, bytes)
                        .map_err(io("write temp file", &dir)),
                    |temp| {
                        self.temp = Some(temp);
                        Input::Done
                    },
                )
            }
            Effect::RemoveTemp => {
                // Dropping an unrenamed temp file removes it.
                self.temp = None;
                Input::Done
            }
            Effect::Rename => {
                let dir = self.target_dir();
                let renamed = match self.temp.take() {
                    Some(temp) => temp
                        .rename_into_place()
                        .map_err(io("rename into place", &dir)),
                    None => Err(Error::Io {
                        step: "rename into place",
                        path: dir,
                        source: std::io::Error::other("no temp file to rename"),
                    }),
                };
                result(renamed, |path| {
                    self.renamed = Some(path);
                    Input::Done
                })
            }
            Effect::SyncDir => {
                let dir = self.target_dir();
                match fs.sync_dir(&dir) {
                    Ok(()) => Input::Done,
                    Err(source) => Input::Failed(Error::NotDurable {
                        path: dir.join(CURRENT_FILE),
                        source,
                    }),
                }
            }
            Effect::Reached(step) => {
                self.probe.reached(step, target, self.epoch);
                Input::Done
            }
            Effect::Commit => match self.tx.take() {
                Some(tx) => result(tx.commit().map_err(|e| store.map_err(e)), |()| Input::Done),
                None => Input::Failed(Error::CorruptRow("commit without a transaction".into())),
            },
            Effect::Rollback => {
                if let Some(tx) = self.tx.take() {
                    if let Err(error) = tx.rollback() {
                        tracing::error!(%error, "rollback failed");
                    }
                }
                // After a failed commit or rollback: make sure the connection is not left inside
                // the transaction (it would keep the write lock).
                store.abandon_transaction();
                Input::Done
            }
            Effect::UnlockTarget => {
                self.lock = None;
                Input::Done
            }
            Effect::Finished => unreachable!("`drive` stops at Finished"),
        }
    }

    fn target_dir(&self) -> PathBuf {
        match &self.dir {
            Some((dir, _)) => dir.clone(),
            None => self.store.options.runtime_root.target_dir(self.target),
        }
    }

    /// Makes sure `<root>/hook-projections/<target>` exists as a real directory chain (mode
    /// 0700, no symlinks) below an existing root. True when every directory of the chain is
    /// already known durable (its creation was fsynced in its parent, by this store).
    fn prepare_dir(&mut self) -> Result<bool, Error> {
        self.store.options.runtime_root.check_root()?;
        let root = self.store.options.runtime_root.path();
        let mut dir = root.to_owned();
        let mut unverified = Vec::new();
        let durable = self.store.durable_dirs.borrow();
        for part in [PROJECTIONS_DIR, self.target.as_str()] {
            dir.push(part);
            make_private_dir(&*self.store.fs, &dir).map_err(|e| match e {
                DirError::Unsafe(reason) => Error::UnsafeRuntimeDir {
                    path: dir.clone(),
                    reason,
                },
                DirError::Io(source) => io("create directory", &dir)(source),
            })?;
            if !durable.contains(&dir) {
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
    fn sync_parents(&mut self) -> Result<(), Error> {
        let Some((_, unverified)) = &self.dir else {
            return Err(Error::Io {
                step: "sync parent directory",
                path: self.store.options.runtime_root.target_dir(self.target),
                source: std::io::Error::other("the directory chain was not prepared"),
            });
        };
        for dir in unverified {
            let parent = parent_of(dir);
            self.store
                .fs
                .sync_dir(parent)
                .map_err(io("sync parent directory", parent))?;
            self.store.durable_dirs.borrow_mut().insert(dir.clone());
        }
        Ok(())
    }
}
