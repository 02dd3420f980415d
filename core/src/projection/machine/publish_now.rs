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
//! *expired* one (a takeover) commits on its own first ([`PublishNowEnd::TakenOver`]; the
//! caller then publishes with it as a two-step publication). The reason: the one-shot renames
//! before its grant has committed, and if that commit is lost (a crash, a failed commit), the
//! expired predecessor is the committed holder again — and with the broker clock set back it
//! would revalidate and publish an older epoch over the newer document. A released
//! predecessor can never publish again, so after a lost one-shot commit nothing older can be
//! published (shuttle found this: "published epoch went back").

use super::acquire::{Acquired, Applicant, Gated, Grant};
use super::publish::{PublishFailure, Published, Steps};
use super::release::{ReleaseFailure, ReleaseOutcome};
use super::serialized::{Body, End};
use super::{Effect, Input, Machine};
use crate::projection::composition::Composition;
use crate::projection::lease::{Credential, Observed};

/// How a one-shot publication ended.
#[derive(Debug)]
pub enum PublishNowEnd<E> {
    /// No grant (held, not admitted, or a failure before any write); nothing was written.
    NotGranted(Acquired<E>),
    /// The grant took over an expired one: it committed on its own and nothing was published;
    /// publish with it as a two-step publication (its credential: the plan's target and epoch,
    /// the applicant's token hash).
    TakenOver(crate::projection::lease::AcquirePlan),
    /// Granted at `epoch`; the publication ran, and so did its release.
    Ran {
        /// The epoch of the grant.
        epoch: u64,
        /// The publication's result.
        result: Result<Published, PublishFailure<E>>,
        /// The release's result (a failed commit is a failed release, and then the grant did
        /// not commit either).
        release: Result<ReleaseOutcome, ReleaseFailure<E>>,
    },
}

/// The one-shot's body: the publication's steps (drafting before the transaction), and the
/// grant until it has been decided inside it.
#[derive(Debug)]
struct Stage<'r, E> {
    /// `Some` until the grant moved on to publishing.
    grant: Option<Box<Grant<E>>>,
    /// The epoch granted, once publishing.
    epoch: Option<u64>,
    steps: Box<Steps<'r, E>>,
    /// Inside the transaction.
    in_tx: bool,
}

impl<E> Body<E> for Stage<'_, E> {
    fn poll_before(&self) -> Option<Effect<'_>> {
        self.steps.poll_before()
    }

    fn begun(&mut self, began: bool) {
        // The grant runs first; the publication's transaction part starts once granted.
        self.in_tx = began;
        if !began {
            self.steps.begun(false);
        }
    }

    fn poll(&self) -> Effect<'_> {
        match &self.grant {
            Some(grant) => grant.poll(),
            None => self.steps.poll(),
        }
    }

    fn handle(&mut self, input: Input<E>) {
        let Some(grant) = self.grant.as_mut().filter(|_| self.in_tx) else {
            return self.steps.handle(input);
        };
        grant.handle(input);
        if grant.takeover {
            // Committed on its own (see the module documentation).
            return;
        }
        if let Some(Acquired::Granted(plan)) = &grant.result {
            let credential = Credential {
                target_id: plan.target_id.clone(),
                epoch: plan.epoch,
                token_hash: grant.token_hash(),
            };
            self.epoch = Some(plan.epoch);
            self.grant = None;
            self.steps.granted(credential);
        }
    }

    fn end(&self) -> Option<End> {
        match &self.grant {
            // A grant moves on to publishing at once (a takeover commits on its own); a refusal
            // rolls back.
            Some(grant) => grant.end(),
            None => self.steps.end(),
        }
    }

    fn ended(&mut self) {
        self.in_tx = false;
        self.steps.ended();
    }

    fn poll_after(&self) -> Option<Effect<'_>> {
        self.steps.poll_after()
    }
}

/// The one-shot publication machine.
#[derive(Debug)]
pub struct PublishNow<'r, E> {
    applicant: Option<Applicant>,
    composition: Composition<'r>,
    phase: Gated<E, Stage<'r, E>>,
}

impl<'r, E> PublishNow<'r, E> {
    /// A one-shot publication for `applicant`, composed with `composition` (a
    /// `&ChannelRegistry` is the generic profile's).
    pub fn new(applicant: Applicant, composition: impl Into<Composition<'r>>) -> Self {
        PublishNow {
            applicant: Some(applicant),
            composition: composition.into(),
            phase: Gated::new(),
        }
    }

    /// The result, once [`Effect::Finished`] was polled.
    ///
    /// # Panics
    /// If the machine has not finished.
    pub fn into_end(self) -> PublishNowEnd<E> {
        match self.phase {
            Gated::Done(Some(answer)) => PublishNowEnd::NotGranted(answer),
            Gated::Serialized(mut inner) if inner.is_done() => {
                if let Some(e) = inner.not_started.take() {
                    return PublishNowEnd::NotGranted(Acquired::Failed(
                        super::acquire::AcquireFailure::Effect(e),
                    ));
                }
                let commit_failed = inner.commit_failed.take();
                let mut stage = inner.body;
                match (stage.grant, stage.epoch) {
                    (Some(mut grant), _) => match (grant.result.take(), commit_failed) {
                        (_, Some(e)) => PublishNowEnd::NotGranted(Acquired::Failed(
                            super::acquire::AcquireFailure::Effect(e),
                        )),
                        (Some(Acquired::Granted(plan)), None) => PublishNowEnd::TakenOver(plan),
                        (Some(answer), None) => PublishNowEnd::NotGranted(answer),
                        (None, None) => {
                            unreachable!("a started grant runs its steps to their end")
                        }
                    },
                    (None, Some(epoch)) => {
                        let (result, release) = stage.steps.results(commit_failed);
                        PublishNowEnd::Ran {
                            epoch,
                            result,
                            release,
                        }
                    }
                    (None, None) => unreachable!("the grant moves on with its epoch"),
                }
            }
            _ => panic!("one-shot publication machine not polled to its end"),
        }
    }
}

impl<E> Machine<E> for PublishNow<'_, E> {
    fn poll(&self) -> Effect<'_> {
        self.phase.poll()
    }

    fn handle(&mut self, input: Input<E>) {
        let (applicant, composition) = (&mut self.applicant, self.composition);
        self.phase.handle(input, |seen| match applicant.take() {
            Some(applicant) => {
                // The draft is composed for the epoch a grant over the row seen would get; if
                // the grant gets another, the publication composes again inside. Over an
                // expired grant nothing is drafted: that takeover commits on its own.
                let expected = Credential {
                    target_id: seen.target_id().clone(),
                    epoch: seen.epoch().saturating_add(1),
                    token_hash: applicant.token_hash,
                };
                let steps = match seen {
                    Observed::Expired(_) => Steps::undrafted(expected, composition),
                    _ => Steps::new(expected, composition),
                };
                Stage {
                    grant: Some(Box::new(Grant::new(applicant))),
                    epoch: None,
                    steps: Box::new(steps),
                    in_tx: false,
                }
            }
            None => unreachable!("the envelope is entered once"),
        });
    }
}
