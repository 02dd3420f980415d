//! The takeover and the crash path across real OS processes (the `solewriter holder`
//! protocol): a holder frozen with SIGSTOP past its expiry is fenced after a takeover; a
//! holder frozen INSIDE its transaction cannot be taken over and aborts when resumed; and a
//! holder killed with SIGKILL at every step of publication leaves a store that opens, a
//! `current.json` that is absent or complete, and a next holder that republishes exactly the
//! committed rows and removes the leftovers. A producer killed between its row write and
//! its commit leaves the store exactly as before (every kind of submission: insert, advance,
//! degrade, replay), and retrying it then does what it would have done.
//!
//! No step has to happen before a real deadline: every process of a test reads one broker
//! clock that only the test moves, leases are ten minutes long, and a lease expires when the
//! test moves the clock past it (`Env::expire`). Waits are on the holders' answers.

mod support;

use serde_json::Value;
use solewriter::projection::PublishStep;
use std::process::Command;
use support::*;

fn signal(holder: &Holder, sig: &str) {
    let status = Command::new("kill")
        .args([sig, &holder.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill {sig}");
}

/// Acquires epoch `epoch`; returns the grant's expiry (ms on the shared clock).
#[track_caller]
fn acquired(holder: &mut Holder, epoch: &str) -> String {
    let answer = holder.ask("acquire");
    expect_answer(&answer, &format!("acquired {epoch}"), &"acquire");
    word(&answer, 2).to_owned()
}

fn doc(env: &Env) -> Value {
    serde_json::from_slice(&std::fs::read(env.current()).unwrap()).expect("complete document")
}

fn temps(env: &Env) -> usize {
    let dir = env.current().parent().unwrap().to_owned();
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with(".current.json.tmp-")
            })
            .count()
        })
        .unwrap_or(0)
}

/// A store with the given timing and one committed submission (watermark 1, body "one").
fn env_with_one_route(timing: &str) -> Env {
    let env = Env::clocked(timing);
    assert!(env
        .submit("router", "computed-route", "1", "one")
        .status
        .success());
    env
}

#[test]
fn holder_frozen_past_expiry_is_fenced_after_takeover() {
    let env = Env::clocked(LONG_LEASE);
    assert!(env
        .submit("router", "computed-route", "1", "a")
        .status
        .success());
    let mut a = env.holder("a", &[]);
    let mut b = env.holder("b", &[]);
    let expires = acquired(&mut a, "1");
    signal(&a, "-STOP");
    expect_answer(&b.ask("acquire"), "held 1", &"B while A's grant is live");
    env.expire(&expires);
    acquired(&mut b, "2");
    // A resumes while B still holds its live grant (B has not published yet).
    signal(&a, "-CONT");
    assert_eq!(a.ask("publish"), "fenced superseded 2");
    assert!(!env.current().exists(), "the stale holder wrote nothing");
    expect_answer(&b.ask("publish"), "published 2", &"B");
    assert_eq!(doc(&env)["fencingEpoch"], 2);
    assert_eq!(temps(&env), 0);
    a.quit();
    b.quit();
}

#[test]
fn holder_frozen_inside_its_transaction_cannot_be_taken_over() {
    let env = Env::clocked("lease_ttl_ms = 600000\nbusy_timeout_ms = 300");
    assert!(env
        .submit("router", "computed-route", "1", "a")
        .status
        .success());
    let mut a = env.holder("a", &["--stall-at", "revalidated"]);
    let mut b = env.holder("b", &[]);
    let expires = acquired(&mut a, "1");
    assert_eq!(a.ask("publish"), "stalled revalidated");
    signal(&a, "-STOP");
    a.send("continue"); // buffered until A runs again
    env.expire(&expires);
    // A's lease has expired by the clock, but A holds SQLite's write lock.
    assert_eq!(b.ask("acquire"), "busy");
    assert!(!env.current().exists(), "nothing renamed");
    signal(&a, "-CONT");
    assert_eq!(
        a.recv(),
        "expired",
        "A resumes past its expiry and aborts before the rename"
    );
    assert!(!env.current().exists(), "current.json untouched");
    assert_eq!(temps(&env), 0, "A removed its temp file");
    acquired(&mut b, "2");
    expect_answer(&b.ask("publish"), "published 2", &"B after A aborted");
    a.quit();
    b.quit();
}

#[test]
fn holder_killed_at_every_publication_step_loses_nothing() {
    for step in PublishStep::ALL {
        let env = env_with_one_route(LONG_LEASE);
        let mut z = env.holder("z", &[]);
        acquired(&mut z, "1");
        expect_answer(&z.ask("publish"), "published 1", &step);
        z.quit();
        let before = std::fs::read(env.current()).unwrap();
        assert!(env
            .submit("router", "computed-route", "2", "two")
            .status
            .success());

        let mut a = env.holder("a", &["--stall-at", step.name()]);
        let expires = acquired(&mut a, "2");
        assert_eq!(a.ask("publish"), format!("stalled {}", step.name()));
        a.child.kill().unwrap(); // SIGKILL inside the transaction
        a.child.wait().unwrap();

        // The store opens and the committed rows are all there.
        let inspect: Value = serde_json::from_str(&env.ok(&["inspect", "--json"])).unwrap();
        let text = inspect.to_string();
        assert!(
            text.contains("\"sourceWatermark\":2"),
            "{step:?}: committed submission lost: {text}"
        );
        // current.json is the previous complete document, or A's complete new one.
        let after = doc(&env);
        let renamed = matches!(
            step,
            PublishStep::Renamed
                | PublishStep::Released
                | PublishStep::Unlocked
                | PublishStep::DirectorySynced
        );
        if renamed {
            assert_eq!(after["fencingEpoch"], 2, "{step:?}");
        } else {
            assert_eq!(
                std::fs::read(env.current()).unwrap(),
                before,
                "{step:?}: current.json changed"
            );
        }
        // The lease stays A's until it expires — unless A was killed after its release
        // committed (only the directory fsync follows the commit); then B takes over and
        // republishes.
        let mut b = env.holder("b", &[]);
        if !matches!(step, PublishStep::Unlocked | PublishStep::DirectorySynced) {
            expect_answer(&b.ask("acquire"), "held 2", &step);
            env.expire(&expires);
        }
        acquired(&mut b, "3");
        expect_answer(&b.ask("publish"), "published 3", &step);
        let republished = doc(&env);
        assert_eq!(
            republished["channels"][0]["sourceWatermark"], 2,
            "{step:?}: republished from the committed rows"
        );
        assert_eq!(
            temps(&env),
            0,
            "{step:?}: leftovers removed by the next publication"
        );
        b.quit();
    }
}

/// The store's targets as `inspect --json` shows them (the store opens, every row decodes).
fn committed_rows(env: &Env) -> Value {
    let inspect: Value = serde_json::from_str(&env.ok(&["inspect", "--json"])).unwrap();
    inspect["targets"].clone()
}

#[test]
fn producer_killed_before_its_commit_leaves_nothing_partial() {
    // (channel, watermark, body, what the retried submission then does)
    let cases = [
        ("lifecycle-frontier", "1", "new", "inserted"),
        ("computed-route", "2", "two", "advanced"),
        ("computed-route", "1", "conflicting", "degraded"),
        ("computed-route", "1", "one", "replayed"),
    ];
    for (channel, watermark, body, retried) in cases {
        let env = Env::clocked(LONG_LEASE);
        let owner = if channel == "computed-route" {
            "router"
        } else {
            "frontier"
        };
        assert!(env
            .submit("router", "computed-route", "1", "one")
            .status
            .success());
        let before = committed_rows(&env);

        let mut p = env.stalled_submit(owner, channel, watermark, body);
        assert_eq!(
            p.recv(),
            "stalled row-written",
            "{channel} {watermark} {body}"
        );
        p.child.kill().unwrap(); // SIGKILL between the row write and the commit
        p.child.wait().unwrap();

        assert_eq!(
            committed_rows(&env),
            before,
            "{body}: the uncommitted row is absent"
        );
        let out = env.submit(owner, channel, watermark, body);
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(said.starts_with(retried), "{body}: {said}");
    }
}

/// Liveness: a holder frozen (SIGSTOP) at any step OUTSIDE its transaction holds no lock, so
/// once its lease has expired a successor is granted and publishes on its first attempt, and
/// the frozen holder, resumed, is fenced (or, frozen after its own rename, has already
/// published). Frozen INSIDE its transaction it holds the store's write lock: the successor's
/// attempt answers `busy` after the busy timeout (the bound FENCING.md states). Prints how
/// long each successor took.
#[test]
fn a_holder_frozen_outside_its_transaction_never_stops_its_successor() {
    let mut figures = Vec::new();
    for step in PublishStep::ALL {
        let env = env_with_one_route("lease_ttl_ms = 600000\nbusy_timeout_ms = 300");
        let mut a = env.holder("a", &["--stall-at", step.name()]);
        let expires = acquired(&mut a, "1");
        assert_eq!(a.ask("publish"), format!("stalled {}", step.name()));
        signal(&a, "-STOP");
        a.send("continue"); // buffered until A runs again
        let inside = matches!(
            step,
            PublishStep::TransactionOpen
                | PublishStep::Revalidated
                | PublishStep::DeadlineChecked
                | PublishStep::Renamed
                | PublishStep::Released
        );
        let after_own_commit = matches!(step, PublishStep::Unlocked | PublishStep::DirectorySynced);
        if !after_own_commit {
            env.expire(&expires);
        }
        let mut b = env.holder("b", &[]);
        let started = std::time::Instant::now();
        let first = b.ask("acquire");
        if inside {
            assert_eq!(first, "busy", "{step:?}: frozen inside its transaction");
            figures.push(format!(
                "{}: busy after {:?}",
                step.name(),
                started.elapsed()
            ));
            signal(&a, "-CONT");
            a.recv();
            a.quit();
            continue;
        }
        expect_answer(&first, "acquired 2", &step);
        expect_answer(&b.ask("publish"), "published 2", &step);
        figures.push(format!(
            "{}: successor granted and published in {:?}",
            step.name(),
            started.elapsed()
        ));
        assert_eq!(doc(&env)["fencingEpoch"], 2, "{step:?}");
        signal(&a, "-CONT");
        let resumed = a.recv();
        if after_own_commit {
            expect_answer(&resumed, "published 1", &step);
        } else {
            assert_eq!(resumed, "fenced superseded 2", "{step:?}");
        }
        assert_eq!(
            doc(&env)["fencingEpoch"],
            2,
            "{step:?}: the resumed holder changed nothing"
        );
        a.quit();
        b.quit();
    }
    println!(
        "liveness (holder frozen at each step):\n  {}",
        figures.join("\n  ")
    );
}

/// Every published document carries an epoch above every document before it, also when a
/// one-shot publication (grant, rename and release in one transaction) is killed at every step:
/// killed between its rename and its commit, it leaves a document of an epoch the store rolled
/// back, and the next grant numbers past it.
#[test]
fn a_one_shot_killed_at_every_step_never_leaves_an_epoch_to_be_published_twice() {
    for step in PublishStep::ALL {
        let env = env_with_one_route(LONG_LEASE);
        let mut z = env.holder("z", &[]);
        expect_answer(&z.ask("publish-now"), "published 1", &step);
        z.quit();
        let mut a = env.holder("a", &["--stall-at", step.name()]);
        assert_eq!(a.ask("publish-now"), format!("stalled {}", step.name()));
        a.child.kill().unwrap();
        a.child.wait().unwrap();
        let left = doc(&env)["fencingEpoch"].as_u64().unwrap();
        let mut b = env.holder("b", &[]);
        let answer = b.ask("publish-now");
        let after_commit = matches!(step, PublishStep::Unlocked | PublishStep::DirectorySynced);
        // A's grant committed only if A was killed after its commit; else the store is back at
        // epoch 1, released, and B is granted at once.
        assert!(answer.starts_with("published "), "{step:?}: {answer}");
        let published: u64 = word(&answer, 1).parse().unwrap();
        assert!(
            published > left,
            "{step:?}: published epoch {published} after a document of epoch {left} (A's commit {})",
            if after_commit { "landed" } else { "was lost" }
        );
        assert_eq!(
            doc(&env)["fencingEpoch"].as_u64(),
            Some(published),
            "{step:?}"
        );
        b.quit();
    }
}
