//! Acquisition. A live grant seen in the committed snapshot answers `Held` at once, and an
//! absent row `NotAdmitted`, without any lock (the `Held` answer is advisory: the grant may end
//! a moment later). Otherwise, inside the lock envelope: read the row, read the target's
//! `current.json` (its epoch, if it is a document: the grant numbers past it), read the clock,
//! let the core decide (`decide_acquire`), write the grant WHERE the epoch is still the one
//! observed, commit. A grant is therefore always decided and written under both locks; a
//! contender writes nothing.

use super::serialized::{Body, End, Serialized};
use super::{protocol_violation, Effect, Input, Machine};
use crate::config::LeaseTtl;
use crate::names::InstanceDigest;
use crate::projection::lease::{
    observe, AcquirePlan, AcquireRefused, AcquireRequest, HeldBy, InconsistentLease, LeaseRecord,
    Observed,
};
use crate::token::TokenHash;

/// What an acquisition ended with.
#[derive(Debug)]
pub enum Acquired<E> {
    /// The grant committed.
    Granted(AcquirePlan),
    /// A live grant holds the target; nothing was written.
    Held(HeldBy),
    /// No grant: nothing was written.
    Failed(AcquireFailure<E>),
}

/// Why an acquisition failed (nothing was written).
#[derive(Debug)]
pub enum AcquireFailure<E> {
    /// The target has no lease row.
    NotAdmitted,
    /// The lease row breaks the row invariants.
    Inconsistent(InconsistentLease),
    /// The epoch cannot be raised any further.
    EpochExhausted,
    /// The conditional grant write changed no row although the decision, made under the same
    /// locks, said it would.
    RowChanged,
    /// An effect failed (busy store or target lock, a store error, the commit).
    Effect(E),
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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    ReadLease,
    ReadCurrent,
    ReadClock,
    Write,
    Done,
}

/// The grant's steps, for a machine that holds the locks.
#[derive(Debug)]
pub(crate) struct Grant<E> {
    applicant: Applicant,
    stage: Stage,
    record: Option<LeaseRecord>,
    /// The epoch of the document at the target's path, if any.
    published_epoch: Option<u64>,
    plan: Option<AcquirePlan>,
    pub(crate) result: Option<Acquired<E>>,
    /// The grant replaces an expired one (a takeover).
    pub(crate) takeover: bool,
}

impl<E> Grant<E> {
    pub(crate) fn new(applicant: Applicant) -> Self {
        Grant {
            applicant,
            stage: Stage::ReadLease,
            record: None,
            published_epoch: None,
            plan: None,
            result: None,
            takeover: false,
        }
    }

    /// The applicant's token hash.
    pub(crate) fn token_hash(&self) -> crate::token::TokenHash {
        self.applicant.token_hash
    }

    fn finish(&mut self, result: Acquired<E>) -> Stage {
        self.result = Some(result);
        Stage::Done
    }
}

impl<E> Body<E> for Grant<E> {
    fn poll(&self) -> Effect<'_> {
        match (self.stage, &self.plan) {
            (Stage::ReadLease, _) => Effect::ReadLease,
            (Stage::ReadCurrent, _) => Effect::ReadCurrent,
            (Stage::ReadClock, _) => Effect::ReadClock,
            (Stage::Write, Some(plan)) => Effect::WriteGrant(plan),
            (Stage::Write, None) | (Stage::Done, _) => Effect::Finished,
        }
    }

    fn handle(&mut self, input: Input<E>) {
        self.stage = match (self.stage, input) {
            (Stage::ReadLease, Input::Lease(Some(record))) => {
                self.record = Some(record);
                Stage::ReadCurrent
            }
            (Stage::ReadCurrent, Input::Current(bytes)) => {
                self.published_epoch = bytes
                    .as_deref()
                    .and_then(crate::projection::ProjectionDocument::published_epoch);
                Stage::ReadClock
            }
            (Stage::ReadLease, Input::Lease(None)) => {
                self.finish(Acquired::Failed(AcquireFailure::NotAdmitted))
            }
            (Stage::ReadClock, Input::Clock(now)) => {
                let Some(record) = self.record.take() else {
                    unreachable!("the clock is read after the row")
                };
                let request = AcquireRequest {
                    token_hash: self.applicant.token_hash,
                    holder_instance_digest: self.applicant.holder_instance_digest.clone(),
                    now,
                    ttl: self.applicant.ttl,
                    published_epoch: self.published_epoch,
                };
                let observed = observe(record, now);
                // A grant over an expired one is a takeover: its predecessor may still try to
                // publish (and would be fenced only once this grant has committed).
                self.takeover = matches!(observed, Ok(Observed::Expired(_)));
                match observed.map(|o| o.decide_acquire(request)) {
                    Err(inconsistent) => {
                        self.finish(Acquired::Failed(AcquireFailure::Inconsistent(inconsistent)))
                    }
                    Ok(Ok(plan)) => {
                        self.plan = Some(plan);
                        Stage::Write
                    }
                    Ok(Err(AcquireRefused::Held(held))) => self.finish(Acquired::Held(held)),
                    Ok(Err(AcquireRefused::EpochExhausted)) => {
                        self.finish(Acquired::Failed(AcquireFailure::EpochExhausted))
                    }
                }
            }
            (Stage::Write, Input::Written(true)) => match self.plan.take() {
                Some(plan) => self.finish(Acquired::Granted(plan)),
                None => unreachable!("the grant is written from its plan"),
            },
            (Stage::Write, Input::Written(false)) => {
                self.finish(Acquired::Failed(AcquireFailure::RowChanged))
            }
            (
                Stage::ReadLease | Stage::ReadCurrent | Stage::ReadClock | Stage::Write,
                Input::Failed(e),
            ) => self.finish(Acquired::Failed(AcquireFailure::Effect(e))),
            (stage, other) => protocol_violation(&format!("acquire {stage:?}"), &other),
        };
    }

    fn end(&self) -> Option<End> {
        match (&self.result, self.stage) {
            (_, Stage::ReadLease | Stage::ReadCurrent | Stage::ReadClock | Stage::Write) => None,
            (Some(Acquired::Granted(_)), _) => Some(End::Commit),
            _ => Some(End::Rollback),
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
    /// No live grant seen: take the locks (what was seen: unheld, expired or released).
    Serialize(Observed),
    /// Answered without any lock.
    Answered(Acquired<E>),
}

impl Prelude {
    pub(crate) fn poll(&self) -> Effect<'static> {
        match self {
            Prelude::Snapshot => Effect::ReadCommittedLease,
            Prelude::SnapshotClock(_) => Effect::ReadClock,
        }
    }

    pub(crate) fn handle<E>(self, input: Input<E>) -> PreludeNext<E> {
        match (self, input) {
            (Prelude::Snapshot, Input::Lease(Some(record))) => {
                PreludeNext::Continue(Prelude::SnapshotClock(record))
            }
            // Lease rows are never deleted, so a target absent from a committed state was not
            // admitted then: answered without taking any lock (nothing is created, not even
            // the target's lock file).
            (Prelude::Snapshot, Input::Lease(None)) => {
                PreludeNext::Answered(Acquired::Failed(AcquireFailure::NotAdmitted))
            }
            (Prelude::Snapshot, Input::Failed(e)) => {
                PreludeNext::Answered(Acquired::Failed(AcquireFailure::Effect(e)))
            }
            (Prelude::SnapshotClock(record), Input::Clock(now)) => match observe(record, now) {
                Ok(Observed::Held(live)) => PreludeNext::Answered(Acquired::Held(live.held_by())),
                Ok(observed) => PreludeNext::Serialize(observed),
                Err(inconsistent) => PreludeNext::Answered(Acquired::Failed(
                    AcquireFailure::Inconsistent(inconsistent),
                )),
            },
            (_, other) => protocol_violation("acquire prelude", &other),
        }
    }
}

/// The phases every acquiring machine goes through: the lock-free prelude, then its body
/// inside the lock envelope — or an answer before it.
#[derive(Debug)]
pub(crate) enum Gated<E, B> {
    Prelude(Prelude),
    /// Inside the lock envelope.
    Serialized(Box<Serialized<E, B>>),
    /// Answered before the envelope.
    Done(Option<Acquired<E>>),
}

impl<E, B: Body<E>> Gated<E, B> {
    pub(crate) fn new() -> Self {
        Gated::Prelude(Prelude::Snapshot)
    }

    pub(crate) fn poll(&self) -> Effect<'_> {
        match self {
            Gated::Prelude(prelude) => prelude.poll(),
            Gated::Serialized(inner) => inner.poll(),
            Gated::Done(_) => Effect::Finished,
        }
    }

    /// Consumes `input`; `body` makes the envelope's body from what the prelude saw when it
    /// leads into the envelope (called at most once).
    pub(crate) fn handle(&mut self, input: Input<E>, body: impl FnOnce(Observed) -> B) {
        let phase = std::mem::replace(self, Gated::Done(None));
        *self = match phase {
            Gated::Prelude(prelude) => match prelude.handle(input) {
                PreludeNext::Continue(prelude) => Gated::Prelude(prelude),
                PreludeNext::Answered(answer) => Gated::Done(Some(answer)),
                PreludeNext::Serialize(seen) => {
                    Gated::Serialized(Box::new(Serialized::new(body(seen))))
                }
            },
            Gated::Serialized(mut inner) => {
                inner.handle(input);
                Gated::Serialized(inner)
            }
            Gated::Done(_) => protocol_violation("finished machine", &input),
        };
    }
}

/// The acquisition machine.
#[derive(Debug)]
pub struct Acquire<E> {
    applicant: Option<Applicant>,
    phase: Gated<E, Grant<E>>,
}

impl<E> Acquire<E> {
    /// An acquisition for `applicant`.
    pub fn new(applicant: Applicant) -> Self {
        Acquire {
            applicant: Some(applicant),
            phase: Gated::new(),
        }
    }

    /// The result, once [`Effect::Finished`] was polled.
    ///
    /// # Panics
    /// If the machine has not finished.
    pub fn into_result(self) -> Acquired<E> {
        match self.phase {
            Gated::Done(Some(result)) => result,
            Gated::Serialized(mut inner) if inner.is_done() => {
                if let Some(e) = inner.not_started.take() {
                    return Acquired::Failed(AcquireFailure::Effect(e));
                }
                if let Some(e) = inner.commit_failed.take() {
                    return Acquired::Failed(AcquireFailure::Effect(e));
                }
                match inner.body.result.take() {
                    Some(result) => result,
                    None => unreachable!("a started grant runs its steps to their end"),
                }
            }
            _ => panic!("acquire machine not polled to its end"),
        }
    }
}

impl<E> Machine<E> for Acquire<E> {
    fn poll(&self) -> Effect<'_> {
        self.phase.poll()
    }

    fn handle(&mut self, input: Input<E>) {
        let applicant = &mut self.applicant;
        self.phase.handle(input, |_| match applicant.take() {
            Some(applicant) => Grant::new(applicant),
            None => unreachable!("the envelope is entered once"),
        });
    }
}
