//! The projection store's machines for Node as one class, [`NativeStore`]: made once per JS
//! `ProjectionStore` with the store's configuration (checked there, `INVALID_CONFIG`), its
//! methods run the core's machines on the host's connection (the SQL effects through the JS
//! `execute` callback, the file effects here) and answer JS values. Each call may add its
//! clock reading and a publication's consumer binding ([`CallOptions`]).

use super::boundary::{answer, caught};
use super::config::{self, CallOptions, Config, Options, Store};
use super::failure::{invalid, Code, Failure, JsAnswer};
use super::turns::{NativePublication, Start};
use super::{
    applicant, batch, batch_answer, fenced_json, from_js, held_json, js_int, parse_target,
    publish_now_answer, publish_with, read_document, refused, unused, ChannelRow, Execute,
    LeaseRow, Run,
};
use napi::bindgen_prelude::Either;
use napi::Env;
use napi_derive::napi;
use serde_json::{json, Value};
use solewriter_core::projection::channel::{ChannelName, ProducerId, Submission};
use solewriter_core::projection::lease::{observe, Credential, Observed};
use solewriter_core::projection::machine::acquire::{Acquire, AcquireReport, Applicant};
use solewriter_core::projection::machine::publish_many::{PublishMany, TargetEnd};
use solewriter_core::projection::machine::publish_now::PublishNow;
use solewriter_core::projection::machine::release::{EndOutcome, Release, ReleaseOutcome};
use solewriter_core::projection::target::TargetId;
use solewriter_core::projection::watermark::{self, SubmissionPlan, Watermark};
use solewriter_core::time::Millis;
use solewriter_core::token::HolderToken;
use std::sync::Arc;

/// The machines of one store.
#[napi]
pub struct NativeStore {
    store: Arc<Store>,
}

#[napi]
impl NativeStore {
    /// The store of `options`, checked once: `INVALID_CONFIG` names the first field that is
    /// wrong (every call uses this configuration, so one accepted here is never refused later).
    #[napi(constructor)]
    pub fn new(env: Env, options: Options) -> napi::Result<Self> {
        caught(|| Store::parse(&options))
            .map(|store| NativeStore {
                store: Arc::new(store),
            })
            .map_err(|failure| failure.into_js(&env))
    }

    /// The published document of `target` under this store's root, validated in its profile:
    /// `{"document": {...}}`.
    #[napi]
    pub fn read_projection(&self, target: String) -> JsAnswer {
        answer(|| read_document(&self.store.root, &target, self.store.profile))
    }

    /// An asynchronous publication of a grant (as [`NativeStore::publish`]), driven in turns.
    #[napi]
    pub fn publication(&self, grant: GrantIn, call: Option<CallOptions>) -> NativePublication {
        NativePublication::start(|| {
            let (config, credential) = self.with_grant(&grant, call.as_ref())?;
            Ok((config, Start::Publish(credential)))
        })
    }

    /// An asynchronous one-shot publication (as [`NativeStore::publish_now`]), driven in turns.
    #[napi]
    pub fn publication_now(
        &self,
        target: String,
        holder: String,
        call: Option<CallOptions>,
        token_hex: Option<String>,
    ) -> NativePublication {
        NativePublication::start(|| {
            let (config, target, applicant) =
                self.one_shot(call.as_ref(), &target, &holder, token_hex)?;
            Ok((config, Start::PublishNow(target, applicant)))
        })
    }

    /// An asynchronous batch of one-shot publications (as [`NativeStore::publish_many_now`]),
    /// driven in turns; a refused batch is answered at its first turn.
    #[napi]
    pub fn publication_many_now(
        &self,
        targets: Vec<String>,
        holder: String,
        call: Option<CallOptions>,
    ) -> NativePublication {
        NativePublication::start(|| {
            let config = config::publication(&self.store, call.as_ref())?;
            let (caller, applicants) = batch(&config, &targets, &holder)?;
            Ok((config, Start::PublishMany(caller, applicants)))
        })
    }

    /// Acquires the lease of `target` for `holder`: `{"granted": {...}}` or `{"held": {...}}`.
    #[napi]
    pub fn acquire(
        &self,
        target: String,
        holder: String,
        execute: Execute<'_>,
        call: Option<CallOptions>,
        token_hex: Option<String>,
    ) -> JsAnswer {
        answer(|| {
            let (config, target, applicant, token) =
                self.applying(config::call, call.as_ref(), &target, &holder, token_hex)?;
            let holder = applicant.holder_instance_digest.clone();
            let outcome = Run::new(&execute, &target, &config).outcome(Acquire::new(applicant))?;
            match outcome {
                AcquireReport::Granted(plan) => Ok(json!({"granted": {
                    "targetId": plan.target_id.as_str(),
                    "epoch": plan.epoch,
                    "token": token.to_hex(),
                    "holder": holder.as_str(),
                    "acquiredAt": plan.grant.acquired_at.0,
                    "expiresAt": plan.grant.expires_at.0,
                }})),
                AcquireReport::Held(held) => Ok(held_json(&held)),
            }
        })
    }

    /// Publishes `current.json` with a grant and releases it: `{"published": {...}}`.
    #[napi]
    pub fn publish(
        &self,
        grant: GrantIn,
        execute: Execute<'_>,
        call: Option<CallOptions>,
    ) -> JsAnswer {
        answer(|| {
            let (config, credential) = self.with_grant(&grant, call.as_ref())?;
            publish_with(&config, &execute, credential)
        })
    }

    /// Grant, publish and release in one envelope: `{"published": {...}}` or `{"held": {...}}`.
    #[napi]
    pub fn publish_now(
        &self,
        target: String,
        holder: String,
        execute: Execute<'_>,
        call: Option<CallOptions>,
        token_hex: Option<String>,
    ) -> JsAnswer {
        answer(|| {
            let (config, target, applicant) =
                self.one_shot(call.as_ref(), &target, &holder, token_hex)?;
            let machine = PublishNow::new(applicant, config.composition());
            let end = Run::new(&execute, &target, &config).run(machine)?;
            publish_now_answer(&config, &target, end).answer(&config, &execute)
        })
    }

    /// Grant, publish and release each of `targets` as [`NativeStore::publish_now`] does, all
    /// in ONE write transaction (the core's `PublishMany`: the targets' locks in the order of
    /// their ids, one commit for the batch, each target's body under a savepoint of its own,
    /// a takeover's publication in an envelope of its own after it): `{"results": [...]}`, one
    /// answer per target in the order given ([`batch_answer`]). Refused (`INVALID_INPUT`)
    /// before anything is touched: no target, a target given twice, a target id or the holder
    /// that is not one.
    #[napi]
    pub fn publish_many_now(
        &self,
        targets: Vec<String>,
        holder: String,
        execute: Execute<'_>,
        call: Option<CallOptions>,
    ) -> JsAnswer {
        answer(|| {
            let config = config::publication(&self.store, call.as_ref())?;
            let (caller, applicants) = batch(&config, &targets, &holder)?;
            let machine = PublishMany::new(applicants, config.composition(), Failure::clone)
                .map_err(refused)?;
            let order = machine.targets().to_vec();
            let ends = Run::many(&execute, &order, &config).run_many(machine)?;
            let ends = ends
                .into_iter()
                .map(|TargetEnd { target_id, end }| {
                    let end = publish_now_answer(&config, &target_id, end);
                    Some(end.answer(&config, &execute))
                })
                .collect();
            batch_answer(&caller, &order, ends)
        })
    }

    /// The conditional release of a grant: `{"released": true}` or `{"notHolder": {reason}}`.
    #[napi]
    pub fn release(
        &self,
        grant: GrantIn,
        execute: Execute<'_>,
        call: Option<CallOptions>,
    ) -> JsAnswer {
        answer(|| {
            let config = config::call(&self.store, call.as_ref())?;
            let credential = credential(&grant)?;
            let target = credential.target_id.clone();
            let outcome = Run::new(&execute, &target, &config).outcome(Release::new(credential))?;
            match outcome {
                ReleaseOutcome::Released => Ok(json!({"released": true})),
                ReleaseOutcome::NotHolder(fenced) => Ok(json!({"notHolder": fenced_json(fenced)})),
            }
        })
    }

    /// An operator's end of the current grant of `target`, whoever holds it (the core's
    /// `Release::end()` machine, as `ProjectionStore::end_lease` runs it): `{"ended": {epoch,
    /// holder, acquiredAt, expiresAt}}` (that grant is released: its holder is fenced) or
    /// `{"nothingHeld": {epoch, why}}` (`why`: `unheld` or `released`: nothing written; `expired`,
    /// with `"closed": true`: that grant was marked released, so a clock set back cannot revive it).
    #[napi]
    pub fn end_lease(
        &self,
        target: String,
        execute: Execute<'_>,
        call: Option<CallOptions>,
    ) -> JsAnswer {
        answer(|| {
            let config = config::call(&self.store, call.as_ref())?;
            let target = parse_target(&target)?;
            let outcome = Run::new(&execute, &target, &config).outcome(Release::end())?;
            match outcome {
                EndOutcome::Ended(plan) => Ok(json!({"ended": {
                    "epoch": plan.release.epoch,
                    "holder": plan.grant.holder_instance_digest.as_str(),
                    "acquiredAt": plan.grant.acquired_at.0,
                    "expiresAt": plan.grant.expires_at.0,
                }})),
                // No live grant: an expired one was marked released (so a clock set back cannot
                // revive it), an unheld or released row was left as it is.
                EndOutcome::Closed(plan) => Ok(
                    json!({"nothingHeld": {"epoch": plan.release.epoch, "why": "expired", "closed": true}}),
                ),
                EndOutcome::NothingHeld { epoch, why } => {
                    Ok(json!({"nothingHeld": {"epoch": epoch, "why": why.name()}}))
                }
            }
        })
    }

    /// Decides a submission (`watermark::decide_submission`) from the rows the caller read
    /// inside its write transaction: `{"plan": "insert"|"advance"|"replay"|"degrade", "row":
    /// {...}}` (the row to upsert, absent for a replay) or a `REJECTED` error.
    #[napi]
    pub fn decide_submission(
        &self,
        producer: String,
        admitted: bool,
        existing: Option<ChannelRow>,
        submission: SubmissionIn,
        call: Option<CallOptions>,
    ) -> JsAnswer {
        answer(|| {
            let config = config::call(&self.store, call.as_ref())?;
            let producer =
                ProducerId::parse(&producer).map_err(|e| invalid(format!("producer: {e}")))?;
            let existing = existing.map(|row| row.columns().decode()).transpose()?;
            let submission = Submission {
                target_id: parse_target(&submission.target_id)?,
                channel: ChannelName::parse(&submission.channel)
                    .map_err(|e| invalid(format!("channel: {e}")))?,
                source_watermark: match submission.source_watermark {
                    Either::A(n) => Watermark::Integer(from_js(n, "sourceWatermark")?),
                    Either::B(t) => Watermark::Text(t),
                },
                envelope_json: submission.envelope_json,
                captured_at: Millis(from_js(submission.captured_at, "capturedAt")?),
                expires_at: Millis(from_js(submission.expires_at, "expiresAt")?),
            };
            let plan = watermark::decide_submission(
                config.profile,
                &config.registry,
                &producer,
                admitted,
                existing.as_ref(),
                &submission,
                config.now(),
            )
            .map_err(rejection_failure)?;
            let (name, record) = match &plan {
                SubmissionPlan::Insert(record) => ("insert", Some(record)),
                SubmissionPlan::Advance(record) => ("advance", Some(record)),
                SubmissionPlan::Replay => ("replay", None),
                SubmissionPlan::Degrade { record } => ("degrade", Some(record)),
            };
            let row = match record {
                None => Value::Null,
                Some(r) => json!({
                    "target_id": r.target_id.as_str(),
                    "channel": r.channel.as_str(),
                    "source_watermark": match &r.source_watermark {
                        Watermark::Integer(n) => json!(js_int(*n)?),
                        Watermark::Text(t) => json!(t),
                    },
                    "envelope_json": r.envelope_json,
                    "captured_at": js_int(r.captured_at.0)?,
                    "expires_at": js_int(r.expires_at.0)?,
                    "updated_at": js_int(r.updated_at.0)?,
                    "degraded_reason": r.degraded_reason.map(|d| d.as_str()),
                }),
            };
            Ok(json!({"plan": name, "row": row}))
        })
    }

    /// The lease rows and channel rows the caller read, decoded strictly and the leases observed
    /// at the broker clock: `{"leases": [{targetId, epoch, state, holder, acquiredAt, expiresAt}],
    /// "channels": [{targetId, channel, sourceWatermark, updatedAt, degradedReason}]}`, `state`
    /// being `unheld`, `held`, `expired` or `released`. A row solewriter could not have written
    /// is an error (`CORRUPT_ROW`, `INCONSISTENT_LEASE`), never a guess.
    #[napi]
    pub fn inspect(
        &self,
        leases: Vec<LeaseRow>,
        channels: Vec<ChannelRow>,
        call: Option<CallOptions>,
    ) -> JsAnswer {
        answer(|| {
            let config = config::call(&self.store, call.as_ref())?;
            let now = config.now();
            let leases = leases
                .into_iter()
                .map(|row| {
                    let record = row.columns().decode()?;
                    let grant = record.state.grant().cloned();
                    let state = match observe(record.clone(), now)
                        .map_err(|e| Failure::new(Code::InconsistentLease, e))?
                    {
                        Observed::Unheld(_) => "unheld",
                        Observed::Held(_) => "held",
                        Observed::Expired(_) => "expired",
                        Observed::Released(_) => "released",
                    };
                    Ok(json!({
                        "targetId": record.target_id.as_str(),
                        "epoch": record.fencing_epoch,
                        "state": state,
                        "holder": grant.as_ref().map(|g| g.holder_instance_digest.as_str().to_owned()),
                        "acquiredAt": grant.as_ref().map(|g| g.acquired_at.0),
                        "expiresAt": grant.as_ref().map(|g| g.expires_at.0),
                    }))
                })
                .collect::<Result<Vec<_>, Failure>>()?;
            let channels = channels
                .into_iter()
                .map(|row| {
                    let c = row.columns().decode()?;
                    Ok(json!({
                        "targetId": c.target_id.as_str(),
                        "channel": c.channel.as_str(),
                        "sourceWatermark": c.source_watermark,
                        "updatedAt": c.updated_at.0,
                        "degradedReason": c.degraded_reason.map(|d| d.as_str()),
                    }))
                })
                .collect::<Result<Vec<_>, Failure>>()?;
            Ok(json!({"leases": leases, "channels": channels}))
        })
    }
}

impl NativeStore {
    /// What a call that applies for the lease of `target` as `holder` starts from: its
    /// configuration (`config_of`: [`config::call`], or [`config::publication`] for a
    /// publication), the target, and the applicant with its token ([`applicant`]).
    fn applying(
        &self,
        config_of: fn(&Arc<Store>, Option<&CallOptions>) -> Result<Config, Failure>,
        call: Option<&CallOptions>,
        target: &str,
        holder: &str,
        token_hex: Option<String>,
    ) -> Result<(Config, TargetId, Applicant, HolderToken), Failure> {
        let config = config_of(&self.store, call)?;
        let target = parse_target(target)?;
        let (applicant, token) = applicant(&config, holder, token_hex)?;
        Ok((config, target, applicant, token))
    }

    /// What a one-shot publication starts from: [`NativeStore::applying`] for a publication
    /// (its token is not answered: its grant ends within the call).
    fn one_shot(
        &self,
        call: Option<&CallOptions>,
        target: &str,
        holder: &str,
        token_hex: Option<String>,
    ) -> Result<(Config, TargetId, Applicant), Failure> {
        let (config, target, applicant, _) =
            self.applying(config::publication, call, target, holder, token_hex)?;
        Ok((config, target, applicant))
    }

    /// What a publication with `grant` starts from: its configuration and the grant's
    /// credential; a failure of either leaves the grant unused ([`unused`]).
    fn with_grant(
        &self,
        grant: &GrantIn,
        call: Option<&CallOptions>,
    ) -> Result<(Config, Credential), Failure> {
        let config = config::publication(&self.store, call).map_err(unused)?;
        let credential = credential(grant).map_err(unused)?;
        Ok((config, credential))
    }
}

/// A grant as the JS `Grant` presents it to `publish` or `release`: its target, its epoch and
/// its holder's raw token (the secret `acquire` drew). Never the stored hash: the addon hashes
/// the token here, and the core compares that hash with the row's in constant time.
#[napi(object)]
pub struct GrantIn {
    pub target_id: String,
    pub epoch: f64,
    /// The raw holder token, 64 hex characters.
    pub token: String,
}

fn credential(grant: &GrantIn) -> Result<Credential, Failure> {
    Ok(Credential {
        target_id: parse_target(&grant.target_id)?,
        epoch: from_js(grant.epoch, "epoch")?,
        token_hash: HolderToken::from_hex(&grant.token)
            .ok_or_else(|| invalid("token must be 64 hex characters"))?
            .hash(),
    })
}

/// A producer's submission, as the JS caller gives it.
#[napi(object)]
pub struct SubmissionIn {
    pub target_id: String,
    pub channel: String,
    /// A number (channels of kind `integer`) or a string (the other kinds).
    pub source_watermark: Either<f64, String>,
    pub envelope_json: String,
    pub captured_at: f64,
    pub expires_at: f64,
}

/// A rejected submission as a `REJECTED` error whose `rejection` field names its kind (a
/// regression also carries the `submitted` and `stored` watermarks, as text), so a caller maps
/// it without reading the message.
///
/// A stored row of another target or channel than the submission's (`ForeignRow`) is no
/// rejection of the producer's: the caller read one row and handed in another submission, a bug
/// of the JS layer that reads it (`INTERNAL`; it copies the submission once, so both use the
/// same values). Nothing is written.
fn rejection_failure(rejected: watermark::SubmissionRejected) -> Failure {
    use watermark::SubmissionRejected as R;
    if let R::ForeignRow { .. } = rejected {
        return Failure::new(
            Code::Internal,
            format!("submission refused ({rejected}); nothing was written"),
        );
    }
    let mut detail = json!({"rejection": match &rejected {
        R::UnknownChannel(_) => "unknown-channel",
        R::NotChannelOwner { .. } => "not-channel-owner",
        R::TargetNotAdmitted(_) => "target-not-admitted",
        R::Oversized { .. } => "oversized",
        R::SchemaInvalid(_) => "schema-invalid",
        R::InvalidRange(_) => "invalid-range",
        R::InvalidWatermark(_) => "invalid-watermark",
        R::StoredWatermarkOfAnotherKind(_) => "stored-watermark-of-another-kind",
        R::Regressed { .. } => "regressed",
        // A kind a later core adds: REJECTED all the same, named as such.
        _ => "other",
    }});
    if let (R::Regressed { submitted, stored }, Value::Object(fields)) = (&rejected, &mut detail) {
        fields.insert("submitted".into(), json!(submitted.text()));
        fields.insert("stored".into(), json!(stored.text()));
    }
    Failure {
        detail,
        ..Failure::new(
            Code::Rejected,
            format!("submission rejected ({rejected}); nothing was written"),
        )
    }
}
