//! The fenced publication of `current.json`: the adapter's side of the core's [`Publish`]
//! machine (`solewriter_core::projection::machine::publish`, where the sequence and its reasons are
//! written down), run by the [`Executor`](crate::projection::executor).
//!
//! The draft is composed and its temp sibling written and fsynced holding no lock. Then, under
//! the target's kernel lock and ONE serialized SQLite write transaction (`BEGIN IMMEDIATE`),
//! so that no acquisition can commit between the revalidation and the rename: revalidate the
//! lease against the broker clock, confirm the draft against the committed rows (or compose and
//! write it again), check the deadline, rename, release conditionally, commit; the directory is
//! fsynced after both locks are let go. Every failure after the transaction opens also ends with
//! the conditional release and a commit; a temp file that was not renamed is removed.

use crate::error::{Error, Result};
use crate::projection::executor::Executor;
use crate::projection::lease::{failure, log_held, Grant, HeldLease};
pub use crate::projection::probe::{NoProbe, PublishProbe};
use crate::projection::store::ProjectionStore;
use solewriter_core::names::InstanceDigest;
use solewriter_core::projection::lease::HeldBy;
use solewriter_core::projection::machine::acquire::Applicant;
use solewriter_core::projection::machine::outcome::{self, Unpublished};
use solewriter_core::projection::machine::publish::Publish;
use solewriter_core::projection::machine::publish_many::{PublishMany, TargetEnd};
use solewriter_core::projection::machine::publish_now::{self as one_shot, PublishNow};
use solewriter_core::projection::machine::ProtocolError;
pub use solewriter_core::projection::publication::PublishStep;
use solewriter_core::projection::target::TargetId;
use solewriter_core::time::Millis;
use solewriter_core::token::HolderToken;
use std::path::PathBuf;

/// A completed publication.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Published {
    /// The target.
    pub target_id: TargetId,
    /// Epoch of the publishing grant.
    pub fencing_epoch: u64,
    /// Path of the replaced `current.json`.
    pub path: PathBuf,
    /// Size of the document in bytes.
    pub bytes: usize,
    /// Broker time of composition.
    pub published_at: Millis,
}

impl HeldLease<'_> {
    /// Publishes `current.json` for this lease's target; see the module documentation.
    pub fn publish(self) -> Result<Published> {
        self.publish_observed(&NoProbe)
    }

    /// [`Self::publish`], reporting each step to `probe`.
    pub fn publish_observed(mut self, probe: &dyn PublishProbe) -> Result<Published> {
        let store = self.store;
        let credential = self.grant.credential.clone();
        let (target, epoch) = (&credential.target_id, credential.epoch);
        let machine = Publish::new(credential.clone(), store.composition()?);
        let mut executor = Executor::new(store, target, epoch, probe);
        let end = executor.run(machine)?;
        // The machine ran the release itself — except when it could not start (`Busy`: the
        // target lock or the transaction): the lease stays armed, so dropping it releases the
        // unused grant conditionally (if the store is still busy, it ends at its expiry).
        self.armed = matches!(end, Err(Unpublished::NotStarted { .. }));
        let path = executor.take_renamed(0);
        answer(store, target, Some(epoch), path, end)
    }
}

impl ProjectionStore {
    /// Publishes `grant` (acquired through any store handle of this database) exactly as
    /// [`HeldLease::publish`] does. If the store or the target's lock is busy before the
    /// sequence starts, the grant is released conditionally on this thread before the error
    /// ([`Error::Busy`], or the target lock's `Error::File(FileError::Busy)`) is returned (or,
    /// if that release is busy too, ends at its expiry).
    pub fn publish_grant(&self, grant: Grant) -> Result<Published> {
        HeldLease::bind(self, grant).publish()
    }
}

/// What a one-shot publication did.
#[derive(Debug)]
pub enum PublishedNow {
    /// Granted, published and released in one transaction.
    Published(Published),
    /// Another holder's grant is live; nothing was written.
    Held(HeldBy),
}

impl ProjectionStore {
    /// Acquires, publishes and releases in ONE transaction (one durable commit fewer than
    /// [`ProjectionStore::acquire`] followed by [`HeldLease::publish`]), for a caller that does
    /// not need the grant before composing. A live grant answers [`PublishedNow::Held`] at
    /// once, without any lock; nothing is written then.
    pub fn publish_now(&self, target: &TargetId, holder: &InstanceDigest) -> Result<PublishedNow> {
        self.publish_now_observed(target, holder, &NoProbe)
    }

    /// [`Self::publish_now`], reporting each step of the publication to `probe`.
    pub fn publish_now_observed(
        &self,
        target: &TargetId,
        holder: &InstanceDigest,
        probe: &dyn PublishProbe,
    ) -> Result<PublishedNow> {
        self.publish_now_with_token(target, holder, self.fresh_token()?, probe)
    }

    /// [`Self::publish_now_observed`] with the holder token given instead of drawn: a seam for
    /// the conformance test, which must give the model the same token.
    #[doc(hidden)]
    pub fn publish_now_with_token(
        &self,
        target: &TargetId,
        holder: &InstanceDigest,
        token: HolderToken,
        probe: &dyn PublishProbe,
    ) -> Result<PublishedNow> {
        let machine = PublishNow::new(
            Applicant {
                token_hash: token.hash(),
                holder_instance_digest: holder.clone(),
                ttl: self.options.timing.lease_ttl,
            },
            self.composition()?,
        );
        let mut executor = Executor::new(self, target, 0, probe);
        let end = executor.run(machine)?;
        let path = executor.take_renamed(0);
        self.one_shot_answer(target, holder, path, end)
    }

    /// Grants, publishes and releases each of `targets` as [`Self::publish_now`] does, all in
    /// ONE write transaction (one durable commit for the batch; each target under a savepoint
    /// of its own, fenced exactly as one one-shot publication). Answers each target's result
    /// in the order given. The batch takes its targets' kernel locks in the order of their
    /// ids before the transaction, so batches never wait for each other in a cycle.
    ///
    /// Refused before anything is touched ([`Error::Batch`]): no target, or a target given
    /// twice. A target whose lock is busy, or that is refused inside the transaction, ends
    /// with its own error and the others go on; a failure of the shared transaction (its
    /// begin, a store statement inside it, its commit) is every target's of it.
    pub fn publish_many(
        &self,
        targets: &[TargetId],
        holder: &InstanceDigest,
    ) -> Result<Vec<(TargetId, Result<PublishedNow>)>> {
        self.publish_many_observed(targets, holder, &NoProbe)
    }

    /// [`Self::publish_many`], reporting each step to `probe`.
    pub fn publish_many_observed(
        &self,
        targets: &[TargetId],
        holder: &InstanceDigest,
        probe: &dyn PublishProbe,
    ) -> Result<Vec<(TargetId, Result<PublishedNow>)>> {
        let applicants = targets
            .iter()
            .map(|target| {
                Ok((
                    target.clone(),
                    Applicant {
                        token_hash: self.fresh_token()?.hash(),
                        holder_instance_digest: holder.clone(),
                        ttl: self.options.timing.lease_ttl,
                    },
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        let machine = PublishMany::new(applicants, self.composition()?, Error::again)?;
        let order = machine.targets().to_vec();
        let mut executor = Executor::many(self, &order, 0, probe);
        let mut ends = executor.run_many(machine)?;
        // The batch's order is its targets' ids; the answer's is the caller's.
        let mut answers: Vec<Option<Result<PublishedNow>>> = Vec::new();
        for (i, TargetEnd { target_id, end }) in ends.drain(..).enumerate() {
            let path = executor.take_renamed(i);
            answers.push(Some(self.one_shot_answer(&target_id, holder, path, end)));
        }
        Ok(targets
            .iter()
            .map(|target| {
                let at = order.binary_search(target).ok();
                let answer = at.and_then(|i| answers[i].take());
                (
                    target.clone(),
                    answer.unwrap_or_else(|| {
                        Err(ProtocolError::Unfinished { machine: "batch" }.into())
                    }),
                )
            })
            .collect())
    }

    /// The adapter's answer for a one-shot publication's end (`path`: where its rename put
    /// the document, if it renamed).
    fn one_shot_answer(
        &self,
        target: &TargetId,
        holder: &InstanceDigest,
        path: Option<PathBuf>,
        end: std::result::Result<one_shot::PublishNowReport, Unpublished<Error>>,
    ) -> Result<PublishedNow> {
        if let Err(Unpublished::NotStarted { credential, .. }) = &end {
            // The grant of a takeover, unused: released as a dropped lease's is.
            self.release_unused(credential);
        }
        let published = match end {
            Ok(one_shot::PublishNowReport::Held(held)) => {
                log_held(target, holder, &held);
                return Ok(PublishedNow::Held(held));
            }
            Ok(one_shot::PublishNowReport::Published {
                published,
                takeover,
            }) => {
                let how = if takeover { "takeover" } else { "one-shot" };
                tracing::info!(target_id = %target, epoch = published.fencing_epoch, holder = %holder, "lease granted ({how})");
                Ok(published)
            }
            Err(unpublished) => Err(unpublished),
        };
        answer(self, target, None, path, published).map(PublishedNow::Published)
    }
}

/// The adapter's answer for a publication: the one mapping of the core's [`Unpublished`]
/// (`epoch`: the grant's, when the caller knows it, for the log).
fn answer(
    store: &ProjectionStore,
    target: &TargetId,
    epoch: Option<u64>,
    renamed: Option<PathBuf>,
    end: std::result::Result<outcome::PublishReport, Unpublished<Error>>,
) -> Result<Published> {
    let path = renamed.unwrap_or_else(|| store.options.runtime_root.current_path(target));
    match end {
        Ok(published) => {
            tracing::info!(target_id = %target, epoch = published.fencing_epoch, bytes = published.bytes, "published");
            Ok(Published {
                target_id: target.clone(),
                fencing_epoch: published.fencing_epoch,
                path,
                bytes: published.bytes,
                published_at: published.published_at,
            })
        }
        Err(unpublished) => Err(unpublished_error(target, epoch, path, unpublished)),
    }
}

/// The adapter error of a publication that did not end published and released (`path`: its
/// `current.json`), logged.
fn unpublished_error(
    target: &TargetId,
    epoch: Option<u64>,
    path: PathBuf,
    unpublished: Unpublished<Error>,
) -> Error {
    let release_reason = |release| {
        let e = failure(target, release);
        tracing::error!(target_id = %target, ?epoch, error = %e, "conditional release did not commit; the lease expires on its own");
        e.to_string()
    };
    let (failed, not_released) = match unpublished {
        Unpublished::NotReleased { release, .. } => {
            let reason = release_reason(release);
            return Error::PublishedNotReleased { path, reason };
        }
        Unpublished::NotStarted { error, .. } => return error,
        Unpublished::Failed {
            failure, release, ..
        } => (failure, release),
    };
    if let outcome::LeaseFailure::NotDurable(e) = &failed {
        tracing::error!(target_id = %target, ?epoch, error = %e, "published but directory fsync failed");
    }
    let error = failure(target, failed);
    match &error {
        Error::Fenced(reason) => {
            tracing::warn!(target_id = %target, ?epoch, %reason, "publication fenced");
        }
        error => tracing::warn!(target_id = %target, ?epoch, %error, "publication aborted"),
    }
    match not_released.map(release_reason) {
        None => error,
        Some(reason) => Error::ReleaseFailed {
            cause: Box::new(error),
            reason,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::projection::lease::tests::{busy, not_durable};
    use solewriter_core::error_kind::Classified;

    /// Every publication that did not end published and released becomes an adapter error of
    /// the kind the core gives it.
    #[test]
    fn every_unpublished_publication_keeps_the_core_kind() {
        let target = TargetId::parse(&"a".repeat(64)).expect("valid");
        for unpublished in Unpublished::every(busy, not_durable) {
            let kind = unpublished.kind();
            let shape = format!("{unpublished:?}");
            let error = unpublished_error(&target, Some(1), PathBuf::new(), unpublished);
            assert_eq!(error.kind(), kind, "{shape} became {error}");
        }
    }
}
