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

use super::outcome::{fold, LeaseFailure, PublishReport, Unpublished};
use super::release::ReleaseSteps;
use super::serialized::{Body, End, Serialized};
use super::{
    Answer, Effect, FileEffect, LeaseInput, LeaseProtocol, Machine, ProtocolError, StoreEffect,
};
use crate::contract::Serial;
use crate::projection::channel::ChannelRecord;
use crate::projection::composition::Composition;
use crate::projection::draft::Draft;
use crate::projection::lease::{observe, Authority, Credential, Fenced, LeaseRecord};
use crate::projection::publication::PublishStep;
use crate::time::Millis;

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
    /// The document in place: its epoch must be below the grant's (the resource's fence).
    ReadCurrent,
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
        PublishStep::Revalidated => Stage::ReadCurrent,
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
    record: Option<LeaseRecord>,
    authority: Option<Authority>,
    now: Millis,
    /// The largest clock reading of the whole run (a one-shot's prelude included): once it
    /// is at or past the grant's expiry the holder has observed its expiry, so nothing is
    /// renamed, however far the clock steps back afterwards.
    latest: Millis,
    /// The document in place was already checked below the grant's epoch under these locks
    /// (a one-shot's grant numbered past it).
    document_checked: bool,
    draft: Option<Draft>,
    /// A temp sibling of this publication may exist (written, not yet renamed or removed).
    temp: bool,
    /// The temp sibling to rename was written before the transaction (so a sweep may have
    /// removed it: written again once inside the transaction if the rename finds it gone).
    drafted_outside: bool,
    /// What the rename published (`None` until it happened).
    renamed: Option<PublishReport>,
    failure: Option<LeaseFailure<E>>,
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
            latest: Millis(0),
            document_checked: false,
            draft: None,
            temp: false,
            drafted_outside: false,
            renamed: None,
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
        // The grant read the document in place under these locks and numbered past it.
        self.document_checked = true;
        self.begun(true);
    }

    /// A clock reading of the run (before these steps: a one-shot's prelude).
    pub(crate) fn saw_clock(&mut self, now: Millis) {
        self.latest = self.latest.max(now);
    }

    /// The largest clock reading of the run so far.
    pub(crate) fn latest_clock(&self) -> Millis {
        self.latest
    }

    /// The publication's result, its release's folded in, once the envelope has ended
    /// (`commit_failed`: the commit's error, which is the release's too).
    pub(crate) fn results(
        self,
        commit_failed: Option<E>,
    ) -> Result<Result<PublishReport, Unpublished<E>>, ProtocolError> {
        let result = match (self.failure, self.renamed) {
            (Some(failure), _) => Err(failure),
            (None, Some(published)) => Ok(published),
            (None, None) => return Err(ProtocolError::Unfinished { machine: "publish" }),
        };
        let release = match commit_failed {
            Some(e) => Err(LeaseFailure::Effect(e)),
            None => self.release.into_result()?,
        };
        Ok(fold(result, release, self.credential.epoch))
    }
}

impl<E> Steps<'_, E> {
    /// A failure: recorded, then straight to the release (before the transaction: to the
    /// transaction, which runs it).
    fn fail(&mut self, failure: LeaseFailure<E>) -> Stage {
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
            Err(e) => self.fail(LeaseFailure::Document(e)),
        }
    }

    /// The effect of the file steps shared by the parts before and inside the transaction.
    fn poll_files(&self) -> Option<Effect<'_, E>> {
        Some(match (self.stage, &self.draft) {
            (Stage::Mark(step), _) => Effect::reached(step),
            (Stage::PrepareDir, _) => FileEffect::prepare_dir().into(),
            (Stage::SyncParents, _) => FileEffect::sync_parents().into(),
            (Stage::WriteTemp, Some(draft)) => FileEffect::write_temp(draft.bytes()).into(),
            _ => return None,
        })
    }
}

impl<E> Body<E> for Steps<'_, E> {
    fn poll_before(&self) -> Option<Effect<'_, E>> {
        match self.stage {
            Stage::DraftClock => Some(Effect::read_clock()),
            Stage::DraftChannels => Some(StoreEffect::read_channels().into()),
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

    fn poll(&self) -> Option<Effect<'_, E>> {
        Some(match self.stage {
            Stage::ReadLease => StoreEffect::read_lease().into(),
            Stage::ReadClock | Stage::DeadlineClock => Effect::read_clock(),
            Stage::ReadCurrent => FileEffect::read_current().into(),
            Stage::ReadChannels => StoreEffect::read_channels().into(),
            Stage::Rename => FileEffect::rename().into(),
            Stage::Sweep => FileEffect::remove_orphans().into(),
            Stage::Releasing => return self.release.poll(),
            _ => return self.poll_files(),
        })
    }

    fn handle(&mut self, answer: Answer<LeaseInput<E>>) -> Result<(), ProtocolError> {
        if self.stage == Stage::Releasing {
            self.release.handle(answer)?;
            if self.release.is_done() {
                self.stage = Stage::Mark(PublishStep::Released);
            }
            return Ok(());
        }
        let (answered, input) = answer.into_parts();
        let wrong = || ProtocolError::wrong("publish", answered);
        self.stage = match (self.stage, input) {
            (Stage::Mark(PublishStep::Revalidated), LeaseInput::Done) if self.document_checked => {
                Stage::ReadChannels
            }
            (Stage::Mark(step), LeaseInput::Done) => after(step),
            (Stage::DraftClock, LeaseInput::Clock(now)) => {
                self.now = now;
                self.saw_clock(now);
                Stage::DraftChannels
            }
            (Stage::DraftChannels, LeaseInput::Channels(rows)) => self.compose(rows),
            (Stage::ReadLease, LeaseInput::Lease(Some(record))) => {
                self.record = Some(record);
                Stage::ReadClock
            }
            (Stage::ReadLease, LeaseInput::Lease(None)) => self.fail(LeaseFailure::NotAdmitted),
            (Stage::ReadClock, LeaseInput::Clock(now)) => {
                let record = self.record.take().ok_or_else(wrong)?;
                self.saw_clock(now);
                match observe(record, now) {
                    Err(inconsistent) => self.fail(LeaseFailure::Inconsistent(inconsistent)),
                    Ok(observed) => match observed.authorize_publish(&self.credential) {
                        // An earlier reading of the run already saw the grant's expiry: the
                        // holder has observed it, so nothing is renamed, even if the clock
                        // has since stepped back.
                        Ok(authority) => match authority.check_deadline(self.latest) {
                            Err(passed) => self.fail(LeaseFailure::Expired(passed)),
                            Ok(()) => {
                                self.authority = Some(authority);
                                self.now = now;
                                Stage::Mark(PublishStep::Revalidated)
                            }
                        },
                        Err(fenced) => self.fail(LeaseFailure::Fenced(fenced)),
                    },
                }
            }
            (Stage::ReadCurrent, LeaseInput::Current(bytes)) => {
                match bytes
                    .as_deref()
                    .and_then(crate::projection::epoch::published_epoch)
                {
                    // A grant renames at most one document: one of its epoch or a later one
                    // is in place already (its release did not commit, or a copy of it
                    // published), so nothing is renamed.
                    Some(document_epoch) if document_epoch >= self.credential.epoch => {
                        self.fail(LeaseFailure::Fenced(Fenced::DocumentAhead {
                            document_epoch,
                        }))
                    }
                    _ => Stage::ReadChannels,
                }
            }
            (Stage::ReadChannels, LeaseInput::Channels(rows)) => {
                let authority = self.authority.as_ref().ok_or_else(wrong)?;
                match &self.draft {
                    Some(draft) if draft.confirmed(authority, &rows, self.now) => {
                        Stage::DeadlineClock
                    }
                    // The rows moved or a row expired since the draft (or a one-shot was
                    // granted another epoch than it expected, or drafted nothing): compose
                    // again, at the revalidation's clock.
                    _ => self.compose(rows),
                }
            }
            (Stage::PrepareDir, LeaseInput::Dir(true)) => Stage::WriteTemp,
            (Stage::PrepareDir, LeaseInput::Dir(false)) => Stage::SyncParents,
            (Stage::SyncParents, LeaseInput::Done) => Stage::WriteTemp,
            (Stage::WriteTemp, input @ (LeaseInput::Done | LeaseInput::Failed(_))) => {
                // From here on a temp sibling may exist (a failed write can leave one); a
                // second one replaces the first, which the executor removes.
                self.temp = true;
                self.drafted_outside = !self.in_tx;
                match input {
                    LeaseInput::Failed(e) => self.fail(LeaseFailure::Effect(e)),
                    _ if self.in_tx => Stage::DeadlineClock,
                    _ => Stage::Mark(PublishStep::TempWritten),
                }
            }
            (Stage::DeadlineClock, LeaseInput::Clock(now)) => {
                self.saw_clock(now);
                let authority = self.authority.as_ref().ok_or_else(wrong)?;
                match authority.check_deadline(self.latest) {
                    Ok(()) => Stage::Mark(PublishStep::DeadlineChecked),
                    Err(passed) => self.fail(LeaseFailure::Expired(passed)),
                }
            }
            (Stage::Rename, LeaseInput::Done) => {
                let (Some(authority), Some(draft)) = (&self.authority, &self.draft) else {
                    return Err(wrong());
                };
                self.renamed = Some(PublishReport {
                    fencing_epoch: authority.epoch(),
                    bytes: draft.bytes().len(),
                    published_at: draft.composed_at(),
                });
                self.temp = false;
                Stage::Mark(PublishStep::Renamed)
            }
            // The draft written before the transaction is gone (swept): write it again, here,
            // once — the deadline is checked again before that rename.
            (Stage::Rename, LeaseInput::Failed(_)) if self.drafted_outside => Stage::WriteTemp,
            // The sweep is best effort: the document is in place, the next publication sweeps.
            (Stage::Sweep, LeaseInput::Done | LeaseInput::Failed(_)) => Stage::Releasing,
            (Stage::SyncDir, LeaseInput::Done) => Stage::Mark(PublishStep::DirectorySynced),
            (Stage::SyncDir, LeaseInput::Failed(e)) => {
                self.failure = Some(LeaseFailure::NotDurable(e));
                Stage::Done
            }
            (Stage::RemoveTemp, LeaseInput::Done | LeaseInput::Failed(_)) => {
                self.temp = false;
                Stage::Done
            }
            (
                Stage::DraftChannels
                | Stage::ReadLease
                | Stage::ReadCurrent
                | Stage::ReadChannels
                | Stage::PrepareDir
                | Stage::SyncParents
                | Stage::Rename,
                LeaseInput::Failed(e),
            ) => self.fail(LeaseFailure::Effect(e)),
            _ => return Err(wrong()),
        };
        Ok(())
    }

    fn end(&self) -> Option<End> {
        // The only write of a publication's transaction is its release: commit it on every
        // path (a release that found nothing to release wrote nothing).
        (self.stage == Stage::End).then_some(End::Commit)
    }

    fn ended(&mut self) {
        self.in_tx = false;
        self.stage = if self.renamed.is_some() {
            Stage::Mark(PublishStep::Unlocked)
        } else {
            Stage::RemoveTemp
        };
    }

    fn poll_after(&self) -> Option<Effect<'_, E>> {
        match self.stage {
            Stage::Mark(step) => Some(Effect::reached(step)),
            Stage::SyncDir => Some(FileEffect::sync_dir().into()),
            Stage::RemoveTemp if self.temp => Some(FileEffect::remove_temp().into()),
            // No temp to remove, or done: the machine has ended.
            _ => None,
        }
    }
}

/// Where a publication machine is.
#[derive(Debug)]
enum Phase<'r, E> {
    /// The publication, in its lock envelope.
    Publishing(Box<Serialized<E, Steps<'r, E>>>),
    /// Ended.
    Done(Result<PublishReport, Unpublished<E>>),
    /// Only while a step moves the machine from one phase to the next.
    Moving,
}

/// The publication machine for the holder of `credential`.
#[derive(Debug)]
pub struct Publish<'r, E> {
    credential: Credential,
    phase: Phase<'r, E>,
    serial: Serial,
}

impl<'r, E> Publish<'r, E> {
    /// A publication of the target of `credential`, composed with `composition` (a
    /// `&ChannelRegistry` is the generic profile's).
    pub fn new(credential: Credential, composition: impl Into<Composition<'r>>) -> Self {
        let steps = Steps::new(credential.clone(), composition.into());
        Publish {
            credential,
            phase: Phase::Publishing(Box::new(Serialized::new(steps))),
            serial: Serial::default(),
        }
    }

    /// The publication, as the second part of a run whose steps so far the serial counts
    /// and whose clock read `latest` (a one-shot whose grant committed on its own).
    pub(crate) fn continuing(mut self, serial: Serial, latest: Millis) -> Self {
        self.serial = serial;
        if let Phase::Publishing(inner) = &mut self.phase {
            inner.body.saw_clock(latest);
        }
        self
    }

    /// The serial of its next step (a batch counts on from it once the publication ended).
    pub(crate) fn serial(&self) -> Serial {
        self.serial
    }

    /// Counts its steps on from `serial` (a batch's second envelopes, one after another).
    pub(crate) fn count_from(&mut self, serial: Serial) {
        self.serial = serial;
    }

    /// The result once the publication's envelope has ended.
    fn ended(
        &self,
        inner: Serialized<E, Steps<'r, E>>,
    ) -> Result<Result<PublishReport, Unpublished<E>>, ProtocolError> {
        let Serialized {
            body,
            not_started,
            commit_failed,
            ..
        } = inner;
        match not_started {
            Some(error) => Ok(Err(Unpublished::NotStarted {
                error,
                credential: self.credential.clone(),
            })),
            None => body.results(commit_failed),
        }
    }
}

impl<E> Machine for Publish<'_, E> {
    type Protocol = LeaseProtocol<E>;
    type Output = Result<PublishReport, Unpublished<E>>;

    fn poll(&self) -> Option<Effect<'_, E>> {
        self.serial.stamp(match &self.phase {
            Phase::Publishing(inner) => inner.poll(),
            Phase::Done(_) | Phase::Moving => None,
        })
    }

    fn handle(&mut self, answer: Answer<LeaseInput<E>>) -> Result<(), ProtocolError> {
        let mut serial = self.serial;
        let result = serial.take("publish", answer, |answer| self.step(answer));
        self.serial = serial;
        result
    }

    fn output(self) -> Result<Self::Output, ProtocolError> {
        match self.phase {
            Phase::Done(result) => Ok(result),
            _ => Err(ProtocolError::Unfinished { machine: "publish" }),
        }
    }
}

impl<E> Publish<'_, E> {
    /// One step of the publication: the answer to the effect last polled.
    fn step(&mut self, answer: Answer<LeaseInput<E>>) -> Result<(), ProtocolError> {
        let (next, result) = match std::mem::replace(&mut self.phase, Phase::Moving) {
            Phase::Publishing(mut inner) => match inner.handle(answer) {
                Ok(()) if inner.is_done() => match self.ended(*inner) {
                    Ok(end) => (Phase::Done(end), Ok(())),
                    Err(e) => (Phase::Moving, Err(e)),
                },
                result => (Phase::Publishing(inner), result),
            },
            ended @ (Phase::Done(_) | Phase::Moving) => (
                ended,
                Err(ProtocolError::wrong("ended publication", answer.effect())),
            ),
        };
        self.phase = next;
        result
    }
}
