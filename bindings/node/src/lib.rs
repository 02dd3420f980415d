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
//! `writeGrant`, `writeRelease`, `commit`, `rollback`; a batch's `savepoint`,
//! `releaseSavepoint`, `rollbackToSavepoint`; and `reached`, a publication step for the
//! host's probe) and answers with a [`SqlAnswer`]. One executor ([`Run`]) serves a machine of
//! one target and a batch of several (`publishManyNow`: one file state per target). The
//! transaction never spans an event-loop turn. Outcomes come back as JS values, failures as
//! thrown `Error`s with a `code` ([`failure`]).

use napi::bindgen_prelude::{Buffer, Either, Function, Uint8Array};
use napi_derive::napi;
use serde_json::{json, Value};
use solewriter_core::contract::Protocol;
use solewriter_core::error_kind::Classified;
use solewriter_core::names::InstanceDigest;
use solewriter_core::projection::columns::{ChannelColumns, LeaseColumns, WatermarkColumn};
use solewriter_core::projection::lease::{Credential, Fenced, HeldBy, LeaseRecord};
use solewriter_core::projection::machine::acquire::Applicant;
use solewriter_core::projection::machine::outcome::{self, PublishReport, Unpublished};
use solewriter_core::projection::machine::publish::Publish;
use solewriter_core::projection::machine::publish_many::{BatchRefused, PublishMany, TargetEnd};
use solewriter_core::projection::machine::publish_now::PublishNowReport;
use solewriter_core::projection::machine::release::{Release, ReleaseOutcome};
use solewriter_core::projection::machine::{
    drive, Answer, BatchProtocol, Effect, LeaseInput, LeaseProtocol, Machine, ProtocolError,
    StoreEffect, Targeted,
};
use solewriter_core::projection::profile::Profile;
use solewriter_core::projection::publication::PublishStep;
use solewriter_core::projection::target::{TargetId, TargetTuple};
use solewriter_core::projection::DocumentError;
use solewriter_core::time::Millis;
use solewriter_core::token::HolderToken;
use solewriter_files::atomic_file::RealFs;
use solewriter_files::clock::{Clock, SystemClock};
use solewriter_files::parts::{run_parts, Relay};
use solewriter_files::runtime::RuntimeRoot;
use solewriter_files::steps::{DurableDirs, FileSteps};
use std::sync::LazyLock;
use std::time::Duration;

pub mod adoption;
mod boundary;
mod config;
pub mod failure;
pub mod ledger;
pub mod project_lock;
#[cfg(feature = "test-seams")]
mod seams;
pub mod store;
pub mod turns;
pub mod write_guard;

use boundary::answer;
use config::{BrokerClock, Config};
use failure::{invalid, Code, Failure, JsAnswer, Outcome};

/// Directories whose creation this process has seen fsynced in their parent.
static DURABLE: LazyLock<DurableDirs> = LazyLock::new(DurableDirs::default);

/// The largest integer a JS number holds exactly (2^53 - 1).
const MAX_SAFE: u64 = (1 << 53) - 1;

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

/// A SQL effect for the host's executor. `kind` names it; the other fields are those the
/// effect's statement binds (see the JS executor).
#[napi(object)]
pub struct SqlEffect {
    /// `readCommittedLease`, `begin`, `readLease`, `readChannels`, `writeGrant`,
    /// `writeRelease`, `savepoint`, `releaseSavepoint`, `rollbackToSavepoint`, `commit` or
    /// `rollback` (and `readClock`, `reached`: not SQL).
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

/// The host's answer to an effect it executes: `lease` for the lease reads (absent: no row),
/// `channels` for `readChannels`, `written` for the conditional writes, `clockMs` for
/// `readClock`, `error` when the statement failed.
#[napi(object)]
pub struct SqlAnswer {
    pub lease: Option<LeaseRow>,
    pub channels: Option<Vec<ChannelRow>>,
    pub written: Option<bool>,
    pub error: Option<SqlError>,
    /// To `reached`, outside the transaction of an asynchronous publication: pause it there
    /// (the host awaits what its probe returned before the next turn).
    pub pause: Option<bool>,
    /// To `readClock`: the host's clock's reading, in ms.
    pub clock_ms: Option<f64>,
}

/// The host's executor of SQL effects.
type Execute<'f> = Function<'f, SqlEffect, Option<SqlAnswer>>;

/// The host's side of a machine run on one target: its SQL executor, the target and the
/// clock. It executes every effect that is not a file effect.
struct Host<'a, 'f> {
    execute: &'a Execute<'f>,
    target: &'a TargetId,
    clock: BrokerClock,
}

/// A protocol whose effects each name the target they are for: a one-target machine's are its
/// target's; a batch's name a place in its targets, or none for the shared transaction's own
/// (begin, commit, rollback), which run as the first target's (as the Rust adapter's
/// executor runs them).
pub(crate) trait OnTargets: Protocol<Input = LeaseInput<Failure>> {
    /// The place of the target `effect` is for (`0` for one target), and the effect.
    fn split<'m>(effect: Self::Effect<'m>) -> (usize, Effect<'m, Failure>);
}

impl OnTargets for LeaseProtocol<Failure> {
    fn split<'m>(effect: Self::Effect<'m>) -> (usize, Effect<'m, Failure>) {
        (0, effect)
    }
}

impl OnTargets for BatchProtocol<Failure> {
    fn split<'m>(effect: Self::Effect<'m>) -> (usize, Effect<'m, Failure>) {
        let Targeted { target, effect } = effect;
        (target.unwrap_or(0), effect)
    }
}

/// One run of a machine: the host's executor and clock, and the file steps of each target of
/// the run (one, but for a batch), in the order its machine names them.
struct Run<'a, 'f> {
    execute: &'a Execute<'f>,
    clock: BrokerClock,
    targets: Vec<(&'a TargetId, FileSteps<'a>)>,
}

impl<'a, 'f> Run<'a, 'f> {
    fn new(execute: &'a Execute<'f>, target: &'a TargetId, config: &'a Config) -> Self {
        Self::many(execute, std::slice::from_ref(target), config)
    }

    /// A run on `targets`, in the order its machine names them (a batch's: sorted by id).
    fn many(execute: &'a Execute<'f>, targets: &'a [TargetId], config: &'a Config) -> Self {
        Run {
            execute,
            clock: config.broker_clock(),
            targets: targets.iter().map(|t| (t, file_steps(config, t))).collect(),
        }
    }

    /// Executes `effect` for the run's `i`-th target: a file effect with its file steps, any
    /// other by the host. `Err`: the run stops here (the host's clock failed).
    fn execute(
        &mut self,
        i: usize,
        effect: Effect<'_, Failure>,
    ) -> Result<Answer<LeaseInput<Failure>>, Failure> {
        let (target, files) = &mut self.targets[i];
        match effect {
            Effect::File(effect) => Ok(files.execute(effect)),
            effect => Host {
                execute: self.execute,
                target,
                clock: self.clock,
            }
            .step(effect),
        }
    }

    /// Runs `machine` (on one target, or a batch) to its end: its result — or the failure that
    /// stopped it (the host's clock failed), the machine abandoned there as a crash would leave
    /// it.
    fn run<M: Machine>(&mut self, mut machine: M) -> Result<M::Output, Failure>
    where
        M::Protocol: OnTargets,
    {
        let mut stopped = None;
        drive(&mut machine, |effect| {
            let (i, effect) = M::Protocol::split(effect);
            self.execute(i, effect)
                .map_err(|failure| stopped = Some(failure))
                .ok()
        })
        .map_err(Failure::from)?;
        match stopped {
            Some(failure) => Err(failure),
            None => machine.output().map_err(Failure::from),
        }
    }

    /// Runs a batch to its end as [`Self::run`] runs any machine, except that its lock-free
    /// parts (each target's draft before the transaction, its directory fsync after it) run at
    /// once, on a thread per target (`solewriter_files::parts`), each reached point shown to
    /// the host on this thread first.
    fn run_many(
        &mut self,
        mut batch: PublishMany<'_, Failure>,
    ) -> Result<Vec<TargetEnd<Failure>>, Failure> {
        loop {
            if let Some(mut parts) = batch.parts() {
                let Run {
                    execute,
                    clock,
                    targets,
                } = self;
                let ids: Vec<&TargetId> = targets.iter().map(|(target, _)| *target).collect();
                let files = targets.iter_mut().map(|(_, files)| files).collect();
                run_parts(parts.each(), files, Relay::Reached, |i, _, reached| {
                    if let Some(step) = reached {
                        let host = Host {
                            execute,
                            target: ids[i],
                            clock: *clock,
                        };
                        host.reached(step);
                    }
                });
                parts.join()?;
                continue;
            }
            let Some(Targeted { target, effect }) = batch.poll() else {
                return Ok(batch.output()?);
            };
            // `Err`: the run stops here (the host's clock failed), as in `run`.
            let answer = self.execute(target.unwrap_or(0), effect)?;
            batch.handle(answer)?;
        }
    }

    /// Runs a lease `machine` (acquisition, release, an operator's end) to its outcome, the
    /// failure it ended with answered as the addon's ([`failure`]).
    fn outcome<M, T>(&mut self, machine: M) -> Result<T, Failure>
    where
        M: Machine<
            Protocol = LeaseProtocol<Failure>,
            Output = Result<T, outcome::LeaseFailure<Failure>>,
        >,
    {
        let target = self.targets[0].0;
        self.run(machine)?.map_err(|e| failure(target, e))
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

    /// The broker clock's reading for a clock step: the system clock's, or the host's clock
    /// asked through the executor (`readClock`; a clock that throws or answers no whole number
    /// of ms stops the run).
    fn now(&self) -> Result<Millis, Failure> {
        match self.clock {
            BrokerClock::System => Ok(SystemClock.now()),
            BrokerClock::Host => {
                let ms = self
                    .sql(SqlEffect::bare("readClock", self.target))?
                    .clock_ms
                    .ok_or_else(|| {
                        Failure::new(Code::Host, "`readClock` answered without `clockMs`")
                    })?;
                from_js(ms, "clock").map(Millis)
            }
        }
    }

    /// Executes `effect`, which is not a file effect: the store's, the clock's, a reached
    /// point. `Err`: the run stops here (the host's clock failed: no reading to answer with).
    fn step(&self, effect: Effect<'_, Failure>) -> Result<Answer<LeaseInput<Failure>>, Failure> {
        let effect = match effect {
            Effect::Store(effect) => effect,
            Effect::Clock(ask) => return self.now().map(|now| ask.answer(now)),
            // A named point of the publication, for the host's probe (tests: stall, crash). Its
            // answer changes nothing: the machine goes on.
            Effect::Reached(step, ask) => {
                self.reached(step);
                return Ok(ask.answer(()));
            }
            Effect::File(effect) => {
                let name = effect.name();
                return Ok(effect.fail(Failure::new(
                    Code::Internal,
                    format!("the host was handed the file effect `{name}`"),
                )));
            }
        };
        #[cfg(feature = "test-seams")]
        if matches!(effect, StoreEffect::WriteRelease(..)) {
            seams::panic_at("write-release");
        }
        Ok(match effect {
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
            // A batch's, around each target's body: refused by the host's executor once its
            // connection is no longer inside the transaction.
            StoreEffect::Savepoint(ask) => ask.answer(self.done("savepoint")),
            StoreEffect::ReleaseSavepoint(ask) => ask.answer(self.done("releaseSavepoint")),
            StoreEffect::RollbackToSavepoint(ask) => ask.answer(self.done("rollbackToSavepoint")),
            StoreEffect::Commit(ask) => ask.answer(self.done("commit")),
            // The transaction ends either way (the host's executor makes sure of it).
            StoreEffect::Rollback(ask) => {
                let _ = self.done("rollback");
                ask.answer(Ok(()))
            }
        })
    }
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
        Fenced::DocumentAhead { document_epoch } => {
            json!({"reason": "document-ahead", "documentEpoch": document_epoch})
        }
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
/// release alike) to the binding's coded failure, of the kind the core gives the outcome.
fn failure(target: &TargetId, failure: outcome::LeaseFailure<Failure>) -> Failure {
    use outcome::LeaseFailure as F;
    let kind = failure.kind();
    let failure = match failure {
        F::NotAdmitted => not_admitted(target),
        F::Inconsistent(e) => Failure::new(Code::InconsistentLease, e),
        F::EpochExhausted => Failure::new(
            Code::EpochExhausted,
            "fencing epoch exhausted for this target; nothing was written",
        ),
        F::ForeignEpoch(foreign) => {
            let mut failure = Failure::new(Code::ForeignEpoch, &foreign);
            failure.detail = json!({
                "documentEpoch": foreign.document_epoch,
                "rowEpoch": foreign.row_epoch,
            });
            failure
        }
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
    };
    failure.of_kind(kind)
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
enum PublicationEnd {
    /// Its answer.
    Answer(Outcome),
    /// It could not start (this failure): the release of its unused grant runs next.
    ReleaseUnused(Failure, Credential),
}

impl PublicationEnd {
    /// The answer of a publication run in one call: its own, or — when it could not start —
    /// the release of its unused grant, run here ([`release_unused`]).
    fn answer(self, config: &Config, execute: &Execute<'_>) -> Outcome {
        match self {
            PublicationEnd::Answer(outcome) => outcome,
            PublicationEnd::ReleaseUnused(failed, credential) => {
                release_unused(config, execute, failed, credential)
            }
        }
    }
}

/// The answer of a publication machine's end (a one-shot's after its grant) — or, when it
/// could not start with a failure after which its unused grant is released
/// ([`releases_unused`]), that failure and the grant: its executor then releases the grant (its
/// target lock tried once, [`release_steps`]) and answers [`not_started`].
fn publish_answer(
    config: &Config,
    target: &TargetId,
    end: Result<PublishReport, Unpublished<Failure>>,
) -> PublicationEnd {
    match end {
        Ok(p) => PublicationEnd::Answer(Ok(json!({"published": {
            "targetId": target.as_str(),
            "epoch": p.fencing_epoch,
            "bytes": p.bytes,
            "publishedAt": p.published_at.0,
            "path": config.root.current_path(target),
        }}))),
        Err(unpublished) => unpublished_answer(target, unpublished),
    }
}

/// [`publish_answer`] of a publication that did not end published and released: its failure
/// keeps the kind the core gives it.
fn unpublished_answer(target: &TargetId, unpublished: Unpublished<Failure>) -> PublicationEnd {
    let release_message = |release| failure(target, release).message;
    let kind = unpublished.kind();
    PublicationEnd::Answer(Err(match unpublished {
        Unpublished::NotReleased { release, .. } => Failure::new(
            Code::PublishedNotReleased,
            format!("current.json was replaced, but the lease release did not commit ({}); the lease expires on its own", release_message(release)),
        )
        .of_kind(kind),
        Unpublished::NotStarted {
            error, credential, ..
        } if releases_unused(&error) => return PublicationEnd::ReleaseUnused(error, credential),
        Unpublished::NotStarted { error, .. } => unused(error),
        Unpublished::Failed {
            failure: failed,
            epoch,
            release,
        } => {
            let failed = with_epoch(failure(target, failed), epoch);
            match release {
                None => failed,
                Some(release) => Failure::new(
                    Code::ReleaseFailed,
                    format!(
                        "{} ({}); the conditional release did not commit ({}), so the lease stays held until it expires",
                        failed.message, failed.code, release_message(release)
                    ),
                )
                .of_kind(kind),
            }
        }
    }))
}

/// `failure` of a publication whose grant was of `epoch` (when it had one), with the field
/// `epoch: n`: the grant that did not publish.
fn with_epoch(failure: Failure, epoch: Option<u64>) -> Failure {
    match epoch {
        Some(epoch) => with_field(failure, "epoch", json!(epoch)),
        None => failure,
    }
}

/// `failure` with one more field, `key: value`.
fn with_field(failure: Failure, key: &str, value: Value) -> Failure {
    let mut fields = match failure.detail {
        Value::Object(fields) => fields,
        _ => serde_json::Map::new(),
    };
    fields.insert(key.to_owned(), value);
    Failure {
        detail: Value::Object(fields),
        ..failure
    }
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
    release: Result<ReleaseOutcome, outcome::LeaseFailure<Failure>>,
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
    Err(unused(Failure {
        message: format!("{}; {grant}", failed.message),
        ..failed
    }))
}

/// `failure` of a publication that did not use its grant — it could not start (the machine's
/// `NotStarted`), or it was refused before its machine ran (a consumer binding refused) — with
/// the field `grantUnused: true`: the JS layer then hands the `Grant` back to its holder,
/// usable again (`lib/grant.js`). Every other failure of a publication leaves it spent.
pub(crate) fn unused(failure: Failure) -> Failure {
    with_field(failure, "grantUnused", Value::Bool(true))
}

/// The answer of a one-shot publication machine's end, as [`publish_answer`].
fn publish_now_answer(
    config: &Config,
    target: &TargetId,
    end: Result<PublishNowReport, Unpublished<Failure>>,
) -> PublicationEnd {
    match end {
        Ok(PublishNowReport::Held(held)) => PublicationEnd::Answer(Ok(held_json(&held))),
        Ok(PublishNowReport::Published { published, .. }) => {
            publish_answer(config, target, Ok(published))
        }
        Err(unpublished) => publish_answer(config, target, Err(unpublished)),
    }
}

/// A batch the core refuses before anything is touched (no target, a target given twice):
/// `INVALID_INPUT`.
fn refused(refusal: BatchRefused) -> Failure {
    invalid(refusal)
}

/// The applicants of a batch, one per target.
type Applicants = Vec<(TargetId, Applicant)>;

/// What a batch of one-shot publications by `holder` starts from: its targets (ids, in the
/// caller's order) and an applicant for each, with a token of its own ([`applicant`]).
fn batch(
    config: &Config,
    targets: &[String],
    holder: &str,
) -> Result<(Vec<TargetId>, Applicants), Failure> {
    let caller = targets
        .iter()
        .map(|target| parse_target(target))
        .collect::<Result<Vec<_>, _>>()?;
    let applicants = caller
        .iter()
        .map(|target| Ok((target.clone(), applicant(config, holder, None)?.0)))
        .collect::<Result<_, Failure>>()?;
    Ok((caller, applicants))
}

/// The answer of a batch: each target's outcome (`ends`, in the batch's order, `order`) in the
/// caller's order (`caller`), each as `publishNow` answers it — `{"published": ...}` or
/// `{"held": ...}` — or, for a failure, `{"error": {code, message, ...its fields}}` (the JS
/// layer makes it the coded error `publishNow` would throw): `{"results": [...]}`.
fn batch_answer(
    caller: &[TargetId],
    order: &[TargetId],
    mut ends: Vec<Option<Outcome>>,
) -> Outcome {
    let results = caller
        .iter()
        .map(|target| {
            let end = order
                .binary_search(target)
                .ok()
                .and_then(|i| ends.get_mut(i)?.take())
                .ok_or_else(|| Failure::from(ProtocolError::Unfinished { machine: "batch" }))?;
            Ok(match end {
                Ok(value) => value,
                Err(failure) => json!({"error": failure.into_fields()}),
            })
        })
        .collect::<Result<Vec<_>, Failure>>()?;
    Ok(json!({"results": results}))
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
    run.targets[0].1 = release_steps(config, &target);
    match run.run(Release::new(credential)) {
        Ok(release) => not_started(&target, failed, release),
        Err(bug) => Err(bug),
    }
}

fn publish_with(config: &Config, execute: &Execute<'_>, credential: Credential) -> Outcome {
    let target = credential.target_id.clone();
    let end =
        Run::new(execute, &target, config).run(Publish::new(credential, config.composition()))?;
    publish_answer(config, &target, end).answer(config, execute)
}

/// The applicant `holder`, with the token `token_hex` (a fresh random one when absent), and
/// that token (the grant's secret, which an acquisition hands back).
fn applicant(
    config: &Config,
    holder: &str,
    token_hex: Option<String>,
) -> Result<(Applicant, HolderToken), Failure> {
    let token = token(token_hex)?;
    let applicant = Applicant {
        token_hash: token.hash(),
        holder_instance_digest: parse_holder(holder)?,
        ttl: config.ttl,
    };
    Ok((applicant, token))
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

/// Reads and validates the published document of `target` in the format of `profile` (the
/// generic one when absent): `{"document": {...}}`. A Memory Core document is checked for its
/// format, its epoch and its target; judging it further is the hooks' reader's work.
#[napi]
pub fn read_projection(runtime_root: String, target: String, profile: Option<String>) -> JsAnswer {
    answer(|| {
        let profile = match profile.as_deref() {
            None => Profile::Generic,
            Some(name) => Profile::parse(name).map_err(|e| invalid(format!("profile: {e}")))?,
        };
        read_document(&RuntimeRoot::new(runtime_root), &target, profile)
    })
}

/// The published document of `target` under `root`, validated in the format of `profile`:
/// `{"document": {...}}`.
pub(crate) fn read_document(
    root: &RuntimeRoot,
    target: &str,
    profile: Profile,
) -> Result<Value, Failure> {
    let target = parse_target(target)?;
    if profile == Profile::Generic {
        let doc = solewriter_files::runtime::read_projection(root, &target)?;
        return Ok(json!({"document": doc}));
    }
    let bytes = solewriter_files::runtime::read_current(root, &target)?;
    let malformed = |why: String| {
        Failure::from(solewriter_files::FileError::Document(
            DocumentError::Malformed(why),
        ))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The addon's failure of an effect in the samples: the target lock busy.
    fn busy() -> Failure {
        Failure::from(solewriter_files::FileError::Busy { timeout_ms: 5 })
    }

    /// The addon's failure of a directory fsync after the rename.
    fn not_durable() -> Failure {
        Failure::from(solewriter_files::FileError::NotDurable {
            path: std::path::PathBuf::new(),
            source: std::io::Error::other("fsync"),
        })
    }

    fn target() -> TargetId {
        TargetId::parse(&"a".repeat(64)).expect("valid")
    }

    /// Every failure of a lease operation becomes a coded failure of the kind the core gives
    /// it, and its code declares that kind.
    #[test]
    fn every_failure_keeps_the_core_kind() {
        for each in outcome::LeaseFailure::every(busy, not_durable) {
            let kind = each.kind();
            let shape = format!("{each:?}");
            let failed = failure(&target(), each);
            assert_eq!(failed.kind, kind, "{shape} became {failed:?}");
            assert_eq!(failed.code.kind(), kind, "{shape}: the code table");
        }
    }

    /// Every publication that did not end published and released becomes a coded failure of
    /// the kind the core gives it — also once the unused grant of one that could not start is
    /// released — and its code declares that kind, but `RELEASE_FAILED`: its cause's.
    #[test]
    fn every_unpublished_publication_keeps_the_core_kind() {
        for unpublished in Unpublished::every(busy, not_durable) {
            let kind = unpublished.kind();
            let shape = format!("{unpublished:?}");
            let failed = match unpublished_answer(&target(), unpublished) {
                PublicationEnd::Answer(Err(failed)) => failed,
                PublicationEnd::Answer(Ok(value)) => panic!("{shape} answered {value}"),
                PublicationEnd::ReleaseUnused(failed, _) => {
                    let released = Ok(ReleaseOutcome::Released);
                    not_started(&target(), failed, released).expect_err("a failure")
                }
            };
            assert_eq!(failed.kind, kind, "{shape} became {failed:?}");
            if failed.code != Code::ReleaseFailed {
                assert_eq!(failed.code.kind(), kind, "{shape}: the code table");
            }
        }
    }
}
