//! The executor of the core's lease machines (`solewriter_core::projection::machine`): one `match` that
//! carries out each effect the machine names — against the SQLite store, and through
//! [`FileSteps`] (shared with every other executor) against the file system and the
//! per-target kernel lock — and hands the result back. It decides nothing: every decision,
//! and the order of every step, is the machine's, which is exactly the sequence the model
//! checkers explore (`solewriter-models` executes the same machines).

use crate::error::{Error, Result};
use crate::projection::probe::PublishProbe;
use crate::projection::rows;
use crate::projection::store::{ProjectionStore, WriteTx};
use rusqlite::Connection;
use solewriter_core::projection::machine::{
    run, Answer, Effect, LeaseInput, LeaseProtocol, Machine, StoreEffect,
};
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

    /// Runs `machine` to its end and returns its result ([`Error::Protocol`] for an executor
    /// bug, which the machine refused instead of panicking; the open transaction, if any, is
    /// rolled back when the executor is dropped).
    pub(crate) fn run<M: Machine<Protocol = LeaseProtocol<Error>>>(
        &mut self,
        machine: M,
    ) -> Result<M::Output> {
        Ok(run(machine, |effect| self.execute(effect))?)
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

    fn execute(&mut self, effect: Effect<'_, Error>) -> Answer<LeaseInput<Error>> {
        self.probe.before(effect.name(), self.target, self.epoch);
        let store = self.store;
        let target = self.target;
        match effect {
            Effect::File(effect) => self.files.execute(effect),
            Effect::Clock(ask) => ask.answer(store.options.clock.now()),
            Effect::Reached(step, ask) => {
                self.probe.reached(step, target, self.epoch);
                ask.answer(())
            }
            Effect::Store(StoreEffect::ReadCommittedLease(ask)) => {
                ask.answer(rows::read_lease(&store.conn, target).map_err(|e| store.busy_aware(e)))
            }
            Effect::Store(StoreEffect::Begin(ask)) => {
                // Every machine takes the target lock first, which sets what is left to wait.
                let deadline = self.files.wait_deadline().unwrap_or_else(Instant::now);
                ask.answer(store.begin_by(deadline).map(|tx| self.tx = Some(tx)))
            }
            Effect::Store(StoreEffect::ReadLease(ask)) => {
                ask.answer(rows::read_lease(self.conn(), target))
            }
            Effect::Store(StoreEffect::ReadChannels(ask)) => {
                ask.answer(rows::read_channels(self.conn(), target))
            }
            Effect::Store(StoreEffect::WriteGrant(plan, ask)) => {
                ask.answer(rows::write_acquire(self.conn(), plan))
            }
            Effect::Store(StoreEffect::WriteRelease(plan, ask)) => {
                ask.answer(rows::execute_release(self.conn(), plan))
            }
            Effect::Store(StoreEffect::Commit(ask)) => ask.answer(match self.tx.take() {
                Some(tx) => tx.commit().map_err(|e| store.map_err(e)),
                None => Err(Error::CorruptRow("commit without a transaction".into())),
            }),
            Effect::Store(StoreEffect::Rollback(ask)) => {
                if let Some(tx) = self.tx.take() {
                    if let Err(error) = tx.rollback() {
                        tracing::error!(%error, "rollback failed");
                    }
                }
                // After a failed commit or rollback: make sure the connection is not left inside
                // the transaction (it would keep the write lock).
                store.abandon_transaction();
                ask.answer(Ok(()))
            }
        }
    }
}
