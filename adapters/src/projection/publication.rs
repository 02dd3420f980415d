//! The fenced publication of `current.json`: the adapter's side of the core's [`Publish`]
//! machine (`solewriter_core::projection::machine::publish`, where the sequence and its reasons are
//! written down), run by the [`Executor`](crate::projection::executor).
//!
//! Everything happens while holding the target's kernel lock and ONE serialized SQLite write
//! transaction (`BEGIN IMMEDIATE`), so no acquisition can commit between the revalidation and
//! the rename: revalidate the lease against the broker clock, compose from the committed
//! rows, write and fsync a temp sibling, check the deadline, rename, fsync the directory,
//! release conditionally, commit. Every failure after the transaction opens also ends with the
//! conditional release and a commit; a temp file that was not renamed is removed.

use crate::error::{Error, Result};
use crate::projection::executor::Executor;
use crate::projection::lease::{acquired, release_error, Grant, HeldLease, ReleaseOutcome};
pub use crate::projection::probe::{NoProbe, PublishProbe};
use crate::projection::store::ProjectionStore;
use solewriter_core::names::InstanceDigest;
use solewriter_core::projection::lease::HeldBy;
use solewriter_core::projection::machine::acquire::Applicant;
use solewriter_core::projection::machine::publish::{Publish, PublishEnd, PublishFailure};
use solewriter_core::projection::machine::publish_now::{PublishNow, PublishNowEnd};
use solewriter_core::projection::machine::release::ReleaseFailure;
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
        let mut machine = Publish::new(credential.clone(), store.composition()?);
        let mut executor = Executor::new(store, target, epoch, probe);
        executor.run(&mut machine);
        let (result, release) = match machine.into_end() {
            // `Busy` (target lock or transaction): the lease was not used. It stays armed, so
            // dropping it attempts the conditional release; if the store is still busy, the
            // grant expires after its TTL.
            PublishEnd::NotStarted(error) => return Err(error),
            PublishEnd::Ran { result, release } => (result, release),
        };
        // The machine ran the release itself, on every path.
        self.armed = false;
        outcome(
            store,
            target,
            epoch,
            executor.take_renamed(),
            result,
            release,
        )
    }
}

impl ProjectionStore {
    /// Publishes `grant` (acquired through any store handle of this database) exactly as
    /// [`HeldLease::publish`] does. If the store is busy before the sequence starts, the grant
    /// is released conditionally on this thread before [`Error::Busy`] is returned (or, if
    /// that release is busy too, ends at its expiry).
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
        let mut machine = PublishNow::new(
            Applicant {
                token_hash: token.hash(),
                holder_instance_digest: holder.clone(),
                ttl: self.options.timing.lease_ttl,
            },
            self.composition()?,
        );
        let mut executor = Executor::new(self, target, 0, probe);
        executor.run(&mut machine);
        match machine.into_end() {
            PublishNowEnd::NotGranted(answer) => match acquired(target, holder, answer)? {
                Some(held) => Ok(PublishedNow::Held(held)),
                None => unreachable!("a one-shot publication that was granted ran"),
            },
            // A takeover of an expired grant committed on its own: publish with it in a second
            // envelope (see `solewriter_core::projection::machine::publish_now`).
            PublishNowEnd::TakenOver(plan) => {
                tracing::info!(target_id = %target, epoch = plan.epoch, holder = %holder, "lease granted (takeover)");
                let lease = HeldLease::granted(self, &plan, token);
                lease.publish_observed(probe).map(PublishedNow::Published)
            }
            PublishNowEnd::Ran {
                epoch,
                result,
                release,
            } => {
                tracing::info!(target_id = %target, epoch, holder = %holder, "lease granted (one-shot)");
                let renamed = executor.take_renamed();
                outcome(self, target, epoch, renamed, result, release).map(PublishedNow::Published)
            }
        }
    }
}

/// The adapter's answer for a publication that ran, with its release.
fn outcome(
    store: &ProjectionStore,
    target: &TargetId,
    epoch: u64,
    renamed: Option<PathBuf>,
    result: std::result::Result<
        solewriter_core::projection::machine::publish::Published,
        PublishFailure<Error>,
    >,
    release: std::result::Result<ReleaseOutcome, ReleaseFailure<Error>>,
) -> Result<Published> {
    let path = renamed.unwrap_or_else(|| store.options.runtime_root.current_path(target));
    let not_released = release.err().map(|failure| {
        let e = release_error(target, failure);
        tracing::error!(target_id = %target, epoch, error = %e, "conditional release did not commit; the lease expires on its own");
        e.to_string()
    });
    match result {
        Ok(published) => match not_released {
            None => {
                tracing::info!(target_id = %target, epoch, bytes = published.bytes, "published");
                Ok(Published {
                    target_id: target.clone(),
                    fencing_epoch: published.fencing_epoch,
                    path,
                    bytes: published.bytes,
                    published_at: published.published_at,
                })
            }
            Some(reason) => Err(Error::PublishedNotReleased { path, reason }),
        },
        Err(failure) => {
            let error = match failure {
                PublishFailure::NotAdmitted => Error::NotAdmitted(target.clone()),
                PublishFailure::Inconsistent(inconsistent) => {
                    Error::InconsistentLease(inconsistent)
                }
                PublishFailure::Fenced(reason) => {
                    tracing::warn!(target_id = %target, epoch, %reason, "publication fenced");
                    Error::Fenced(reason)
                }
                PublishFailure::Document(e) => Error::Document(e),
                PublishFailure::Expired(passed) => Error::LeaseExpired(passed),
                PublishFailure::Effect(e) => e,
                PublishFailure::NotDurable(e) => {
                    tracing::error!(target_id = %target, epoch, error = %e, "published but directory fsync failed");
                    e
                }
            };
            if !matches!(error, Error::Fenced(_)) {
                tracing::warn!(target_id = %target, epoch, %error, "publication aborted");
            }
            Err(with_release_failure(error, not_released))
        }
    }
}

/// `error`, wrapped in [`Error::ReleaseFailed`] when the failure path's release did not commit.
fn with_release_failure(error: Error, not_released: Option<String>) -> Error {
    match not_released {
        None => error,
        Some(reason) => Error::ReleaseFailed {
            cause: Box::new(error),
            reason,
        },
    }
}
