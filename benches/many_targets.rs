//! Many targets: publications per second with 8 publisher threads spread over 1, 16 and 256
//! targets (and one publisher alone, for reference), against the disk's fsync rate measured in
//! the same run (`fsync`: overwrite one byte of a file and `sync_all` it, as the publisher
//! syncs its temp file).
//!
//! Each publisher, on its own store (warmed: it has published every target once), walks its
//! own rotation of the targets: a one-shot publication (`publish_now`), moving on if held. A
//! publication drafts (writes and fsyncs its temp file) outside every lock and fsyncs the
//! directory after its commit, so only its revalidation, rename, release and commit hold the
//! store's one write lock (and a redraft, when its draft lost a race): the file fsyncs of
//! different targets overlap. Threads of this process queue at the store's in-process gate
//! instead of in SQLite's back-off.
//!
//! `publish_8_grouped` is the same eight threads and rotations publishing as one host (one
//! holder) through one `PublicationGroup` over one store: the publications waiting while a
//! batch runs share the next transaction and its one WAL commit (group commit, at most 16 per
//! batch).
//!
//! `unfenced_1_writer` and `unfenced_8_writers` are the disk's own scaling in the same run:
//! the same document written the plain atomic way (temp file, fsync, rename, directory fsync)
//! by one thread, and by eight threads walking 1, 16 or 256 directories. A publication does
//! the unfenced write's fsyncs and its commit's besides, so eight publishers are not expected
//! to scale past what eight unfenced writers get from the disk.

mod support;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use solewriter::{InstanceDigest, ProjectionStore, PublicationGroup, PublishedNow};
use std::io::{Seek, SeekFrom, Write};
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};
use support::{atomic_write, holder, publish_now_once, Bench};

/// Time for `iters` operations by `workers.len()` threads (one worker each) over `n` targets:
/// each worker walks its own rotation of the targets, calling `op(worker, target index)`,
/// which answers whether it counted (a publication answered `Held` does not).
fn concurrently<W: Sync>(
    workers: &[W],
    n: usize,
    iters: u64,
    op: impl Fn(&W, usize) -> bool + Sync,
) -> Duration {
    let done = AtomicU64::new(0);
    let start = Barrier::new(workers.len() + 1);
    std::thread::scope(|s| {
        for (i, worker) in workers.iter().enumerate() {
            let (done, start, op) = (&done, &start, &op);
            s.spawn(move || {
                let mut next = i % n;
                start.wait();
                while done.load(Ordering::Relaxed) < iters {
                    if op(worker, next) {
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

/// `count` publishers, each with its own store and name, warmed ([`support::warm`]): made once
/// per configuration and kept across criterion's samples, so that the measured publications
/// are those of long-running stores, not each store's first of each target (which fsyncs the
/// target's parent directory too: over 256 targets, nearly every publication of a run).
fn publishers(bench: &Bench, count: usize) -> Vec<Mutex<(ProjectionStore, InstanceDigest)>> {
    let mut publishers: Vec<_> = (0..count)
        .map(|i| (bench.open(), holder(&format!("p{i}"))))
        .collect();
    support::warm(&mut publishers, &bench.targets);
    publishers.into_iter().map(Mutex::new).collect()
}

/// Time for `iters` one-shot publications by `publishers` (each thread locks its own,
/// uncontended).
fn publications(
    bench: &Bench,
    publishers: &[Mutex<(ProjectionStore, InstanceDigest)>],
    iters: u64,
) -> Duration {
    concurrently(publishers, bench.targets.len(), iters, |publisher, t| {
        let (store, who) = &*publisher.lock().expect("publisher");
        publish_now_once(store, &bench.targets[t], who)
    })
}

/// A group over one warmed store, publishing for one holder.
fn grouped(bench: &Bench) -> (PublicationGroup, InstanceDigest) {
    let mut one = vec![(bench.open(), holder("host"))];
    support::warm(&mut one, &bench.targets);
    let (store, who) = one.pop().expect("one store");
    let max_batch = NonZeroUsize::new(16).expect("non-zero");
    (PublicationGroup::new(store, max_batch), who)
}

/// Time for `iters` one-shot publications by eight threads through one group.
fn group_publications(
    bench: &Bench,
    group: &(PublicationGroup, InstanceDigest),
    iters: u64,
) -> Duration {
    let (group, who) = group;
    concurrently(&[(); 8], bench.targets.len(), iters, |(), t| {
        match group
            .publish_now(&bench.targets[t], who)
            .expect("publish_now")
        {
            PublishedNow::Published(_) => true,
            PublishedNow::Held(_) => false,
        }
    })
}

/// Time for `iters` unfenced atomic writes of `bytes` by `writers` threads over `dirs`.
fn unfenced_writes(dirs: &[PathBuf], bytes: &[u8], writers: usize, iters: u64) -> Duration {
    concurrently(&vec![(); writers], dirs.len(), iters, |(), t| {
        atomic_write(&dirs[t], bytes);
        true
    })
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
    let first = publish_now_once(&bench.open(), &bench.targets[0], &holder("first"));
    assert!(first, "first publication");
    // Made here, outside the benchmark closures: criterion calls a closure again for its
    // warm-up and for every sample.
    let one = publishers(&bench, 1);
    group.bench_function(BenchmarkId::new("publish_1_publisher", 1), |b| {
        b.iter_custom(|iters| publications(&bench, &one, iters))
    });
    for targets in [1, 16, 256] {
        let bench = Bench::new(targets, 1024);
        let eight = publishers(&bench, 8);
        group.bench_function(BenchmarkId::new("publish_8_publishers", targets), |b| {
            b.iter_custom(|iters| publications(&bench, &eight, iters))
        });
        if targets > 1 {
            let shared = grouped(&bench);
            group.bench_function(BenchmarkId::new("publish_8_grouped", targets), |b| {
                b.iter_custom(|iters| group_publications(&bench, &shared, iters))
            });
        }
    }
    // The disk's own scaling: the same document written unfenced, by one writer and by eight
    // over as many directories, so the publishers' ratio can be read against what eight
    // writers of plain atomic writes get from this disk in the same run.
    let bytes = std::fs::read(bench.options.runtime_root.current_path(&bench.targets[0]))
        .expect("published document");
    let dirs: Vec<PathBuf> = (0..256)
        .map(|i| {
            let dir = bench.dir.path().join("unfenced").join(i.to_string());
            std::fs::create_dir_all(&dir).expect("baseline dir");
            dir
        })
        .collect();
    group.bench_function(BenchmarkId::new("unfenced_1_writer", 1), |b| {
        b.iter_custom(|iters| unfenced_writes(&dirs[..1], &bytes, 1, iters))
    });
    for targets in [1, 16, 256] {
        group.bench_function(BenchmarkId::new("unfenced_8_writers", targets), |b| {
            b.iter_custom(|iters| unfenced_writes(&dirs[..targets], &bytes, 8, iters))
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
