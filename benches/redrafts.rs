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
//! of them were written inside a transaction, under the write lock.
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
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use support::{holder, Bench};

/// Counts the temp files written, and those written inside a transaction (between a `begin`
/// and its `commit` or `rollback` on the same thread: under the store's write lock).
#[derive(Default)]
struct TempWrites {
    all: AtomicU64,
    locked: AtomicU64,
}

thread_local! {
    static IN_TRANSACTION: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

impl PublishProbe for TempWrites {
    fn reached(&self, _: PublishStep, _: &TargetId, _: u64) {}

    fn before(&self, effect: &'static str, _: &TargetId, _: u64) {
        match effect {
            "begin" => IN_TRANSACTION.set(true),
            // A `begin` that failed is followed by the unlock alone.
            "commit" | "rollback" | "unlock-target" => IN_TRANSACTION.set(false),
            "write-temp" => {
                self.all.fetch_add(1, Ordering::Relaxed);
                if IN_TRANSACTION.get() {
                    self.locked.fetch_add(1, Ordering::Relaxed);
                }
            }
            _ => {}
        }
    }
}

/// Publications made, temp files written, and those written under the write lock, by
/// `publishers` threads over `targets` targets in `run`.
fn measure(publishers: usize, targets: usize, run: Duration) -> (u64, u64, u64) {
    let bench = Bench::new(targets, 1024);
    let (published, writes) = (AtomicU64::new(0), TempWrites::default());
    let stop = Instant::now() + run;
    std::thread::scope(|s| {
        for i in 0..publishers {
            let (bench, published, writes) = (&bench, &published, &writes);
            s.spawn(move || {
                let store = bench.open();
                let who = holder(&format!("p{i}"));
                let mut next = i % targets;
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
    });
    (
        published.into_inner(),
        writes.all.into_inner(),
        writes.locked.into_inner(),
    )
}

fn main() {
    let measuring = std::env::args().any(|a| a == "--bench");
    let run = if measuring {
        Duration::from_secs(3)
    } else {
        Duration::from_millis(100)
    };
    for (publishers, targets) in [(1, 1), (8, 1), (8, 16), (8, 256)] {
        let (published, writes, locked) = measure(publishers, targets, run);
        let per = |n: u64| n as f64 / published.max(1) as f64;
        println!(
            "{publishers} publisher(s), {targets} target(s): {:.0} publications/s; per publication {:.2} temp files written, {:.2} of them under the write lock",
            published as f64 / run.as_secs_f64(),
            per(writes),
            per(locked),
        );
    }
}
