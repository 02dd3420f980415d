//! How often concurrent one-shot publications compose their document again inside the
//! store's write lock — the measurement behind BENCHMARKS.md's "many publishers" figures.
//!
//! A publication drafts (composes, writes and fsyncs its temp file) outside every lock, then
//! confirms the draft inside the transaction; a draft whose rows or epoch moved meanwhile (a
//! publisher of the same target committed between the two) is composed, written and fsynced
//! again INSIDE the transaction, holding the store's one write lock across that fsync. This
//! runs `publishers` threads for a few seconds over 1, 16 and 256 targets (each thread walking
//! its own rotation, as `benches/many_targets.rs` does) and counts, through a probe, the temp
//! files written per published document (1.00: every first draft was confirmed), and how many
//! of them were written inside a transaction, under the write lock. It also times the store's
//! write lock: how long each publication holds it, how much of that each effect took (the
//! commit is the WAL's fsync), and the share of the run during which some publisher held it —
//! near 100 %, the one write lock is what limits the rate, whatever the disk could do besides.
//!
//! Not a criterion benchmark: it reports counts, not times.
//!
//! ```sh
//! cargo bench --bench redrafts        # 3 s per configuration, on the release build
//! ```
//!
//! Under `cargo test` (no `--bench` argument, as CI runs every benchmark once) each
//! configuration runs for 100 ms and the counts are not meant to be read.

mod support;

use solewriter::projection::{PublishProbe, PublishStep, PublishedNow, TargetId};
use std::cell::Cell;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};
use support::{holder, Bench};

/// Counts the temp files written, and those written inside a transaction (under the store's
/// write lock); and times the write lock: how long it is held (from `begin`'s return, seen as
/// the next effect's start, to `commit`'s or `rollback`'s return), and how much of that each
/// effect took (an effect's time runs to the next effect's start, so the machine's own work
/// between two effects is counted in the first). Seen from the probe, the hold is an upper
/// bound: a thread descheduled between `commit`'s return and its next effect counts that
/// time too, so eight threads on two cores can sum to a little over 100 % of a short run
/// (seen in the debug build's 100 ms runs under `cargo test`).
#[derive(Default)]
struct TempWrites {
    all: AtomicU64,
    locked: AtomicU64,
    held_ns: AtomicU64,
    /// Nanoseconds spent in each effect while the write lock was held.
    in_lock: Mutex<BTreeMap<&'static str, u64>>,
}

thread_local! {
    /// The effect this thread issued last, and when.
    static LAST: Cell<Option<(&'static str, Instant)>> = const { Cell::new(None) };
    /// Since when this thread holds the write lock.
    static HELD_FROM: Cell<Option<Instant>> = const { Cell::new(None) };
}

impl PublishProbe for TempWrites {
    fn reached(&self, _: PublishStep, _: &TargetId, _: u64) {}

    fn before(&self, effect: &'static str, _: &TargetId, _: u64) {
        let now = Instant::now();
        if let Some((last, at)) = LAST.replace(Some((effect, now))) {
            let took = (now - at).as_nanos() as u64;
            match last {
                // A `begin` that failed is followed by the unlock alone: no hold.
                "begin" if effect != "unlock-target" => HELD_FROM.set(Some(now)),
                "commit" | "rollback" => {
                    if let Some(from) = HELD_FROM.take() {
                        let held = (now - from).as_nanos() as u64;
                        self.held_ns.fetch_add(held, Ordering::Relaxed);
                        *self.lock().entry(last).or_default() += took;
                    }
                }
                _ if HELD_FROM.get().is_some() => *self.lock().entry(last).or_default() += took,
                _ => {}
            }
        }
        if effect == "write-temp" {
            self.all.fetch_add(1, Ordering::Relaxed);
            if HELD_FROM.get().is_some() {
                self.locked.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

impl TempWrites {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<&'static str, u64>> {
        self.in_lock.lock().expect("probe map")
    }
}

/// Publications made, their probe's counts and timings, and the time they took (every
/// publication started before `run` ended is finished and counted), by `publishers` threads
/// over `targets` targets.
fn measure(publishers: usize, targets: usize, run: Duration) -> (u64, TempWrites, Duration) {
    let bench = Bench::new(targets, 1024);
    let (published, writes) = (AtomicU64::new(0), TempWrites::default());
    let start = Barrier::new(publishers + 1);
    let began = std::thread::scope(|s| {
        for i in 0..publishers {
            let (bench, published, writes, start) = (&bench, &published, &writes, &start);
            s.spawn(move || {
                let store = bench.open();
                let who = holder(&format!("p{i}"));
                let mut next = i % targets;
                start.wait();
                let stop = Instant::now() + run;
                while Instant::now() < stop {
                    let target = &bench.targets[next];
                    match store.publish_now_observed(target, &who, writes) {
                        Ok(PublishedNow::Published(_)) => {
                            published.fetch_add(1, Ordering::Relaxed);
                        }
                        Ok(PublishedNow::Held(_)) => {}
                        Err(e) => panic!("publish_now: {e}"),
                    }
                    next = (next + 1) % targets;
                }
            });
        }
        start.wait();
        Instant::now()
    });
    (published.into_inner(), writes, began.elapsed())
}

fn main() {
    let measuring = std::env::args().any(|a| a == "--bench");
    let run = if measuring {
        Duration::from_secs(3)
    } else {
        Duration::from_millis(100)
    };
    for (publishers, targets) in [(1, 1), (8, 1), (8, 16), (8, 256)] {
        let (published, writes, took) = measure(publishers, targets, run);
        let per = |n: u64| n as f64 / published.max(1) as f64;
        let held_ns = writes.held_ns.load(Ordering::Relaxed);
        println!(
            "{publishers} publisher(s), {targets} target(s): {:.0} publications/s; per publication {:.2} temp files written, {:.2} of them under the write lock; write lock held {:.0} µs per publication, {:.0} % of the run",
            published as f64 / took.as_secs_f64(),
            per(writes.all.load(Ordering::Relaxed)),
            per(writes.locked.load(Ordering::Relaxed)),
            per(held_ns) / 1e3,
            held_ns as f64 / took.as_nanos() as f64 * 100.0,
        );
        let mut spent: Vec<_> = writes.lock().clone().into_iter().collect();
        spent.sort_by_key(|&(_, ns)| std::cmp::Reverse(ns));
        let line: Vec<String> = spent
            .iter()
            .map(|&(effect, ns)| format!("{effect} {:.0}", per(ns) / 1e3))
            .collect();
        println!("    of which, µs per publication: {}", line.join(", "));
    }
}
