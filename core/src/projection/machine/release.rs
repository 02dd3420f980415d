//! The conditional release: read the row, let the core decide, write the release WHERE epoch
//! and token hash still match. The decision is the [`Releaser`]'s: a holder's
//! ([`HolderRelease`]: `decide_release`, token hash AND epoch) or an operator's
//! ([`OperatorEnd`]: `decide_end`, the held grant observed, no credential). Run alone
//! ([`Release`], inside the lock envelope) and as the last steps of every publication
//! ([`ReleaseSteps`]), so all of them are the same code.

use super::outcome::LeaseFailure;
pub use super::outcome::ReleaseOutcome;
use super::serialized::{Body, End, Serialized};
use super::{Answer, Effect, Input, Machine, ProtocolError, Serial};
use crate::projection::lease::{
    observe, Credential, EndPlan, LeaseRecord, NothingHeld, Observed, ReleasePlan,
};

/// Who decides a release, and what it answers.
pub trait Releaser {
    /// The answer of a release that ran to its end.
    type Outcome: std::fmt::Debug;
    /// The plan to write and the answer once its conditional write changed the row — or the
    /// answer without a write.
    fn decide(&self, observed: Observed) -> Result<(ReleasePlan, Self::Outcome), Self::Outcome>;
}

/// A holder releasing its own grant: its credential must match BOTH the epoch and the token
/// hash.
#[derive(Clone, Debug)]
pub struct HolderRelease(pub Credential);

impl Releaser for HolderRelease {
    type Outcome = ReleaseOutcome;

    fn decide(&self, observed: Observed) -> Result<(ReleasePlan, ReleaseOutcome), ReleaseOutcome> {
        observed
            .decide_release(&self.0)
            .map(|plan| (plan, ReleaseOutcome::Released))
            .map_err(ReleaseOutcome::NotHolder)
    }
}

/// An operator ending the current grant, whoever holds it (no credential).
#[derive(Clone, Copy, Debug, Default)]
pub struct OperatorEnd;

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

    fn decide(&self, observed: Observed) -> Result<(ReleasePlan, EndOutcome), EndOutcome> {
        let epoch = observed.epoch();
        match observed.decide_end() {
            Ok((plan, expired)) => {
                let release = plan.release.clone();
                let outcome = if expired {
                    EndOutcome::Closed(plan)
                } else {
                    EndOutcome::Ended(plan)
                };
                Ok((release, outcome))
            }
            Err(why) => Err(EndOutcome::NothingHeld { epoch, why }),
        }
    }
}

/// Where the release's steps are, and what each has learned.
#[derive(Debug)]
enum Stage<O, E> {
    ReadLease,
    ReadClock(LeaseRecord),
    /// The plan to write, and the answer once it changed the row.
    Write(ReleasePlan, O),
    Done(Result<O, LeaseFailure<E>>),
}

/// The release's steps, for a machine that already holds the locks.
#[derive(Debug)]
pub(crate) struct ReleaseSteps<E, R: Releaser = HolderRelease> {
    releaser: R,
    stage: Stage<R::Outcome, E>,
}

impl<E> ReleaseSteps<E> {
    /// The steps releasing `credential`.
    pub(crate) fn new(credential: Credential) -> Self {
        ReleaseSteps::with(HolderRelease(credential))
    }
}

impl<E, R: Releaser> ReleaseSteps<E, R> {
    /// The steps of the release `releaser` decides.
    pub(crate) fn with(releaser: R) -> Self {
        ReleaseSteps {
            releaser,
            stage: Stage::ReadLease,
        }
    }

    /// Whether the steps have ended.
    pub(crate) fn is_done(&self) -> bool {
        matches!(self.stage, Stage::Done(_))
    }

    /// The result, once done.
    pub(crate) fn into_result(self) -> Result<Result<R::Outcome, LeaseFailure<E>>, ProtocolError> {
        match self.stage {
            Stage::Done(result) => Ok(result),
            _ => Err(ProtocolError::Unfinished { machine: "release" }),
        }
    }
}

impl<E, R: Releaser> Body<E> for ReleaseSteps<E, R> {
    fn poll(&self) -> Option<Effect<'_, E>> {
        Some(match &self.stage {
            Stage::ReadLease => Effect::read_lease(),
            Stage::ReadClock(_) => Effect::read_clock(),
            Stage::Write(plan, _) => Effect::write_release(plan),
            Stage::Done(_) => return None,
        })
    }

    fn handle(&mut self, answer: Answer<E>) -> Result<(), ProtocolError> {
        let (answered, input) = answer.into_parts();
        let stage = std::mem::replace(&mut self.stage, Stage::ReadLease);
        self.stage = match (stage, input) {
            (Stage::ReadLease, Input::Lease(Some(record))) => Stage::ReadClock(record),
            (Stage::ReadLease, Input::Lease(None)) => Stage::Done(Err(LeaseFailure::NotAdmitted)),
            (Stage::ReadClock(record), Input::Clock(now)) => match observe(record, now) {
                Err(inconsistent) => Stage::Done(Err(LeaseFailure::Inconsistent(inconsistent))),
                Ok(observed) => match self.releaser.decide(observed) {
                    Ok((plan, released)) => Stage::Write(plan, released),
                    Err(answer) => Stage::Done(Ok(answer)),
                },
            },
            (Stage::Write(_, released), Input::Written(true)) => Stage::Done(Ok(released)),
            (Stage::Write(..), Input::Written(false)) => Stage::Done(Err(LeaseFailure::RowChanged)),
            (Stage::ReadLease | Stage::ReadClock(_) | Stage::Write(..), Input::Failed(e)) => {
                Stage::Done(Err(LeaseFailure::Effect(e)))
            }
            (stage, _) => {
                self.stage = stage;
                return Err(ProtocolError::wrong("release", answered));
            }
        };
        Ok(())
    }

    fn end(&self) -> Option<End> {
        match &self.stage {
            Stage::Done(Err(LeaseFailure::Effect(_) | LeaseFailure::RowChanged)) => {
                Some(End::Rollback)
            }
            Stage::Done(_) => Some(End::Commit),
            _ => None,
        }
    }
}

/// A standalone conditional release, inside the lock envelope.
#[derive(Debug)]
pub struct Release<E, R: Releaser = HolderRelease> {
    inner: Serialized<E, ReleaseSteps<E, R>>,
    serial: Serial,
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
        Release::with(OperatorEnd)
    }
}

impl<E, R: Releaser> Release<E, R> {
    /// The release `releaser` decides.
    pub fn with(releaser: R) -> Self {
        Release {
            inner: Serialized::new(ReleaseSteps::with(releaser)),
            serial: Serial::default(),
        }
    }
}

impl<E, R: Releaser> Machine<E> for Release<E, R> {
    type Output = Result<R::Outcome, LeaseFailure<E>>;

    fn poll(&self) -> Option<Effect<'_, E>> {
        self.serial.stamp(self.inner.poll())
    }

    fn handle(&mut self, answer: Answer<E>) -> Result<(), ProtocolError> {
        let inner = &mut self.inner;
        self.serial
            .take("release", answer, |answer| inner.handle(answer))
    }

    fn output(self) -> Result<Self::Output, ProtocolError> {
        if !self.inner.is_done() {
            return Err(ProtocolError::Unfinished { machine: "release" });
        }
        let inner = self.inner;
        if let Some(e) = inner.not_started.or(inner.commit_failed) {
            return Ok(Err(LeaseFailure::Effect(e)));
        }
        inner.body.into_result()
    }
}
