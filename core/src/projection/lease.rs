//! The lease type-state and the plans it produces.
//!
//! A stored lease row ([`LeaseRecord`]) is observed at a broker time and becomes exactly one of
//! `Lease<Unheld>`, `Lease<Held>`, `Lease<Expired>` or `Lease<Released>` ([`Observed`]).
//! `Expired` is derived — a `held` row whose `expires_at <= now` — and never stored.
//! Transitions consume `self` and return a plan for the adapter to execute:
//!
//! - `acquire` exists only on `Unheld`, `Expired` and `Released`, raises the fencing epoch on
//!   every grant (also for the same holder) and yields an [`AcquirePlan`];
//! - publication is authorized only from `Held`: an expired lease cannot publish, by type;
//! - `release` exists only on `Held` and `Expired` and needs a credential matching BOTH the
//!   token hash and the epoch;
//! - `end` (an operator ends the current grant, [`Observed::decide_end`]) exists only on
//!   `Held`: it plans the same conditional write as a release, of exactly the grant observed;
//! - there is no renewal: no method moves `expires_at` of an existing grant.

use crate::config::LeaseTtl;
use crate::error_kind::ErrorKind;
use crate::names::InstanceDigest;
use crate::projection::target::TargetId;
use crate::time::Millis;
use crate::token::TokenHash;

/// A grant recorded in a lease row.
#[derive(Clone, Debug)]
pub struct RecordedGrant {
    /// SHA-256 of the holder's raw token.
    pub holder_token_hash: TokenHash,
    /// Digest identifying the holder instance (diagnostic; not a secret).
    pub holder_instance_digest: InstanceDigest,
    /// When the grant was made (broker clock).
    pub acquired_at: Millis,
    /// `acquired_at + ttl`; never moved afterwards.
    pub expires_at: Millis,
}

/// The stored state of a lease row. `Expired` is not stored: it is derived at observation.
#[derive(Clone, Debug)]
pub enum LeaseState {
    /// Admitted, never granted (epoch 0).
    Unheld,
    /// Granted (possibly expired by now).
    Held(RecordedGrant),
    /// Released by its holder; the last grant is kept for diagnostics.
    Released(RecordedGrant),
}

impl LeaseState {
    /// The value stored in the `state` column.
    pub fn name(&self) -> &'static str {
        match self {
            LeaseState::Unheld => "unheld",
            LeaseState::Held(_) => "held",
            LeaseState::Released(_) => "released",
        }
    }

    /// The grant, unless unheld.
    pub fn grant(&self) -> Option<&RecordedGrant> {
        match self {
            LeaseState::Unheld => None,
            LeaseState::Held(g) | LeaseState::Released(g) => Some(g),
        }
    }

    /// Rebuilds the state from the stored `state` column and grant columns; a combination
    /// that cannot be written by solewriter (held without a grant, unknown state) is refused.
    pub fn from_columns(state: &str, grant: Option<RecordedGrant>) -> Result<Self, &'static str> {
        match (state, grant) {
            ("unheld", None) => Ok(LeaseState::Unheld),
            ("held", Some(g)) => Ok(LeaseState::Held(g)),
            ("released", Some(g)) => Ok(LeaseState::Released(g)),
            ("unheld", Some(_)) => Err("unheld row carries a grant"),
            ("held" | "released", None) => Err("held or released row has no grant"),
            _ => Err("unknown state"),
        }
    }
}

/// One row of `HookProjectionLeases`, as read from (or written to) the store.
#[derive(Clone, Debug)]
pub struct LeaseRecord {
    /// The target this lease fences.
    pub target_id: TargetId,
    /// Monotonic fencing epoch: 0 until the first grant, +1 on every grant.
    pub fencing_epoch: u64,
    /// The stored state.
    pub state: LeaseState,
}

impl LeaseRecord {
    /// The row that admits a target: unheld, epoch 0.
    pub fn admitted(target_id: TargetId) -> Self {
        LeaseRecord {
            target_id,
            fencing_epoch: 0,
            state: LeaseState::Unheld,
        }
    }
}

/// A lease row that violates the row invariants (the store is corrupt or foreign).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("lease row for target {target_id} is inconsistent: {reason}")]
pub struct InconsistentLease {
    /// The target of the row.
    pub target_id: String,
    /// The violated invariant.
    pub reason: &'static str,
}

impl InconsistentLease {
    /// A row that breaks the invariants: an operator must look.
    pub fn kind(&self) -> ErrorKind {
        ErrorKind::Environment
    }
}

/// A type-state marker and the data a lease in that state carries.
pub trait State: sealed::Sealed {
    /// What the state knows: nothing for `Unheld`, the grant otherwise.
    type Data: Clone + std::fmt::Debug;
}

/// Type-state marker: admitted, never granted.
#[derive(Debug)]
pub struct Unheld;
/// Type-state marker: granted and not expired at the observation time.
#[derive(Debug)]
pub struct Held;
/// Type-state marker: granted, but `expires_at <= now`.
#[derive(Debug)]
pub struct Expired;
/// Type-state marker: released by its holder.
#[derive(Debug)]
pub struct Released;

impl State for Unheld {
    type Data = ();
}
impl State for Held {
    type Data = RecordedGrant;
}
impl State for Expired {
    type Data = RecordedGrant;
}
impl State for Released {
    type Data = RecordedGrant;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::Unheld {}
    impl Sealed for super::Held {}
    impl Sealed for super::Expired {}
    impl Sealed for super::Released {}
}

/// A lease observed at one broker time, in state `S`.
#[derive(Debug)]
pub struct Lease<S: State> {
    target_id: TargetId,
    epoch: u64,
    now: Millis,
    data: S::Data,
}

/// The result of observing a lease row at a broker time.
#[derive(Debug)]
pub enum Observed {
    /// Never granted.
    Unheld(Lease<Unheld>),
    /// Granted and live.
    Held(Lease<Held>),
    /// Granted and past `expires_at`.
    Expired(Lease<Expired>),
    /// Released.
    Released(Lease<Released>),
}

/// Observes `record` at broker time `now`. Fails on a row that breaks the invariants
/// (an unheld row with a non-zero epoch, a grant at epoch 0, an expiry before acquisition):
/// fail closed.
pub fn observe(record: LeaseRecord, now: Millis) -> Result<Observed, InconsistentLease> {
    let LeaseRecord {
        target_id,
        fencing_epoch: epoch,
        state,
    } = record;
    let bad = |reason| {
        Err(InconsistentLease {
            target_id: target_id.to_string(),
            reason,
        })
    };
    if epoch > crate::STORAGE_INTEGER_MAX {
        return bad("fencing epoch out of range");
    }
    match (&state, epoch) {
        (LeaseState::Unheld, 0) => {}
        (LeaseState::Unheld, _) => return bad("unheld row with a non-zero epoch"),
        (_, 0) => return bad("granted row at epoch 0"),
        _ => {}
    }
    if let Some(g) = state.grant() {
        if g.expires_at <= g.acquired_at {
            return bad("expires_at not after acquired_at (a grant lasts ttl > 0)");
        }
    }
    Ok(match state {
        LeaseState::Unheld => Observed::Unheld(Lease {
            target_id,
            epoch,
            now,
            data: (),
        }),
        LeaseState::Held(g) if g.expires_at <= now => Observed::Expired(Lease {
            target_id,
            epoch,
            now,
            data: g,
        }),
        LeaseState::Held(g) => Observed::Held(Lease {
            target_id,
            epoch,
            now,
            data: g,
        }),
        LeaseState::Released(g) => Observed::Released(Lease {
            target_id,
            epoch,
            now,
            data: g,
        }),
    })
}

impl<S: State> Lease<S> {
    /// The target of the observed row.
    pub fn target_id(&self) -> &TargetId {
        &self.target_id
    }

    /// The fencing epoch of the observed row.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }
}

impl<S: State<Data = RecordedGrant>> Lease<S> {
    /// The grant of the observed row.
    pub fn grant(&self) -> &RecordedGrant {
        &self.data
    }
}

/// What a would-be holder asks for.
#[derive(Clone, Debug)]
pub struct AcquireRequest {
    /// Hash of the fresh random token the adapter generated for this attempt.
    pub token_hash: TokenHash,
    /// Digest identifying the requesting instance.
    pub holder_instance_digest: InstanceDigest,
    /// Broker time of the attempt (read inside the serialized transaction).
    pub now: Millis,
    /// The configured TTL.
    pub ttl: LeaseTtl,
    /// The fencing epoch of the document at the target's path, if there is one (read under
    /// the target lock inside the same transaction). The grant numbers past it as well as
    /// past the row, so no two documents ever carry one epoch — also when a one-shot's rename
    /// survived a crash that rolled its grant back. It only raises the number — by at most
    /// one past the row: an epoch above the row's + 1 is refused
    /// ([`AcquireRefused::ForeignEpoch`]), never taken.
    pub published_epoch: Option<u64>,
}

/// The write an adapter performs to grant a lease: set the row of `target_id` to `epoch`
/// and `grant` (state `held`) if and only if its epoch is still `prior_epoch` (belt and
/// braces; the serialized transaction already ensures it).
#[derive(Clone, Debug)]
pub struct AcquirePlan {
    /// The target.
    pub target_id: TargetId,
    /// Epoch observed before the grant.
    pub prior_epoch: u64,
    /// Epoch of the grant (`prior_epoch + 1`).
    pub epoch: u64,
    /// The grant.
    pub grant: RecordedGrant,
}

impl AcquirePlan {
    /// The row after the grant.
    pub fn record(&self) -> LeaseRecord {
        LeaseRecord {
            target_id: self.target_id.clone(),
            fencing_epoch: self.epoch,
            state: LeaseState::Held(self.grant.clone()),
        }
    }
}

/// Information returned to a contender when the target is held: no write happens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeldBy {
    /// Digest of the holding instance.
    pub holder_instance_digest: InstanceDigest,
    /// Current fencing epoch.
    pub fencing_epoch: u64,
    /// When the current grant expires.
    pub expires_at: Millis,
    /// Milliseconds until the current grant expires (when a retry can succeed).
    pub retry_after_ms: u64,
}

/// Why an acquisition cannot be planned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AcquireRefused {
    /// The target is held by a live grant.
    #[error("target is held (epoch {}, retry after {} ms)", .0.fencing_epoch, .0.retry_after_ms)]
    Held(HeldBy),
    /// The epoch cannot be raised any further.
    #[error("fencing epoch exhausted")]
    EpochExhausted,
    /// The document in place carries an epoch no grant of this store can have produced.
    #[error(transparent)]
    ForeignEpoch(ForeignEpoch),
}

/// The target's `current.json` carries a fencing epoch above the lease row's epoch + 1, which
/// no grant of this store can have produced: a document solewriter renames carries its
/// grant's epoch, a grant is at most one above the committed row while its commit is pending,
/// and a one-shot that finds a document one above the row commits its grant before it renames
/// (so the row never falls two behind). It was planted, or left by another store (the store
/// was reset or restored from an older backup). Nothing was granted and the row did not move:
/// an operator inspects and removes the file, and the next grant publishes again.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the document in place (current.json of target {target_id}) carries fencing epoch {document_epoch}, above the lease row's epoch {row_epoch} + 1, which no grant of this store can have produced; nothing was granted: inspect and remove that file")]
pub struct ForeignEpoch {
    /// The target.
    pub target_id: TargetId,
    /// The epoch the document carries.
    pub document_epoch: u64,
    /// The lease row's epoch.
    pub row_epoch: u64,
}

impl ForeignEpoch {
    /// A document no grant of this store produced: an operator must look.
    pub fn kind(&self) -> ErrorKind {
        ErrorKind::Environment
    }
}

/// States from which a lease may be granted: `Unheld`, `Expired`, `Released`.
pub trait Acquirable: State {}
impl Acquirable for Unheld {}
impl Acquirable for Expired {}
impl Acquirable for Released {}

impl<S: Acquirable> Lease<S> {
    /// Grants the lease: epoch + 1, fresh token hash, `expires_at = now + ttl`.
    pub fn acquire(
        self,
        request: AcquireRequest,
    ) -> Result<(Lease<Held>, AcquirePlan), AcquireRefused> {
        let prior_epoch = self.epoch;
        if let Some(document_epoch) = request
            .published_epoch
            .filter(|e| *e > prior_epoch.saturating_add(1))
        {
            return Err(AcquireRefused::ForeignEpoch(ForeignEpoch {
                target_id: self.target_id,
                document_epoch,
                row_epoch: prior_epoch,
            }));
        }
        let epoch = prior_epoch
            .max(request.published_epoch.unwrap_or(0))
            .checked_add(1)
            .filter(|e| *e <= crate::STORAGE_INTEGER_MAX)
            .ok_or(AcquireRefused::EpochExhausted)?;
        let grant = RecordedGrant {
            holder_token_hash: request.token_hash,
            holder_instance_digest: request.holder_instance_digest,
            acquired_at: request.now,
            expires_at: request.now.plus_ms(request.ttl.as_millis()),
        };
        let plan = AcquirePlan {
            target_id: self.target_id.clone(),
            prior_epoch,
            epoch,
            grant: grant.clone(),
        };
        let held = Lease {
            target_id: self.target_id,
            epoch,
            now: request.now,
            data: grant,
        };
        Ok((held, plan))
    }
}

impl Observed {
    /// Decides an acquisition: a plan when unheld, expired or released; `Held` otherwise.
    pub fn decide_acquire(self, request: AcquireRequest) -> Result<AcquirePlan, AcquireRefused> {
        match self {
            Observed::Unheld(l) => l.acquire(request).map(|(_, p)| p),
            Observed::Expired(l) => l.acquire(request).map(|(_, p)| p),
            Observed::Released(l) => l.acquire(request).map(|(_, p)| p),
            Observed::Held(l) => Err(AcquireRefused::Held(l.held_by())),
        }
    }

    /// Decides a publication for the holder presenting `credential`.
    pub fn authorize_publish(self, credential: &Credential) -> Result<Authority, Fenced> {
        match self {
            Observed::Held(l) => l.authorize_publish(credential),
            Observed::Expired(l) => l.check(credential).and(Err(Fenced::Expired)),
            Observed::Released(l) => l.check(credential).and(Err(Fenced::Released)),
            Observed::Unheld(_) => Err(Fenced::NeverGranted),
        }
    }

    /// Decides a release for the holder presenting `credential`: only a `held` row (live or
    /// expired) whose epoch AND token hash both match is released.
    pub fn decide_release(self, credential: &Credential) -> Result<ReleasePlan, Fenced> {
        match self {
            Observed::Held(l) => l.release(credential),
            Observed::Expired(l) => l.release(credential),
            Observed::Released(l) => l.check(credential).and(Err(Fenced::Released)),
            Observed::Unheld(_) => Err(Fenced::NeverGranted),
        }
    }

    /// The target of the observed row.
    pub fn target_id(&self) -> &TargetId {
        match self {
            Observed::Unheld(l) => l.target_id(),
            Observed::Held(l) => l.target_id(),
            Observed::Expired(l) => l.target_id(),
            Observed::Released(l) => l.target_id(),
        }
    }

    /// Decides an operator's end of the current grant, which needs no credential: a held
    /// grant, live or expired, is ended by the conditional release of exactly that grant (its
    /// epoch and token hash; `true` with the plan: it had expired); a released or
    /// never-granted row has nothing to end.
    pub fn decide_end(self) -> Result<(EndPlan, bool), NothingHeld> {
        match self {
            Observed::Held(l) => Ok((l.end(), false)),
            Observed::Expired(l) => Ok((l.end(), true)),
            Observed::Released(_) => Err(NothingHeld::Released),
            Observed::Unheld(_) => Err(NothingHeld::NeverGranted),
        }
    }

    /// The fencing epoch of the observed row.
    pub fn epoch(&self) -> u64 {
        match self {
            Observed::Unheld(l) => l.epoch(),
            Observed::Held(l) => l.epoch(),
            Observed::Expired(l) => l.epoch(),
            Observed::Released(l) => l.epoch(),
        }
    }
}

/// What a holder presents to publish or release: the target, the epoch it was granted and the
/// hash of its raw token.
#[derive(Clone, Debug)]
pub struct Credential {
    /// Target of the grant.
    pub target_id: TargetId,
    /// Epoch of the grant.
    pub epoch: u64,
    /// Hash of the holder's raw token.
    pub token_hash: TokenHash,
}

/// Why a holder may not publish or release.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Fenced {
    /// A successor was granted a higher epoch.
    #[error("superseded: the lease is now at epoch {current_epoch}")]
    Superseded {
        /// The current epoch.
        current_epoch: u64,
    },
    /// The epoch matches but the token does not (a forged or foreign credential).
    #[error("the presented token does not match the holder of this epoch")]
    TokenMismatch,
    /// The grant reached `expires_at`.
    #[error("the lease expired")]
    Expired,
    /// The grant was already released.
    #[error("the lease was released")]
    Released,
    /// The target has never been granted.
    #[error("the target has never been granted")]
    NeverGranted,
    /// The document in place already carries this grant's epoch or a later one (this grant
    /// already renamed a document whose release could not commit, or a copy of the grant did):
    /// a grant renames at most one document, so nothing was renamed.
    #[error("the document in place already carries fencing epoch {document_epoch}, not below this grant's")]
    DocumentAhead {
        /// The epoch of the document in place.
        document_epoch: u64,
    },
}

impl Fenced {
    /// Whatever fenced it, the holder's authority is gone.
    pub fn kind(&self) -> ErrorKind {
        ErrorKind::LostAuthority
    }
}

impl<S: State<Data = RecordedGrant>> Lease<S> {
    /// Checks `credential` against this row: the epoch first (a successor's higher epoch means
    /// `Superseded`), then the token hash, compared in constant time.
    fn check(&self, credential: &Credential) -> Result<(), Fenced> {
        if credential.target_id != self.target_id || credential.epoch != self.epoch {
            return Err(Fenced::Superseded {
                current_epoch: self.epoch,
            });
        }
        if !self.data.holder_token_hash.ct_eq(&credential.token_hash) {
            return Err(Fenced::TokenMismatch);
        }
        Ok(())
    }
}

impl Lease<Held> {
    /// Who holds the lease, for a contender's `Held` answer.
    pub fn held_by(&self) -> HeldBy {
        HeldBy {
            holder_instance_digest: self.data.holder_instance_digest.clone(),
            fencing_epoch: self.epoch,
            expires_at: self.data.expires_at,
            retry_after_ms: self.now.until(self.data.expires_at),
        }
    }

    /// Authorizes a publication by the holder presenting `credential`.
    pub fn authorize_publish(self, credential: &Credential) -> Result<Authority, Fenced> {
        self.check(credential)?;
        Ok(Authority {
            target_id: self.target_id,
            epoch: self.epoch,
            expires_at: self.data.expires_at,
        })
    }
}

impl<S: Releasable> Lease<S> {
    /// Ends this grant on an operator's word: the conditional release of exactly this grant.
    /// Once it is written the row is `released`, so its holder's next publication or release
    /// is refused ([`Fenced::Released`]) and the next grant gets a higher epoch. An expired
    /// grant is ended too: its holder is already fenced by time, and the write makes that
    /// durable, so a broker clock set back cannot make the grant live again.
    pub fn end(self) -> EndPlan {
        EndPlan {
            release: ReleasePlan {
                target_id: self.target_id,
                epoch: self.epoch,
                token_hash: self.data.holder_token_hash,
            },
            grant: self.data,
        }
    }

    /// Releases the lease if `credential` matches both the epoch and the token hash.
    pub fn release(self, credential: &Credential) -> Result<ReleasePlan, Fenced> {
        self.check(credential)?;
        Ok(ReleasePlan {
            target_id: self.target_id,
            epoch: self.epoch,
            token_hash: credential.token_hash,
        })
    }
}

/// States from which a holder may release: `Held` and `Expired` (its own, unclaimed grant).
pub trait Releasable: State<Data = RecordedGrant> {}
impl Releasable for Held {}
impl Releasable for Expired {}

/// The conditional release an adapter executes: set `state = released` WHERE target, epoch
/// AND token hash all match and the row is held. The condition is part of the plan so the
/// write itself is fenced, not only the decision.
#[derive(Clone, Debug)]
pub struct ReleasePlan {
    /// Target of the grant.
    pub target_id: TargetId,
    /// Epoch the row must still have.
    pub epoch: u64,
    /// Token hash the row must still have.
    pub token_hash: TokenHash,
}

/// An operator's end of a held grant (live or expired): the conditional release of exactly the grant observed
/// (a grant that changed meanwhile is not ended), and that grant, for the report.
#[derive(Clone, Debug)]
pub struct EndPlan {
    /// The write: `state = released` WHERE the observed epoch and token hash still match.
    pub release: ReleasePlan,
    /// The grant being ended.
    pub grant: RecordedGrant,
}

/// Why an operator's end found no grant to end; nothing is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NothingHeld {
    /// Admitted, never granted.
    NeverGranted,
    /// The last grant was released (by its holder or by an operator).
    Released,
}

impl NothingHeld {
    /// The lease state it names: `unheld`, `released` or `expired`.
    pub fn name(self) -> &'static str {
        match self {
            NothingHeld::NeverGranted => "unheld",
            NothingHeld::Released => "released",
        }
    }
}

/// Proof that the presenting holder was the live holder when revalidated inside the
/// serialized transaction. Only [`Observed::authorize_publish`] makes one.
#[derive(Clone, Debug)]
pub struct Authority {
    target_id: TargetId,
    epoch: u64,
    expires_at: Millis,
}

/// The publication would finish at or after the lease's `expires_at`; it must abort.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "lease expired at {expires_at} before the rename (now {now}); no renewal, publication aborted"
)]
pub struct DeadlinePassed {
    /// The grant's expiry.
    pub expires_at: Millis,
    /// The time of the check.
    pub now: Millis,
}

impl DeadlinePassed {
    /// The grant ran out before the rename: the holder's authority is gone.
    pub fn kind(&self) -> ErrorKind {
        ErrorKind::LostAuthority
    }
}

impl Authority {
    /// The target being published.
    pub fn target_id(&self) -> &TargetId {
        &self.target_id
    }

    /// The epoch of the authorized grant.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The grant's expiry.
    pub fn expires_at(&self) -> Millis {
        self.expires_at
    }

    /// The bounded-lease check made immediately before the rename: a render or write that
    /// ran past `expires_at` aborts instead of extending the lease.
    pub fn check_deadline(&self, now: Millis) -> Result<(), DeadlinePassed> {
        if now >= self.expires_at {
            Err(DeadlinePassed {
                expires_at: self.expires_at,
                now,
            })
        } else {
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::InstanceDigest;
    use crate::token::HolderToken;

    fn tid() -> TargetId {
        TargetId::parse(&"ab".repeat(32)).unwrap()
    }

    fn request(seed: u8, now: u64) -> AcquireRequest {
        AcquireRequest {
            token_hash: HolderToken::from_bytes([seed; 32]).hash(),
            holder_instance_digest: InstanceDigest::parse(&format!("inst-{seed}")).unwrap(),
            now: Millis(now),
            ttl: LeaseTtl::from_millis(Some(100)).unwrap(),
            published_epoch: None,
        }
    }

    fn cred(plan: &AcquirePlan, seed: u8) -> Credential {
        Credential {
            target_id: plan.target_id.clone(),
            epoch: plan.epoch,
            token_hash: HolderToken::from_bytes([seed; 32]).hash(),
        }
    }

    fn grant(record: LeaseRecord, seed: u8, now: u64) -> Result<AcquirePlan, AcquireRefused> {
        observe(record, Millis(now))
            .unwrap()
            .decide_acquire(request(seed, now))
    }

    #[test]
    fn every_grant_raises_the_epoch_even_for_the_same_holder() {
        let p1 = grant(LeaseRecord::admitted(tid()), 1, 0).unwrap();
        assert_eq!((p1.prior_epoch, p1.epoch), (0, 1));
        let rel = observe(p1.record(), Millis(10))
            .unwrap()
            .decide_release(&cred(&p1, 1))
            .unwrap();
        let released = released(&p1.record());
        assert_eq!(rel.epoch, 1);
        let p2 = grant(released, 1, 20).unwrap();
        assert_eq!((p2.prior_epoch, p2.epoch), (1, 2));
        let p3 = grant(p2.record(), 1, 120).unwrap(); // expired at 120
        assert_eq!(p3.epoch, 3);
        assert_eq!(p3.grant.expires_at, Millis(220));
    }

    #[test]
    fn held_is_refused_with_retry_metadata_until_expiry() {
        let p1 = grant(LeaseRecord::admitted(tid()), 1, 0).unwrap();
        match grant(p1.record(), 2, 40) {
            Err(AcquireRefused::Held(h)) => {
                assert_eq!(
                    h,
                    HeldBy {
                        holder_instance_digest: InstanceDigest::parse("inst-1").unwrap(),
                        fencing_epoch: 1,
                        expires_at: Millis(100),
                        retry_after_ms: 60
                    }
                )
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            grant(p1.record(), 2, 99),
            Err(AcquireRefused::Held(_))
        ));
        // Expired is derived from `expires_at <= now`.
        assert_eq!(grant(p1.record(), 2, 100).unwrap().epoch, 2);
    }

    #[test]
    fn publish_requires_live_grant_with_matching_epoch_and_token() {
        let p1 = grant(LeaseRecord::admitted(tid()), 1, 0).unwrap();
        let ok = observe(p1.record(), Millis(50))
            .unwrap()
            .authorize_publish(&cred(&p1, 1))
            .unwrap();
        assert_eq!((ok.epoch(), ok.expires_at()), (1, Millis(100)));
        assert_eq!(ok.check_deadline(Millis(99)), Ok(()));
        assert!(ok.check_deadline(Millis(100)).is_err());
        let auth = |rec: &LeaseRecord, now, c: &Credential| {
            observe(rec.clone(), Millis(now))
                .unwrap()
                .authorize_publish(c)
        };
        assert_eq!(
            auth(&p1.record(), 50, &cred(&p1, 9)).unwrap_err(),
            Fenced::TokenMismatch
        );
        assert_eq!(
            auth(&p1.record(), 100, &cred(&p1, 1)).unwrap_err(),
            Fenced::Expired
        );
        let p2 = grant(p1.record(), 2, 150).unwrap();
        assert_eq!(
            auth(&p2.record(), 150, &cred(&p1, 1)).unwrap_err(),
            Fenced::Superseded { current_epoch: 2 }
        );
        let released = released(&p1.record());
        assert_eq!(
            auth(&released, 50, &cred(&p1, 1)).unwrap_err(),
            Fenced::Released
        );
        assert_eq!(
            auth(&LeaseRecord::admitted(tid()), 0, &cred(&p1, 1)).unwrap_err(),
            Fenced::NeverGranted
        );
    }

    #[test]
    fn release_requires_token_and_epoch() {
        let p1 = grant(LeaseRecord::admitted(tid()), 1, 0).unwrap();
        let rel =
            |c: &Credential, now| observe(p1.record(), Millis(now)).unwrap().decide_release(c);
        assert!(rel(&cred(&p1, 1), 10).is_ok());
        assert!(
            rel(&cred(&p1, 1), 500).is_ok(),
            "own expired, unclaimed grant may be released"
        );
        assert_eq!(rel(&cred(&p1, 2), 10).unwrap_err(), Fenced::TokenMismatch);
        let mut wrong_epoch = cred(&p1, 1);
        wrong_epoch.epoch = 7;
        assert_eq!(
            rel(&wrong_epoch, 10).unwrap_err(),
            Fenced::Superseded { current_epoch: 1 }
        );
    }

    fn released(record: &LeaseRecord) -> LeaseRecord {
        let mut r = record.clone();
        r.state = LeaseState::Released(record.state.grant().unwrap().clone());
        r
    }

    #[test]
    fn only_a_held_grant_can_be_ended_and_the_plan_names_exactly_it() {
        let p1 = grant(LeaseRecord::admitted(tid()), 1, 0).unwrap();
        let end = |rec: &LeaseRecord, now| observe(rec.clone(), Millis(now)).unwrap().decide_end();
        let (plan, expired) = end(&p1.record(), 99).unwrap();
        assert!(!expired);
        assert_eq!((plan.release.epoch, &plan.release.target_id), (1, &tid()));
        assert!(plan.release.token_hash.ct_eq(&p1.grant.holder_token_hash));
        assert_eq!(plan.grant.expires_at, Millis(100));
        // An expired grant is ended too (a clock set back must not revive it).
        let (plan, expired) = end(&p1.record(), 100).unwrap();
        assert!(expired);
        assert_eq!(plan.release.epoch, 1);
        assert!(plan.release.token_hash.ct_eq(&p1.grant.holder_token_hash));
        assert_eq!(
            end(&released(&p1.record()), 50).unwrap_err(),
            NothingHeld::Released
        );
        assert_eq!(
            end(&LeaseRecord::admitted(tid()), 0).unwrap_err(),
            NothingHeld::NeverGranted
        );
        let names = [NothingHeld::NeverGranted, NothingHeld::Released].map(NothingHeld::name);
        assert_eq!(names, ["unheld", "released"]);
    }

    #[test]
    fn inconsistent_rows_fail_closed() {
        let p1 = grant(LeaseRecord::admitted(tid()), 1, 0).unwrap();
        let g = p1.grant.clone();
        let missing = Err("held or released row has no grant");
        assert_eq!(
            LeaseState::from_columns("held", None).map(|s| s.name()),
            missing
        );
        assert_eq!(
            LeaseState::from_columns("released", None).map(|s| s.name()),
            missing
        );
        assert_eq!(
            LeaseState::from_columns("unheld", Some(g.clone())).map(|s| s.name()),
            Err("unheld row carries a grant")
        );
        assert_eq!(
            LeaseState::from_columns("stolen", Some(g.clone())).map(|s| s.name()),
            Err("unknown state")
        );
        let mut unheld_epoch = LeaseRecord::admitted(tid());
        unheld_epoch.fencing_epoch = 3;
        assert!(observe(unheld_epoch, Millis(0)).is_err());
        let mut zero = p1.record();
        zero.fencing_epoch = 0;
        assert!(observe(zero, Millis(0)).is_err());
        let mut backwards = g;
        backwards.expires_at = Millis(0);
        backwards.acquired_at = Millis(5);
        let mut row = p1.record();
        row.state = LeaseState::Held(backwards);
        assert!(observe(row, Millis(0)).is_err());
    }

    #[test]
    fn epoch_exhaustion_is_refused() {
        let p1 = grant(LeaseRecord::admitted(tid()), 1, 0).unwrap();
        let mut top = p1.record();
        top.fencing_epoch = crate::STORAGE_INTEGER_MAX;
        assert_eq!(
            grant(top, 2, 500).unwrap_err(),
            AcquireRefused::EpochExhausted
        );
    }

    #[test]
    fn state_names_round_trip_through_the_columns() {
        let g = grant(LeaseRecord::admitted(tid()), 1, 0).unwrap().grant;
        let states = [
            LeaseState::Unheld,
            LeaseState::Held(g.clone()),
            LeaseState::Released(g),
        ];
        let names: Vec<_> = states.iter().map(LeaseState::name).collect();
        assert_eq!(names, ["unheld", "held", "released"]);
        for state in &states {
            let back = LeaseState::from_columns(state.name(), state.grant().cloned()).unwrap();
            assert_eq!(back.name(), state.name());
        }
    }

    #[test]
    fn epochs_are_reported_at_every_level() {
        let mut record = grant(LeaseRecord::admitted(tid()), 1, 0).unwrap().record();
        record.fencing_epoch = 3;
        let observed = observe(record.clone(), Millis(1)).unwrap();
        assert_eq!(observed.epoch(), 3);
        let Observed::Held(lease) = observed else {
            panic!("held")
        };
        assert_eq!(lease.epoch(), 3);
        assert_eq!(lease.target_id(), &tid());
        let credential = Credential {
            target_id: tid(),
            epoch: 3,
            token_hash: HolderToken::from_bytes([1; 32]).hash(),
        };
        assert_eq!(lease.authorize_publish(&credential).unwrap().epoch(), 3);
    }

    #[test]
    fn a_grant_must_end_after_it_starts() {
        let mut g = grant(LeaseRecord::admitted(tid()), 1, 0).unwrap().grant;
        g.expires_at = g.acquired_at;
        let row = LeaseRecord {
            target_id: tid(),
            fencing_epoch: 1,
            state: LeaseState::Held(g),
        };
        assert!(observe(row, Millis(0)).is_err());
    }
}
