//! One-shot publication: grant, publish and release inside ONE lock envelope, so one commit
//! carries the grant and its release (one durable commit fewer than acquire-then-publish).
//!
//! The prelude is the acquisition's (a live grant in the committed snapshot answers `Held`
//! without any lock). Before the transaction, holding no lock, the publication's first
//! part drafts the document for the epoch the grant is expected to get (one above the epoch
//! the prelude saw) and writes its temp sibling. Inside the transaction the grant's steps run
//! first (read the row, read the clock, `decide_acquire`, write the grant); on a grant, the
//! publication's steps follow unchanged — they read the row back and revalidate it like any
//! publication, and a draft of another epoch than the grant's is composed again — ending with
//! the conditional release and the commit. Refused (`Held`, not admitted, ...), the envelope
//! rolls back, the temp sibling is removed and nothing was written.
//!
//! Only a grant over an unheld or released row publishes in the same envelope. A grant over an
//! *expired* one (a takeover) commits on its own first, and the machine then publishes with it
//! as a two-step publication (a [`Publish`] in an envelope of its own). The reason: the
//! one-shot renames before its grant has committed, and if that commit is lost (a crash, a
//! failed commit), the expired predecessor is the committed holder again — and with the broker
//! clock set back it would revalidate and publish an older epoch over the newer document. A
//! released predecessor can never publish again, so after a lost one-shot commit nothing older
//! can be published (shuttle found this: "published epoch went back").

use super::acquire::{AcquireReport, Applicant, Gated, Granting};
use super::outcome::{LeaseFailure, PublishReport, Unpublished};
use super::publish::{Publish, Steps};
use super::serialized::{Body, End, Serialized};
use super::{Answer, Effect, LeaseInput, LeaseProtocol, Machine, ProtocolError};
use crate::contract::Serial;
use crate::projection::composition::Composition;
use crate::projection::lease::{Credential, HeldBy, Observed};

/// What a one-shot publication that did not fail ended with.
#[derive(Debug)]
pub enum PublishNowReport {
    /// Granted, published and released.
    Published {
        /// The publication.
        published: PublishReport,
        /// The grant took over an expired one: it committed on its own, and the publication
        /// ran in a second envelope.
        takeover: bool,
    },
    /// Another holder's grant is live; nothing was written.
    Held(HeldBy),
}

/// The one-shot's body: the publication's steps (drafting before the transaction), and the
/// grant until it has been decided inside it.
#[derive(Debug)]
pub(crate) struct OneShotBody<'r, E> {
    /// `Some` until the grant moved on to publishing.
    grant: Option<Box<Granting<E>>>,
    steps: Box<Steps<'r, E>>,
    /// Inside the transaction.
    in_tx: bool,
}

impl<'r, E> OneShotBody<'r, E> {
    /// The body for `applicant` over the row the prelude saw.
    pub(crate) fn new(
        applicant: Applicant,
        seen: Observed,
        composition: Composition<'r>,
        now: crate::time::Millis,
    ) -> Self {
        // The draft is composed for the epoch a grant over the row seen would get; if the
        // grant gets another, the publication composes again inside. Over an expired grant
        // nothing is drafted: that takeover commits on its own.
        let expected = Credential {
            target_id: seen.target_id().clone(),
            epoch: seen.epoch().saturating_add(1),
            token_hash: applicant.token_hash,
        };
        let mut steps = match seen {
            Observed::Expired(_) => Steps::undrafted(expected, composition),
            _ => Steps::new(expected, composition),
        };
        // The prelude's clock reading is the run's first (the publication refuses to rename
        // once any reading of the run is at or past the grant's expiry).
        steps.saw_clock(now);
        OneShotBody {
            grant: Some(Box::new(Granting::new(applicant))),
            steps: Box::new(steps),
            in_tx: false,
        }
    }
}

impl<E> Body<E> for OneShotBody<'_, E> {
    fn poll_before(&self) -> Option<Effect<'_, E>> {
        self.steps.poll_before()
    }

    fn begun(&mut self, began: bool) {
        // The grant runs first; the publication's transaction part starts once granted.
        self.in_tx = began;
        if !began {
            self.steps.begun(false);
        }
    }

    fn poll(&self) -> Option<Effect<'_, E>> {
        match &self.grant {
            Some(grant) => grant.poll(),
            None => self.steps.poll(),
        }
    }

    fn handle(&mut self, answer: Answer<LeaseInput<E>>) -> Result<(), ProtocolError> {
        let Some(grant) = self.grant.as_mut().filter(|_| self.in_tx) else {
            return self.steps.handle(answer);
        };
        grant.handle(answer)?;
        if grant.commits_first {
            // Committed on its own (see the module documentation).
            return Ok(());
        }
        if let Some(plan) = grant.granted() {
            let credential = Credential {
                target_id: plan.target_id.clone(),
                epoch: plan.epoch,
                token_hash: grant.token_hash(),
            };
            self.grant = None;
            self.steps.granted(credential);
        }
        Ok(())
    }

    fn end(&self) -> Option<End> {
        match &self.grant {
            // A grant moves on to publishing at once (a takeover, or a grant the document in
            // place is ahead of, commits on its own); a refusal rolls back.
            Some(grant) => grant.end(),
            None => self.steps.end(),
        }
    }

    fn ended(&mut self) {
        self.in_tx = false;
        self.steps.ended();
    }

    fn poll_after(&self) -> Option<Effect<'_, E>> {
        self.steps.poll_after()
    }
}

/// A failure before any publication: nothing to release.
fn refused<E>(failure: LeaseFailure<E>) -> Result<PublishNowReport, Unpublished<E>> {
    Err(Unpublished::Failed {
        failure,
        epoch: None,
        release: None,
    })
}

/// The end of a one-shot answered before its envelope: a live grant, or a failure.
pub(crate) fn answered<E>(
    answer: Result<HeldBy, LeaseFailure<E>>,
) -> Result<PublishNowReport, Unpublished<E>> {
    match answer {
        Ok(held) => Ok(PublishNowReport::Held(held)),
        Err(failure) => refused(failure),
    }
}

/// How a one-shot's body ended once its transaction did.
#[derive(Debug)]
pub(crate) enum BodyEnd<E> {
    /// The one-shot's end.
    Done(Result<PublishNowReport, Unpublished<E>>),
    /// The grant committed on its own: its publication runs in an envelope of its own.
    TakeOver(SecondEnvelope),
}

/// The publication a grant that committed on its own still owes (see the module
/// documentation).
#[derive(Debug)]
pub(crate) struct SecondEnvelope {
    credential: Credential,
    /// The grant took over an expired one.
    pub(crate) takeover: bool,
    /// The largest clock reading of the run so far.
    latest: crate::time::Millis,
}

impl SecondEnvelope {
    /// The publication, counting its steps on from `serial`.
    pub(crate) fn publish<'r, E>(
        self,
        composition: Composition<'r>,
        serial: Serial,
    ) -> Publish<'r, E> {
        Publish::new(self.credential, composition).continuing(serial, self.latest)
    }
}

impl<'r, E> OneShotBody<'r, E> {
    /// The one-shot's end once its transaction has ended: `not_started`, the error that kept
    /// the transaction's body from running; `commit_failed`, the error that lost its commit.
    pub(crate) fn finish(
        self,
        not_started: Option<E>,
        commit_failed: Option<E>,
    ) -> Result<BodyEnd<E>, ProtocolError> {
        if let Some(e) = not_started {
            return Ok(BodyEnd::Done(refused(LeaseFailure::Effect(e))));
        }
        let Some(grant) = self.grant else {
            let published = self.steps.results(commit_failed)?;
            return Ok(BodyEnd::Done(published.map(|published| {
                PublishNowReport::Published {
                    published,
                    takeover: false,
                }
            })));
        };
        let token_hash = grant.token_hash();
        let takeover = grant.takeover;
        let latest = self.steps.latest_clock();
        Ok(match (grant.into_result()?, commit_failed) {
            (_, Some(e)) => BodyEnd::Done(refused(LeaseFailure::Effect(e))),
            // The grant committed on its own: its publication runs in a second envelope.
            (Ok(AcquireReport::Granted(plan)), None) => BodyEnd::TakeOver(SecondEnvelope {
                credential: Credential {
                    target_id: plan.target_id,
                    epoch: plan.epoch,
                    token_hash,
                },
                takeover,
                latest,
            }),
            (Ok(AcquireReport::Held(held)), None) => {
                BodyEnd::Done(Ok(PublishNowReport::Held(held)))
            }
            (Err(failure), None) => BodyEnd::Done(refused(failure)),
        })
    }
}

/// Where a one-shot is.
#[derive(Debug)]
enum Phase<'r, E> {
    /// The prelude, then grant-publish-release in one envelope.
    OneShot(Gated<E, Applicant, OneShotBody<'r, E>>),
    /// The grant committed on its own (it took over an expired one, or the document in place
    /// was ahead of the row): its publication, and whether the grant was a takeover.
    TakenOver(Box<Publish<'r, E>>, bool),
    /// Ended.
    Done(Result<PublishNowReport, Unpublished<E>>),
    /// Only while a step moves the machine from one phase to the next.
    Moving,
}

/// The one-shot publication machine.
#[derive(Debug)]
pub struct PublishNow<'r, E> {
    composition: Composition<'r>,
    phase: Phase<'r, E>,
    /// The serial of the one-shot envelope's steps (a [`Phase::TakenOver`] publication goes on
    /// counting with its own).
    serial: Serial,
}

impl<'r, E> PublishNow<'r, E> {
    /// A one-shot publication for `applicant`, composed with `composition` (a
    /// `&ChannelRegistry` is the generic profile's).
    pub fn new(applicant: Applicant, composition: impl Into<Composition<'r>>) -> Self {
        PublishNow {
            composition: composition.into(),
            phase: Phase::OneShot(Gated::new(applicant)),
            serial: Serial::default(),
        }
    }

    /// The next phase once the one-shot's envelope (or its answer before it) has ended.
    fn ended(
        &self,
        gated: Gated<E, Applicant, OneShotBody<'r, E>>,
    ) -> Result<Phase<'r, E>, ProtocolError> {
        let inner = match gated {
            Gated::Done(answer) => return Ok(Phase::Done(answered(answer))),
            Gated::Serialized(inner) => *inner,
            Gated::Prelude(..) | Gated::Moving => {
                return Err(ProtocolError::Unfinished {
                    machine: "one-shot",
                })
            }
        };
        let Serialized {
            body,
            not_started,
            commit_failed,
            ..
        } = inner;
        Ok(match body.finish(not_started, commit_failed)? {
            BodyEnd::Done(end) => Phase::Done(end),
            BodyEnd::TakeOver(second) => {
                // The envelope's last answer is taken once this returns: the publication's
                // steps count on from the one after it.
                let mut serial = self.serial;
                serial.advanced();
                let takeover = second.takeover;
                Phase::TakenOver(Box::new(second.publish(self.composition, serial)), takeover)
            }
        })
    }
}

impl<E> Machine for PublishNow<'_, E> {
    type Protocol = LeaseProtocol<E>;
    type Output = Result<PublishNowReport, Unpublished<E>>;

    fn poll(&self) -> Option<Effect<'_, E>> {
        match &self.phase {
            Phase::OneShot(gated) => self.serial.stamp(gated.poll()),
            // Stamped by the publication itself, which counts on.
            Phase::TakenOver(publish, _) => publish.poll(),
            Phase::Done(_) | Phase::Moving => None,
        }
    }

    fn handle(&mut self, answer: Answer<LeaseInput<E>>) -> Result<(), ProtocolError> {
        if let Phase::TakenOver(..) = self.phase {
            return self.step(answer);
        }
        let mut serial = self.serial;
        let result = serial.take("one-shot", answer, |answer| self.step(answer));
        self.serial = serial;
        result
    }

    fn output(self) -> Result<Self::Output, ProtocolError> {
        match self.phase {
            Phase::Done(result) => Ok(result),
            _ => Err(ProtocolError::Unfinished {
                machine: "one-shot",
            }),
        }
    }
}

impl<E> PublishNow<'_, E> {
    /// One step of the one-shot: the answer to the effect last polled.
    fn step(&mut self, answer: Answer<LeaseInput<E>>) -> Result<(), ProtocolError> {
        let composition = self.composition;
        let (next, result) = match std::mem::replace(&mut self.phase, Phase::Moving) {
            Phase::OneShot(mut gated) => {
                match gated.handle(answer, |applicant, seen, now| {
                    OneShotBody::new(applicant, seen, composition, now)
                }) {
                    Ok(()) if gated.poll().is_none() => match self.ended(gated) {
                        Ok(next) => (next, Ok(())),
                        Err(e) => (Phase::Moving, Err(e)),
                    },
                    result => (Phase::OneShot(gated), result),
                }
            }
            Phase::TakenOver(mut publish, takeover) => match publish.handle(answer) {
                Ok(()) if publish.poll().is_none() => match publish.output() {
                    Ok(published) => (
                        Phase::Done(published.map(|published| PublishNowReport::Published {
                            published,
                            takeover,
                        })),
                        Ok(()),
                    ),
                    Err(e) => (Phase::Moving, Err(e)),
                },
                result => (Phase::TakenOver(publish, takeover), result),
            },
            ended @ (Phase::Done(_) | Phase::Moving) => (
                ended,
                Err(ProtocolError::wrong("ended one-shot", answer.effect())),
            ),
        };
        self.phase = next;
        result
    }
}
