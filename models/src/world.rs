//! The model world and its transactions. Admission and submission are one serialized
//! transaction each (the store mutex held throughout, as SQLite's write lock is). Acquisition,
//! publication and release are the core's machines, run on this world in [`crate::runs`] by the
//! model's [`Executor`](crate::executor), which holds the target lock and the store mutex
//! across effects where the adapter holds its locks. File operations take the file-system mutex; the clock is its own mutex; the last
//! committed state is also kept in a snapshot readable without the write lock (as SQLite's WAL
//! readers see it). Lock order: target → store → snapshot → fs → clock → ghost.

use crate::design::Design;
use crate::ghost::{Ghost, ReaderCheck};
use crate::shim::Shim;
use crate::state::{FsState, StoreState};
use solewriter_core::config::LeaseTtl;
use solewriter_core::projection::channel::{
    ChannelRecord, ChannelRegistry, ProducerId, Submission,
};
use solewriter_core::projection::lease::LeaseRecord;
use solewriter_core::projection::profile::Profile;
use solewriter_core::projection::target::{TargetId, TargetTuple};
use solewriter_core::projection::watermark::{
    decide_submission, SubmissionPlan, SubmissionRejected,
};
use solewriter_core::time::Millis;
use solewriter_core::ErrorKind;

/// Number of target-lock stripes: targets share a stripe by their id's first byte (a coarser
/// exclusion than one lock per target, never a finer one).
const TARGET_LOCKS: usize = 4;

/// Failures that are not lease outcomes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ModelError {
    /// The target is not admitted.
    NotAdmitted,
    /// The epoch cannot rise further.
    EpochExhausted,
    /// A lock was held by a frozen process (the world's contenders give up).
    Busy,
    /// A submission was rejected.
    Rejected(SubmissionRejected),
    /// An injected fault made this effect fail.
    Failed(&'static str),
    /// Another failure of the lease operation, of the kind the core gives it (a row that
    /// changed under the write lock, an inconsistent row, a refused effect).
    Other(ErrorKind),
}

/// What a submission did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SubmitKind {
    /// First row.
    Inserted,
    /// Higher watermark.
    Advanced,
    /// Identical replay.
    Replayed,
    /// Source conflict.
    Degraded,
}

enum Tx<R> {
    Commit(R),
    Rollback(R),
}

/// The model world: store, runtime directory, clock, checker.
pub struct World<S: Shim> {
    pub(crate) design: Design,
    pub(crate) registry: ChannelRegistry,
    pub(crate) ttl: LeaseTtl,
    /// The per-target kernel locks (striped).
    target_locks: Vec<S::Mutex<()>>,
    /// The committed store; holding this mutex is holding SQLite's write lock.
    pub(crate) store: S::Mutex<StoreState>,
    /// The last committed state, readable without the write lock (SQLite's WAL snapshot).
    pub(crate) snapshot: S::Mutex<StoreState>,
    pub(crate) fs: S::Mutex<FsState>,
    clock: S::Mutex<Millis>,
    pub(crate) ghost: S::Mutex<Ghost>,
    /// Publications now between their revalidation and their rename (the dangerous span).
    pub(crate) in_span: std::sync::atomic::AtomicUsize,
    /// Lock attempts (`LockTarget`, `Begin`) made while a publication was in that span: each
    /// had to wait for the holder, which is the interleaving the proof is about.
    contended: std::sync::atomic::AtomicUsize,
    /// Publications whose draft was not confirmed inside the transaction (the rows moved, or
    /// a one-shot was granted another epoch) and was composed and written again.
    redrafted: std::sync::atomic::AtomicUsize,
    /// A lock held by another answers `Busy` at once instead of being waited for.
    give_up: std::sync::atomic::AtomicBool,
    /// Faults injected, and of those, commits that failed after their run renamed.
    faults: std::sync::atomic::AtomicUsize,
    commits_failed_after_rename: std::sync::atomic::AtomicUsize,
    /// Transactions the store rolled back under an injected failure (`Fault::ends_transaction`).
    transactions_ended: std::sync::atomic::AtomicUsize,
    /// Every publication answered published is checked to have its document in place
    /// ([`World::checking_acknowledged`]).
    pub(crate) check_acknowledged: bool,
}

impl<S: Shim> World<S> {
    /// A fresh world running `design`.
    pub fn new(design: Design, registry: ChannelRegistry, ttl: LeaseTtl, start: Millis) -> Self {
        World {
            design,
            registry,
            ttl,
            target_locks: (0..TARGET_LOCKS).map(|_| S::mutex(())).collect(),
            store: S::mutex(StoreState::default()),
            snapshot: S::mutex(StoreState::default()),
            fs: S::mutex(FsState::default()),
            clock: S::mutex(start),
            ghost: S::mutex(Ghost::new(ttl.as_millis())),
            in_span: Default::default(),
            contended: Default::default(),
            redrafted: Default::default(),
            give_up: Default::default(),
            faults: Default::default(),
            commits_failed_after_rename: Default::default(),
            transactions_ended: Default::default(),
            check_acknowledged: false,
        }
    }

    /// The world checks, after every publication answered published, that its document (or a
    /// later one) is in place: nothing acknowledged is lost. A check the fault model needs
    /// (a fault could make a machine claim a rename that did not happen); it reads the file
    /// system once more after each publication, which is one more point where the schedulers
    /// may switch threads, so the scenarios without faults leave it off (their schedule spaces,
    /// and the figures FENCING.md quotes, stay as they are).
    pub fn checking_acknowledged(mut self) -> Self {
        self.check_acknowledged = true;
        self
    }

    /// How many faults were injected, and how many of them failed a commit after its run had
    /// renamed a document (non-vacuity of the fault model).
    pub fn faults(&self) -> (usize, usize) {
        use std::sync::atomic::Ordering::SeqCst;
        (
            self.faults.load(SeqCst),
            self.commits_failed_after_rename.load(SeqCst),
        )
    }

    /// How many transactions the store rolled back under an injected failure (non-vacuity of
    /// [`Fault::ends_transaction`](crate::executor::Fault::ends_transaction)).
    pub fn transactions_ended(&self) -> usize {
        self.transactions_ended
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    pub(crate) fn note_transaction_ended(&self) {
        self.transactions_ended
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    pub(crate) fn note_fault(&self, commit_after_rename: bool) {
        use std::sync::atomic::Ordering::SeqCst;
        self.faults.fetch_add(1, SeqCst);
        if commit_after_rename {
            self.commits_failed_after_rename.fetch_add(1, SeqCst);
        }
    }

    /// From now on a lock held by another (a frozen process) answers `Busy` at once — as the
    /// busy timeout would, sooner or later — instead of being waited for.
    pub fn contenders_give_up(&self) {
        self.give_up
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    pub(crate) fn gives_up(&self) -> bool {
        self.give_up.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The broker clock.
    pub fn now(&self) -> Millis {
        S::with(&self.clock, |c| *c)
    }

    /// Moves the clock forward.
    pub fn advance(&self, ms: u64) {
        S::with(&self.clock, |c| *c = c.plus_ms(ms));
    }

    /// Sets the clock (backwards jumps allowed).
    pub fn set_clock(&self, to: Millis) {
        S::with(&self.clock, |c| *c = to);
    }

    /// How many lock attempts were made while a publication was between its revalidation and
    /// its rename (non-vacuity: the checkers reached the interleaving that fencing is about).
    pub fn contended_in_span(&self) -> usize {
        self.contended.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// How many publications composed and wrote their document again inside the transaction
    /// (non-vacuity: the checkers reached the draft that must not be published).
    pub fn redrafted(&self) -> usize {
        self.redrafted.load(std::sync::atomic::Ordering::SeqCst)
    }

    pub(crate) fn note_redraft(&self) {
        self.redrafted
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    /// Counts a lock attempt if a publication is in its dangerous span now.
    pub(crate) fn note_lock_attempt(&self) {
        use std::sync::atomic::Ordering::SeqCst;
        if self.in_span.load(SeqCst) > 0 {
            self.contended.fetch_add(1, SeqCst);
        }
    }

    /// The kernel lock of `target`'s stripe.
    pub(crate) fn target_lock(&self, target: &TargetId) -> &S::Mutex<()> {
        let first = target.as_str().as_bytes().first().copied().unwrap_or(0);
        &self.target_locks[usize::from(first) % TARGET_LOCKS]
    }

    /// Refuses a batch whose targets share a lock stripe (it would wait for its own lock): the
    /// model stripes its target locks, a coarser exclusion the batch's scenarios must avoid.
    pub(crate) fn distinct_target_locks(&self, targets: &[TargetId]) {
        for (i, target) in targets.iter().enumerate() {
            let lock = self.target_lock(target);
            if let Some(other) = targets[..i]
                .iter()
                .find(|other| std::ptr::eq(self.target_lock(other), lock))
            {
                panic!("the model's target locks are striped ({TARGET_LOCKS} stripes): {other} and {target} share one, and a batch of both would wait for its own lock");
            }
        }
    }

    fn transaction<R>(&self, f: impl FnOnce(&mut StoreState) -> Tx<R>) -> R {
        S::with(&self.store, |committed| {
            let mut work = committed.clone();
            match f(&mut work) {
                Tx::Commit(r) => {
                    S::with(&self.ghost, |g| g.on_commit(&work));
                    S::with(&self.snapshot, |snap| *snap = work.clone());
                    *committed = work;
                    r
                }
                Tx::Rollback(r) => r,
            }
        })
    }

    /// A copy of the committed store.
    pub fn store(&self) -> StoreState {
        S::with(&self.store, |s| s.clone())
    }

    /// The bytes of `current.json` of `target`.
    pub fn current(&self, target: &TargetId) -> Option<Vec<u8>> {
        S::with(&self.fs, |fs| {
            fs.dirs.get(target).and_then(|d| d.current.clone())
        })
    }

    /// Number of temp siblings of `target`.
    pub fn temp_count(&self, target: &TargetId) -> usize {
        S::with(&self.fs, |fs| {
            fs.dirs.get(target).map_or(0, |d| d.temps.len())
        })
    }

    /// Reads `current.json` of `target` and checks it with `reader`.
    pub fn read(&self, target: &TargetId, reader: &mut ReaderCheck) {
        S::with(&self.fs, |fs| {
            reader.observe(fs.dirs.get(target).and_then(|d| d.current.as_deref()))
        });
    }

    /// Admits a target (idempotent).
    pub fn admit(&self, tuple: &TargetTuple) -> TargetId {
        let target = tuple.target_id();
        self.transaction(|tx| {
            tx.leases
                .entry(target.clone())
                .or_insert_with(|| LeaseRecord::admitted(target.clone()));
            Tx::Commit(())
        });
        target
    }

    /// A producer submission.
    pub fn submit(
        &self,
        producer: &ProducerId,
        submission: &Submission,
    ) -> Result<SubmitKind, ModelError> {
        self.transaction(|tx| {
            let admitted = tx.leases.contains_key(&submission.target_id);
            let key = (submission.target_id.clone(), submission.channel.clone());
            let now = self.now();
            let plan = match decide_submission(
                Profile::Generic,
                &self.registry,
                producer,
                admitted,
                tx.channels.get(&key),
                submission,
                now,
            ) {
                Ok(plan) => plan,
                Err(rejected) => return Tx::Rollback(Err(ModelError::Rejected(rejected))),
            };
            let mut put = |record: ChannelRecord| tx.channels.insert(key.clone(), record);
            let kind = match plan {
                SubmissionPlan::Insert(r) => {
                    put(r);
                    SubmitKind::Inserted
                }
                SubmissionPlan::Advance(r) => {
                    put(r);
                    SubmitKind::Advanced
                }
                SubmissionPlan::Replay => SubmitKind::Replayed,
                SubmissionPlan::Degrade { record } => {
                    put(record);
                    SubmitKind::Degraded
                }
            };
            Tx::Commit(Ok(kind))
        })
    }
}
