//! The two tables living in the host's own database, as in the Memory Core: the host writes
//! its own table in its own transactions, with its own busy timeout, while submissions,
//! publications and takeovers run on the same file. The host's rows and schema are untouched,
//! every host write succeeds within its busy timeout, and fencing holds.
//!
//! The host and the publishers advance in loose lockstep — neither side more than one step
//! ahead of the other — so they overlap all along and the run ends after a fixed amount of
//! work however slow the disk. (SQLite's lock is not fair: an earlier version let the
//! publishers go on until the host had committed 100 transactions, and under a busy disk the
//! host got 8 in 40 minutes while the publishers published 35,000 times.)

mod support;

use rusqlite::Connection;
use solewriter_adapters::projection::publication::PublishedNow;
use solewriter_adapters::projection::runtime::read_projection;
use solewriter_adapters::projection::store::{Initialized, ProjectionStore};
use solewriter_adapters::Error;
use solewriter_core::projection::lease::Fenced;
use std::sync::{Condvar, Mutex};
use std::time::Duration;
use support::*;

const HOST_BUSY_TIMEOUT_MS: u64 = 20_000;
const WORKERS: usize = 3;
/// Each worker publishes this many times; the host commits at least as many transactions.
const ROUNDS: u64 = 30;
/// How long either side may wait for the other's next step before the test fails (a hang
/// turned into a failure, not a timing assertion).
const STEP_BOUND: Duration = Duration::from_secs(300);

/// How far the host and each worker have got.
#[derive(Debug, Default)]
struct Progress {
    host: u64,
    workers: [u64; WORKERS],
    /// The workers are done (or one failed): the host stops.
    stop: bool,
}

/// The progress of both sides, and the condition variable each side waits on.
#[derive(Default)]
struct Lockstep {
    progress: Mutex<Progress>,
    changed: Condvar,
}

impl Lockstep {
    /// Records a step and wakes the other side.
    fn step(&self, record: impl FnOnce(&mut Progress)) {
        record(&mut self.progress.lock().unwrap());
        self.changed.notify_all();
    }

    /// Waits until `ready` holds; false when the host was told to stop.
    fn wait(&self, who: &str, ready: impl Fn(&Progress) -> bool) -> bool {
        let progress = self.progress.lock().unwrap();
        let (progress, timeout) = self
            .changed
            .wait_timeout_while(progress, STEP_BOUND, |p| !p.stop && !ready(p))
            .unwrap();
        assert!(
            !timeout.timed_out(),
            "{who} waited {STEP_BOUND:?} for the other side: {progress:?}"
        );
        !progress.stop
    }
}

fn host_schema(conn: &Connection) -> Vec<(String, Option<String>)> {
    conn.prepare(
        "SELECT name, sql FROM sqlite_master WHERE name NOT LIKE '%HookProjection%' ORDER BY name",
    )
    .unwrap()
    .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

/// Stops the host however the workers end.
struct StopOnDrop<'a>(&'a Lockstep);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.step(|p| p.stop = true);
    }
}

#[test]
fn the_host_writes_its_own_table_while_the_store_publishes_and_takes_over() {
    let mut f = Fixture::with_timing(timing(TTL_MS, 20_000), 64 * 1024);
    let path = f.dir.path().join("memory-core.sqlite");
    let host = Connection::open(&path).unwrap();
    host.busy_timeout(std::time::Duration::from_millis(HOST_BUSY_TIMEOUT_MS))
        .unwrap();
    host.query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0))
        .unwrap();
    host.execute_batch(
        "PRAGMA application_id = 4242; PRAGMA user_version = 17;
         CREATE TABLE SummarizationJobs (id INTEGER PRIMARY KEY, worker INTEGER, state TEXT);
         CREATE INDEX jobs_by_state ON SummarizationJobs (state);",
    )
    .unwrap();
    let schema_before = host_schema(&host);
    f.options.db_path = path.clone();
    assert_eq!(
        ProjectionStore::initialize(&path, &f.options.timing).unwrap(),
        Initialized::Created
    );
    let setup = f.open();
    let targets: Vec<_> = (0..WORKERS)
        .map(|w| setup.admit_target(&tuple(&format!("agent-{w}"))).unwrap())
        .collect();

    let lockstep = &Lockstep::default();
    let (host, host_writes, outcomes) = std::thread::scope(|s| {
        let host_thread = s.spawn(move || {
            let mut written = 0u64;
            let mut slowest = std::time::Duration::ZERO;
            // The host's transaction k waits for every worker to have finished round k - 1.
            while lockstep.wait("the host", |p| p.workers.iter().all(|w| *w >= written)) {
                let started = std::time::Instant::now();
                // The host's own transaction: a write and a read of its table.
                host.execute_batch("BEGIN IMMEDIATE").unwrap();
                host.execute(
                    "INSERT INTO SummarizationJobs (worker, state) VALUES (?1, 'queued')",
                    [written as i64],
                )
                .unwrap();
                let count: i64 = host
                    .query_row("SELECT count(*) FROM SummarizationJobs", [], |r| r.get(0))
                    .unwrap();
                assert_eq!(count as u64, written + 1);
                host.execute_batch("COMMIT").unwrap();
                slowest = slowest.max(started.elapsed());
                written += 1;
                lockstep.step(|p| p.host = written);
            }
            eprintln!("the host's slowest transaction took {slowest:?}");
            (host, written)
        });
        // However the workers end, the host stops.
        let _stop_host = StopOnDrop(lockstep);
        let workers: Vec<_> = targets
            .iter()
            .enumerate()
            .map(|(w, target)| {
                let f = &f;
                s.spawn(move || {
                    let store = f.open();
                    let mut published = 0u64;
                    for round in 1..=ROUNDS {
                        // Round r waits for the host's transaction r - 1.
                        lockstep.wait("a worker", |p| p.host + 1 >= round);
                        store.submit(&router(), &route(target, round, "r")).unwrap();
                        if round % 2 == 0 {
                            match store.publish_now(target, &holder("one-shot")).unwrap() {
                                PublishedNow::Published(_) => published += 1,
                                PublishedNow::Held(h) => panic!("held by {h:?}"),
                            }
                        } else {
                            let lease = expect_acquired(
                                store.acquire(target, &holder("two-step")).unwrap(),
                            );
                            lease.publish().unwrap();
                            published += 1;
                        }
                        lockstep.step(|p| p.workers[w] = round);
                    }
                    published
                })
            })
            .collect();
        let published: Vec<u64> = workers.into_iter().map(|w| w.join().unwrap()).collect();
        drop(_stop_host);
        let (host, written) = host_thread.join().unwrap();
        (host, written, published)
    });
    assert!(outcomes.iter().all(|n| *n == ROUNDS), "{outcomes:?}");
    eprintln!("host transactions committed during the run: {host_writes}");
    assert!(
        host_writes >= ROUNDS,
        "the host wrote meanwhile: {host_writes}"
    );

    // A takeover in the host's database: the stale holder is fenced, the successor publishes.
    let store = f.open();
    let target = &targets[0];
    let stale = expect_acquired(store.acquire(target, &holder("stale")).unwrap());
    f.clock.advance(TTL_MS + 1);
    let successor = expect_acquired(store.acquire(target, &holder("successor")).unwrap());
    let epoch = successor.epoch();
    assert!(matches!(
        stale.publish().unwrap_err(),
        Error::Fenced(Fenced::Superseded { .. })
    ));
    successor.publish().unwrap();
    let doc = read_projection(&f.options.runtime_root, target).unwrap();
    assert_eq!(doc.fencing_epoch, epoch);
    assert_eq!(
        epoch,
        outcomes[0] + 2,
        "one grant per publication, then the stale one and its successor"
    );

    // The host's rows and schema are untouched.
    let count: i64 = host
        .query_row("SELECT count(*) FROM SummarizationJobs", [], |r| r.get(0))
        .unwrap();
    assert_eq!(count as u64, host_writes);
    let distinct: i64 = host
        .query_row(
            "SELECT count(DISTINCT worker) FROM SummarizationJobs",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(
        distinct as u64, host_writes,
        "no host row lost or duplicated"
    );
    assert_eq!(host_schema(&host), schema_before);
    let pragma = |name: &str| -> i64 {
        host.query_row(&format!("PRAGMA {name}"), [], |r| r.get(0))
            .unwrap()
    };
    assert_eq!(
        (pragma("application_id"), pragma("user_version")),
        (4242, 17)
    );
}
