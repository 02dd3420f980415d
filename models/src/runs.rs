//! The lease machines run on the model world: acquisition, publication (also frozen before
//! any effect, as a process stopped by SIGSTOP), the one-shot publication, a batch of one-shot
//! publications in one transaction, and release — the core's machines, executed by the model's
//! [`Executor`](crate::executor) against the [`World`]'s store, files and clock — and what each
//! answers its caller.

use crate::executor::{Executor, Fault, Kind, ModelFault, Stop};
use crate::shim::Shim;
use crate::world::{ModelError, World};
use solewriter_core::error_kind::{Classified, ErrorKind};
use solewriter_core::names::InstanceDigest;
use solewriter_core::projection::lease::{
    Credential, DeadlinePassed, Fenced, HeldBy, LeaseRecord, LeaseState,
};
use solewriter_core::projection::machine::acquire::{Acquire, AcquireReport, Applicant};
use solewriter_core::projection::machine::outcome::{LeaseFailure, PublishReport, Unpublished};
use solewriter_core::projection::machine::publish::Publish;
use solewriter_core::projection::machine::publish_many::{PublishMany, TargetEnd};
use solewriter_core::projection::machine::publish_now::{PublishNow, PublishNowReport};
use solewriter_core::projection::machine::release::{Release, ReleaseOutcome};
use solewriter_core::projection::machine::{Machine, ProtocolError};
use solewriter_core::projection::publication::PublishStep;
use solewriter_core::projection::target::TargetId;
use solewriter_core::time::Millis;
use solewriter_core::token::HolderToken;

/// A grant as its holder keeps it. `Clone` on purpose: the checkers let stale copies act.
#[derive(Clone, Debug)]
pub struct ModelLease {
    /// Target.
    pub target_id: TargetId,
    /// Epoch of the grant.
    pub epoch: u64,
    /// The raw token.
    pub token: HolderToken,
    /// Expiry of the grant (as the holder believes it).
    pub expires_at: Millis,
    /// The row as it stood at grant time (trusted only by the traps that skip revalidation).
    granted: LeaseRecord,
}

impl ModelLease {
    fn credential(&self) -> Credential {
        Credential {
            target_id: self.target_id.clone(),
            epoch: self.epoch,
            token_hash: self.token.hash(),
        }
    }
}

/// Answer to an acquisition.
#[derive(Clone, Debug)]
pub enum ModelAcquire {
    /// Granted.
    Acquired(ModelLease),
    /// Held by a live grant; nothing written.
    Held(HeldBy),
}

/// Answer to a release.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReleaseKind {
    /// Released.
    Released,
    /// Not the holder; nothing changed.
    NotHolder(Fenced),
}

/// Answer to a publication.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PublishOutcome {
    /// `current.json` replaced with `bytes`.
    Published {
        /// Epoch of the publishing grant.
        epoch: u64,
        /// The document.
        bytes: Vec<u8>,
    },
    /// Fenced at revalidation; nothing touched.
    Fenced(Fenced),
    /// Deadline passed before the rename; aborted.
    Expired(DeadlinePassed),
    /// The publisher crashed at this step: the transaction rolled back, temps may remain.
    Crashed(PublishStep),
    /// The target is not admitted.
    NotAdmitted,
    /// A trap variant's own guard refused (e.g. the JSON epoch compare).
    Refused,
    /// A one-shot publication found a live grant; nothing written.
    Held(HeldBy),
    /// A lock was held by a frozen process (the world's contenders give up): nothing written.
    Busy,
    /// An injected fault made an effect fail (named), before any rename.
    Failed(&'static str),
    /// A failure the model's checks do not tell apart — a row that breaks the invariants or
    /// changed under the write lock, the epoch exhausted, a document not composed, a rename not
    /// made durable —, of the kind the core gives it.
    Other(ErrorKind),
}

impl PublishOutcome {
    /// Who must act on this outcome, as the core classifies the failure it stands for (`None`:
    /// published, held by a live grant, or crashed).
    pub fn kind(&self) -> Option<ErrorKind> {
        match self {
            PublishOutcome::Published { .. }
            | PublishOutcome::Held(_)
            | PublishOutcome::Crashed(_) => None,
            PublishOutcome::Fenced(fenced) => Some(fenced.kind()),
            PublishOutcome::Expired(passed) => Some(passed.kind()),
            PublishOutcome::NotAdmitted => Some(LeaseFailure::<ModelFault>::NotAdmitted.kind()),
            PublishOutcome::Refused => Some(ModelFault::Refused.kind()),
            PublishOutcome::Busy => Some(ModelFault::Busy.kind()),
            PublishOutcome::Failed(effect) => Some(ModelFault::Injected(effect).kind()),
            PublishOutcome::Other(kind) => Some(*kind),
        }
    }
}

impl From<ReleaseOutcome> for ReleaseKind {
    fn from(outcome: ReleaseOutcome) -> Self {
        match outcome {
            ReleaseOutcome::Released => ReleaseKind::Released,
            ReleaseOutcome::NotHolder(fenced) => ReleaseKind::NotHolder(fenced),
        }
    }
}

impl<S: Shim> World<S> {
    /// Tries to acquire `target` for `holder` with the fresh `token`: the core's acquisition
    /// machine, executed against the model.
    pub fn acquire(
        &self,
        target: &TargetId,
        holder: &InstanceDigest,
        token: HolderToken,
    ) -> Result<ModelAcquire, ModelError> {
        self.acquire_with(target, holder, token, None)
    }

    /// [`Self::acquire`] with `fault` injected.
    pub fn acquire_with(
        &self,
        target: &TargetId,
        holder: &InstanceDigest,
        token: HolderToken,
        fault: Option<Fault>,
    ) -> Result<ModelAcquire, ModelError> {
        let mut machine = Acquire::new(Applicant {
            token_hash: token.hash(),
            holder_instance_digest: holder.clone(),
            ttl: self.ttl,
        });
        Executor::new(self, Kind::Acquire, target.clone())
            .fault(fault)
            .run(&mut machine);
        match output(machine) {
            Ok(AcquireReport::Granted(plan)) => Ok(ModelAcquire::Acquired(ModelLease {
                target_id: target.clone(),
                epoch: plan.epoch,
                token,
                expires_at: plan.grant.expires_at,
                granted: plan.record(),
            })),
            Ok(AcquireReport::Held(held)) => Ok(ModelAcquire::Held(held)),
            Err(LeaseFailure::ForeignEpoch(foreign)) => foreign_epoch(&foreign),
            Err(failure) => Err(not_acquired(failure)),
        }
    }

    /// Releases `lease` (conditional; see [`Design`] for the broken variants).
    pub fn release(&self, lease: &ModelLease) -> ReleaseKind {
        self.release_with(lease, None)
    }

    /// [`Self::release`] with `fault` injected (a failed release is `NotHolder(NeverGranted)`:
    /// nothing changed, or its commit's outcome is unknown).
    pub fn release_with(&self, lease: &ModelLease, fault: Option<Fault>) -> ReleaseKind {
        self.release_credential(lease.credential(), Some(lease.granted.clone()), fault)
    }

    /// Releases by raw credential — what anyone, holder or not, can present (the adapter's
    /// `release_token`).
    pub fn release_token(&self, target: &TargetId, epoch: u64, token: &HolderToken) -> ReleaseKind {
        let credential = Credential {
            target_id: target.clone(),
            epoch,
            token_hash: token.hash(),
        };
        self.release_credential(credential, None, None)
    }

    fn release_credential(
        &self,
        credential: Credential,
        granted: Option<LeaseRecord>,
        fault: Option<Fault>,
    ) -> ReleaseKind {
        let target = credential.target_id.clone();
        let granted = granted.unwrap_or_else(|| LeaseRecord::admitted(target.clone()));
        let mut machine = Release::new(credential.clone());
        Executor::new(self, Kind::Release, target)
            .holder(credential, granted)
            .fault(fault)
            .run(&mut machine);
        match output(machine) {
            Ok(outcome) => outcome.into(),
            Err(_) => ReleaseKind::NotHolder(Fenced::NeverGranted),
        }
    }

    /// Publishes `current.json` for `lease` — the core's publication machine, executed
    /// against the model — crashing at `crash_at` if given.
    pub fn publish(&self, lease: &ModelLease, crash_at: Option<PublishStep>) -> PublishOutcome {
        self.publish_with(lease, crash_at, None)
    }

    /// [`Self::publish`] with `fault` injected. `lease` may be presented again after any
    /// outcome (a copy of a grant, as a Node `Grant` exported and rebuilt).
    pub fn publish_with(
        &self,
        lease: &ModelLease,
        crash_at: Option<PublishStep>,
        fault: Option<Fault>,
    ) -> PublishOutcome {
        let credential = lease.credential();
        let mut machine = Publish::new(credential.clone(), &self.registry);
        let mut executor = Executor::new(self, Kind::Publish, lease.target_id.clone())
            .holder(credential, lease.granted.clone())
            .crash_at(crash_at)
            .fault(fault);
        if let Some(step) = executor.run(&mut machine) {
            return PublishOutcome::Crashed(step);
        }
        self.acknowledged(
            &lease.target_id,
            publish_end(output(machine), executor.take_document(0)),
        )
    }

    /// Checks that a publication acknowledged as published has its document (or a later one)
    /// in place: nothing acknowledged is lost.
    fn acknowledged(&self, target: &TargetId, outcome: PublishOutcome) -> PublishOutcome {
        if let (true, PublishOutcome::Published { epoch, .. }) = (self.check_acknowledged, &outcome)
        {
            let in_place = self
                .current(target)
                .and_then(|bytes| solewriter_core::projection::published_epoch(&bytes));
            if in_place.is_none_or(|e| e < *epoch) {
                crate::ghost::violation(format!(
                    "a publication of epoch {epoch} was acknowledged, but current.json is at {in_place:?}: an acknowledged publication was lost"
                ));
            }
        }
        outcome
    }

    /// Starts the publication of `lease` and freezes it before its `freeze_at`-th effect,
    /// holding whatever locks it holds there (`None` if it ended before: it has no such
    /// effect). [`Frozen::resume`] lets it go on.
    pub fn publish_frozen(&self, lease: &ModelLease, freeze_at: usize) -> Option<Frozen<'_, S>> {
        let credential = lease.credential();
        let machine = Publish::new(credential.clone(), &self.registry);
        let executor = Executor::new(self, Kind::Publish, lease.target_id.clone())
            .holder(credential, lease.granted.clone());
        Frozen::start(
            executor,
            FrozenMachine::Publish(Box::new(machine)),
            freeze_at,
        )
    }

    /// [`Self::publish_frozen`] for a one-shot publication by `holder` with `token`.
    pub fn publish_now_frozen(
        &self,
        target: &TargetId,
        holder: &InstanceDigest,
        token: HolderToken,
        freeze_at: usize,
    ) -> Option<Frozen<'_, S>> {
        let applicant = Applicant {
            token_hash: token.hash(),
            holder_instance_digest: holder.clone(),
            ttl: self.ttl,
        };
        let machine = PublishNow::new(applicant, &self.registry);
        let executor = Executor::new(self, Kind::PublishNow, target.clone());
        Frozen::start(
            executor,
            FrozenMachine::PublishNow(Box::new(machine)),
            freeze_at,
        )
    }

    /// Grants, publishes and releases in one envelope for `holder` with the fresh `token` —
    /// the core's one-shot machine, executed against the model — crashing at `crash_at` if
    /// given.
    pub fn publish_now(
        &self,
        target: &TargetId,
        holder: &InstanceDigest,
        token: HolderToken,
        crash_at: Option<PublishStep>,
    ) -> PublishOutcome {
        self.publish_now_with(target, holder, token, crash_at, None)
    }

    /// [`Self::publish_now`] with `fault` injected.
    pub fn publish_now_with(
        &self,
        target: &TargetId,
        holder: &InstanceDigest,
        token: HolderToken,
        crash_at: Option<PublishStep>,
        fault: Option<Fault>,
    ) -> PublishOutcome {
        let applicant = Applicant {
            token_hash: token.hash(),
            holder_instance_digest: holder.clone(),
            ttl: self.ttl,
        };
        let mut machine = PublishNow::new(applicant, &self.registry);
        let mut executor = Executor::new(self, Kind::PublishNow, target.clone())
            .crash_at(crash_at)
            .fault(fault);
        if let Some(step) = executor.run(&mut machine) {
            return PublishOutcome::Crashed(step);
        }
        self.acknowledged(
            target,
            publish_now_end(output(machine), executor.take_document(0)),
        )
    }

    /// Grants, publishes and releases every target of `batch` (each with its fresh token) for
    /// `holder` in ONE write transaction — the core's batch machine, executed against the model
    /// — crashing at `crash_at` if given (the first target's run to reach it stops the whole
    /// process). Each target's outcome, as its one-shot publication's would be, in the batch's
    /// order (the targets sorted by id).
    pub fn publish_many(
        &self,
        holder: &InstanceDigest,
        batch: Vec<(TargetId, HolderToken)>,
        crash_at: Option<PublishStep>,
    ) -> Vec<(TargetId, PublishOutcome)> {
        self.publish_many_with(holder, batch, crash_at, None)
    }

    /// [`Self::publish_many`] with `fault` injected (counted over the whole batch).
    pub fn publish_many_with(
        &self,
        holder: &InstanceDigest,
        batch: Vec<(TargetId, HolderToken)>,
        crash_at: Option<PublishStep>,
        fault: Option<Fault>,
    ) -> Vec<(TargetId, PublishOutcome)> {
        let applicants = batch
            .into_iter()
            .map(|(target, token)| {
                let applicant = Applicant {
                    token_hash: token.hash(),
                    holder_instance_digest: holder.clone(),
                    ttl: self.ttl,
                };
                (target, applicant)
            })
            .collect();
        // The model's error is `Copy`: reported again, it is the same.
        let mut machine = PublishMany::new(applicants, &self.registry, |e: &ModelFault| *e)
            .unwrap_or_else(|refused| panic!("a batch the core refuses: {refused}"));
        let targets = machine.targets().to_vec();
        self.distinct_target_locks(&targets);
        let mut executor = Executor::many(self, &targets)
            .crash_at(crash_at)
            .fault(fault);
        if let Some(step) = executor.run_many(&mut machine) {
            return targets
                .into_iter()
                .map(|target| (target, PublishOutcome::Crashed(step)))
                .collect();
        }
        output(machine)
            .into_iter()
            .enumerate()
            .map(|(i, TargetEnd { target_id, end })| {
                self.released(&target_id, &end);
                let outcome = publish_now_end(end, executor.take_document(i));
                let outcome = self.acknowledged(&target_id, outcome);
                (target_id, outcome)
            })
            .collect()
    }

    /// Checks (with [`World::checking_acknowledged`]) that a target a batch answered published
    /// and released had its grant and its release committed: its committed row is at a later
    /// epoch, or at the published one and released. (A batch's targets commit together, so a
    /// target that reports success while the shared commit was lost would show here.)
    fn released(&self, target: &TargetId, end: &Result<PublishNowReport, Unpublished<ModelFault>>) {
        let (true, Ok(PublishNowReport::Published { published, .. })) =
            (self.check_acknowledged, end)
        else {
            return;
        };
        let epoch = published.fencing_epoch;
        let row = S::with(&self.store, |store| store.leases.get(target).cloned());
        let committed = row.as_ref().is_some_and(|row| {
            row.fencing_epoch > epoch
                || (row.fencing_epoch == epoch && matches!(row.state, LeaseState::Released(_)))
        });
        if !committed {
            crate::ghost::violation(format!(
                "{target} was answered published and released at epoch {epoch}, but its committed row is {row:?}: the grant or the release did not commit"
            ));
        }
    }
}

/// The machine of a frozen publication.
enum FrozenMachine<'w> {
    Publish(Box<Publish<'w, ModelFault>>),
    /// A one-shot.
    PublishNow(Box<PublishNow<'w, ModelFault>>),
}

/// A publication frozen before one of its effects, keeping the locks it held there (a
/// process stopped by SIGSTOP or a GC pause), until [`Frozen::resume`].
pub struct Frozen<'w, S: Shim> {
    executor: Executor<'w, S>,
    machine: FrozenMachine<'w>,
    /// The effect it froze before.
    effect: &'static str,
}

impl<'w, S: Shim> Frozen<'w, S> {
    fn start(
        mut executor: Executor<'w, S>,
        mut machine: FrozenMachine<'w>,
        freeze_at: usize,
    ) -> Option<Self> {
        let stop = match &mut machine {
            FrozenMachine::Publish(m) => executor.advance(m.as_mut(), Some(freeze_at)),
            FrozenMachine::PublishNow(m) => executor.advance(m.as_mut(), Some(freeze_at)),
        };
        match stop {
            Stop::Frozen(effect) => Some(Frozen {
                executor,
                machine,
                effect,
            }),
            Stop::Finished | Stop::Crashed(_) => {
                executor.let_go();
                None
            }
        }
    }

    /// The name of the effect it froze before.
    pub fn effect(&self) -> &'static str {
        self.effect
    }

    /// Whether it froze inside its transaction (holding the store's write lock).
    pub fn in_transaction(&self) -> bool {
        self.executor.in_transaction()
    }

    /// Whether it froze holding the target's kernel lock.
    pub fn holds_target_lock(&self) -> bool {
        self.executor.holds_target_lock()
    }

    /// Lets it go on to its end; its outcome.
    pub fn resume(mut self) -> PublishOutcome {
        match &mut self.machine {
            FrozenMachine::Publish(m) => self.executor.advance(m.as_mut(), None),
            FrozenMachine::PublishNow(m) => self.executor.advance(m.as_mut(), None),
        };
        self.executor.let_go();
        let document = self.executor.take_document(0);
        match self.machine {
            FrozenMachine::Publish(m) => publish_end(output(*m), document),
            FrozenMachine::PublishNow(m) => publish_now_end(output(*m), document),
        }
    }
}

/// The result of a machine the model ran to its end (an executor bug is a violation).
fn output<M: Machine>(machine: M) -> M::Output {
    machine
        .output()
        .unwrap_or_else(|bug: ProtocolError| crate::ghost::violation(bug.to_string()))
}

/// The model's outcome of a one-shot's end.
fn publish_now_end(
    end: Result<PublishNowReport, Unpublished<ModelFault>>,
    document: Vec<u8>,
) -> PublishOutcome {
    match end {
        Ok(PublishNowReport::Held(held)) => PublishOutcome::Held(held),
        Ok(PublishNowReport::Published { published, .. }) => publish_end(Ok(published), document),
        Err(unpublished) => publish_end(Err(unpublished), document),
    }
}

/// The model's outcome of a publication's end (`document`: what it wrote to its temp file).
fn publish_end(
    end: Result<PublishReport, Unpublished<ModelFault>>,
    document: Vec<u8>,
) -> PublishOutcome {
    let failure = match end {
        Ok(published) | Err(Unpublished::NotReleased { published, .. }) => {
            return PublishOutcome::Published {
                epoch: published.fencing_epoch,
                bytes: document,
            }
        }
        Err(Unpublished::NotStarted { error, .. }) => LeaseFailure::Effect(error),
        Err(Unpublished::Failed { failure, .. }) => failure,
    };
    if let LeaseFailure::ForeignEpoch(foreign) = &failure {
        foreign_epoch(foreign)
    }
    unpublished(failure)
}

/// The model's outcome of a lease operation's failure: the one mapping of the core's
/// [`LeaseFailure`], keeping its kind ([`PublishOutcome::kind`]).
pub fn unpublished(failure: LeaseFailure<ModelFault>) -> PublishOutcome {
    match failure {
        LeaseFailure::Fenced(fenced) => PublishOutcome::Fenced(fenced),
        LeaseFailure::Expired(passed) => PublishOutcome::Expired(passed),
        LeaseFailure::NotAdmitted => PublishOutcome::NotAdmitted,
        LeaseFailure::Effect(ModelFault::Busy) => PublishOutcome::Busy,
        LeaseFailure::Effect(ModelFault::Refused) => PublishOutcome::Refused,
        LeaseFailure::Effect(ModelFault::Injected(effect)) => PublishOutcome::Failed(effect),
        other @ (LeaseFailure::Inconsistent(_)
        | LeaseFailure::EpochExhausted
        | LeaseFailure::ForeignEpoch(_)
        | LeaseFailure::RowChanged
        | LeaseFailure::Document(_)
        | LeaseFailure::NotDurable(_)) => PublishOutcome::Other(other.kind()),
    }
}

/// The model's error of an acquisition's failure: the one mapping of the core's
/// [`LeaseFailure`] there, keeping its kind ([`ModelError::kind`]).
pub fn not_acquired(failure: LeaseFailure<ModelFault>) -> ModelError {
    match failure {
        LeaseFailure::NotAdmitted => ModelError::NotAdmitted,
        LeaseFailure::EpochExhausted => ModelError::EpochExhausted,
        LeaseFailure::Effect(ModelFault::Busy) => ModelError::Busy,
        LeaseFailure::Effect(ModelFault::Injected(effect)) => ModelError::Failed(effect),
        other => ModelError::Other(other.kind()),
    }
}

impl ModelError {
    /// Who must act on it, as the core classifies the failure it stands for.
    pub fn kind(&self) -> ErrorKind {
        match self {
            ModelError::NotAdmitted => LeaseFailure::<ModelFault>::NotAdmitted.kind(),
            ModelError::EpochExhausted => LeaseFailure::<ModelFault>::EpochExhausted.kind(),
            ModelError::Busy => ModelFault::Busy.kind(),
            ModelError::Failed(effect) => ModelFault::Injected(effect).kind(),
            ModelError::Rejected(rejected) => rejected.kind(),
            ModelError::Other(kind) => *kind,
        }
    }
}

/// In the model nothing but the store's own grants writes `current.json`, so a document epoch
/// refused as foreign means a document got two ahead of its row: a violation.
fn foreign_epoch<T>(foreign: &solewriter_core::projection::lease::ForeignEpoch) -> T {
    crate::ghost::violation(format!(
        "a grant refused a document its own store published as foreign: {foreign}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every failure of a lease operation becomes a model outcome of the kind the core gives
    /// it (`NotDurable`'s error: the model's injected fault of the directory fsync).
    #[test]
    fn every_failure_keeps_the_core_kind() {
        let every = LeaseFailure::every(|| ModelFault::Busy, || ModelFault::Injected("syncDir"));
        for failure in every {
            let kind = failure.kind();
            let shape = format!("{failure:?}");
            let outcome = unpublished(failure);
            assert_eq!(outcome.kind(), Some(kind), "{shape} became {outcome:?}");
        }
    }

    /// Every failure of an acquisition becomes a model error of the kind the core gives it
    /// (a foreign epoch aside: in the model it is a violation, see [`foreign_epoch`]).
    #[test]
    fn every_acquisition_failure_keeps_the_core_kind() {
        let every = LeaseFailure::every(|| ModelFault::Busy, || ModelFault::Injected("syncDir"));
        let listed = every.len();
        let mut seen = 0;
        for failure in every {
            if matches!(failure, LeaseFailure::ForeignEpoch(_)) {
                continue;
            }
            let kind = failure.kind();
            let shape = format!("{failure:?}");
            let error = not_acquired(failure);
            assert_eq!(error.kind(), kind, "{shape} became {error:?}");
            seen += 1;
        }
        assert_eq!(seen, listed - 1, "every failure but the foreign epoch");
    }
}
