//! The operator's commands across real processes: `lease end` (a holder process is fenced
//! and writes nothing; a lease with no live grant has nothing to end) and `lock clear` (only
//! an unknown owner's record, only with its nonce).
//!
//! Holders share one broker clock that only the test moves (`Env::clocked`); nothing waits
//! for a real deadline.

mod support;

use serde_json::Value;
use support::*;

fn json(out: &str) -> Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// The holder process acquires, the operator ends its grant, and the holder's publication is
/// refused as fenced: `current.json` stays byte for byte the earlier publication. Ending
/// again finds the lease released (exit 0, nothing written), and the next grant's epoch is
/// higher than the ended one.
#[test]
fn lease_end_fences_the_holder_process_and_leaves_current_json_untouched() {
    let env = Env::clocked(LONG_LEASE);
    assert!(env
        .submit("router", "computed-route", "1", "a")
        .status
        .success());
    env.ok(&["publish", TARGET, "--instance", "first"]);
    let before = std::fs::read(env.current()).unwrap();
    let mut a = env.holder("a", &[]);
    expect_answer(&a.ask("acquire"), "acquired 2", &"acquire");
    let out = env.ok(&["lease", "end", TARGET]);
    assert!(
        out.starts_with(&format!(
            "ended epoch 2 of target {TARGET}, held by a until "
        )),
        "{out}"
    );
    assert!(out.contains("the holder is fenced"), "{out}");
    assert_eq!(a.ask("publish"), "fenced released");
    assert_eq!(
        std::fs::read(env.current()).unwrap(),
        before,
        "the fenced holder wrote nothing"
    );
    let again = json(&env.ok(&["--json", "lease", "end", TARGET]));
    assert_eq!(again["ended"], false, "{again}");
    assert_eq!(again["found"], "released", "{again}");
    assert_eq!(again["fencingEpoch"], 2, "{again}");
    expect_answer(&a.ask("acquire"), "acquired 3", &"the next grant");
    let ended = json(&env.ok(&["lease", "end", TARGET, "--json"]));
    assert_eq!(
        (&ended["ended"], &ended["found"], &ended["fencingEpoch"]),
        (&Value::Bool(true), &"held".into(), &3.into()),
        "{ended}"
    );
    assert_eq!(ended["holder"], "a", "{ended}");
    assert_eq!(a.ask("release"), "not-holder released");
    a.quit();
}

/// A lease never granted has nothing to end: exit 0, the state named, nothing written. An
/// expired one has no live grant either (`ended: false`, `found: expired`), but it is marked
/// released, so the broker clock set back before its expiry does not make it live again: its
/// holder stays fenced. A target never admitted is refused (exit 5), as is a malformed target
/// id.
#[test]
fn lease_end_of_a_free_or_expired_lease_ends_nothing_live_and_an_unknown_target_is_refused() {
    let env = Env::clocked(LONG_LEASE);
    assert_eq!(
        env.ok(&["lease", "end", TARGET]).trim(),
        format!(
            "nothing held: the lease of target {TARGET} is unheld at epoch 0; nothing was written"
        )
    );
    let mut a = env.holder("a", &[]);
    let answer = a.ask("acquire");
    expect_answer(&answer, "acquired 1", &"acquire");
    let granted_at = env.now();
    env.expire(word(&answer, 2));
    let out = json(&env.ok(&["--json", "lease", "end", TARGET]));
    assert_eq!(
        (&out["ended"], &out["found"], &out["fencingEpoch"]),
        (&Value::Bool(false), &"expired".into(), &1.into()),
        "{out}"
    );
    // The clock steps back to the grant's own time: the ended grant stays ended.
    env.set_clock(granted_at);
    assert_eq!(a.ask("publish"), "fenced released");
    assert!(!env.current().exists(), "the ended holder wrote nothing");
    let inspect = json(&env.ok(&["--json", "inspect", TARGET]));
    assert_eq!(inspect["targets"][0]["state"], "released", "{inspect}");
    a.quit();
    env.fails(
        &["lease", "end", &"e".repeat(64)],
        5,
        "is not admitted; nothing was written",
    );
    env.fails(&["lease", "end", "nope"], 5, "target id `nope` refused");
}

fn lock_cmd(args: &[&str], dir: &std::path::Path, json_out: bool) -> std::process::Output {
    let mut command = std::process::Command::new(EXE);
    command.args(["lock", args[0]]).arg(dir).args(&args[1..]);
    if json_out {
        command.arg("--json");
    }
    command.output().unwrap()
}

fn stdout(out: &std::process::Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// An operator clears a record whose owner is unknown from here (written in record-only mode
/// by a process of another PID namespace, in the documented lock file format) with the nonce
/// `lock status` shows; another nonce or a malformed one is refused and removes nothing; no
/// lock is nothing to clear (exit 0). Afterwards the lock can be taken again.
#[test]
fn lock_clear_removes_an_unknown_owners_record_only_with_its_nonce() {
    let dir = tempfile::tempdir().unwrap();
    let lock_file = dir.path().join("project.lock");
    let nonce = "ab".repeat(32);
    let out = stdout(&lock_cmd(&["clear", "--nonce", &nonce], dir.path(), false));
    assert_eq!(
        out.trim(),
        format!(
            "nothing to clear: {} does not exist; nothing was removed",
            lock_file.display()
        )
    );
    let record = format!(
        "solewriter-project-lock v2\npid 4000005\nstart 10\nboot b00f\npidns 1\nguard record-only\nnonce {nonce}\nacquired_ms 1\n"
    );
    std::fs::write(&lock_file, &record).unwrap();
    let status = json(&stdout(&lock_cmd(&["status"], dir.path(), true)));
    assert_eq!(status["state"], "unknown", "{status}");
    assert_eq!(status["nonce"], nonce.as_str(), "{status}");
    let text = stdout(&lock_cmd(&["status"], dir.path(), false));
    assert!(text.contains(&format!("nonce {nonce}")), "{text}");
    let other = "cd".repeat(32);
    expect_failure(
        &lock_cmd(&["clear", "--nonce", &other], dir.path(), false),
        14,
        &format!("carries nonce {nonce}, not the one given"),
        &"another nonce",
    );
    expect_failure(
        &lock_cmd(&["clear", "--nonce", "AB"], dir.path(), false),
        5,
        "--nonce refused",
        &"a malformed nonce",
    );
    assert_eq!(std::fs::read_to_string(&lock_file).unwrap(), record);
    let cleared = json(&stdout(&lock_cmd(
        &["clear", "--nonce", status["nonce"].as_str().unwrap()],
        dir.path(),
        true,
    )));
    assert_eq!(cleared["cleared"], true, "{cleared}");
    assert_eq!(cleared["owner"]["pid"], 4_000_005, "{cleared}");
    assert_eq!(cleared["nonce"], nonce.as_str(), "{cleared}");
    assert!(!lock_file.exists());
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(left, ["project.lock.kernel"], "no claim left behind");
    let again = json(&stdout(&lock_cmd(
        &["clear", "--nonce", &nonce],
        dir.path(),
        true,
    )));
    assert_eq!(again["cleared"], false, "{again}");
    let lock =
        solewriter::ProjectLock::new(dir.path(), std::sync::Arc::new(solewriter::SystemProbe));
    lock.acquire(solewriter::Wait::NoWait)
        .unwrap()
        .release()
        .unwrap();
}

/// A lock whose owner is known is refused whatever the nonce, and left as it is: a holder
/// (this test process) holding the kernel lock, a live record-only owner, a dead one (the next
/// acquisition recovers it). A missing directory is an error (exit 7).
#[test]
fn lock_clear_refuses_a_known_owner_and_a_held_lock() {
    use solewriter::project_lock::{Guard, LockNonce, LockRecord};
    use solewriter::ProcessProbe;
    let dir = tempfile::tempdir().unwrap();
    let lock =
        solewriter::ProjectLock::new(dir.path(), std::sync::Arc::new(solewriter::SystemProbe));
    let guard = lock.acquire(solewriter::Wait::NoWait).unwrap();
    let nonce = guard.record().nonce.to_hex();
    expect_failure(
        &lock_cmd(&["clear", "--nonce", &nonce], dir.path(), false),
        14,
        "its kernel lock is held, so its holder is running",
        &"a held lock",
    );
    guard.release().unwrap();
    let me = solewriter::SystemProbe.current().unwrap();
    let dead = solewriter::project_lock::OwnerIdentity {
        pid: 4_000_006,
        ..me.clone()
    };
    for (owner, needle) in [
        (me, "is alive: acquisitions wait for it"),
        (dead, "is dead: the next acquisition recovers its record"),
    ] {
        let record = LockRecord {
            owner,
            guard: Guard::RecordOnly,
            nonce: LockNonce::from_bytes([7; 32]),
            acquired_at: solewriter::Millis(1),
        };
        std::fs::write(lock.path(), record.encode()).unwrap();
        expect_failure(
            &lock_cmd(&["clear", "--nonce", &"07".repeat(32)], dir.path(), false),
            14,
            needle,
            &needle,
        );
        assert_eq!(
            std::fs::read_to_string(lock.path()).unwrap(),
            record.encode()
        );
    }
    expect_failure(
        &lock_cmd(
            &["clear", "--nonce", &"07".repeat(32)],
            &dir.path().join("nowhere"),
            false,
        ),
        7,
        "does not exist",
        &"a missing directory",
    );
}
