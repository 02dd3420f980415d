//! Publication vs an unfenced atomic write, for 1 KiB and 256 KiB documents, the kinds taking
//! turns so that each ratio compares operations measured in the same seconds.
//!
//! `atomic write` writes the published document's bytes the unfenced way: temp sibling, fsync,
//! rename, directory fsync — the baseline. `one-shot` is `publish_now`: the grant, the
//! publication and the release in one transaction (3 fsyncs: temp file, WAL commit,
//! directory). `two-step` is what a holder pays for `acquire` (one transaction, committed) +
//! `publish` (revalidate, confirm the draft, rename, conditional release, commit; 4 fsyncs).
//! The store runs with `synchronous = FULL`, set inside `ProjectionStore::open` on its private
//! connection; the cost of FULL against NORMAL is measured on the plain-SQLite baseline in
//! `submission.rs`.
//!
//! Not a criterion benchmark: criterion measures one benchmark after another, and on a disk
//! whose fsync time drifts by tens of percent from one minute to the next (seen here: the same
//! one-shot / atomic-write ratio measured 1.31x and 2.09x in two runs of criterion minutes
//! apart), a ratio of two benchmarks measured seconds apart says more about the drift than
//! about the code. Here every kind runs `PER_ROUND` operations in turn, for `ROUNDS` rounds
//! (each round starting with the next kind), after `WARMUP` unmeasured ones each; the mean
//! and median of each kind and the ratio of means to the atomic write are printed.
//!
//! ```sh
//! cargo bench --bench publication
//! ```
//!
//! Under `cargo test` (no `--bench` argument, as CI runs every benchmark once) each kind runs
//! once and nothing is measured.

mod support;

use std::time::{Duration, Instant};
use support::{atomic_write, holder, publish_now_once, publish_once, Bench};

/// Rounds of the measured run.
const ROUNDS: usize = 10;
/// Operations of each kind per round.
const PER_ROUND: usize = 100;
/// Unmeasured operations of each kind before the first round.
const WARMUP: usize = 20;

/// One kind: its name and one operation.
type Kind<'a> = (&'static str, Box<dyn Fn() + 'a>);

/// The durations of each kind's operations, kinds taking turns.
fn measure(
    kinds: &[Kind<'_>],
    rounds: usize,
    per_round: usize,
    warmup: usize,
) -> Vec<Vec<Duration>> {
    for (_, op) in kinds {
        (0..warmup).for_each(|_| op());
    }
    let mut times = vec![Vec::with_capacity(rounds * per_round); kinds.len()];
    for round in 0..rounds {
        // Each round starts with the next kind, so no kind always follows the same one.
        for k in (0..kinds.len()).map(|i| (i + round) % kinds.len()) {
            for _ in 0..per_round {
                let started = Instant::now();
                (kinds[k].1)();
                times[k].push(started.elapsed());
            }
        }
    }
    times
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn main() {
    let measuring = support::measuring();
    let (rounds, per_round, warmup) = if measuring {
        (ROUNDS, PER_ROUND, WARMUP)
    } else {
        (1, 1, 0)
    };
    for (label, envelope_bytes) in [("1 KiB", 1024), ("256 KiB", 256 * 1024)] {
        let bench = Bench::new(1, envelope_bytes);
        let target = &bench.targets[0];
        let store = bench.open();
        let who = holder("bench");
        assert!(publish_once(&store, target, &who), "first publication");
        let bytes = std::fs::read(bench.options.runtime_root.current_path(target))
            .expect("published document");
        let dir = bench.dir.path().join("unfenced");
        std::fs::create_dir(&dir).expect("baseline dir");
        let kinds: [Kind<'_>; 3] = [
            ("atomic write", Box::new(|| atomic_write(&dir, &bytes))),
            (
                "one-shot",
                Box::new(|| assert!(publish_now_once(&store, target, &who))),
            ),
            (
                "two-step",
                Box::new(|| assert!(publish_once(&store, target, &who))),
            ),
        ];
        let times = measure(&kinds, rounds, per_round, warmup);
        if !measuring {
            println!("publication {label}: ok (test mode, nothing measured)");
            continue;
        }
        let mean = |t: &[Duration]| micros(t.iter().sum::<Duration>()) / t.len() as f64;
        let baseline = mean(&times[0]);
        println!(
            "{label} ({} bytes): {rounds} rounds of {per_round} of each kind, {warmup} unmeasured first",
            bytes.len()
        );
        for ((name, _), t) in kinds.iter().zip(&times) {
            let mut sorted = t.clone();
            sorted.sort();
            println!(
                "  {name:<12} mean {:7.0} µs  p50 {:7.0} µs  {:.2}x the atomic write",
                mean(t),
                micros(sorted[sorted.len() / 2]),
                mean(t) / baseline,
            );
        }
    }
}
