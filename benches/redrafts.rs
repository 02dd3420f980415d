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
//! near 100 %, the one write lock is what limits the rate, whatever the disk could do besides —
//! and what each effect took outside the lock; and the same for one thread publishing 16
//! targets per `publish_many` (a batch's hold: every target's effects and one commit). The
//! stores are warmed first (each has published
//! every target once) when measured.
//!
//! Not a criterion benchmark: it reports counts and shares of a run, measured through the
//! publications' own probe.
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
/// effect took, and how long each effect took outside it (an effect's time runs to the next
/// effect's start, or to the publication's return for its last, so the machine's own work
/// between two effects is counted in the first; `begin`, outside, includes the wait for the
/// lock). Seen from the probe, the hold is an approximation biased both ways: a thread
/// descheduled between `begin`'s return and its next effect starts its hold late (too
/// short), one descheduled between `commit`'s return and its next effect ends it late (too
/// long). Eight threads on two cores have summed to a little over 100 % of a short run (the
/// debug build's 100 ms runs under `cargo test`).
#[derive(Default)]
struct TempWrites {
    all: AtomicU64,
    locked: AtomicU64,
    held_ns: AtomicU64,
    /// Nanoseconds spent in each effect while the write lock was held.
    in_lock: Mutex<BTreeMap<&'static str, u64>>,
    /// Nanoseconds spent in each effect outside the write lock.
    outside: Mutex<BTreeMap<&'static str, u64>>,
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
            self.returned(last, at, now, Some(effect));
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
    /// The effect `last`, issued at `at`, has returned by `now`; `next` is the effect issued
    /// now (none at the publication's end).
    fn returned(&self, last: &'static str, at: Instant, now: Instant, next: Option<&str>) {
        let took = (now - at).as_nanos() as u64;
        let add = |map: &Mutex<BTreeMap<&'static str, u64>>| {
            *map.lock().expect("probe map").entry(last).or_default() += took;
        };
        match last {
            "begin" => {
                add(&self.outside);
                // A `begin` that failed is followed by the unlock alone: no hold.
                if next != Some("unlock-target") {
                    HELD_FROM.set(Some(now));
                }
            }
            "commit" | "rollback" => match HELD_FROM.take() {
                Some(from) => {
                    let held = (now - from).as_nanos() as u64;
                    self.held_ns.fetch_add(held, Ordering::Relaxed);
                    add(&self.in_lock);
                }
                None => add(&self.outside),
            },
            _ if HELD_FROM.get().is_some() => add(&self.in_lock),
            _ => add(&self.outside),
        }
    }

    /// The publication has returned: its last effect's time ends now.
    fn publication_ended(&self) {
        if let Some((last, at)) = LAST.take() {
            self.returned(last, at, Instant::now(), None);
        }
    }
}

/// `map`'s effects, longest first, as `effect µs` per publication of `published`.
fn shares(map: &Mutex<BTreeMap<&'static str, u64>>, published: u64) -> String {
    let mut spent: Vec<_> = map.lock().expect("probe map").clone().into_iter().collect();
    spent.sort_by_key(|&(_, ns)| std::cmp::Reverse(ns));
    let per = |ns: u64| ns as f64 / published.max(1) as f64 / 1e3;
    let line: Vec<String> = spent
        .iter()
        .map(|&(effect, ns)| format!("{effect} {:.0}", per(ns)))
        .collect();
    line.join(", ")
}

/// Publications made, their probe's counts and timings, and the time they took (every
/// publication started before `run` ended is finished and counted), by `publishers` threads
/// over `targets` targets, each on its own store, warmed first ([`support::warm`]).
///
/// `publishers == 0` is one batch publisher instead: one thread publishing every target in
/// one `publish_many` after the other (each target counted as a publication; the parts' file
/// work runs on threads of the batch, whose effects the probe counts but does not time past
/// each part's last).
fn measure(publishers: usize, targets: usize, run: Duration) -> (u64, TempWrites, Duration) {
    if publishers == 0 {
        return measure_batches(targets, run);
    }
    let bench = Bench::new(targets, 1024);
    let mut stores: Vec<_> = (0..publishers)
        .map(|i| (bench.open(), holder(&format!("p{i}"))))
        .collect();
    support::warm(&mut stores, &bench.targets);
    let (published, writes) = (AtomicU64::new(0), TempWrites::default());
    let start = Barrier::new(publishers + 1);
    let began = std::thread::scope(|s| {
        for (i, (store, who)) in stores.into_iter().enumerate() {
            let (bench, published, writes, start) = (&bench, &published, &writes, &start);
            s.spawn(move || {
                let mut next = i % targets;
                start.wait();
                let stop = Instant::now() + run;
                while Instant::now() < stop {
                    let target = &bench.targets[next];
                    let answer = store.publish_now_observed(target, &who, writes);
                    writes.publication_ended();
                    match answer {
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

/// [`measure`] for one thread publishing all `targets` in each `publish_many`.
fn measure_batches(targets: usize, run: Duration) -> (u64, TempWrites, Duration) {
    let bench = Bench::new(targets, 1024);
    let mut stores = vec![(bench.open(), holder("batch"))];
    support::warm(&mut stores, &bench.targets);
    let (store, who) = stores.pop().expect("one store");
    let writes = TempWrites::default();
    let (mut published, began) = (0, Instant::now());
    while began.elapsed() < run {
        let answers = store
            .publish_many_observed(&bench.targets, &who, &writes)
            .expect("publish_many");
        writes.publication_ended();
        for (_, answer) in answers {
            match answer {
                Ok(PublishedNow::Published(_)) => published += 1,
                Ok(PublishedNow::Held(_)) => {}
                Err(e) => panic!("publish_many of a target: {e}"),
            }
        }
    }
    (published, writes, began.elapsed())
}

fn main() {
    let run = if support::measuring() {
        Duration::from_secs(3)
    } else {
        Duration::from_millis(100)
    };
    for (publishers, targets) in [(1, 1), (8, 1), (8, 16), (8, 256), (0, 16)] {
        let (published, writes, took) = measure(publishers, targets, run);
        let per = |n: u64| n as f64 / published.max(1) as f64;
        let held_ns = writes.held_ns.load(Ordering::Relaxed);
        let who = match publishers {
            0 => "1 batch publisher (publish_many of every target)".to_owned(),
            n => format!("{n} publisher(s)"),
        };
        println!(
            "{who}, {targets} target(s): {:.0} publications/s; per publication {:.2} temp files written, {:.2} of them under the write lock; write lock held {:.0} µs per publication, {:.0} % of the run",
            published as f64 / took.as_secs_f64(),
            per(writes.all.load(Ordering::Relaxed)),
            per(writes.locked.load(Ordering::Relaxed)),
            per(held_ns) / 1e3,
            held_ns as f64 / took.as_nanos() as f64 * 100.0,
        );
        println!(
            "    inside the write lock, µs per publication: {}",
            shares(&writes.in_lock, published)
        );
        println!(
            "    outside it, µs per publication: {}",
            shares(&writes.outside, published)
        );
    }
}
