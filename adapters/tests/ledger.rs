//! The event ledger over a real Git repository: the sole-writer build, the demand read beside
//! a live writer process (which is blocked on a pipe this test controls), rebuilding a
//! malformed snapshot, and loud failures (interpretation movement, unknown lock owner, a
//! missing commit).

mod children;

use children::{commands, role, say, ChildProc};
use solewriter_adapters::git_source::{commit_fact, hunk_fact, GitSource};
use solewriter_adapters::ledger::{Derive, Ledger, LedgerError, Outcome, Persisted, Source};
use solewriter_adapters::process::{ProcessProbe, SystemProbe};
use solewriter_adapters::project_lock::{LockError, Wait, LOCK_FILE};
use solewriter_core::git_facts::{CommitFact, HunkFact, Oid};
use solewriter_core::ledger::{Snapshot, SnapshotError, MAX_SNAPSHOT_BYTES};
use solewriter_core::ownership::{
    Guard, LockNonce, LockRecord, OwnerIdentity, ProbeReport, ProcessSeen, UnknownReason,
};
use solewriter_core::time::Millis;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

const HERMETIC: [(&str, &str); 7] = [
    ("GIT_CONFIG_GLOBAL", "/dev/null"),
    ("GIT_CONFIG_NOSYSTEM", "1"),
    ("GIT_AUTHOR_NAME", "A"),
    ("GIT_AUTHOR_EMAIL", "a@example.invalid"),
    ("GIT_COMMITTER_NAME", "A"),
    ("GIT_COMMITTER_EMAIL", "a@example.invalid"),
    ("GIT_AUTHOR_DATE", "1700000000 +0000"),
];

fn git(repo: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(args)
        .envs(HERMETIC)
        .env("GIT_COMMITTER_DATE", "1700000000 +0000")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// A repository of three commits under `root/repo`; the project directory is `root/project`.
fn repo(root: &Path) -> PathBuf {
    let repo = root.join("repo");
    std::fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    for (i, content) in ["a\nb\n", "a\nB\nc\n", "z\na\nB\nc\n"].iter().enumerate() {
        std::fs::write(repo.join("f.txt"), content).unwrap();
        git(&repo, &["add", "f.txt"]);
        git(&repo, &["commit", "-q", "-m", &format!("change {i}")]);
    }
    repo
}

fn source(repo: &Path) -> GitSource {
    HERMETIC
        .iter()
        .fold(GitSource::new(repo), |s, (k, v)| s.env(*k, *v))
}

fn ledger_in(root: &Path, probe: Arc<dyn ProcessProbe>) -> Ledger<GitSource> {
    Ledger::new(root.join("project"), source(&root.join("repo")), probe)
}

type History = Vec<(CommitFact, HunkFact)>;

/// The nested consumers of a product read: walk first parents from `head`, reading each
/// commit's history fact and hunk facts.
fn history(d: &mut Derive<'_>, head: &Oid) -> Result<History, LedgerError> {
    let mut out = Vec::new();
    let mut next = Some(head.clone());
    while let Some(oid) = next {
        let commit = commit_fact(d, &oid)?;
        let hunks = hunk_fact(d, &oid)?;
        next = commit.parents.first().cloned();
        out.push((commit, hunks));
    }
    Ok(out)
}

fn subjects(h: &History) -> Vec<&str> {
    h.iter().map(|(c, _)| c.subject.as_str()).collect()
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
    let (_, newest) = &first.value[0];
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
            size: MAX_SNAPSHOT_BYTES + 1
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
