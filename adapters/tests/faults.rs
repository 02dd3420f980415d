//! Injected faults and hostile state: ENOSPC and EIO on each file-system step of publication
//! (through the [`FileSystem`] seam), a directory fsync failing after the rename, a store
//! file overwritten with garbage, tables dropped under a running store, lease rows changed by
//! one SQL statement (a partial grant, a grant at epoch 0, an exhausted epoch), and a
//! projection directory replaced by a symlink (before a publication, and in the middle of one),
//! `hook-projections` or a target directory that others may write or that another user owns.
//! Each gives its typed error (or completes inside the directory it held), leaves
//! `current.json` in the documented state, releases the lease, leaves no temp file, and loses
//! no committed row.

mod scripted_fs;
mod support;

use scripted_fs::{Call, Script, ScriptedFs};
use solewriter_adapters::projection::runtime::read_projection;
use solewriter_adapters::projection::store::ProjectionStore;
use solewriter_adapters::{Error, FileError};
use solewriter_core::projection::channel::{ChannelName, ProducerId, Submission};
use solewriter_core::projection::lease::LeaseState;
use solewriter_core::projection::target::TargetId;
use solewriter_core::projection::{ChannelStatus, StatusReason};
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use support::*;

const ENOSPC: i32 = 28;
const EIO: i32 = 5;

/// A file-system operation of the seam.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    CreateNew,
    Write,
    SyncFile,
    Rename,
    /// The fsync of the target directory (after the rename).
    SyncDir,
    /// The fsync of a parent of the target directory (making the directory's creation durable).
    SyncParent,
    /// The random source (holder tokens, temp-file names).
    Random,
    /// The second name given to the document in place before the rename.
    KeepOld,
    /// The removal of that second name after the transaction.
    DropOld,
}

/// The real file system, except that `op` fails with `errno` (the first `times` calls of it;
/// every call unless limited).
struct FaultyFs {
    op: Op,
    errno: i32,
    times: usize,
    /// Calls of `op`, failed or not.
    calls: AtomicUsize,
    injected: AtomicUsize,
}

impl FaultyFs {
    fn new(op: Op, errno: i32) -> Self {
        FaultyFs {
            op,
            errno,
            times: usize::MAX,
            calls: AtomicUsize::new(0),
            injected: AtomicUsize::new(0),
        }
    }

    /// Fails only the first `times` calls of the op.
    fn times(mut self, times: usize) -> Self {
        self.times = times;
        self
    }

    fn fault(&self, op: Op) -> io::Result<()> {
        if op == self.op && self.calls.fetch_add(1, Ordering::SeqCst) < self.times {
            self.injected.fetch_add(1, Ordering::SeqCst);
            return Err(io::Error::from_raw_os_error(self.errno));
        }
        Ok(())
    }
}

impl Script for FaultyFs {
    fn before(&self, call: Call<'_>) -> io::Result<()> {
        let op = match call {
            Call::CreateNew(_) => Op::CreateNew,
            Call::Write => Op::Write,
            Call::SyncFile => Op::SyncFile,
            Call::Rename { .. } => Op::Rename,
            // A target directory is named by its 64-hex target id; its fsync follows the
            // rename (the file is in place, its directory entry not durable). Any other
            // directory is a parent, fsynced before the temp file is written.
            Call::SyncDir(dir) if dir.file_name().is_some_and(|n| n.len() == 64) => Op::SyncDir,
            Call::SyncDir(_) => Op::SyncParent,
            Call::FillRandom => Op::Random,
            Call::HardLink { .. } => Op::KeepOld,
            Call::RemoveFile(name) if name.to_string_lossy().ends_with(".old") => Op::DropOld,
            _ => return Ok(()),
        };
        self.fault(op)
    }
}

/// A store with one durable publication (watermark 1) and a committed, unpublished
/// submission (watermark 2). Returns the fixture, the target and the published bytes.
fn published_once() -> (Fixture, TargetId, Vec<u8>) {
    let f = Fixture::new();
    let store = f.open();
    let target = store.admit_target(&tuple("a")).unwrap();
    store.submit(&router(), &route(&target, 1, "one")).unwrap();
    expect_acquired(store.acquire(&target, &holder("a")).unwrap())
        .publish()
        .unwrap();
    store.submit(&router(), &route(&target, 2, "two")).unwrap();
    let before = f.current_bytes(&target).unwrap();
    (f, target, before)
}

fn watermark_in(bytes: &[u8]) -> u64 {
    let doc: serde_json::Value = serde_json::from_slice(bytes).expect("a complete document");
    doc["channels"][0]["sourceWatermark"]
        .as_u64()
        .expect("one channel")
}

/// After a fault: the lease was released, no temp remains, the committed row is there, and
/// a fresh publication on the real file system publishes it.
fn nothing_lost(f: &Fixture, target: &TargetId) {
    let store = f.open();
    assert!(matches!(
        store.lease_row(target).unwrap().unwrap().state,
        LeaseState::Released(_)
    ));
    assert!(f.leftovers(target).is_empty(), "{:?}", f.leftovers(target));
    let rows = store.channel_rows(target).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(
        rows[0].source_watermark,
        2.into(),
        "the committed submission is kept"
    );
    expect_acquired(store.acquire(target, &holder("b")).unwrap())
        .publish()
        .unwrap();
    assert_eq!(watermark_in(&f.current_bytes(target).unwrap()), 2);
}

#[test]
fn each_injected_fault_is_typed_leaves_current_in_its_documented_state_and_loses_nothing() {
    let cases = [
        (Op::CreateNew, ENOSPC, "write temp file"),
        (Op::CreateNew, EIO, "write temp file"),
        (Op::Write, ENOSPC, "write temp file"),
        (Op::Write, EIO, "write temp file"),
        (Op::SyncFile, ENOSPC, "write temp file"),
        (Op::SyncFile, EIO, "write temp file"),
        (Op::Rename, ENOSPC, "rename into place"),
        (Op::Rename, EIO, "rename into place"),
    ];
    for (op, errno, expected_step) in cases {
        let (f, target, before) = published_once();
        let fs = Arc::new(ScriptedFs(FaultyFs::new(op, errno)));
        let store = f.open().with_file_system(fs.clone());
        let lease = expect_acquired(store.acquire(&target, &holder("a")).unwrap());
        match lease.publish() {
            Err(Error::File(FileError::Io { step, source, .. })) => {
                assert_eq!(step, expected_step, "{op:?}");
                assert_eq!(source.raw_os_error(), Some(errno), "{op:?}");
            }
            other => panic!("{op:?} errno {errno}: {other:?}"),
        }
        // A failed rename of the draft written before the transaction is tried once more
        // with the draft written again inside it (the draft may have been swept).
        let attempts = if op == Op::Rename { 2 } else { 1 };
        assert_eq!(fs.0.injected.load(Ordering::SeqCst), attempts, "{op:?}");
        assert_eq!(
            f.current_bytes(&target).unwrap(),
            before,
            "{op:?}: current.json untouched"
        );
        drop(store);
        nothing_lost(&f, &target);
    }
}

#[test]
fn a_directory_fsync_failing_after_the_rename_is_not_durable_and_releases() {
    for errno in [EIO, ENOSPC] {
        let (f, target, _) = published_once();
        let fs = Arc::new(ScriptedFs(FaultyFs::new(Op::SyncDir, errno)));
        let store = f.open().with_file_system(fs.clone());
        let lease = expect_acquired(store.acquire(&target, &holder("a")).unwrap());
        match lease.publish() {
            Err(Error::File(FileError::NotDurable { path, source })) => {
                assert_eq!(path, f.current_path(&target));
                assert_eq!(source.raw_os_error(), Some(errno));
            }
            other => panic!("errno {errno}: {other:?}"),
        }
        assert_eq!(
            watermark_in(&f.current_bytes(&target).unwrap()),
            2,
            "current.json was replaced by the new complete document"
        );
        drop(store);
        nothing_lost(&f, &target);
    }
}

/// The replaced document is kept under a second name across the rename (so the rename under
/// the locks does not delete it) and that name removed after the transaction. Neither step
/// decides anything: a link the file system refuses leaves the rename to delete the document
/// itself, and a second name that cannot be removed is left to the next publication's sweep.
/// The publication succeeds either way, durable, and nothing is lost.
#[test]
fn a_failing_second_name_of_the_replaced_document_only_leaves_work_to_the_sweep() {
    for (op, errno) in [
        (Op::KeepOld, ENOSPC),
        (Op::KeepOld, EIO),
        (Op::DropOld, EIO),
    ] {
        let (f, target, _) = published_once();
        let fs = Arc::new(ScriptedFs(FaultyFs::new(op, errno)));
        let store = f.open().with_file_system(fs.clone());
        let lease = expect_acquired(store.acquire(&target, &holder("a")).unwrap());
        lease.publish().unwrap_or_else(|e| panic!("{op:?}: {e}"));
        assert_eq!(fs.0.injected.load(Ordering::SeqCst), 1, "{op:?}");
        assert_eq!(watermark_in(&f.current_bytes(&target).unwrap()), 2);
        let left = f.leftovers(&target);
        match op {
            Op::DropOld => {
                assert_eq!(left.len(), 1, "{left:?}");
                assert!(
                    left[0].starts_with(".current.json.tmp-") && left[0].ends_with(".old"),
                    "{left:?}"
                );
                // The next publication (on the real file system) sweeps it.
                expect_acquired(f.open().acquire(&target, &holder("b")).unwrap())
                    .publish()
                    .unwrap();
            }
            _ => assert!(left.is_empty(), "{op:?}: {left:?}"),
        }
        drop(store);
        nothing_lost(&f, &target);
    }
}

#[test]
fn a_failed_fsync_of_a_new_target_directory_is_typed_and_creates_no_file() {
    let f = Fixture::new();
    let fs = Arc::new(ScriptedFs(FaultyFs::new(Op::SyncParent, EIO)));
    let store = f.open().with_file_system(fs);
    let target = store.admit_target(&tuple("a")).unwrap();
    store.submit(&router(), &route(&target, 2, "two")).unwrap();
    let lease = expect_acquired(store.acquire(&target, &holder("a")).unwrap());
    assert!(matches!(
        lease.publish(),
        Err(Error::File(FileError::Io {
            step: "sync parent directory",
            ..
        }))
    ));
    assert!(f.current_bytes(&target).is_none());
    drop(store);
    nothing_lost(&f, &target);
}

/// Durable before acknowledged, also on the retry path: the directory a failed publication
/// created is found existing by the retry, which must still fsync its parent before it may
/// report success (skipping it once the directory exists was a real gap: a power loss could
/// take the directory, and the acknowledged document with it).
#[test]
fn a_retry_after_a_failed_parent_fsync_fsyncs_the_parent_before_reporting_success() {
    let f = Fixture::new();
    let fs = Arc::new(ScriptedFs(FaultyFs::new(Op::SyncParent, EIO).times(1)));
    let store = f.open().with_file_system(fs.clone());
    let target = store.admit_target(&tuple("a")).unwrap();
    store.submit(&router(), &route(&target, 2, "two")).unwrap();
    let lease = expect_acquired(store.acquire(&target, &holder("a")).unwrap());
    assert!(matches!(
        lease.publish(),
        Err(Error::File(FileError::Io {
            step: "sync parent directory",
            ..
        }))
    ));
    let after_failure = fs.0.calls.load(Ordering::SeqCst);
    assert_eq!(after_failure, 1, "the failed fsync was the first");
    let lease = expect_acquired(store.acquire(&target, &holder("a")).unwrap());
    lease.publish().expect("the retry publishes");
    let retried = fs.0.calls.load(Ordering::SeqCst) - after_failure;
    // Both directories of the chain (hook-projections/ and the target's) are still unverified.
    assert_eq!(
        retried, 2,
        "the retry fsynced the parents of the existing directories"
    );
    // Once seen durable, a directory is not fsynced in its parent again by this store.
    let lease = expect_acquired(store.acquire(&target, &holder("a")).unwrap());
    lease.publish().expect("a third publication");
    assert_eq!(fs.0.calls.load(Ordering::SeqCst), after_failure + 2);
}

/// A deterministic byte stream (xorshift), so a failure replays.
fn garbage(len: usize, mut seed: u64) -> Vec<u8> {
    (0..len)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed as u8
        })
        .collect()
}

/// Overwrites `len` bytes of the store file at `offset` with garbage.
fn corrupt(path: &Path, offset: u64, len: usize) {
    use std::io::{Seek, SeekFrom, Write};
    let mut file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    file.seek(SeekFrom::Start(offset)).unwrap();
    file.write_all(&garbage(len, 0x9e37_79b9_7f4a_7c15 ^ offset))
        .unwrap();
    file.sync_all().unwrap();
}

/// Every store operation on a corrupt file fails with a typed error, and no operation
/// changes the file or publishes anything. Returns each failed operation and its error.
fn corrupt_store_is_refused(offset: u64, len: usize) -> Vec<(&'static str, Error)> {
    let (f, target, before) = published_once();
    // Closing the last connection checkpointed the WAL: every row is in the main file.
    let db = f.options.db_path.clone();
    corrupt(&db, offset, len);
    let corrupted = std::fs::read(&db).unwrap();
    let mut errors = Vec::new();
    match solewriter_adapters::projection::store::ProjectionStore::open(&f.options) {
        Err(e) => errors.push(("open", e)),
        Ok(store) => {
            let results = [
                ("lease_row", store.lease_row(&target).map(|_| ())),
                ("channel_rows", store.channel_rows(&target).map(|_| ())),
                (
                    "submit",
                    store
                        .submit(&router(), &route(&target, 3, "three"))
                        .map(|_| ()),
                ),
                ("acquire", store.acquire(&target, &holder("b")).map(|_| ())),
            ];
            for (op, result) in results {
                if let Err(e) = result {
                    errors.push((op, e));
                }
            }
        }
    }
    assert_eq!(std::fs::read(&db).unwrap(), corrupted, "nothing written");
    assert_eq!(
        f.current_bytes(&target).unwrap(),
        before,
        "nothing published"
    );
    errors
}

#[test]
fn garbage_over_the_database_header_is_refused_on_open() {
    let errors = corrupt_store_is_refused(0, 100);
    assert!(
        matches!(&errors[..], [("open", Error::Unreadable { .. })]),
        "{errors:?}"
    );
}

#[test]
fn garbage_over_a_later_page_is_a_typed_error_on_use() {
    // Page 1 is the schema; pages 2 onwards hold the tables and their indexes. The store
    // opens (the schema page is intact); each operation reading a table then fails, and it
    // fails as SQLite's own corruption error, not as anything else.
    let errors = corrupt_store_is_refused(4096, 3 * 4096);
    assert!(!errors.is_empty(), "a corrupt table page went unnoticed");
    for (op, error) in &errors {
        assert_ne!(*op, "open", "{errors:?}");
        let corrupt = matches!(
            error,
            Error::Sqlite(rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error {
                    code: rusqlite::ErrorCode::DatabaseCorrupt,
                    ..
                },
                _
            ))
        );
        assert!(corrupt, "{op}: {error:?}");
    }
}

#[test]
fn tables_dropped_under_a_running_store_give_typed_errors_and_write_nothing() {
    let (f, target, before) = published_once();
    let store = f.open();
    let vandal = rusqlite::Connection::open(&f.options.db_path).unwrap();
    vandal
        .execute_batch("DROP TABLE HookProjectionChannels; DROP TABLE HookProjectionLeases;")
        .unwrap();
    assert!(matches!(
        store.submit(&router(), &route(&target, 3, "three")),
        Err(Error::Sqlite(_))
    ));
    assert!(matches!(
        store.acquire(&target, &holder("b")),
        Err(Error::Sqlite(_))
    ));
    assert!(matches!(store.lease_row(&target), Err(Error::Sqlite(_))));
    assert_eq!(f.current_bytes(&target).unwrap(), before);
    drop(store);
    assert!(matches!(
        solewriter_adapters::projection::store::ProjectionStore::open(&f.options),
        Err(Error::StoreMissing { .. })
    ));
}

#[test]
fn a_target_directory_replaced_by_a_symlink_is_refused_and_nothing_is_written_through_it() {
    let (f, target, _) = published_once();
    let dir = f.options.runtime_root.target_dir(&target);
    let outside = f.dir.path().join("outside");
    std::fs::rename(&dir, &outside).unwrap();
    std::os::unix::fs::symlink(&outside, &dir).unwrap();
    let before_outside = std::fs::read(outside.join("current.json")).unwrap();
    let store = f.open();
    // The grant's read of the document in place opens the target directory without following
    // a symlink: the grant is refused already, so no publication can begin.
    assert!(matches!(
        store.acquire(&target, &holder("a")),
        Err(Error::File(FileError::UnsafeRuntimeDir {
            reason: "is a symlink",
            ..
        }))
    ));
    // A lease granted before the swap: its publication is refused.
    std::fs::remove_file(&dir).unwrap();
    std::fs::rename(&outside, &dir).unwrap();
    let lease = expect_acquired(store.acquire(&target, &holder("a")).unwrap());
    std::fs::rename(&dir, &outside).unwrap();
    std::os::unix::fs::symlink(&outside, &dir).unwrap();
    assert!(matches!(
        lease.publish(),
        Err(Error::File(FileError::UnsafeRuntimeDir {
            reason: "is a symlink",
            ..
        }))
    ));
    assert_eq!(
        std::fs::read(outside.join("current.json")).unwrap(),
        before_outside
    );
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 1, "no temp");
    assert!(matches!(
        store.lease_row(&target).unwrap().unwrap().state,
        LeaseState::Released(_)
    ));
}

/// Swaps the target directory for a symlink to `outside` right before the first rename: the
/// directory itself is moved to `moved` (inside the runtime root).
struct SwapAtRename {
    dir: std::path::PathBuf,
    moved: std::path::PathBuf,
    outside: std::path::PathBuf,
    swapped: std::sync::atomic::AtomicBool,
}

impl Script for SwapAtRename {
    fn before(&self, call: Call<'_>) -> io::Result<()> {
        if matches!(call, Call::Rename { .. }) && !self.swapped.swap(true, Ordering::SeqCst) {
            std::fs::rename(&self.dir, &self.moved).unwrap();
            std::os::unix::fs::symlink(&self.outside, &self.dir).unwrap();
        }
        Ok(())
    }
}

/// The target directory swapped for a symlink to a directory outside the runtime root between
/// the draft's temp write and its rename (then the rename fails if it resolves the path again,
/// and the draft is written again, once, inside the transaction): nothing is written outside
/// the root — the publication renames inside the directory it held.
#[test]
fn a_target_directory_swapped_for_a_symlink_mid_publication_writes_nothing_outside_the_root() {
    let (f, target, _) = published_once();
    let dir = f.options.runtime_root.target_dir(&target);
    let moved = dir.with_extension("moved");
    let outside = f.dir.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    let fs = Arc::new(ScriptedFs(SwapAtRename {
        dir: dir.clone(),
        moved: moved.clone(),
        outside: outside.clone(),
        swapped: Default::default(),
    }));
    let store = f.open().with_file_system(fs.clone());
    let lease = expect_acquired(store.acquire(&target, &holder("a")).unwrap());
    let published = lease.publish();
    assert!(
        fs.0.swapped.load(Ordering::SeqCst),
        "the rename was reached"
    );
    let written: Vec<_> = std::fs::read_dir(&outside)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(written.is_empty(), "written outside the root: {written:?}");
    published.unwrap();
    assert_eq!(
        watermark_in(&std::fs::read(moved.join("current.json")).unwrap()),
        2
    );
}

/// `hook-projections` or a target directory that group or others may write (or that another
/// user owns) is refused where it is opened — by the target lock, the grant's read, the
/// publication's directory step — with nothing written.
#[test]
fn directories_others_may_write_or_own_are_refused() {
    use std::os::unix::fs::PermissionsExt;
    let mode = |path: &Path, mode: u32| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap()
    };
    let unsafe_dir = |result: Result<(), Error>, expected: &str| match result {
        Err(Error::File(FileError::UnsafeRuntimeDir { reason, .. })) => {
            assert_eq!(reason, expected)
        }
        other => panic!("{other:?}"),
    };
    let (f, target, before) = published_once();
    let projections = f.options.runtime_root.path().join("hook-projections");
    let dir = f.options.runtime_root.target_dir(&target);
    let store = f.open();
    // `hook-projections` 0777: the target lock (a grant's first step) refuses it.
    mode(&projections, 0o777);
    unsafe_dir(
        store.acquire(&target, &holder("a")).map(drop),
        "is writable by group or others",
    );
    mode(&projections, 0o700);
    // A target directory 0777: the grant's read and the publication's directory step refuse it.
    let lease = expect_acquired(store.acquire(&target, &holder("a")).unwrap());
    mode(&dir, 0o777);
    unsafe_dir(lease.publish().map(drop), "is writable by group or others");
    unsafe_dir(
        store.acquire(&target, &holder("a")).map(drop),
        "is writable by group or others",
    );
    mode(&dir, 0o700);
    assert_eq!(f.current_bytes(&target).unwrap(), before);
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1, "no temp");
    // A target directory of another user.
    // The fixture's directory is this process's: its owner is the effective uid.
    if std::os::unix::fs::MetadataExt::uid(&f.dir.path().metadata().unwrap()) == 0 {
        std::os::unix::fs::chown(&dir, Some(65534), Some(65534)).unwrap();
        unsafe_dir(
            store.acquire(&target, &holder("a")).map(drop),
            "is not owned by this user",
        );
        std::os::unix::fs::chown(&projections, Some(65534), Some(65534)).unwrap();
        unsafe_dir(
            store.acquire(&target, &holder("a")).map(drop),
            "is not owned by this user",
        );
    } else {
        println!("not root: the directory of another user is not tried (chown needs root)");
    }
}

#[test]
fn a_failing_random_source_is_typed_and_writes_nothing() {
    let (f, target, before) = published_once();
    let db = std::fs::read(&f.options.db_path).unwrap();
    let fs = Arc::new(ScriptedFs(FaultyFs::new(Op::Random, EIO)));
    let store = f.open().with_file_system(fs.clone());
    let acquire = store.acquire(&target, &holder("a")).unwrap_err();
    assert!(
        matches!(&acquire, Error::Random(why) if why.contains("Input/output error")),
        "{acquire:?}"
    );
    let one_shot = store.publish_now(&target, &holder("a")).unwrap_err();
    assert!(
        matches!(&one_shot, Error::Random(why) if why.contains("Input/output error")),
        "{one_shot:?}"
    );
    assert_eq!(fs.0.injected.load(Ordering::SeqCst), 2);
    drop(store);
    untouched(&f, &target, &before, &db);
}

/// A store whose published lease row is changed by one SQL statement behind solewriter's back
/// (a foreign writer, a bad restore): every read of the row and every acquisition fails with
/// its own typed error and writes nothing.
fn planted(sql: &str) -> (Fixture, TargetId, Vec<u8>, Vec<u8>) {
    let (f, target, before) = published_once();
    let vandal = rusqlite::Connection::open(&f.options.db_path).unwrap();
    let changed = vandal.execute(sql, [target.as_str()]).unwrap();
    assert_eq!(changed, 1, "{sql}");
    drop(vandal);
    let db = std::fs::read(&f.options.db_path).unwrap();
    (f, target, before, db)
}

/// Nothing was written: the store file and `current.json` are as planted.
fn untouched(f: &Fixture, target: &TargetId, before: &[u8], db: &[u8]) {
    assert_eq!(
        f.current_bytes(target).unwrap(),
        before,
        "nothing published"
    );
    assert_eq!(
        std::fs::read(&f.options.db_path).unwrap(),
        db,
        "nothing written"
    );
}

/// A stored envelope that is not a JSON object (planted by one SQL statement) degrades its
/// own channel only: the publication goes through, that channel is published `degraded` with
/// reason `corrupt-envelope` and its envelope withheld, the other channel is published as
/// usual, and the producer's next submission heals it.
#[test]
fn a_planted_corrupt_envelope_degrades_its_own_channel_only() {
    let (f, target, _, _) = planted(
        "UPDATE HookProjectionChannels SET envelope_json = '{not json' WHERE target_id = ?1",
    );
    let store = f.open();
    let frontier = Submission {
        channel: ChannelName::parse("lifecycle-frontier").unwrap(),
        envelope_json: envelope("lifecycle-frontier.v1", "f"),
        ..route(&target, 1, "")
    };
    store
        .submit(&ProducerId::parse("frontier").unwrap(), &frontier)
        .unwrap();
    let publish = |store: &ProjectionStore| {
        expect_acquired(store.acquire(&target, &holder("b")).unwrap())
            .publish()
            .unwrap();
        read_projection(&f.options.runtime_root, &target).unwrap()
    };
    let doc = publish(&store);
    let statuses: Vec<_> = doc
        .channels
        .iter()
        .map(|c| (c.channel.as_str(), c.status, c.reason, c.envelope.is_some()))
        .collect();
    assert_eq!(
        statuses,
        [
            (
                "computed-route",
                ChannelStatus::Degraded,
                Some(StatusReason::CorruptEnvelope),
                false
            ),
            ("lifecycle-frontier", ChannelStatus::Fresh, None, true),
        ]
    );
    assert_eq!((doc.coverage.degraded, doc.coverage.fresh), (1, 1));
    store
        .submit(&router(), &route(&target, 3, "healed"))
        .unwrap();
    let healed = publish(&store);
    assert_eq!(healed.coverage.fresh, 2, "{:?}", healed.channels);
    assert_eq!(
        healed.channels[0].envelope.as_ref().map(|e| e.get()),
        Some(envelope("computed-route.v1", "healed").as_str())
    );
}

/// A channel row whose columns solewriter could not have written is not attributed to a
/// channel: the publication fails with `CorruptRow`, and nothing is written.
#[test]
fn a_planted_channel_row_of_impossible_columns_stops_the_publication() {
    let (f, target, before, db) =
        planted("UPDATE HookProjectionChannels SET captured_at = -1 WHERE target_id = ?1");
    let store = f.open();
    let lease = expect_acquired(store.acquire(&target, &holder("b")).unwrap());
    let err = lease.publish().unwrap_err();
    assert!(
        matches!(&err, Error::CorruptRow(why) if why.contains("captured_at")),
        "{err:?}"
    );
    drop(store);
    assert_eq!(
        f.current_bytes(&target).unwrap(),
        before,
        "nothing published"
    );
    assert!(
        f.leftovers(&target).is_empty(),
        "{:?}",
        f.leftovers(&target)
    );
    assert_ne!(
        std::fs::read(&f.options.db_path).unwrap(),
        db,
        "the grant was recorded"
    );
}

#[test]
fn a_planted_partial_grant_is_a_corrupt_row() {
    let (f, target, before, db) =
        planted("UPDATE HookProjectionLeases SET expires_at = NULL WHERE target_id = ?1");
    let store = f.open();
    let read = store.lease_row(&target).unwrap_err();
    assert!(
        matches!(&read, Error::CorruptRow(why) if why.ends_with("partial grant columns")),
        "{read:?}"
    );
    let acquire = store.acquire(&target, &holder("b")).unwrap_err();
    assert!(
        matches!(&acquire, Error::CorruptRow(why) if why.ends_with("partial grant columns")),
        "{acquire:?}"
    );
    drop(store);
    untouched(&f, &target, &before, &db);
}

#[test]
fn a_planted_grant_at_epoch_0_is_an_inconsistent_lease() {
    let (f, target, before, db) =
        planted("UPDATE HookProjectionLeases SET fencing_epoch = 0 WHERE target_id = ?1");
    let store = f.open();
    // The row decodes (every column is well-formed); observing it breaks an invariant.
    assert_eq!(store.lease_row(&target).unwrap().unwrap().fencing_epoch, 0);
    let acquire = store.acquire(&target, &holder("b")).unwrap_err();
    assert!(
        matches!(&acquire, Error::InconsistentLease(i) if i.reason == "granted row at epoch 0"),
        "{acquire:?}"
    );
    drop(store);
    untouched(&f, &target, &before, &db);
}

#[test]
fn a_planted_epoch_at_the_storage_maximum_is_exhausted() {
    let (f, target, before, db) = planted(&format!(
        "UPDATE HookProjectionLeases SET fencing_epoch = {} WHERE target_id = ?1",
        i64::MAX
    ));
    let store = f.open();
    let acquire = store.acquire(&target, &holder("b")).unwrap_err();
    assert!(matches!(acquire, Error::EpochExhausted), "{acquire:?}");
    // One below the maximum is still granted: the bound is exact.
    drop(store);
    untouched(&f, &target, &before, &db);
    let vandal = rusqlite::Connection::open(&f.options.db_path).unwrap();
    vandal
        .execute(
            "UPDATE HookProjectionLeases SET fencing_epoch = fencing_epoch - 1",
            [],
        )
        .unwrap();
    drop(vandal);
    let store = f.open();
    let lease = expect_acquired(store.acquire(&target, &holder("b")).unwrap());
    assert_eq!(lease.epoch(), i64::MAX as u64);
}

#[test]
fn a_torn_or_foreign_document_is_refused_by_the_reader_as_malformed() {
    use solewriter_core::projection::DocumentError;
    let (f, target, before) = published_once();
    let path = f.current_path(&target);
    std::fs::write(&path, &before[..before.len() / 2]).unwrap();
    let torn = read_projection(&f.options.runtime_root, &target).unwrap_err();
    assert!(
        matches!(&torn, Error::File(FileError::Document(DocumentError::Malformed(why))) if why.contains("EOF")),
        "{torn:?}"
    );
    let text = String::from_utf8(before).unwrap();
    let foreign = text.replacen(solewriter_core::projection::FORMAT, "other.v1", 1);
    assert_ne!(foreign, text);
    std::fs::write(&path, foreign).unwrap();
    let err = read_projection(&f.options.runtime_root, &target).unwrap_err();
    assert!(
        matches!(&err, Error::File(FileError::Document(DocumentError::Malformed(why))) if why.starts_with("format `other.v1`")),
        "{err:?}"
    );
}
