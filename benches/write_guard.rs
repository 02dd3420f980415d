//! Admission latency of the subtree write guard with 1,000, 10,000 and 100,000 held locks:
//! the trie [`LockIndex`] against the [`LinearLockTable`] reference scan, in the same run.
//!
//! Held locks are `/app/g{k}/c{j}` (100 components per group, each group held by one of eight
//! writers). `admit_denied` runs the whole `admit_write` (parent walk + conflict) for another
//! writer's write to a node inside a held subtree, which is denied and changes nothing;
//! `query_free` asks for the conflict of a free subtree next to the held ones.
//!
//! In criterion's test mode (`cargo test --bench write_guard`, or `cargo bench -- --test`: each
//! benchmark run once, as CI does) the two `linear/100000` benchmarks are left out: filling the
//! linear reference table costs one full scan per `acquire`, O(n²) in all, which at 100,000
//! locks takes minutes even optimized, for a body that is the same code as at 10,000. Every
//! other benchmark runs, the indexed ones at 100,000 included.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use solewriter_core::subtree::{
    admit_write, AgentContext, LinearLockTable, Lock, LockIndex, LockTable, Parent, SubtreePath,
    Writer,
};
use std::hint::black_box;

const PER_GROUP: usize = 100;

fn held_locks(n: usize) -> Vec<Lock> {
    (0..n)
        .map(|j| {
            let k = j / PER_GROUP;
            Lock {
                path: SubtreePath::parse(&format!("/app/g{k}/c{j}")).expect("bench path"),
                writer: Writer::new(Some(&format!("w{}", k % 8)), Some("s")).expect("bench writer"),
            }
        })
        .collect()
}

fn filled<T: LockTable + Default>(locks: &[Lock]) -> T {
    let mut table = T::default();
    for lock in locks {
        table
            .acquire(lock.clone())
            .expect("bench locks are disjoint");
    }
    table
}

/// Criterion's own rule for its test mode: no `--bench` argument (`cargo test`), or `--test`.
fn test_mode() -> bool {
    let args: Vec<String> = std::env::args().collect();
    !args.iter().any(|a| a == "--bench") || args.iter().any(|a| a == "--test")
}

/// The largest table the linear reference is filled to in test mode.
const TEST_MODE_LINEAR_MAX: usize = 10_000;

fn bench(c: &mut Criterion) {
    let linear_max = if test_mode() {
        TEST_MODE_LINEAR_MAX
    } else {
        usize::MAX
    };
    let intruder = AgentContext {
        agent_id: Some("intruder".into()),
        session_id: Some("s".into()),
    };
    for n in [1_000, 10_000, 100_000] {
        let locks = held_locks(n);
        let groups: Vec<String> = (0..n.div_ceil(PER_GROUP))
            .map(|k| format!("g{k}"))
            .collect();
        // Target: a child of the middle held component.
        let middle = n / 2;
        let target_parent = format!("c{middle}");
        let parent_of = |id: &str| -> Parent<'_> {
            match id {
                "app" => Parent::Root,
                "leaf" => Parent::Id(&target_parent),
                _ if id.starts_with('g') => Parent::Id("app"),
                _ => match id.strip_prefix('c').map(str::parse::<usize>) {
                    Some(Ok(j)) if j < n => Parent::Id(&groups[j / PER_GROUP]),
                    _ => Parent::Unknown,
                },
            }
        };
        let mut index: LockIndex = filled(&locks);
        let mut linear: Option<LinearLockTable> = (n <= linear_max).then(|| filled(&locks));
        let free = Lock {
            path: SubtreePath::parse("/app/g0/free").expect("bench path"),
            writer: Writer::new(Some("intruder"), Some("s")).expect("bench writer"),
        };

        let mut group = c.benchmark_group("admit_denied");
        group.bench_function(BenchmarkId::new("indexed", n), |b| {
            b.iter(|| {
                let denied = admit_write(
                    Some(&intruder),
                    black_box("leaf"),
                    parent_of,
                    Some(&mut index),
                );
                black_box(denied.is_err())
            })
        });
        if let Some(linear) = linear.as_mut() {
            group.bench_function(BenchmarkId::new("linear", n), |b| {
                b.iter(|| {
                    let denied = admit_write(
                        Some(&intruder),
                        black_box("leaf"),
                        parent_of,
                        Some(&mut *linear),
                    );
                    black_box(denied.is_err())
                })
            });
        }
        group.finish();

        let mut group = c.benchmark_group("query_free");
        group.bench_function(BenchmarkId::new("indexed", n), |b| {
            b.iter(|| black_box(index.conflict(black_box(&free))))
        });
        if let Some(linear) = &linear {
            group.bench_function(BenchmarkId::new("linear", n), |b| {
                b.iter(|| black_box(linear.conflict(black_box(&free))))
            });
        }
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
