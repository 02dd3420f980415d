//! One `ErrorKind` for every product's error, from the facade a host links: real failures of
//! the project lock, the ledger and the write guard answer the kind the projection store's
//! error of the same meaning answers, so a host decides "retry", "acquire again" or "an
//! operator must look" with one match whichever product failed.

use solewriter::ledger::{GitSource, Ledger, LedgerError, SnapshotState};
use solewriter::project_lock::{LockError, ProjectLock, SystemProbe, Wait};
use solewriter::projection::{Error, ErrorKind, Fenced};
use solewriter::subtree::{Lock, SubtreePath, WriteGuard, Writer};
use std::sync::Arc;

fn lock(dir: &std::path::Path) -> ProjectLock {
    ProjectLock::new(dir, Arc::new(SystemProbe))
}

#[test]
fn a_busy_project_lock_and_a_build_behind_it_are_contention_like_a_busy_store() {
    let scratch = tempfile::tempdir().unwrap();
    let held = lock(scratch.path()).acquire(Wait::NoWait).unwrap();
    let busy = lock(scratch.path()).acquire(Wait::NoWait).unwrap_err();
    assert!(matches!(busy, LockError::Busy { .. }), "{busy}");
    assert_eq!(busy.kind(), ErrorKind::Contention);
    assert!(busy.is_retryable());
    assert_eq!(
        busy.kind(),
        Error::Busy { timeout_ms: 1 }.kind(),
        "the store's busy error is of the same kind"
    );
    // A build behind a live holder fails with the lock's error, of the lock's kind.
    let ledger = Ledger::with_lock(lock(scratch.path()), GitSource::new(scratch.path()));
    let behind = ledger.build(Wait::NoWait, |_| Ok(())).unwrap_err();
    assert!(
        matches!(behind, LedgerError::Lock(LockError::Busy { .. })),
        "{behind}"
    );
    assert_eq!(behind.kind(), ErrorKind::Contention);
    assert!(behind.is_retryable());
    drop(held);
    // A missing project directory (the status reads, never creates) is for an operator.
    let gone = lock(&scratch.path().join("absent")).status().unwrap_err();
    assert!(matches!(gone, LockError::NoDirectory { .. }), "{gone}");
    assert_eq!(gone.kind(), ErrorKind::Environment);
    assert!(!gone.is_retryable());
}

#[test]
fn a_lost_project_lock_is_lost_authority_like_a_fenced_grant() {
    let lost = LockError::lost("project.lock".into(), None);
    assert_eq!(lost.kind(), ErrorKind::LostAuthority);
    assert_eq!(lost.kind(), Error::Fenced(Fenced::Released).kind());
    let build = LedgerError::LockLost {
        snapshot: SnapshotState::Untouched,
        source: LockError::lost("project.lock".into(), None),
    };
    assert_eq!(build.kind(), ErrorKind::LostAuthority);
}

#[test]
fn a_ledger_release_that_failed_after_the_snapshot_was_replaced_is_partial_success() {
    let release = |snapshot| LedgerError::Release {
        snapshot,
        source: LockError::lost("project.lock".into(), None),
    };
    assert_eq!(
        release(SnapshotState::Replaced).kind(),
        ErrorKind::PartialSuccess
    );
    assert_eq!(
        release(SnapshotState::Untouched).kind(),
        ErrorKind::Environment
    );
    let consumer = LedgerError::Consumer("the host's consumer failed".into());
    assert_eq!(consumer.kind(), ErrorKind::Input);
    assert!(!consumer.is_retryable());
}

#[test]
fn a_write_guard_conflict_is_contention_and_a_swept_writer_lost_authority() {
    let guard = WriteGuard::new();
    let writer = |agent: &str| Writer::new(Some(agent), Some("s")).unwrap();
    let at = |agent: &str, path: &str| Lock {
        path: SubtreePath::parse(path).unwrap(),
        writer: writer(agent),
    };
    guard.acquire(at("a", "/r")).unwrap();
    let conflict = guard.acquire(at("b", "/r/c")).unwrap_err();
    assert_eq!(conflict.kind(), ErrorKind::Contention, "{conflict}");
    assert!(conflict.is_retryable());
    guard.release_writer(&writer("a")).unwrap();
    let swept = guard.acquire(at("a", "/q")).unwrap_err();
    assert_eq!(swept.kind(), ErrorKind::LostAuthority, "{swept}");
    assert!(!swept.is_retryable());
}
