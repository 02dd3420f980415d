//! The non-blocking publication (`publishAsync`, `publishNowAsync`): the same machines as the
//! synchronous calls (`Publish`, `PublishNow`), driven in turns so that the file effects
//! outside the transaction leave the event loop.
//!
//! The effect stream is cut at the transaction's edges. Outside the transaction, the slow file
//! effects — the directory chain and its parent fsyncs, the draft's temp file and its fsync;
//! after the commit the directory fsync, or the removal of the temp file — run on the libuv
//! thread pool ([`PoolTurn`]). Every other effect runs on the JS thread
//! ([`NativePublication::turn`]): the SQL effects, the clock, the probe, and EVERYTHING from
//! the target lock's wait until it is let go after the transaction (the target lock, `Begin`,
//! revalidation, re-read, a rewrite of the temp file, the deadline check, the rename, the
//! sweep, the conditional release, the commit or rollback, the target lock's release) — in one
//! call, so one event-loop turn: neither the transaction nor the target lock ever spans turns
//! (the host's executor and probe run inside that call, nothing else of the host does). The
//! wait for the target lock (at most `busyTimeoutMs`) is NOT in that turn: a turn tries the
//! lock once ([`FileSteps::try_lock_target`]) and, while another holds it, ends asking the
//! driver to wait on a timer (1 ms, doubling to 4 ms) and turn again — nothing held, the lock
//! effect unanswered, the machine unchanged; the machine sees the answer a blocking wait would
//! have given (the lock, or `Busy` once the timeout passed). `BEGIN IMMEDIATE`'s wait for
//! SQLite's lock (at most the connection's `timeout`) still blocks the JS thread: it is
//! better-sqlite3's busy handler, inside the transaction's turn.
//!
//! The JS driver alternates: `turn(execute)` answers `{pool: true}` (await `pool()`),
//! `{waitMs}` (await a timer of that many ms), `{paused: true}` (the host's probe returned a
//! promise outside the transaction: await it), or the outcome, as the synchronous call would
//! answer it.

use super::boundary::{answer, caught};
use super::failure::{invalid, Failure, JsAnswer};
use super::{
    file_steps, internal, not_started, publish_answer, publish_now_answer, release_steps, Config,
    Execute, Host, PublicationEnd,
};
use napi::bindgen_prelude::AsyncTask;
use napi::{Env, Task};
use napi_derive::napi;
use serde_json::json;
use solewriter_core::projection::lease::Credential;
use solewriter_core::projection::machine::acquire::Applicant;
use solewriter_core::projection::machine::publish::Publish;
use solewriter_core::projection::machine::publish_now::PublishNow;
use solewriter_core::projection::machine::release::Release;
use solewriter_core::projection::machine::{
    Answer, Effect, FileEffect, Machine, ProtocolError, StoreEffect,
};
use solewriter_core::projection::target::TargetId;
use solewriter_files::steps::FileSteps;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// What a run borrows from: its configuration and its target.
struct Owned {
    config: Config,
    target: TargetId,
}

/// The machine of a run.
enum Job<'a> {
    /// A publication.
    Publish(Box<Publish<'a, Failure>>),
    /// A one-shot (a takeover's publication included).
    PublishNow(Box<PublishNow<'a, Failure>>),
    /// The release of the grant of a publication that could not start, and that failure.
    ReleaseUnused(Box<Release<Failure>>, Failure),
    /// The machine's end was taken.
    Ended,
}

impl Job<'_> {
    fn poll(&self) -> Option<Effect<'_, Failure>> {
        match self {
            Job::Publish(m) => m.poll(),
            Job::PublishNow(m) => m.poll(),
            Job::ReleaseUnused(m, _) => m.poll(),
            Job::Ended => None,
        }
    }

    fn handle(&mut self, answer: Answer<Failure>) -> Result<(), ProtocolError> {
        match self {
            Job::Publish(m) => m.handle(answer),
            Job::PublishNow(m) => m.handle(answer),
            Job::ReleaseUnused(m, _) => m.handle(answer),
            Job::Ended => Err(ProtocolError::WrongAnswer {
                machine: "ended publication",
                answered: answer.effect(),
            }),
        }
    }
}

/// A machine in progress and its file state.
struct Running<'a> {
    job: Job<'a>,
    files: FileSteps<'a>,
    /// Between a `Begin` that succeeded and the end of that transaction.
    in_tx: bool,
    /// While the target lock is waited for: when the first attempt was made, and the pause
    /// before the next.
    lock_wait: Option<(Instant, Duration)>,
}

/// The first pause between two attempts at a busy target lock, and the longest: a waiter
/// gets the lock within about this much of its release (a JS timer's resolution is 1 ms).
const FIRST_LOCK_PAUSE: Duration = Duration::from_millis(1);
const MAX_LOCK_PAUSE: Duration = Duration::from_millis(4);

self_cell::self_cell!(
    struct Run {
        owner: Owned,
        #[covariant]
        dependent: Running,
    }
);

/// Whether `effect` runs on the thread pool: a slow file effect outside the transaction (the
/// target lock, taken right before the transaction and let go right after it, runs on the JS
/// thread in the transaction's turn, so it is never held across a turn of the host; no test
/// observes that turn, see FENCING.md's mutation figures).
fn on_pool(effect: &Effect<'_, Failure>, in_tx: bool) -> bool {
    !in_tx && matches!(effect, Effect::File(effect) if effect.is_slow())
}

/// An edge of the transaction.
#[derive(Clone, Copy)]
enum Edge {
    Begin,
    Commit,
    Rollback,
}

/// Where a JS-thread turn stopped.
enum Stop {
    /// The next effect runs on the pool.
    Pool,
    /// The host's probe asked to pause, outside the transaction.
    Paused,
    /// The target lock is taken by another: wait this long on a timer, then turn again (the
    /// lock effect still unanswered; nothing held).
    Wait(Duration),
    /// The machine ended with this answer.
    Answer(JsAnswer),
}

/// One JS-thread turn of `run`: its effects until the next pool effect, a pause, or the end.
fn js_turn<'a>(owned: &'a Owned, run: &mut Running<'a>, execute: &Execute<'_>) -> Stop {
    let host = Host {
        execute,
        target: &owned.target,
        clock: owned.config.broker_clock(),
    };
    loop {
        let Some(effect) = run.job.poll() else {
            match finish(owned, run) {
                Some(answer) => return Stop::Answer(answer),
                // The release of an unused grant starts.
                None => continue,
            }
        };
        if on_pool(&effect, run.in_tx) {
            return Stop::Pool;
        }
        let edge = match &effect {
            Effect::Store(StoreEffect::Begin(_)) => Some(Edge::Begin),
            Effect::Store(StoreEffect::Commit(_)) => Some(Edge::Commit),
            Effect::Store(StoreEffect::Rollback(_)) => Some(Edge::Rollback),
            _ => None,
        };
        let mut pause = false;
        let answer = match effect {
            // The target lock is tried, not waited for: the wait is the JS driver's timer.
            Effect::File(FileEffect::LockTarget(ask)) => {
                let (since, next) = *run
                    .lock_wait
                    .get_or_insert((Instant::now(), FIRST_LOCK_PAUSE));
                match run.files.try_lock_target(since) {
                    None => {
                        run.lock_wait = Some((since, (next * 2).min(MAX_LOCK_PAUSE)));
                        return Stop::Wait(next);
                    }
                    Some(taken) => {
                        run.lock_wait = None;
                        ask.answer(taken.map_err(Failure::from))
                    }
                }
            }
            Effect::Reached(step, ask) => {
                pause = host.reached(step) && !run.in_tx;
                ask.answer(())
            }
            Effect::File(effect) => run.files.execute(effect),
            // The host's clock failed: the run stops here (dropped with the answer).
            effect => match host.step(effect) {
                Ok(answer) => answer,
                Err(failure) => return Stop::Answer(super::answer(|| Err(failure))),
            },
        };
        run.in_tx = match (edge, answer.failed()) {
            (Some(Edge::Begin), false) => true,
            // A failed commit is followed by a rollback: the transaction ends there.
            (Some(Edge::Commit), false) | (Some(Edge::Rollback), _) => false,
            _ => run.in_tx,
        };
        if let Err(bug) = run.job.handle(answer) {
            return Stop::Answer(super::answer(|| Err(internal(bug))));
        }
        if pause {
            return Stop::Paused;
        }
    }
}

/// The answer of the ended machine of `run` — or `None` when `run` goes on with the release of
/// the grant of a publication that could not start, in a new envelope.
fn finish<'a>(owned: &'a Owned, run: &mut Running<'a>) -> Option<JsAnswer> {
    let (config, target) = (&owned.config, &owned.target);
    let ended = match std::mem::replace(&mut run.job, Job::Ended) {
        Job::Publish(machine) => machine
            .output()
            .map(|end| publish_answer(config, target, end)),
        Job::PublishNow(machine) => machine
            .output()
            .map(|end| publish_now_answer(config, target, end)),
        Job::ReleaseUnused(machine, failure) => {
            return Some(answer(|| {
                let release = machine.output().map_err(internal)?;
                not_started(target, failure, release)
            }))
        }
        Job::Ended => {
            return Some(answer(|| {
                Err(invalid("this publication has already answered"))
            }))
        }
    };
    match ended {
        Err(bug) => Some(answer(|| Err(internal(bug)))),
        Ok(PublicationEnd::Answer(outcome)) => Some(answer(|| outcome)),
        Ok(PublicationEnd::ReleaseUnused(failure, credential)) => {
            run.job = Job::ReleaseUnused(Box::new(Release::new(credential)), failure);
            run.files = release_steps(config, target);
            run.in_tx = false;
            run.lock_wait = None;
            None
        }
    }
}

/// The pool's part of `run`: its effects until the next JS-thread effect.
fn pool_turn(run: &mut Running<'_>) -> Result<(), Failure> {
    #[cfg(feature = "test-seams")]
    super::seams::panic_at("pool");
    loop {
        match run.job.poll() {
            Some(Effect::File(effect)) if !run.in_tx && effect.is_slow() => {
                let answer = run.files.execute(effect);
                run.job.handle(answer).map_err(internal)?;
            }
            _ => return Ok(()),
        }
    }
}

/// What starts a run.
pub(crate) enum Start {
    Publish(Credential),
    PublishNow(Applicant),
}

/// A publication driven in turns: running, refused before it started (answered at the first
/// turn), or answered.
enum State {
    Running(Run),
    Refused(Failure),
    Answered,
}

/// A publication in progress, driven in turns by the JS layer.
#[napi]
pub struct NativePublication {
    state: Arc<Mutex<State>>,
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl NativePublication {
    /// A publication whose run `setup` describes — or, when it fails (or panics), one refused
    /// with that failure at its first turn.
    pub(crate) fn start(
        setup: impl FnOnce() -> Result<(Config, TargetId, Start), Failure>,
    ) -> Self {
        let state = caught(|| {
            let (config, target, start) = setup()?;
            Ok(State::Running(Run::new(
                Owned { config, target },
                |owned| Running {
                    job: match start {
                        Start::Publish(credential) => Job::Publish(Box::new(Publish::new(
                            credential,
                            owned.config.composition(),
                        ))),
                        Start::PublishNow(applicant) => Job::PublishNow(Box::new(PublishNow::new(
                            applicant,
                            owned.config.composition(),
                        ))),
                    },
                    files: file_steps(&owned.config, &owned.target),
                    in_tx: false,
                    lock_wait: None,
                },
            )))
        })
        .unwrap_or_else(State::Refused);
        NativePublication {
            state: Arc::new(Mutex::new(state)),
        }
    }
}

#[napi]
impl NativePublication {
    /// Runs the JS-thread effects up to the next pool effect (`{"pool": true}`), a pause
    /// (`{"paused": true}`) or the end (the answer).
    #[napi]
    pub fn turn(&self, execute: Execute<'_>) -> JsAnswer {
        let mut state = lock(&self.state);
        let turned = caught(|| {
            Ok(match std::mem::replace(&mut *state, State::Answered) {
                State::Running(mut run) => {
                    let stop =
                        run.with_dependent_mut(|owned, running| js_turn(owned, running, &execute));
                    *state = State::Running(run);
                    stop
                }
                State::Refused(failure) => Stop::Answer(answer(|| Err(failure))),
                State::Answered => Stop::Answer(answer(|| {
                    Err(invalid("this publication has already answered"))
                })),
            })
        });
        // A turn that panicked was abandoned (its run dropped: the target lock let go; the JS
        // layer rolls back a transaction left open): it answers INTERNAL.
        let stop = turned.unwrap_or_else(|failure| Stop::Answer(answer(|| Err(failure))));
        match stop {
            Stop::Pool => JsAnswer(Ok(json!({"pool": true}))),
            Stop::Paused => JsAnswer(Ok(json!({"paused": true}))),
            Stop::Wait(pause) => JsAnswer(Ok(json!({"waitMs": pause.as_millis() as u64}))),
            Stop::Answer(answer) => {
                *state = State::Answered;
                answer
            }
        }
    }

    /// Abandons the publication (the JS driver failed between turns): its run is dropped, so
    /// its target lock is let go at once instead of when this object is garbage-collected; a
    /// temp file it left is removed by the next publication's orphan sweep. Nothing of it is
    /// in a transaction (a turn never ends inside one).
    #[napi]
    pub fn abandon(&self) {
        *lock(&self.state) = State::Answered;
    }

    /// Runs the pool effects up to the next JS-thread effect, on the libuv thread pool.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn pool(&self) -> AsyncTask<PoolTurn> {
        AsyncTask::new(PoolTurn(Arc::clone(&self.state)))
    }
}

/// The pool's part of a publication, between two JS-thread turns.
pub struct PoolTurn(Arc<Mutex<State>>);

impl Task for PoolTurn {
    type Output = ();
    type JsValue = ();

    fn compute(&mut self) -> napi::Result<()> {
        let mut state = lock(&self.0);
        if let State::Running(run) = &mut *state {
            let ran = caught(|| run.with_dependent_mut(|_, running| pool_turn(running)));
            // A panic on the pool never unwinds into libuv, and a machine that refused an answer
            // (`ProtocolError`) goes no further: either way the run is abandoned (dropped: the
            // target lock let go) and the next turn answers INTERNAL.
            if let Err(failure) = ran {
                *state = State::Refused(failure);
            }
        }
        Ok(())
    }

    fn resolve(&mut self, _: Env, _: ()) -> napi::Result<()> {
        Ok(())
    }
}
