//! Acquisition, the conditional release and an operator's end of a grant against the real
//! SQLite store.

mod support;

use solewriter_adapters::projection::lease::{Acquisition, EndOutcome, ReleaseOutcome};
use solewriter_adapters::Error;
use solewriter_core::projection::lease::{Fenced, LeaseState, NothingHeld};
use solewriter_core::projection::target::TargetId;
use solewriter_core::time::Millis;
use support::*;

#[test]
fn acquire_grants_only_when_unheld_released_or_expired_and_epoch_always_rises() {
    let f = Fixture::new();
    let store = f.open();
    let target = store.admit_target(&tuple("a")).unwrap();
    // Unheld → granted at epoch 1.
    let a = expect_acquired(store.acquire(&target, &holder("a")).unwrap());
    assert_eq!(a.epoch(), 1);
    // Held → denied with retry metadata, nothing written.
    f.clock.advance(400);
    match store.acquire(&target, &holder("b")).unwrap() {
        Acquisition::Held(h) => {
            assert_eq!((h.fencing_epoch, h.retry_after_ms), (1, TTL_MS - 400));
            assert_eq!(h.holder_instance_digest.as_str(), "a");
        }
        Acquisition::Acquired(_) => panic!("granted while held"),
    }
    assert_eq!(store.lease_row(&target).unwrap().unwrap().fencing_epoch, 1);
    // Released → the same holder re-acquires, and the epoch still rises.
    assert_eq!(a.release().unwrap(), ReleaseOutcome::Released);
    let a2 = expect_acquired(store.acquire(&target, &holder("a")).unwrap());
    assert_eq!(a2.epoch(), 2);
    // Expired (expires_at <= now) → granted.
    f.clock.advance(TTL_MS);
    let b = expect_acquired(store.acquire(&target, &holder("b")).unwrap());
    assert_eq!(b.epoch(), 3);
    drop(a2); // stale: its safety-net release must not touch b's grant
    let row = store.lease_row(&target).unwrap().unwrap();
    assert_eq!(row.fencing_epoch, 3);
    assert!(matches!(row.state, LeaseState::Held(_)));
    drop(b);
    assert!(
        matches!(
            store.lease_row(&target).unwrap().unwrap().state,
            LeaseState::Released(_)
        ),
        "drop releases"
    );
}

#[test]
fn acquire_refuses_unadmitted_target() {
    let f = Fixture::new();
    let store = f.open();
    let target = TargetId::parse(&"e".repeat(64)).unwrap();
    assert!(matches!(
        store.acquire(&target, &holder("a")),
        Err(Error::NotAdmitted(_))
    ));
}

#[test]
fn raw_token_is_returned_and_only_its_hash_is_stored() {
    let f = Fixture::new();
    let store = f.open();
    let target = store.admit_target(&tuple("a")).unwrap();
    let lease = expect_acquired(store.acquire(&target, &holder("a")).unwrap());
    let raw = *lease.token().as_bytes();
    let row = store.lease_row(&target).unwrap().unwrap();
    let stored = row.state.grant().unwrap().holder_token_hash;
    // The stored hash is SHA-256 of the raw token as computed outside this code (coreutils'
    // `sha256sum`), not merely whatever the token's own `hash()` returns.
    let mut sha256sum = std::process::Command::new("sha256sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("sha256sum on PATH");
    std::io::Write::write_all(&mut sha256sum.stdin.take().unwrap(), &raw).unwrap();
    let out = sha256sum.wait_with_output().unwrap();
    assert!(out.status.success());
    let expected = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        solewriter_core::hex::encode(stored.as_bytes()),
        expected.split_whitespace().next().unwrap(),
        "stored hash of token {}",
        lease.token().to_hex()
    );
    assert_eq!(stored.as_bytes(), lease.token().hash().as_bytes());
    assert_ne!(stored.as_bytes(), &raw);
    let hex = lease.token().to_hex();
    let debug = format!("{lease:?}");
    assert!(!debug.contains(&hex), "Debug redacts the token");
    assert!(
        debug.contains("HeldLease") && debug.contains("<redacted>") && debug.contains("epoch: 1"),
        "{debug}"
    );
    assert_eq!(lease.release().unwrap(), ReleaseOutcome::Released);
    // Force everything into the main database file, then search every file of the store.
    drop(store);
    let conn = rusqlite::Connection::open(&f.options.db_path).unwrap();
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .unwrap();
    drop(conn);
    for entry in std::fs::read_dir(f.dir.path()).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            let bytes = std::fs::read(&path).unwrap();
            assert!(
                !bytes.windows(32).any(|w| w == raw),
                "raw token bytes found in {}",
                path.display()
            );
            assert!(
                !bytes.windows(64).any(|w| w == hex.as_bytes()),
                "raw token hex found in {}",
                path.display()
            );
        }
    }
}

#[test]
fn stale_holder_release_changes_nothing() {
    let f = Fixture::new();
    let store = f.open();
    let target = store.admit_target(&tuple("a")).unwrap();
    let a = expect_acquired(store.acquire(&target, &holder("a")).unwrap());
    f.clock.advance(TTL_MS);
    let b = expect_acquired(store.acquire(&target, &holder("b")).unwrap());
    let outcome = a.release().unwrap();
    assert_eq!(
        outcome,
        ReleaseOutcome::NotHolder(Fenced::Superseded { current_epoch: 2 })
    );
    let row = store.lease_row(&target).unwrap().unwrap();
    assert_eq!(row.fencing_epoch, 2);
    assert!(
        matches!(row.state, LeaseState::Held(_)),
        "successor still held"
    );
    assert_eq!(b.release().unwrap(), ReleaseOutcome::Released);
}

/// Release with the right token but the wrong epoch, and with the right epoch but the wrong
/// token: both change nothing.
#[test]
fn release_needs_both_token_and_epoch() {
    let f = Fixture::new();
    let store = f.open();
    let target = store.admit_target(&tuple("a")).unwrap();
    // Right token, wrong epoch: A holds epoch 1, releases, re-acquires epoch 2 with a fresh
    // token; the old credential (epoch 1, old token) must not release epoch 2.
    let first = expect_acquired(store.acquire(&target, &holder("a")).unwrap());
    let first_token = first.token().clone();
    assert_eq!(first.release().unwrap(), ReleaseOutcome::Released);
    let second = expect_acquired(store.acquire(&target, &holder("a")).unwrap());
    let wrong_epoch = store.release_token(&target, 1, second.token()).unwrap();
    assert_eq!(
        wrong_epoch,
        ReleaseOutcome::NotHolder(Fenced::Superseded { current_epoch: 2 })
    );
    // Right epoch, wrong token.
    let wrong_token = store.release_token(&target, 2, &first_token).unwrap();
    assert_eq!(
        wrong_token,
        ReleaseOutcome::NotHolder(Fenced::TokenMismatch)
    );
    let row = store.lease_row(&target).unwrap().unwrap();
    assert_eq!(row.fencing_epoch, 2);
    assert!(
        matches!(row.state, LeaseState::Held(_)),
        "still held after both forged releases"
    );
    assert_eq!(second.release().unwrap(), ReleaseOutcome::Released);
}

/// A contender for a live grant is answered `Held` from the committed snapshot: it does not
/// queue for SQLite's write lock (here held by another connection) and writes nothing. A
/// grant, by contrast, needs the write lock and gets `Busy` while another writer holds it.
#[test]
fn held_answer_does_not_wait_for_the_write_lock_but_a_grant_does() {
    let f = Fixture::with_timing(timing(TTL_MS, 50), 1024);
    let store = f.open();
    let target = store.admit_target(&tuple("a")).unwrap();
    let a = expect_acquired(store.acquire(&target, &holder("a")).unwrap());
    let blocker = rusqlite::Connection::open(&f.options.db_path).unwrap();
    blocker.execute_batch("BEGIN IMMEDIATE;").unwrap();
    let contender = f.open();
    match contender.acquire(&target, &holder("b")).unwrap() {
        Acquisition::Held(h) => assert_eq!(h.fencing_epoch, 1),
        Acquisition::Acquired(_) => panic!("granted while held"),
    }
    f.clock.advance(TTL_MS); // a's grant expires: now a grant is possible, and needs the lock
    assert!(matches!(
        contender.acquire(&target, &holder("b")),
        Err(Error::Busy { .. })
    ));
    blocker.execute_batch("ROLLBACK;").unwrap();
    assert_eq!(
        expect_acquired(contender.acquire(&target, &holder("b")).unwrap()).epoch(),
        2
    );
    drop(a);
}

/// An operator ends the live grant: the row is released at the same epoch (one write, under
/// the write lock), the holder's publication is refused as fenced and writes nothing, and the
/// next grant raises the epoch. An expired grant is ended too (a clock set back cannot revive
/// it). A released or never-granted lease has nothing to end and is left as it is; an
/// unadmitted target is refused; a busy store is `Busy` with the grant untouched.
#[test]
fn an_operator_end_fences_the_holder_and_the_next_grant_raises_the_epoch() {
    let f = Fixture::with_timing(timing(TTL_MS, 50), 1024);
    let store = f.open();
    let target = store.admit_target(&tuple("a")).unwrap();
    let nothing = |epoch, why| match store.end_lease(&target).unwrap() {
        EndOutcome::NothingHeld { epoch: e, why: w } => assert_eq!((e, w), (epoch, why)),
        other => panic!("{other:?}"),
    };
    nothing(0, NothingHeld::NeverGranted);
    let a = expect_acquired(store.acquire(&target, &holder("a")).unwrap());
    let a_expires = a.expires_at();
    // Busy: nothing ended.
    let blocker = rusqlite::Connection::open(&f.options.db_path).unwrap();
    blocker.execute_batch("BEGIN IMMEDIATE;").unwrap();
    assert!(matches!(store.end_lease(&target), Err(Error::Busy { .. })));
    blocker.execute_batch("ROLLBACK;").unwrap();
    assert!(matches!(
        store.lease_row(&target).unwrap().unwrap().state,
        LeaseState::Held(_)
    ));
    f.clock.advance(10);
    match store.end_lease(&target).unwrap() {
        EndOutcome::Ended(plan) => {
            assert_eq!(plan.release.epoch, 1);
            assert_eq!(plan.grant.holder_instance_digest.as_str(), "a");
            assert_eq!(plan.grant.expires_at, a_expires);
        }
        other => panic!("{other:?}"),
    }
    let row = store.lease_row(&target).unwrap().unwrap();
    assert_eq!(row.fencing_epoch, 1, "the epoch never goes down");
    assert!(matches!(row.state, LeaseState::Released(_)));
    assert!(matches!(a.publish(), Err(Error::Fenced(Fenced::Released))));
    assert_eq!(
        f.current_bytes(&target),
        None,
        "the fenced holder wrote nothing"
    );
    nothing(1, NothingHeld::Released);
    let b = expect_acquired(store.acquire(&target, &holder("b")).unwrap());
    assert_eq!(b.epoch(), 2);
    let before_expiry = Millis(b.expires_at().0 - 1);
    f.clock.advance(TTL_MS);
    // An expired grant is ended too: marked released, so that the broker clock set back
    // (FENCING.md assumption 5 allows it) cannot make it live again.
    match store.end_lease(&target).unwrap() {
        EndOutcome::Closed(plan) => assert_eq!(plan.release.epoch, 2),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        store.lease_row(&target).unwrap().unwrap().state,
        LeaseState::Released(_)
    ));
    f.clock.set(before_expiry);
    assert!(matches!(b.publish(), Err(Error::Fenced(Fenced::Released))));
    assert_eq!(
        f.current_bytes(&target),
        None,
        "the ended holder wrote nothing"
    );
    nothing(2, NothingHeld::Released);
    let unadmitted = TargetId::parse(&"e".repeat(64)).unwrap();
    assert!(matches!(
        store.end_lease(&unadmitted),
        Err(Error::NotAdmitted(_))
    ));
}
