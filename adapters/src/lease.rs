//! Acquisition, the held lease, and the conditional release.
//!
//! `acquire` first reads the committed snapshot: a live grant answers `Held` (with retry
//! metadata) without queueing for the write lock. Otherwise it runs one serialized
//! transaction: read the row, read the broker clock, let the core decide, execute the plan —
//! so a grant is always decided under the write lock. A contender writes nothing. The raw token leaves this module only inside the [`HeldLease`]; the store keeps
//! its hash. Every release — explicit, on a failed publication, or from `Drop` — is
//! conditional on the token hash AND the epoch.

use crate::error::{Error, Result};
use crate::rows;
use crate::store::ProjectionStore;
use rusqlite::Connection;
use solewriter_core::lease::{
    observe, AcquireRefused, AcquireRequest, Credential, Fenced, HeldBy, Observed,
};
use solewriter_core::names::InstanceDigest;
use solewriter_core::target::TargetId;
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

/// The answer to a release.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReleaseOutcome {
    /// The row was released.
    Released,
    /// The presented credential does not hold the row (superseded, released, forged):
    /// nothing changed.
    NotHolder(Fenced),
}

/// A granted lease: the right to ONE publication, until `expires_at`, revalidated at
/// publication. Not `Clone`; `Debug` redacts the token. Dropping it unused releases it
/// conditionally as a safety net.
#[must_use = "a held lease must be published or released"]
pub struct HeldLease<'s> {
    pub(crate) store: &'s ProjectionStore,
    pub(crate) credential: Credential,
    token: HolderToken,
    expires_at: Millis,
    pub(crate) armed: bool,
}

impl std::fmt::Debug for HeldLease<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeldLease")
            .field("target_id", &self.credential.target_id)
            .field("epoch", &self.credential.epoch)
            .field("expires_at", &self.expires_at)
            .field("token", &self.token)
            .finish()
    }
}

impl HeldLease<'_> {
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

    /// Releases the lease, conditional on the token hash and the epoch.
    pub fn release(mut self) -> Result<ReleaseOutcome> {
        self.armed = false;
        self.store.release_credential(&self.credential)
    }
}

impl Drop for HeldLease<'_> {
    fn drop(&mut self) {
        if self.armed {
            if let Err(error) = self.store.release_credential(&self.credential) {
                tracing::warn!(target_id = %self.credential.target_id, epoch = self.credential.epoch,
                    %error, "safety-net release of a dropped lease failed; it expires on its own");
            }
        }
    }
}

fn fresh_token() -> Result<HolderToken> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| Error::Random(e.to_string()))?;
    Ok(HolderToken::from_bytes(bytes))
}

/// Executes the conditional release of `credential` inside an open transaction.
pub(crate) fn release_in(
    conn: &Connection,
    store: &ProjectionStore,
    credential: &Credential,
) -> Result<ReleaseOutcome> {
    let record = rows::read_lease(conn, &credential.target_id)?
        .ok_or_else(|| Error::NotAdmitted(credential.target_id.clone()))?;
    let now = store.options.clock.now();
    let outcome = match observe(record, now)?.decide_release(credential) {
        Ok(plan) if rows::execute_release(conn, &plan)? => ReleaseOutcome::Released,
        Ok(_) => {
            return Err(Error::CorruptRow(
                "lease row changed under the write lock".into(),
            ))
        }
        Err(fenced) => ReleaseOutcome::NotHolder(fenced),
    };
    tracing::info!(target_id = %credential.target_id, epoch = credential.epoch, ?outcome, "release");
    Ok(outcome)
}

impl ProjectionStore {
    /// Tries to acquire the lease of `target` for the instance `holder`. Never waits for a
    /// live grant: a contender gets [`Acquisition::Held`] at once.
    ///
    /// A live grant seen in the committed snapshot (a plain read, no write lock) answers
    /// `Held` without queueing for the write lock; the answer is advisory, since the grant
    /// may end a moment later. Only a grant needs — and always takes — the serialized
    /// transaction, where the row is read and decided again.
    pub fn acquire(&self, target: &TargetId, holder: &InstanceDigest) -> Result<Acquisition<'_>> {
        let snapshot = rows::read_lease(&self.conn, target).map_err(|e| self.busy_aware(e))?;
        if let Some(record) = snapshot {
            if let Observed::Held(live) = observe(record, self.options.clock.now())? {
                let held = live.held_by();
                tracing::info!(target_id = %target, epoch = held.fencing_epoch, retry_after_ms = held.retry_after_ms, "lease denied: held");
                return Ok(Acquisition::Held(held));
            }
        }
        let token = fresh_token()?;
        let tx = self.begin()?;
        let record =
            rows::read_lease(&tx, target)?.ok_or_else(|| Error::NotAdmitted(target.clone()))?;
        let request = AcquireRequest {
            token_hash: token.hash(),
            holder_instance_digest: holder.clone(),
            now: self.options.clock.now(),
            ttl: self.options.timing.lease_ttl,
        };
        match observe(record, request.now)?.decide_acquire(request) {
            Ok(plan) => {
                rows::write_acquire(&tx, &plan)?;
                tx.commit().map_err(|e| self.map_err(e))?;
                let (epoch, expires_at) = (plan.epoch, plan.grant.expires_at);
                tracing::info!(target_id = %target, epoch, holder = %holder, "lease granted");
                let credential = Credential {
                    target_id: target.clone(),
                    epoch,
                    token_hash: token.hash(),
                };
                Ok(Acquisition::Acquired(HeldLease {
                    store: self,
                    credential,
                    token,
                    expires_at,
                    armed: true,
                }))
            }
            Err(AcquireRefused::Held(held)) => {
                tracing::info!(target_id = %target, epoch = held.fencing_epoch, retry_after_ms = held.retry_after_ms, "lease denied: held");
                Ok(Acquisition::Held(held))
            }
            Err(AcquireRefused::EpochExhausted) => Err(Error::EpochExhausted),
        }
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

    /// Releases the grant `credential` names, conditional on its token hash AND epoch.
    pub(crate) fn release_credential(&self, credential: &Credential) -> Result<ReleaseOutcome> {
        let tx = self.begin()?;
        let outcome = release_in(&tx, self, credential)?;
        tx.commit().map_err(|e| self.map_err(e))?;
        Ok(outcome)
    }
}
