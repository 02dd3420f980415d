//! The conditional release: read the row, let the core decide, write the release WHERE epoch
//! and token hash still match. The decision is the [`Releaser`]'s: a holder's
//! ([`HolderRelease`]: `decide_release`, token hash AND epoch) or an operator's
//! ([`OperatorEnd`]: `decide_end`, the held grant observed, no credential). Run alone
//! ([`Release`], inside the lock envelope) and as the last steps of every publication
//! ([`ReleaseSteps`]), so all of them are the same code.

use super::serialized::{Body, End, Serialized};
use super::{protocol_violation, Effect, Input, Machine};
use crate::projection::lease::{
    observe, Credential, EndPlan, Fenced, InconsistentLease, LeaseRecord, NothingHeld, Observed,
    ReleasePlan,
};

/// Who decides a release, and what it answers.
pub trait Releaser {
    /// The answer of a release that ran to its end.
    type Outcome: std::fmt::Debug;
    /// The plan to write, or the answer without a write.
    fn decide(&mut self, observed: Observed) -> Result<ReleasePlan, Self::Outcome>;
    /// The answer once the plan's conditional write changed the row.
    fn released(&mut self) -> Self::Outcome;
}

/// A holder releasing its own grant: its credential must match BOTH the epoch and the token
/// hash.
#[derive(Clone, Debug)]
pub struct HolderRelease(pub Credential);

impl Releaser for HolderRelease {
    type Outcome = ReleaseOutcome;

    fn decide(&mut self, observed: Observed) -> Result<ReleasePlan, ReleaseOutcome> {
        observed
            .decide_release(&self.0)
            .map_err(ReleaseOutcome::NotHolder)
    }

    fn released(&mut self) -> ReleaseOutcome {
        ReleaseOutcome::Released
    }
}

/// An operator ending the current grant, whoever holds it (no credential).
#[derive(Clone, Debug, Default)]
pub struct OperatorEnd {
    /// The plan decided, and whether its grant had expired.
    ended: Option<(EndPlan, bool)>,
}

/// What an operator's end did.
#[derive(Clone, Debug)]
pub enum EndOutcome {
    /// This live grant was ended: the row is `released`, its holder fenced.
    Ended(EndPlan),
    /// This grant had already expired (no live grant; its holder was fenced by time): it was
    /// marked `released` all the same, so that a broker clock set back cannot revive it.
    Closed(EndPlan),
    /// There was no held grant (the row's epoch and why): nothing was written.
    NothingHeld {
        /// The row's epoch.
        epoch: u64,
        /// Never granted, or released.
        why: NothingHeld,
    },
}

impl Releaser for OperatorEnd {
    type Outcome = EndOutcome;

    fn decide(&mut self, observed: Observed) -> Result<ReleasePlan, EndOutcome> {
        let epoch = observed.epoch();
        match observed.decide_end() {
            Ok((plan, expired)) => {
                let release = plan.release.clone();
                self.ended = Some((plan, expired));
                Ok(release)
            }
            Err(why) => Err(EndOutcome::NothingHeld { epoch, why }),
        }
    }

    fn released(&mut self) -> EndOutcome {
        match self.ended.take() {
            Some((plan, false)) => EndOutcome::Ended(plan),
            Some((plan, true)) => EndOutcome::Closed(plan),
            None => unreachable!("a row is released only after a plan was decided"),
        }
    }
}

/// What a release did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReleaseOutcome {
    /// The row was released.
    Released,
    /// The presented credential does not hold the row (superseded, released, forged):
    /// nothing changed.
    NotHolder(Fenced),
}

/// Why a release could not be carried out.
#[derive(Debug)]
pub enum ReleaseFailure<E> {
    /// The target has no lease row.
    NotAdmitted,
    /// The lease row breaks the row invariants.
    Inconsistent(InconsistentLease),
    /// The conditional write changed no row although the decision, made under the same
    /// locks, said it would: the row changed behind the write lock.
    RowChanged,
    /// An effect failed (the store, the lock, the commit).
    Effect(E),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    ReadLease,
    ReadClock,
    Write,
    Done,
}

/// The release's steps, for a machine that already holds the locks.
#[derive(Debug)]
pub struct ReleaseSteps<E, R: Releaser = HolderRelease> {
    releaser: R,
    stage: Stage,
    record: Option<LeaseRecord>,
    plan: Option<ReleasePlan>,
    result: Option<Result<R::Outcome, ReleaseFailure<E>>>,
}

impl<E> ReleaseSteps<E> {
    /// The steps releasing `credential`.
    pub fn new(credential: Credential) -> Self {
        ReleaseSteps::with(HolderRelease(credential))
    }
}

impl<E, R: Releaser> ReleaseSteps<E, R> {
    /// The steps of the release `releaser` decides.
    pub fn with(releaser: R) -> Self {
        ReleaseSteps {
            releaser,
            stage: Stage::ReadLease,
            record: None,
            plan: None,
            result: None,
        }
    }

    /// Whether the steps have ended.
    pub fn is_done(&self) -> bool {
        self.stage == Stage::Done
    }

    /// The result, once done.
    pub fn take_result(&mut self) -> Option<Result<R::Outcome, ReleaseFailure<E>>> {
        self.result.take()
    }

    fn finish(&mut self, result: Result<R::Outcome, ReleaseFailure<E>>) -> Stage {
        self.result = Some(result);
        Stage::Done
    }

    /// The next effect.
    pub fn poll(&self) -> Effect<'_> {
        match (self.stage, &self.plan) {
            (Stage::ReadLease, _) => Effect::ReadLease,
            (Stage::ReadClock, _) => Effect::ReadClock,
            (Stage::Write, Some(plan)) => Effect::WriteRelease(plan),
            (Stage::Write, None) | (Stage::Done, _) => Effect::Finished,
        }
    }

    /// Consumes the result of the effect last polled.
    pub fn handle(&mut self, input: Input<E>) {
        self.stage = match (self.stage, input) {
            (Stage::ReadLease, Input::Lease(Some(record))) => {
                self.record = Some(record);
                Stage::ReadClock
            }
            (Stage::ReadLease, Input::Lease(None)) => self.finish(Err(ReleaseFailure::NotAdmitted)),
            (Stage::ReadClock, Input::Clock(now)) => {
                let Some(record) = self.record.take() else {
                    unreachable!("the clock is read after the row")
                };
                match observe(record, now) {
                    Err(inconsistent) => {
                        self.finish(Err(ReleaseFailure::Inconsistent(inconsistent)))
                    }
                    Ok(observed) => match self.releaser.decide(observed) {
                        Ok(plan) => {
                            self.plan = Some(plan);
                            Stage::Write
                        }
                        Err(answer) => self.finish(Ok(answer)),
                    },
                }
            }
            (Stage::Write, Input::Written(true)) => {
                let released = self.releaser.released();
                self.finish(Ok(released))
            }
            (Stage::Write, Input::Written(false)) => self.finish(Err(ReleaseFailure::RowChanged)),
            (Stage::ReadLease | Stage::ReadClock | Stage::Write, Input::Failed(e)) => {
                self.finish(Err(ReleaseFailure::Effect(e)))
            }
            (stage, other) => protocol_violation(&format!("release {stage:?}"), &other),
        };
    }
}

impl<E, R: Releaser> Body<E> for ReleaseSteps<E, R> {
    fn poll(&self) -> Effect<'_> {
        ReleaseSteps::poll(self)
    }

    fn handle(&mut self, input: Input<E>) {
        ReleaseSteps::handle(self, input)
    }

    fn end(&self) -> Option<End> {
        match (&self.result, self.stage) {
            (_, Stage::ReadLease | Stage::ReadClock | Stage::Write) => None,
            (Some(Err(ReleaseFailure::Effect(_) | ReleaseFailure::RowChanged)), _) => {
                Some(End::Rollback)
            }
            _ => Some(End::Commit),
        }
    }
}

/// A standalone conditional release, inside the lock envelope.
#[derive(Debug)]
pub struct Release<E, R: Releaser = HolderRelease> {
    inner: Serialized<E, ReleaseSteps<E, R>>,
}

impl<E> Release<E> {
    /// A release of the grant `credential` names.
    pub fn new(credential: Credential) -> Self {
        Release::with(HolderRelease(credential))
    }
}

impl<E> Release<E, OperatorEnd> {
    /// An operator's end of the target's current grant, whoever holds it.
    pub fn end() -> Self {
        Release::with(OperatorEnd::default())
    }
}

impl<E, R: Releaser> Release<E, R> {
    /// The release `releaser` decides.
    pub fn with(releaser: R) -> Self {
        Release {
            inner: Serialized::new(ReleaseSteps::with(releaser)),
        }
    }

    /// The result, once [`Effect::Finished`] was polled.
    ///
    /// # Panics
    /// If the machine has not finished.
    pub fn into_result(mut self) -> Result<R::Outcome, ReleaseFailure<E>> {
        assert!(self.inner.is_done(), "release machine polled to its end");
        if let Some(e) = self.inner.not_started.take() {
            return Err(ReleaseFailure::Effect(e));
        }
        if let Some(e) = self.inner.commit_failed.take() {
            return Err(ReleaseFailure::Effect(e));
        }
        match self.inner.body.take_result() {
            Some(result) => result,
            None => unreachable!("a started release runs its steps to their end"),
        }
    }
}

impl<E, R: Releaser> Machine<E> for Release<E, R> {
    fn poll(&self) -> Effect<'_> {
        self.inner.poll()
    }

    fn handle(&mut self, input: Input<E>) {
        self.inner.handle(input)
    }
}
