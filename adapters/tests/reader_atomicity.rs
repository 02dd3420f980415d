//! Reader-observable atomicity: readers parsing `current.json` in a loop while writers
//! publish thousands of times (some documents over 1 MiB) see only complete documents, and
//! each reader sees fencing epochs that never decrease.

mod support;

use solewriter_adapters::projection::lease::Acquisition;
use solewriter_adapters::projection::runtime::read_projection;
use solewriter_adapters::projection::store::ProjectionStore;
use solewriter_adapters::{Error, FileError};
use solewriter_core::projection::lease::LeaseState;
use solewriter_core::projection::target::TargetId;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use support::*;

const PUBLICATIONS: usize = 2_000;
const WRITERS: usize = 2;
const READERS: usize = 2;
const BIG: usize = 1_100_000;
const TTL: u64 = 60_000;

/// Envelope size for the n-th submission: mostly small, some medium, every 160th over 1 MiB.
/// (The test writes about 120 MB to the disk, a third of it for the big documents; the rest
/// is the per-commit cost of SQLite and the file system, 2,000 times.)
fn body_len(n: usize) -> usize {
    match n % 160 {
        0 => BIG,
        k if k % 7 == 0 => 16 * 1024,
        k => 16 * k,
    }
}

/// What the writers ran into besides publishing. `Busy` is a documented outcome under a
/// slow disk (the other writer held the write lock past the busy timeout); it is retried.
#[derive(Default)]
struct Hiccups {
    busy: AtomicUsize,
    releases_lost: AtomicUsize,
}

/// Held by the test's main thread and by every reader and writer: if its thread unwinds it
/// sets `failed`, so a failing thread ends the others instead of leaving them spinning (the
/// test fails, it never hangs); a reader's or writer's guard also counts its thread out of
/// `running` when it ends, however it ends.
struct Exit<'a> {
    sh: &'a Shared<'a>,
    worker: bool,
}

impl Drop for Exit<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.sh.failed.store(true, Ordering::SeqCst);
        }
        if self.worker {
            self.sh.running.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

struct Shared<'a> {
    f: &'a Fixture,
    target: &'a TargetId,
    published: AtomicUsize,
    submitted: AtomicUsize,
    failed: AtomicBool,
    /// Readers and writers not yet ended (all of them count from the start).
    running: AtomicUsize,
    hiccups: Hiccups,
    /// Set by a writer whose publication put a document over 1 MiB in place; cleared by the
    /// first reader that then completes a read of one. Writers wait while it is set (at most
    /// [`BIG_WAIT`]), so that readers read big documents however fast the writers go: the
    /// check that they did is not left to the scheduler.
    big_pending: AtomicBool,
}

/// The longest a writer waits for a reader to read a big document.
const BIG_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

fn writer(sh: &Shared<'_>, store: ProjectionStore, id: usize) {
    let _exit = Exit { sh, worker: true };
    let me = holder(&format!("writer-{id}"));
    while sh.published.load(Ordering::SeqCst) < PUBLICATIONS && !sh.failed.load(Ordering::SeqCst) {
        let waiting = std::time::Instant::now();
        while sh.big_pending.load(Ordering::SeqCst) && waiting.elapsed() < BIG_WAIT {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let n = sh.submitted.fetch_add(1, Ordering::SeqCst);
        let body = "x".repeat(body_len(n));
        // Watermarks from a shared counter: a lower one may lose the race and be rejected.
        match store.submit(&router(), &route(sh.target, n as u64 + 1, &body)) {
            Ok(_) | Err(Error::Rejected(_)) => {}
            Err(e) if e.is_retryable() => {
                sh.hiccups.busy.fetch_add(1, Ordering::SeqCst);
            }
            Err(e) => panic!("submit: {e}"),
        }
        match store.acquire(sh.target, &me) {
            Ok(Acquisition::Acquired(lease)) => {
                let epoch = lease.epoch();
                match lease.publish() {
                    Ok(_) => {
                        sh.published.fetch_add(1, Ordering::SeqCst);
                        let placed = std::fs::metadata(sh.f.current_path(sh.target));
                        if placed.is_ok_and(|m| m.len() > BIG as u64) {
                            sh.big_pending.store(true, Ordering::SeqCst);
                        }
                    }
                    Err(e) if e.is_retryable() => {
                        sh.hiccups.busy.fetch_add(1, Ordering::SeqCst);
                        end_lost_grant(sh, &store, epoch);
                    }
                    Err(e) => panic!("publish: {e}"),
                }
            }
            Ok(Acquisition::Held(_)) => std::thread::yield_now(),
            Err(e) if e.is_retryable() => {
                sh.hiccups.busy.fetch_add(1, Ordering::SeqCst);
            }
            Err(e) => panic!("acquire: {e}"),
        }
    }
}

/// A `Busy` publication left the lease armed and its drop tried to release it; if that was
/// busy too, the grant lives until its expiry, which the manual clock never reaches on its
/// own. Move the clock past it, as time would.
fn end_lost_grant(sh: &Shared<'_>, store: &ProjectionStore, epoch: u64) {
    let row = store.lease_row(sh.target).unwrap().expect("admitted");
    if row.fencing_epoch == epoch && matches!(row.state, LeaseState::Held(_)) {
        sh.hiccups.releases_lost.fetch_add(1, Ordering::SeqCst);
        sh.f.clock.advance(TTL);
    }
}

/// A hang detector, not a timing assertion. The run takes about 7 s here (164 s with the
/// disk's writes limited to 1 MB/s); if no publication lands for `STALL`, or the run passes
/// `BUDGET` (room for a disk ten times slower still, within a CI run's hour and a half), while
/// a reader or writer is still running, the run is stuck — e.g. a thread blocked for good in
/// a system call, which no flag can stop (also after another thread failed), or a disk slowed
/// to a crawl. It prints the counters straight to stderr (bypassing
/// the test harness's capture; it touches neither the store nor the disk) and exits the
/// process, so such a run fails with a diagnosis instead of running until an outer time
/// limit kills it silently. It ends when every reader and writer has ended.
fn watchdog(sh: &Shared<'_>) {
    use std::time::{Duration, Instant};
    const STALL: Duration = Duration::from_secs(300);
    const BUDGET: Duration = Duration::from_secs(2_700);
    const TICK: Duration = Duration::from_millis(100);
    let start = Instant::now();
    let (mut last, mut since) = (0, start);
    while sh.running.load(Ordering::SeqCst) > 0 {
        std::thread::sleep(TICK);
        let now = sh.published.load(Ordering::SeqCst);
        if now != last {
            (last, since) = (now, Instant::now());
        }
        if since.elapsed() > STALL || start.elapsed() > BUDGET {
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "reader_atomicity: stuck after {:?}: {now} publications, the last {:?} ago; \
                 submitted {}, busy {}, lost releases {}, failed {}, threads running {}",
                start.elapsed(),
                since.elapsed(),
                sh.submitted.load(Ordering::SeqCst),
                sh.hiccups.busy.load(Ordering::SeqCst),
                sh.hiccups.releases_lost.load(Ordering::SeqCst),
                sh.failed.load(Ordering::SeqCst),
                sh.running.load(Ordering::SeqCst),
            );
            std::process::exit(101);
        }
    }
}

#[test]
fn readers_never_see_a_torn_document_and_epochs_never_decrease() {
    let f = Fixture::with_timing(timing(TTL, 10_000), 2 * 1024 * 1024);
    let target = f.open().admit_target(&tuple("a")).unwrap();
    let sh = Shared {
        f: &f,
        target: &target,
        published: AtomicUsize::new(0),
        submitted: AtomicUsize::new(0),
        failed: AtomicBool::new(false),
        running: AtomicUsize::new(READERS + WRITERS),
        hiccups: Hiccups::default(),
        big_pending: AtomicBool::new(false),
    };
    let done = AtomicBool::new(false);
    // Connections are opened before any thread runs, so opening never races a write.
    let stores: Vec<_> = (0..WRITERS).map(|_| f.open()).collect();
    let reads = std::thread::scope(|s| {
        let _exit = Exit {
            sh: &sh,
            worker: false,
        };
        s.spawn(|| watchdog(&sh));
        let readers: Vec<_> = (0..READERS)
            .map(|_| {
                s.spawn(|| {
                    let _exit = Exit {
                        sh: &sh,
                        worker: true,
                    };
                    let (mut reads, mut last_epoch, mut big_seen, mut epochs_seen) =
                        (0usize, 0u64, 0usize, 0usize);
                    while !done.load(Ordering::SeqCst) && !sh.failed.load(Ordering::SeqCst) {
                        match read_projection(&f.options.runtime_root, &target) {
                            Ok(doc) => {
                                assert!(
                                    doc.fencing_epoch >= last_epoch,
                                    "epoch went back: {} < {last_epoch}",
                                    doc.fencing_epoch
                                );
                                if doc.fencing_epoch > last_epoch {
                                    epochs_seen += 1;
                                }
                                last_epoch = doc.fencing_epoch;
                                let envelope = doc.channels[0]
                                    .envelope
                                    .as_ref()
                                    .expect("an envelope")
                                    .get();
                                if envelope.len() > BIG {
                                    big_seen += 1;
                                    sh.big_pending.store(false, Ordering::SeqCst);
                                }
                                reads += 1;
                            }
                            Err(Error::File(FileError::NotPublished { .. })) => {}
                            Err(e) => panic!("torn or unreadable read after {reads} reads: {e}"),
                        }
                    }
                    (reads, big_seen, epochs_seen)
                })
            })
            .collect();
        let writers: Vec<_> = stores
            .into_iter()
            .enumerate()
            .map(|(id, store)| {
                let sh = &sh;
                s.spawn(move || writer(sh, store, id))
            })
            .collect();
        for w in writers {
            w.join().unwrap();
        }
        done.store(true, Ordering::SeqCst);
        readers
            .into_iter()
            .map(|r| r.join().unwrap())
            .collect::<Vec<_>>()
    });
    let total_reads: usize = reads.iter().map(|r| r.0).sum();
    let big_reads: usize = reads.iter().map(|r| r.1).sum();
    let publications = sh.published.load(Ordering::SeqCst);
    println!(
        "publications: {publications}, complete reads: {total_reads}, reads of >1 MiB documents: {big_reads}, \
         distinct epochs seen per reader: {:?}, busy answers retried: {}, grants left to expire: {}",
        reads.iter().map(|r| r.2).collect::<Vec<_>>(),
        sh.hiccups.busy.load(Ordering::SeqCst),
        sh.hiccups.releases_lost.load(Ordering::SeqCst),
    );
    assert!(publications >= PUBLICATIONS);
    assert!(
        big_reads > 0,
        "no reader completed a read of a document over 1 MiB"
    );
    // Non-vacuity: the readers really raced the writers.
    assert!(
        total_reads > publications,
        "readers read too little to mean anything"
    );
    assert!(
        reads.iter().all(|r| r.2 > 100),
        "each reader must observe many publications"
    );
    let final_doc = read_projection(&f.options.runtime_root, &target).unwrap();
    assert_eq!(
        final_doc.fencing_epoch,
        f.open().lease_row(&target).unwrap().unwrap().fencing_epoch
    );
}
