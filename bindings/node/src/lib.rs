//! The Node addon of solewriter: it runs the core's lease machines (`solewriter_core::projection::machine`)
//! and executes their file effects itself (through `solewriter_files::steps::FileSteps`, the
//! same code the SQLite adapter runs), the clock and the tokens too — and hands every SQL
//! effect to a JS function of the host, which runs it on the host's own SQLite connection
//! (better-sqlite3). So a Node process keeps ONE SQLite: this crate links none (no rusqlite,
//! no libsqlite3-sys in its dependency tree).
//!
//! Each machine runs to its end inside one synchronous call (the asynchronous publication runs
//! the same machines in turns: [`turns`]; the project lock is [`project_lock`]): the JS
//! `execute(effect)` callback
//! is called for each SQL effect (`readCommittedLease`, `begin`, `readLease`, `readChannels`,
//! `writeGrant`, `writeRelease`, `commit`, `rollback`; and `reached`, a publication step for
//! the host's probe) and answers with a [`SqlAnswer`]. The
//! transaction never spans an event-loop turn. Outcomes come back as JS values, failures as
//! thrown `Error`s with a `code` ([`failure`]).

use napi::bindgen_prelude::{Buffer, Either, Function, Uint8Array};
use napi_derive::napi;
use serde_json::{json, Value};
use solewriter_core::config::LeaseTtl;
use solewriter_core::names::InstanceDigest;
use solewriter_core::projection::channel::{ChannelRegistry, ChannelSpec, ProducerId, Submission};
use solewriter_core::projection::columns::{ChannelColumns, LeaseColumns, WatermarkColumn};
use solewriter_core::projection::composition::Composition;
use solewriter_core::projection::lease::{
    observe, Credential, Fenced, HeldBy, LeaseRecord, Observed,
};
use solewriter_core::projection::machine::acquire::{Acquire, Acquired, Applicant};
use solewriter_core::projection::machine::outcome::{self, Published, Unpublished};
use solewriter_core::projection::machine::publish::Publish;
use solewriter_core::projection::machine::publish_now::{PublishNow, PublishedNow};
use solewriter_core::projection::machine::release::{EndOutcome, Release, ReleaseOutcome};
use solewriter_core::projection::machine::{
    run, Answer, Effect, Machine, ProtocolError, StoreEffect,
};
use solewriter_core::projection::profile::{ConsumerBinding, Profile};
use solewriter_core::projection::publication::PublishStep;
use solewriter_core::projection::target::{TargetId, TargetTuple};
use solewriter_core::projection::watermark::{self, SubmissionPlan, Watermark};
use solewriter_core::projection::DocumentError;
use solewriter_core::time::Millis;
use solewriter_core::token::HolderToken;
use solewriter_files::atomic_file::RealFs;
use solewriter_files::clock::{Clock, SystemClock};
use solewriter_files::runtime::RuntimeRoot;
use solewriter_files::steps::{DurableDirs, FileSteps};
use std::sync::LazyLock;
use std::time::Duration;

pub mod adoption;
mod boundary;
pub mod failure;
pub mod ledger;
pub mod project_lock;
#[cfg(feature = "test-seams")]
mod seams;
pub mod turns;
pub mod write_guard;

use boundary::answer;
use failure::{invalid, Code, Failure, JsAnswer, Outcome};

/// Directories whose creation this process has seen fsynced in their parent.
static DURABLE: LazyLock<DurableDirs> = LazyLock::new(DurableDirs::default);

/// The largest integer a JS number holds exactly (2^53 - 1).
const MAX_SAFE: u64 = (1 << 53) - 1;

/// The longest lease TTL a Node store accepts (2^52 ms, about 142,000 years): with any clock
/// reading below 2^52 ms, a grant's `acquired_at + ttl` stays below 2^53, a number JS holds
/// exactly (a larger TTL would be accepted and then make every grant unreadable from JS).
const MAX_LEASE_TTL_MS: u64 = 1 << 52;

/// A value for a JS number, refused beyond 2^53 - 1 (it would be rounded).
fn js_int(value: u64) -> Result<i64, Failure> {
    if value > MAX_SAFE {
        return Err(Failure::new(
            Code::CorruptRow,
            format!("integer {value} exceeds what a JS number holds exactly"),
        ));
    }
    Ok(value as i64)
}

/// A JS number as an unsigned integer, refused when negative, fractional or unsafe.
fn from_js(value: f64, what: &str) -> Result<u64, Failure> {
    if value.fract() != 0.0 || !(0.0..=MAX_SAFE as f64).contains(&value) {
        return Err(invalid(format!(
            "{what} must be a non-negative safe integer"
        )));
    }
    Ok(value as u64)
}

/// The configuration every machine call takes. Every field is optional here only so that a
/// missing one is refused by [`Config::parse`] with `INVALID_CONFIG` naming it (there is no
/// default for any of them), never by the binding layer with a code of its own.
#[napi(object)]
pub struct Options {
    /// The channel registry: a JSON array of `{name, owner, envelopeSchema, maxEnvelopeBytes}`.
    pub channels_json: Option<String>,
    /// The lease TTL in ms (required, at least 1).
    pub lease_ttl_ms: Option<f64>,
    /// How long the target lock is waited for, in ms (required, at least 1).
    pub busy_timeout_ms: Option<f64>,
    /// The host's runtime root (required; it must exist when a publication runs).
    pub runtime_root: Option<String>,
    /// A fixed broker clock for this call (tests); the system clock when absent.
    pub clock_ms: Option<f64>,
    /// The store's profile: `solewriter.hook-projection.v2` (when absent) or
    /// `live-lane-awareness-projection.v1` (the Memory Core's).
    pub profile: Option<String>,
    /// A publication's consumer binding, as JSON (Memory Core profile: required to publish).
    pub consumer_binding_json: Option<String>,
}

struct Config {
    registry: ChannelRegistry,
    profile: Profile,
    binding: Option<ConsumerBinding>,
    ttl: LeaseTtl,
    busy_timeout: Duration,
    root: RuntimeRoot,
    clock: Option<Millis>,
}

/// A configuration that is wrong: `INVALID_CONFIG`, naming the field.
fn bad_config(field: &str, what: impl std::fmt::Display) -> Failure {
    Failure::new(
        Code::InvalidConfig,
        format!("configuration `{field}`: {what}; nothing was done"),
    )
}

/// A required millisecond count of the configuration: present, a safe integer, at least 1.
fn config_ms(value: Option<f64>, field: &str) -> Result<u64, Failure> {
    let value = value.ok_or_else(|| bad_config(field, "missing (there is no default)"))?;
    let ms = from_js(value, field).map_err(|e| bad_config(field, e.message))?;
    if ms == 0 {
        return Err(bad_config(field, "must be at least 1 ms"));
    }
    Ok(ms)
}

impl Config {
    fn parse(options: &Options) -> Result<Self, Failure> {
        let channels = options
            .channels_json
            .as_deref()
            .ok_or_else(|| bad_config("channels", "missing (an array, maybe empty)"))?;
        let specs: Vec<ChannelSpec> =
            serde_json::from_str(channels).map_err(|e| bad_config("channels", e))?;
        let registry = ChannelRegistry::new(specs).map_err(|e| bad_config("channels", e))?;
        let ttl_ms = config_ms(options.lease_ttl_ms, "leaseTtlMs")?;
        if ttl_ms > MAX_LEASE_TTL_MS {
            return Err(bad_config(
                "leaseTtlMs",
                format!("must be at most 2^52 ms ({MAX_LEASE_TTL_MS}), so that a grant's expiry stays a number JS holds exactly"),
            ));
        }
        let ttl = LeaseTtl::from_millis(Some(ttl_ms)).map_err(|e| bad_config("leaseTtlMs", e))?;
        let busy_timeout =
            Duration::from_millis(config_ms(options.busy_timeout_ms, "busyTimeoutMs")?);
        let runtime_root = match options.runtime_root.as_deref() {
            None | Some("") => return Err(bad_config("runtimeRoot", "missing")),
            Some(root) => root,
        };
        let clock = match options.clock_ms {
            Some(ms) => Some(Millis(from_js(ms, "clock")?)),
            None => None,
        };
        let profile = match options.profile.as_deref() {
            None => Profile::Generic,
            Some(name) => Profile::parse(name).map_err(|e| bad_config("profile", e))?,
        };
        registry
            .check_profile(profile)
            .map_err(|e| bad_config("channels", e))?;
        let binding = options
            .consumer_binding_json
            .as_deref()
            .map(ConsumerBinding::from_json)
            .transpose()
            .map_err(|e| invalid(format!("consumerBinding: {e}; nothing was written")))?;
        Ok(Config {
            registry,
            profile,
            binding,
            ttl,
            busy_timeout,
            root: RuntimeRoot::new(runtime_root),
            clock,
        })
    }

    fn now(&self) -> Millis {
        now(self.clock)
    }

    /// [`Config::parse`] for a publication: its consumer binding must fit the profile
    /// (`INVALID_INPUT` otherwise, before anything is done), so [`Config::composition`] is the
    /// profile's.
    fn parse_publication(options: &Options) -> Result<Self, Failure> {
        let config = Self::parse(options)?;
        Composition::for_store(config.profile, &config.registry, config.binding.as_ref())
            .map_err(|e| invalid(format!("{e}; nothing was written")))?;
        Ok(config)
    }

    /// What a publication composes with (checked by [`Config::parse_publication`]).
    fn composition(&self) -> Composition<'_> {
        match &self.binding {
            Some(binding) => Composition::memory_core(&self.registry, binding),
            None => (&self.registry).into(),
        }
    }
}

/// The fixed `clock` reading, or the system clock.
fn now(clock: Option<Millis>) -> Millis {
    clock.unwrap_or_else(|| SystemClock.now())
}

/// A SQL effect for the host's executor. `kind` names it; the other fields are those the
/// effect's statement binds (see the JS executor).
#[napi(object)]
pub struct SqlEffect {
    /// `readCommittedLease`, `begin`, `readLease`, `readChannels`, `writeGrant`,
    /// `writeRelease`, `commit` or `rollback`.
    pub kind: String,
    /// The target.
    pub target_id: String,
    /// The epoch to write (`writeGrant`) or to match (`writeRelease`).
    pub epoch: Option<i64>,
    /// The epoch the grant is written over (`writeGrant`).
    pub prior_epoch: Option<i64>,
    /// The token hash to write or to match (32 bytes).
    pub token_hash: Option<Buffer>,
    /// The holder instance digest (`writeGrant`).
    pub holder: Option<String>,
    /// `acquired_at` of the grant (`writeGrant`).
    pub acquired_at: Option<i64>,
    /// `expires_at` of the grant (`writeGrant`).
    pub expires_at: Option<i64>,
    /// The publication step reached (`reached`, not SQL: for a probe of the host's).
    pub step: Option<String>,
}

impl SqlEffect {
    fn bare(kind: &str, target: &TargetId) -> Self {
        SqlEffect {
            kind: kind.to_owned(),
            target_id: target.as_str().to_owned(),
            epoch: None,
            prior_epoch: None,
            token_hash: None,
            holder: None,
            acquired_at: None,
            expires_at: None,
            step: None,
        }
    }
}

/// A `HookProjectionLeases` row as better-sqlite3 returns it.
#[napi(object, use_nullable = true)]
pub struct LeaseRow {
    #[napi(js_name = "target_id")]
    pub target_id: String,
    #[napi(js_name = "fencing_epoch")]
    pub fencing_epoch: i64,
    #[napi(js_name = "holder_token_hash")]
    pub holder_token_hash: Option<Uint8Array>,
    #[napi(js_name = "holder_instance_digest")]
    pub holder_instance_digest: Option<String>,
    #[napi(js_name = "acquired_at")]
    pub acquired_at: Option<i64>,
    #[napi(js_name = "expires_at")]
    pub expires_at: Option<i64>,
    pub state: String,
}

/// A `HookProjectionChannels` row as better-sqlite3 returns it.
#[napi(object, use_nullable = true)]
pub struct ChannelRow {
    #[napi(js_name = "target_id")]
    pub target_id: String,
    pub channel: String,
    #[napi(js_name = "source_watermark")]
    pub source_watermark: Either<i64, String>,
    #[napi(js_name = "envelope_json")]
    pub envelope_json: String,
    #[napi(js_name = "captured_at")]
    pub captured_at: i64,
    #[napi(js_name = "expires_at")]
    pub expires_at: i64,
    #[napi(js_name = "updated_at")]
    pub updated_at: i64,
    #[napi(js_name = "degraded_reason")]
    pub degraded_reason: Option<String>,
}

impl LeaseRow {
    pub(crate) fn columns(self) -> LeaseColumns {
        LeaseColumns {
            target_id: self.target_id,
            fencing_epoch: self.fencing_epoch,
            holder_token_hash: self.holder_token_hash.map(|b| b.to_vec()),
            holder_instance_digest: self.holder_instance_digest,
            acquired_at: self.acquired_at,
            expires_at: self.expires_at,
            state: self.state,
        }
    }
}

impl ChannelRow {
    pub(crate) fn columns(self) -> ChannelColumns {
        ChannelColumns {
            target_id: self.target_id,
            channel: self.channel,
            source_watermark: match self.source_watermark {
                Either::A(n) => WatermarkColumn::Integer(n),
                Either::B(t) => WatermarkColumn::Text(t),
            },
            envelope_json: self.envelope_json,
            captured_at: self.captured_at,
            expires_at: self.expires_at,
            updated_at: self.updated_at,
            degraded_reason: self.degraded_reason,
        }
    }
}

/// A failed SQL effect: `code` is better-sqlite3's (`SQLITE_BUSY`, ...).
#[napi(object)]
pub struct SqlError {
    pub code: String,
    pub message: String,
}

/// The host's answer to a SQL effect: `lease` for the lease reads (absent: no row),
/// `channels` for `readChannels`, `written` for the conditional writes, `error` when the
/// statement failed.
#[napi(object)]
pub struct SqlAnswer {
    pub lease: Option<LeaseRow>,
    pub channels: Option<Vec<ChannelRow>>,
    pub written: Option<bool>,
    pub error: Option<SqlError>,
    /// To `reached`, outside the transaction of an asynchronous publication: pause it there
    /// (the host awaits what its probe returned before the next turn).
    pub pause: Option<bool>,
}

/// The host's executor of SQL effects.
type Execute<'f> = Function<'f, SqlEffect, Option<SqlAnswer>>;

/// The host's side of a machine run: its SQL executor, the target and the configuration
/// (the clock). It executes every effect that is not a file effect.
struct Host<'a, 'f> {
    execute: &'a Execute<'f>,
    target: &'a TargetId,
    /// The broker clock's fixed reading (tests); the system clock when `None`.
    clock: Option<Millis>,
}

/// One run of a machine: the host's side and the file steps.
struct Run<'a, 'f> {
    host: Host<'a, 'f>,
    files: FileSteps<'a>,
}

impl<'a, 'f> Run<'a, 'f> {
    fn new(execute: &'a Execute<'f>, target: &'a TargetId, config: &'a Config) -> Self {
        Run {
            host: Host {
                execute,
                target,
                clock: config.clock,
            },
            files: file_steps(config, target),
        }
    }

    /// Runs `machine` to its end: its result.
    fn run<M: Machine<Failure>>(&mut self, machine: M) -> Result<M::Output, Failure> {
        run(machine, |effect| match effect {
            Effect::File(effect) => self.files.execute(effect),
            effect => self.host.step(effect),
        })
        .map_err(internal)
    }
}

/// The file steps of a run on `target`: the system's file system, this process's durable
/// directories, the configured busy timeout.
fn file_steps<'a>(config: &'a Config, target: &'a TargetId) -> FileSteps<'a> {
    FileSteps::new(&config.root, target, &RealFs, &DURABLE, config.busy_timeout)
}

/// The file steps of the release of a publication's unused grant: the target lock is tried
/// once, not waited for — the publication already waited its busy timeout, and a call must not
/// block twice as long; if the lock is still taken, the grant ends at its expiry.
fn release_steps<'a>(config: &'a Config, target: &'a TargetId) -> FileSteps<'a> {
    FileSteps::new(&config.root, target, &RealFs, &DURABLE, Duration::ZERO)
}

impl Host<'_, '_> {
    /// Hands `effect` to the host; its answer, or the failure it reported.
    fn sql(&self, effect: SqlEffect) -> Result<SqlAnswer, Failure> {
        let kind = effect.kind.clone();
        let answer = self
            .execute
            .call(effect)
            .map_err(|e| {
                Failure::new(
                    Code::Host,
                    format!("the SQL executor threw on `{kind}`: {e}"),
                )
            })?
            .ok_or_else(|| {
                Failure::new(
                    Code::Host,
                    format!("the SQL executor gave no answer to `{kind}`"),
                )
            })?;
        match answer.error {
            Some(SqlError { code, message }) if code.starts_with("SQLITE_BUSY") => {
                Err(Failure::new(
                    Code::Busy,
                    format!("store is busy ({message}); nothing was written"),
                ))
            }
            Some(SqlError { code, message }) if code == "IN_TRANSACTION" => Err(Failure::new(
                Code::InTransaction,
                format!("{message}; solewriter opens its own, so nothing was written"),
            )),
            Some(SqlError { code, message }) => Err(Failure::new(
                Code::Sqlite,
                format!(
                    "store operation failed ({code}: {message}); the transaction was rolled back"
                ),
            )),
            None => Ok(answer),
        }
    }

    fn lease(&self, kind: &str) -> Result<Option<LeaseRecord>, Failure> {
        self.sql(SqlEffect::bare(kind, self.target)).and_then(|a| {
            a.lease
                .map(|row| row.columns().decode().map_err(Failure::from))
                .transpose()
        })
    }

    fn written(&self, effect: SqlEffect) -> Result<bool, Failure> {
        let kind = effect.kind.clone();
        self.sql(effect).and_then(|a| {
            a.written.ok_or_else(|| {
                Failure::new(Code::Host, format!("`{kind}` answered without `written`"))
            })
        })
    }

    fn done(&self, kind: &str) -> Result<(), Failure> {
        self.sql(SqlEffect::bare(kind, self.target)).map(drop)
    }

    /// Tells the host's probe that the publication reached `step`: whether the host asks to
    /// pause there (its answer changes nothing else: the machine goes on).
    fn reached(&self, step: PublishStep) -> bool {
        self.sql(SqlEffect {
            step: Some(step.name().to_owned()),
            ..SqlEffect::bare("reached", self.target)
        })
        .is_ok_and(|answer| answer.pause == Some(true))
    }

    /// Executes `effect`, which is not a file effect: the store's, the clock's, a reached
    /// point.
    fn step(&self, effect: Effect<'_, Failure>) -> Answer<Failure> {
        let effect = match effect {
            Effect::Store(effect) => effect,
            Effect::Clock(ask) => return ask.answer(now(self.clock)),
            // A named point of the publication, for the host's probe (tests: stall, crash). Its
            // answer changes nothing: the machine goes on.
            Effect::Reached(step, ask) => {
                self.reached(step);
                return ask.answer(());
            }
            Effect::File(effect) => {
                let name = effect.name();
                return effect.fail(Failure::new(
                    Code::Internal,
                    format!("the host was handed the file effect `{name}`"),
                ));
            }
        };
        #[cfg(feature = "test-seams")]
        if matches!(effect, StoreEffect::WriteRelease(..)) {
            seams::panic_at("write-release");
        }
        match effect {
            StoreEffect::ReadCommittedLease(ask) => ask.answer(self.lease("readCommittedLease")),
            StoreEffect::Begin(ask) => ask.answer(self.done("begin")),
            StoreEffect::ReadLease(ask) => ask.answer(self.lease("readLease")),
            StoreEffect::ReadChannels(ask) => ask.answer(
                self.sql(SqlEffect::bare("readChannels", self.target))
                    .and_then(|a| {
                        a.channels
                            .ok_or_else(|| {
                                Failure::new(
                                    Code::Host,
                                    "`readChannels` answered without `channels`",
                                )
                            })?
                            .into_iter()
                            .map(|row| row.columns().decode().map_err(Failure::from))
                            .collect::<Result<Vec<_>, _>>()
                    }),
            ),
            StoreEffect::WriteGrant(plan, ask) => {
                let grant = &plan.grant;
                let effect = (|| {
                    Ok(SqlEffect {
                        epoch: Some(js_int(plan.epoch)?),
                        prior_epoch: Some(js_int(plan.prior_epoch)?),
                        token_hash: Some(grant.holder_token_hash.as_bytes().to_vec().into()),
                        holder: Some(grant.holder_instance_digest.as_str().to_owned()),
                        acquired_at: Some(js_int(grant.acquired_at.0)?),
                        expires_at: Some(js_int(grant.expires_at.0)?),
                        ..SqlEffect::bare("writeGrant", &plan.target_id)
                    })
                })();
                ask.answer(effect.and_then(|effect| self.written(effect)))
            }
            StoreEffect::WriteRelease(plan, ask) => {
                ask.answer(js_int(plan.epoch).and_then(|epoch| {
                    self.written(SqlEffect {
                        epoch: Some(epoch),
                        token_hash: Some(plan.token_hash.as_bytes().to_vec().into()),
                        ..SqlEffect::bare("writeRelease", &plan.target_id)
                    })
                }))
            }
            StoreEffect::Commit(ask) => ask.answer(self.done("commit")),
            // The transaction ends either way (the host's executor makes sure of it).
            StoreEffect::Rollback(ask) => {
                let _ = self.done("rollback");
                ask.answer(Ok(()))
            }
        }
    }
}

/// An executor bug the machine refused (instead of panicking): `INTERNAL`.
fn internal(bug: ProtocolError) -> Failure {
    Failure::new(Code::Internal, bug)
}

fn fenced_json(fenced: Fenced) -> Value {
    match fenced {
        Fenced::Superseded { current_epoch } => {
            json!({"reason": "superseded", "currentEpoch": current_epoch})
        }
        Fenced::TokenMismatch => json!({"reason": "token-mismatch"}),
        Fenced::Expired => json!({"reason": "expired"}),
        Fenced::Released => json!({"reason": "released"}),
        Fenced::NeverGranted => json!({"reason": "never-granted"}),
        other => json!({"reason": "other", "detail": other.to_string()}),
    }
}

fn held_json(held: &HeldBy) -> Value {
    json!({"held": {
        "epoch": held.fencing_epoch,
        "holder": held.holder_instance_digest.as_str(),
        "expiresAt": held.expires_at.0,
        "retryAfterMs": held.retry_after_ms,
    }})
}

/// The one mapping of the core's failure of a lease operation (acquisition, publication and
/// release alike) to the binding's coded failure.
fn failure(target: &TargetId, failure: outcome::Failure<Failure>) -> Failure {
    use outcome::Failure as F;
    match failure {
        F::NotAdmitted => not_admitted(target),
        F::Inconsistent(e) => Failure::new(Code::InconsistentLease, e),
        F::EpochExhausted => Failure::new(
            Code::EpochExhausted,
            "fencing epoch exhausted for this target; nothing was written",
        ),
        F::RowChanged => row_changed(),
        F::Fenced(fenced) => {
            let mut failure = Failure::new(
                Code::Fenced,
                format!("publication fenced ({fenced}); current.json was not touched"),
            );
            failure.detail = fenced_json(fenced);
            failure
        }
        F::Document(e) => Failure::new(Code::Document, e),
        F::Expired(passed) => Failure::new(
            Code::LeaseExpired,
            format!("{passed}; current.json was not touched"),
        ),
        F::Effect(e) | F::NotDurable(e) => e,
    }
}

fn not_admitted(target: &TargetId) -> Failure {
    Failure::new(
        Code::NotAdmitted,
        format!("target {target} is not admitted; nothing was written"),
    )
}

fn row_changed() -> Failure {
    Failure::new(
        Code::CorruptRow,
        "store holds a corrupt row (lease row changed under the write lock); nothing was written",
    )
}

/// Where a publication's end leads.
enum Ended {
    /// Its answer.
    Answer(Outcome),
    /// It could not start (this failure): the release of its unused grant runs next.
    ReleaseUnused(Failure, Credential),
}

/// The answer of a publication machine's end (a one-shot's after its grant) — or, when it
/// could not start with a failure after which its unused grant is released
/// ([`releases_unused`]), that failure and the grant: its executor then releases the grant (its
/// target lock tried once, [`release_steps`]) and answers [`not_started`].
fn publish_answer(
    config: &Config,
    target: &TargetId,
    end: Result<Published, Unpublished<Failure>>,
) -> Ended {
    let release_message = |release| failure(target, release).message;
    Ended::Answer(match end {
        Ok(p) => Ok(json!({"published": {
            "targetId": target.as_str(),
            "epoch": p.fencing_epoch,
            "bytes": p.bytes,
            "publishedAt": p.published_at.0,
            "path": config.root.current_path(target),
        }})),
        Err(Unpublished::NotReleased { release, .. }) => Err(Failure::new(
            Code::PublishedNotReleased,
            format!("current.json was replaced, but the lease release did not commit ({}); the lease expires on its own", release_message(release)),
        )),
        Err(Unpublished::NotStarted {
            error, credential, ..
        }) if releases_unused(&error) => return Ended::ReleaseUnused(error, credential),
        Err(Unpublished::NotStarted { error, .. }) => Err(error),
        Err(Unpublished::Failed {
            failure: failed,
            release,
        }) => {
            let failed = failure(target, failed);
            Err(match release {
                None => failed,
                Some(release) => Failure::new(
                    Code::ReleaseFailed,
                    format!(
                        "{} ({}); the conditional release did not commit ({}), so the lease stays held until it expires",
                        failed.message, failed.code, release_message(release)
                    ),
                ),
            })
        }
    })
}

/// Whether a publication that could not start because of `failure` releases its unused grant:
/// after any failure to take the target lock or to begin (`BUSY`, `IO`, ...), as the Rust
/// adapter's dropped lease is released. Not after `IN_TRANSACTION` (the host's own transaction
/// was open: the grant stays usable, and a release must not commit in a later turn behind the
/// caller's back), nor after `HOST` (the host's executor failed: nothing more is asked of it).
fn releases_unused(failure: &Failure) -> bool {
    !matches!(failure.code, Code::InTransaction | Code::Host)
}

/// The answer of a publication that could not start (`failure`), once the conditional release
/// of its unused grant ran (`release`): the rule of the Rust adapter, whose unused lease is
/// released when it is dropped. The failure's code stays; its message says what became of the
/// grant.
fn not_started(
    target: &TargetId,
    failed: Failure,
    release: Result<ReleaseOutcome, outcome::Failure<Failure>>,
) -> Outcome {
    let grant = match release {
        Ok(ReleaseOutcome::Released) => {
            "the unused grant was released (its holder is now fenced `released`)".to_owned()
        }
        Ok(ReleaseOutcome::NotHolder(fenced)) => {
            format!("the grant was no longer held ({fenced}), so nothing was released")
        }
        Err(e) => format!(
            "the release of the unused grant did not commit either ({}), so the grant ends at its expiry",
            failure(target, e).message
        ),
    };
    Err(Failure {
        message: format!("{}; {grant}", failed.message),
        ..failed
    })
}

/// The answer of a one-shot publication machine's end, as [`publish_answer`].
fn publish_now_answer(
    config: &Config,
    target: &TargetId,
    end: Result<PublishedNow, Unpublished<Failure>>,
) -> Ended {
    match end {
        Ok(PublishedNow::Held(held)) => Ended::Answer(Ok(held_json(&held))),
        Ok(PublishedNow::Published { published, .. }) => {
            publish_answer(config, target, Ok(published))
        }
        Err(unpublished) => publish_answer(config, target, Err(unpublished)),
    }
}

/// Releases the unused grant of a publication that could not start (`failed`), its target lock
/// tried once: the answer.
fn release_unused(
    config: &Config,
    execute: &Execute<'_>,
    failed: Failure,
    credential: Credential,
) -> Outcome {
    let target = credential.target_id.clone();
    let mut run = Run::new(execute, &target, config);
    run.files = release_steps(config, &target);
    match run.run(Release::new(credential)) {
        Ok(release) => not_started(&target, failed, release),
        Err(bug) => Err(bug),
    }
}

fn publish_with(config: &Config, execute: &Execute<'_>, credential: Credential) -> Outcome {
    let target = credential.target_id.clone();
    let end =
        Run::new(execute, &target, config).run(Publish::new(credential, config.composition()))?;
    match publish_answer(config, &target, end) {
        Ended::Answer(outcome) => outcome,
        Ended::ReleaseUnused(failed, credential) => {
            release_unused(config, execute, failed, credential)
        }
    }
}

/// The applicant of a one-shot publication: `holder`, with the token `token_hex` (a fresh
/// random one when absent).
fn applicant(
    config: &Config,
    holder: &str,
    token_hex: Option<String>,
) -> Result<Applicant, Failure> {
    Ok(Applicant {
        token_hash: token(token_hex)?.hash(),
        holder_instance_digest: parse_holder(holder)?,
        ttl: config.ttl,
    })
}

fn parse_target(text: &str) -> Result<TargetId, Failure> {
    TargetId::parse(text).map_err(|e| invalid(format!("target id: {e}")))
}

fn parse_holder(text: &str) -> Result<InstanceDigest, Failure> {
    InstanceDigest::parse(text).map_err(|e| invalid(format!("holder: {e}")))
}

/// A fresh holder token from the OS — or, in the test build only (feature `test-seams`), the
/// raw token a test chose (the conformance tests give the reference model the same one). The
/// shipped addon refuses a chosen token: a holder must never pick a guessable secret.
fn token(hex: Option<String>) -> Result<HolderToken, Failure> {
    match hex {
        #[cfg(feature = "test-seams")]
        Some(text) => {
            HolderToken::from_hex(&text).ok_or_else(|| invalid("token must be 64 hex characters"))
        }
        #[cfg(not(feature = "test-seams"))]
        Some(_) => Err(invalid(
            "a chosen holder token is a test seam, refused by this build",
        )),
        None => {
            let mut bytes = [0u8; 32];
            getrandom::fill(&mut bytes).map_err(|e| {
                Failure::new(
                    Code::Random,
                    format!("random source failed ({e}); nothing was written"),
                )
            })?;
            Ok(HolderToken::from_bytes(bytes))
        }
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

/// Checks a store's configuration, as the JS `ProjectionStore` does once at construction:
/// `{}`, or `INVALID_CONFIG` naming the first field that is wrong (the same parse every call
/// runs, so a configuration accepted here is never refused later).
#[napi]
pub fn check_options(options: Options) -> JsAnswer {
    answer(|| Config::parse(&options).map(|_| json!({})))
}

/// The target id of an attested tuple given as JSON (an object with exactly its seven
/// camelCase fields) in a store of `profile` (64 hex digits for the generic profile, when
/// absent; 32 for the Memory Core's).
#[napi]
pub fn target_id(tuple_json: String, profile: Option<String>) -> JsAnswer {
    answer(|| {
        let profile = match profile.as_deref() {
            None => Profile::Generic,
            Some(name) => Profile::parse(name).map_err(|e| invalid(format!("profile: {e}")))?,
        };
        TargetTuple::from_json(&tuple_json)
            .map(|t| json!({"targetId": profile.target_id(&t).as_str()}))
            .map_err(|e| invalid(format!("tuple: {e}")))
    })
}

/// Acquires the lease of `target` for `holder`: `{"granted": {...}}` or `{"held": {...}}`.
#[napi]
pub fn acquire(
    options: Options,
    target: String,
    holder: String,
    execute: Execute<'_>,
    token_hex: Option<String>,
) -> JsAnswer {
    answer(|| {
        let config = Config::parse(&options)?;
        let target = parse_target(&target)?;
        let holder = parse_holder(&holder)?;
        let token = token(token_hex)?;
        let machine = Acquire::new(Applicant {
            token_hash: token.hash(),
            holder_instance_digest: holder.clone(),
            ttl: config.ttl,
        });
        let acquired = Run::new(&execute, &target, &config).run(machine)?;
        match acquired.map_err(|e| failure(&target, e))? {
            Acquired::Granted(plan) => Ok(json!({"granted": {
                "targetId": plan.target_id.as_str(),
                "epoch": plan.epoch,
                "token": token.to_hex(),
                "holder": holder.as_str(),
                "acquiredAt": plan.grant.acquired_at.0,
                "expiresAt": plan.grant.expires_at.0,
            }})),
            Acquired::Held(held) => Ok(held_json(&held)),
        }
    })
}

/// Publishes `current.json` with a grant and releases it: `{"published": {...}}`.
#[napi]
pub fn publish(options: Options, grant: GrantIn, execute: Execute<'_>) -> JsAnswer {
    answer(|| {
        Config::parse_publication(&options)
            .and_then(|config| publish_with(&config, &execute, credential(&grant)?))
    })
}

/// Grant, publish and release in one envelope: `{"published": {...}}` or `{"held": {...}}`.
#[napi]
pub fn publish_now(
    options: Options,
    target: String,
    holder: String,
    execute: Execute<'_>,
    token_hex: Option<String>,
) -> JsAnswer {
    answer(|| {
        let config = Config::parse_publication(&options)?;
        let target = parse_target(&target)?;
        let applicant = applicant(&config, &holder, token_hex)?;
        let machine = PublishNow::new(applicant, config.composition());
        let end = Run::new(&execute, &target, &config).run(machine)?;
        match publish_now_answer(&config, &target, end) {
            Ended::Answer(outcome) => outcome,
            Ended::ReleaseUnused(failed, credential) => {
                release_unused(&config, &execute, failed, credential)
            }
        }
    })
}

/// The conditional release of a grant: `{"released": true}` or `{"notHolder": {reason}}`.
#[napi]
pub fn release(options: Options, grant: GrantIn, execute: Execute<'_>) -> JsAnswer {
    answer(|| {
        let config = Config::parse(&options)?;
        let credential = credential(&grant)?;
        let target = credential.target_id.clone();
        let released = Run::new(&execute, &target, &config).run(Release::new(credential))?;
        match released {
            Ok(ReleaseOutcome::Released) => Ok(json!({"released": true})),
            Ok(ReleaseOutcome::NotHolder(fenced)) => Ok(json!({"notHolder": fenced_json(fenced)})),
            Err(e) => Err(failure(&target, e)),
        }
    })
}

/// An operator's end of the current grant of `target`, whoever holds it (the core's
/// `Release::end()` machine, as `ProjectionStore::end_lease` runs it): `{"ended": {epoch,
/// holder, acquiredAt, expiresAt}}` (that grant is released: its holder is fenced) or
/// `{"nothingHeld": {epoch, why}}` (`why`: `unheld` or `released`: nothing written; `expired`,
/// with `"closed": true`: that grant was marked released, so a clock set back cannot revive it).
#[napi]
pub fn end_lease(options: Options, target: String, execute: Execute<'_>) -> JsAnswer {
    answer(|| {
        let config = Config::parse(&options)?;
        let target = parse_target(&target)?;
        let ended = Run::new(&execute, &target, &config).run(Release::end())?;
        match ended {
            Ok(EndOutcome::Ended(plan)) => Ok(json!({"ended": {
                "epoch": plan.release.epoch,
                "holder": plan.grant.holder_instance_digest.as_str(),
                "acquiredAt": plan.grant.acquired_at.0,
                "expiresAt": plan.grant.expires_at.0,
            }})),
            // No live grant: an expired one was marked released (so a clock set back cannot
            // revive it), an unheld or released row was left as it is.
            Ok(EndOutcome::Closed(plan)) => Ok(
                json!({"nothingHeld": {"epoch": plan.release.epoch, "why": "expired", "closed": true}}),
            ),
            Ok(EndOutcome::NothingHeld { epoch, why }) => {
                Ok(json!({"nothingHeld": {"epoch": epoch, "why": why.name()}}))
            }
            Err(e) => Err(failure(&target, e)),
        }
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

/// Decides a submission (`watermark::decide_submission`) from the rows the caller read
/// inside its write transaction: `{"plan": "insert"|"advance"|"replay"|"degrade", "row":
/// {...}}` (the row to upsert, absent for a replay) or a `REJECTED` error.
#[napi]
pub fn decide_submission(
    options: Options,
    producer: String,
    admitted: bool,
    existing: Option<ChannelRow>,
    submission: SubmissionIn,
) -> JsAnswer {
    answer(|| {
        let config = Config::parse(&options)?;
        let producer =
            ProducerId::parse(&producer).map_err(|e| invalid(format!("producer: {e}")))?;
        let existing = existing.map(|row| row.columns().decode()).transpose()?;
        let submission = Submission {
            target_id: parse_target(&submission.target_id)?,
            channel: solewriter_core::projection::channel::ChannelName::parse(&submission.channel)
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

/// A rejected submission as a `REJECTED` error whose `rejection` field names its kind (a
/// regression also carries the `submitted` and `stored` watermarks, as text), so a caller maps
/// it without reading the message.
fn rejection_failure(rejected: watermark::SubmissionRejected) -> Failure {
    use watermark::SubmissionRejected as R;
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

/// Reads and validates the published document of `target` in the format of `profile` (the
/// generic one when absent): `{"document": {...}}`. A Memory Core document is checked for its
/// format, its epoch and its target; judging it further is the hooks' reader's work.
#[napi]
pub fn read_projection(runtime_root: String, target: String, profile: Option<String>) -> JsAnswer {
    answer(|| {
        let target = parse_target(&target)?;
        let root = RuntimeRoot::new(runtime_root);
        let profile = match profile.as_deref() {
            None => Profile::Generic,
            Some(name) => Profile::parse(name).map_err(|e| invalid(format!("profile: {e}")))?,
        };
        if profile == Profile::Generic {
            let doc = solewriter_files::runtime::read_projection(&root, &target)?;
            return Ok(json!({"document": doc}));
        }
        let bytes = solewriter_files::runtime::read_current(&root, &target)?;
        let malformed = |why: String| {
            Failure::from(solewriter_files::Error::Document(DocumentError::Malformed(
                why,
            )))
        };
        if solewriter_core::projection::memory_core::published_epoch(&bytes).is_none() {
            return Err(malformed(format!(
                "not a {} document with a fencing epoch",
                profile.name()
            )));
        }
        let doc: Value = serde_json::from_slice(&bytes).map_err(|e| malformed(e.to_string()))?;
        if doc["publication"]["targetId"] != json!(target.as_str()) {
            return Err(malformed(format!(
                "the document names another target than {target}"
            )));
        }
        Ok(json!({"document": doc}))
    })
}

/// The `CREATE TABLE` statements of the two tables, in creation order, exactly as the SQLite
/// adapter writes them (`solewriter_core::projection::schema`): `{"current": {<profile
/// name>: [two strings]}, "earlier": [[two strings of schema 1], [two of release 0.1.0]]}`.
#[napi]
pub fn schema_statements() -> JsAnswer {
    use solewriter_core::projection::schema::{create_statement, Shape};
    answer(|| {
        let both = |shape| [create_statement(0, shape), create_statement(1, shape)];
        let current: serde_json::Map<String, Value> = Profile::ALL
            .into_iter()
            .map(|p| (p.name().to_owned(), json!(both(Shape::Current(p)))))
            .collect();
        Ok(json!({"current": current, "earlier": [both(Shape::V1), both(Shape::Unmarked)]}))
    })
}

/// The lease rows and channel rows the caller read, decoded strictly and the leases observed
/// at the broker clock: `{"leases": [{targetId, epoch, state, holder, acquiredAt, expiresAt}],
/// "channels": [{targetId, channel, sourceWatermark, updatedAt, degradedReason}]}`, `state`
/// being `unheld`, `held`, `expired` or `released`. A row solewriter could not have written
/// is an error (`CORRUPT_ROW`, `INCONSISTENT_LEASE`), never a guess.
#[napi]
pub fn inspect(options: Options, leases: Vec<LeaseRow>, channels: Vec<ChannelRow>) -> JsAnswer {
    answer(|| {
        let config = Config::parse(&options)?;
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
