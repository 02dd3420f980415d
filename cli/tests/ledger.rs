//! `solewriter ledger build|read|status` over a real Git repository, with real processes: the
//! sole-writer build persists and a second one is unchanged; a read beside a live writer (the
//! hidden `lock-holder`, holding the project lock until told) answers at once and discards its
//! facts, while a build that may not wait fails busy naming that writer; `status` reports an
//! absent, a reusable and a rejected snapshot without git and writing nothing; git failures,
//! an unknown lock owner and bad command lines are one-line errors of their class; `--limit`
//! bounds the commits.
//!
//! Every git (the tests' and the binary's children) runs with a hermetic environment
//! (`support::git::HERMETIC`).

mod support;

use serde_json::Value;
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};
use support::git::{command, oid, repo, SUBJECTS};
use support::*;

/// Runs the binary in `root` with `args`; the whole run must end within `bound` (a command
/// that waited for a live writer would not: the writer holds until the test says so).
fn run_within(root: &Path, args: &[&str], bound: Duration) -> Output {
    let mut child = command(root)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > bound {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{args:?} still running after {bound:?}: it waited");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    child.wait_with_output().unwrap()
}

/// A bound no command of these tests comes near unless it waits for the lock-holder, which
/// never releases before the test tells it to.
const BOUND: Duration = Duration::from_secs(60);

fn run(root: &Path, args: &[&str]) -> Output {
    run_within(root, args, BOUND)
}

/// Stdout of a successful run.
#[track_caller]
fn ok(root: &Path, args: &[&str]) -> String {
    let out = run(root, args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The one JSON object a successful `--json` run printed on one line.
#[track_caller]
fn json(root: &Path, args: &[&str]) -> Value {
    let text = ok(root, &[&["--json"], args].concat());
    assert_eq!(text.lines().count(), 1, "one line: {text}");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

fn subjects(read: &Value) -> Vec<&str> {
    read["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["commit"]["subject"].as_str().unwrap())
        .collect()
}

/// The names in `dir` and each file's bytes, to show that a command wrote nothing.
fn contents(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut all: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let bytes = std::fs::read(e.path()).unwrap_or_default();
            (e.file_name().into_string().unwrap(), bytes)
        })
        .collect();
    all.sort();
    all
}

/// `build --hunks` derives each commit's history and hunk facts and replaces the snapshot
/// (added = commits × 2); a second build finds every fact there: unchanged, the snapshot
/// byte for byte the same. A bounded wait, uncontended, takes the lock at once.
#[test]
fn build_persists_the_history_and_a_second_build_is_unchanged() {
    let root = tempfile::tempdir().unwrap();
    let repo = repo(root.path());
    let args = ["ledger", "build", "project", "--repo", "repo", "--hunks"];
    let first = json(root.path(), &[&args[..], &["--no-wait"]].concat());
    assert_eq!(first["persisted"], "replaced", "{first}");
    assert_eq!(first["commits"], 3, "{first}");
    assert_eq!(first["added"], 3 * 2, "{first}");
    assert_eq!(first["heads"], serde_json::json!([oid(&repo, "HEAD")]));
    assert_eq!(first["snapshot"], "project/ledger.snapshot");
    let snapshot = root.path().join("project/ledger.snapshot");
    let stored = std::fs::read(&snapshot).unwrap();
    let second = json(root.path(), &[&args[..], &["--wait-ms", "60000"]].concat());
    assert_eq!(second["persisted"], "unchanged", "{second}");
    assert_eq!(second["added"], 0, "{second}");
    assert_eq!(second["commits"], 3, "{second}");
    assert_eq!(std::fs::read(&snapshot).unwrap(), stored, "nothing written");
    let text = ok(root.path(), &[&args[..], &["--no-wait"]].concat());
    assert_eq!(
        text,
        "ledger project/ledger.snapshot: unchanged, every fact was already there (nothing written); 3 commit(s) read\n"
    );
    assert!(
        !root.path().join("project/project.lock").exists(),
        "the lock was released"
    );
}

/// A read that finds facts missing while a live writer holds the project lock answers at
/// once (the writer holds until the test tells it) from the snapshot plus what it derived,
/// and discards its additions, naming the writer; the snapshot stays absent. A build that
/// may not wait fails busy (exit 6) naming the same owner, at once or after its bounded
/// wait; `status` shows the holder alive. Once the writer is gone the same read is the
/// writer and persists its facts; then every fact is there.
#[test]
fn read_beside_a_live_writer_answers_without_waiting_and_discards() {
    let root = tempfile::tempdir().unwrap();
    repo(root.path());
    let project = root.path().join("project");
    let (holder, nonce) = lock_holder(&project);
    let pid = holder.child.id();
    let read = ["ledger", "read", "project", "--repo", "repo"];
    let beside = json(root.path(), &read);
    assert_eq!(beside["persisted"], "discarded", "{beside}");
    assert_eq!(beside["added"], 3, "{beside}");
    assert_eq!(beside["writer"]["pid"], pid, "{beside}");
    assert_eq!(subjects(&beside), SUBJECTS);
    let text = ok(root.path(), &read);
    assert!(
        text.contains(&format!(
            "discarded, 3 fact(s) derived and not persisted: a live writer holds the project lock (owner pid {pid} "
        )),
        "{text}"
    );
    assert!(
        !project.join("ledger.snapshot").exists(),
        "nothing persisted"
    );

    let build = ["ledger", "build", "project", "--repo", "repo"];
    let needle = format!("is held by owner pid {pid} ");
    let started = Instant::now();
    let busy = run(root.path(), &[&build[..], &["--no-wait"]].concat());
    expect_failure(&busy, 6, &needle, &"build --no-wait beside a writer");
    assert!(busy.stdout.is_empty());
    let waited = run(root.path(), &[&build[..], &["--wait-ms", "200"]].concat());
    expect_failure(&waited, 6, &needle, &"build --wait-ms 200 beside a writer");
    assert!(started.elapsed() >= Duration::from_millis(200));
    let status = json(root.path(), &["ledger", "status", "project"]);
    assert_eq!(status["snapshot"]["state"], "absent", "{status}");
    assert_eq!(status["lock"]["state"], "alive", "{status}");
    assert_eq!(status["lock"]["owner"]["pid"], pid, "{status}");
    assert_eq!(status["lock"]["nonce"], nonce.as_str(), "{status}");

    release_lock(holder);
    let after = json(root.path(), &read);
    assert_eq!(after["persisted"], "replaced", "{after}");
    assert_eq!(after["added"], 3, "{after}");
    assert_eq!(after["writer"], Value::Null, "{after}");
    assert_eq!(
        after["history"], beside["history"],
        "same facts, same answer"
    );
    let again = json(root.path(), &read);
    assert_eq!(again["persisted"], "unchanged", "{again}");
    assert_eq!(again["added"], 0, "{again}");
}

/// `status` on a directory with no snapshot, with a reusable one and with a corrupted one
/// (garbage, then a body that no longer matches its hash) reports each, with the project lock
/// as `lock status` shows it; it runs no git (none is on its `PATH`) and writes nothing. A
/// later read rebuilds the rejected snapshot from the source. A missing directory is exit 7.
#[test]
fn status_reports_an_absent_a_reusable_and_a_rejected_snapshot() {
    let root = tempfile::tempdir().unwrap();
    repo(root.path());
    let project = root.path().join("project");
    let no_git = root.path().join("no-git");
    std::fs::create_dir(&no_git).unwrap();
    std::fs::create_dir(&project).unwrap();
    let status = |json_out: bool| {
        let mut args = vec!["ledger", "status", "project"];
        if json_out {
            args.push("--json");
        }
        let before = contents(&project);
        let out = command(root.path())
            .env("PATH", &no_git)
            .args(&args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(contents(&project), before, "status wrote nothing");
        String::from_utf8(out.stdout).unwrap()
    };
    let doc = |text: String| -> Value { serde_json::from_str(&text).unwrap() };
    let lock_status = ok(root.path(), &["--json", "lock", "status", "project"]);

    let absent = doc(status(true));
    assert_eq!(absent["snapshot"]["state"], "absent", "{absent}");
    assert_eq!(absent["snapshot"]["path"], "project/ledger.snapshot");
    assert_eq!(
        absent["lock"],
        doc(lock_status),
        "the lock as `lock status` shows it"
    );
    assert_eq!(
        status(false),
        "ledger project/ledger.snapshot: absent (no snapshot yet: the first build, or read that derives a fact, writes it)\nproject/project.lock: free (no lock file)\n"
    );

    json(
        root.path(),
        &["ledger", "build", "project", "--repo", "repo", "--no-wait"],
    );
    let file = project.join("ledger.snapshot");
    let size = std::fs::metadata(&file).unwrap().len();
    let reusable = doc(status(true));
    let snapshot = &reusable["snapshot"];
    assert_eq!(snapshot["state"], "reusable", "{reusable}");
    assert_eq!(snapshot["facts"], 3, "{reusable}");
    assert_eq!(snapshot["bytes"], size, "{reusable}");
    assert!(
        snapshot["interpretation"]
            .as_str()
            .unwrap()
            .starts_with("git-"),
        "{reusable}"
    );
    assert_eq!(snapshot["reason"], Value::Null, "{reusable}");
    let text = status(false);
    assert!(
        text.starts_with("ledger project/ledger.snapshot: reusable — interpretation git-"),
        "{text}"
    );
    assert!(
        text.contains(&format!(", 3 fact(s), {size} bytes\n")),
        "{text}"
    );

    std::fs::write(&file, "garbage\n").unwrap();
    let rejected = doc(status(true));
    assert_eq!(rejected["snapshot"]["state"], "rejected", "{rejected}");
    assert_eq!(
        rejected["snapshot"]["reason"], "no version-1 snapshot header",
        "{rejected}"
    );
    assert_eq!(rejected["snapshot"]["facts"], Value::Null, "{rejected}");
    assert!(status(false).starts_with(
        "ledger project/ledger.snapshot: rejected (no version-1 snapshot header) — not reused"
    ));
    let rebuilt = json(
        root.path(),
        &[
            "ledger", "read", "project", "--repo", "repo", "--limit", "1",
        ],
    );
    assert_eq!(rebuilt["persisted"], "replaced", "{rebuilt}");
    let mut torn = std::fs::read(&file).unwrap();
    *torn.last_mut().unwrap() ^= 1;
    std::fs::write(&file, &torn).unwrap();
    let mismatch = doc(status(true));
    assert_eq!(
        mismatch["snapshot"]["reason"], "body does not match its SHA-256",
        "{mismatch}"
    );

    let out = run(root.path(), &["ledger", "status", "nowhere"]);
    expect_failure(&out, 7, "does not exist", &"status of a missing directory");
    assert!(!root.path().join("nowhere").exists(), "nothing created");
}

/// A repository git cannot open, or a revision it cannot resolve, is a one-line error (exit 7)
/// naming what git was asked, before anything is created.
#[test]
fn git_failures_are_one_line_errors_naming_git() {
    let root = tempfile::tempdir().unwrap();
    repo(root.path());
    for (args, needle) in [
        (
            vec!["ledger", "read", "project", "--repo", "nope"],
            "git rev-parse --verify",
        ),
        (
            vec!["ledger", "read", "project", "--repo", "repo", "--rev", "nosuch"],
            "revision `nosuch` of repository repo not resolved",
        ),
        (
            vec!["ledger", "build", "project", "--repo", "nope", "--no-wait"],
            "revision `HEAD` of repository nope not resolved (source failed to resolve a revision: git rev-parse",
        ),
    ] {
        expect_failure(&run(root.path(), &args), 7, needle, &args);
    }
    assert!(!root.path().join("project").exists(), "nothing created");
}

/// `--limit N` bounds the commits of every walk together (with several `--rev`, each commit
/// once); 0, a negative number or a word is a usage error (exit 2), as is a build without a
/// wait or with two.
#[test]
fn limit_bounds_the_commits_and_bad_command_lines_are_usage_errors() {
    let root = tempfile::tempdir().unwrap();
    let repo = repo(root.path());
    let two = json(
        root.path(),
        &[
            "ledger", "read", "project", "--repo", "repo", "--limit", "2",
        ],
    );
    assert_eq!(subjects(&two), SUBJECTS[..2]);
    assert_eq!(two["commits"], 2);
    assert_eq!(two["added"], 2, "{two}");
    let built = json(
        root.path(),
        &[
            "ledger",
            "build",
            "project",
            "--repo",
            "repo",
            "--limit",
            "1",
            "--hunks",
            "--no-wait",
        ],
    );
    assert_eq!((&built["commits"], &built["added"]), (&1.into(), &1.into()));
    let both = json(
        root.path(),
        &[
            "ledger", "read", "project", "--repo", "repo", "--rev", "HEAD~1", "--rev", "HEAD",
            "--limit", "3",
        ],
    );
    assert_eq!(subjects(&both), ["change 1", "change 0", "change 2"]);
    assert_eq!(
        both["heads"],
        serde_json::json!([oid(&repo, "HEAD~1"), oid(&repo, "HEAD")])
    );
    let text = ok(
        root.path(),
        &[
            "ledger", "read", "project", "--repo", "repo", "--limit", "1", "--hunks",
        ],
    );
    assert_eq!(
        text,
        format!(
            "{} 2023-11-14T22:13:20.000Z change 2\n  f.txt\n    -0,0 +1,1\nledger project/ledger.snapshot: unchanged, every fact was already there (nothing written); 1 commit(s) read\n",
            oid(&repo, "HEAD")
        )
    );

    let read = ["ledger", "read", "project", "--repo", "repo"];
    for bad in ["0", "-1", "two"] {
        let out = run(root.path(), &[&read[..], &["--limit", bad]].concat());
        expect_failure(&out, 2, "--limit <N>", &bad);
    }
    let build = ["ledger", "build", "project", "--repo", "repo"];
    for (extra, needle) in [
        (&[][..], "<--wait-ms <MS>|--no-wait>"),
        (&["--no-wait", "--wait-ms", "5"][..], "cannot be used with"),
        (&["--wait-ms", "0"][..], "greater than zero"),
        (&["--wait-ms", "-5"][..], "greater than zero"),
    ] {
        let out = run(root.path(), &[&build[..], extra].concat());
        expect_failure(&out, 2, needle, &extra);
    }
}

/// A lock record whose owner is unknown from here (written in record-only mode by a process
/// of another PID namespace) makes a build fail loudly (exit 7), and a read that needs a fact
/// too; a read that finds every fact in the snapshot never consults the lock and answers.
#[test]
fn an_unknown_lock_owner_is_loud() {
    let root = tempfile::tempdir().unwrap();
    repo(root.path());
    let build = [
        "ledger",
        "build",
        "project",
        "--repo",
        "repo",
        "--limit",
        "1",
        "--no-wait",
    ];
    json(root.path(), &build);
    let record = format!(
        "solewriter-project-lock v2\npid 4000007\nstart 10\nboot b00f\npidns 1\nguard record-only\nnonce {}\nacquired_ms 1\n",
        "5a".repeat(32)
    );
    let lock = root.path().join("project/project.lock");
    std::fs::write(&lock, &record).unwrap();
    let needle =
        "has owner pid 4000007 (start 10, boot b00f, pid namespace 1) whose liveness is unknown";
    expect_failure(&run(root.path(), &build), 7, needle, &"build");
    let read = ["ledger", "read", "project", "--repo", "repo"];
    expect_failure(&run(root.path(), &read), 7, needle, &"read needing facts");
    let cached = json(root.path(), &[&read[..], &["--limit", "1"]].concat());
    assert_eq!(cached["persisted"], "unchanged", "{cached}");
    let status = json(root.path(), &["ledger", "status", "project"]);
    assert_eq!(status["lock"]["state"], "unknown", "{status}");
    assert_eq!(std::fs::read_to_string(&lock).unwrap(), record, "untouched");
}
