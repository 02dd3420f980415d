//! Foreground read latency while a writer holds the project lock for a long build, against a
//! read that waits for the writer, in the same run.
//!
//! A Git repository of `COMMITS` commits is built in a temp directory and its ledger is fully
//! persisted first, so both reads answer the same history walk (every commit's history and
//! hunk facts) from the snapshot. `beside_live_writer`: a writer thread holds the lock for the
//! whole benchmark; each `demand` read finds every fact in the current snapshot and, lazy,
//! never consults the lock.
//! `waiting_for_writer`: each iteration starts a writer whose build takes `WRITER_BUILD`, and
//! times a `build` that waits (bounded) for it — what a reader queueing behind an unrelated
//! writer would see. Both run with the system process probe and `git` from `PATH`.

#[path = "../tests/support/git_repo.rs"]
mod git_repo;

use criterion::{criterion_group, criterion_main, Criterion};
use git_repo::{repo_of, HERMETIC};
use solewriter_adapters::ledger::git_source::GitSource;
use solewriter_adapters::ledger::history::HistoryQuery;
use solewriter_adapters::ledger::{Derive, Ledger, LedgerError, Persisted};
use solewriter_adapters::project_lock::process::SystemProbe;
use solewriter_adapters::project_lock::Wait;
use solewriter_core::ledger::git_facts::Oid;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

const COMMITS: usize = 20;
/// How long the unrelated writer's build takes in `waiting_for_writer`.
const WRITER_BUILD: Duration = Duration::from_millis(200);
/// The waiting read's bound (never reached: the writer finishes first).
const WAIT_BOUND: Duration = Duration::from_secs(60);

fn history(d: &mut Derive<'_>, head: &Oid) -> Result<usize, LedgerError> {
    let query = HistoryQuery {
        heads: vec![head.clone()],
        limit: None,
        hunks: true,
    };
    let entries = solewriter_adapters::ledger::history::history(d, &query)?;
    Ok(entries
        .iter()
        .filter_map(|e| e.hunks.as_ref())
        .map(|h| h.files.len())
        .sum())
}

/// Holds the ledger's project lock in a writer thread until `release` is dropped or sent.
fn hold_writer<'scope>(
    ledger: &'scope Ledger<GitSource>,
    scope: &'scope std::thread::Scope<'scope, '_>,
    build: Option<Duration>,
) -> mpsc::Sender<()> {
    let (held_tx, held_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    scope.spawn(move || {
        ledger
            .build(Wait::Within(WAIT_BOUND), |_| {
                held_tx.send(()).expect("bench: writer signals");
                match build {
                    Some(d) => std::thread::sleep(d),
                    None => {
                        let _ = release_rx.recv();
                    }
                }
                Ok(())
            })
            .expect("bench: writer build");
    });
    held_rx.recv().expect("bench: writer holds the lock");
    release_tx
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("bench: temp dir");
    let contents: Vec<String> = (0..COMMITS).map(|i| format!("{i}\n")).collect();
    let repo = repo_of(dir.path(), &contents);
    let source = HERMETIC
        .iter()
        .fold(GitSource::new(&repo), |s, (k, v)| s.env(*k, *v));
    let head = source.resolve("HEAD").expect("bench: HEAD");
    let ledger = Ledger::new(dir.path().join("project"), source, Arc::new(SystemProbe));
    ledger
        .build(Wait::NoWait, |d| history(d, &head))
        .expect("bench: persist the ledger");

    let mut group = c.benchmark_group("demand_read");
    std::thread::scope(|s| {
        let release = hold_writer(&ledger, s, None);
        group.bench_function("beside_live_writer", |b| {
            b.iter(|| {
                let read = ledger.demand(|d| history(d, &head)).expect("bench: read");
                // Every fact is stored: a lazy demand read never consults the writer's lock.
                assert_eq!(read.persisted, Persisted::Unchanged);
                read.value
            })
        });
        drop(release);
    });
    group.bench_function("waiting_for_writer", |b| {
        b.iter_custom(|iterations| {
            let mut total = Duration::ZERO;
            for _ in 0..iterations {
                std::thread::scope(|s| {
                    hold_writer(&ledger, s, Some(WRITER_BUILD));
                    let start = Instant::now();
                    ledger
                        .build(Wait::Within(WAIT_BOUND), |d| history(d, &head))
                        .expect("bench: waiting read");
                    total += start.elapsed();
                });
            }
            total
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
