//! Many targets: publications per second with 8 publisher threads spread over 1, 16 and 256
//! targets (and one publisher alone, for reference), against the disk's fsync rate measured in the same run (`fsync`: overwrite one
//! byte of a file and `sync_all` it, as the publisher syncs its temp file).
//!
//! Each publisher walks its own rotation of the targets: a one-shot publication
//! (`publish_now`), moving on if held. A publication writes and fsyncs its document under the
//! target's lock alone and fsyncs the directory after its commit, so only its revalidation,
//! rename, release and commit hold the store's one write lock: the file fsyncs of different
//! targets overlap. Threads of this process queue at the store's in-process gate instead of in
//! SQLite's back-off.

mod support;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::io::{Seek, SeekFrom, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};
use support::{holder, publish_now_once, Bench};

/// Time for `iters` publications by `publishers` threads over the bench's targets.
fn publications(bench: &Bench, publishers: usize, iters: u64) -> Duration {
    let stores: Vec<_> = (0..publishers).map(|_| bench.open()).collect();
    let done = AtomicU64::new(0);
    let start = Barrier::new(publishers + 1);
    let n = bench.targets.len();
    std::thread::scope(|s| {
        for (i, store) in stores.into_iter().enumerate() {
            let (done, start) = (&done, &start);
            s.spawn(move || {
                let who = holder(&format!("p{i}"));
                let mut next = i % n;
                start.wait();
                while done.load(Ordering::Relaxed) < iters {
                    if publish_now_once(&store, &bench.targets[next], &who) {
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                    next = (next + 1) % n;
                }
            });
        }
        start.wait();
        Instant::now()
    })
    .elapsed()
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("many_targets");
    group.throughput(Throughput::Elements(1));
    let scratch = tempfile::tempfile_in(env!("CARGO_TARGET_TMPDIR")).expect("scratch file");
    let mut file = scratch;
    group.bench_function("fsync", |b| {
        b.iter(|| {
            file.seek(SeekFrom::Start(0)).expect("seek");
            file.write_all(b"x").expect("write");
            file.sync_all().expect("fsync");
        })
    });
    // The uncontended rate of one publisher, for reference.
    let bench = Bench::new(1, 1024);
    group.bench_function(BenchmarkId::new("publish_1_publisher", 1), |b| {
        b.iter_custom(|iters| publications(&bench, 1, iters))
    });
    for targets in [1, 16, 256] {
        let bench = Bench::new(targets, 1024);
        group.bench_function(BenchmarkId::new("publish_8_publishers", targets), |b| {
            b.iter_custom(|iters| publications(&bench, 8, iters))
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = support::criterion();
    targets = bench
}
criterion_main!(benches);
