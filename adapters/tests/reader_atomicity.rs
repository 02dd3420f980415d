//! Reader-observable atomicity: readers parsing `current.json` in a loop while writers
//! publish thousands of times (some documents over 1 MiB) see only complete documents, and
//! each reader sees fencing epochs that never decrease.

mod support;

use solewriter_adapters::lease::Acquisition;
use solewriter_adapters::runtime::read_projection;
use solewriter_adapters::Error;
use solewriter_core::target::TargetId;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use support::*;

const PUBLICATIONS: usize = 2_000;
const WRITERS: usize = 2;
const READERS: usize = 2;
const BIG: usize = 1_100_000;

/// Envelope size for the n-th submission: mostly small, some medium, every 40th over 1 MiB.
fn body_len(n: usize) -> usize {
    match n % 40 {
        0 => BIG,
        k if k % 7 == 0 => 64 * 1024,
        k => 16 * k,
    }
}

fn writer(
    f: &Fixture,
    target: &TargetId,
    id: usize,
    published: &AtomicUsize,
    submitted: &AtomicUsize,
) {
    let store = f.open();
    let me = holder(&format!("writer-{id}"));
    while published.load(Ordering::SeqCst) < PUBLICATIONS {
        let n = submitted.fetch_add(1, Ordering::SeqCst);
        let body = "x".repeat(body_len(n));
        // Watermarks from a shared counter: a lower one may lose the race and be rejected.
        match store.submit(&router(), &route(target, n as u64 + 1, &body)) {
            Ok(_) | Err(Error::Rejected(_)) => {}
            Err(e) => panic!("submit: {e}"),
        }
        match store.acquire(target, &me) {
            Ok(Acquisition::Acquired(lease)) => {
                lease.publish().unwrap();
                published.fetch_add(1, Ordering::SeqCst);
            }
            Ok(Acquisition::Held(_)) | Err(Error::Busy { .. }) => std::thread::yield_now(),
            Err(e) => panic!("acquire: {e}"),
        }
    }
}

#[test]
fn readers_never_see_a_torn_document_and_epochs_never_decrease() {
    let f = Fixture::with_timing(timing(60_000, 10_000), 2 * 1024 * 1024);
    let target = f.open().admit_target(&tuple("a")).unwrap();
    let (published, submitted, done) = (
        AtomicUsize::new(0),
        AtomicUsize::new(0),
        AtomicBool::new(false),
    );
    let reads = std::thread::scope(|s| {
        let readers: Vec<_> = (0..READERS)
            .map(|_| {
                s.spawn(|| {
                    let (mut reads, mut last_epoch, mut big_seen, mut epochs_seen) =
                        (0usize, 0u64, 0usize, 0usize);
                    while !done.load(Ordering::SeqCst) {
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
                                let envelope = doc.channels[0].envelope.get();
                                if envelope.len() > BIG {
                                    big_seen += 1;
                                }
                                reads += 1;
                            }
                            Err(Error::NotPublished { .. }) => {}
                            Err(e) => panic!("torn or unreadable read after {reads} reads: {e}"),
                        }
                    }
                    (reads, big_seen, epochs_seen)
                })
            })
            .collect();
        let writers: Vec<_> = (0..WRITERS)
            .map(|id| {
                let (f, target, published, submitted) = (&f, &target, &published, &submitted);
                s.spawn(move || writer(f, target, id, published, submitted))
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
    let publications = published.load(Ordering::SeqCst);
    println!("publications: {publications}, complete reads: {total_reads}, reads of >1 MiB documents: {big_reads}, distinct epochs seen per reader: {:?}",
        reads.iter().map(|r| r.2).collect::<Vec<_>>());
    assert!(publications >= PUBLICATIONS);
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
