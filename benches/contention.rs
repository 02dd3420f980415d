//! Contention: 1 (the uncontended baseline), 2, 4 and 8 threads on one target, each with its
//! own store connection.
//!
//! `acquire_release/N`: the threads race `acquire`; a winner releases at once; time per
//! successful acquisition (criterion's throughput line gives acquisitions per second).
//! `held_answer/N`: a lease is held for the whole run; one thread measures how long a `Held`
//! answer takes while N-1 others ask for the same target at the same time.
//! `cpu_work/N`: the same measurement of CPU work alone (no store), about as long as a `Held`
//! answer: what sharing the machine's cores with N-1 busy threads costs any answer.

mod support;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use solewriter::{Acquisition, ProjectionStore};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};
use support::{holder, Bench};

const THREADS: [usize; 4] = [1, 2, 4, 8];

/// Time for `iters` successful acquisitions among `threads` racing threads.
fn race(bench: &Bench, threads: usize, iters: u64) -> Duration {
    let target = &bench.targets[0];
    let stores: Vec<ProjectionStore> = (0..threads).map(|_| bench.open()).collect();
    let granted = AtomicU64::new(0);
    let start = Barrier::new(threads + 1);
    std::thread::scope(|s| {
        for (i, store) in stores.into_iter().enumerate() {
            let (granted, start) = (&granted, &start);
            s.spawn(move || {
                let who = holder(&format!("t{i}"));
                start.wait();
                while granted.load(Ordering::Relaxed) < iters {
                    if let Acquisition::Acquired(lease) =
                        store.acquire(target, &who).expect("acquire")
                    {
                        granted.fetch_add(1, Ordering::Relaxed);
                        lease.release().expect("release");
                    }
                }
            });
        }
        start.wait();
        let began = Instant::now();
        // The scope joins the threads before returning.
        began
    })
    .elapsed()
}

/// Time for `iters` calls of `ops[0]` on one thread while every other op of `ops` is called
/// in a loop on a thread of its own, until the measured thread is done.
fn contended<F: FnMut() + Send>(ops: Vec<F>, iters: u64) -> Duration {
    let mut ops = ops.into_iter();
    let mut measured = ops.next().expect("a measured op");
    let stop = AtomicBool::new(false);
    let start = Barrier::new(ops.len() + 1);
    std::thread::scope(|s| {
        for mut op in ops {
            let (stop, start) = (&stop, &start);
            s.spawn(move || {
                start.wait();
                while !stop.load(Ordering::Relaxed) {
                    op();
                }
            });
        }
        start.wait();
        let began = Instant::now();
        for _ in 0..iters {
            measured();
        }
        let elapsed = began.elapsed();
        stop.store(true, Ordering::Relaxed);
        elapsed
    })
}

/// Time for `iters` `Held` answers on one thread while `threads - 1` others also ask.
fn held(bench: &Bench, threads: usize, iters: u64) -> Duration {
    let target = &bench.targets[0];
    let ops = (0..threads)
        .map(|i| {
            let (store, who) = (bench.open(), holder(&format!("t{i}")));
            move || {
                let answer = store.acquire(target, &who).expect("acquire");
                assert!(matches!(answer, Acquisition::Held(_)));
            }
        })
        .collect();
    contended(ops, iters)
}

/// CPU work alone, about as long as a `Held` answer on this machine: the baseline of
/// `held_answer/N`. With more threads than cores, the measured thread gets only its share of
/// the cores (2 of 8 threads' worth on 2 cores), so no answer that is CPU work can stay within
/// 2x its one-thread time at 8 threads here, whatever it does.
fn cpu_work() {
    let mut x = std::hint::black_box(1u64);
    for i in 0..13_000 {
        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(i);
    }
    std::hint::black_box(x);
}

fn bench(c: &mut Criterion) {
    let bench = Bench::new(1, 1024);
    let mut group = c.benchmark_group("contention");
    group.throughput(Throughput::Elements(1));
    for threads in THREADS {
        group.bench_function(BenchmarkId::new("acquire_release", threads), |b| {
            b.iter_custom(|iters| race(&bench, threads, iters))
        });
    }
    // One lease held for the rest of the run.
    let owner = bench.open();
    let lease = match owner
        .acquire(&bench.targets[0], &holder("owner"))
        .expect("acquire")
    {
        Acquisition::Acquired(lease) => lease,
        Acquisition::Held(_) => panic!("the target is free"),
    };
    for threads in THREADS {
        group.bench_function(BenchmarkId::new("held_answer", threads), |b| {
            b.iter_custom(|iters| held(&bench, threads, iters))
        });
        group.bench_function(BenchmarkId::new("cpu_work", threads), |b| {
            b.iter_custom(|iters| contended(vec![cpu_work; threads], iters))
        });
    }
    group.finish();
    lease.release().expect("release");
}

criterion_group! {
    name = benches;
    config = support::criterion();
    targets = bench
}
criterion_main!(benches);
