#![cfg(feature = "model-check")]
//! Shuttle model of the subtree write guard: three writers (two sessions of one agent and a
//! second agent) run concurrent acquire / release / disconnect-sweep sequences against one
//! held-lock authority.
//!
//! The design under test is the adapters' `WriteGuard` shape: the core [`LockIndex`] behind
//! one mutex (here `shuttle::sync::Mutex`), every operation one critical section. A monitor
//! checks every outcome:
//! - a grant is recorded in a shadow table of subtrees currently being edited, and two
//!   different writers must never be in it with overlapping subtrees (safety);
//! - a denial must name a held lock that really conflicts with the request on whole path
//!   segments (no spurious denial);
//! - a sweep frees exactly the locks that session was granted.
//!
//! Two broken variants must be caught by the same monitor: overlap tested as a raw string
//! prefix (`/app/x1` "overlaps" `/app/x1y`), and a non-atomic check-then-insert that releases
//! the mutex between the conflict check and the insert.
//!
//! The disconnect barrier: the core `GuardState` (held locks and tombstones) behind one
//! mutex, a writer's in-flight writes racing its disconnect sweep. Whatever the order, once
//! both are done the swept writer holds nothing (a write before the sweep is freed by it, one
//! after it is refused). The same state without tombstones (capacity 0) must be caught
//! leaking a lock.

use shuttle::scheduler::{PctScheduler, RandomScheduler};
use shuttle::sync::{Arc, Mutex};
use shuttle::{thread, Runner};
use solewriter_core::subtree::{
    conflicts, overlaps, Acquired, GuardRefusal, GuardState, Lock, LockIndex, LockTable,
    SubtreePath, Writer, DEFAULT_TOMBSTONES,
};
use solewriter_verification::shims::quiet_shuttle;
use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// A held-lock authority shared by the model's threads.
trait Authority: Send + Sync + 'static {
    fn acquire(&self, lock: Lock) -> Result<Acquired, Lock>;
    fn release(&self, lock: &Lock) -> bool;
    fn release_writer(&self, writer: &Writer) -> Vec<Lock>;
}

/// The design: the core index behind one mutex, one critical section per operation.
#[derive(Default)]
struct Indexed(Mutex<LockIndex>);

impl Authority for Indexed {
    fn acquire(&self, lock: Lock) -> Result<Acquired, Lock> {
        let mut index = self.0.lock().expect("model mutex");
        index.acquire(lock).map_err(|conflict| conflict.held)
    }
    fn release(&self, lock: &Lock) -> bool {
        self.0.lock().expect("model mutex").release(lock)
    }
    fn release_writer(&self, writer: &Writer) -> Vec<Lock> {
        self.0.lock().expect("model mutex").release_writer(writer)
    }
}

/// Broken variants over a plain list of locks.
struct Broken {
    list: Mutex<Vec<Lock>>,
    overlap: fn(&SubtreePath, &SubtreePath) -> bool,
    /// Release the mutex between the conflict check and the insert.
    split: bool,
}

fn string_prefix_overlap(a: &SubtreePath, b: &SubtreePath) -> bool {
    let (a, b) = (a.to_string(), b.to_string());
    a.starts_with(&b) || b.starts_with(&a)
}

impl Broken {
    fn new(overlap: fn(&SubtreePath, &SubtreePath) -> bool, split: bool) -> Self {
        Broken {
            list: Mutex::new(Vec::new()),
            overlap,
            split,
        }
    }

    fn check(&self, list: &[Lock], lock: &Lock) -> Result<Acquired, Lock> {
        let clash = |h: &&Lock| h.writer != lock.writer && (self.overlap)(&h.path, &lock.path);
        if let Some(held) = list.iter().find(clash) {
            return Err(held.clone());
        }
        let covered = list
            .iter()
            .any(|h| h.writer == lock.writer && h.path.contains(&lock.path));
        Ok(if covered {
            Acquired::Reentrant
        } else {
            Acquired::Granted
        })
    }
}

impl Authority for Broken {
    fn acquire(&self, lock: Lock) -> Result<Acquired, Lock> {
        let mut list = self.list.lock().expect("model mutex");
        let decision = self.check(&list, &lock)?;
        if decision == Acquired::Granted {
            if self.split {
                drop(list);
                list = self.list.lock().expect("model mutex");
            }
            list.push(lock);
        }
        Ok(decision)
    }
    fn release(&self, lock: &Lock) -> bool {
        let mut list = self.list.lock().expect("model mutex");
        let before = list.len();
        list.retain(|h| h != lock);
        list.len() != before
    }
    fn release_writer(&self, writer: &Writer) -> Vec<Lock> {
        let mut list = self.list.lock().expect("model mutex");
        let (mut freed, kept): (Vec<Lock>, Vec<Lock>) =
            list.drain(..).partition(|h| h.writer == *writer);
        *list = kept;
        freed.sort();
        freed
    }
}

/// The monitor's shadow of the subtrees currently being edited.
#[derive(Default)]
struct Shadow(Mutex<Vec<Lock>>);

impl Shadow {
    fn enter(&self, lock: &Lock) {
        let mut editing = self.0.lock().expect("shadow mutex");
        if let Some(other) = editing.iter().find(|h| conflicts(h, lock)) {
            panic!("VIOLATION: {lock} granted while {other} is being edited");
        }
        editing.push(lock.clone());
    }
    fn leave(&self, lock: &Lock) {
        self.0.lock().expect("shadow mutex").retain(|h| h != lock);
    }
}

fn lock(agent: &str, session: &str, path: &str) -> Lock {
    Lock {
        path: SubtreePath::parse(path).expect("model path"),
        writer: Writer::new(Some(agent), Some(session)).expect("model writer"),
    }
}

/// One writer's script: for each edit, acquire its root, write under it (re-entrant), release.
/// A denied edit is skipped. With `disconnect`, the writer ends by a sweep instead of releases.
fn run_writer<A: Authority>(
    guard: &A,
    shadow: &Shadow,
    agent: &str,
    session: &str,
    edits: &[(&str, &str)],
    disconnect: bool,
) {
    let mut mine = Vec::new();
    for (root, inner) in edits {
        let held = lock(agent, session, root);
        match guard.acquire(held.clone()) {
            Err(other) => assert!(
                conflicts(&other, &held),
                "VIOLATION: {held} denied by {other}, which does not overlap it"
            ),
            Ok(Acquired::Reentrant) => {}
            Ok(Acquired::Granted) => {
                shadow.enter(&held);
                let step = lock(agent, session, inner);
                let answer = guard.acquire(step.clone());
                assert!(
                    answer == Ok(Acquired::Reentrant),
                    "VIOLATION: {step} inside the held {held} answered {answer:?}"
                );
                if disconnect {
                    mine.push(held);
                } else {
                    shadow.leave(&held);
                    assert!(guard.release(&held));
                }
            }
        }
    }
    if disconnect {
        mine.sort();
        for held in &mine {
            shadow.leave(held);
        }
        let writer = Writer::new(Some(agent), Some(session)).expect("model writer");
        assert_eq!(
            guard.release_writer(&writer),
            mine,
            "VIOLATION: the sweep freed the wrong locks"
        );
    }
}

thread_local! {
    /// Executions started on this test thread (shuttle runs them all on the caller's thread).
    static EXECUTIONS: Cell<usize> = const { Cell::new(0) };
}

/// One writer of the scenario: its (agent, session), its edits as (subtree root, node written
/// inside it), and whether it ends by disconnecting (sweep) instead of releasing.
struct Script {
    agent: &'static str,
    session: &'static str,
    edits: &'static [(&'static str, &'static str)],
    disconnect: bool,
}

/// Alice#1 and Bob#1 contend for `/app/x1` (and its name-prefix sibling `/app/x1y`); Alice#2,
/// the same agent on another session, takes `/app/z1` and `/app/x1y/q`, then disconnects.
const SCRIPTS: [Script; 3] = [
    Script {
        agent: "alice",
        session: "1",
        edits: &[("/app/x1", "/app/x1/leaf"), ("/app", "/app/z1")],
        disconnect: false,
    },
    Script {
        agent: "bob",
        session: "1",
        edits: &[("/app/x1y", "/app/x1y/q"), ("/app/x1/leaf", "/app/x1/leaf")],
        disconnect: false,
    },
    Script {
        agent: "alice",
        session: "2",
        edits: &[("/app/z1", "/app/z1/w"), ("/app/x1y/q", "/app/x1y/q/r")],
        disconnect: true,
    },
];

fn scenario<A: Authority>(make: fn() -> A) -> impl Fn() + Send + Sync + 'static {
    move || {
        EXECUTIONS.set(EXECUTIONS.get() + 1);
        let guard = Arc::new(make());
        let shadow = Arc::new(Shadow::default());
        let handles: Vec<_> = SCRIPTS
            .iter()
            .map(|script| {
                let (guard, shadow) = (Arc::clone(&guard), Arc::clone(&shadow));
                thread::spawn(move || {
                    run_writer(
                        &*guard,
                        &shadow,
                        script.agent,
                        script.session,
                        script.edits,
                        script.disconnect,
                    )
                })
            })
            .collect();
        for handle in handles {
            handle.join().expect("writer thread");
        }
    }
}

const SEED: u64 = 0x5eed_0021;
const ITERATIONS: usize = 2_000;
const PCT_DEPTH: usize = 3;

#[derive(Clone, Copy, Debug)]
enum Sched {
    Random,
    Pct,
}

/// Explores `ITERATIONS` schedules of `test` under a seeded scheduler; returns how many ran.
fn explore(sched: Sched, test: impl Fn() + Send + Sync + 'static) -> usize {
    match sched {
        Sched::Random => Runner::new(
            RandomScheduler::new_from_seed(SEED, ITERATIONS),
            quiet_shuttle(),
        )
        .run(test),
        Sched::Pct => Runner::new(
            PctScheduler::new_from_seed(SEED, PCT_DEPTH, ITERATIONS),
            quiet_shuttle(),
        )
        .run(test),
    }
}

#[test]
fn indexed_guard_passes_the_model() {
    for sched in [Sched::Random, Sched::Pct] {
        let explored = explore(sched, scenario(Indexed::default));
        assert_eq!(explored, ITERATIONS);
        println!(
            "write guard model: {sched:?} scheduler explored {explored} executions, no violation"
        );
    }
}

/// Runs `make` under both schedulers; asserts each finds a violation the trap is built to
/// cause — a panic whose message holds `VIOLATION` and one of `expected` — and says after how
/// many executions. Any other panic (an unrelated `expect`, a model bug) fails the test.
fn assert_caught<A: Authority>(variant: &str, expected: &[&str], make: fn() -> A) {
    for sched in [Sched::Random, Sched::Pct] {
        let start = EXECUTIONS.get();
        let outcome = catch_unwind(AssertUnwindSafe(|| explore(sched, scenario(make))));
        let spent = EXECUTIONS.get() - start;
        let message = match outcome {
            Ok(explored) => {
                panic!("{variant}: {sched:?} scheduler found no violation in {explored} executions")
            }
            Err(payload) => solewriter_verification::panic_message(payload.as_ref()),
        };
        assert!(
            message.contains("VIOLATION") && expected.iter().any(|e| message.contains(e)),
            "{variant}: {sched:?} scheduler failed otherwise than by {expected:?}: {message}"
        );
        let violation = message
            .lines()
            .find(|l| l.contains("VIOLATION"))
            .unwrap_or(&message);
        println!("{variant}: {sched:?} scheduler caught a violation within {spent} executions: {violation}");
    }
}

#[test]
fn sound_list_passes_the_model() {
    // The broken variants differ from this one by a single knob each.
    let explored = explore(Sched::Random, scenario(|| Broken::new(overlaps, false)));
    assert_eq!(explored, ITERATIONS);
    println!("sound list control: {explored} executions, no violation");
}

#[test]
fn string_prefix_overlap_is_caught() {
    assert_caught(
        "string-prefix overlap",
        &["which does not overlap it"],
        || Broken::new(string_prefix_overlap, false),
    );
}

#[test]
fn non_atomic_check_then_insert_is_caught() {
    // Two overlapping grants: the second is seen entering an edit of the first, or the first
    // holder's re-entrant step is refused because of the second.
    assert_caught(
        "check-then-insert",
        &["is being edited", "answered Err(Lock"],
        || Broken::new(overlaps, true),
    );
}

/// Two in-flight writes of `gone#1` race its sweep; a bystander writes beside them. Afterwards
/// `gone#1` must hold nothing, and every refusal must be the barrier or a real conflict.
fn sweep_scenario(tombstones: usize) -> impl Fn() + Send + Sync + 'static {
    move || {
        EXECUTIONS.set(EXECUTIONS.get() + 1);
        let state = Arc::new(Mutex::new(GuardState::new(tombstones)));
        let gone = Writer::new(Some("gone"), Some("1")).expect("model writer");
        let mut handles = Vec::new();
        for path in ["/app/x1", "/app/z1/w"] {
            let state = Arc::clone(&state);
            handles.push(thread::spawn(move || {
                let write = lock("gone", "1", path);
                let answer = state.lock().expect("model mutex").acquire(write.clone());
                match answer {
                    Ok(_) | Err(GuardRefusal::Swept(_)) => {}
                    Err(GuardRefusal::Conflict(held)) => assert!(
                        conflicts(&held, &write),
                        "VIOLATION: {write} denied by {held}, which does not overlap it"
                    ),
                }
            }));
        }
        {
            let state = Arc::clone(&state);
            handles.push(thread::spawn(move || {
                let _ = state
                    .lock()
                    .expect("model mutex")
                    .acquire(lock("bob", "1", "/app/z1"));
            }));
        }
        {
            let (state, gone) = (Arc::clone(&state), gone.clone());
            handles.push(thread::spawn(move || {
                state.lock().expect("model mutex").release_writer(&gone);
            }));
        }
        for handle in handles {
            handle.join().expect("writer thread");
        }
        let held = state.lock().expect("model mutex").held();
        if let Some(leaked) = held.iter().find(|l| l.writer == gone) {
            panic!("VIOLATION: {leaked} leaked after its writer was swept");
        }
    }
}

#[test]
fn the_disconnect_sweep_is_a_barrier() {
    for sched in [Sched::Random, Sched::Pct] {
        let explored = explore(sched, sweep_scenario(DEFAULT_TOMBSTONES));
        assert_eq!(explored, ITERATIONS);
        println!("sweep barrier: {sched:?} scheduler explored {explored} executions, no leak");
    }
}

#[test]
fn a_sweep_without_tombstones_is_caught() {
    for sched in [Sched::Random, Sched::Pct] {
        let start = EXECUTIONS.get();
        let outcome = catch_unwind(AssertUnwindSafe(|| explore(sched, sweep_scenario(0))));
        let spent = EXECUTIONS.get() - start;
        let message = match outcome {
            Ok(explored) => panic!(
                "no tombstones: {sched:?} scheduler found no violation in {explored} executions"
            ),
            Err(payload) => solewriter_verification::panic_message(payload.as_ref()),
        };
        assert!(
            message.contains("VIOLATION") && message.contains("leaked"),
            "no tombstones: {sched:?} scheduler failed otherwise: {message}"
        );
        println!("no tombstones: {sched:?} scheduler caught a leak within {spent} executions");
    }
}
