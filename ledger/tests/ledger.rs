//! The event ledger over a real Git repository: the sole-writer build, the demand read beside
//! a live writer process (which is blocked on a pipe this test controls), rebuilding a
//! malformed snapshot, loud failures (interpretation movement, unknown lock owner, a missing
//! commit), the fenced replace (a lock lost mid-build), the writer's size bound, lazy and
//! nested demand, and the interpretation identity (shallow clones, grafts, attributes).

#[path = "../../adapters/tests/children/mod.rs"]
mod children;
#[path = "../../tests/support/git_repo.rs"]
mod git_repo;
#[path = "../../adapters/tests/scripted_fs/mod.rs"]
mod scripted_fs;

use children::{commands, role, say, ChildProc};
use git_repo::{git, repo, HERMETIC};
use scripted_fs::{Call, Script, ScriptedFs};
use solewriter_core::ledger::git_facts::Oid;
use solewriter_core::ledger::{
    FactId, Interpretation, Snapshot, SnapshotError, MAX_SNAPSHOT_BYTES,
};
use solewriter_core::project_lock::ownership::{
    Guard, LockNonce, LockRecord, OwnerIdentity, ProbeReport, ProcessSeen, UnknownReason,
};
use solewriter_core::time::Millis;
use solewriter_ledger::git_source::{commit_fact, GitSource};
use solewriter_ledger::history::{HistoryEntry, HistoryQuery};
use solewriter_ledger::{
    Derive, Ledger, LedgerError, Outcome, Persisted, SnapshotState, Source, SourceError,
};
use solewriter_project_lock::process::{ProcessProbe, SystemProbe};
use solewriter_project_lock::{
    LockError, LockProbe, LockStep, ProjectLock, Wait, KERNEL_LOCK_FILE, LOCK_FILE,
};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn source(repo: &Path) -> GitSource {
    HERMETIC
        .iter()
        .fold(GitSource::new(repo), |s, (k, v)| s.env(*k, *v))
}

fn ledger_in(root: &Path, probe: Arc<dyn ProcessProbe>) -> Ledger<GitSource> {
    Ledger::new(root.join("project"), source(&root.join("repo")), probe)
}

type History = Vec<HistoryEntry>;

/// The nested consumers of a product read: the first-parent history from `head`, each
/// commit's history fact and hunk facts.
fn history(d: &mut Derive<'_>, head: &Oid) -> Result<History, LedgerError> {
    let query = HistoryQuery {
        heads: vec![head.clone()],
        limit: None,
        hunks: true,
    };
    solewriter_ledger::history::history(d, &query)
}

fn subjects(h: &History) -> Vec<&str> {
    h.iter().map(|e| e.commit.subject.as_str()).collect()
}

fn read_history(ledger: &Ledger<GitSource>) -> Outcome<History> {
    let head = ledger.source().resolve("HEAD").unwrap();
    ledger.demand(|d| history(d, &head)).unwrap()
}

fn snapshot_bytes(ledger: &Ledger<GitSource>) -> Option<Vec<u8>> {
    std::fs::read(ledger.snapshot_path()).ok()
}

#[test]
fn an_uncontended_read_is_the_writer_and_persists_its_facts() {
    let dir = tempfile::tempdir().unwrap();
    repo(dir.path());
    let ledger = ledger_in(dir.path(), Arc::new(SystemProbe));
    let first = read_history(&ledger);
    assert_eq!(subjects(&first.value), ["change 2", "change 1", "change 0"]);
    assert_eq!(first.persisted, Persisted::Replaced { added: 6 });
    let newest = first.value[0].hunks.as_ref().unwrap();
    assert_eq!(newest.files[0].path, "f.txt");
    assert_eq!(
        (
            newest.files[0].hunks[0].new_start,
            newest.files[0].hunks[0].new_lines
        ),
        (1, 1)
    );
    let stored = ledger.read_snapshot().unwrap().unwrap().unwrap();
    assert_eq!(stored.facts.len(), 6);
    assert_eq!(
        stored.interpretation,
        ledger.source().interpretation().unwrap()
    );
    let again = read_history(&ledger);
    assert_eq!(again.value, first.value);
    assert_eq!(again.persisted, Persisted::Unchanged);
    assert!(!ledger.lock().path().exists(), "the lock was released");
}

#[test]
fn a_foreground_read_does_not_wait_for_a_live_writer() {
    let name = "a_foreground_read_does_not_wait_for_a_live_writer";
    if let Some((_, root)) = role() {
        // Child: a writer whose build derives the newest commit's history fact, then blocks
        // (holding the lock) until the parent says "finish".
        let ledger = ledger_in(&root, Arc::new(SystemProbe));
        let head = ledger.source().resolve("HEAD").unwrap();
        let mut commands = commands();
        let built = ledger
            .build(Wait::Within(Duration::from_secs(60)), |d| {
                commit_fact(d, &head)?;
                say("holding");
                assert_eq!(commands.next().as_deref(), Some("finish"));
                Ok(())
            })
            .unwrap();
        assert_eq!(built.persisted, Persisted::Replaced { added: 1 });
        say("done");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    repo(dir.path());
    let ledger = ledger_in(dir.path(), Arc::new(SystemProbe));
    // The ledger starts with the oldest commit's facts only.
    let oldest = ledger.source().resolve("HEAD~2").unwrap();
    ledger.build(Wait::NoWait, |d| history(d, &oldest)).unwrap();
    let before = snapshot_bytes(&ledger);

    let mut writer = ChildProc::spawn(name, "writer", dir.path());
    assert_eq!(writer.line(), "holding");
    let beside = read_history(&ledger);
    assert_eq!(
        subjects(&beside.value),
        ["change 2", "change 1", "change 0"]
    );
    match &beside.persisted {
        Persisted::Discarded {
            added: 4,
            writer: w,
        } => assert_eq!(w.as_ref().map(|w| w.pid), Some(writer.child.id())),
        other => panic!("expected this read's 4 additions discarded, got {other:?}"),
    }
    assert_eq!(
        snapshot_bytes(&ledger),
        before,
        "the read persisted nothing"
    );

    writer.send("finish");
    assert_eq!(writer.line(), "done");
    writer.finish();
    // The writer persisted one fact; a later uncontended read persists the other three.
    let later = read_history(&ledger);
    assert_eq!(later.value, beside.value, "same facts, same answer");
    assert_eq!(later.persisted, Persisted::Replaced { added: 3 });
    assert_eq!(read_history(&ledger).persisted, Persisted::Unchanged);
}

#[test]
fn a_malformed_snapshot_is_rebuilt_from_the_source() {
    let dir = tempfile::tempdir().unwrap();
    repo(dir.path());
    let ledger = ledger_in(dir.path(), Arc::new(SystemProbe));
    let good = read_history(&ledger).value;
    let bytes = snapshot_bytes(&ledger).unwrap();
    let damaged: [Vec<u8>; 3] = [bytes[..bytes.len() / 2].to_vec(), Vec::new(), {
        // A plausible fact edited in place: the hash no longer matches.
        let text = String::from_utf8(bytes.clone()).unwrap();
        text.replace("change 1", "change 9").into_bytes()
    }];
    for bad in damaged {
        std::fs::write(ledger.snapshot_path(), &bad).unwrap();
        assert!(ledger.read_snapshot().unwrap().is_err());
        let rebuilt = read_history(&ledger);
        assert_eq!(rebuilt.value, good, "never half-used, never empty");
        assert_eq!(rebuilt.persisted, Persisted::Replaced { added: 6 });
        assert_eq!(
            snapshot_bytes(&ledger).unwrap(),
            bytes,
            "rebuilt to the same facts"
        );
    }
}

#[test]
fn interpretation_movement_is_rederived_once_then_fails_loudly() {
    let dir = tempfile::tempdir().unwrap();
    let repo = repo(dir.path());
    let ledger = ledger_in(dir.path(), Arc::new(SystemProbe));
    let head = ledger.source().resolve("HEAD").unwrap();
    let before = ledger.source().interpretation().unwrap();
    // Moves once: the first derivation is discarded, the second stands.
    let mut runs = 0;
    let once = ledger
        .build(Wait::NoWait, |d| {
            runs += 1;
            if runs == 1 {
                git(&repo, &["config", "diff.algorithm", "patience"]);
            }
            history(d, &head)
        })
        .unwrap();
    assert_eq!(runs, 2);
    assert_eq!(once.persisted, Persisted::Replaced { added: 6 });
    let moved = ledger.source().interpretation().unwrap();
    assert_ne!(
        moved, before,
        "diff settings are part of the interpretation"
    );
    let stored = snapshot_bytes(&ledger);
    assert_eq!(
        Snapshot::decode(stored.as_deref().unwrap())
            .unwrap()
            .interpretation,
        moved
    );
    // Moves on every run: loud, and the snapshot is untouched.
    let algorithms = ["histogram", "minimal", "myers"];
    let mut run = 0;
    let err = ledger
        .demand(|d| {
            git(&repo, &["config", "diff.algorithm", algorithms[run % 3]]);
            run += 1;
            history(d, &head)
        })
        .unwrap_err();
    assert!(
        matches!(err, LedgerError::InterpretationMoved { .. }),
        "{err}"
    );
    assert_eq!(snapshot_bytes(&ledger), stored);
}

#[test]
fn unknown_lock_ownership_and_git_failures_are_loud() {
    struct Denied;
    impl ProcessProbe for Denied {
        fn current(&self) -> Result<OwnerIdentity, String> {
            SystemProbe.current()
        }
        fn observe(&self, pid: u32) -> ProbeReport {
            ProbeReport {
                process: ProcessSeen::PermissionDenied,
                ..SystemProbe.observe(pid)
            }
        }
    }
    let dir = tempfile::tempdir().unwrap();
    repo(dir.path());
    let ledger = ledger_in(dir.path(), Arc::new(Denied));
    std::fs::create_dir(ledger.lock().dir()).unwrap();
    let owner = OwnerIdentity {
        pid: 4_000_003,
        ..SystemProbe.current().unwrap()
    };
    // A record-only record: only classifying its owner judges it (a record written under the
    // kernel lock would be stale, its kernel lock being free).
    let record = LockRecord {
        owner,
        guard: Guard::RecordOnly,
        nonce: LockNonce::from_bytes([1; 32]),
        acquired_at: Millis(1),
    };
    std::fs::write(ledger.lock().dir().join(LOCK_FILE), record.encode()).unwrap();
    let head = ledger.source().resolve("HEAD").unwrap();
    let err = ledger.demand(|d| history(d, &head)).unwrap_err();
    assert!(
        matches!(
            err,
            LedgerError::Lock(LockError::UnknownOwner {
                reason: UnknownReason::PermissionDenied,
                ..
            })
        ),
        "{err}"
    );
    assert_eq!(snapshot_bytes(&ledger), None);

    let free = ledger_in(dir.path(), Arc::new(SystemProbe));
    std::fs::remove_file(free.lock().path()).unwrap();
    let missing = Oid::parse(&"0".repeat(40)).unwrap();
    let err = free.demand(|d| commit_fact(d, &missing)).unwrap_err();
    assert!(matches!(err, LedgerError::Source(_)), "{err}");
    assert_eq!(snapshot_bytes(&free), None, "no empty answer was persisted");
}

#[test]
fn a_snapshot_past_the_bound_is_not_loaded_and_is_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    repo(dir.path());
    let ledger = ledger_in(dir.path(), Arc::new(SystemProbe));
    let good = read_history(&ledger).value;
    // A sparse file one byte past the bound: nothing is allocated on disk.
    let file = std::fs::File::create(ledger.snapshot_path()).unwrap();
    file.set_len(MAX_SNAPSHOT_BYTES as u64 + 1000).unwrap();
    assert_eq!(
        ledger.read_snapshot().unwrap().unwrap_err(),
        SnapshotError::TooLarge {
            size: MAX_SNAPSHOT_BYTES + 1,
            max: MAX_SNAPSHOT_BYTES
        },
        "read at most one byte past the bound"
    );
    let rebuilt = read_history(&ledger);
    assert_eq!(rebuilt.value, good);
    assert_eq!(rebuilt.persisted, Persisted::Replaced { added: 6 });
}

#[test]
fn a_failing_consumer_or_an_unreadable_snapshot_leaves_the_snapshot_and_the_lock_alone() {
    let dir = tempfile::tempdir().unwrap();
    repo(dir.path());
    let ledger = ledger_in(dir.path(), Arc::new(SystemProbe));
    read_history(&ledger);
    let before = snapshot_bytes(&ledger).unwrap();
    let head = ledger.source().resolve("HEAD").unwrap();

    // A consumer that derives a new fact, then fails: its error is the transaction's, the
    // fact is not persisted, the lock is released.
    let err = ledger
        .build(Wait::NoWait, |d| -> Result<(), LedgerError> {
            history(d, &head)?;
            Err(LedgerError::Consumer("scripted consumer failure".into()))
        })
        .unwrap_err();
    assert!(
        matches!(&err, LedgerError::Consumer(why) if why == "scripted consumer failure"),
        "{err:?}"
    );
    assert_eq!(snapshot_bytes(&ledger).unwrap(), before);
    assert!(!ledger.lock().path().exists(), "the lock was released");

    // A snapshot that exists but cannot be read (a directory in its place) is an I/O error
    // of the read step, not a missing or malformed snapshot to rebuild over.
    std::fs::remove_file(ledger.snapshot_path()).unwrap();
    std::fs::create_dir(ledger.snapshot_path()).unwrap();
    let err = ledger.read_snapshot().unwrap_err();
    assert!(
        matches!(&err, LedgerError::Io { step: "read snapshot", path, .. } if *path == ledger.snapshot_path()),
        "{err:?}"
    );
    let err = ledger.demand(|d| history(d, &head)).unwrap_err();
    assert!(
        matches!(
            &err,
            LedgerError::Io {
                step: "read snapshot",
                ..
            }
        ),
        "{err:?}"
    );
    assert!(ledger.snapshot_path().is_dir(), "left as it was");
    assert_eq!(
        std::fs::read_dir(ledger.snapshot_path()).unwrap().count(),
        0
    );
    assert!(!ledger.lock().path().exists(), "the lock was released");
}

/// The lock of `root/project` in record-only mode (exclusion by the record alone), so that a
/// second build in this process can take it once the first build's record is removed.
fn record_only_ledger(root: &Path) -> Ledger<GitSource> {
    let lock = ProjectLock::new(root.join("project"), Arc::new(SystemProbe)).record_only();
    Ledger::with_lock(lock, source(&root.join("repo")))
}

#[test]
fn a_lock_lost_mid_build_is_an_error_and_the_snapshot_is_untouched() {
    let dir = tempfile::tempdir().unwrap();
    repo(dir.path());
    let ledger = ledger_in(dir.path(), Arc::new(SystemProbe));
    let oldest = ledger.source().resolve("HEAD~2").unwrap();
    ledger.build(Wait::NoWait, |d| history(d, &oldest)).unwrap();
    let before = snapshot_bytes(&ledger);
    let head = ledger.source().resolve("HEAD").unwrap();
    // A recoverer removes the record; then one that writes another owner's record.
    for replace_with_another in [false, true] {
        let err = ledger
            .build(Wait::NoWait, |d| {
                let h = history(d, &head)?;
                std::fs::remove_file(ledger.lock().path()).unwrap();
                if replace_with_another {
                    let other = ledger_in(dir.path(), Arc::new(SystemProbe));
                    let guard = other.lock().acquire(Wait::NoWait);
                    // The kernel lock is ours, so another acquisition in this process is busy;
                    // write a foreign record by hand instead.
                    assert!(matches!(guard, Err(LockError::Busy { .. })));
                    let record = LockRecord {
                        owner: SystemProbe.current().unwrap(),
                        guard: Guard::Kernel,
                        nonce: LockNonce::from_bytes([7; 32]),
                        acquired_at: Millis(1),
                    };
                    std::fs::write(ledger.lock().path(), record.encode()).unwrap();
                }
                Ok(h)
            })
            .unwrap_err();
        assert!(lost_before_the_rename(&err), "{err}");
        assert!(err.to_string().contains("not touched"), "{err}");
        assert_eq!(snapshot_bytes(&ledger), before, "the snapshot is untouched");
        let _ = std::fs::remove_file(ledger.lock().path());
    }
}

/// Whether `err` says the build lost the project lock before its rename, found by its own
/// check (`LockError::Lost`), with the snapshot untouched.
fn lost_before_the_rename(err: &LedgerError) -> bool {
    matches!(
        err,
        LedgerError::LockLost {
            snapshot: SnapshotState::Untouched,
            source: LockError::Lost { .. }
        }
    )
}

#[test]
fn a_replaced_kernel_lock_file_mid_build_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    repo(dir.path());
    let ledger = ledger_in(dir.path(), Arc::new(SystemProbe));
    let head = ledger.source().resolve("HEAD").unwrap();
    let kernel = ledger.lock().dir().join(KERNEL_LOCK_FILE);
    // The record still carries this build's nonce; only the kernel lock file is another one,
    // so a new acquirer would lock that file while this build holds the old one.
    let err = ledger
        .build(Wait::NoWait, |d| {
            std::fs::remove_file(&kernel).unwrap();
            std::fs::write(&kernel, b"").unwrap();
            history(d, &head)
        })
        .unwrap_err();
    assert!(lost_before_the_rename(&err), "{err}");
    assert_eq!(snapshot_bytes(&ledger), None);
}

#[test]
fn two_builds_never_both_replace_when_the_first_loses_the_lock() {
    let dir = tempfile::tempdir().unwrap();
    repo(dir.path());
    let first = record_only_ledger(dir.path());
    let second = record_only_ledger(dir.path());
    let head = first.source().resolve("HEAD").unwrap();
    let oldest = first.source().resolve("HEAD~2").unwrap();
    let mut second_built = None;
    let err = first
        .build(Wait::NoWait, |d| {
            let h = history(d, &head)?;
            // A recoverer (wrongly) judged the first build dead and removed its record; the
            // second build takes the lock and persists its own facts.
            std::fs::remove_file(first.lock().path()).unwrap();
            second_built = Some(
                second
                    .build(Wait::NoWait, |d| history(d, &oldest))
                    .unwrap()
                    .persisted,
            );
            Ok(h)
        })
        .unwrap_err();
    assert_eq!(second_built, Some(Persisted::Replaced { added: 2 }));
    assert!(
        matches!(
            err,
            LedgerError::LockLost {
                snapshot: SnapshotState::Untouched,
                ..
            }
        ),
        "{err}"
    );
    let stored = first.read_snapshot().unwrap().unwrap().unwrap();
    assert_eq!(stored.facts.len(), 2, "the second build's facts were kept");
}

/// A step probe that, once armed, makes the release's unlink of the lock fail: it takes the
/// record away (`NotHolder`) or puts a directory in its place (an I/O error).
struct AfterReplace {
    armed: AtomicBool,
    directory: bool,
}

impl LockProbe for AfterReplace {
    fn reached(&self, step: LockStep, path: &Path) {
        if step == LockStep::Checked
            && path.file_name() == Some(LOCK_FILE.as_ref())
            && self.armed.swap(false, Ordering::SeqCst)
        {
            std::fs::remove_file(path).unwrap();
            if self.directory {
                std::fs::create_dir(path).unwrap();
            }
        }
    }
}

#[test]
fn a_release_that_fails_after_the_replace_says_the_snapshot_was_replaced() {
    for directory in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        repo(dir.path());
        let probe = Arc::new(AfterReplace {
            armed: AtomicBool::new(false),
            directory,
        });
        let lock = ProjectLock::new(dir.path().join("project"), Arc::new(SystemProbe))
            .with_probe(probe.clone());
        let ledger = Ledger::with_lock(lock, source(&dir.path().join("repo")));
        let head = ledger.source().resolve("HEAD").unwrap();
        let err = ledger
            .build(Wait::NoWait, |d| {
                probe.armed.store(true, Ordering::SeqCst);
                history(d, &head)
            })
            .unwrap_err();
        match (&err, directory) {
            (
                LedgerError::LockLost {
                    snapshot: SnapshotState::Replaced,
                    source: LockError::Lost { .. },
                },
                false,
            )
            | (
                LedgerError::Release {
                    snapshot: SnapshotState::Replaced,
                    ..
                },
                true,
            ) => {}
            _ => panic!("unexpected: {err:?}"),
        }
        assert!(err.to_string().contains("WAS replaced"), "{err}");
        let stored = ledger.read_snapshot().unwrap().unwrap().unwrap();
        assert_eq!(stored.facts.len(), 6, "it was replaced indeed");
    }
}

#[test]
fn the_writer_refuses_a_snapshot_past_the_bound_before_writing() {
    let dir = tempfile::tempdir().unwrap();
    repo(dir.path());
    let ledger = ledger_in(dir.path(), Arc::new(SystemProbe));
    let oldest = ledger.source().resolve("HEAD~2").unwrap();
    ledger.build(Wait::NoWait, |d| history(d, &oldest)).unwrap();
    let before = snapshot_bytes(&ledger).unwrap();
    // The stored snapshot fits the bound exactly; the full history does not.
    let bounded = ledger_in(dir.path(), Arc::new(SystemProbe)).with_snapshot_bound(before.len());
    assert!(
        bounded.read_snapshot().unwrap().is_ok(),
        "what is stored fits"
    );
    let head = ledger.source().resolve("HEAD").unwrap();
    let err = bounded.demand(|d| history(d, &head)).unwrap_err();
    match &err {
        LedgerError::SnapshotTooLarge(SnapshotError::TooLarge { size, max }) => {
            assert_eq!(*max, before.len());
            assert!(*size > before.len());
        }
        other => panic!("expected SnapshotTooLarge, got {other:?}"),
    }
    assert_eq!(
        snapshot_bytes(&ledger).unwrap(),
        before,
        "nothing was written"
    );
    let temps = std::fs::read_dir(ledger.lock().dir())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .contains(".tmp-")
        })
        .count();
    assert_eq!(temps, 0, "no temp was left");
    assert!(!ledger.lock().path().exists(), "the lock was released");
    // At the default bound the same read persists.
    assert_eq!(
        read_history(&ledger).persisted,
        Persisted::Replaced { added: 4 }
    );
}

/// Counts every lock step reached.
#[derive(Default)]
struct CountSteps(AtomicUsize);

impl LockProbe for CountSteps {
    fn reached(&self, _: LockStep, _: &Path) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn a_demand_whose_facts_are_all_present_never_touches_the_lock() {
    let dir = tempfile::tempdir().unwrap();
    repo(dir.path());
    let ledger = ledger_in(dir.path(), Arc::new(SystemProbe));
    let all = read_history(&ledger);
    let steps = Arc::new(CountSteps::default());
    let lock = ProjectLock::new(dir.path().join("project"), Arc::new(SystemProbe))
        .with_probe(steps.clone());
    let reader = Ledger::with_lock(lock, source(&dir.path().join("repo")));
    // Another holder (a separate open file description: the kernel lock excludes it even in
    // this process) holds the lock throughout.
    let held = ledger.lock().acquire(Wait::NoWait).unwrap();
    let head = reader.source().resolve("HEAD").unwrap();
    let read = reader.demand(|d| history(d, &head)).unwrap();
    assert_eq!(read.value, all.value);
    assert_eq!(
        read.persisted,
        Persisted::Unchanged,
        "not Busy, not Discarded"
    );
    assert_eq!(
        steps.0.load(Ordering::SeqCst),
        0,
        "the lock was not consulted"
    );
    // A missing fact does consult it: beside the holder, the addition is discarded.
    std::fs::remove_file(reader.snapshot_path()).unwrap();
    let read = reader.demand(|d| history(d, &head)).unwrap();
    assert!(
        matches!(read.persisted, Persisted::Discarded { added: 6, .. }),
        "{:?}",
        read.persisted
    );
    assert_eq!(steps.0.load(Ordering::SeqCst), 1, "one busy try");
    held.release().unwrap();
}

/// A source that counts every question it is asked (its interpretation, a fact).
struct Counted {
    git: GitSource,
    asked: AtomicUsize,
}

impl Source for Counted {
    fn interpretation(&self) -> Result<Interpretation, SourceError> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        self.git.interpretation()
    }
    fn derive(&self, id: &FactId) -> Result<serde_json::Value, SourceError> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        self.git.derive(id)
    }
}

/// Seed 003: "a replay that needs no ledger fact never consults an unrelated writer lock" —
/// nor Git, nor the snapshot, even a malformed one beside a live writer.
#[test]
fn a_demand_that_needs_no_fact_touches_neither_the_source_nor_the_lock() {
    let dir = tempfile::tempdir().unwrap();
    repo(dir.path());
    let ledger = ledger_in(dir.path(), Arc::new(SystemProbe));
    let held = ledger.lock().acquire(Wait::NoWait).unwrap();
    std::fs::write(ledger.snapshot_path(), b"not a ledger snapshot\n").unwrap();
    let steps = Arc::new(CountSteps::default());
    let lock = ProjectLock::new(dir.path().join("project"), Arc::new(SystemProbe))
        .with_probe(steps.clone());
    let counted = Counted {
        git: source(&dir.path().join("repo")),
        asked: AtomicUsize::new(0),
    };
    let reader = Ledger::with_lock(lock, counted);
    let asked = || reader.source().asked.load(Ordering::SeqCst);
    let read = reader.demand(|_| Ok("replayed")).unwrap();
    assert_eq!(read.value, "replayed");
    assert_eq!(read.persisted, Persisted::Unchanged);
    assert_eq!(asked(), 0, "the source (git) was not asked");
    assert_eq!(
        steps.0.load(Ordering::SeqCst),
        0,
        "the lock was not consulted"
    );
    assert_eq!(
        snapshot_bytes(&ledger).as_deref(),
        Some(&b"not a ledger snapshot\n"[..]),
        "the malformed snapshot is left for a read that needs a fact"
    );
    // The first fact asked opens the derivation: the snapshot is rejected, the fact derived
    // from Git, and beside the live writer the addition is discarded.
    let head = reader.source().git.resolve("HEAD").unwrap();
    let read = reader.demand(|d| commit_fact(d, &head)).unwrap();
    assert!(
        matches!(read.persisted, Persisted::Discarded { added: 1, .. }),
        "{:?}",
        read.persisted
    );
    assert_eq!(asked(), 3, "interpretation, the fact, the recheck");
    assert_eq!(steps.0.load(Ordering::SeqCst), 1, "one busy try");
    held.release().unwrap();
    // Nested in a build, a demand that asks no fact joins it without asking the source.
    let built = ledger
        .build(Wait::NoWait, |_| {
            let before = asked();
            let joined = reader.demand(|_| Ok(()))?;
            assert_eq!(joined.persisted, Persisted::Joined { added: 0 });
            assert_eq!(asked(), before);
            Ok(())
        })
        .unwrap();
    assert_eq!(built.persisted, Persisted::Replaced { added: 0 }, "rebuilt");
}

/// What a demand derived without the lock is carried into its write (the lock was free), not
/// derived a second time: the source is asked the interpretation four times (open and recheck,
/// twice) and the fact once.
#[test]
fn an_uncontended_demand_carries_what_it_derived_into_its_write() {
    let dir = tempfile::tempdir().unwrap();
    let real = repo(dir.path());
    let head = source(&real).resolve("HEAD").unwrap();
    let counted = Counted {
        git: source(&real),
        asked: AtomicUsize::new(0),
    };
    let ledger = Ledger::new(dir.path().join("project"), counted, Arc::new(SystemProbe));
    let read = ledger.demand(|d| commit_fact(d, &head)).unwrap();
    assert_eq!(read.persisted, Persisted::Replaced { added: 1 });
    assert_eq!(ledger.source().asked.load(Ordering::SeqCst), 5);
}

/// The reference history read: each head's first-parent chain, newest first, each commit once
/// across heads, at most `limit` commits in all.
#[test]
fn the_history_read_walks_first_parents_each_commit_once_within_its_limit() {
    let dir = tempfile::tempdir().unwrap();
    repo(dir.path());
    let ledger = ledger_in(dir.path(), Arc::new(SystemProbe));
    let head = ledger.source().resolve("HEAD").unwrap();
    let parent = ledger.source().resolve("HEAD~1").unwrap();
    let read = |heads: Vec<Oid>, limit: Option<usize>| {
        let query = HistoryQuery {
            heads,
            limit,
            hunks: false,
        };
        let history = ledger
            .demand(|d| solewriter_ledger::history::history(d, &query))
            .unwrap()
            .value;
        assert!(history.iter().all(|e| e.hunks.is_none()), "no hunks asked");
        history
            .iter()
            .map(|e| e.commit.subject.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(read(vec![head.clone()], None), git_repo::SUBJECTS);
    assert_eq!(read(vec![head.clone()], Some(2)), ["change 2", "change 1"]);
    assert_eq!(
        read(vec![parent.clone(), head.clone()], None),
        ["change 1", "change 0", "change 2"],
        "the shared ancestry once"
    );
    assert_eq!(read(vec![head, parent], Some(1)), ["change 2"]);
    assert!(read(vec![], None).is_empty());
}

/// A consumer that swallows the error of a ledger that failed to open (here: `git` on no
/// repository) does not turn the read into an empty answer: the transaction fails with it.
#[test]
fn a_failure_to_open_fails_the_read_even_when_the_consumer_swallows_it() {
    let dir = tempfile::tempdir().unwrap();
    let real = repo(dir.path());
    let head = source(&real).resolve("HEAD").unwrap();
    let ledger = Ledger::new(
        dir.path().join("project"),
        source(&dir.path().join("no-repository")),
        Arc::new(SystemProbe),
    );
    let err = ledger
        .demand(|d| {
            assert!(
                commit_fact(d, &head).is_err(),
                "the consumer sees the failure"
            );
            assert!(commit_fact(d, &head).is_err(), "and again");
            Ok(())
        })
        .unwrap_err();
    assert!(matches!(err, LedgerError::Source(_)), "{err}");
    assert!(snapshot_bytes(&ledger).is_none(), "nothing was written");
}

#[test]
fn a_demand_nested_in_a_build_joins_it() {
    let dir = tempfile::tempdir().unwrap();
    repo(dir.path());
    let ledger = ledger_in(dir.path(), Arc::new(SystemProbe));
    // Another handle on the same directory, spelled differently.
    let nested = Ledger::new(
        dir.path().join("project").join("..").join("project"),
        source(&dir.path().join("repo")),
        Arc::new(SystemProbe),
    );
    let head = ledger.source().resolve("HEAD").unwrap();
    let mut inner = Vec::new();
    let built = ledger
        .build(Wait::NoWait, |d| {
            let commit = commit_fact(d, &head)?;
            let joined = nested.demand(|n| history(n, &head))?;
            inner.push(joined.persisted);
            Ok(commit)
        })
        .unwrap();
    assert_eq!(inner.last(), Some(&Persisted::Joined { added: 5 }));
    assert_eq!(built.persisted, Persisted::Replaced { added: 6 });
    let stored = ledger.read_snapshot().unwrap().unwrap().unwrap();
    assert_eq!(stored.facts.len(), 6, "the nested demand's facts persisted");
    // Outside any build the same handle is an ordinary demand.
    assert_eq!(
        nested.demand(|n| history(n, &head)).unwrap().persisted,
        Persisted::Unchanged
    );
}

/// A demand on ANOTHER project directory inside a build is not nested in it: it is an
/// ordinary demand of its own ledger, and the build persists only its own facts.
#[test]
fn a_demand_on_another_directory_inside_a_build_does_not_join_it() {
    let dir = tempfile::tempdir().unwrap();
    repo(dir.path());
    let ledger = ledger_in(dir.path(), Arc::new(SystemProbe));
    let other = Ledger::new(
        dir.path().join("other-project"),
        source(&dir.path().join("repo")),
        Arc::new(SystemProbe),
    );
    let head = ledger.source().resolve("HEAD").unwrap();
    let mut inner = Vec::new();
    let built = ledger
        .build(Wait::NoWait, |d| {
            let commit = commit_fact(d, &head)?;
            inner.push(other.demand(|n| history(n, &head))?.persisted);
            Ok(commit)
        })
        .unwrap();
    assert_eq!(inner.last(), Some(&Persisted::Replaced { added: 6 }));
    assert_eq!(built.persisted, Persisted::Replaced { added: 1 });
}

/// The history a fresh ledger (no stored facts) derives for `repo` now.
fn fresh_history(root: &Path, repo: &Path, name: &str) -> History {
    let fresh = Ledger::new(root.join(name), source(repo), Arc::new(SystemProbe));
    let head = fresh.source().resolve("HEAD").unwrap();
    fresh.demand(|d| history(d, &head)).unwrap().value
}

#[test]
fn a_worktree_gitattributes_with_minus_diff_changes_no_fact() {
    let dir = tempfile::tempdir().unwrap();
    let repo = repo(dir.path());
    let ledger = ledger_in(dir.path(), Arc::new(SystemProbe));
    let stored = read_history(&ledger).value;
    std::fs::write(repo.join(".gitattributes"), "* -diff\n").unwrap();
    let fresh = fresh_history(dir.path(), &repo, "fresh");
    assert_eq!(
        fresh, stored,
        "a fresh derivation ignores the worktree attributes"
    );
    assert!(
        !fresh[0].hunks.as_ref().unwrap().files[0].hunks.is_empty(),
        "not turned binary"
    );
    assert_eq!(read_history(&ledger).persisted, Persisted::Unchanged);
}

#[test]
fn info_attributes_is_part_of_the_interpretation() {
    let dir = tempfile::tempdir().unwrap();
    let repo = repo(dir.path());
    let ledger = ledger_in(dir.path(), Arc::new(SystemProbe));
    let stored = read_history(&ledger).value;
    std::fs::write(repo.join(".git/info/attributes"), "* -diff\n").unwrap();
    let fresh = fresh_history(dir.path(), &repo, "fresh");
    assert_ne!(fresh, stored, "info/attributes changes the hunks (binary)");
    let again = read_history(&ledger);
    assert_eq!(again.value, fresh, "the stored facts were re-derived");
    assert_eq!(again.persisted, Persisted::Replaced { added: 6 });
}

#[test]
fn a_grafts_file_changes_no_fact() {
    let dir = tempfile::tempdir().unwrap();
    let repo = repo(dir.path());
    let ledger = ledger_in(dir.path(), Arc::new(SystemProbe));
    let stored = read_history(&ledger).value;
    let (head, root) = (
        git(&repo, &["rev-parse", "HEAD"]),
        git(&repo, &["rev-parse", "HEAD~2"]),
    );
    std::fs::write(
        repo.join(".git/info/grafts"),
        format!("{} {}\n", head.trim(), root.trim()),
    )
    .unwrap();
    let fresh = fresh_history(dir.path(), &repo, "fresh");
    assert_eq!(fresh, stored, "a fresh derivation ignores the grafts");
    assert_eq!(subjects(&fresh), ["change 2", "change 1", "change 0"]);
    assert_eq!(read_history(&ledger).persisted, Persisted::Unchanged);
}

#[test]
fn a_shallow_clone_that_deepens_is_rederived() {
    let dir = tempfile::tempdir().unwrap();
    let origin = repo(dir.path());
    let clone = dir.path().join("clone");
    let url = format!("file://{}", origin.display());
    git(
        dir.path(),
        &["clone", "-q", "--depth", "1", &url, clone.to_str().unwrap()],
    );
    let ledger = Ledger::new(
        dir.path().join("project"),
        source(&clone),
        Arc::new(SystemProbe),
    );
    let head = ledger.source().resolve("HEAD").unwrap();
    let shallow = ledger.demand(|d| history(d, &head)).unwrap().value;
    assert_eq!(
        subjects(&shallow),
        ["change 2"],
        "parents hidden by the boundary"
    );
    git(&clone, &["fetch", "-q", "--unshallow"]);
    let deep = ledger.demand(|d| history(d, &head)).unwrap();
    assert_eq!(subjects(&deep.value), ["change 2", "change 1", "change 0"]);
    assert_eq!(deep.persisted, Persisted::Replaced { added: 6 });
    assert_eq!(deep.value, fresh_history(dir.path(), &clone, "fresh"));
}

#[test]
fn a_demand_nested_in_a_build_of_the_same_directory_under_another_interpretation_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    repo(dir.path());
    let ledger = ledger_in(dir.path(), Arc::new(SystemProbe));
    read_history(&ledger);
    let before = snapshot_bytes(&ledger).unwrap();
    // A clone with another diff setting, read into the same project directory.
    let clone = dir.path().join("clone");
    git(
        dir.path(),
        &["clone", "-q", "repo", clone.to_str().unwrap()],
    );
    git(&clone, &["config", "diff.renames", "false"]);
    let other = Ledger::new(
        dir.path().join("project"),
        source(&clone),
        Arc::new(SystemProbe),
    );
    let head = ledger.source().resolve("HEAD").unwrap();
    let err = ledger
        .build(Wait::NoWait, |d| {
            commit_fact(d, &head)?;
            other.demand(|n| history(n, &head)).map(|_| ())
        })
        .unwrap_err();
    assert!(
        matches!(&err, LedgerError::NestedInterpretation { build, demand } if build != demand),
        "{err:?}"
    );
    assert_eq!(snapshot_bytes(&ledger).unwrap(), before, "nothing added");
    assert!(!ledger.lock().path().exists(), "the lock was released");
}

/// The real file system, except that the directory fsync after the snapshot's rename fails
/// with EIO (once).
struct FailingSnapshotSync {
    snapshot: PathBuf,
    renamed: AtomicBool,
}

impl Script for FailingSnapshotSync {
    fn before(&self, call: Call<'_>) -> std::io::Result<()> {
        match call {
            Call::SyncDir(_) if self.renamed.swap(false, Ordering::SeqCst) => {
                Err(std::io::Error::from_raw_os_error(5))
            }
            _ => Ok(()),
        }
    }
    fn after(&self, call: Call<'_>, succeeded: bool) {
        if let Call::Rename { to, .. } = call {
            if succeeded && to == self.snapshot {
                self.renamed.store(true, Ordering::SeqCst);
            }
        }
    }
}

#[test]
fn a_failing_directory_fsync_after_the_snapshot_rename_is_not_durable() {
    let dir = tempfile::tempdir().unwrap();
    repo(dir.path());
    let plain = ledger_in(dir.path(), Arc::new(SystemProbe));
    let fs = Arc::new(ScriptedFs(FailingSnapshotSync {
        snapshot: plain.snapshot_path(),
        renamed: AtomicBool::new(false),
    }));
    let lock = ProjectLock::new(dir.path().join("project"), Arc::new(SystemProbe))
        .with_file_system(fs.clone());
    let ledger = Ledger::with_lock(lock, source(&dir.path().join("repo")));
    let head = ledger.source().resolve("HEAD").unwrap();
    let err = ledger.demand(|d| history(d, &head)).unwrap_err();
    assert!(
        matches!(&err, LedgerError::NotDurable { path, source }
            if *path == ledger.snapshot_path() && source.raw_os_error() == Some(5)),
        "{err:?}"
    );
    // Readers see the new snapshot (it may not survive a power loss); the lock was released.
    let stored = Snapshot::decode(&snapshot_bytes(&ledger).unwrap()).unwrap();
    assert_eq!(
        stored.facts.len(),
        6,
        "the build's facts were renamed into place"
    );
    assert!(!ledger.lock().path().exists(), "the lock was released");
    assert_eq!(
        read_history(&plain).persisted,
        Persisted::Unchanged,
        "the next build finds every fact"
    );
}
