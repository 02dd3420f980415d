//! The fenced publication of `current.json`. Inside the lock envelope (target lock, then the
//! store's serialized write transaction), in this order:
//!
//! 1. read the lease row and the clock; `authorize_publish` revalidates {target, epoch, token
//!    hash, held, not expired} — else `Fenced`, no file is touched;
//! 2. read the committed channel rows; `compose` the document (pure);
//! 3. make sure the target directory exists and is durable (fsync the parents of every
//!    directory not yet known durable — also after an earlier failure);
//! 4. remove orphan temp siblings; write a unique temp sibling and fsync it;
//! 5. read the clock again: at or past `expires_at` the publication aborts (no renewal);
//! 6. rename over `current.json`; fsync the directory;
//! 7. the conditional release ([`ReleaseSteps`], token hash AND epoch); commit.
//!
//! Every failure after the envelope opened still runs 7 (a temp file that was written and not
//! renamed is removed first). A publication reports success only when the rename, the
//! directory fsync and every parent fsync it depends on succeeded.

use super::release::{ReleaseFailure, ReleaseOutcome, ReleaseSteps};
use super::serialized::{Body, End, Serialized};
use super::{protocol_violation, Effect, Input, Machine};
use crate::projection::channel::ChannelRegistry;
use crate::projection::lease::{
    observe, Authority, Credential, DeadlinePassed, Fenced, InconsistentLease,
};
use crate::projection::publication::PublishStep;
use crate::projection::{compose, DocumentError};
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
    /// The target lock or the transaction could not be had: nothing happened, the grant is
    /// untouched.
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
    ReadLease,
    ReadClock,
    ReadChannels,
    PrepareDir,
    SyncParents,
    RemoveOrphans,
    WriteTemp,
    DeadlineClock,
    Rename,
    SyncDir,
    RemoveTemp,
    Releasing,
    End,
}

/// The stage after a marker.
fn after(step: PublishStep) -> Stage {
    match step {
        PublishStep::TransactionOpen => Stage::ReadLease,
        PublishStep::Revalidated => Stage::ReadChannels,
        PublishStep::Composed => Stage::PrepareDir,
        PublishStep::TempWritten => Stage::DeadlineClock,
        PublishStep::DeadlineChecked => Stage::Rename,
        PublishStep::Renamed => Stage::SyncDir,
        PublishStep::DirectorySynced => Stage::Releasing,
        PublishStep::Released => Stage::End,
    }
}

/// The publication's steps, for a machine that holds the locks.
#[derive(Debug)]
pub(crate) struct Steps<'r, E> {
    credential: Credential,
    registry: &'r ChannelRegistry,
    stage: Stage,
    record: Option<crate::projection::lease::LeaseRecord>,
    authority: Option<Authority>,
    now: Millis,
    bytes: Vec<u8>,
    failure: Option<PublishFailure<E>>,
    release: ReleaseSteps<E>,
}

impl<'r, E> Steps<'r, E> {
    /// The steps publishing for the holder of `credential`.
    pub(crate) fn new(credential: Credential, registry: &'r ChannelRegistry) -> Self {
        let release = ReleaseSteps::new(credential.clone());
        Steps {
            credential,
            registry,
            stage: Stage::Mark(PublishStep::TransactionOpen),
            record: None,
            authority: None,
            now: Millis(0),
            bytes: Vec::new(),
            failure: None,
            release,
        }
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
                bytes: self.bytes.len(),
                published_at: self.now,
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
    /// A failure before any temp file exists: straight to the release.
    fn fail(&mut self, failure: PublishFailure<E>) -> Stage {
        self.failure = Some(failure);
        Stage::Releasing
    }

    /// A failure once a temp file may exist: remove it, then release.
    fn fail_with_temp(&mut self, failure: PublishFailure<E>) -> Stage {
        self.failure = Some(failure);
        Stage::RemoveTemp
    }

    fn authority(&self) -> &Authority {
        match &self.authority {
            Some(authority) => authority,
            None => unreachable!("every stage after revalidation has the authority"),
        }
    }
}

impl<E> Body<E> for Steps<'_, E> {
    fn poll(&self) -> Effect<'_> {
        match self.stage {
            Stage::Mark(step) => Effect::Reached(step),
            Stage::ReadLease => Effect::ReadLease,
            Stage::ReadClock | Stage::DeadlineClock => Effect::ReadClock,
            Stage::ReadChannels => Effect::ReadChannels,
            Stage::PrepareDir => Effect::PrepareDir,
            Stage::SyncParents => Effect::SyncParents,
            Stage::RemoveOrphans => Effect::RemoveOrphans,
            Stage::WriteTemp => Effect::WriteTemp(&self.bytes),
            Stage::Rename => Effect::Rename,
            Stage::SyncDir => Effect::SyncDir,
            Stage::RemoveTemp => Effect::RemoveTemp,
            Stage::Releasing => self.release.poll(),
            Stage::End => Effect::Finished,
        }
    }

    fn handle(&mut self, input: Input<E>) {
        self.stage = match (self.stage, input) {
            (Stage::Mark(step), Input::Done) => after(step),
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
            (Stage::ReadChannels, Input::Channels(rows)) => {
                match compose(self.authority(), self.registry, &rows, self.now)
                    .and_then(|doc| doc.to_bounded_bytes())
                {
                    Ok(bytes) => {
                        self.bytes = bytes;
                        Stage::Mark(PublishStep::Composed)
                    }
                    Err(e) => self.fail(PublishFailure::Document(e)),
                }
            }
            (Stage::PrepareDir, Input::Dir { verified: true }) => Stage::RemoveOrphans,
            (Stage::PrepareDir, Input::Dir { verified: false }) => Stage::SyncParents,
            (Stage::SyncParents, Input::Done) => Stage::RemoveOrphans,
            (Stage::RemoveOrphans, Input::Done) => Stage::WriteTemp,
            (Stage::WriteTemp, Input::Done) => Stage::Mark(PublishStep::TempWritten),
            (Stage::DeadlineClock, Input::Clock(now)) => {
                match self.authority().check_deadline(now) {
                    Ok(()) => Stage::Mark(PublishStep::DeadlineChecked),
                    Err(passed) => self.fail_with_temp(PublishFailure::Expired(passed)),
                }
            }
            (Stage::Rename, Input::Done) => Stage::Mark(PublishStep::Renamed),
            (Stage::SyncDir, Input::Done) => Stage::Mark(PublishStep::DirectorySynced),
            (Stage::SyncDir, Input::Failed(e)) => self.fail(PublishFailure::NotDurable(e)),
            (Stage::RemoveTemp, Input::Done | Input::Failed(_)) => Stage::Releasing,
            (Stage::Releasing, input) => {
                self.release.handle(input);
                if self.release.is_done() {
                    Stage::Mark(PublishStep::Released)
                } else {
                    Stage::Releasing
                }
            }
            (
                Stage::ReadLease
                | Stage::ReadChannels
                | Stage::PrepareDir
                | Stage::SyncParents
                | Stage::RemoveOrphans,
                Input::Failed(e),
            ) => self.fail(PublishFailure::Effect(e)),
            (Stage::WriteTemp | Stage::Rename, Input::Failed(e)) => {
                self.fail_with_temp(PublishFailure::Effect(e))
            }
            (stage, other) => protocol_violation(&format!("publish {stage:?}"), &other),
        };
    }

    fn end(&self) -> Option<End> {
        // The only write of a publication's transaction is its release: commit it on every
        // path (a release that found nothing to release wrote nothing).
        (self.stage == Stage::End).then_some(End::Commit)
    }
}

/// The publication machine for the holder of `credential`.
#[derive(Debug)]
pub struct Publish<'r, E> {
    inner: Serialized<E, Steps<'r, E>>,
}

impl<'r, E> Publish<'r, E> {
    /// A publication of the target of `credential`, composed with `registry`.
    pub fn new(credential: Credential, registry: &'r ChannelRegistry) -> Self {
        Publish {
            inner: Serialized::new(Steps::new(credential, registry)),
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
