//! Crash consistency of the atomic publisher against the reference model's file system
//! (`models/src/crash.rs`): a crash after ANY operation of the sequence, keeping any part of
//! what was not yet synced, leaves `current.json` as the old complete document or the new
//! complete one (the new one once success was reported). Dropping any one fsync from the
//! sequence is caught: some crash point then leaves a missing, empty, torn or old document.
//! The sequence checked is the adapter's own: its publication, run through a recording
//! [`FileSystem`], must perform exactly [`publish_ops`].
//!
//! The project lock's creation sequence is checked the same way: a crash at any point leaves
//! `project.lock` absent or the complete record, never an empty or torn one; dropping its
//! fsync is caught; the real `ProjectLock` performs exactly [`lock_ops`]. Sequential and
//! exhaustive; runs in the default `cargo test`.

use solewriter_adapters::atomic_file::{DirHandle, FileSystem, RealFs};
use solewriter_adapters::clock::ManualClock;
use solewriter_adapters::project_lock::process::SystemProbe;
use solewriter_adapters::project_lock::{ProjectLock, Released, Wait};
use solewriter_adapters::projection::lease::Acquisition;
use solewriter_adapters::projection::runtime::RuntimeRoot;
use solewriter_adapters::projection::store::{ProjectionStore, StoreOptions};
use solewriter_core::config::TimingConfig;
use solewriter_core::time::Millis;
use solewriter_models::crash::{
    check_lock_creation, check_publication, lock_ops, publish_ops, CrashReport, FsOp, LockOp,
    CURRENT,
};
use solewriter_verification::fixtures::{holder, registry, tuple};
use solewriter_verification::report;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

const OLD: &[u8] = br#"{"fencingEpoch":1,"channels":["old"]}"#;
const NEW: &[u8] = br#"{"fencingEpoch":2,"channels":["new","longer"]}"#;

/// A scenario: its name, the publisher's operations, the durably published old document.
type Scenario = (&'static str, Vec<FsOp>, Option<&'static [u8]>);

/// The two scenarios: the first publication (the target directory is created) and a
/// replacement of a durably published document.
fn scenarios(ops: impl Fn(bool) -> Vec<FsOp>) -> [Scenario; 2] {
    [
        ("first publication", ops(false), None),
        ("replacement", ops(true), Some(OLD)),
    ]
}

#[test]
fn the_publishers_sequence_survives_a_crash_at_every_point() {
    let mut total = CrashReport::default();
    for (name, ops, old) in scenarios(publish_ops) {
        let r = check_publication(&ops, old, NEW)
            .unwrap_or_else(|v| panic!("{name}: {v:?} with the real sequence {ops:?}"));
        // Non-vacuity: some crashes keep the old state, some the new.
        assert!(r.old > 0 && r.new > 0, "{name}: {r:?}");
        assert_eq!(r.crash_points, ops.len() + 1, "{name}");
        total.crash_points += r.crash_points;
        total.states += r.states;
        total.old += r.old;
        total.new += r.new;
    }
    report(&format!(
        "crash consistency: {} crash points, {} post-crash states, {} old, {} new, 0 torn or lost",
        total.crash_points, total.states, total.old, total.new
    ));
    assert_quoted(total, (16, 35, 30, 5));
}

/// The report equals the figures FENCING.md and RELIABILITY.md quote: (crash points, states,
/// old, new).
fn assert_quoted(r: CrashReport, quoted: (usize, usize, usize, usize)) {
    assert_eq!(
        (r.crash_points, r.states, r.old, r.new),
        quoted,
        "the quoted figures"
    );
}

/// Removes `sync` from the real sequence and returns the first violation found.
fn without(sync: FsOp) -> Vec<String> {
    let mut caught = Vec::new();
    for (name, ops, old) in scenarios(publish_ops) {
        if !ops.contains(&sync) {
            continue;
        }
        let broken: Vec<_> = ops.into_iter().filter(|op| *op != sync).collect();
        if let Err(v) = check_publication(&broken, old, NEW) {
            let found = match &v.found {
                None => "missing".to_owned(),
                Some(b) if b.is_empty() => "empty".to_owned(),
                Some(b) if b == OLD => "the old document".to_owned(),
                Some(b) => format!("torn ({} bytes)", b.len()),
            };
            caught.push(format!(
                "{name}: after {} ops (acknowledged: {}) current.json {found}",
                v.after_ops, v.acknowledged
            ));
        }
    }
    report(&format!("crash consistency without {sync:?}: {caught:?}"));
    caught
}

#[test]
fn dropping_the_temp_file_fsync_is_caught() {
    let caught = without(FsOp::SyncTemp);
    assert_eq!(caught.len(), 2, "{caught:?}");
}

#[test]
fn dropping_the_directory_fsync_is_caught() {
    let caught = without(FsOp::SyncDir);
    assert_eq!(caught.len(), 2, "{caught:?}");
    assert!(
        caught.iter().all(|c| c.contains("acknowledged: true")),
        "{caught:?}"
    );
}

#[test]
fn dropping_the_parent_fsync_after_creating_the_target_directory_is_caught() {
    let caught = without(FsOp::SyncParent);
    assert_eq!(caught.len(), 1, "{caught:?}");
    assert!(caught[0].contains("missing"), "{caught:?}");
}

/// Every fsync of the sequence is necessary: each one the real sequence performs, dropped on
/// its own, lets the checker find a loss (the three tests above say which loss).
#[test]
fn every_fsync_of_the_sequence_is_necessary() {
    let mut syncs: Vec<FsOp> = [publish_ops(false), publish_ops(true)]
        .concat()
        .into_iter()
        .filter(|op| FsOp::SYNCS.contains(op))
        .collect();
    syncs.dedup();
    syncs.sort_by_key(|op| FsOp::SYNCS.iter().position(|s| s == op));
    syncs.dedup();
    assert_eq!(
        syncs,
        FsOp::SYNCS,
        "the sequence performs every kind of fsync"
    );
    for sync in syncs {
        assert!(
            !without(sync).is_empty(),
            "dropping {sync:?} was not caught"
        );
    }
}

/// A call the recording file system saw.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Call {
    CreateDir(PathBuf),
    CreateNew(PathBuf),
    Write,
    SyncFile,
    Rename,
    SyncDir(PathBuf),
    RemoveFile(PathBuf),
    HardLink(PathBuf, PathBuf),
}

/// The real file system, recording every call; each test maps the calls to its model's
/// operations.
#[derive(Default)]
struct Recording {
    calls: Mutex<Vec<Call>>,
    /// A directory whose next fsync fails (EIO) and is not recorded: a failed fsync has no
    /// durable effect.
    fail_sync_of: Mutex<Option<PathBuf>>,
}

impl Recording {
    fn record(&self, call: Call) {
        self.calls.lock().expect("not poisoned").push(call);
    }

    fn take(&self) -> Vec<Call> {
        std::mem::take(&mut *self.calls.lock().expect("not poisoned"))
    }
}

impl FileSystem for Recording {
    fn create_dir(&self, parent: &DirHandle, name: &str) -> io::Result<()> {
        self.record(Call::CreateDir(parent.join(name)));
        RealFs.create_dir(parent, name)
    }
    fn create_new(&self, dir: &DirHandle, name: &str) -> io::Result<File> {
        self.record(Call::CreateNew(dir.join(name)));
        RealFs.create_new(dir, name)
    }
    fn write_all(&self, file: &mut File, bytes: &[u8]) -> io::Result<()> {
        self.record(Call::Write);
        RealFs.write_all(file, bytes)
    }
    fn sync_file(&self, file: &File) -> io::Result<()> {
        self.record(Call::SyncFile);
        RealFs.sync_file(file)
    }
    fn rename(&self, dir: &DirHandle, from: &str, to: &str) -> io::Result<()> {
        self.record(Call::Rename);
        RealFs.rename(dir, from, to)
    }
    fn sync_dir(&self, dir: &DirHandle) -> io::Result<()> {
        let mut fail = self.fail_sync_of.lock().expect("not poisoned");
        if fail.as_deref() == Some(dir.path()) {
            *fail = None;
            return Err(io::Error::from_raw_os_error(5));
        }
        drop(fail);
        self.record(Call::SyncDir(dir.path().to_owned()));
        RealFs.sync_dir(dir)
    }
    fn remove_file(&self, dir: &DirHandle, name: &str) -> io::Result<()> {
        self.record(Call::RemoveFile(dir.join(name)));
        RealFs.remove_file(dir, name)
    }
    /// Recorded only when it made the link: the first publication tries to keep a document
    /// that is not there, which changes nothing.
    fn hard_link(&self, dir: &DirHandle, from: &str, to: &str) -> io::Result<()> {
        let linked = RealFs.hard_link(dir, from, to);
        if linked.is_ok() {
            self.record(Call::HardLink(dir.join(from), dir.join(to)));
        }
        linked
    }
}

/// The publisher's calls as the model's operations: those on the target directory, inside it,
/// and the fsync of its parent. (The same create-and-fsync pair one level up, for
/// `hook-projections`, is left out: the model has one level.)
fn as_publish_ops(calls: Vec<Call>, target_dir: &Path) -> Vec<FsOp> {
    calls
        .into_iter()
        .filter_map(|call| match call {
            Call::CreateDir(dir) if dir == target_dir => Some(FsOp::CreateDir),
            Call::CreateDir(_) => None,
            Call::CreateNew(_) => Some(FsOp::CreateTemp),
            Call::Write => Some(FsOp::WriteTemp),
            Call::SyncFile => Some(FsOp::SyncTemp),
            Call::Rename => Some(FsOp::Rename),
            Call::HardLink(from, kept) if from == target_dir.join(CURRENT) && is_kept(&kept) => {
                Some(FsOp::KeepOld)
            }
            Call::RemoveFile(kept) if is_kept(&kept) => Some(FsOp::DropOld),
            Call::SyncDir(dir) if dir == target_dir => Some(FsOp::SyncDir),
            Call::SyncDir(dir) if Some(dir.as_path()) == target_dir.parent() => {
                Some(FsOp::SyncParent)
            }
            Call::SyncDir(_) => None,
            Call::RemoveFile(_) | Call::HardLink(..) => panic!("the publisher made {call:?}"),
        })
        .collect()
}

/// Whether `path` is the name a publication keeps the replaced document under: its temp
/// sibling's name and `.old` (the model's `solewriter_models::crash::KEPT`).
fn is_kept(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    name.starts_with(".current.json.tmp-") && name.ends_with(".old")
}

/// A store on a fresh temp directory, writing through `recording`.
fn recorded_store(dir: &Path, recording: Arc<Recording>) -> (ProjectionStore, PathBuf) {
    let timing = TimingConfig::from_values(Some(60_000), Some(1_000)).expect("valid");
    let db_path = dir.join("store.sqlite");
    ProjectionStore::initialize(&db_path, &timing).expect("initialize");
    std::fs::create_dir(dir.join("runtime")).expect("runtime dir");
    let options = StoreOptions {
        db_path,
        runtime_root: RuntimeRoot::new(dir.join("runtime")),
        timing,
        registry: registry(),
        clock: Arc::new(ManualClock::new(Millis(1_000_000))),
    };
    let target_dir = options.runtime_root.target_dir(&tuple(0).target_id());
    let store = ProjectionStore::open(&options)
        .expect("open")
        .with_file_system(recording);
    store.admit_target(&tuple(0)).expect("admit");
    (store, target_dir)
}

fn publish_once(store: &ProjectionStore) -> Result<(), solewriter_adapters::Error> {
    match store
        .acquire(&tuple(0).target_id(), &holder(0))
        .expect("acquire")
    {
        Acquisition::Acquired(lease) => lease.publish().map(|_| ()),
        Acquisition::Held(held) => panic!("{held:?}"),
    }
}

#[test]
fn the_adapter_performs_exactly_the_checked_sequence() {
    let dir = tempfile::tempdir().expect("temp dir");
    let recording = Arc::new(Recording::default());
    let (store, target_dir) = recorded_store(dir.path(), recording.clone());
    for dir_exists in [false, true] {
        recording.take();
        publish_once(&store).expect("publish");
        assert_eq!(
            as_publish_ops(recording.take(), &target_dir),
            publish_ops(dir_exists),
            "directory existed: {dir_exists}"
        );
    }
}

/// Durable before acknowledged, after a failure too: a publication whose parent fsync fails
/// (after it created the target directory) reports the failure; the retry finds the directory
/// and — as no fsync of its parent has succeeded yet — fsyncs the parent again before it may
/// report success. The two attempts together (the failed fsync has no durable effect) are
/// exactly the first publication's checked sequence, so every crash of that history leaves the
/// old or the new document, the new one once acknowledged. A retry that trusted the existing
/// directory is the sequence without the parent fsync, which the checker catches
/// (`dropping_the_parent_fsync_after_creating_the_target_directory_is_caught`).
#[test]
fn a_retry_after_a_failed_parent_fsync_is_durable_before_it_is_acknowledged() {
    let dir = tempfile::tempdir().expect("temp dir");
    let recording = Arc::new(Recording::default());
    let (store, target_dir) = recorded_store(dir.path(), recording.clone());
    let parent = target_dir.parent().expect("a parent").to_owned();
    *recording.fail_sync_of.lock().expect("not poisoned") = Some(parent);
    assert!(
        publish_once(&store).is_err(),
        "the failed parent fsync is reported"
    );
    publish_once(&store).expect("the retry publishes");
    let history = as_publish_ops(recording.take(), &target_dir);
    assert_eq!(history, publish_ops(false), "{history:?}");
    let r = check_publication(&history, None, NEW).expect("durable before acknowledged");
    assert!(r.new > 0, "{r:?}");
}

/// A lock record (the model only compares bytes).
const RECORD: &[u8] = b"solewriter-lock v1\npid 4242\nstart 99\nboot b\nnonce n\nacquired 1\n";

#[test]
fn the_lock_creation_sequence_survives_a_crash_at_every_point() {
    let ops = lock_ops();
    let r = check_lock_creation(&ops, RECORD)
        .unwrap_or_else(|v| panic!("{v:?} with the real sequence {ops:?}"));
    // Non-vacuity: some crashes lose the lock, some keep it.
    assert!(r.old > 0 && r.new > 0, "{r:?}");
    report(&format!(
        "lock crash consistency: {} crash points, {} post-crash states, {} without a lock, {} with the complete record, 0 empty or torn",
        r.crash_points, r.states, r.old, r.new
    ));
    assert_quoted(r, (6, 15, 13, 2));
}

/// Every fsync of the lock's sequence is necessary: without it, a crash can leave the lock
/// name pointing at an empty or torn record (a lock every later acquirer refuses as
/// malformed).
#[test]
fn dropping_the_lock_temp_fsync_is_caught() {
    let syncs: Vec<LockOp> = lock_ops()
        .into_iter()
        .filter(|op| LockOp::SYNCS.contains(op))
        .collect();
    assert_eq!(syncs, LockOp::SYNCS, "the sequence performs every fsync");
    for sync in syncs {
        let broken: Vec<_> = lock_ops().into_iter().filter(|op| *op != sync).collect();
        let v = check_lock_creation(&broken, RECORD)
            .expect_err("a crash must be able to leave a partial lock record");
        let found = v.found.expect("the lock name exists");
        assert!(found.len() < RECORD.len(), "{found:?}");
        report(&format!(
            "lock crash consistency without {sync:?}: after {} ops, project.lock holds {} of {} bytes",
            v.after_ops,
            found.len(),
            RECORD.len()
        ));
    }
}

/// The real `ProjectLock` creates its lock with exactly the checked sequence, on the right
/// names (its temp sibling, then `project.lock`), and releases it with one unlink of
/// `project.lock`. (Recovery claims are created by the same function, under another name.)
#[test]
fn the_project_lock_performs_exactly_the_checked_sequence() {
    let dir = tempfile::tempdir().expect("temp dir");
    let recording = Arc::new(Recording::default());
    let lock =
        ProjectLock::new(dir.path(), Arc::new(SystemProbe)).with_file_system(recording.clone());
    let guard = lock.acquire(Wait::NoWait).expect("acquire");
    let lock_path = lock.path();
    let is_temp = |path: &Path| {
        path.parent() == Some(dir.path())
            && path
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(".project.lock."))
    };
    let ops: Vec<LockOp> = recording
        .take()
        .into_iter()
        .map(|call| match call {
            Call::CreateNew(path) if is_temp(&path) => LockOp::CreateTemp,
            Call::Write => LockOp::WriteTemp,
            Call::SyncFile => LockOp::SyncTemp,
            Call::HardLink(from, to) if is_temp(&from) && to == lock_path => LockOp::Link,
            Call::RemoveFile(path) if is_temp(&path) => LockOp::RemoveTemp,
            other => panic!("the lock made {other:?} in an existing directory"),
        })
        .collect();
    assert_eq!(ops, lock_ops());
    assert_eq!(
        lock.current().expect("readable").as_ref(),
        Some(guard.record()),
        "project.lock holds the acquisition's record"
    );
    assert_eq!(guard.release().expect("release"), Released::Removed);
    assert_eq!(recording.take(), vec![Call::RemoveFile(lock_path)]);
}
