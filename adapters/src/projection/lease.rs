//! Acquisition, the held lease, and the conditional release — the adapter's side of the
//! core's [`Acquire`] and [`Release`] machines (`solewriter_core::projection::machine`), run by the
//! [`Executor`](crate::projection::executor).
//!
//! `acquire` first reads the committed snapshot: a live grant answers `Held` (with retry
//! metadata) without any lock. Otherwise, holding the target's kernel lock and the store's
//! write lock, the row is read and decided again and the grant written — so a grant is always
//! decided under both locks, and a contender writes nothing. The raw token leaves this module
//! only inside the [`HeldLease`]; the store keeps its hash. Every release — explicit, on a
//! failed publication, or from `Drop` — is conditional on the token hash AND the epoch.
//! An operator's end of the current grant ([`ProjectionStore::end_lease`]) is the same
//! conditional write, of the live grant read under both locks.

use crate::error::{Error, Result};
use crate::projection::executor::Executor;
use crate::projection::probe::NoProbe;
use crate::projection::store::ProjectionStore;
use solewriter_core::names::InstanceDigest;
use solewriter_core::projection::lease::{AcquirePlan, Credential, HeldBy};
use solewriter_core::projection::machine::acquire::{Acquire, AcquireReport, Applicant};
use solewriter_core::projection::machine::outcome::LeaseFailure;
use solewriter_core::projection::machine::release::Release;
pub use solewriter_core::projection::machine::release::{EndOutcome, ReleaseOutcome};
use solewriter_core::projection::target::TargetId;
use solewriter_core::time::Millis;
use solewriter_core::token::HolderToken;

/// The answer to an acquisition attempt.
#[derive(Debug)]
pub enum Acquisition<'s> {
    /// The lease was granted.
    Acquired(HeldLease<'s>),
    /// Another holder's grant is live; nothing was written.
    Held(HeldBy),
}

/// A granted lease, owned: the right to ONE publication, until `expires_at`, revalidated at
/// publication. It borrows nothing, so it is `Send` and outlives the store handle that
/// acquired it: any [`ProjectionStore`] of the same database (another thread's, another
/// blocking task's) can publish it ([`ProjectionStore::publish_grant`]) or release it
/// ([`ProjectionStore::release_grant`]). Dropping a `Grant` does nothing — no I/O, so it never
/// blocks the dropping thread; an unused grant ends at its expiry. Not `Clone`; `Debug`
/// redacts the token.
#[must_use = "a grant must be published or released, or it holds the target until it expires"]
pub struct Grant {
    pub(crate) credential: Credential,
    token: HolderToken,
    expires_at: Millis,
}

impl std::fmt::Debug for Grant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Grant")
            .field("target_id", &self.credential.target_id)
            .field("epoch", &self.credential.epoch)
            .field("expires_at", &self.expires_at)
            .field("token", &self.token)
            .finish()
    }
}

impl Grant {
    /// The target.
    pub fn target_id(&self) -> &TargetId {
        &self.credential.target_id
    }

    /// The fencing epoch of this grant.
    pub fn epoch(&self) -> u64 {
        self.credential.epoch
    }

    /// When this grant expires (`acquired_at + ttl`; never extended).
    pub fn expires_at(&self) -> Millis {
        self.expires_at
    }

    /// The raw token. A secret: hand it only to the holder.
    pub fn token(&self) -> &HolderToken {
        &self.token
    }
}

/// A granted lease bound to the store handle that acquired it: a [`Grant`] plus a safety net —
/// dropping it unused releases it conditionally, a blocking SQLite transaction on the dropping
/// thread (so an async host converts it with [`HeldLease::into_grant`] instead). Not `Clone`;
/// `Debug` redacts the token.
#[must_use = "a held lease must be published or released"]
pub struct HeldLease<'s> {
    pub(crate) store: &'s ProjectionStore,
    pub(crate) grant: Grant,
    pub(crate) armed: bool,
}

impl std::fmt::Debug for HeldLease<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("HeldLease").field(&self.grant).finish()
    }
}

impl<'s> HeldLease<'s> {
    /// The held lease of the committed grant `plan`, made for the holder of `token`.
    pub(crate) fn granted(
        store: &'s ProjectionStore,
        plan: &AcquirePlan,
        token: HolderToken,
    ) -> Self {
        let grant = Grant {
            credential: Credential {
                target_id: plan.target_id.clone(),
                epoch: plan.epoch,
                token_hash: token.hash(),
            },
            token,
            expires_at: plan.grant.expires_at,
        };
        HeldLease::bind(store, grant)
    }

    /// `grant`, bound to `store` (armed: dropped unused, it is released).
    pub(crate) fn bind(store: &'s ProjectionStore, grant: Grant) -> Self {
        HeldLease {
            store,
            grant,
            armed: true,
        }
    }

    /// The owned grant, unbound from the store handle: `Send`, and its drop does nothing (see
    /// [`Grant`]).
    pub fn into_grant(mut self) -> Grant {
        self.armed = false;
        let grant = &mut self.grant;
        Grant {
            credential: grant.credential.clone(),
            token: grant.token.clone(),
            expires_at: grant.expires_at,
        }
    }

    /// The target.
    pub fn target_id(&self) -> &TargetId {
        self.grant.target_id()
    }

    /// The fencing epoch of this grant.
    pub fn epoch(&self) -> u64 {
        self.grant.epoch()
    }

    /// When this grant expires (`acquired_at + ttl`; never extended).
    pub fn expires_at(&self) -> Millis {
        self.grant.expires_at()
    }

    /// The raw token. A secret: hand it only to the holder.
    pub fn token(&self) -> &HolderToken {
        self.grant.token()
    }

    /// Releases the lease, conditional on the token hash and the epoch.
    pub fn release(mut self) -> Result<ReleaseOutcome> {
        self.armed = false;
        self.store.release_credential(&self.grant.credential)
    }
}

impl Drop for HeldLease<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.store.release_unused(&self.grant.credential);
        }
    }
}

impl ProjectionStore {
    /// 256 random bits for a new holder token, from the store's random source.
    pub(crate) fn fresh_token(&self) -> Result<HolderToken> {
        let mut bytes = [0u8; 32];
        self.fs
            .fill_random(&mut bytes)
            .map_err(|e| Error::Random(e.to_string()))?;
        Ok(HolderToken::from_bytes(bytes))
    }
}

/// The adapter error of a lease operation's failure: the one mapping of the core's
/// [`LeaseFailure`] (acquisition, publication and release alike).
pub(crate) fn failure(target: &TargetId, failure: LeaseFailure<Error>) -> Error {
    match failure {
        LeaseFailure::NotAdmitted => Error::NotAdmitted(target.clone()),
        LeaseFailure::Inconsistent(inconsistent) => Error::InconsistentLease(inconsistent),
        LeaseFailure::EpochExhausted => Error::EpochExhausted,
        LeaseFailure::ForeignEpoch(foreign) => Error::ForeignEpoch(foreign),
        LeaseFailure::RowChanged => {
            Error::CorruptRow("lease row changed under the write lock".into())
        }
        LeaseFailure::Fenced(reason) => Error::Fenced(reason),
        LeaseFailure::Document(e) => Error::Document(e),
        LeaseFailure::Expired(passed) => Error::LeaseExpired(passed),
        LeaseFailure::Effect(e) | LeaseFailure::NotDurable(e) => e,
    }
}

/// Logs a live grant that refused an acquisition.
pub(crate) fn log_held(target: &TargetId, holder: &InstanceDigest, held: &HeldBy) {
    tracing::info!(target_id = %target, holder = %holder, epoch = held.fencing_epoch, retry_after_ms = held.retry_after_ms, "lease denied: held");
}

impl ProjectionStore {
    /// Tries to acquire the lease of `target` for the instance `holder`. Never waits for a
    /// live grant: a contender gets [`Acquisition::Held`] at once.
    ///
    /// A live grant seen in the committed snapshot (a plain read, no lock) answers `Held`
    /// without queueing for the write lock; the answer is advisory, since the grant may end a
    /// moment later. Only a grant needs — and always takes — the target lock and the
    /// serialized transaction, where the row is read and decided again.
    pub fn acquire(&self, target: &TargetId, holder: &InstanceDigest) -> Result<Acquisition<'_>> {
        let token = self.fresh_token()?;
        let machine = Acquire::new(Applicant {
            token_hash: token.hash(),
            holder_instance_digest: holder.clone(),
            ttl: self.options.timing.lease_ttl,
        });
        let acquired = Executor::new(self, target, 0, &NoProbe).run(machine)?;
        match acquired.map_err(|e| failure(target, e))? {
            AcquireReport::Granted(plan) => {
                tracing::info!(target_id = %target, epoch = plan.epoch, holder = %holder, "lease granted");
                Ok(Acquisition::Acquired(HeldLease::granted(
                    self, &plan, token,
                )))
            }
            AcquireReport::Held(held) => {
                log_held(target, holder, &held);
                Ok(Acquisition::Held(held))
            }
        }
    }

    /// Releases `grant` (acquired through any store handle of this database), conditional on
    /// its token hash AND epoch.
    pub fn release_grant(&self, grant: Grant) -> Result<ReleaseOutcome> {
        self.release_credential(&grant.credential)
    }

    /// Releases the grant of `target` at `epoch` for the holder of the raw `token` — for a
    /// holder that kept only its token (e.g. across a process boundary). Conditional on the
    /// token hash AND the epoch: anything else changes nothing.
    pub fn release_token(
        &self,
        target: &TargetId,
        epoch: u64,
        token: &HolderToken,
    ) -> Result<ReleaseOutcome> {
        self.release_credential(&Credential {
            target_id: target.clone(),
            epoch,
            token_hash: token.hash(),
        })
    }

    /// Ends the current grant of `target` on an operator's word, whoever holds it. Under the
    /// target lock and inside one `BEGIN IMMEDIATE` transaction the row is read and decided
    /// by the core (`decide_end`): a live grant is released by the conditional write of
    /// exactly that grant (its epoch and token hash), so its holder's next publication or
    /// release is refused (`Fenced::Released`) and never writes; the epoch stays, and the
    /// next grant raises it. An expired grant is marked `released` too
    /// ([`EndOutcome::Closed`]), so a broker clock set back cannot make it live again. A
    /// released or never-granted row has nothing to end ([`EndOutcome::NothingHeld`];
    /// nothing written). A target never admitted is
    /// [`Error::NotAdmitted`]; a store busy past the busy timeout is [`Error::Busy`].
    pub fn end_lease(&self, target: &TargetId) -> Result<EndOutcome> {
        let outcome = Executor::new(self, target, 0, &NoProbe)
            .run(Release::end())?
            .map_err(|e| failure(target, e))?;
        tracing::info!(target_id = %target, ?outcome, "operator end of the lease");
        Ok(outcome)
    }

    /// The safety-net release of a grant its holder did not use (a dropped lease, the grant
    /// of a one-shot's takeover whose publication could not start): a failure is logged, and
    /// the grant then ends at its expiry.
    pub(crate) fn release_unused(&self, credential: &Credential) {
        if let Err(error) = self.release_credential(credential) {
            tracing::warn!(target_id = %credential.target_id, epoch = credential.epoch,
                %error, "safety-net release of an unused lease failed; it expires on its own");
        }
    }

    /// Releases the grant `credential` names, conditional on its token hash AND epoch.
    pub(crate) fn release_credential(&self, credential: &Credential) -> Result<ReleaseOutcome> {
        let target = &credential.target_id;
        let outcome = Executor::new(self, target, credential.epoch, &NoProbe)
            .run(Release::new(credential.clone()))?
            .map_err(|e| failure(target, e))?;
        tracing::info!(target_id = %target, epoch = credential.epoch, ?outcome, "release");
        Ok(outcome)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use solewriter_core::error_kind::Classified;

    /// The adapter's error for a failed effect in the samples: the store busy.
    pub(crate) fn busy() -> Error {
        Error::Busy { timeout_ms: 5 }
    }

    /// The adapter's error for a directory fsync that failed after the rename.
    pub(crate) fn not_durable() -> Error {
        Error::File(crate::error::FileError::NotDurable {
            path: std::path::PathBuf::new(),
            source: std::io::Error::other("fsync"),
        })
    }

    /// Every failure of a lease operation becomes an adapter error of the kind the core gives
    /// it.
    #[test]
    fn every_failure_keeps_the_core_kind() {
        let target = TargetId::parse(&"a".repeat(64)).expect("valid");
        for each in LeaseFailure::every(busy, not_durable) {
            let kind = each.kind();
            let shape = format!("{each:?}");
            let error = failure(&target, each);
            assert_eq!(error.kind(), kind, "{shape} became {error}");
        }
    }
}
