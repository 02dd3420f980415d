//! The fenced publication of `current.json`, in three parts of the lock envelope.
//!
//! Before the transaction, holding NO lock (a holder frozen here stops nobody):
//! 1. read the clock and the committed channel rows; compose a [`Draft`] for the epoch the
//!    holder was granted (pure);
//! 2. make sure the target directory exists and is durable (fsync the parents of every
//!    directory not yet known durable — also after an earlier failure);
//! 3. write a uniquely named temp sibling (`create_new`) and fsync it.
//!
//! Inside the store's serialized write transaction, the target's kernel lock taken right before
//! it (both locks):
//! 4. read the lease row and the clock; `authorize_publish` revalidates {target, epoch, token
//!    hash, held, not expired} — else `Fenced`, nothing is renamed;
//! 5. read the channel rows again; a draft whose clock already read the grant's expiry aborts
//!    the publication (`Expired`: its holder has observed its expiry, whatever the clock says
//!    now); else the authority confirms the draft ([`Draft::confirmed`]: same target and
//!    epoch, same rows, none expired since the draft's clock) — or the document is composed
//!    again from these rows and written to a fresh temp sibling, as in 1–3;
//! 6. read the clock again: at or past `expires_at` the publication aborts (no renewal);
//! 7. rename over `current.json` — if the draft's temp sibling is gone (a successor's sweep,
//!    step 8, removed it while this publication was outside its transaction), the draft is
//!    written again once, here, and 6–7 repeat;
//! 8. remove every other temp sibling (the sweep: drafts of crashed, frozen or superseded
//!    publications; best effort, a failure is not the publication's);
//! 9. the conditional release ([`ReleaseSteps`], token hash AND epoch); commit.
//!
//! After the transaction, both locks let go again:
//! 10. fsync the directory if the rename happened — else remove the temp sibling, if any.
//!
//! Every failure after the draft still runs 9 (a failure before the transaction is carried
//! into it). A publication reports success only when the rename, the directory fsync and every
//! parent fsync it depends on succeeded. A temp sibling is created outside every lock, so the
//! sweep (8) may remove a live one; it runs only under both locks, so it never removes a temp
//! that a transaction is about to rename — one written in a transaction is renamed in it.

use super::release::{ReleaseFailure, ReleaseOutcome, ReleaseSteps};
use super::serialized::{Body, End, Serialized};
use super::{protocol_violation, Effect, Input, Machine};
use crate::projection::channel::ChannelRecord;
use crate::projection::composition::Composition;
use crate::projection::lease::{
    observe, Authority, Credential, DeadlinePassed, Fenced, InconsistentLease,
};
use crate::projection::publication::PublishStep;
use crate::projection::{DocumentError, Draft};
use crate::time::Millis;

/// A publication that renamed its document durably.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Published {
    /// Epoch of the publishing grant.
    pub fencing_epoch: u64,
    /// Size of the document in bytes.
    pub bytes: usize,
    /// Broker time of composition.
    pub published_at: Millis,
}

/// Why a publication did not (durably) publish.
#[derive(Debug)]
pub enum PublishFailure<E> {
    /// The target has no lease row. No file was touched.
    NotAdmitted,
    /// The lease row breaks the row invariants. No file was touched.
    Inconsistent(InconsistentLease),
    /// The holder no longer holds the lease. No file was touched.
    Fenced(Fenced),
    /// The document could not be composed. No file was touched.
    Document(DocumentError),
    /// The deadline passed before the rename: aborted, the temp removed, no renewal.
    Expired(DeadlinePassed),
    /// An effect before the rename failed: `current.json` untouched, the temp removed.
    Effect(E),
    /// The rename happened but the directory fsync failed: readers see the new document, a
    /// power loss may bring back the old one.
    NotDurable(E),
}

/// How a publication ended.
#[derive(Debug)]
pub enum PublishEnd<E> {
    /// The target lock or the transaction could not be had: nothing was renamed or released,
    /// the grant is untouched (a draft written before the transaction was removed; an earlier
    /// failure of the draft is not reported).
    NotStarted(E),
    /// The publication ran, and so did its conditional release.
    Ran {
        /// The publication's result.
        result: Result<Published, PublishFailure<E>>,
        /// The release's result (a failed commit is a failed release).
        release: Result<ReleaseOutcome, ReleaseFailure<E>>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Mark(PublishStep),
    // Before the transaction (no lock); the directory and temp steps also inside it.
    DraftClock,
    DraftChannels,
    PrepareDir,
    SyncParents,
    WriteTemp,
    /// Ready for the transaction (or waiting to learn the grant, in a one-shot).
    Ready,
    // Inside the transaction.
    ReadLease,
    ReadClock,
    ReadChannels,
    DeadlineClock,
    Rename,
    Sweep,
    Releasing,
    End,
    // After the transaction (no lock).
    SyncDir,
    RemoveTemp,
    Done,
}

/// The stage after a marker.
fn after(step: PublishStep) -> Stage {
    match step {
        PublishStep::Composed => Stage::PrepareDir,
        PublishStep::TempWritten => Stage::Ready,
        PublishStep::TransactionOpen => Stage::ReadLease,
        PublishStep::Revalidated => Stage::ReadChannels,
        PublishStep::DeadlineChecked => Stage::Rename,
        PublishStep::Renamed => Stage::Sweep,
        PublishStep::Released => Stage::End,
        PublishStep::Unlocked => Stage::SyncDir,
        PublishStep::DirectorySynced => Stage::Done,
    }
}

/// The publication's steps, for a machine that holds the locks.
#[derive(Debug)]
pub(crate) struct Steps<'r, E> {
    credential: Credential,
    composition: Composition<'r>,
    stage: Stage,
    /// Inside the transaction (decides where the shared file steps lead).
    in_tx: bool,
    record: Option<crate::projection::lease::LeaseRecord>,
    authority: Option<Authority>,
    now: Millis,
    draft: Option<Draft>,
    /// A temp sibling of this publication may exist (written, not yet renamed or removed).
    temp: bool,
    /// The temp sibling to rename was written before the transaction (so a sweep may have
    /// removed it: written again once inside the transaction if the rename finds it gone).
    drafted_outside: bool,
    renamed: bool,
    failure: Option<PublishFailure<E>>,
    release: ReleaseSteps<E>,
}

impl<'r, E> Steps<'r, E> {
    /// The steps publishing for the holder of `credential` (a one-shot: the credential it
    /// expects to be granted, replaced by [`Steps::granted`]).
    pub(crate) fn new(credential: Credential, composition: Composition<'r>) -> Self {
        let release = ReleaseSteps::new(credential.clone());
        Steps {
            credential,
            composition,
            stage: Stage::DraftClock,
            in_tx: false,
            record: None,
            authority: None,
            now: Millis(0),
            draft: None,
            temp: false,
            drafted_outside: false,
            renamed: false,
            failure: None,
            release,
        }
    }

    /// Steps that draft nothing before the transaction (a one-shot over an expired grant,
    /// which is not expected to publish in its envelope): if they publish after all, they
    /// compose inside the transaction.
    pub(crate) fn undrafted(credential: Credential, composition: Composition<'r>) -> Self {
        Steps {
            stage: Stage::Ready,
            ..Self::new(credential, composition)
        }
    }

    /// A one-shot's grant committed inside the transaction with `credential`: the
    /// publication's transaction part starts (the draft was composed for the epoch it
    /// expected; the authority decides whether it stands).
    pub(crate) fn granted(&mut self, credential: Credential) {
        self.release = ReleaseSteps::new(credential.clone());
        self.credential = credential;
        self.begun(true);
    }

    /// The publication's and the release's results, once the envelope has ended
    /// (`commit_failed`: the commit's error, which is the release's too).
    pub(crate) fn results(
        &mut self,
        commit_failed: Option<E>,
    ) -> (
        Result<Published, PublishFailure<E>>,
        Result<ReleaseOutcome, ReleaseFailure<E>>,
    ) {
        let result = match self.failure.take() {
            Some(failure) => Err(failure),
            None => Ok(Published {
                fencing_epoch: self.authority().epoch(),
                bytes: self.draft().bytes().len(),
                published_at: self.draft().composed_at(),
            }),
        };
        let release = match (commit_failed, self.release.take_result()) {
            (Some(e), _) => Err(ReleaseFailure::Effect(e)),
            (None, Some(release)) => release,
            (None, None) => unreachable!("a started publication runs its release"),
        };
        (result, release)
    }
}

impl<E> Steps<'_, E> {
    /// A failure: recorded, then straight to the release (before the transaction: to the
    /// transaction, which runs it).
    fn fail(&mut self, failure: PublishFailure<E>) -> Stage {
        self.failure = Some(failure);
        if self.in_tx {
            Stage::Releasing
        } else {
            Stage::Ready
        }
    }

    /// Composes the draft from `rows` at `self.now`, then writes it (or fails).
    fn compose(&mut self, rows: Vec<ChannelRecord>) -> Stage {
        match Draft::compose(
            &self.credential.target_id,
            self.credential.epoch,
            self.composition,
            rows,
            self.now,
        ) {
            Ok(draft) => {
                self.draft = Some(draft);
                if self.in_tx {
                    Stage::PrepareDir
                } else {
                    Stage::Mark(PublishStep::Composed)
                }
            }
            Err(e) => self.fail(PublishFailure::Document(e)),
        }
    }

    fn authority(&self) -> &Authority {
        match &self.authority {
            Some(authority) => authority,
            None => unreachable!("every stage after revalidation has the authority"),
        }
    }

    fn draft(&self) -> &Draft {
        match &self.draft {
            Some(draft) => draft,
            None => unreachable!("every stage after composition has the draft"),
        }
    }

    /// The effect of the file steps shared by the parts before and inside the transaction.
    fn poll_files(&self) -> Option<Effect<'_>> {
        Some(match self.stage {
            Stage::Mark(step) => Effect::Reached(step),
            Stage::PrepareDir => Effect::PrepareDir,
            Stage::SyncParents => Effect::SyncParents,
            Stage::WriteTemp => Effect::WriteTemp(self.draft().bytes()),
            _ => return None,
        })
    }
}

impl<E> Body<E> for Steps<'_, E> {
    fn poll_before(&self) -> Option<Effect<'_>> {
        match self.stage {
            Stage::DraftClock => Some(Effect::ReadClock),
            Stage::DraftChannels => Some(Effect::ReadChannels),
            // `Ready` names no file step: the transaction begins.
            _ => self.poll_files(),
        }
    }

    fn begun(&mut self, began: bool) {
        self.in_tx = began;
        self.stage = match (began, &self.failure) {
            (false, _) => Stage::RemoveTemp,
            (true, None) => Stage::Mark(PublishStep::TransactionOpen),
            (true, Some(_)) => Stage::Releasing,
        };
    }

    fn poll(&self) -> Effect<'_> {
        match self.stage {
            Stage::ReadLease => Effect::ReadLease,
            Stage::ReadClock | Stage::DeadlineClock => Effect::ReadClock,
            Stage::ReadChannels => Effect::ReadChannels,
            Stage::Rename => Effect::Rename,
            Stage::Sweep => Effect::RemoveOrphans,
            Stage::Releasing => self.release.poll(),
            _ => self.poll_files().unwrap_or(Effect::Finished),
        }
    }

    fn handle(&mut self, input: Input<E>) {
        self.stage = match (self.stage, input) {
            (Stage::Mark(step), Input::Done) => after(step),
            (Stage::DraftClock, Input::Clock(now)) => {
                self.now = now;
                Stage::DraftChannels
            }
            (Stage::DraftChannels, Input::Channels(rows)) => self.compose(rows),
            (Stage::ReadLease, Input::Lease(Some(record))) => {
                self.record = Some(record);
                Stage::ReadClock
            }
            (Stage::ReadLease, Input::Lease(None)) => self.fail(PublishFailure::NotAdmitted),
            (Stage::ReadClock, Input::Clock(now)) => {
                let Some(record) = self.record.take() else {
                    unreachable!("the clock is read after the row")
                };
                match observe(record, now) {
                    Err(inconsistent) => self.fail(PublishFailure::Inconsistent(inconsistent)),
                    Ok(observed) => match observed.authorize_publish(&self.credential) {
                        Ok(authority) => {
                            self.authority = Some(authority);
                            self.now = now;
                            Stage::Mark(PublishStep::Revalidated)
                        }
                        Err(fenced) => self.fail(PublishFailure::Fenced(fenced)),
                    },
                }
            }
            (Stage::ReadChannels, Input::Channels(rows)) => match &self.draft {
                // The draft's clock already read the grant's expiry: the holder has observed
                // it, so nothing is renamed, even if the clock has since stepped back.
                Some(draft) if draft.composed_at() >= self.authority().expires_at() => {
                    let passed = DeadlinePassed {
                        expires_at: self.authority().expires_at(),
                        now: draft.composed_at(),
                    };
                    self.fail(PublishFailure::Expired(passed))
                }
                Some(draft) if draft.confirmed(self.authority(), &rows, self.now) => {
                    Stage::DeadlineClock
                }
                // The rows moved or a row expired since the draft (or a one-shot was granted
                // another epoch than it expected, or drafted nothing): compose again, at the
                // revalidation's clock.
                _ => self.compose(rows),
            },
            (Stage::PrepareDir, Input::Dir { verified: true }) => Stage::WriteTemp,
            (Stage::PrepareDir, Input::Dir { verified: false }) => Stage::SyncParents,
            (Stage::SyncParents, Input::Done) => Stage::WriteTemp,
            (Stage::WriteTemp, input) => {
                // From here on a temp sibling may exist (a failed write can leave one); a
                // second one replaces the first, which the executor removes.
                self.temp = true;
                self.drafted_outside = !self.in_tx;
                match input {
                    Input::Done if self.in_tx => Stage::DeadlineClock,
                    Input::Done => Stage::Mark(PublishStep::TempWritten),
                    Input::Failed(e) => self.fail(PublishFailure::Effect(e)),
                    other => protocol_violation("publish WriteTemp", &other),
                }
            }
            (Stage::DeadlineClock, Input::Clock(now)) => {
                match self.authority().check_deadline(now) {
                    Ok(()) => Stage::Mark(PublishStep::DeadlineChecked),
                    Err(passed) => self.fail(PublishFailure::Expired(passed)),
                }
            }
            (Stage::Rename, Input::Done) => {
                self.temp = false;
                self.renamed = true;
                Stage::Mark(PublishStep::Renamed)
            }
            // The draft written before the transaction is gone (swept): write it again, here,
            // once — the deadline is checked again before that rename.
            (Stage::Rename, Input::Failed(_)) if self.drafted_outside => Stage::WriteTemp,
            // The sweep is best effort: the document is in place, the next publication sweeps.
            (Stage::Sweep, Input::Done | Input::Failed(_)) => Stage::Releasing,
            (Stage::Releasing, input) => {
                self.release.handle(input);
                if self.release.is_done() {
                    Stage::Mark(PublishStep::Released)
                } else {
                    Stage::Releasing
                }
            }
            (Stage::SyncDir, Input::Done) => Stage::Mark(PublishStep::DirectorySynced),
            (Stage::SyncDir, Input::Failed(e)) => {
                self.failure = Some(PublishFailure::NotDurable(e));
                Stage::Done
            }
            (Stage::RemoveTemp, Input::Done | Input::Failed(_)) => {
                self.temp = false;
                Stage::Done
            }
            (
                Stage::DraftChannels
                | Stage::ReadLease
                | Stage::ReadChannels
                | Stage::PrepareDir
                | Stage::SyncParents
                | Stage::Rename,
                Input::Failed(e),
            ) => self.fail(PublishFailure::Effect(e)),
            (stage, other) => protocol_violation(&format!("publish {stage:?}"), &other),
        };
    }

    fn end(&self) -> Option<End> {
        // The only write of a publication's transaction is its release: commit it on every
        // path (a release that found nothing to release wrote nothing).
        (self.stage == Stage::End).then_some(End::Commit)
    }

    fn ended(&mut self) {
        self.in_tx = false;
        self.stage = if self.renamed {
            Stage::Mark(PublishStep::Unlocked)
        } else {
            Stage::RemoveTemp
        };
    }

    fn poll_after(&self) -> Option<Effect<'_>> {
        match self.stage {
            Stage::Mark(step) => Some(Effect::Reached(step)),
            Stage::SyncDir => Some(Effect::SyncDir),
            Stage::RemoveTemp if self.temp => Some(Effect::RemoveTemp),
            // No temp to remove, or done: the machine has ended.
            _ => None,
        }
    }
}

/// The publication machine for the holder of `credential`.
#[derive(Debug)]
pub struct Publish<'r, E> {
    inner: Serialized<E, Steps<'r, E>>,
}

impl<'r, E> Publish<'r, E> {
    /// A publication of the target of `credential`, composed with `composition` (a
    /// `&ChannelRegistry` is the generic profile's).
    pub fn new(credential: Credential, composition: impl Into<Composition<'r>>) -> Self {
        Publish {
            inner: Serialized::new(Steps::new(credential, composition.into())),
        }
    }

    /// The result, once [`Effect::Finished`] was polled.
    ///
    /// # Panics
    /// If the machine has not finished.
    pub fn into_end(mut self) -> PublishEnd<E> {
        assert!(self.inner.is_done(), "publish machine polled to its end");
        if let Some(e) = self.inner.not_started.take() {
            return PublishEnd::NotStarted(e);
        }
        let commit_failed = self.inner.commit_failed.take();
        let (result, release) = self.inner.body.results(commit_failed);
        PublishEnd::Ran { result, release }
    }
}

impl<E> Machine<E> for Publish<'_, E> {
    fn poll(&self) -> Effect<'_> {
        self.inner.poll()
    }

    fn handle(&mut self, input: Input<E>) {
        self.inner.handle(input)
    }
}
