//! `solewriter watch`: a process blocked in the wait (seen in `poll` through
//! `/proc/<pid>/wchan`, not guessed with a sleep) prints the next publication as soon as it
//! lands; a wait that sees none within its timeout exits 6.

mod support;

use std::process::Stdio;
use std::time::{Duration, Instant};
use support::*;

/// Waits until process `pid` is blocked in `poll(2)` (its kernel wait channel), failing after
/// a generous hang guard.
fn blocked_in_poll(pid: u32) {
    let guard = Instant::now() + Duration::from_secs(60);
    loop {
        let wchan = std::fs::read_to_string(format!("/proc/{pid}/wchan")).unwrap_or_default();
        if wchan.contains("poll") {
            return;
        }
        assert!(
            Instant::now() < guard,
            "watch never blocked in poll (wchan {wchan:?})"
        );
        std::thread::yield_now();
    }
}

/// Waits for `child` to exit after the publication it waits for. Its own timeout is an hour:
/// a watch that did not wake on the publication is caught by this hang guard, not by its
/// timeout (a final read at its deadline would find the document and hide the bug).
fn woken(child: std::process::Child) -> serde_json::Value {
    let mut child = child;
    let guard = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        assert!(
            Instant::now() < guard,
            "watch did not wake on the publication"
        );
        std::thread::yield_now();
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn publish(env: &Env, watermark: &str) {
    let out = env.submit("router", "computed-route", watermark, "w");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    env.ok(&["publish", TARGET, "--instance", "ops-1"]);
}

#[test]
fn a_blocked_watch_prints_the_next_publication() {
    let env = Env::admitted("lease_ttl_ms = 5000\nbusy_timeout_ms = 2000");
    // Nothing published yet: the target's directory does not even exist.
    let first = env
        .command()
        .arg("--config")
        .arg(&env.config)
        .args(["--json", "watch", TARGET, "--timeout-ms", "3600000"])
        .current_dir(env.dir.path())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    blocked_in_poll(first.id());
    publish(&env, "1");
    assert_eq!(woken(first)["fencingEpoch"], 1);

    // Waiting past the current epoch: only the next publication answers.
    let second = env
        .command()
        .arg("--config")
        .arg(&env.config)
        .args([
            "--json",
            "watch",
            TARGET,
            "--after-epoch",
            "1",
            "--timeout-ms",
            "3600000",
        ])
        .current_dir(env.dir.path())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    blocked_in_poll(second.id());
    publish(&env, "2");
    let doc = woken(second);
    assert_eq!(doc["fencingEpoch"], 2);
    assert_eq!(doc["channels"][0]["sourceWatermark"], 2);
}

#[test]
fn a_watch_that_sees_nothing_newer_times_out_with_exit_6() {
    let env = Env::admitted("lease_ttl_ms = 5000\nbusy_timeout_ms = 2000");
    publish(&env, "1");
    env.fails(
        &["watch", TARGET, "--after-epoch", "1", "--timeout-ms", "20"],
        6,
        "no document newer than epoch 1",
    );
    // A document already newer answers at once.
    assert!(env
        .ok(&[
            "--json",
            "watch",
            TARGET,
            "--after-epoch",
            "0",
            "--timeout-ms",
            "20"
        ])
        .contains("\"fencingEpoch\":1"));
    env.fails(
        &["watch", TARGET, "--timeout-ms", "0"],
        2,
        "greater than zero",
    );
}
