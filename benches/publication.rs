//! Publication cycle vs an unfenced atomic write, for 1 KiB and 256 KiB documents.
//!
//! `fenced_cycle` is what a holder pays for one two-step publication: acquire (one serialized
//! transaction, committed) + publish (revalidate, compose, temp write + fsync, deadline check,
//! rename, directory fsync, conditional release, commit). `one_shot` is `publish_now`: the
//! grant, the publication and the release in one transaction (one commit fewer). `atomic_write` writes the same
//! bytes the unfenced way: temp sibling, fsync, rename, directory fsync. The store runs with
//! `synchronous = FULL`, set inside `ProjectionStore::open` on its private connection; the
//! cost of FULL against NORMAL is measured on the plain-SQLite baseline in `submission.rs`.

mod support;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use support::{atomic_write, holder, publish_now_once, publish_once, Bench};

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("publication");
    for (label, envelope_bytes) in [("1KiB", 1024), ("256KiB", 256 * 1024)] {
        let bench = Bench::new(1, envelope_bytes);
        let target = &bench.targets[0];
        let store = bench.open();
        let who = holder("bench");
        assert!(publish_once(&store, target, &who), "first publication");
        group.bench_function(BenchmarkId::new("fenced_cycle", label), |b| {
            b.iter(|| assert!(publish_once(&store, target, &who)))
        });
        group.bench_function(BenchmarkId::new("one_shot", label), |b| {
            b.iter(|| assert!(publish_now_once(&store, target, &who)))
        });
        let bytes = std::fs::read(bench.options.runtime_root.current_path(target))
            .expect("published document");
        let dir = bench.dir.path().join("unfenced");
        std::fs::create_dir(&dir).expect("baseline dir");
        group.bench_function(BenchmarkId::new("atomic_write", label), |b| {
            b.iter(|| atomic_write(&dir, &bytes))
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
