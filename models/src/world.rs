//! The model's operations. Each store operation is one serialized transaction (the store
//! mutex held throughout, as SQLite's write lock is); file operations take the file-system
//! mutex; the clock is its own mutex; the last committed state is also kept in a snapshot
//! readable without the write lock (as SQLite's WAL readers see it). Lock order:
//! store → snapshot → fs → clock → ghost.
//!
//! With [`Design::Real`] every operation follows the adapter's sequence step for step and
//! calls the same core functions; the trap variants differ only where their name says.

use crate::design::Design;
use crate::ghost::{Ghost, ReaderCheck, Renamer};
use crate::shim::Shim;
use crate::state::{FsState, StoreState};
use solewriter_core::channel::{ChannelRecord, ChannelRegistry, ProducerId, Submission};
use solewriter_core::config::LeaseTtl;
use solewriter_core::lease::{
    observe, AcquireRefused, AcquireRequest, Authority, Credential, DeadlinePassed, Fenced, HeldBy,
    LeaseRecord, LeaseState, Observed,
};
use solewriter_core::names::InstanceDigest;
use solewriter_core::projection::{compose, ProjectionDocument};
use solewriter_core::publication::PublishStep;
use solewriter_core::target::{TargetId, TargetTuple};
use solewriter_core::time::Millis;
use solewriter_core::token::HolderToken;
use solewriter_core::watermark::{decide_submission, SubmissionPlan, SubmissionRejected};

/// A grant as its holder keeps it. `Clone` on purpose: the checkers let stale copies act.
#[derive(Clone, Debug)]
pub struct ModelLease {
    /// Target.
    pub target_id: TargetId,
    /// Epoch of the grant.
    pub epoch: u64,
    /// The raw token.
    pub token: HolderToken,
    /// Expiry of the grant (as the holder believes it).
    pub expires_at: Millis,
    /// The authority as it stood at grant time (used only by the traps that skip revalidation).
    granted_authority: Authority,
}

impl ModelLease {
    fn credential(&self) -> Credential {
        Credential {
            target_id: self.target_id.clone(),
            epoch: self.epoch,
            token_hash: self.token.hash(),
        }
    }
}

/// Answer to an acquisition.
#[derive(Clone, Debug)]
pub enum ModelAcquire {
    /// Granted.
    Acquired(ModelLease),
    /// Held by a live grant; nothing written.
    Held(HeldBy),
}

/// Failures that are not lease outcomes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ModelError {
    /// The target is not admitted.
    NotAdmitted,
    /// The epoch cannot rise further.
    EpochExhausted,
    /// A submission was rejected.
    Rejected(SubmissionRejected),
}

/// What a submission did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SubmitKind {
    /// First row.
    Inserted,
    /// Higher watermark.
    Advanced,
    /// Identical replay.
    Replayed,
    /// Source conflict.
    Degraded,
}

/// Answer to a release.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReleaseKind {
    /// Released.
    Released,
    /// Not the holder; nothing changed.
    NotHolder(Fenced),
}

/// Answer to a publication.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PublishOutcome {
    /// `current.json` replaced with `bytes`.
    Published {
        /// Epoch of the publishing grant.
        epoch: u64,
        /// The document.
        bytes: Vec<u8>,
    },
    /// Fenced at revalidation; nothing touched.
    Fenced(Fenced),
    /// Deadline passed before the rename; aborted.
    Expired(DeadlinePassed),
    /// The publisher crashed at this step: the transaction rolled back, temps may remain.
    Crashed(PublishStep),
    /// The target is not admitted.
    NotAdmitted,
    /// A trap variant's own guard refused (e.g. the JSON epoch compare).
    Refused,
}

enum Tx<R> {
    Commit(R),
    Rollback(R),
}

/// The model world: store, runtime directory, clock, checker.
pub struct World<S: Shim> {
    design: Design,
    registry: ChannelRegistry,
    ttl: LeaseTtl,
    store: S::Mutex<StoreState>,
    /// The last committed state, readable without the write lock (SQLite's WAL snapshot).
    snapshot: S::Mutex<StoreState>,
    fs: S::Mutex<FsState>,
    clock: S::Mutex<Millis>,
    ghost: S::Mutex<Ghost>,
}

impl<S: Shim> World<S> {
    /// A fresh world running `design`.
    pub fn new(design: Design, registry: ChannelRegistry, ttl: LeaseTtl, start: Millis) -> Self {
        World {
            design,
            registry,
            ttl,
            store: S::mutex(StoreState::default()),
            snapshot: S::mutex(StoreState::default()),
            fs: S::mutex(FsState::default()),
            clock: S::mutex(start),
            ghost: S::mutex(Ghost::new(ttl.as_millis())),
        }
    }

    /// The broker clock.
    pub fn now(&self) -> Millis {
        S::with(&self.clock, |c| *c)
    }

    /// Moves the clock forward.
    pub fn advance(&self, ms: u64) {
        S::with(&self.clock, |c| *c = c.plus_ms(ms));
    }

    /// Sets the clock (backwards jumps allowed).
    pub fn set_clock(&self, to: Millis) {
        S::with(&self.clock, |c| *c = to);
    }

    fn transaction<R>(&self, f: impl FnOnce(&mut StoreState) -> Tx<R>) -> R {
        S::with(&self.store, |committed| {
            let mut work = committed.clone();
            match f(&mut work) {
                Tx::Commit(r) => {
                    S::with(&self.ghost, |g| g.on_commit(&work));
                    S::with(&self.snapshot, |snap| *snap = work.clone());
                    *committed = work;
                    r
                }
                Tx::Rollback(r) => r,
            }
        })
    }

    /// A copy of the committed store.
    pub fn store(&self) -> StoreState {
        S::with(&self.store, |s| s.clone())
    }

    /// The bytes of `current.json` of `target`.
    pub fn current(&self, target: &TargetId) -> Option<Vec<u8>> {
        S::with(&self.fs, |fs| {
            fs.dirs.get(target).and_then(|d| d.current.clone())
        })
    }

    /// Number of temp siblings of `target`.
    pub fn temp_count(&self, target: &TargetId) -> usize {
        S::with(&self.fs, |fs| {
            fs.dirs.get(target).map_or(0, |d| d.temps.len())
        })
    }

    /// Reads `current.json` of `target` and checks it with `reader`.
    pub fn read(&self, target: &TargetId, reader: &mut ReaderCheck) {
        S::with(&self.fs, |fs| {
            reader.observe(fs.dirs.get(target).and_then(|d| d.current.as_deref()))
        });
    }

    /// Admits a target (idempotent).
    pub fn admit(&self, tuple: &TargetTuple) -> TargetId {
        let target = tuple.target_id();
        self.transaction(|tx| {
            tx.leases
                .entry(target.clone())
                .or_insert_with(|| LeaseRecord::admitted(target.clone()));
            Tx::Commit(())
        });
        target
    }

    /// A producer submission.
    pub fn submit(
        &self,
        producer: &ProducerId,
        submission: &Submission,
    ) -> Result<SubmitKind, ModelError> {
        self.transaction(|tx| {
            let admitted = tx.leases.contains_key(&submission.target_id);
            let key = (submission.target_id.clone(), submission.channel.clone());
            let now = self.now();
            let plan = match decide_submission(
                &self.registry,
                producer,
                admitted,
                tx.channels.get(&key),
                submission,
                now,
            ) {
                Ok(plan) => plan,
                Err(rejected) => return Tx::Rollback(Err(ModelError::Rejected(rejected))),
            };
            let mut put = |record: ChannelRecord| tx.channels.insert(key.clone(), record);
            let kind = match plan {
                SubmissionPlan::Insert(r) => {
                    put(r);
                    SubmitKind::Inserted
                }
                SubmissionPlan::Advance(r) => {
                    put(r);
                    SubmitKind::Advanced
                }
                SubmissionPlan::Replay => SubmitKind::Replayed,
                SubmissionPlan::Degrade { record } => {
                    put(record);
                    SubmitKind::Degraded
                }
            };
            Tx::Commit(Ok(kind))
        })
    }

    /// Tries to acquire `target` for `holder` with the fresh `token`.
    pub fn acquire(
        &self,
        target: &TargetId,
        holder: &InstanceDigest,
        token: HolderToken,
    ) -> Result<ModelAcquire, ModelError> {
        let decide = |tx: &StoreState| {
            let record = tx
                .leases
                .get(target)
                .cloned()
                .ok_or(ModelError::NotAdmitted)?;
            let request = AcquireRequest {
                token_hash: token.hash(),
                holder_instance_digest: holder.clone(),
                now: self.now(),
                ttl: self.ttl,
            };
            let now = request.now;
            let observed = observe(record, now).map_err(|_| ModelError::NotAdmitted)?;
            Ok(observed.decide_acquire(request))
        };
        let apply =
            |tx: &mut StoreState, plan: &solewriter_core::lease::AcquirePlan, check_prior: bool| {
                let row = tx
                    .leases
                    .get_mut(target)
                    .expect("admitted rows are never deleted");
                if check_prior && row.fencing_epoch != plan.prior_epoch {
                    return false;
                }
                *row = plan.record();
                true
            };
        // As the adapter: a live grant in the committed snapshot answers `Held` without the
        // write lock.
        let snapshot = S::with(&self.snapshot, |snap| snap.leases.get(target).cloned());
        if let Some(Ok(Observed::Held(live))) = snapshot.map(|row| observe(row, self.now())) {
            return Ok(ModelAcquire::Held(live.held_by()));
        }
        let decision = if self.design == Design::SplitAcquire {
            // Trap: decide in one transaction, write in another.
            let decision = self.transaction(|tx| Tx::Rollback(decide(tx)))?;
            if let Ok(plan) = &decision {
                self.transaction(|tx| {
                    apply(tx, plan, false);
                    Tx::Commit(())
                });
            }
            decision
        } else {
            self.transaction(|tx| match decide(tx) {
                Ok(Ok(plan)) if apply(tx, &plan, true) => Tx::Commit(Ok(Ok(plan))),
                other => Tx::Rollback(other),
            })?
        };
        match decision {
            Ok(plan) => {
                let credential = Credential {
                    target_id: target.clone(),
                    epoch: plan.epoch,
                    token_hash: token.hash(),
                };
                let granted_authority = observe(plan.record(), plan.grant.acquired_at)
                    .ok()
                    .and_then(|o| o.authorize_publish(&credential).ok())
                    .expect("a fresh grant (ttl > 0) authorizes its holder");
                Ok(ModelAcquire::Acquired(ModelLease {
                    target_id: target.clone(),
                    epoch: plan.epoch,
                    token,
                    expires_at: plan.grant.expires_at,
                    granted_authority,
                }))
            }
            Err(AcquireRefused::Held(held)) => Ok(ModelAcquire::Held(held)),
            Err(AcquireRefused::EpochExhausted) => Err(ModelError::EpochExhausted),
        }
    }

    /// Releases `lease` (conditional; see [`Design`] for the broken variants).
    pub fn release(&self, lease: &ModelLease) -> ReleaseKind {
        self.transaction(|tx| Tx::Commit(self.release_in(tx, &lease.credential())))
    }

    /// Releases by raw credential — what anyone, holder or not, can present (the adapter's
    /// `release_token`).
    pub fn release_token(&self, target: &TargetId, epoch: u64, token: &HolderToken) -> ReleaseKind {
        let credential = Credential {
            target_id: target.clone(),
            epoch,
            token_hash: token.hash(),
        };
        self.transaction(|tx| Tx::Commit(self.release_in(tx, &credential)))
    }

    fn release_in(&self, tx: &mut StoreState, credential: &Credential) -> ReleaseKind {
        let Some(row) = tx.leases.get_mut(&credential.target_id) else {
            return ReleaseKind::NotHolder(Fenced::NeverGranted);
        };
        let token_ok = row
            .state
            .grant()
            .is_some_and(|g| g.holder_token_hash.ct_eq(&credential.token_hash));
        let held = matches!(row.state, LeaseState::Held(_));
        let allowed = match self.design {
            Design::ReleaseTokenOnly => Ok(held && token_ok),
            Design::ReleaseEpochOnly => Ok(held && row.fencing_epoch == credential.epoch),
            _ => match observe(row.clone(), self.now()) {
                Ok(observed) => observed.decide_release(credential).map(|_| true),
                Err(_) => Ok(false),
            },
        };
        match allowed {
            Ok(true) => {
                S::with(&self.ghost, |g| {
                    g.on_release(row, credential.epoch, &credential.token_hash)
                });
                if let LeaseState::Held(g) = &row.state {
                    row.state = LeaseState::Released(g.clone());
                }
                ReleaseKind::Released
            }
            Ok(false) => ReleaseKind::NotHolder(Fenced::TokenMismatch),
            Err(fenced) => ReleaseKind::NotHolder(fenced),
        }
    }

    fn compose_bytes(&self, authority: &Authority, tx: &StoreState, now: Millis) -> Vec<u8> {
        let rows = tx.channel_rows(authority.target_id());
        compose(authority, &self.registry, &rows, now)
            .map(|d| d.to_bytes())
            .expect("the model stores only envelopes that passed the schema check")
    }

    fn write_temp(&self, target: &TargetId, bytes: &[u8], remove_orphans: bool) -> u64 {
        S::with(&self.fs, |fs| {
            let dir = fs.dir(target);
            if remove_orphans {
                dir.temps.clear();
            }
            let id = dir.next_temp;
            dir.next_temp += 1;
            dir.temps.insert(id, bytes.to_vec());
            id
        })
    }

    fn rename(&self, target: &TargetId, temp: u64, renamer: Renamer) {
        S::with(&self.fs, |fs| {
            let dir = fs.dir(target);
            let bytes = dir.temps.remove(&temp).expect("a renamed temp exists");
            let epoch = ProjectionDocument::parse(&bytes).map_or(0, |d| d.fencing_epoch);
            S::with(&self.ghost, |g| g.on_rename(target, &renamer, epoch));
            dir.current = Some(bytes);
        });
    }

    fn renamer(lease: &ModelLease, last_clock: Millis) -> Renamer {
        Renamer {
            epoch: lease.epoch,
            token_hash: lease.token.hash(),
            expires_at: lease.expires_at,
            last_clock,
        }
    }

    /// Publishes `current.json` for `lease`, crashing at `crash_at` if given.
    pub fn publish(&self, lease: &ModelLease, crash_at: Option<PublishStep>) -> PublishOutcome {
        match self.design {
            Design::RenameWithoutCheck | Design::JsonEpochGuard => self.publish_unguarded(lease),
            Design::CommitThenRename => self.publish_commit_then_rename(lease),
            _ => self.publish_fenced(lease, crash_at),
        }
    }

    /// The real sequence (the adapter's, step for step); `IgnoreExpiry`, `Renewal` and
    /// `InPlaceWrite` deviate where marked.
    fn publish_fenced(&self, lease: &ModelLease, crash_at: Option<PublishStep>) -> PublishOutcome {
        let mut lease = lease.clone();
        if self.design == Design::Renewal {
            self.renew(&mut lease);
        }
        let crash = |step| crash_at == Some(step);
        let credential = lease.credential();
        let target = lease.target_id.clone();
        self.transaction(|tx| {
            if crash(PublishStep::TransactionOpen) {
                return Tx::Rollback(PublishOutcome::Crashed(PublishStep::TransactionOpen));
            }
            let Some(record) = tx.leases.get(&target).cloned() else {
                return Tx::Rollback(PublishOutcome::NotAdmitted);
            };
            let now = self.now();
            let authorized = match observe(record, now) {
                Ok(Observed::Expired(l)) if self.design == Design::IgnoreExpiry => {
                    // Trap: an expired row is treated as held (the credential is still
                    // checked, through `release`'s check).
                    l.release(&credential)
                        .map(|_| lease.granted_authority.clone())
                }
                Ok(observed) => observed.authorize_publish(&credential),
                Err(_) => Err(Fenced::NeverGranted),
            };
            let authority = match authorized {
                Ok(a) => a,
                Err(fenced) => {
                    self.release_in(tx, &credential);
                    return Tx::Commit(PublishOutcome::Fenced(fenced));
                }
            };
            if crash(PublishStep::Revalidated) {
                return Tx::Rollback(PublishOutcome::Crashed(PublishStep::Revalidated));
            }
            let bytes = self.compose_bytes(&authority, tx, now);
            if crash(PublishStep::Composed) {
                return Tx::Rollback(PublishOutcome::Crashed(PublishStep::Composed));
            }
            if self.design == Design::InPlaceWrite {
                // Trap: current.json written in place, in two writes.
                let checked_at = self.now();
                if let Err(deadline) = authority.check_deadline(checked_at) {
                    self.release_in(tx, &credential);
                    return Tx::Commit(PublishOutcome::Expired(deadline));
                }
                let half = bytes.len() / 2;
                S::with(&self.fs, |fs| {
                    fs.dir(&target).current = Some(bytes[..half].to_vec())
                });
                let temp = self.write_temp(&target, &bytes, true);
                self.rename(&target, temp, Self::renamer(&lease, checked_at));
                self.release_in(tx, &credential);
                return Tx::Commit(PublishOutcome::Published {
                    epoch: authority.epoch(),
                    bytes,
                });
            }
            let temp = self.write_temp(&target, &bytes, true);
            if crash(PublishStep::TempWritten) {
                return Tx::Rollback(PublishOutcome::Crashed(PublishStep::TempWritten));
            }
            let checked_at = self.now();
            if self.design != Design::IgnoreExpiry {
                if let Err(deadline) = authority.check_deadline(checked_at) {
                    S::with(&self.fs, |fs| fs.dir(&target).temps.remove(&temp));
                    self.release_in(tx, &credential);
                    return Tx::Commit(PublishOutcome::Expired(deadline));
                }
            }
            if crash(PublishStep::DeadlineChecked) {
                return Tx::Rollback(PublishOutcome::Crashed(PublishStep::DeadlineChecked));
            }
            self.rename(&target, temp, Self::renamer(&lease, checked_at));
            for step in [PublishStep::Renamed, PublishStep::DirectorySynced] {
                if crash(step) {
                    return Tx::Rollback(PublishOutcome::Crashed(step));
                }
            }
            self.release_in(tx, &credential);
            if crash(PublishStep::Released) {
                return Tx::Rollback(PublishOutcome::Crashed(PublishStep::Released));
            }
            Tx::Commit(PublishOutcome::Published {
                epoch: authority.epoch(),
                bytes,
            })
        })
    }

    /// Trap `Renewal`: extend `expires_at` to `now + ttl` while still the holder.
    fn renew(&self, lease: &mut ModelLease) {
        let credential = lease.credential();
        let renewed = self.transaction(|tx| {
            let now = self.now();
            let Some(row) = tx.leases.get_mut(&lease.target_id) else {
                return Tx::Rollback(None);
            };
            if let LeaseState::Held(g) = &mut row.state {
                if row.fencing_epoch == credential.epoch
                    && g.holder_token_hash.ct_eq(&credential.token_hash)
                {
                    g.expires_at = now.plus_ms(self.ttl.as_millis());
                    return Tx::Commit(Some(g.expires_at));
                }
            }
            Tx::Rollback(None)
        });
        if let Some(expires_at) = renewed {
            lease.expires_at = expires_at;
        }
    }

    /// Traps `RenameWithoutCheck` and `JsonEpochGuard`: no transaction around the rename.
    fn publish_unguarded(&self, lease: &ModelLease) -> PublishOutcome {
        let target = &lease.target_id;
        let now = self.now();
        let bytes = S::with(&self.store, |tx| {
            self.compose_bytes(&lease.granted_authority, tx, now)
        });
        let temp = self.write_temp(target, &bytes, false);
        // Both traps still honour the lease's expiry on the local clock.
        let checked_at = self.now();
        if let Err(deadline) = lease.granted_authority.check_deadline(checked_at) {
            S::with(&self.fs, |fs| fs.dir(target).temps.remove(&temp));
            return PublishOutcome::Expired(deadline);
        }
        if self.design == Design::JsonEpochGuard {
            let current_epoch = S::with(&self.fs, |fs| {
                fs.dir(target)
                    .current
                    .as_deref()
                    .and_then(|b| ProjectionDocument::parse(b).ok())
                    .map_or(0, |d| d.fencing_epoch)
            });
            if current_epoch > lease.epoch {
                S::with(&self.fs, |fs| fs.dir(target).temps.remove(&temp));
                return PublishOutcome::Refused;
            }
        }
        self.rename(target, temp, Self::renamer(lease, checked_at));
        self.release(lease);
        PublishOutcome::Published {
            epoch: lease.epoch,
            bytes,
        }
    }

    /// Trap `CommitThenRename`: revalidate and compose in one transaction, commit, then write
    /// and rename outside it.
    fn publish_commit_then_rename(&self, lease: &ModelLease) -> PublishOutcome {
        let credential = lease.credential();
        let target = &lease.target_id;
        let checked = self.transaction(|tx| {
            let now = self.now();
            let Some(record) = tx.leases.get(target).cloned() else {
                return Tx::Rollback(Err(PublishOutcome::NotAdmitted));
            };
            match observe(record, now)
                .map_err(|_| Fenced::NeverGranted)
                .and_then(|o| o.authorize_publish(&credential))
            {
                Ok(authority) => {
                    Tx::Commit(Ok((self.compose_bytes(&authority, tx, now), authority)))
                }
                Err(f) => Tx::Rollback(Err(PublishOutcome::Fenced(f))),
            }
        });
        let (bytes, authority) = match checked {
            Ok(v) => v,
            Err(outcome) => return outcome,
        };
        let temp = self.write_temp(target, &bytes, false);
        let checked_at = self.now();
        if let Err(deadline) = authority.check_deadline(checked_at) {
            S::with(&self.fs, |fs| fs.dir(target).temps.remove(&temp));
            self.release(lease);
            return PublishOutcome::Expired(deadline);
        }
        self.rename(target, temp, Self::renamer(lease, checked_at));
        self.release(lease);
        PublishOutcome::Published {
            epoch: lease.epoch,
            bytes,
        }
    }
}
