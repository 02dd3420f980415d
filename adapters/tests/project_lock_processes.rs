//! The project lock across real processes: a `kill -9` at random points of acquisition,
//! release and recovery never leaves an unreadable lock, and many processes recovering one
//! dead lock at once elect exactly one holder.

mod children;

use children::{commands, dead_owner, role, say, ChildProc};
use solewriter_adapters::process::SystemProbe;
use solewriter_adapters::project_lock::{LockError, ProjectLock, Released, Wait, LOCK_FILE};
use solewriter_core::ownership::{LockNonce, LockRecord};
use solewriter_core::time::Millis;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

const KILL_RUNS: usize = 150;
const RECOVERERS: usize = 8;
const RECOVERY_ROUNDS: usize = 50;

fn lock(dir: &Path) -> ProjectLock {
    ProjectLock::new(dir, Arc::new(SystemProbe))
}

fn random_below(n: u64) -> u64 {
    let mut b = [0u8; 8];
    getrandom::fill(&mut b).unwrap();
    u64::from_le_bytes(b) % n
}

#[test]
fn kill_9_at_random_points_never_leaves_an_unreadable_lock() {
    if let Some((_, dir)) = role() {
        // Child: acquire and release forever (recovering the previous victim's dead lock
        // when there is one) until killed.
        let lock = lock(&dir);
        say("ready");
        loop {
            let guard = lock.acquire(Wait::Within(Duration::from_secs(30))).unwrap();
            guard.release().unwrap();
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("p");
    let lock = lock(&project);
    let name = "kill_9_at_random_points_never_leaves_an_unreadable_lock";
    let mut left_locked = 0;
    let mut victims = Vec::new();
    for run in 0..KILL_RUNS {
        let mut child = ChildProc::spawn(name, "acquirer", &project);
        assert_eq!(child.line(), "ready");
        std::thread::sleep(Duration::from_micros(random_below(3_000)));
        child.child.kill().unwrap();
        child.child.wait().unwrap();
        victims.push(child.child.id());
        // Whatever the kill interrupted, the lock is absent or a complete record of a
        // (now dead) victim, never empty or torn.
        match lock.current() {
            Ok(Some(record)) => {
                assert!(victims.contains(&record.owner.pid), "run {run}: {record:?}");
                left_locked += 1;
            }
            Ok(None) => {}
            Err(e) => panic!("run {run}: unreadable lock after kill -9: {e}"),
        }
        // Every fourth run the parent takes the lock (recovering the dead child's); the
        // other runs leave the recovery to the next child, so kills also land in recovery.
        if run % 4 == 3 {
            let guard = lock.acquire(Wait::NoWait).unwrap();
            assert_eq!(guard.release().unwrap(), Released::Removed);
        }
    }
    let guard = lock.acquire(Wait::NoWait).unwrap();
    assert_eq!(guard.release().unwrap(), Released::Removed);
    let temps = std::fs::read_dir(&project)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.contains(".tmp-"))
        .count();
    assert_eq!(temps, 0, "temps of killed creators are swept");
    eprintln!("kill -9 runs: {KILL_RUNS}, lock left by the victim: {left_locked}");
}

#[test]
fn many_recoverers_of_one_dead_lock_elect_exactly_one_holder() {
    if let Some((_, dir)) = role() {
        let lock = lock(&dir);
        let mut held = None;
        say("ready");
        for command in commands() {
            match command.as_str() {
                "go" => match lock.acquire(Wait::NoWait) {
                    Ok(guard) => {
                        held = Some(guard);
                        say("won");
                    }
                    Err(LockError::Busy { .. }) => say("busy"),
                    Err(e) => say(&format!("error {e}")),
                },
                _ => {
                    if let Some(guard) = held.take() {
                        assert_eq!(guard.release().unwrap(), Released::Removed);
                    }
                    say("released");
                }
            }
        }
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("p");
    std::fs::create_dir(&project).unwrap();
    let name = "many_recoverers_of_one_dead_lock_elect_exactly_one_holder";
    let mut children: Vec<_> = (0..RECOVERERS)
        .map(|_| ChildProc::spawn(name, "recoverer", &project))
        .collect();
    for child in &mut children {
        assert_eq!(child.line(), "ready");
    }
    let dead = dead_owner();
    for round in 0..RECOVERY_ROUNDS {
        let record = LockRecord {
            owner: dead.clone(),
            nonce: LockNonce::from_bytes([round as u8; 32]),
            acquired_at: Millis(1),
        };
        std::fs::write(project.join(LOCK_FILE), record.encode()).unwrap();
        for child in &mut children {
            child.send("go");
        }
        let answers: Vec<String> = children.iter_mut().map(|c| c.line()).collect();
        let winners = answers.iter().filter(|a| *a == "won").count();
        let busy = answers.iter().filter(|a| *a == "busy").count();
        assert_eq!(
            (winners, busy),
            (1, RECOVERERS - 1),
            "round {round}: {answers:?}"
        );
        for child in &mut children {
            child.send("release");
        }
        for child in &mut children {
            assert_eq!(child.line(), "released");
        }
        assert!(!project.join(LOCK_FILE).exists());
    }
    for child in children {
        child.finish();
    }
    eprintln!("recovery rounds: {RECOVERY_ROUNDS} x {RECOVERERS} processes, one holder each");
}
