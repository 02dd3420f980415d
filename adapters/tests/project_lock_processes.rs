//! The project lock across real processes: a `kill -9` at every named step and at random
//! points of acquisition, release and recovery never leaves an unreadable lock (and the next
//! acquirer succeeds and leaves no temp or claim behind), and many processes recovering one
//! dead lock at once elect exactly one holder. The random kill delays come from a printed seed
//! (`SOLEWRITER_TEST_SEED` replays one), and the run fails unless some kills interrupted the
//! protocol (leaving the victim's lock, temp or claim).

mod children;

use children::{commands, dead_owner, role, say, ChildProc};
use solewriter_adapters::project_lock::process::SystemProbe;
use solewriter_adapters::project_lock::{
    LockError, LockProbe, LockStep, ProjectLock, Released, Wait, KERNEL_LOCK_FILE, LOCK_FILE,
};
use solewriter_core::project_lock::ownership::{Guard, LockNonce, LockRecord, OwnerIdentity};
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

/// Where the kill delays come from: `SOLEWRITER_TEST_SEED` if set, otherwise a fixed seed.
/// The seed is printed and named in every failure, so a run's delays can be replayed (the
/// kills still land where the scheduler lets them).
fn seed() -> u64 {
    match std::env::var("SOLEWRITER_TEST_SEED") {
        Ok(text) => text
            .parse()
            .unwrap_or_else(|_| panic!("SOLEWRITER_TEST_SEED={text:?} is not a u64")),
        Err(_) => 0x5015_0b17,
    }
}

/// splitmix64: a small seeded source of delays, no dependency.
struct Delays(u64);

impl Delays {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % n
    }
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
    let seed = seed();
    eprintln!("kill delays: SOLEWRITER_TEST_SEED={seed}");
    let mut delays = Delays(seed);
    let mut left_locked = 0;
    let mut mid_protocol = 0;
    let mut victims = Vec::new();
    for run in 0..KILL_RUNS {
        let mut child = ChildProc::spawn(name, "acquirer", &project);
        assert_eq!(child.line(), "ready");
        // The delay only spreads the kills over the child's loop; what matters is where they
        // land, which is counted below.
        std::thread::sleep(Duration::from_micros(delays.below(3_000)));
        child.child.kill().unwrap();
        child.child.wait().unwrap();
        victims.push(child.child.id());
        // Whatever the kill interrupted, the lock is absent or a complete record of a
        // (now dead) victim, never empty or torn.
        let held = match lock.current() {
            Ok(Some(record)) => {
                assert!(
                    victims.contains(&record.owner.pid),
                    "run {run} (SOLEWRITER_TEST_SEED={seed}): {record:?}"
                );
                left_locked += 1;
                true
            }
            Ok(None) => false,
            Err(e) => {
                panic!(
                    "run {run} (SOLEWRITER_TEST_SEED={seed}): unreadable lock after kill -9: {e}"
                )
            }
        };
        // A kill landed mid-protocol if it left this victim's lock, temp or recovery claim
        // (leftovers of earlier victims not yet swept do not count).
        let victim = child.child.id();
        let owned = |name: &String| {
            name.contains(&format!(".{victim}."))
                || std::fs::read(project.join(name)).is_ok_and(|bytes| {
                    String::from_utf8_lossy(&bytes).contains(&format!("\npid {victim}\n"))
                })
        };
        let own_lock = held && lock.current().ok().flatten().map(|r| r.owner.pid) == Some(victim);
        // (The first victims may die before the project directory exists.)
        let left = if project.exists() {
            leftovers(&project)
        } else {
            Vec::new()
        };
        if own_lock || left.iter().any(owned) {
            mid_protocol += 1;
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
    eprintln!(
        "kill -9 runs: {KILL_RUNS}, lock left by the victim: {left_locked}, \
         mid-protocol (lock, temp or claim left): {mid_protocol}"
    );
    // A run whose kills all landed before the first acquisition or between a release and the
    // next acquisition would test nothing; at least some must interrupt the protocol.
    assert!(
        mid_protocol >= KILL_RUNS / 20,
        "only {mid_protocol} of {KILL_RUNS} kills landed mid-protocol (SOLEWRITER_TEST_SEED={seed})"
    );
}

/// Stops the process at the first `step` reached on the lock (or on a claim), says so and
/// waits for a line that never comes (the parent kills it).
struct StallAt {
    step: LockStep,
    on_claim: bool,
}

impl LockProbe for StallAt {
    fn reached(&self, step: LockStep, path: &Path) {
        let claim = path.to_string_lossy().contains(".recover-");
        if step == self.step && claim == self.on_claim {
            say(&format!("stalled {step:?}"));
            let _ = commands().next();
        }
    }
}

/// Leftover temps and claims in the project directory (the lock record and the kernel lock
/// file, which is never removed, are not leftovers).
fn leftovers(project: &Path) -> Vec<String> {
    std::fs::read_dir(project)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n != LOCK_FILE && n != KERNEL_LOCK_FILE)
        .collect()
}

fn plant(project: &Path, owner: &OwnerIdentity, nonce: u8) {
    let record = LockRecord {
        owner: owner.clone(),
        guard: Guard::Kernel,
        nonce: LockNonce::from_bytes([nonce; 32]),
        acquired_at: Millis(1),
    };
    std::fs::write(project.join(LOCK_FILE), record.encode()).unwrap();
}

#[test]
fn kill_9_at_every_lock_step_leaves_a_complete_lock_or_none() {
    if let Some((role, dir)) = role() {
        // Child: `<step index> <lock|claim>`; acquire (recovering a planted dead lock, if
        // any) and release, stalling at that step.
        let (index, kind) = role.split_once(' ').unwrap();
        let step = LockStep::ALL[index.parse::<usize>().unwrap()];
        let probe = StallAt {
            step,
            on_claim: kind == "claim",
        };
        let lock = lock(&dir).with_probe(Arc::new(probe));
        lock.acquire(Wait::NoWait).unwrap().release().unwrap();
        say("finished without stalling");
        return;
    }
    let name = "kill_9_at_every_lock_step_leaves_a_complete_lock_or_none";
    let dead = dead_owner();
    let mut killed = 0;
    for (recovering, kind) in [(false, "lock"), (true, "lock"), (true, "claim")] {
        for (index, step) in LockStep::ALL.into_iter().enumerate() {
            if kind == "claim" && matches!(step, LockStep::Acquired | LockStep::KernelLocked) {
                continue; // a claim is never "acquired", nor kernel-locked
            }
            let case = format!("{step:?} on the {kind}, recovering: {recovering}");
            let dir = tempfile::tempdir().unwrap();
            let project = dir.path().join("p");
            std::fs::create_dir(&project).unwrap();
            if recovering {
                plant(&project, &dead, 7);
            }
            let mut child = ChildProc::spawn(name, &format!("{index} {kind}"), &project);
            assert_eq!(child.line(), format!("stalled {step:?}"), "{case}");
            child.child.kill().unwrap();
            child.child.wait().unwrap();
            killed += 1;
            let victim = child.child.id();
            match lock(&project).current() {
                Ok(None) => {}
                Ok(Some(record)) => assert!(
                    record.owner.pid == victim || record.owner == dead,
                    "{case}: {record:?}"
                ),
                Err(e) => panic!("{case}: unreadable lock after kill -9: {e}"),
            }
            let guard = lock(&project).acquire(Wait::NoWait).unwrap();
            assert_eq!(leftovers(&project), Vec::<String>::new(), "{case}");
            assert_eq!(guard.release().unwrap(), Released::Removed, "{case}");
        }
    }
    eprintln!("lock steps killed at: {killed}");
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
        plant(&project, &dead, round as u8);
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
