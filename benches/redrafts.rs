//! How often concurrent one-shot publications compose their document again inside the
//! store's write lock — the measurement behind BENCHMARKS.md's "many publishers" figures.
//!
//! A publication drafts (composes, writes and fsyncs its temp file) outside every lock, then
//! confirms the draft inside the transaction; a draft whose rows or epoch moved meanwhile (a
//! publisher of the same target committed between the two) is composed, written and fsynced
//! again INSIDE the transaction, holding the store's one write lock across that fsync. This
//! runs `publishers` threads for a few seconds over 1, 16 and 256 targets (each thread walking
//! its own rotation, as `benches/many_targets.rs` does) and counts, through a probe, the temp
//! files written per published document: 1.00 means every draft was confirmed.
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

/// Counts the temp files written.
struct TempWrites(AtomicU64);

impl PublishProbe for TempWrites {
    fn reached(&self, _: PublishStep, _: &TargetId, _: u64) {}

    fn before(&self, effect: &'static str, _: &TargetId, _: u64) {
        if effect == "write-temp" {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Publications made and temp files written by `publishers` threads over `targets` targets
/// in `run`.
fn measure(publishers: usize, targets: usize, run: Duration) -> (u64, u64) {
    let bench = Bench::new(targets, 1024);
    let (published, writes) = (AtomicU64::new(0), TempWrites(AtomicU64::new(0)));
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
    (published.into_inner(), writes.0.into_inner())
}

fn main() {
    let measuring = std::env::args().any(|a| a == "--bench");
    let run = if measuring {
        Duration::from_secs(3)
    } else {
        Duration::from_millis(100)
    };
    for (publishers, targets) in [(1, 1), (8, 1), (8, 16), (8, 256)] {
        let (published, writes) = measure(publishers, targets, run);
        println!(
            "{publishers} publisher(s), {targets} target(s): {:.0} publications/s, {:.2} temp files written per publication",
            published as f64 / run.as_secs_f64(),
            writes as f64 / published.max(1) as f64,
        );
    }
}
