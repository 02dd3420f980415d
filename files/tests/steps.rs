//! `FileSteps` executing the file effects of the core's acquisition machine for real, the
//! store's effects answered by a script (one released lease row): what the grant reads of the
//! document in place — its epoch, nothing where there is none, a failure where it cannot be
//! read — and the target lock taken and let go around the transaction; the read of the
//! document in place bounded to its first bytes and refusing a FIFO without waiting on it.

use solewriter_core::config::LeaseTtl;
use solewriter_core::names::InstanceDigest;
use solewriter_core::projection::channel::ChannelRegistry;
use solewriter_core::projection::lease::{LeaseRecord, LeaseState, RecordedGrant};
use solewriter_core::projection::machine::acquire::{Acquire, AcquireReport, Applicant};
use solewriter_core::projection::machine::outcome::LeaseFailure;
use solewriter_core::projection::machine::{run, Effect, StoreEffect};
use solewriter_core::projection::target::TargetId;
use solewriter_core::projection::Draft;
use solewriter_core::projection::EPOCH_PREFIX_BYTES;
use solewriter_core::time::Millis;
use solewriter_core::token::HolderToken;
use solewriter_files::atomic_file::RealFs;
use solewriter_files::runtime::RuntimeRoot;
use solewriter_files::steps::{DurableDirs, FileSteps};
use solewriter_files::FileError;
use std::time::Duration;

fn target() -> TargetId {
    TargetId::parse(&"cd".repeat(32)).unwrap()
}

/// The lease row: epoch 3, released.
fn released_row() -> LeaseRecord {
    LeaseRecord {
        target_id: target(),
        fencing_epoch: 3,
        state: LeaseState::Released(RecordedGrant {
            holder_token_hash: HolderToken::from_bytes([1; 32]).hash(),
            holder_instance_digest: InstanceDigest::parse("h").unwrap(),
            acquired_at: Millis(0),
            expires_at: Millis(100),
        }),
    }
}

/// Acquires the target under `root` with `FileSteps` doing the file effects: the grant's
/// epoch, or why there is none.
fn acquire(root: &RuntimeRoot) -> Result<u64, LeaseFailure<FileError>> {
    let target = target();
    let durable = DurableDirs::default();
    let mut files = FileSteps::new(root, &target, &RealFs, &durable, Duration::from_secs(1));
    let machine = Acquire::new(Applicant {
        token_hash: HolderToken::from_bytes([2; 32]).hash(),
        holder_instance_digest: InstanceDigest::parse("a").unwrap(),
        ttl: LeaseTtl::from_millis(Some(100)).unwrap(),
    });
    let ended = run(machine, |effect| match effect {
        Effect::File(effect) => files.execute(effect),
        Effect::Clock(ask) => ask.answer(Millis(10)),
        Effect::Reached(_, ask) => ask.answer(()),
        Effect::Store(StoreEffect::ReadCommittedLease(ask) | StoreEffect::ReadLease(ask)) => {
            ask.answer(Ok(Some(released_row())))
        }
        Effect::Store(StoreEffect::WriteGrant(_, ask)) => ask.answer(Ok(true)),
        Effect::Store(
            StoreEffect::Begin(ask)
            | StoreEffect::Commit(ask)
            | StoreEffect::Rollback(ask)
            | StoreEffect::Savepoint(ask)
            | StoreEffect::ReleaseSavepoint(ask)
            | StoreEffect::RollbackToSavepoint(ask),
        ) => ask.answer(Ok(())),
        Effect::Store(StoreEffect::ReadChannels(ask)) => ask.answer(Ok(Vec::new())),
        Effect::Store(StoreEffect::WriteRelease(_, ask)) => ask.answer(Ok(true)),
    })
    .expect("the machine runs to its end");
    match ended? {
        AcquireReport::Granted(plan) => Ok(plan.epoch),
        AcquireReport::Held(held) => panic!("held: {held:?}"),
    }
}

fn document(epoch: u64) -> Vec<u8> {
    let registry = ChannelRegistry::new([]).unwrap();
    Draft::compose(&target(), epoch, &registry, Vec::new(), Millis(1))
        .unwrap()
        .bytes()
        .to_vec()
}

#[test]
fn a_grant_numbers_past_the_document_in_place_and_fails_where_it_cannot_read_it() {
    let dir = tempfile::tempdir().unwrap();
    let root = RuntimeRoot::new(dir.path());
    // No document: the row's epoch decides.
    assert_eq!(acquire(&root).unwrap(), 4);
    // A document of epoch 4 in place (a one-shot's rename whose grant was rolled back).
    std::fs::create_dir_all(root.target_dir(&target())).unwrap();
    std::fs::write(root.current_path(&target()), document(4)).unwrap();
    assert_eq!(acquire(&root).unwrap(), 5);
    // One of epoch 7, above the row's (3) + 1: no grant of the store made it; refused.
    std::fs::write(root.current_path(&target()), document(7)).unwrap();
    assert!(matches!(
        acquire(&root),
        Err(LeaseFailure::ForeignEpoch(foreign)) if foreign.document_epoch == 7 && foreign.row_epoch == 3
    ));
    // Something that is no document (a directory at its path): no epoch, the row decides.
    std::fs::remove_file(root.current_path(&target())).unwrap();
    std::fs::create_dir(root.current_path(&target())).unwrap();
    assert_eq!(acquire(&root).unwrap(), 4);
    // The document's directory is a file: the read fails, and so does the grant — an epoch
    // is never handed out without knowing the one in place.
    std::fs::remove_dir(root.current_path(&target())).unwrap();
    std::fs::remove_dir(root.target_dir(&target())).unwrap();
    std::fs::write(root.target_dir(&target()), b"not a directory").unwrap();
    match acquire(&root) {
        Err(LeaseFailure::Effect(FileError::UnsafeRuntimeDir { reason, .. })) => {
            assert_eq!(reason, "is not a directory")
        }
        other => panic!("{other:?}"),
    }
}

/// Runs `read` in a thread and waits for it at most ten seconds, so that a read that blocks
/// fails the test instead of hanging it.
fn within_ten_seconds<T: Send + 'static>(read: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(read());
    });
    rx.recv_timeout(Duration::from_secs(10))
        .expect("the read answered within ten seconds")
}

/// A FIFO at `current.json` (no writer will ever open it): the grant's read answers a typed
/// error at once instead of waiting forever under both locks, and so does the hook reader.
#[test]
fn a_fifo_at_the_document_is_refused_without_waiting_on_it() {
    let dir = tempfile::tempdir().unwrap();
    let root = RuntimeRoot::new(dir.path());
    std::fs::create_dir_all(root.target_dir(&target())).unwrap();
    let fifo = root.current_path(&target());
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let read_root = root.clone();
    let read = within_ten_seconds(move || {
        let target = target();
        let durable = DurableDirs::default();
        let mut files = FileSteps::new(
            &read_root,
            &target,
            &RealFs,
            &durable,
            Duration::from_secs(1),
        );
        files.read_current()
    });
    match read {
        Err(FileError::NotRegularFile { path, kind }) => {
            assert_eq!((path, kind), (fifo.clone(), "FIFO"));
        }
        other => panic!("{other:?}"),
    }
    let hook_root = root.clone();
    let hooked =
        within_ten_seconds(move || solewriter_files::runtime::read_current(&hook_root, &target()));
    assert!(
        matches!(hooked, Err(FileError::NotRegularFile { kind: "FIFO", .. })),
        "{hooked:?}"
    );
}

/// A 60 MiB `current.json`: the grant reads its first bytes only (the epoch is found there),
/// never the whole file under both locks.
#[test]
fn a_huge_document_in_place_is_read_only_to_its_epoch_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let root = RuntimeRoot::new(dir.path());
    std::fs::create_dir_all(root.target_dir(&target())).unwrap();
    let mut huge = document(7);
    huge.resize(60 << 20, b' ');
    std::fs::write(root.current_path(&target()), &huge).unwrap();
    let target = target();
    let durable = DurableDirs::default();
    let mut files = FileSteps::new(&root, &target, &RealFs, &durable, Duration::from_secs(1));
    let read = files.read_current().unwrap().expect("a document in place");
    assert!(
        read.len() <= EPOCH_PREFIX_BYTES,
        "{} bytes read",
        read.len()
    );
    assert_eq!(read[..], huge[..read.len()]);
}

/// One attempt at the target lock per call, for an executor that waits on a timer between
/// attempts: nothing while another holds it and the busy timeout (from the first attempt) has
/// not passed, `Busy` once it has, the lock once it is free — and then it is held.
#[test]
fn the_target_lock_is_tried_once_per_call_until_the_busy_timeout() {
    use solewriter_files::target_lock::TargetLock;
    use std::time::Instant;
    let scratch = tempfile::tempdir().unwrap();
    let root = RuntimeRoot::new(scratch.path());
    let target = target();
    let durable = DurableDirs::default();
    let timeout = Duration::from_secs(1);
    let held = TargetLock::acquire(&root, &target, Instant::now(), timeout).unwrap();
    let mut files = FileSteps::new(&root, &target, &RealFs, &durable, timeout);
    assert!(
        files.try_lock_target(Instant::now()).is_none(),
        "taken: try later"
    );
    assert!(files.wait_deadline().is_none(), "nothing taken yet");
    let long_ago = Instant::now() - Duration::from_secs(2);
    assert!(matches!(
        files.try_lock_target(long_ago),
        Some(Err(FileError::Busy { timeout_ms: 1000 }))
    ));
    drop(held);
    let first = Instant::now();
    assert!(matches!(files.try_lock_target(first), Some(Ok(()))));
    let left = files.wait_deadline().unwrap() - Instant::now();
    assert!(
        left <= timeout,
        "the transaction waits what the lock's wait left"
    );
    // Held now: another run only finds it taken.
    let mut other = FileSteps::new(&root, &target, &RealFs, &durable, timeout);
    assert!(other.try_lock_target(Instant::now()).is_none());
}

#[test]
fn a_root_of_any_projections_directory_reads_and_locks_in_that_directory() {
    let dir = tempfile::tempdir().unwrap();
    let projections = dir.path().join("any-name");
    let root = RuntimeRoot::projections_at(&projections).unwrap();
    assert_eq!(
        root.current_path(&target()),
        projections.join(target().as_str()).join("current.json")
    );
    std::fs::create_dir_all(root.target_dir(&target())).unwrap();
    std::fs::write(root.current_path(&target()), document(4)).unwrap();
    // The grant read the document in that directory (epoch 4, the row's 3), and took its lock
    // there.
    assert_eq!(acquire(&root).unwrap(), 5);
    let lock = projections.join(format!("{}.lock", target().as_str()));
    assert!(lock.exists());
    assert_eq!(
        solewriter_files::target_lock::lock_path(&root, &target()),
        lock
    );
    assert!(!dir.path().join("hook-projections").exists());
}
