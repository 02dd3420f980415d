//! The executor of the core's lease machines (`solewriter_core::projection::machine`), for one
//! target or a batch of them: one `match` that carries out each effect the machine names — against the SQLite store, and through
//! [`FileSteps`] (shared with every other executor) against the file system and the
//! per-target kernel lock — and hands the result back. It decides nothing: every decision,
//! and the order of every step, is the machine's, which is exactly the sequence the model
//! checkers explore (`solewriter-models` executes the same machines).

use crate::error::{Error, Result};
use crate::projection::probe::PublishProbe;
use crate::projection::rows;
use crate::projection::store::{ProjectionStore, WriteTx};
use rusqlite::Connection;
use solewriter_core::projection::machine::publish_many::{Part, PublishMany, TargetEnd};
use solewriter_core::projection::machine::{
    run, Answer, Effect, LeaseInput, LeaseProtocol, Machine, ProtocolError, StoreEffect, Targeted,
};
use solewriter_core::projection::target::TargetId;
use solewriter_files::parts::{run_parts, Relay};
use solewriter_files::steps::FileSteps;
use std::path::PathBuf;
use std::time::Instant;

/// The state one run of a machine needs: the store's side ([`Here`]: the open transaction)
/// and, per target, the file steps (the target lock, the target directory, the temp file).
pub(crate) struct Executor<'s> {
    // Field order is drop order, which matters only when a run unwinds (a panic): the
    // transaction rolls back, then the temp files are removed and the target locks let go.
    here: Here<'s>,
    /// The targets of the run (one, but for a batch) and their file steps.
    targets: Vec<(&'s TargetId, FileSteps<'s>)>,
}

/// What runs on the executor's own thread: the store (its connection, the open transaction),
/// the clock and the probe.
struct Here<'s> {
    store: &'s ProjectionStore,
    epoch: u64,
    probe: &'s dyn PublishProbe,
    tx: Option<WriteTx<'s>>,
}

/// The savepoint every target of a batch writes under (one at a time).
const SAVEPOINT: &str = "solewriter_target";

impl<'s> Executor<'s> {
    /// An executor for a machine on `target` (the grant's `epoch`, for the probe).
    pub(crate) fn new(
        store: &'s ProjectionStore,
        target: &'s TargetId,
        epoch: u64,
        probe: &'s dyn PublishProbe,
    ) -> Self {
        Self::many(store, std::slice::from_ref(target), epoch, probe)
    }

    /// An executor for a batch on `targets` (in the batch's order).
    pub(crate) fn many(
        store: &'s ProjectionStore,
        targets: &'s [TargetId],
        epoch: u64,
        probe: &'s dyn PublishProbe,
    ) -> Self {
        let files = |target| {
            FileSteps::new(
                &store.options.runtime_root,
                target,
                &*store.fs,
                &store.durable_dirs,
                store.busy_timeout(),
            )
        };
        Executor {
            here: Here {
                store,
                epoch,
                probe,
                tx: None,
            },
            targets: targets.iter().map(|t| (t, files(t))).collect(),
        }
    }

    /// Runs `machine` to its end and returns its result ([`Error::Protocol`] for an executor
    /// bug, which the machine refused instead of panicking; the open transaction, if any, is
    /// rolled back when the executor is dropped).
    pub(crate) fn run<M: Machine<Protocol = LeaseProtocol<Error>>>(
        &mut self,
        machine: M,
    ) -> Result<M::Output> {
        Ok(run(machine, |effect| self.execute(0, effect))?)
    }

    /// Runs a batch to its end: each effect on the target it names (the shared transaction's
    /// on none), and the batch's lock-free parts (each target's draft before the transaction,
    /// its directory fsync after it) on a thread per target, so that their fsyncs overlap.
    pub(crate) fn run_many(
        &mut self,
        mut batch: PublishMany<'_, Error>,
    ) -> Result<Vec<TargetEnd<Error>>> {
        loop {
            if let Some(mut parts) = batch.parts() {
                self.run_parts(parts.each());
                parts.join()?;
                continue;
            }
            let Some(Targeted { target, effect }) = batch.poll() else {
                return Ok(batch.output()?);
            };
            let answer = self.execute(target.unwrap_or(0), effect);
            batch.handle(answer)?;
        }
    }

    /// Runs each part to its end, on a thread of its own, which carries out its target's file
    /// effects (a part names nothing else but reached points); this thread shows each effect
    /// to the probe first (the probe is this thread's), unless the probe observes nothing.
    fn run_parts(&mut self, parts: Vec<(usize, Part<'_, '_, Error>)>) {
        let Executor { here, targets } = self;
        let relay = match here.probe.observes() {
            true => Relay::Every,
            false => Relay::Nothing,
        };
        let ids: Vec<&TargetId> = targets.iter().map(|(target, _)| *target).collect();
        let files = targets.iter_mut().map(|(_, files)| files).collect();
        run_parts(parts, files, relay, |i, name, reached| {
            here.probe.before(name, ids[i], here.epoch);
            if let Some(step) = reached {
                here.probe.reached(step, ids[i], here.epoch);
            }
        });
    }

    /// Where the rename of the run's `i`-th target put the document, once (taken).
    pub(crate) fn take_renamed(&mut self, i: usize) -> Option<PathBuf> {
        self.targets
            .get_mut(i)
            .and_then(|(_, files)| files.take_renamed())
    }

    /// Carries out `effect` of the run's `i`-th target.
    fn execute(&mut self, i: usize, effect: Effect<'_, Error>) -> Answer<LeaseInput<Error>> {
        let (target, files) = &mut self.targets[i];
        self.here
            .probe
            .before(effect.name(), target, self.here.epoch);
        match effect {
            Effect::File(effect) => files.execute(effect),
            effect => {
                let targets = &self.targets;
                // Every machine takes its target locks first, which set what is left to wait
                // (for a batch, what the longest of its lock waits left).
                let deadline = || {
                    targets
                        .iter()
                        .filter_map(|(_, files)| files.wait_deadline())
                        .min()
                        .unwrap_or_else(Instant::now)
                };
                self.here.execute(targets[i].0, effect, deadline)
            }
        }
    }
}

impl Here<'_> {
    /// The connection of the open transaction, or the plain connection outside one.
    fn conn(&self) -> &Connection {
        match &self.tx {
            Some(tx) => tx,
            None => &self.store.conn,
        }
    }

    /// `sql` inside the open transaction — refused, touching nothing, once the store has
    /// ended it under an earlier failure (a statement would otherwise run on its own).
    fn in_tx(&self, sql: &str) -> Result<()> {
        match &self.tx {
            Some(tx) if !tx.is_autocommit() => {
                tx.execute_batch(sql).map_err(|e| self.store.map_err(e))
            }
            _ => Err(Error::Sqlite(rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_ABORT),
                Some("the store rolled the write transaction back".into()),
            ))),
        }
    }

    /// Carries out `effect` on `target`: the store's, the clock's or a reached point (a file
    /// effect is its target's file steps'). `deadline`: until when a transaction begun now
    /// may wait.
    fn execute(
        &mut self,
        target: &TargetId,
        effect: Effect<'_, Error>,
        deadline: impl FnOnce() -> Instant,
    ) -> Answer<LeaseInput<Error>> {
        let store = self.store;
        match effect {
            Effect::File(effect) => effect.fail(Error::Protocol(ProtocolError::WrongAnswer {
                machine: "executor",
                answered: "a file effect",
            })),
            Effect::Clock(ask) => ask.answer(store.options.clock.now()),
            Effect::Reached(step, ask) => {
                self.probe.reached(step, target, self.epoch);
                ask.answer(())
            }
            Effect::Store(StoreEffect::ReadCommittedLease(ask)) => {
                ask.answer(rows::read_lease(&store.conn, target).map_err(|e| store.busy_aware(e)))
            }
            Effect::Store(StoreEffect::Begin(ask)) => {
                ask.answer(store.begin_by(deadline()).map(|tx| self.tx = Some(tx)))
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
            Effect::Store(StoreEffect::Savepoint(ask)) => {
                ask.answer(self.in_tx(&format!("SAVEPOINT {SAVEPOINT}")))
            }
            Effect::Store(StoreEffect::ReleaseSavepoint(ask)) => {
                ask.answer(self.in_tx(&format!("RELEASE {SAVEPOINT}")))
            }
            Effect::Store(StoreEffect::RollbackToSavepoint(ask)) => {
                ask.answer(self.in_tx(&format!("ROLLBACK TO {SAVEPOINT}; RELEASE {SAVEPOINT}")))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::projection::probe::NoProbe;
    use crate::projection::store::StoreOptions;
    use solewriter_core::config::TimingConfig;
    use solewriter_core::projection::channel::ChannelRegistry;
    use solewriter_core::projection::target::TargetTuple;
    use solewriter_core::time::Millis;
    use solewriter_files::runtime::RuntimeRoot;
    use std::sync::Arc;

    fn store(dir: &std::path::Path) -> ProjectionStore {
        let timing = TimingConfig::from_values(Some(60_000), Some(1_000)).unwrap();
        let db_path = dir.join("store.sqlite");
        ProjectionStore::initialize(&db_path, &timing).unwrap();
        ProjectionStore::open(&StoreOptions::new(
            &db_path,
            RuntimeRoot::new(dir),
            timing,
            ChannelRegistry::new([]).unwrap(),
            Arc::new(ManualClock::new(Millis(1))),
        ))
        .unwrap()
    }

    fn scratch_tables(store: &ProjectionStore) -> i64 {
        store
            .conn
            .query_row("SELECT count(*) FROM sqlite_temp_master", [], |r| r.get(0))
            .unwrap()
    }

    /// A savepoint runs only inside the executor's open transaction: once the store has
    /// ended that transaction under it (a statement would otherwise open one of its own, or
    /// run on its own), it is refused and nothing is written. Rolled back to, it undoes what
    /// was written since, and the transaction goes on.
    #[test]
    fn a_savepoint_is_kept_inside_the_open_transaction_only() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(dir.path());
        let target = TargetTuple::new(["1", "c", "a", "h", "i", "w", "k"])
            .unwrap()
            .target_id();
        let mut executor = Executor::new(&store, &target, 0, &NoProbe);
        // No transaction: refused.
        assert!(executor.here.in_tx("SAVEPOINT s").is_err());
        assert!(store.conn.is_autocommit());
        executor.here.tx = Some(store.begin_by(Instant::now()).unwrap());
        executor.here.in_tx("SAVEPOINT s").unwrap();
        executor
            .here
            .in_tx("CREATE TEMP TABLE scratch (x)")
            .unwrap();
        assert_eq!(scratch_tables(&store), 1);
        executor.here.in_tx("ROLLBACK TO s; RELEASE s").unwrap();
        assert_eq!(scratch_tables(&store), 0, "rolled back to the savepoint");
        assert!(!store.conn.is_autocommit(), "the transaction goes on");
        // The store ends the transaction behind the executor's back.
        store.conn.execute_batch("ROLLBACK").unwrap();
        assert!(executor.here.in_tx("SAVEPOINT s").is_err());
        assert!(store.conn.is_autocommit(), "no transaction was opened");
        executor.here.tx = None;
    }
}
