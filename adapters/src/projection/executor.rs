//! The executor of the core's lease machines (`solewriter_core::projection::machine`): one `match` that
//! carries out each effect the machine names — against the SQLite store, and through
//! [`FileSteps`] (shared with every other executor) against the file system and the
//! per-target kernel lock — and hands the result back. It decides nothing: every decision,
//! and the order of every step, is the machine's, which is exactly the sequence the model
//! checkers explore (`solewriter-models` executes the same machines).

use crate::error::Error;
use crate::projection::probe::PublishProbe;
use crate::projection::rows;
use crate::projection::store::{ProjectionStore, WriteTx};
use rusqlite::Connection;
use solewriter_core::projection::machine::{drive, Effect, Input, Machine};
use solewriter_core::projection::target::TargetId;
use solewriter_files::steps::FileSteps;
use std::path::PathBuf;
use std::time::Instant;

/// The state one run of a machine needs: the open transaction and the file steps (the
/// target lock, the target directory, the temp file).
pub(crate) struct Executor<'s> {
    store: &'s ProjectionStore,
    target: &'s TargetId,
    epoch: u64,
    probe: &'s dyn PublishProbe,
    // Field order is drop order, which matters only when a run unwinds (a panic): the
    // transaction rolls back, then the temp file is removed and the target lock let go.
    tx: Option<WriteTx<'s>>,
    files: FileSteps<'s>,
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
            tx: None,
            files: FileSteps::new(
                &store.options.runtime_root,
                target,
                &*store.fs,
                &store.durable_dirs,
                store.busy_timeout(),
            ),
        }
    }

    /// Runs `machine` to its end.
    pub(crate) fn run<M: Machine<Error>>(&mut self, machine: &mut M) {
        drive(machine, |effect| Some(self.execute(effect)));
    }

    /// Where the rename put the document, once (taken).
    pub(crate) fn take_renamed(&mut self) -> Option<PathBuf> {
        self.files.take_renamed()
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
        if let Some(input) = self.files.execute(&effect) {
            return input;
        }
        let store = self.store;
        let target = self.target;
        match effect {
            Effect::ReadCommittedLease => result(
                rows::read_lease(&store.conn, target).map_err(|e| store.busy_aware(e)),
                Input::Lease,
            ),
            Effect::Begin => {
                // Every machine takes the target lock first, which sets what is left to wait.
                let deadline = self.files.wait_deadline().unwrap_or_else(Instant::now);
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
            Effect::LockTarget
            | Effect::ReadCurrent
            | Effect::PrepareDir
            | Effect::SyncParents
            | Effect::RemoveOrphans
            | Effect::WriteTemp(_)
            | Effect::RemoveTemp
            | Effect::Rename
            | Effect::SyncDir
            | Effect::UnlockTarget => unreachable!("file effects are executed by FileSteps"),
            Effect::Finished => unreachable!("`drive` stops at Finished"),
        }
    }
}
