//! The conditional release: read the row, let the core decide (`decide_release`: token hash
//! AND epoch), write the release WHERE epoch and token hash still match. Run alone
//! ([`Release`], inside the lock envelope) and as the last steps of every publication
//! ([`ReleaseSteps`]), so both are the same code.

use super::serialized::{Body, End, Serialized};
use super::{protocol_violation, Effect, Input, Machine};
use crate::projection::lease::{
    observe, Credential, Fenced, InconsistentLease, LeaseRecord, ReleasePlan,
};

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
pub struct ReleaseSteps<E> {
    credential: Credential,
    stage: Stage,
    record: Option<LeaseRecord>,
    plan: Option<ReleasePlan>,
    result: Option<Result<ReleaseOutcome, ReleaseFailure<E>>>,
}

impl<E> ReleaseSteps<E> {
    /// The steps releasing `credential`.
    pub fn new(credential: Credential) -> Self {
        ReleaseSteps {
            credential,
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
    pub fn take_result(&mut self) -> Option<Result<ReleaseOutcome, ReleaseFailure<E>>> {
        self.result.take()
    }

    fn finish(&mut self, result: Result<ReleaseOutcome, ReleaseFailure<E>>) -> Stage {
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
                    Ok(observed) => match observed.decide_release(&self.credential) {
                        Ok(plan) => {
                            self.plan = Some(plan);
                            Stage::Write
                        }
                        Err(fenced) => self.finish(Ok(ReleaseOutcome::NotHolder(fenced))),
                    },
                }
            }
            (Stage::Write, Input::Written(true)) => self.finish(Ok(ReleaseOutcome::Released)),
            (Stage::Write, Input::Written(false)) => self.finish(Err(ReleaseFailure::RowChanged)),
            (Stage::ReadLease | Stage::ReadClock | Stage::Write, Input::Failed(e)) => {
                self.finish(Err(ReleaseFailure::Effect(e)))
            }
            (stage, other) => protocol_violation(&format!("release {stage:?}"), &other),
        };
    }
}

impl<E> Body<E> for ReleaseSteps<E> {
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
pub struct Release<E> {
    inner: Serialized<E, ReleaseSteps<E>>,
}

impl<E> Release<E> {
    /// A release of the grant `credential` names.
    pub fn new(credential: Credential) -> Self {
        Release {
            inner: Serialized::new(ReleaseSteps::new(credential)),
        }
    }

    /// The result, once [`Effect::Finished`] was polled.
    ///
    /// # Panics
    /// If the machine has not finished.
    pub fn into_result(mut self) -> Result<ReleaseOutcome, ReleaseFailure<E>> {
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

impl<E> Machine<E> for Release<E> {
    fn poll(&self) -> Effect<'_> {
        self.inner.poll()
    }

    fn handle(&mut self, input: Input<E>) {
        self.inner.handle(input)
    }
}
