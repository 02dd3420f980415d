//! Acquisition. A live grant seen in the committed snapshot answers `Held` at once, and an
//! absent row `NotAdmitted`, without any lock (the `Held` answer is advisory: the grant may end
//! a moment later). Otherwise, inside the lock envelope: read the row, read the target's
//! `current.json` (its epoch, if it is a document: the grant numbers past it), read the clock,
//! let the core decide (`decide_acquire`), write the grant WHERE the epoch is still the one
//! observed, commit. A grant is therefore always decided and written under both locks; a
//! contender writes nothing.

use super::outcome::LeaseFailure;
use super::serialized::{Body, End, Serialized};
use super::{Answer, Effect, Input, Machine, ProtocolError, Serial};
use crate::config::LeaseTtl;
use crate::names::InstanceDigest;
use crate::projection::lease::{
    observe, AcquirePlan, AcquireRefused, AcquireRequest, HeldBy, LeaseRecord, Observed,
};
use crate::token::TokenHash;

/// What an acquisition that did not fail ended with.
#[derive(Debug)]
pub enum AcquireReport {
    /// The grant committed.
    Granted(AcquirePlan),
    /// A live grant holds the target; nothing was written.
    Held(HeldBy),
}

/// Who asks, and for how long.
#[derive(Clone, Debug)]
pub struct Applicant {
    /// Hash of the fresh random token the executor generated for this attempt.
    pub token_hash: TokenHash,
    /// Digest identifying the requesting instance.
    pub holder_instance_digest: InstanceDigest,
    /// The configured TTL.
    pub ttl: LeaseTtl,
}

/// Where the grant's steps are, and what each has learned.
#[derive(Debug)]
enum Stage<E> {
    ReadLease,
    /// The row was read; the document at the target's path is read next.
    ReadCurrent(LeaseRecord),
    /// The row and the epoch of the document at the target's path, if any.
    ReadClock(LeaseRecord, Option<u64>),
    Write(AcquirePlan),
    Done(Result<AcquireReport, LeaseFailure<E>>),
}

/// The grant's steps, for a machine that holds the locks.
#[derive(Debug)]
pub(crate) struct Granting<E> {
    applicant: Applicant,
    stage: Stage<E>,
    /// The grant replaces an expired one (a takeover).
    pub(crate) takeover: bool,
    /// The grant must commit before anything is renamed under it: a takeover, or a grant
    /// over a row the document in place is ahead of (a one-shot's rename whose grant was
    /// lost). A one-shot then publishes in an envelope of its own, so the row never falls
    /// two epochs behind the document.
    pub(crate) commits_first: bool,
}

impl<E> Granting<E> {
    pub(crate) fn new(applicant: Applicant) -> Self {
        Granting {
            applicant,
            stage: Stage::ReadLease,
            takeover: false,
            commits_first: false,
        }
    }

    /// The applicant's token hash.
    pub(crate) fn token_hash(&self) -> TokenHash {
        self.applicant.token_hash
    }

    /// The plan of the grant, once it was written.
    pub(crate) fn granted(&self) -> Option<&AcquirePlan> {
        match &self.stage {
            Stage::Done(Ok(AcquireReport::Granted(plan))) => Some(plan),
            _ => None,
        }
    }

    /// What the grant's steps ended with.
    pub(crate) fn into_result(
        self,
    ) -> Result<Result<AcquireReport, LeaseFailure<E>>, ProtocolError> {
        match self.stage {
            Stage::Done(result) => Ok(result),
            _ => Err(ProtocolError::Unfinished { machine: "grant" }),
        }
    }

    /// The clock was read (`now`): the core decides over the row.
    fn decide(
        &mut self,
        record: LeaseRecord,
        published_epoch: Option<u64>,
        now: crate::time::Millis,
    ) -> Stage<E> {
        let request = AcquireRequest {
            token_hash: self.applicant.token_hash,
            holder_instance_digest: self.applicant.holder_instance_digest.clone(),
            now,
            ttl: self.applicant.ttl,
            published_epoch,
        };
        let row_epoch = record.fencing_epoch;
        let observed = observe(record, now);
        // A grant over an expired one is a takeover: its predecessor may still try to
        // publish (and would be fenced only once this grant has committed).
        self.takeover = matches!(observed, Ok(Observed::Expired(_)));
        self.commits_first = self.takeover || published_epoch.is_some_and(|e| e > row_epoch);
        match observed.map(|o| o.decide_acquire(request)) {
            Err(inconsistent) => Stage::Done(Err(LeaseFailure::Inconsistent(inconsistent))),
            Ok(Ok(plan)) => Stage::Write(plan),
            Ok(Err(AcquireRefused::Held(held))) => Stage::Done(Ok(AcquireReport::Held(held))),
            Ok(Err(AcquireRefused::EpochExhausted)) => {
                Stage::Done(Err(LeaseFailure::EpochExhausted))
            }
            Ok(Err(AcquireRefused::ForeignEpoch(foreign))) => {
                Stage::Done(Err(LeaseFailure::ForeignEpoch(foreign)))
            }
        }
    }
}

impl<E> Body<E> for Granting<E> {
    fn poll(&self) -> Option<Effect<'_, E>> {
        Some(match &self.stage {
            Stage::ReadLease => Effect::read_lease(),
            Stage::ReadCurrent(_) => Effect::read_current(),
            Stage::ReadClock(..) => Effect::read_clock(),
            Stage::Write(plan) => Effect::write_grant(plan),
            Stage::Done(_) => return None,
        })
    }

    fn handle(&mut self, answer: Answer<E>) -> Result<(), ProtocolError> {
        let (answered, input) = answer.into_parts();
        let stage = std::mem::replace(&mut self.stage, Stage::ReadLease);
        self.stage = match (stage, input) {
            (Stage::ReadLease, Input::Lease(Some(record))) => Stage::ReadCurrent(record),
            (Stage::ReadLease, Input::Lease(None)) => Stage::Done(Err(LeaseFailure::NotAdmitted)),
            (Stage::ReadCurrent(record), Input::Current(bytes)) => {
                let published_epoch = bytes
                    .as_deref()
                    .and_then(crate::projection::published_epoch);
                Stage::ReadClock(record, published_epoch)
            }
            (Stage::ReadClock(record, published_epoch), Input::Clock(now)) => {
                self.decide(record, published_epoch, now)
            }
            (Stage::Write(plan), Input::Written(true)) => {
                Stage::Done(Ok(AcquireReport::Granted(plan)))
            }
            (Stage::Write(_), Input::Written(false)) => Stage::Done(Err(LeaseFailure::RowChanged)),
            (
                Stage::ReadLease | Stage::ReadCurrent(_) | Stage::ReadClock(..) | Stage::Write(_),
                Input::Failed(e),
            ) => Stage::Done(Err(LeaseFailure::Effect(e))),
            (stage, _) => {
                self.stage = stage;
                return Err(ProtocolError::wrong("grant", answered));
            }
        };
        Ok(())
    }

    fn end(&self) -> Option<End> {
        match &self.stage {
            Stage::Done(Ok(AcquireReport::Granted(_))) => Some(End::Commit),
            Stage::Done(_) => Some(End::Rollback),
            _ => None,
        }
    }
}

/// The lock-free prelude of every acquisition: the committed snapshot's row and the clock
/// answer `Held` (a live grant) or `NotAdmitted` (no row) without any lock.
#[derive(Debug)]
pub(crate) enum Prelude {
    /// Reading the committed snapshot.
    Snapshot,
    /// The snapshot row was read; the clock decides whether it is a live grant.
    SnapshotClock(LeaseRecord),
}

/// Where the prelude leads.
pub(crate) enum PreludeNext<E> {
    /// The prelude needs another effect.
    Continue(Prelude),
    /// No live grant seen: take the locks (what was seen — unheld, expired or released — and
    /// the clock reading it was seen at).
    Serialize(Observed, crate::time::Millis),
    /// Answered without any lock: a live grant, or a failure.
    Answered(Result<HeldBy, LeaseFailure<E>>),
    /// An answer the prelude did not ask for: refused, the prelude unchanged.
    Refused(Prelude, ProtocolError),
}

impl Prelude {
    pub(crate) fn poll<E>(&self) -> Effect<'static, E> {
        match self {
            Prelude::Snapshot => Effect::read_committed_lease(),
            Prelude::SnapshotClock(_) => Effect::read_clock(),
        }
    }

    /// The prelude's next step; an answer it did not ask for is refused with the prelude
    /// unchanged.
    pub(crate) fn step<E>(self, answer: Answer<E>) -> PreludeNext<E> {
        let (answered, input) = answer.into_parts();
        match (self, input) {
            (Prelude::Snapshot, Input::Lease(Some(record))) => {
                PreludeNext::Continue(Prelude::SnapshotClock(record))
            }
            // Lease rows are never deleted, so a target absent from a committed state was not
            // admitted then: answered without taking any lock (nothing is created, not even
            // the target's lock file).
            (Prelude::Snapshot, Input::Lease(None)) => {
                PreludeNext::Answered(Err(LeaseFailure::NotAdmitted))
            }
            (Prelude::Snapshot, Input::Failed(e)) => {
                PreludeNext::Answered(Err(LeaseFailure::Effect(e)))
            }
            (Prelude::SnapshotClock(record), Input::Clock(now)) => match observe(record, now) {
                Ok(Observed::Held(live)) => PreludeNext::Answered(Ok(live.held_by())),
                Ok(observed) => PreludeNext::Serialize(observed, now),
                Err(inconsistent) => {
                    PreludeNext::Answered(Err(LeaseFailure::Inconsistent(inconsistent)))
                }
            },
            (prelude, _) => {
                PreludeNext::Refused(prelude, ProtocolError::wrong("acquire prelude", answered))
            }
        }
    }
}

/// The phases every acquiring machine goes through: the lock-free prelude (with the seed `S`
/// its body is made from), then its body inside the lock envelope — or an answer before it.
#[derive(Debug)]
pub(crate) enum Gated<E, S, B> {
    Prelude(Prelude, S),
    /// Inside the lock envelope.
    Serialized(Box<Serialized<E, B>>),
    /// Answered before the envelope: a live grant, or a failure.
    Done(Result<HeldBy, LeaseFailure<E>>),
    /// Only while a step moves the machine from one phase to the next.
    Moving,
}

impl<E, S, B: Body<E>> Gated<E, S, B> {
    pub(crate) fn new(seed: S) -> Self {
        Gated::Prelude(Prelude::Snapshot, seed)
    }

    pub(crate) fn poll(&self) -> Option<Effect<'_, E>> {
        match self {
            Gated::Prelude(prelude, _) => Some(prelude.poll()),
            Gated::Serialized(inner) => inner.poll(),
            Gated::Done(_) | Gated::Moving => None,
        }
    }

    /// Consumes `answer`; `body` makes the envelope's body from the seed, what the prelude
    /// saw and its clock reading, when the prelude leads into the envelope.
    pub(crate) fn handle(
        &mut self,
        answer: Answer<E>,
        body: impl FnOnce(S, Observed, crate::time::Millis) -> B,
    ) -> Result<(), ProtocolError> {
        let (next, result) = match std::mem::replace(self, Gated::Moving) {
            // The prelude's answers must answer the effect polled (a committed-row read is
            // not the clock's, nor the transaction's row read).
            Gated::Prelude(prelude, seed) if prelude.poll::<E>().name() != answer.effect() => {
                let refused = ProtocolError::wrong("acquire prelude", answer.effect());
                (Gated::Prelude(prelude, seed), Err(refused))
            }
            Gated::Prelude(prelude, seed) => match prelude.step(answer) {
                PreludeNext::Refused(prelude, e) => (Gated::Prelude(prelude, seed), Err(e)),
                PreludeNext::Continue(prelude) => (Gated::Prelude(prelude, seed), Ok(())),
                PreludeNext::Answered(answer) => (Gated::Done(answer), Ok(())),
                PreludeNext::Serialize(seen, now) => (
                    Gated::Serialized(Box::new(Serialized::new(body(seed, seen, now)))),
                    Ok(()),
                ),
            },
            Gated::Serialized(mut inner) => {
                let result = inner.handle(answer);
                (Gated::Serialized(inner), result)
            }
            ended @ (Gated::Done(_) | Gated::Moving) => (
                ended,
                Err(ProtocolError::wrong("ended machine", answer.effect())),
            ),
        };
        *self = next;
        result
    }
}

/// The acquisition machine.
#[derive(Debug)]
pub struct Acquire<E> {
    phase: Gated<E, Applicant, Granting<E>>,
    serial: Serial,
}

impl<E> Acquire<E> {
    /// An acquisition for `applicant`.
    pub fn new(applicant: Applicant) -> Self {
        Acquire {
            phase: Gated::new(applicant),
            serial: Serial::default(),
        }
    }
}

impl<E> Machine<E> for Acquire<E> {
    type Output = Result<AcquireReport, LeaseFailure<E>>;

    fn poll(&self) -> Option<Effect<'_, E>> {
        self.serial.stamp(self.phase.poll())
    }

    fn handle(&mut self, answer: Answer<E>) -> Result<(), ProtocolError> {
        let phase = &mut self.phase;
        self.serial.take("acquire", answer, |answer| {
            phase.handle(answer, |applicant, _, _| Granting::new(applicant))
        })
    }

    fn output(self) -> Result<Self::Output, ProtocolError> {
        match self.phase {
            Gated::Done(result) => Ok(result.map(AcquireReport::Held)),
            Gated::Serialized(inner) if inner.is_done() => {
                let inner = *inner;
                if let Some(e) = inner.not_started.or(inner.commit_failed) {
                    return Ok(Err(LeaseFailure::Effect(e)));
                }
                inner.body.into_result()
            }
            _ => Err(ProtocolError::Unfinished { machine: "acquire" }),
        }
    }
}
