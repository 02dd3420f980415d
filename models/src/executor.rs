//! The model's executor of the core's lease machines (`solewriter_core::projection::machine`): the same
//! machines the SQLite adapter runs, for one target or a batch of them, executed against the
//! model store, the model runtime directory and the model clock. The target locks and the
//! store's transaction are shim mutexes whose guards are held across effects exactly where the
//! adapter holds its locks, so loom and shuttle may switch threads at every lock acquisition
//! inside a publication.
//!
//! A run holds the store's transaction once (`Tx`) and, per target, what that target's
//! effects need (`Lane`: its lock guard, its temp file, the credential it publishes with,
//! whether it renamed): one lane for a one-target machine, one per target for a batch
//! (`ModelProtocol` routes each effect to the lane it names, and a batch's own transaction
//! effects to the transaction).
//!
//! With [`Design::Real`] this executor does what the adapter does, effect for effect. Each
//! trap of [`Design`] is a *misbehaving executor*: it runs the same machine but carries out
//! some effects wrongly (drops a lock early, answers a read from memory, writes with a weaker
//! condition, writes in place), which is how a broken adapter would look.

use crate::design::Design;
use crate::ghost::Renamer;
use crate::shim::Shim;
use crate::state::StoreState;
use crate::world::World;
use solewriter_core::contract::Protocol;
use solewriter_core::error_kind::{Classified, ErrorKind};
use solewriter_core::projection::lease::{Credential, LeaseRecord, LeaseState};
use solewriter_core::projection::machine::publish_many::PublishMany;
use solewriter_core::projection::machine::{
    drive, Answer, BatchProtocol, Effect, FileEffect, LeaseInput, LeaseProtocol, Machine,
    StoreEffect, Targeted,
};
use solewriter_core::projection::publication::PublishStep;
use solewriter_core::projection::target::TargetId;
use solewriter_core::projection::ProjectionDocument;
use solewriter_core::time::Millis;

/// What the model's effects can fail with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModelFault {
    /// A trap's own guard refused (the JSON-epoch compare).
    Refused,
    /// A lock was held by another and the world's contenders give up at once
    /// ([`World::contenders_give_up`]): the busy timeout passed while its holder stayed frozen.
    Busy,
    /// An injected fault ([`Fault`]) made this effect fail: an I/O error, no space, a failed
    /// fsync or commit.
    Injected(&'static str),
}

/// The model's own error, as a core outcome that carries it takes its kind: a trap's guard that
/// refused stands where the real executor's fence would (lost authority), a lock its holder
/// kept frozen is contention, an injected fault is the environment's.
impl Classified for ModelFault {
    fn kind(&self) -> ErrorKind {
        match self {
            ModelFault::Refused => ErrorKind::LostAuthority,
            ModelFault::Busy => ErrorKind::Contention,
            ModelFault::Injected(_) => ErrorKind::Environment,
        }
    }
}

/// A fault injected into one run of a machine: its `at`-th store or file effect (counted from
/// 0; the unlock and the rollback, which no executor fails, are not counted) answers
/// [`ModelFault::Injected`] without being carried out — except a commit with `applied`, which
/// is carried out and then answered failed (a commit whose outcome the executor cannot know).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fault {
    /// Which effect of the run fails.
    pub at: usize,
    /// A failing commit took effect all the same.
    pub applied: bool,
    /// A failing statement inside the transaction took the transaction with it: the store
    /// rolled it back (SQLite may, on a full disk or an I/O error). Until the run's next
    /// `BEGIN` or rollback its statements then run on their own (each committed at once), a
    /// savepoint is refused ([`ModelFault::Injected`], as the adapter refuses one) and a
    /// commit fails.
    pub ends_transaction: bool,
}

/// Where a run of a machine stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stop {
    /// The machine ended.
    Finished,
    /// The executor crashed at this step (its locks dropped, its transaction rolled back).
    Crashed(PublishStep),
    /// The executor froze before this effect, keeping every lock it held.
    Frozen(&'static str),
}

/// Which machine the executor runs (a trap may misbehave in one and not another).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Acquire,
    Publish,
    /// A one-shot publication (grant, publish and release in one envelope).
    PublishNow,
    Release,
}

/// The protocols the model's executor runs: the lease machines' (every effect on the one
/// target of the run) and the batch's (every effect on the target it names, or on the shared
/// transaction).
pub(crate) trait ModelProtocol: Protocol<Input = LeaseInput<ModelFault>> {
    /// The lane `effect` is for (`None`: the shared transaction's own), and the effect.
    fn route<'m>(effect: Self::Effect<'m>) -> (Option<usize>, Effect<'m, ModelFault>);
}

impl ModelProtocol for LeaseProtocol<ModelFault> {
    fn route<'m>(effect: Self::Effect<'m>) -> (Option<usize>, Effect<'m, ModelFault>) {
        (Some(0), effect)
    }
}

impl ModelProtocol for BatchProtocol<ModelFault> {
    fn route<'m>(
        Targeted { target, effect }: Self::Effect<'m>,
    ) -> (Option<usize>, Effect<'m, ModelFault>) {
        (target, effect)
    }
}

/// The store's write transaction of a run (one for every target of a batch).
struct Tx<'w, S: Shim> {
    world: &'w World<S>,
    /// The write lock and the transaction's working state.
    open: Option<(S::Guard<'w, StoreState>, StoreState)>,
    /// The working state at the open savepoint (a batch's target).
    saved: Option<StoreState>,
    /// The store rolled the transaction back under a failure ([`Fault::ends_transaction`]).
    ended: bool,
}

impl<'w, S: Shim> Tx<'w, S> {
    /// `BEGIN` — or, when the world's contenders give up, `Busy` if another holds the store's
    /// lock. An unguarded run (a trap) only counts the attempt.
    fn begin(&mut self, guarded: bool) -> Result<(), ModelFault> {
        let world = self.world;
        self.ended = false;
        world.note_lock_attempt();
        if guarded {
            if self.open.is_none() && world.gives_up() {
                let Some(guard) = S::try_lock(&world.store) else {
                    return Err(ModelFault::Busy);
                };
                let work = guard.clone();
                self.open = Some((guard, work));
            }
            self.work();
        }
        Ok(())
    }

    /// The working state of the open transaction, opened now if the run had left it (the
    /// traps that commit early open a second transaction for the release).
    fn work(&mut self) -> &mut StoreState {
        let store = &self.world.store;
        let (_, work) = self.open.get_or_insert_with(|| {
            let guard = S::lock(store);
            let work = guard.clone();
            (guard, work)
        });
        work
    }

    fn commit(&mut self) {
        self.saved = None;
        if let Some((mut guard, work)) = self.open.take() {
            S::with(&self.world.ghost, |g| g.on_commit(&work));
            S::with(&self.world.snapshot, |snap| *snap = work.clone());
            *guard = work;
        }
    }

    fn rollback(&mut self) {
        self.saved = None;
        self.open = None;
        self.ended = false;
    }

    /// The store rolls the open transaction back under a failure (if one is open).
    fn end(&mut self) {
        if self.open.take().is_some() {
            self.saved = None;
            self.ended = true;
            self.world.note_transaction_ended();
        }
    }

    /// A statement run once the store had ended the transaction committed on its own.
    fn settle(&mut self) {
        if self.ended {
            self.commit();
        }
    }

    /// An effect on the transaction itself: a batch's begin, commit and rollback (named for no
    /// target), and a target's savepoint, commit or rollback.
    fn execute(&mut self, effect: Effect<'_, ModelFault>) -> Answer<LeaseInput<ModelFault>> {
        if self.ended {
            if let Effect::Store(
                effect @ (StoreEffect::Savepoint(_)
                | StoreEffect::ReleaseSavepoint(_)
                | StoreEffect::RollbackToSavepoint(_)
                | StoreEffect::Commit(_)),
            ) = effect
            {
                // No transaction is open any more: refused, touching nothing.
                let name = effect.name();
                return effect.fail(ModelFault::Injected(name));
            }
        }
        match effect {
            Effect::Store(StoreEffect::Begin(ask)) => ask.answer(self.begin(true)),
            Effect::Store(StoreEffect::Savepoint(ask)) => {
                self.saved = Some(self.work().clone());
                ask.answer(Ok(()))
            }
            Effect::Store(StoreEffect::ReleaseSavepoint(ask)) => {
                self.saved = None;
                ask.answer(Ok(()))
            }
            Effect::Store(StoreEffect::RollbackToSavepoint(ask)) => {
                if let Some(saved) = self.saved.take() {
                    *self.work() = saved;
                }
                ask.answer(Ok(()))
            }
            Effect::Store(StoreEffect::Commit(ask)) => {
                self.commit();
                ask.answer(Ok(()))
            }
            Effect::Store(StoreEffect::Rollback(ask)) => {
                self.rollback();
                ask.answer(Ok(()))
            }
            other => crate::ghost::violation(format!(
                "the model's executor: {} is a target's effect, named for no target",
                other.name()
            )),
        }
    }
}

/// One target's part of a run: what its effects act on and what its holder knows.
struct Lane<'w, S: Shim> {
    world: &'w World<S>,
    kind: Kind,
    target: TargetId,
    /// The credential of a publication or release.
    credential: Option<Credential>,
    /// The grant as the holder remembers it (what the traps that skip revalidation trust).
    granted: Option<LeaseRecord>,
    /// Its expiry as the holder believes it.
    expires_at: Millis,
    target_guard: Option<S::Guard<'w, ()>>,
    temp: Option<u64>,
    lease_reads: usize,
    /// The true clock at the last clock read (the ghost's bounded-lease check).
    last_clock: Millis,
    /// The document written to the temp file.
    document: Vec<u8>,
    /// Between the revalidation and the rename (counted in the world's `in_span`).
    in_span: bool,
    /// Whether this target renamed a document.
    renamed: bool,
}

/// One run of one machine: its transaction, and one lane per target (one, but for a batch).
pub(crate) struct Executor<'w, S: Shim> {
    crash_at: Option<PublishStep>,
    tx: Tx<'w, S>,
    lanes: Vec<Lane<'w, S>>,
    /// Effects executed so far (where a freeze is counted from).
    effects: usize,
    /// The fault to inject, if any, and how many failable effects ran so far.
    fault: Option<Fault>,
    failable: usize,
}

impl<'w, S: Shim> Executor<'w, S> {
    /// A run of a `kind` machine on `target`.
    pub(crate) fn new(world: &'w World<S>, kind: Kind, target: TargetId) -> Self {
        Self::lanes(world, vec![(kind, target)])
    }

    /// A run of a batch of one-shot publications on `targets` (in the batch's order).
    pub(crate) fn many(world: &'w World<S>, targets: &[TargetId]) -> Self {
        let lanes = targets.iter().map(|t| (Kind::PublishNow, t.clone()));
        Self::lanes(world, lanes.collect())
    }

    fn lanes(world: &'w World<S>, lanes: Vec<(Kind, TargetId)>) -> Self {
        Executor {
            crash_at: None,
            tx: Tx {
                world,
                open: None,
                saved: None,
                ended: false,
            },
            lanes: lanes
                .into_iter()
                .map(|(kind, target)| Lane {
                    world,
                    kind,
                    target,
                    credential: None,
                    granted: None,
                    expires_at: Millis(0),
                    target_guard: None,
                    temp: None,
                    lease_reads: 0,
                    last_clock: Millis(0),
                    document: Vec::new(),
                    in_span: false,
                    renamed: false,
                })
                .collect(),
            effects: 0,
            fault: None,
            failable: 0,
        }
    }

    /// Inject `fault` into the run.
    pub(crate) fn fault(mut self, fault: Option<Fault>) -> Self {
        self.fault = fault;
        self
    }

    /// The injected failure of `effect`, if the fault falls on it.
    fn injected<'e>(
        &mut self,
        effect: Effect<'e, ModelFault>,
    ) -> Result<Answer<LeaseInput<ModelFault>>, Effect<'e, ModelFault>> {
        let failable = match &effect {
            Effect::Store(StoreEffect::Rollback(_)) | Effect::File(FileEffect::UnlockTarget(_)) => {
                false
            }
            Effect::Store(_) | Effect::File(_) => true,
            Effect::Clock(_) | Effect::Reached(..) => false,
        };
        if !failable {
            return Err(effect);
        }
        let index = self.failable;
        self.failable += 1;
        let Some(fault) = self.fault.filter(|f| f.at == index) else {
            return Err(effect);
        };
        let name = effect.name();
        let commit = matches!(effect, Effect::Store(StoreEffect::Commit(_)));
        if commit && fault.applied {
            self.tx.commit();
        }
        if fault.ends_transaction && matches!(effect, Effect::Store(_)) {
            self.tx.end();
        }
        let renamed = self.lanes.iter().any(|lane| lane.renamed);
        self.tx.world.note_fault(commit && renamed);
        match effect.fail(ModelFault::Injected(name)) {
            Some(failed) => Ok(failed),
            // Only the clock and a reached point cannot fail, and they are not failable.
            None => crate::ghost::violation("a failable effect that cannot fail".into()),
        }
    }

    /// The holder's credential, the grant as it remembers it, and its expiry (a one-target
    /// run).
    pub(crate) fn holder(mut self, credential: Credential, granted: LeaseRecord) -> Self {
        let lane = &mut self.lanes[0];
        lane.expires_at = granted.state.grant().map_or(Millis(0), |g| g.expires_at);
        lane.credential = Some(credential);
        lane.granted = Some(granted);
        self
    }

    /// Crash (stop, dropping the transaction and the locks) when `step` is reached.
    pub(crate) fn crash_at(mut self, step: Option<PublishStep>) -> Self {
        self.crash_at = step;
        self
    }

    /// Runs `machine`; `Some(step)` if the executor crashed there. A crash rolls back the open
    /// transaction and drops the target locks (the kernel drops a dead process's locks); temp
    /// files stay.
    pub(crate) fn run<M: Machine<Protocol: ModelProtocol>>(
        &mut self,
        machine: &mut M,
    ) -> Option<PublishStep> {
        let stop = self.advance(machine, None);
        self.let_go();
        match stop {
            Stop::Crashed(step) => Some(step),
            Stop::Finished | Stop::Frozen(_) => None,
        }
    }

    /// Runs `machine` until it ends, the executor crashes (at its `crash_at` step), or — with
    /// `freeze_at` — before the executor's `freeze_at`-th effect (counted over the whole run),
    /// where it freezes: it keeps every lock it holds until [`Executor::let_go`] (a process
    /// stopped there, SIGSTOP or a GC pause). A frozen run resumes with another call.
    pub(crate) fn advance<M: Machine<Protocol: ModelProtocol>>(
        &mut self,
        machine: &mut M,
        freeze_at: Option<usize>,
    ) -> Stop {
        self.advance_on(machine, None, freeze_at)
    }

    /// Runs a batch as the adapter does: its lock-free parts through [`PublishMany::parts`]
    /// (each part's machine to its end, the last target's first — nothing orders them, and
    /// the batch's own polling would run them first to last), every other effect through the
    /// batch; `Some(step)` if the executor crashed there.
    pub(crate) fn run_many(
        &mut self,
        batch: &mut PublishMany<'_, ModelFault>,
    ) -> Option<PublishStep> {
        let stop = loop {
            if let Some(mut parts) = batch.parts() {
                let mut stop = Stop::Finished;
                for (i, mut part) in parts.each().into_iter().rev() {
                    stop = self.advance_on(&mut part, Some(i), None);
                    if !matches!(stop, Stop::Finished) {
                        break;
                    }
                }
                if !matches!(stop, Stop::Finished) {
                    break stop;
                }
                if let Err(bug) = parts.join() {
                    crate::ghost::violation(format!("the model's executor: {bug}"));
                }
                continue;
            }
            let Some(effect) = batch.poll() else {
                break Stop::Finished;
            };
            let (lane, effect) = BatchProtocol::route(effect);
            let answer = match self.answer(lane, effect, None) {
                Ok(answer) => answer,
                Err(stop) => break stop,
            };
            if let Err(bug) = batch.handle(answer) {
                crate::ghost::violation(format!("the model's executor: {bug}"));
            }
        };
        self.let_go();
        match stop {
            Stop::Crashed(step) => Some(step),
            Stop::Finished | Stop::Frozen(_) => None,
        }
    }

    /// [`Self::advance`]; with `part`, every effect is that lane's (a batch's part speaks the
    /// one-target protocol for its target).
    fn advance_on<M: Machine<Protocol: ModelProtocol>>(
        &mut self,
        machine: &mut M,
        part: Option<usize>,
        freeze_at: Option<usize>,
    ) -> Stop {
        let mut stop = Stop::Finished;
        let driven = drive(machine, |effect| {
            let (lane, effect) = <M::Protocol as ModelProtocol>::route(effect);
            let lane = part.or(lane);
            match self.answer(lane, effect, freeze_at) {
                Ok(answer) => Some(answer),
                Err(stopped) => {
                    stop = stopped;
                    None
                }
            }
        });
        if let Err(bug) = driven {
            crate::ghost::violation(format!("the model's executor: {bug}"));
        }
        stop
    }

    /// Carries out `effect` on `lane` (`None`: the shared transaction) — or stops the run
    /// before it: frozen before the `freeze_at`-th effect, crashed at its `crash_at` step.
    fn answer(
        &mut self,
        lane: Option<usize>,
        effect: Effect<'_, ModelFault>,
        freeze_at: Option<usize>,
    ) -> Result<Answer<LeaseInput<ModelFault>>, Stop> {
        if freeze_at == Some(self.effects) {
            return Err(Stop::Frozen(effect.name()));
        }
        if let Effect::Reached(step, _) = &effect {
            if self.crash_at == Some(*step) {
                return Err(Stop::Crashed(*step));
            }
        }
        self.effects += 1;
        Ok(match self.injected(effect) {
            Ok(failed) => failed,
            Err(effect) => {
                let answer = match lane {
                    Some(i) => self.lanes[i].execute(&mut self.tx, effect),
                    None => self.tx.execute(effect),
                };
                self.tx.settle();
                answer
            }
        })
    }

    /// Lets every lock go: the transaction rolls back, the target locks are released (a
    /// machine that ended, or a process that died).
    pub(crate) fn let_go(&mut self) {
        for lane in &mut self.lanes {
            lane.leave_span();
        }
        self.tx.open = None;
        for lane in &mut self.lanes {
            lane.target_guard = None;
        }
    }

    /// Whether the run holds the store's write lock (is inside its transaction).
    pub(crate) fn in_transaction(&self) -> bool {
        self.tx.open.is_some()
    }

    /// Whether the run holds a target's kernel lock.
    pub(crate) fn holds_target_lock(&self) -> bool {
        self.lanes.iter().any(|lane| lane.target_guard.is_some())
    }

    /// The document the `i`-th target wrote to its temp file (taken).
    pub(crate) fn take_document(&mut self, i: usize) -> Vec<u8> {
        std::mem::take(&mut self.lanes[i].document)
    }
}

impl<'w, S: Shim> Lane<'w, S> {
    /// Takes the target lock — or, when the world's contenders give up, `Busy` if it is held.
    fn lock_target(&mut self) -> Result<(), ModelFault> {
        let lock = self.world.target_lock(&self.target);
        let guard = if self.world.gives_up() {
            match S::try_lock(lock) {
                Some(guard) => guard,
                None => return Err(ModelFault::Busy),
            }
        } else {
            S::lock(lock)
        };
        self.target_guard = Some(guard);
        Ok(())
    }

    fn leave_span(&mut self) {
        if std::mem::take(&mut self.in_span) {
            self.world
                .in_span
                .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    fn design(&self) -> Design {
        self.world.design
    }

    /// Whether this run skips the locks (the traps that publish without the store's
    /// exclusion).
    fn unguarded(&self) -> bool {
        self.kind == Kind::Publish
            && matches!(
                self.design(),
                Design::RenameWithoutCheck | Design::JsonEpochGuard
            )
    }

    fn lease_row(&mut self, tx: &mut Tx<'w, S>) -> Option<LeaseRecord> {
        self.lease_reads += 1;
        let revalidation = self.kind == Kind::Publish && self.lease_reads == 1;
        let releasing = match self.kind {
            Kind::Publish => self.lease_reads == 2,
            Kind::PublishNow => self.lease_reads == 3,
            Kind::Release => true,
            Kind::Acquire => false,
        };
        if revalidation && self.unguarded() {
            // Trap: no revalidation against the store; the holder trusts its own grant.
            return self.granted.clone();
        }
        let target = self.target.clone();
        let row = tx.work().leases.get(&target).cloned();
        let credential = self.credential.clone();
        match (self.design(), row, credential) {
            // Traps: the release reads the row by token only (or by epoch only), so the core
            // sees the presenter's own epoch (or token) — as a `WHERE` on one column would.
            (Design::ReleaseTokenOnly, Some(mut row), Some(c)) if releasing => {
                let ours = row
                    .state
                    .grant()
                    .is_some_and(|g| g.holder_token_hash.ct_eq(&c.token_hash));
                if ours && matches!(row.state, LeaseState::Held(_)) {
                    row.fencing_epoch = c.epoch;
                }
                Some(row)
            }
            (Design::ReleaseEpochOnly, Some(mut row), Some(c)) if releasing => {
                if row.fencing_epoch == c.epoch {
                    if let LeaseState::Held(g) = &mut row.state {
                        g.holder_token_hash = c.token_hash;
                    }
                }
                Some(row)
            }
            (_, row, _) => row,
        }
    }

    fn clock(&mut self) -> Millis {
        let now = self.world.now();
        // The latest reading the run has seen (a holder that once saw its expiry must never
        // rename, even after the clock stepped back).
        self.last_clock = self.last_clock.max(now);
        match (self.design(), self.kind, &self.granted) {
            // Trap: the publication reads a clock cached at its grant, so expiry is ignored.
            (Design::IgnoreExpiry, Kind::Publish, Some(granted)) => {
                granted.state.grant().map_or(now, |g| g.acquired_at)
            }
            _ => now,
        }
    }

    /// One effect on this target, inside or outside the run's transaction `tx`.
    fn execute(
        &mut self,
        tx: &mut Tx<'w, S>,
        effect: Effect<'_, ModelFault>,
    ) -> Answer<LeaseInput<ModelFault>> {
        match effect {
            Effect::Store(effect) => self.store(tx, effect),
            Effect::File(effect) => self.file(tx, effect),
            Effect::Clock(ask) => ask.answer(self.clock()),
            Effect::Reached(step, ask) => {
                self.reached(tx, step);
                ask.answer(())
            }
        }
    }

    fn store(
        &mut self,
        tx: &mut Tx<'w, S>,
        effect: StoreEffect<'_, ModelFault>,
    ) -> Answer<LeaseInput<ModelFault>> {
        let world = self.world;
        let target = self.target.clone();
        match effect {
            StoreEffect::ReadCommittedLease(ask) => ask.answer(Ok(S::with(&world.snapshot, |s| {
                s.leases.get(&target).cloned()
            }))),
            StoreEffect::Begin(ask) => {
                let guarded = !self.unguarded();
                if let Err(busy) = tx.begin(guarded) {
                    return ask.fail(busy);
                }
                if guarded && self.design() == Design::Renewal && self.kind == Kind::Publish {
                    self.renew(tx);
                }
                ask.answer(Ok(()))
            }
            StoreEffect::ReadLease(ask) => ask.answer(Ok(self.lease_row(tx))),
            StoreEffect::ReadChannels(ask) => ask.answer(Ok(match &tx.open {
                Some((_, work)) => work.channel_rows(&target),
                None => S::with(&world.snapshot, |s| s.channel_rows(&target)),
            })),
            StoreEffect::WriteGrant(plan, ask) => {
                if self.design() == Design::SplitAcquire {
                    // Trap: decided in one transaction, written in another: both locks are
                    // let go between the decision and the write.
                    tx.open = None;
                    self.target_guard = None;
                }
                if self.kind == Kind::PublishNow {
                    // The one-shot publisher learns its grant here.
                    self.credential = Some(Credential {
                        target_id: target.clone(),
                        epoch: plan.epoch,
                        token_hash: plan.grant.holder_token_hash,
                    });
                    self.expires_at = plan.grant.expires_at;
                    self.granted = Some(plan.record());
                }
                let check_prior = self.design() != Design::SplitAcquire;
                let work = tx.work();
                let row = work.leases.get_mut(&target);
                ask.answer(Ok(match row {
                    Some(row) if !check_prior || row.fencing_epoch == plan.prior_epoch => {
                        *row = plan.record();
                        true
                    }
                    _ => false,
                }))
            }
            StoreEffect::WriteRelease(plan, ask) => {
                let design = self.design();
                let work = tx.work();
                let Some(row) = work.leases.get_mut(&target) else {
                    return ask.answer(Ok(false));
                };
                let Some(grant) = row.state.grant().cloned() else {
                    return ask.answer(Ok(false));
                };
                let held = matches!(row.state, LeaseState::Held(_));
                let epoch_ok = row.fencing_epoch == plan.epoch;
                let token_ok = grant.holder_token_hash.ct_eq(&plan.token_hash);
                let matches = held
                    && match design {
                        Design::ReleaseTokenOnly => token_ok,
                        Design::ReleaseEpochOnly => epoch_ok,
                        _ => epoch_ok && token_ok,
                    };
                if matches {
                    S::with(&world.ghost, |g| {
                        g.on_release(row, plan.epoch, &plan.token_hash)
                    });
                    row.state = LeaseState::Released(grant);
                }
                ask.answer(Ok(matches))
            }
            effect @ (StoreEffect::Savepoint(_)
            | StoreEffect::ReleaseSavepoint(_)
            | StoreEffect::RollbackToSavepoint(_)
            | StoreEffect::Commit(_)
            | StoreEffect::Rollback(_)) => tx.execute(effect.into()),
        }
    }

    fn file(
        &mut self,
        tx: &mut Tx<'w, S>,
        effect: FileEffect<'_, ModelFault>,
    ) -> Answer<LeaseInput<ModelFault>> {
        let world = self.world;
        let target = self.target.clone();
        match effect {
            FileEffect::LockTarget(ask) => {
                if self.kind == Kind::PublishNow && self.credential.is_some() {
                    // A one-shot whose grant took over an expired one and committed on its
                    // own: its second envelope is a two-step publication with that grant, and
                    // the traps of a publication apply to it as they do to any.
                    self.kind = Kind::Publish;
                    self.lease_reads = 0;
                }
                world.note_lock_attempt();
                let skipped = self.unguarded() || self.design() == Design::TargetLockSkipped;
                // Trap `LockAcrossDraft`: the lock may already be held since the draft.
                if skipped || self.target_guard.is_some() {
                    return ask.answer(Ok(()));
                }
                ask.answer(self.lock_target())
            }
            // The stale-rename traps are designs without the resource's fence as well (no
            // single-writer check; the JSON epoch as the only guard; an unguarded local write;
            // a write in place, which would otherwise fence itself with its own first half):
            // their publication never looks at the document in place (their grants do).
            FileEffect::ReadCurrent(ask)
                if self.kind == Kind::Publish
                    && matches!(
                        self.design(),
                        Design::RenameWithoutCheck
                            | Design::JsonEpochGuard
                            | Design::CommitThenRename
                            | Design::InPlaceWrite
                    ) =>
            {
                ask.answer(Ok(None))
            }
            FileEffect::ReadCurrent(ask) => ask.answer(Ok(S::with(&world.fs, |fs| {
                fs.dirs.get(&target).and_then(|d| d.current.clone())
            }))),
            FileEffect::PrepareDir(ask) => {
                if self.design() == Design::LockAcrossDraft && self.target_guard.is_none() {
                    // Trap: the target lock taken for the draft and kept to the end of the run
                    // (the design before liveness was proven).
                    if let Err(busy) = self.lock_target() {
                        return ask.fail(busy);
                    }
                }
                ask.answer(Ok(true))
            }
            FileEffect::SyncParents(ask) | FileEffect::SyncDir(ask) => ask.answer(Ok(())),
            FileEffect::RemoveOrphans(ask) => {
                // The sweep, after the rename: every other temp file goes, live drafts of
                // publishers outside their transaction included (they write theirs again).
                S::with(&world.fs, |fs| fs.dir(&target).temps.clear());
                ask.answer(Ok(()))
            }
            FileEffect::WriteTemp(bytes, ask) => {
                if !self.document.is_empty() {
                    // A second temp file in one run: a draft not confirmed inside the
                    // transaction, composed and written again.
                    world.note_redraft();
                }
                self.document = bytes.to_vec();
                let in_place = self.design() == Design::InPlaceWrite;
                let replaced = self.temp.take();
                self.temp = Some(S::with(&world.fs, |fs| {
                    let dir = fs.dir(&target);
                    // A second temp replaces the first, which is removed (as the adapter does).
                    if let Some(old) = replaced {
                        dir.temps.remove(&old);
                    }
                    if in_place {
                        // Trap: current.json written in place, in two writes (the first here).
                        dir.current = Some(bytes[..bytes.len() / 2].to_vec());
                    }
                    let id = dir.next_temp;
                    dir.next_temp += 1;
                    dir.temps.insert(id, bytes.to_vec());
                    id
                }));
                ask.answer(Ok(()))
            }
            FileEffect::RemoveTemp(ask) => {
                // The draft is given up: a temp file written after this one (the publication
                // of a one-shot's takeover, in an envelope of its own) is a new draft, not one
                // composed again inside a transaction.
                self.document.clear();
                if let Some(temp) = self.temp.take() {
                    S::with(&world.fs, |fs| fs.dir(&target).temps.remove(&temp));
                }
                ask.answer(Ok(()))
            }
            FileEffect::Rename(ask) => ask.answer(self.rename(tx)),
            FileEffect::UnlockTarget(ask) => {
                // Trap `LockAcrossDraft` keeps it until the directory fsync has run.
                if self.design() != Design::LockAcrossDraft {
                    self.target_guard = None;
                }
                ask.answer(Ok(()))
            }
        }
    }

    /// A named point of the publication: where the span of the fencing checks opens and
    /// closes, and where the traps that lose a lock lose it.
    fn reached(&mut self, tx: &mut Tx<'w, S>, step: PublishStep) {
        let world = self.world;
        if step == PublishStep::Revalidated && !self.in_span {
            self.in_span = true;
            world
                .in_span
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        if step == PublishStep::Renamed {
            self.leave_span();
        }
        if step == PublishStep::Revalidated && self.design() == Design::StoreLockLost {
            // The store's lock vanishes; the release later takes it anew.
            tx.commit();
        }
        if step == PublishStep::Revalidated && self.design() == Design::CommitThenRename {
            // Trap: revalidate in one transaction, commit, and confirm the draft and
            // rename outside it ("remote lease + unguarded local write").
            tx.commit();
            self.target_guard = None;
            // A point where another thread may run, right where the locks were let go.
            let _ = world.now();
        }
        if step == PublishStep::DeadlineChecked
            && matches!(
                self.design(),
                Design::RenameWithoutCheck | Design::JsonEpochGuard | Design::CommitThenRename
            )
        {
            // The traps' flaw is the unguarded stretch up to the rename; one more point there
            // where another thread may run (the clock's lock taken and let go: no effect on
            // the world) lets the schedulers find it within their budget now that the
            // machine's clock rule narrowed it (a stale run must not have read its expiry at
            // all). Every interleaving it opens was open without it.
            let _ = world.now();
        }
    }

    fn rename(&mut self, tx: &Tx<'w, S>) -> Result<(), ModelFault> {
        let (world, target) = (self.world, self.target.clone());
        let Some(temp) = self.temp.take() else {
            return Err(ModelFault::Refused);
        };
        let credential = self.credential.clone();
        let Some(credential) = credential else {
            crate::ghost::violation("a rename without a publication's credential".into())
        };
        let renamer = Renamer {
            epoch: credential.epoch,
            token_hash: credential.token_hash,
            expires_at: self.expires_at,
            last_clock: self.last_clock,
        };
        let json_guard = self.design() == Design::JsonEpochGuard;
        // "The document lists exactly the rows its transaction sees" holds where the store's
        // write lock is held across the rename. The variant that loses it (`StoreLockLost`,
        // the target lock alone) does not claim it: a submission takes only the store's lock,
        // so rows may move under its rename (FENCING.md says so). The traps are caught by the
        // fencing checks.
        let rows_claimed = matches!(
            self.design(),
            Design::Real | Design::TargetLockSkipped | Design::LockAcrossDraft
        );
        let open = tx
            .open
            .as_ref()
            .and_then(|(_, work)| work.leases.get(&target).cloned());
        let open_rows = tx.open.as_ref().map(|(_, work)| work.channel_rows(&target));
        S::with(&world.fs, |fs| {
            let dir = fs.dir(&target);
            if json_guard {
                // Trap: the epoch in the published JSON used as the guard.
                let current = dir
                    .current
                    .as_deref()
                    .and_then(|b| ProjectionDocument::parse(b).ok())
                    .map_or(0, |d| d.fencing_epoch);
                if current > credential.epoch {
                    dir.temps.remove(&temp);
                    return Err(ModelFault::Refused);
                }
            }
            let Some(bytes) = dir.temps.remove(&temp) else {
                return Err(ModelFault::Refused);
            };
            let document = ProjectionDocument::parse(&bytes).ok();
            let epoch = document.as_ref().map_or(0, |d| d.fencing_epoch);
            self.renamed = true;
            S::with(&world.ghost, |g| {
                g.on_rename(&target, &renamer, epoch, open.as_ref());
                match (&document, &open_rows) {
                    (Some(document), Some(rows)) => g.on_rename_rows(document, rows),
                    (Some(_), None) if rows_claimed => {
                        crate::ghost::violation("renamed outside its transaction".into())
                    }
                    _ => {}
                }
            });
            dir.current = Some(bytes);
            Ok(())
        })
    }

    /// Trap `Renewal`: extend `expires_at` to `now + ttl` while still the holder.
    fn renew(&mut self, tx: &mut Tx<'w, S>) {
        let (now, ttl) = (self.world.now(), self.world.ttl);
        let Some(credential) = self.credential.clone() else {
            return;
        };
        let work = tx.work();
        if let Some(row) = work.leases.get_mut(&credential.target_id) {
            if let LeaseState::Held(g) = &mut row.state {
                if row.fencing_epoch == credential.epoch
                    && g.holder_token_hash.ct_eq(&credential.token_hash)
                {
                    g.expires_at = now.plus_ms(ttl.as_millis());
                }
            }
        }
    }
}
