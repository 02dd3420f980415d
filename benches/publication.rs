//! Publication vs an unfenced atomic write, for 1 KiB and 256 KiB documents of one target and
//! for 1 KiB documents of 16 targets at once, the kinds taking turns so that each ratio
//! compares operations measured in the same seconds.
//!
//! `atomic write` writes the published document's bytes the unfenced way: temp sibling, fsync,
//! rename, directory fsync — the baseline. `one-shot` is `publish_now`: the grant, the
//! publication and the release in one transaction (3 fsyncs: temp file, WAL commit,
//! directory). `two-step` is what a holder pays for `acquire` (one transaction, committed) +
//! `publish` (revalidate, confirm the draft, rename, conditional release, commit; 4 fsyncs).
//! `batch` is `publish_many` of every target of the section in ONE transaction (per target its
//! temp file and directory fsyncs, one WAL commit for all). An operation publishes every
//! target of its section (16 atomic writes, 16 one-shots, ... in `16 targets`); the figures
//! are per publication, and the section ends with the batch's rate against the one-shots'.
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
//! and median of each kind and the ratio of means to the atomic write are printed, and so is
//! the CPU each kind burns per operation (this process's user + system time, every thread,
//! from `getrusage` around each kind's block of a round) and its ratio to the atomic write's.
//!
//! ```sh
//! cargo bench --bench publication
//! cargo bench --bench publication -- '1 KiB' one-shot   # only what every word names
//! cargo bench --bench publication -- '16 targets' one-shot batch
//! ```
//!
//! Words after `--` keep only the sizes and kinds they name (the atomic write always runs: it
//! is the baseline); `scripts/profile_publication.sh` runs one kind this way under `perf`.
//!
//! Under `cargo test` (no `--bench` argument, as CI runs every benchmark once) each kind runs
//! once and nothing is measured.

mod support;

use std::path::PathBuf;
use std::time::{Duration, Instant};
use support::{atomic_write, holder, publish_many_once, publish_now_once, publish_once, Bench};

/// Rounds of the measured run.
const ROUNDS: usize = 10;
/// Operations of each kind per round.
const PER_ROUND: usize = 100;
/// Unmeasured operations of each kind before the first round.
const WARMUP: usize = 20;

/// One kind: its name and one operation.
type Kind<'a> = (&'static str, Box<dyn Fn() + 'a>);

/// This process's CPU time so far (user + system, every thread).
fn cpu_time() -> Duration {
    // SAFETY: `getrusage` writes the struct it is given and nothing else.
    let usage = unsafe {
        let mut usage = std::mem::zeroed::<libc::rusage>();
        assert_eq!(
            libc::getrusage(libc::RUSAGE_SELF, &mut usage),
            0,
            "getrusage"
        );
        usage
    };
    let time = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1_000);
    time(usage.ru_utime) + time(usage.ru_stime)
}

/// What one kind measured: the duration of each operation, and the CPU of all of them.
struct Measured {
    times: Vec<Duration>,
    cpu: Duration,
}

/// The durations of each kind's operations and their CPU, kinds taking turns.
fn measure(kinds: &[Kind<'_>], rounds: usize, per_round: usize, warmup: usize) -> Vec<Measured> {
    for (_, op) in kinds {
        (0..warmup).for_each(|_| op());
    }
    let mut measured: Vec<Measured> = kinds
        .iter()
        .map(|_| Measured {
            times: Vec::with_capacity(rounds * per_round),
            cpu: Duration::ZERO,
        })
        .collect();
    for round in 0..rounds {
        // Each round starts with the next kind, so no kind always follows the same one.
        for k in (0..kinds.len()).map(|i| (i + round) % kinds.len()) {
            let cpu = cpu_time();
            for _ in 0..per_round {
                let started = Instant::now();
                (kinds[k].1)();
                measured[k].times.push(started.elapsed());
            }
            measured[k].cpu += cpu_time() - cpu;
        }
    }
    measured
}

/// Whether `name`, one of `all`, is kept by the command line's `words`: all are when no word
/// names one of them.
fn kept(words: &[String], all: &[&str], name: &str) -> bool {
    !words.iter().any(|w| all.contains(&w.as_str())) || words.iter().any(|w| w == name)
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// A section of the run: its label, the document's size, how many targets each operation
/// publishes.
const SECTIONS: [(&str, usize, usize); 3] = [
    ("1 KiB", 1024, 1),
    ("256 KiB", 256 * 1024, 1),
    ("16 targets", 1024, 16),
];

fn main() {
    let measuring = support::measuring();
    let words: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let labels: Vec<&str> = SECTIONS.iter().map(|(label, ..)| *label).collect();
    for (label, envelope_bytes, n) in SECTIONS {
        if !kept(&words, &labels, label) {
            continue;
        }
        // Each operation publishes every target of the section: as many per round as keep a
        // round's publications about the same whatever the section.
        let (rounds, per_round, warmup) = if measuring {
            (ROUNDS, (PER_ROUND / n).max(1), (WARMUP / n).max(1))
        } else {
            (1, 1, 0)
        };
        let bench = Bench::new(n, envelope_bytes);
        let targets = &bench.targets;
        let store = bench.open();
        let who = holder("bench");
        for target in targets {
            assert!(publish_once(&store, target, &who), "first publication");
        }
        let bytes = std::fs::read(bench.options.runtime_root.current_path(&targets[0]))
            .expect("published document");
        let dirs: Vec<PathBuf> = (0..n)
            .map(|i| {
                let dir = bench.dir.path().join("unfenced").join(i.to_string());
                std::fs::create_dir_all(&dir).expect("baseline dir");
                dir
            })
            .collect();
        let all: [Kind<'_>; 4] = [
            (
                "atomic write",
                Box::new(|| dirs.iter().for_each(|dir| atomic_write(dir, &bytes))),
            ),
            (
                "one-shot",
                Box::new(|| {
                    for target in targets {
                        assert!(publish_now_once(&store, target, &who));
                    }
                }),
            ),
            (
                "two-step",
                Box::new(|| {
                    for target in targets {
                        assert!(publish_once(&store, target, &who));
                    }
                }),
            ),
            (
                "batch",
                Box::new(|| assert!(publish_many_once(&store, targets, &who))),
            ),
        ];
        let kinds: Vec<Kind<'_>> = all
            .into_iter()
            .filter(|(name, _)| {
                *name == "atomic write" || kept(&words, &["one-shot", "two-step", "batch"], name)
            })
            .collect();
        let measured = measure(&kinds, rounds, per_round, warmup);
        if !measuring {
            println!("publication {label}: ok (test mode, nothing measured)");
            continue;
        }
        // Per publication (an operation publishes `n`).
        let mean = |t: &[Duration]| micros(t.iter().sum::<Duration>()) / (t.len() * n) as f64;
        let baseline = mean(&measured[0].times);
        let cpu_per_op = |m: &Measured| micros(m.cpu) / (m.times.len() * n) as f64;
        let cpu_baseline = cpu_per_op(&measured[0]);
        println!(
            "{label} ({} bytes, {n} target(s) an operation): {rounds} rounds of {per_round} of each kind, {warmup} unmeasured first; per publication:",
            bytes.len()
        );
        for ((name, _), m) in kinds.iter().zip(&measured) {
            let mut sorted = m.times.clone();
            sorted.sort();
            println!(
                "  {name:<12} mean {:7.0} µs  p50 {:7.0} µs  {:.2}x the atomic write   cpu {:6.0} µs  {:.2}x its cpu",
                mean(&m.times),
                micros(sorted[sorted.len() / 2]) / n as f64,
                mean(&m.times) / baseline,
                cpu_per_op(m),
                cpu_per_op(m) / cpu_baseline,
            );
        }
        let of = |kind: &str| {
            kinds
                .iter()
                .position(|(name, _)| *name == kind)
                .map(|k| mean(&measured[k].times))
        };
        if let (Some(one_shot), Some(batch)) = (of("one-shot"), of("batch")) {
            println!("  batch: {:.2}x the rate of one-shots", one_shot / batch);
        }
    }
}
