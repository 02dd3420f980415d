//! THE fencing property with real SQLite and real threads: once a successor's acquisition
//! has committed, no earlier holder mutates `current.json`; and a holder paused inside its
//! publication transaction cannot be taken over.

mod support;

use solewriter_adapters::projection::publication::{PublishProbe, PublishStep, PublishedNow};
use solewriter_adapters::projection::runtime::read_projection;
use solewriter_adapters::{Error, FileError};
use solewriter_core::projection::lease::{Fenced, LeaseState};
use solewriter_core::projection::target::TargetId;
use solewriter_core::projection::{DocumentError, Draft, MAX_DOCUMENT_BYTES};
use solewriter_core::time::Millis;
use std::sync::mpsc;
use std::sync::Mutex;
use support::*;

/// A probe that parks the publisher at `step` until the test lets it go.
struct PauseAt {
    step: PublishStep,
    reached: mpsc::Sender<()>,
    resume: Mutex<mpsc::Receiver<()>>,
}

impl PublishProbe for PauseAt {
    fn reached(&self, step: PublishStep, _: &TargetId, _: u64) {
        if step == self.step {
            self.reached.send(()).unwrap();
            self.resume.lock().unwrap().recv().unwrap();
        }
    }
}

fn published_epoch(f: &Fixture, target: &TargetId) -> u64 {
    read_projection(&f.options.runtime_root, target)
        .unwrap()
        .fencing_epoch
}

#[test]
fn stale_holder_paused_before_publishing_is_fenced_after_takeover() {
    let f = Fixture::new();
    let target = f.open().admit_target(&tuple("a")).unwrap();
    f.open()
        .submit(&router(), &route(&target, 1, "first"))
        .unwrap();
    let (acquired_tx, acquired_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (f, target) = (&f, &target);
    std::thread::scope(|s| {
        let go_tx = go_tx; // moved in: dropped (waking A) if an assertion below fails
        let a = s.spawn(move || {
            let store = f.open();
            let lease = expect_acquired(store.acquire(target, &holder("a")).unwrap());
            acquired_tx.send(lease.epoch()).unwrap();
            go_rx.recv().unwrap(); // A is held here, before publishing
            lease.publish()
        });
        assert_eq!(acquired_rx.recv().unwrap(), 1);
        f.clock.advance(TTL_MS); // A's lease expires
        let b = s.spawn(move || {
            let store = f.open();
            let lease = expect_acquired(store.acquire(target, &holder("b")).unwrap());
            assert_eq!(lease.epoch(), 2);
            lease.publish().unwrap()
        });
        let b_published = b.join().unwrap();
        let b_bytes = f.current_bytes(target).unwrap();
        // A clock jump backwards must not revive A: safety does not depend on the clock.
        f.clock.set(START);
        go_tx.send(()).unwrap();
        let err = a.join().unwrap().unwrap_err();
        assert!(
            matches!(err, Error::Fenced(Fenced::Superseded { current_epoch: 2 })),
            "{err}"
        );
        assert_eq!(
            f.current_bytes(target).unwrap(),
            b_bytes,
            "current.json still holds B's document"
        );
        assert_eq!(b_published.fencing_epoch, 2);
        assert_eq!(published_epoch(f, target), 2);
        assert!(f.leftovers(target).is_empty());
    });
}

/// The successor holds a live, unreleased grant (it has not published yet) and the clock has
/// jumped back so that the stale holder's own grant looks unexpired: only the epoch and token
/// check stands between the stale holder and `current.json`.
#[test]
fn stale_holder_is_fenced_while_the_successor_still_holds_its_grant() {
    let f = Fixture::new();
    let store = f.open();
    let target = store.admit_target(&tuple("a")).unwrap();
    store.submit(&router(), &route(&target, 1, "x")).unwrap();
    expect_acquired(store.acquire(&target, &holder("z")).unwrap())
        .publish()
        .unwrap();
    let before = f.current_bytes(&target).unwrap();
    let a = expect_acquired(store.acquire(&target, &holder("a")).unwrap());
    f.clock.advance(TTL_MS);
    let store_b = f.open();
    let b = expect_acquired(store_b.acquire(&target, &holder("b")).unwrap());
    f.clock.set(START); // A's grant (acquired at START + 0) no longer looks expired
    let err = a.publish().unwrap_err();
    assert!(
        matches!(err, Error::Fenced(Fenced::Superseded { current_epoch: 3 })),
        "{err}"
    );
    assert_eq!(
        f.current_bytes(&target).unwrap(),
        before,
        "current.json untouched"
    );
    assert!(
        matches!(
            store.lease_row(&target).unwrap().unwrap().state,
            LeaseState::Held(_)
        ),
        "B still holds"
    );
    assert_eq!(b.publish().unwrap().fencing_epoch, 3);
}

/// `Busy` at the start of publication: nothing is written and the lease was not used; the
/// safety-net release is attempted (busy too, here), so the grant ends at its expiry at the
/// latest.
#[test]
fn busy_store_at_publication_writes_nothing_and_the_grant_still_ends() {
    let f = Fixture::with_timing(timing(TTL_MS, 50), 1024);
    let store = f.open();
    let target = store.admit_target(&tuple("a")).unwrap();
    let a = expect_acquired(store.acquire(&target, &holder("a")).unwrap());
    let blocker = rusqlite::Connection::open(&f.options.db_path).unwrap();
    blocker.execute_batch("BEGIN IMMEDIATE;").unwrap();
    assert!(matches!(
        a.publish().unwrap_err(),
        Error::Busy { timeout_ms: 50 }
    ));
    blocker.execute_batch("ROLLBACK;").unwrap();
    assert!(f.current_bytes(&target).is_none(), "nothing written");
    assert!(f.leftovers(&target).is_empty());
    f.clock.advance(TTL_MS);
    assert_eq!(
        expect_acquired(store.acquire(&target, &holder("b")).unwrap()).epoch(),
        2
    );
}

/// Holds the store's write lock from just before the publication's `at`-th `begin` until just
/// before it lets its target lock go, so that transaction gets `Busy` and ends — and the
/// release of the unused grant that follows finds the store free.
struct BusyAtBegin {
    blocker: rusqlite::Connection,
    at: u32,
    begins: Mutex<u32>,
}

impl BusyAtBegin {
    fn new(f: &Fixture, at: u32) -> Self {
        BusyAtBegin {
            blocker: rusqlite::Connection::open(&f.options.db_path).unwrap(),
            at,
            begins: Mutex::new(0),
        }
    }
}

impl PublishProbe for BusyAtBegin {
    fn reached(&self, _: PublishStep, _: &TargetId, _: u64) {}

    fn before(&self, effect: &'static str, _: &TargetId, _: u64) {
        let mut begins = self.begins.lock().unwrap();
        match effect {
            "begin" => {
                *begins += 1;
                if *begins == self.at {
                    self.blocker.execute_batch("BEGIN IMMEDIATE;").unwrap();
                }
            }
            "unlock-target" if *begins == self.at && !self.blocker.is_autocommit() => {
                self.blocker.execute_batch("ROLLBACK;").unwrap()
            }
            _ => {}
        }
    }
}

/// A publication that could not start (`Busy`) leaves its lease armed, and dropping it
/// releases it: the row is `released` with no clock moved.
#[test]
fn a_publication_that_could_not_start_releases_its_grant_on_drop() {
    let f = Fixture::with_timing(timing(TTL_MS, 50), 1024);
    let store = f.open();
    let target = store.admit_target(&tuple("a")).unwrap();
    let a = expect_acquired(store.acquire(&target, &holder("a")).unwrap());
    let probe = BusyAtBegin::new(&f, 1);
    assert!(matches!(
        a.publish_observed(&probe).unwrap_err(),
        Error::Busy { timeout_ms: 50 }
    ));
    assert!(matches!(
        store.lease_row(&target).unwrap().unwrap().state,
        LeaseState::Released(_)
    ));
    assert!(f.current_bytes(&target).is_none(), "nothing written");
}

/// A one-shot publication that takes over an expired grant commits its own grant first; when
/// the publication with that grant then cannot start (`Busy`), the grant is released at once,
/// as a dropped lease's is: the row ends `released` at the new epoch with no clock moved, and
/// nothing is written.
#[test]
fn a_one_shot_takeover_whose_publication_could_not_start_releases_its_grant() {
    let f = Fixture::with_timing(timing(TTL_MS, 50), 1024);
    let store = f.open();
    let target = store.admit_target(&tuple("a")).unwrap();
    let stale = expect_acquired(store.acquire(&target, &holder("z")).unwrap());
    // z's grant expires, unreleased. The takeover's grant then commits in the first
    // transaction; the publication's `begin` is `Busy`.
    f.clock.advance(TTL_MS + 1);
    let probe = BusyAtBegin::new(&f, 2);
    assert!(matches!(
        store
            .publish_now_observed(&target, &holder("a"), &probe)
            .unwrap_err(),
        Error::Busy { timeout_ms: 50 }
    ));
    assert_eq!(
        *probe.begins.lock().unwrap(),
        2,
        "the grant's envelope, then the publication's"
    );
    let row = store.lease_row(&target).unwrap().unwrap();
    assert_eq!(row.fencing_epoch, 2, "the takeover's grant committed");
    assert!(
        matches!(row.state, LeaseState::Released(_)),
        "the unused grant is released: {:?}",
        row.state
    );
    assert!(f.current_bytes(&target).is_none(), "nothing written");
    assert!(f.leftovers(&target).is_empty());
    drop(stale);
}

#[test]
fn holder_paused_inside_its_transaction_cannot_be_taken_over_and_aborts_at_expiry() {
    let f = Fixture::with_timing(timing(TTL_MS, 100), 1024);
    let target = f.open().admit_target(&tuple("a")).unwrap();
    f.open()
        .submit(&router(), &route(&target, 1, "first"))
        .unwrap();
    // An earlier, complete publication.
    {
        let store = f.open();
        expect_acquired(store.acquire(&target, &holder("z")).unwrap())
            .publish()
            .unwrap();
    }
    let before = f.current_bytes(&target).unwrap();
    f.open()
        .submit(&router(), &route(&target, 2, "second"))
        .unwrap();
    let (reached_tx, reached_rx) = mpsc::channel();
    let (resume_tx, resume_rx) = mpsc::channel();
    let probe = PauseAt {
        step: PublishStep::Revalidated,
        reached: reached_tx,
        resume: Mutex::new(resume_rx),
    };
    let (f, target) = (&f, &target);
    std::thread::scope(|s| {
        let resume_tx = resume_tx; // moved in: dropped (waking A) if an assertion below fails
                                   // The probe moves into A: if A fails early, its `reached` sender is dropped and the
                                   // test fails instead of waiting forever.
        let a = s.spawn(move || {
            let probe = probe;
            let store = f.open();
            let lease = expect_acquired(store.acquire(target, &holder("a")).unwrap());
            assert_eq!(lease.epoch(), 2);
            lease.publish_observed(&probe)
        });
        reached_rx.recv().unwrap(); // A is inside its transaction, its draft's temp written
        assert_eq!(
            f.leftovers(target).len(),
            1,
            "A's temp file exists while it is paused"
        );
        f.clock.advance(TTL_MS + 1); // A's lease is now expired by the clock
        let store_b = f.open();
        let err = store_b.acquire(target, &holder("b")).unwrap_err();
        assert!(
            matches!(err, Error::File(FileError::Busy { .. })),
            "B must not take over mid-transaction (A holds the target's lock): {err}"
        );
        assert_eq!(store_b.lease_row(target).unwrap().unwrap().fencing_epoch, 2);
        resume_tx.send(()).unwrap();
        let err = a.join().unwrap().unwrap_err();
        assert!(matches!(err, Error::LeaseExpired(_)), "{err}");
        assert_eq!(
            f.current_bytes(target).unwrap(),
            before,
            "current.json unchanged"
        );
        assert!(f.leftovers(target).is_empty(), "no temp file remains");
        assert!(matches!(
            store_b.lease_row(target).unwrap().unwrap().state,
            LeaseState::Released(_)
        ));
    });
    // Now B gets it.
    let store_b = f.open();
    let lease = expect_acquired(store_b.acquire(target, &holder("b")).unwrap());
    assert_eq!(lease.epoch(), 3);
}

/// A holder paused after writing its draft, before its transaction, holds no lock at all: once
/// its lease has expired a contender for the same target is granted and publishes at once
/// (its sweep removes the paused draft), and another target publishes through the same store
/// meanwhile. Resumed, the paused holder is fenced and renames nothing.
#[test]
fn holder_paused_before_its_transaction_blocks_nobody() {
    let f = Fixture::with_timing(timing(TTL_MS, 100), 1024);
    let (target, other) = {
        let store = f.open();
        (
            store.admit_target(&tuple("a")).unwrap(),
            store.admit_target(&tuple("b")).unwrap(),
        )
    };
    for t in [&target, &other] {
        f.open().submit(&router(), &route(t, 1, "one")).unwrap();
    }
    let (reached_tx, reached_rx) = mpsc::channel();
    let (resume_tx, resume_rx) = mpsc::channel();
    let probe = PauseAt {
        step: PublishStep::TempWritten,
        reached: reached_tx,
        resume: Mutex::new(resume_rx),
    };
    let (f, target, other) = (&f, &target, &other);
    std::thread::scope(|s| {
        let resume_tx = resume_tx;
        let a = s.spawn(move || {
            let probe = probe;
            let store = f.open();
            let lease = expect_acquired(store.acquire(target, &holder("a")).unwrap());
            lease.publish_observed(&probe)
        });
        reached_rx.recv().unwrap();
        assert_eq!(f.leftovers(target).len(), 1, "A's draft is written");
        f.clock.advance(TTL_MS + 1);
        let store_b = f.open();
        let b = expect_acquired(store_b.acquire(target, &holder("b")).unwrap());
        assert_eq!(b.publish().unwrap().fencing_epoch, 2);
        let published_by_b = f.current_bytes(target).unwrap();
        assert!(
            f.leftovers(target).is_empty(),
            "B's sweep removed A's draft"
        );
        // The store's write lock is free: the other target is published meanwhile.
        let published = store_b.publish_now(other, &holder("b")).unwrap();
        assert!(
            matches!(&published, PublishedNow::Published(p) if p.fencing_epoch == 1),
            "{published:?}"
        );
        assert!(f.current_bytes(other).is_some());
        resume_tx.send(()).unwrap();
        let err = a.join().unwrap().unwrap_err();
        assert!(
            matches!(err, Error::Fenced(Fenced::Superseded { current_epoch: 2 })),
            "{err}"
        );
        assert_eq!(
            f.current_bytes(target).unwrap(),
            published_by_b,
            "A renamed nothing"
        );
        assert!(f.leftovers(target).is_empty(), "nothing left behind");
    });
}

/// A probe that advances the manual clock at one step.
struct AdvanceAt<'a>(
    PublishStep,
    &'a solewriter_adapters::clock::ManualClock,
    u64,
);

impl PublishProbe for AdvanceAt<'_> {
    fn reached(&self, step: PublishStep, _: &TargetId, _: u64) {
        if step == self.0 {
            self.1.advance(self.2);
        }
    }
}

#[test]
fn a_render_or_write_that_passes_expiry_aborts_without_renewal() {
    // Past expiry while drafting (before the transaction): the revalidation fences it. Past
    // expiry inside the transaction: the deadline check before the rename aborts it.
    for step in [
        PublishStep::Composed,
        PublishStep::TempWritten,
        PublishStep::Revalidated,
    ] {
        let f = Fixture::new();
        let store = f.open();
        let target = store.admit_target(&tuple("a")).unwrap();
        store.submit(&router(), &route(&target, 1, "x")).unwrap();
        let lease = expect_acquired(store.acquire(&target, &holder("a")).unwrap());
        let expires_at = lease.expires_at();
        let err = lease
            .publish_observed(&AdvanceAt(step, &f.clock, TTL_MS))
            .unwrap_err();
        match err {
            Error::LeaseExpired(d) if step == PublishStep::Revalidated => {
                assert_eq!(d.expires_at, expires_at, "{step:?}: not extended")
            }
            Error::Fenced(Fenced::Expired) if step != PublishStep::Revalidated => {}
            other => panic!("{step:?}: {other}"),
        }
        assert!(
            f.current_bytes(&target).is_none(),
            "{step:?}: current.json untouched"
        );
        assert!(f.leftovers(&target).is_empty(), "{step:?}: temp removed");
        let row = store.lease_row(&target).unwrap().unwrap();
        assert!(
            matches!(row.state, LeaseState::Released(_)),
            "{step:?}: released conditionally"
        );
        assert_eq!(
            row.state.grant().unwrap().expires_at,
            expires_at,
            "{step:?}: never extended"
        );
    }
}

#[test]
fn expired_before_publishing_is_fenced() {
    let f = Fixture::new();
    let store = f.open();
    let target = store.admit_target(&tuple("a")).unwrap();
    let lease = expect_acquired(store.acquire(&target, &holder("a")).unwrap());
    f.clock.advance(TTL_MS);
    assert!(matches!(
        lease.publish().unwrap_err(),
        Error::Fenced(Fenced::Expired)
    ));
    assert!(f.current_bytes(&target).is_none());
    assert!(matches!(
        store.lease_row(&target).unwrap().unwrap().state,
        LeaseState::Released(_)
    ));
}

/// Every grant, publication and release takes the target's lock file under
/// `hook-projections/`: with that directory unusable, a grant is refused (nothing written),
/// and a holder whose directory broke after its grant can neither publish nor release — its
/// grant ends at expiry, and nothing is written.
#[test]
fn unwritable_runtime_directory_is_a_typed_error_and_writes_nothing() {
    let f = Fixture::new();
    let store = f.open();
    let target = store.admit_target(&tuple("a")).unwrap();
    let lease = expect_acquired(store.acquire(&target, &holder("a")).unwrap());
    let projections = f.options.runtime_root.path().join("hook-projections");
    std::fs::remove_file(projections.join(format!("{target}.lock"))).unwrap();
    std::fs::remove_dir(&projections).unwrap();
    std::fs::write(&projections, b"not a dir").unwrap();
    let err = lease.publish().unwrap_err();
    assert!(
        matches!(err, Error::File(FileError::UnsafeRuntimeDir { .. })),
        "{err}"
    );
    let row = store.lease_row(&target).unwrap().unwrap();
    assert!(matches!(row.state, LeaseState::Held(_)), "{row:?}");
    f.clock.advance(TTL_MS);
    let err = store.acquire(&target, &holder("b")).unwrap_err();
    assert!(
        matches!(err, Error::File(FileError::UnsafeRuntimeDir { .. })),
        "{err}"
    );
    let after = store.lease_row(&target).unwrap().unwrap();
    assert_eq!(
        after.fencing_epoch, row.fencing_epoch,
        "no grant was written"
    );
    assert_eq!(std::fs::read(&projections).unwrap(), b"not a dir");
}

#[test]
fn failed_rename_leaves_current_untouched_removes_temp_and_releases() {
    let f = Fixture::new();
    let store = f.open();
    let target = store.admit_target(&tuple("a")).unwrap();
    // A directory where current.json should be: rename(2) onto it fails.
    let current = f.current_path(&target);
    std::fs::create_dir_all(current.join("blocker")).unwrap();
    let lease = expect_acquired(store.acquire(&target, &holder("a")).unwrap());
    let err = lease.publish().unwrap_err();
    assert!(
        matches!(
            err,
            Error::File(FileError::Io {
                step: "rename into place",
                ..
            })
        ),
        "{err}"
    );
    assert!(current.join("blocker").is_dir(), "current.json untouched");
    assert!(f.leftovers(&target).is_empty(), "temp removed");
    assert!(matches!(
        store.lease_row(&target).unwrap().unwrap().state,
        LeaseState::Released(_)
    ));
}

#[test]
fn symlinked_projection_directory_is_refused() {
    let f = Fixture::new();
    let store = f.open();
    let target = store.admit_target(&tuple("a")).unwrap();
    let outside = f.dir.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::os::unix::fs::symlink(
        &outside,
        f.options.runtime_root.path().join("hook-projections"),
    )
    .unwrap();
    assert!(matches!(
        store.acquire(&target, &holder("a")).unwrap_err(),
        Error::File(FileError::UnsafeRuntimeDir {
            reason: "is a symlink",
            ..
        })
    ));
    assert_eq!(
        std::fs::read_dir(&outside).unwrap().count(),
        0,
        "nothing written through the symlink"
    );
}

/// A reader never follows a symlink in place of `current.json` (a planted link to a valid
/// document elsewhere is refused, not read), and the next publication replaces the link
/// itself, writing nothing through it.
#[test]
fn a_symlinked_current_json_is_neither_read_nor_written_through() {
    let f = Fixture::new();
    let store = f.open();
    let target = store.admit_target(&tuple("a")).unwrap();
    store.submit(&router(), &route(&target, 1, "x")).unwrap();
    expect_acquired(store.acquire(&target, &holder("a")).unwrap())
        .publish()
        .unwrap();
    let outside = f.dir.path().join("outside.json");
    std::fs::rename(f.current_path(&target), &outside).unwrap();
    let planted = std::fs::read(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, f.current_path(&target)).unwrap();
    let err = read_projection(&f.options.runtime_root, &target).unwrap_err();
    assert!(matches!(err, Error::File(FileError::Read { .. })), "{err}");
    expect_acquired(store.acquire(&target, &holder("a")).unwrap())
        .publish()
        .unwrap();
    assert_eq!(
        std::fs::read(&outside).unwrap(),
        planted,
        "nothing written through"
    );
    assert!(!f.current_path(&target).is_symlink());
    assert_eq!(published_epoch(&f, &target), 2);
}

#[test]
fn publication_composes_committed_rows_and_the_reader_returns_them() {
    let f = Fixture::new();
    let store = f.open();
    let target = store.admit_target(&tuple("a")).unwrap();
    assert!(matches!(
        read_projection(&f.options.runtime_root, &target),
        Err(Error::File(FileError::NotPublished { .. }))
    ));
    store
        .submit(&router(), &route(&target, 3, "hello"))
        .unwrap();
    let published = expect_acquired(store.acquire(&target, &holder("a")).unwrap())
        .publish()
        .unwrap();
    assert_eq!(published.path, f.current_path(&target));
    let doc = read_projection(&f.options.runtime_root, &target).unwrap();
    assert_eq!(doc.target_id, target);
    assert_eq!(doc.published_at, Millis(START.0));
    assert_eq!(doc.channels.len(), 1);
    assert_eq!(
        doc.channels[0].envelope.as_ref().map(|e| e.get()),
        Some(route(&target, 3, "hello").envelope_json.as_str())
    );
    assert_eq!(
        doc.missing.len(),
        1,
        "the lifecycle-frontier channel is listed as missing"
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &std::path::Path| p.metadata().unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&published.path), 0o600);
    assert_eq!(mode(&f.options.runtime_root.target_dir(&target)), 0o700);
    // A torn file is an error for the reader, never a partial document.
    let bytes = std::fs::read(&published.path).unwrap();
    std::fs::write(&published.path, &bytes[..bytes.len() / 2]).unwrap();
    assert!(matches!(
        read_projection(&f.options.runtime_root, &target),
        Err(Error::File(FileError::Document(_)))
    ));
}

#[test]
fn a_document_past_the_bound_is_refused_by_the_reader() {
    let f = Fixture::new();
    let store = f.open();
    let target = store.admit_target(&tuple("a")).unwrap();
    store
        .submit(&router(), &route(&target, 3, "hello"))
        .unwrap();
    expect_acquired(store.acquire(&target, &holder("a")).unwrap())
        .publish()
        .unwrap();
    // Planted: the published file grown (sparse) past the bound.
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(f.current_path(&target))
        .unwrap();
    file.set_len(MAX_DOCUMENT_BYTES as u64 + 1000).unwrap();
    assert!(matches!(
        read_projection(&f.options.runtime_root, &target),
        Err(Error::File(FileError::Document(DocumentError::TooLarge { size }))) if size == MAX_DOCUMENT_BYTES + 1
    ));
}

/// A release that does not commit is reported, never hidden. An injected trigger makes every
/// release fail: after a completed rename the caller gets `PublishedNotReleased` (published;
/// the lease stays held until its expiry); on a failure path it gets `ReleaseFailed` wrapping
/// the publication's own error.
#[test]
fn a_release_that_does_not_commit_is_reported() {
    let f = Fixture::new();
    let store = f.open();
    let target = store.admit_target(&tuple("a")).unwrap();
    rusqlite::Connection::open(&f.options.db_path)
        .unwrap()
        .execute_batch(
            "CREATE TRIGGER refuse_release BEFORE UPDATE OF state ON HookProjectionLeases
             WHEN NEW.state = 'released' BEGIN SELECT RAISE(ABORT, 'injected release failure'); END;",
        )
        .unwrap();
    let lease = expect_acquired(store.acquire(&target, &holder("a")).unwrap());
    match lease.publish().unwrap_err() {
        Error::PublishedNotReleased { path, reason } => {
            assert_eq!(path, f.current_path(&target));
            assert!(reason.contains("injected release failure"), "{reason}");
        }
        other => panic!("{other}"),
    }
    assert!(
        f.current_bytes(&target).is_some(),
        "the document was published"
    );
    let row = store.lease_row(&target).unwrap().unwrap();
    assert!(
        matches!(row.state, LeaseState::Held(_)),
        "held until its expiry"
    );
    f.clock.advance(TTL_MS);
    let lease = expect_acquired(store.acquire(&target, &holder("b")).unwrap());
    f.clock.advance(TTL_MS);
    match lease.publish().unwrap_err() {
        Error::ReleaseFailed { cause, .. } => {
            assert!(matches!(*cause, Error::Fenced(Fenced::Expired)), "{cause}")
        }
        other => panic!("{other}"),
    }
}

/// Slows the draft down (a long write and fsync before the transaction) and says when the
/// publication is about to begin its transaction.
struct SlowDraft {
    draft: std::time::Duration,
    beginning: Mutex<Option<mpsc::Sender<()>>>,
}

impl PublishProbe for SlowDraft {
    fn reached(&self, step: PublishStep, _: &TargetId, _: u64) {
        if step == PublishStep::TempWritten {
            std::thread::sleep(self.draft);
        }
    }

    fn before(&self, effect: &'static str, _: &TargetId, _: u64) {
        if effect == "begin" {
            if let Some(beginning) = self.beginning.lock().unwrap().take() {
                let _ = beginning.send(());
            }
        }
    }
}

/// The busy timeout bounds the waits, not the work: a publication whose draft took longer than
/// the whole timeout still waits for a store that another connection holds for a moment
/// (with the timeout counted from the target lock, it would give up at once).
#[test]
fn a_draft_slower_than_the_busy_timeout_still_waits_for_the_store() {
    const BUSY_MS: u64 = 2_000;
    let f = Fixture::with_timing(timing(10 * BUSY_MS, BUSY_MS), 1024);
    let target = f.open().admit_target(&tuple("a")).unwrap();
    f.open().submit(&router(), &route(&target, 1, "x")).unwrap();
    let (beginning, began) = mpsc::channel();
    let probe = SlowDraft {
        draft: std::time::Duration::from_millis(BUSY_MS + 500),
        beginning: Mutex::new(Some(beginning)),
    };
    let (acquired_tx, acquired) = mpsc::channel();
    let (blocking_tx, blocking) = mpsc::channel::<()>();
    let published = std::thread::scope(|s| {
        let (f, target) = (&f, &target);
        // The probe and the senders move in: if the publisher fails early they are dropped
        // and the receivers below fail instead of waiting forever.
        let publisher = s.spawn(move || {
            let store = f.open();
            let lease = expect_acquired(store.acquire(target, &holder("a")).unwrap());
            acquired_tx.send(()).unwrap();
            blocking.recv().unwrap();
            lease.publish_observed(&probe).map(|p| p.fencing_epoch)
        });
        acquired.recv().unwrap();
        let blocker = rusqlite::Connection::open(&f.options.db_path).unwrap();
        blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
        blocking_tx.send(()).unwrap();
        began.recv().unwrap();
        // The publication now waits for the store; the blocker lets go well within the timeout.
        std::thread::sleep(std::time::Duration::from_millis(50));
        blocker.execute_batch("ROLLBACK").unwrap();
        publisher.join().unwrap()
    });
    assert_eq!(published.unwrap(), 1);
    assert!(f.current_bytes(&target).is_some());
}

/// The resource fences too: a grant whose epoch is not above the document in place renames
/// nothing (a copy of the grant already published, or its release could not commit), and a
/// document epoch above the row's + 1 — planted, no grant of this store made it — is refused
/// at the grant with a typed error naming the file, the row unmoved, the target granted again
/// once the file is gone.
#[test]
fn the_document_in_place_fences_a_grant_at_or_below_its_epoch_and_a_foreign_epoch_moves_nothing() {
    let f = Fixture::new();
    let store = f.open();
    let target = store.admit_target(&tuple("a")).unwrap();
    let lease = expect_acquired(store.acquire(&target, &holder("a")).unwrap());
    assert_eq!(lease.epoch(), 1);
    // A document of the grant's own epoch is in place (as a copy of the grant left it).
    let path = f.options.runtime_root.current_path(&target);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let own_epoch = Draft::compose(&target, 1, &registry(1024), Vec::new(), Millis(1)).unwrap();
    std::fs::write(&path, own_epoch.bytes()).unwrap();
    let err = lease.publish().unwrap_err();
    assert!(
        matches!(
            err,
            Error::Fenced(Fenced::DocumentAhead { document_epoch: 1 })
        ),
        "{err}"
    );
    assert_eq!(
        std::fs::read(&path).unwrap(),
        own_epoch.bytes(),
        "untouched"
    );
    assert!(f.leftovers(&target).is_empty());
    // Planted: epoch 2^63 - 2 over a row at 1.
    let planted = Draft::compose(
        &target,
        (1 << 63) - 2,
        &registry(1024),
        Vec::new(),
        Millis(1),
    );
    std::fs::write(&path, planted.unwrap().bytes()).unwrap();
    for _ in 0..2 {
        let err = store.acquire(&target, &holder("b")).map(drop).unwrap_err();
        assert!(
            matches!(&err, Error::ForeignEpoch(e) if e.row_epoch == 1),
            "{err}"
        );
        assert!(err.to_string().contains("current.json"), "{err}");
        assert!(store.publish_now(&target, &holder("b")).is_err());
    }
    assert_eq!(
        store.lease_row(&target).unwrap().unwrap().fencing_epoch,
        1,
        "the row did not move"
    );
    std::fs::remove_file(&path).unwrap();
    let PublishedNow::Published(published) = store.publish_now(&target, &holder("b")).unwrap()
    else {
        panic!("held")
    };
    assert_eq!(published.fencing_epoch, 2);
}
