//! Group commit on a real store and real files: the publications of many threads through one
//! `PublicationGroup` share transactions — the requests waiting while a batch runs go in the
//! next one, a target asked twice and another holder's request wait for a later one — every
//! caller gets its own target's answer, a failure of the shared transaction reaches every
//! caller of it with its kind, and a batch that panics leaves no caller waiting.

mod scripted_fs;
mod support;

use scripted_fs::{Call, Script, ScriptedFs};
use solewriter_adapters::projection::group::PublicationGroup;
use solewriter_adapters::projection::publication::PublishedNow;
use solewriter_adapters::Error;
use solewriter_core::error_kind::ErrorKind;
use solewriter_core::projection::lease::LeaseState;
use solewriter_core::projection::target::TargetId;
use std::io;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;
use support::*;

/// A store with `n` targets admitted, each with one submission.
fn admitted(f: &Fixture, n: usize) -> Vec<TargetId> {
    let store = f.open();
    (0..n)
        .map(|i| {
            let target = store.admit_target(&tuple(&format!("agent-{i}"))).unwrap();
            store.submit(&router(), &route(&target, 1, "0")).unwrap();
            target
        })
        .collect()
}

fn group(f: &Fixture, max_batch: usize) -> Arc<PublicationGroup> {
    Arc::new(PublicationGroup::new(
        f.open(),
        NonZeroUsize::new(max_batch).unwrap(),
    ))
}

fn epoch_of(result: &Result<PublishedNow, Error>) -> u64 {
    match result {
        Ok(PublishedNow::Published(published)) => published.fencing_epoch,
        other => panic!("not published: {other:?}"),
    }
}

/// Until `cond` holds (the other threads have queued): the test waits for an event, it never
/// asserts a time.
fn until(cond: impl Fn() -> bool) {
    while !cond() {
        thread::sleep(Duration::from_millis(1));
    }
}

type Answer = JoinHandle<Result<PublishedNow, Error>>;

/// Starts a thread publishing `target` for `who` through `group`, and waits until it has
/// queued (`queued`: the number of waiting requests once it has; 0: it leads the batch that
/// is running, which waits while the test holds the store).
fn publish(group: &Arc<PublicationGroup>, target: &TargetId, who: &str, queued: usize) -> Answer {
    let (group2, target, who) = (Arc::clone(group), target.clone(), holder(who));
    let handle = thread::spawn(move || group2.publish_now(&target, &who));
    match queued {
        0 => until(|| group.running()),
        _ => until(|| group.waiting() == queued),
    }
    handle
}

#[test]
fn the_requests_waiting_while_a_batch_runs_share_the_next_transaction() {
    let f = Fixture::new();
    let targets = admitted(&f, 8);
    let group = group(&f, 16);
    // The store is taken: the first caller leads a batch of its own request and waits for it.
    let store = group.store();
    let first = publish(&group, &targets[0], "h", 0);
    let rest: Vec<Answer> = (1..8)
        .map(|i| publish(&group, &targets[i], "h", i))
        .collect();
    drop(store);
    assert_eq!(epoch_of(&first.join().unwrap()), 1);
    for answer in rest {
        assert_eq!(epoch_of(&answer.join().unwrap()), 1);
    }
    // Two transactions for eight publications: the first one's, then the seven waiting.
    assert_eq!(group.batches(), 2);
    let store = f.open();
    for target in &targets {
        let row = store.lease_row(target).unwrap().unwrap();
        assert_eq!(row.fencing_epoch, 1);
        assert!(matches!(row.state, LeaseState::Released(_)), "{row:?}");
        let doc = String::from_utf8(f.current_bytes(target).unwrap()).unwrap();
        assert!(doc.contains("\"fencingEpoch\":1"), "{doc}");
        assert!(f.leftovers(target).is_empty(), "{:?}", f.leftovers(target));
    }
}

#[test]
fn a_target_asked_twice_another_holder_and_the_cap_each_wait_for_a_later_batch() {
    let f = Fixture::new();
    let targets = admitted(&f, 4);
    let group = group(&f, 2);
    let store = group.store();
    let first = publish(&group, &targets[0], "h", 0);
    // Queued in this order while the first batch waits for the store:
    let once = publish(&group, &targets[1], "h", 1);
    let twice = publish(&group, &targets[1], "h", 2); // same target: a later batch
    let other = publish(&group, &targets[2], "other", 3); // another holder: a later batch
    let fits = publish(&group, &targets[3], "h", 4); // joins `once`
    let capped = publish(&group, &targets[0], "h", 5); // `once` + `fits` fill the cap of 2
    let late = publish(&group, &targets[2], "h", 6); // `twice` + `capped` are full: later
    drop(store);
    assert_eq!(epoch_of(&first.join().unwrap()), 1);
    assert_eq!(epoch_of(&once.join().unwrap()), 1);
    assert_eq!(epoch_of(&fits.join().unwrap()), 1);
    assert_eq!(epoch_of(&twice.join().unwrap()), 2);
    assert_eq!(epoch_of(&capped.join().unwrap()), 2);
    assert_eq!(epoch_of(&other.join().unwrap()), 1);
    assert_eq!(epoch_of(&late.join().unwrap()), 2);
    // [first], [once, fits], [twice, capped], [other], [late].
    assert_eq!(group.batches(), 5);
    let doc = String::from_utf8(f.current_bytes(&targets[2]).unwrap()).unwrap();
    assert!(doc.contains("\"fencingEpoch\":2"), "{doc}");
}

/// Fails the random source's calls.
struct NoEntropy;

impl Script for NoEntropy {
    fn before(&self, call: Call<'_>) -> io::Result<()> {
        match call {
            Call::FillRandom => Err(io::Error::other("no entropy")),
            _ => Ok(()),
        }
    }
}

/// Once a document was renamed into a directory whose path holds `dir` (a target's), panics
/// at the next call of the random source: the next batch's leader drawing its holder tokens,
/// on its own thread.
struct PanicAfterRenameIn {
    dir: String,
    armed: AtomicBool,
}

impl Script for PanicAfterRenameIn {
    fn before(&self, call: Call<'_>) -> io::Result<()> {
        if matches!(call, Call::FillRandom) && self.armed.swap(false, Ordering::SeqCst) {
            panic!("the random source panicked");
        }
        Ok(())
    }

    fn after(&self, call: Call<'_>, succeeded: bool) {
        if let Call::Rename { to, .. } = call {
            if succeeded && to.to_string_lossy().contains(&self.dir) {
                self.armed.store(true, Ordering::SeqCst);
            }
        }
    }
}

fn scripted(f: &Fixture, script: impl Script + 'static) -> Arc<PublicationGroup> {
    let store = f.open().with_file_system(Arc::new(ScriptedFs(script)));
    Arc::new(PublicationGroup::new(store, NonZeroUsize::new(8).unwrap()))
}

#[test]
fn a_failure_of_the_shared_transaction_is_every_callers_answer_with_its_kind() {
    let f = Fixture::new();
    let targets = admitted(&f, 4);
    let group = scripted(&f, NoEntropy);
    let store = group.store();
    let first = publish(&group, &targets[0], "h", 0);
    let rest: Vec<Answer> = (1..4)
        .map(|i| publish(&group, &targets[i], "h", i))
        .collect();
    drop(store);
    for answer in std::iter::once(first).chain(rest) {
        match answer.join().unwrap() {
            Err(error @ Error::Random(_)) => {
                assert_eq!(error.kind(), ErrorKind::Environment);
                assert!(error.to_string().contains("no entropy"), "{error}");
            }
            other => panic!("not the random source's failure: {other:?}"),
        }
    }
    assert_eq!(group.batches(), 2);
    for target in &targets {
        assert_eq!(f.current_bytes(target), None, "nothing published");
        assert_eq!(
            f.open().lease_row(target).unwrap().unwrap().fencing_epoch,
            0
        );
    }
}

/// A group whose second batch panics as it starts (its leader drawing the holder tokens): the
/// first caller (`targets[0]`) leads the first batch and publishes; `a` (`targets[1]`, holder
/// `h`) and `b` (`targets[2]`, holder `b_holder`) queued while it waited for the store.
fn second_batch_panics(
    f: &Fixture,
    targets: &[TargetId],
    b_holder: &str,
) -> (Arc<PublicationGroup>, Answer, Answer) {
    let group = scripted(
        f,
        PanicAfterRenameIn {
            dir: targets[0].to_string(),
            armed: AtomicBool::new(false),
        },
    );
    let store = group.store();
    let first = publish(&group, &targets[0], "h", 0);
    let a = publish(&group, &targets[1], "h", 1);
    let b = publish(&group, &targets[2], b_holder, 2);
    drop(store);
    assert_eq!(epoch_of(&first.join().unwrap()), 1);
    (group, a, b)
}

#[test]
fn a_batch_that_panics_answers_its_callers_and_the_group_goes_on() {
    let f = Fixture::new();
    let targets = admitted(&f, 3);
    let (group, a, b) = second_batch_panics(&f, &targets, "h");
    // The second batch, [a, b], panics as its leader draws the holder tokens: the leader's
    // thread panics, the other caller is answered, not left waiting.
    let (a, b) = (a.join(), b.join());
    let answered = match (a, b) {
        (Err(_), Ok(answer)) | (Ok(answer), Err(_)) => answer,
        other => panic!("one leader panics, one follower is answered: {other:?}"),
    };
    match answered {
        Err(Error::Protocol(e)) => assert!(e.to_string().contains("publication group"), "{e}"),
        other => panic!("not answered as unfinished: {other:?}"),
    }
    assert_eq!(group.batches(), 2);
    // The group goes on: the panicked transaction was rolled back, the next commits.
    for target in &targets[1..] {
        assert_eq!(epoch_of(&group.publish_now(target, &holder("h"))), 1);
    }
    assert_eq!(group.batches(), 4);
}

#[test]
fn a_leader_that_panics_withdraws_its_own_request_and_leaves_the_others_waiting_their_turn() {
    let f = Fixture::new();
    let targets = admitted(&f, 3);
    // `b` is of another holder: not in `a`'s batch.
    let (group, a, b) = second_batch_panics(&f, &targets, "other");
    // The second batch is `a` alone, led by `a` or by `b`, and panics as it starts.
    match (a.join(), b.join()) {
        // `a` led it: `a` unwinds, `b` leads the next batch and publishes.
        (Err(_), Ok(answer)) => assert_eq!(epoch_of(&answer), 1),
        // `b` led it: `b` unwinds and its request is withdrawn, `a` is answered.
        (Ok(Err(Error::Protocol(e))), Err(_)) => {
            assert!(e.to_string().contains("publication group"), "{e}");
            assert_eq!(f.current_bytes(&targets[2]), None, "b's request withdrawn");
        }
        other => panic!("one leader panics, the other caller is answered: {other:?}"),
    }
    assert_eq!(group.waiting(), 0);
    assert!(!group.running());
}
