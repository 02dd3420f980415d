//! The non-blocking publication (`publishAsync`, `publishNowAsync`, `publishManyNowAsync`):
//! the same machines as the synchronous calls (`Publish`, `PublishNow`, `PublishMany`), driven
//! in turns so that the file effects outside the transaction leave the event loop. One driver
//! serves one target and a batch: each effect names the target it is for, whose file state
//! (one [`FileSteps`] per target) carries it out.
//!
//! The effect stream is cut at the transaction's edges. Outside the transaction, the slow file
//! effects — the directory chain and its parent fsyncs, the draft's temp file and its fsync;
//! after the commit the directory fsync, or the removal of the temp file — run on the libuv
//! thread pool ([`PoolTurn`]); a batch's, every target's at once on a thread of its own
//! (`solewriter_files::parts`), unless the host has a probe, whose reached points are the JS
//! thread's. Every other effect runs on the JS thread
//! ([`NativePublication::turn`]): the SQL effects, the clock, the probe, and EVERYTHING from
//! the target lock's wait until it is let go after the transaction (the target lock, `Begin`,
//! revalidation, re-read, a rewrite of the temp file, the deadline check, the rename, the
//! sweep, the conditional release, the commit or rollback, the target lock's release) — in one
//! call, so one event-loop turn: neither the transaction nor a target lock ever spans turns
//! (but a batch's earlier locks while it waits for a later one, below; the host's executor and
//! probe run inside that call, nothing else of the host does). The
//! wait for the target lock (at most `busyTimeoutMs`) is NOT in that turn: a turn tries the
//! lock once ([`FileSteps::try_lock_target`]) and, while another holds it, ends asking the
//! driver to wait on a timer (1 ms, doubling to 4 ms) and turn again — nothing held, the lock
//! effect unanswered, the machine unchanged; the machine sees the answer a blocking wait would
//! have given (the lock, or `Busy` once the timeout passed). A batch takes its targets' locks
//! one after the other before its transaction: while the lock of a later target is waited for
//! this way, the locks of the earlier ones stay held across those turns (no transaction is
//! open then), as a synchronous batch holds them while it blocks. `BEGIN IMMEDIATE`'s wait for
//! SQLite's lock (at most the connection's `timeout`) still blocks the JS thread: it is
//! better-sqlite3's busy handler, inside the transaction's turn.
//!
//! The JS driver alternates: `turn(execute)` answers `{pool: true}` (await `pool()`),
//! `{waitMs}` (await a timer of that many ms), `{paused: true}` (the host's probe returned a
//! promise outside the transaction: await it), or the outcome, as the synchronous call would
//! answer it.

use super::boundary::{answer, caught};
use super::failure::{invalid, Failure, JsAnswer, Outcome};
use super::{
    batch_answer, file_steps, not_started, publish_answer, publish_now_answer, refused,
    release_steps, Applicants, Config, Execute, Host, OnTargets, PublicationEnd,
};
use napi::bindgen_prelude::AsyncTask;
use napi::{Env, Task};
use napi_derive::napi;
use serde_json::json;
use solewriter_core::projection::lease::Credential;
use solewriter_core::projection::machine::acquire::Applicant;
use solewriter_core::projection::machine::publish::Publish;
use solewriter_core::projection::machine::publish_many::PublishMany;
use solewriter_core::projection::machine::publish_now::PublishNow;
use solewriter_core::projection::machine::release::Release;
use solewriter_core::projection::machine::{
    Answer, Effect, FileEffect, LeaseInput, Machine, ProtocolError, StoreEffect,
};
use solewriter_core::projection::target::TargetId;
use solewriter_files::parts::{run_parts, Relay};
use solewriter_files::steps::FileSteps;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// What a run borrows from: its configuration and its targets.
struct Owned {
    config: Config,
    /// The run's targets (one, but for a batch), in the order its machine names them (a
    /// batch's: sorted by id, as the core's `PublishMany` sorts them).
    targets: Vec<TargetId>,
    /// A batch's targets in the caller's order, the order of its answer; `None` for one target.
    caller: Option<Vec<TargetId>>,
}

/// The machine of a run.
enum Job<'a> {
    /// A publication.
    Publish(Box<Publish<'a, Failure>>),
    /// A one-shot (a takeover's publication included).
    PublishNow(Box<PublishNow<'a, Failure>>),
    /// A batch of one-shots (their takeovers' publications included).
    PublishMany(Box<PublishMany<'a, Failure>>),
    /// The release of the grant of the run's `usize`-th target, whose publication could not
    /// start, and that failure.
    ReleaseUnused(Box<Release<Failure>>, Failure, usize),
    /// The machine's end was taken.
    Ended,
}

/// The next effect of `machine` and the place of the target it is for.
fn next<M: Machine>(machine: &M) -> Option<(usize, Effect<'_, Failure>)>
where
    M::Protocol: OnTargets,
{
    machine.poll().map(M::Protocol::split)
}

impl Job<'_> {
    fn poll(&self) -> Option<(usize, Effect<'_, Failure>)> {
        match self {
            Job::Publish(m) => next(&**m),
            Job::PublishNow(m) => next(&**m),
            Job::PublishMany(m) => next(&**m),
            Job::ReleaseUnused(m, _, i) => m.poll().map(|effect| (*i, effect)),
            Job::Ended => None,
        }
    }

    fn handle(&mut self, answer: Answer<LeaseInput<Failure>>) -> Result<(), ProtocolError> {
        match self {
            Job::Publish(m) => m.handle(answer),
            Job::PublishNow(m) => m.handle(answer),
            Job::PublishMany(m) => m.handle(answer),
            Job::ReleaseUnused(m, _, _) => m.handle(answer),
            Job::Ended => Err(ProtocolError::WrongAnswer {
                machine: "ended publication",
                answered: answer.effect(),
            }),
        }
    }
}

/// A machine in progress and the file state of each of its targets.
struct Running<'a> {
    job: Job<'a>,
    /// The file steps of each target, in the order of [`Owned::targets`].
    files: Vec<FileSteps<'a>>,
    /// Between a `Begin` that succeeded and the end of that transaction.
    in_tx: bool,
    /// While a target lock is waited for: when the first attempt was made, and the pause
    /// before the next.
    lock_wait: Option<(Instant, Duration)>,
    /// Each target's answer once its publication has ended (`None` before, or while the
    /// release of its unused grant is to run).
    ends: Vec<Option<Outcome>>,
    /// The releases of unused grants still to run, each in an envelope of its own: the
    /// target's place, the failure its publication could not start with, the grant.
    unused: VecDeque<(usize, Failure, Credential)>,
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
    /// A target lock is taken by another: wait this long on a timer, then turn again (the
    /// lock effect still unanswered; no transaction open).
    Wait(Duration),
    /// The machine ended with this answer.
    Answer(JsAnswer),
}

/// One JS-thread turn of `run`: its effects until the next pool effect, a pause, or the end.
fn js_turn<'a>(owned: &'a Owned, run: &mut Running<'a>, execute: &Execute<'_>) -> Stop {
    let clock = owned.config.broker_clock();
    loop {
        let Some((i, effect)) = run.job.poll() else {
            match finish(owned, run) {
                Some(answer) => return Stop::Answer(answer),
                // The release of an unused grant starts.
                None => continue,
            }
        };
        if on_pool(&effect, run.in_tx) {
            return Stop::Pool;
        }
        let host = Host {
            execute,
            target: &owned.targets[i],
            clock,
        };
        let edge = match &effect {
            Effect::Store(StoreEffect::Begin(_)) => Some(Edge::Begin),
            Effect::Store(StoreEffect::Commit(_)) => Some(Edge::Commit),
            Effect::Store(StoreEffect::Rollback(_)) => Some(Edge::Rollback),
            _ => None,
        };
        let mut pause = false;
        let files = &mut run.files[i];
        let answer = match effect {
            // The target lock is tried, not waited for: the wait is the JS driver's timer.
            Effect::File(FileEffect::LockTarget(ask)) => {
                let (since, next) = *run
                    .lock_wait
                    .get_or_insert((Instant::now(), FIRST_LOCK_PAUSE));
                match files.try_lock_target(since) {
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
            Effect::File(effect) => files.execute(effect),
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
            return Stop::Answer(super::answer(|| Err(Failure::from(bug))));
        }
        if pause {
            return Stop::Paused;
        }
    }
}

/// The answer of `run` once its machine has ended — or `None` when `run` goes on with the
/// release of the grant of a publication that could not start, in a new envelope (one after
/// the other, for a batch).
fn finish<'a>(owned: &'a Owned, run: &mut Running<'a>) -> Option<JsAnswer> {
    let config = &owned.config;
    let at = |i: usize| &owned.targets[i];
    // Each target's end, by its place.
    let ended = match std::mem::replace(&mut run.job, Job::Ended) {
        Job::Publish(machine) => machine
            .output()
            .map(|end| vec![(0, publish_answer(config, at(0), end))]),
        Job::PublishNow(machine) => machine
            .output()
            .map(|end| vec![(0, publish_now_answer(config, at(0), end))]),
        Job::PublishMany(machine) => machine.output().map(|ends| {
            ends.into_iter()
                .enumerate()
                .map(|(i, end)| (i, publish_now_answer(config, at(i), end.end)))
                .collect()
        }),
        Job::ReleaseUnused(machine, failure, i) => machine.output().map(|release| {
            vec![(
                i,
                PublicationEnd::Answer(not_started(at(i), failure, release)),
            )]
        }),
        Job::Ended => {
            return Some(answer(|| {
                Err(invalid("this publication has already answered"))
            }))
        }
    };
    let ended = match ended {
        Ok(ended) => ended,
        Err(bug) => return Some(answer(|| Err(Failure::from(bug)))),
    };
    for (i, end) in ended {
        match end {
            PublicationEnd::Answer(outcome) => run.ends[i] = Some(outcome),
            PublicationEnd::ReleaseUnused(failure, credential) => {
                run.unused.push_back((i, failure, credential));
            }
        }
    }
    if let Some((i, failure, credential)) = run.unused.pop_front() {
        run.job = Job::ReleaseUnused(Box::new(Release::new(credential)), failure, i);
        run.files[i] = release_steps(config, at(i));
        run.in_tx = false;
        run.lock_wait = None;
        return None;
    }
    let ends = std::mem::take(&mut run.ends);
    Some(answer(|| match &owned.caller {
        Some(caller) => batch_answer(caller, &owned.targets, ends),
        None => ends.into_iter().next().flatten().unwrap_or_else(|| {
            Err(Failure::from(ProtocolError::Unfinished {
                machine: "publication",
            }))
        }),
    }))
}

/// The pool's part of `run`: its effects until the next JS-thread effect. A batch at its
/// lock-free parts runs them at once, on a thread per target (`solewriter_files::parts`),
/// unless the host has a probe (`probed`): their reached points are then the JS thread's, one
/// turn each.
fn pool_turn(run: &mut Running<'_>, probed: bool) -> Result<(), Failure> {
    #[cfg(feature = "test-seams")]
    super::seams::panic_at("pool");
    if let (Job::PublishMany(batch), false, false) = (&mut run.job, probed, run.in_tx) {
        if let Some(mut parts) = batch.parts() {
            let files = run.files.iter_mut().collect();
            run_parts(parts.each(), files, Relay::Nothing, |_, _, _| {});
            parts.join()?;
        }
    }
    loop {
        match run.job.poll() {
            Some((i, Effect::File(effect))) if !run.in_tx && effect.is_slow() => {
                let answer = run.files[i].execute(effect);
                run.job.handle(answer).map_err(Failure::from)?;
            }
            _ => return Ok(()),
        }
    }
}

/// What starts a run.
pub(crate) enum Start {
    /// A publication of a grant.
    Publish(Credential),
    /// A one-shot publication of a target.
    PublishNow(TargetId, Applicant),
    /// A batch: its targets in the caller's order, and an applicant for each.
    PublishMany(Vec<TargetId>, Applicants),
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
    /// A publication whose run `setup` describes — or, when it fails (or panics), or the core
    /// refuses its batch, one refused with that failure at its first turn.
    pub(crate) fn start(setup: impl FnOnce() -> Result<(Config, Start), Failure>) -> Self {
        let state = caught(|| {
            let (config, start) = setup()?;
            let (targets, caller) = match &start {
                Start::Publish(credential) => (vec![credential.target_id.clone()], None),
                Start::PublishNow(target, _) => (vec![target.clone()], None),
                // The batch's order: its targets sorted by id, as `PublishMany` sorts them.
                Start::PublishMany(caller, _) => {
                    let mut order = caller.clone();
                    order.sort();
                    (order, Some(caller.clone()))
                }
            };
            let owned = Owned {
                config,
                targets,
                caller,
            };
            Ok(State::Running(Run::try_new(owned, |owned| {
                let composition = owned.config.composition();
                let job = match start {
                    Start::Publish(credential) => {
                        Job::Publish(Box::new(Publish::new(credential, composition)))
                    }
                    Start::PublishNow(_, applicant) => {
                        Job::PublishNow(Box::new(PublishNow::new(applicant, composition)))
                    }
                    Start::PublishMany(_, applicants) => Job::PublishMany(Box::new(
                        PublishMany::new(applicants, composition, Failure::clone)
                            .map_err(refused)?,
                    )),
                };
                Ok::<_, Failure>(Running {
                    job,
                    files: owned
                        .targets
                        .iter()
                        .map(|target| file_steps(&owned.config, target))
                        .collect(),
                    in_tx: false,
                    lock_wait: None,
                    ends: owned.targets.iter().map(|_| None).collect(),
                    unused: VecDeque::new(),
                })
            })?))
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
            let ran = caught(|| {
                run.with_dependent_mut(|owned, running| pool_turn(running, owned.config.probe))
            });
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
