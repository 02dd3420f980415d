//! The project lock across PID namespaces and odd process shapes, with real processes: a
//! holder in its own PID namespace (`unshare --pid --fork --mount-proc`) against a host
//! contender and the other way round, two namespaced holders (both pid 1 in their
//! namespaces), `kill -9` of a namespaced holder, a demand try from a read-only view of the
//! directory, and a holder whose main thread exited while another thread holds. At most one
//! holder at any instant; from either side, status says "held" and names the holder or says
//! it cannot tell.
//!
//! Tests that need `unshare` (root, util-linux) print `SKIPPED: <reason>` and return when it
//! is unavailable; CI runs as root with `unshare`, so they run there. Every step is
//! synchronised through the children's pipes (and, for the race, an exclusive marker file);
//! the only bounded waits are hang guards. (An acquisition right after another process's
//! release waits within such a guard: a holder that spawns a child at the moment it releases
//! shares the kernel lock's file description with that child until the child's `exec`
//! closes it — this test process spawns children from parallel tests.)

mod children;

use children::{commands, role, say, ChildProc};
use solewriter_adapters::project_lock::process::{ProcessProbe, SystemProbe};
use solewriter_adapters::project_lock::{
    KernelState, LockError, LockStatus, ProjectLock, Released, Wait,
};
use solewriter_core::project_lock::ownership::{
    classify, parse_proc_stat, Ownership, ProcessSeen, UnknownReason,
};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

const ROUNDS: usize = 100;
const KILL_ROUNDS: usize = 20;
const RACE_ACQUISITIONS: usize = 300;
/// A hang guard, not a timing assertion.
const HANG_GUARD: Duration = Duration::from_secs(60);

/// `unshare` running its command as pid 1 of a new PID namespace with its own `/proc`, and
/// killing it when `unshare` itself dies.
const IN_PID_NAMESPACE: [&str; 5] = ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child"];

fn lock(dir: &Path) -> ProjectLock {
    ProjectLock::new(dir, Arc::new(SystemProbe))
}

/// Why namespaced tests cannot run here, if they cannot.
fn unshare_unavailable() -> Option<String> {
    match std::process::Command::new(IN_PID_NAMESPACE[0])
        .args(&IN_PID_NAMESPACE[1..])
        .arg("true")
        .output()
    {
        Ok(out) if out.status.success() => None,
        Ok(out) => Some(format!(
            "`unshare --pid --fork --mount-proc` failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Err(e) => Some(format!("`unshare` cannot be run: {e}")),
    }
}

macro_rules! require_unshare {
    () => {
        if let Some(why) = unshare_unavailable() {
            eprintln!("SKIPPED: {why}");
            return;
        }
    };
}

/// One word for a status: the kernel lock, then the record's judgement.
fn status_word(status: &LockStatus) -> String {
    let judged = match &status.ownership {
        None => "none".to_owned(),
        Some(Ownership::Alive) => "alive".to_owned(),
        Some(Ownership::Dead(reason)) => format!("dead:{reason:?}"),
        Some(Ownership::Unknown(UnknownReason::OtherPidNamespace { .. })) => {
            "unknown:other-namespace".to_owned()
        }
        Some(Ownership::Unknown(reason)) => format!("unknown:{reason}"),
    };
    format!("{:?}/{judged}", status.kernel)
}

/// A child holder: `acquire` (without waiting), `acquire-wait` (within the hang guard),
/// `release`, `status`; `race N` takes the lock
/// N times, each time creating and removing an exclusive marker beside the project while
/// holding it. One answer line per command.
fn serve(dir: &Path) {
    let lock = lock(dir);
    let mut held = None;
    say("ready");
    for command in commands() {
        let words: Vec<&str> = command.split(' ').collect();
        match words[..] {
            ["acquire" | "acquire-wait"] => match lock.acquire(if words[0] == "acquire" {
                Wait::NoWait
            } else {
                Wait::Within(HANG_GUARD)
            }) {
                Ok(guard) => {
                    held = Some(guard);
                    say("held");
                }
                Err(LockError::Busy { .. }) => say("busy"),
                Err(e) => say(&format!("error {e}")),
            },
            ["release"] => {
                let released = held.take().map(|g| g.release());
                say(&format!("released {released:?}"));
            }
            ["status"] => match lock.status() {
                Ok(status) => say(&status_word(&status)),
                Err(e) => say(&format!("error {e}")),
            },
            ["race", n] => {
                let marker = dir.parent().unwrap().join("inside");
                let (mut taken, mut busy) = (0, 0);
                while taken < n.parse().unwrap() {
                    match lock.acquire(Wait::NoWait) {
                        Ok(guard) => {
                            if std::fs::File::create_new(&marker).is_err() {
                                say("violation: two holders at once");
                                return;
                            }
                            std::fs::remove_file(&marker).unwrap();
                            assert_eq!(guard.release().unwrap(), Released::Removed);
                            taken += 1;
                        }
                        Err(LockError::Busy { .. }) => busy += 1,
                        Err(e) => {
                            say(&format!("error {e}"));
                            return;
                        }
                    }
                }
                say(&format!("done {busy}"));
            }
            _ => say(&format!("unknown command {command}")),
        }
    }
}

fn project() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("p");
    std::fs::create_dir(&project).unwrap();
    (dir, project)
}

/// Host and namespace, both ways round, in lockstep: each round the namespaced child holds
/// and the host is refused, then the host holds and the child is refused. From either side
/// the holder's pid means nothing (the child is pid 1 of its namespace; the host's pid does
/// not exist there), so status says "held" and "cannot tell" — where the record alone used to
/// read "dead: pid reused" and let the second acquirer in.
#[test]
fn a_namespaced_holder_and_a_host_holder_exclude_each_other() {
    if let Some((_, dir)) = role() {
        return serve(&dir);
    }
    require_unshare!();
    let (_dir, project) = project();
    let name = "a_namespaced_holder_and_a_host_holder_exclude_each_other";
    let mut child = ChildProc::spawn_wrapped(&IN_PID_NAMESPACE, name, "holder", &project);
    assert_eq!(child.line(), "ready");
    let host = lock(&project);
    let (mut host_refused, mut child_refused) = (0, 0);
    for round in 0..ROUNDS {
        child.send("acquire-wait");
        assert_eq!(child.line(), "held", "round {round}");
        match host.acquire(Wait::NoWait) {
            Err(LockError::Busy { owner: Some(o), .. }) => {
                assert_eq!(o.pid, 1, "the child is pid 1 of its namespace");
                host_refused += 1;
            }
            other => panic!("round {round}: the host got {other:?} while the child holds"),
        }
        let status = host.status().unwrap();
        assert_eq!(status_word(&status), "Held/unknown:other-namespace");
        child.send("release");
        assert!(child.line().starts_with("released Some(Ok(Removed))"));
        let guard = host.acquire(Wait::Within(HANG_GUARD)).unwrap();
        child.send("acquire");
        match child.line().as_str() {
            "busy" => child_refused += 1,
            other => panic!("round {round}: the child got {other} while the host holds"),
        }
        child.send("status");
        assert_eq!(child.line(), "Held/unknown:other-namespace");
        assert_eq!(guard.release().unwrap(), Released::Removed);
    }
    child.finish();
    eprintln!(
        "namespace rounds: {ROUNDS}; host refused while the namespaced child held: \
         {host_refused}; child refused while the host held: {child_refused}"
    );
    assert_eq!((host_refused, child_refused), (ROUNDS, ROUNDS));
}

/// Two holders in two PID namespaces — both pid 1 there, so each reads the other's record as
/// "its own pid 1, another start token" — exclude each other: in lockstep (exact figures),
/// then racing freely with an exclusive marker created and removed inside every holding.
#[test]
fn two_namespaced_holders_exclude_each_other() {
    if let Some((_, dir)) = role() {
        return serve(&dir);
    }
    require_unshare!();
    let (_dir, project) = project();
    let name = "two_namespaced_holders_exclude_each_other";
    let mut a = ChildProc::spawn_wrapped(&IN_PID_NAMESPACE, name, "holder", &project);
    let mut b = ChildProc::spawn_wrapped(&IN_PID_NAMESPACE, name, "holder", &project);
    assert_eq!((a.line(), b.line()), ("ready".into(), "ready".into()));
    let mut refused = 0;
    for round in 0..ROUNDS {
        let (first, second) = if round % 2 == 0 {
            (&mut a, &mut b)
        } else {
            (&mut b, &mut a)
        };
        first.send("acquire");
        assert_eq!(first.line(), "held", "round {round}");
        second.send("acquire");
        assert_eq!(second.line(), "busy", "round {round}");
        refused += 1;
        second.send("status");
        assert_eq!(second.line(), "Held/unknown:other-namespace");
        first.send("release");
        assert!(first.line().starts_with("released Some(Ok(Removed))"));
    }
    assert_eq!(refused, ROUNDS);
    a.send(&format!("race {RACE_ACQUISITIONS}"));
    b.send(&format!("race {RACE_ACQUISITIONS}"));
    let busy: Vec<usize> = [a.line(), b.line()]
        .iter()
        .map(|line| match line.strip_prefix("done ") {
            Some(n) => n.parse().unwrap(),
            None => panic!("{line}"),
        })
        .collect();
    a.finish();
    b.finish();
    let contended: usize = busy.iter().sum();
    eprintln!(
        "two namespaced holders: {ROUNDS} lockstep rounds, {refused} refused; race: \
         {RACE_ACQUISITIONS} acquisitions each, {contended} attempts found the other holding, \
         no overlap"
    );
    assert!(
        contended > 0,
        "the race never found the other holding: it tested nothing"
    );
}

/// `kill -9` of a namespaced holder: until it dies the host is refused; then the host
/// recovers its record — an owner it cannot classify (another namespace), recovered because
/// its kernel lock is free.
#[test]
fn kill_9_of_a_namespaced_holder_lets_the_host_recover() {
    if let Some((_, dir)) = role() {
        return serve(&dir);
    }
    require_unshare!();
    let (_dir, project) = project();
    let name = "kill_9_of_a_namespaced_holder_lets_the_host_recover";
    let host = lock(&project);
    let mut recovered = 0;
    for round in 0..KILL_ROUNDS {
        let mut child = ChildProc::spawn_wrapped(&IN_PID_NAMESPACE, name, "holder", &project);
        assert_eq!(child.line(), "ready");
        child.send("acquire");
        assert_eq!(child.line(), "held", "round {round}");
        assert!(matches!(
            host.acquire(Wait::NoWait),
            Err(LockError::Busy { .. })
        ));
        // SIGKILL to `unshare`; `--kill-child` sends SIGKILL to the holder.
        child.child.kill().unwrap();
        child.child.wait().unwrap();
        let stale = host.current().unwrap().expect("the killed holder's record");
        assert_ne!(stale.owner.pid_ns, SystemProbe.current().unwrap().pid_ns);
        // The holder dies asynchronously after `unshare`: the wait is a hang guard.
        let guard = host.acquire(Wait::Within(HANG_GUARD)).unwrap();
        assert_ne!(guard.record().nonce, stale.nonce);
        assert_eq!(guard.release().unwrap(), Released::Removed);
        recovered += 1;
    }
    eprintln!("kill -9 of a namespaced holder: {recovered} of {KILL_ROUNDS} recovered by the host");
    assert_eq!(recovered, KILL_ROUNDS);
}

/// A demand try from a read-only view of the project directory (a read-only bind mount in a
/// private mount namespace: root ignores mode bits) learns "busy" while the host holds the
/// lock: it needs to write nothing to learn it.
#[test]
fn a_busy_try_needs_no_write_access() {
    if let Some((_, dir)) = role() {
        return serve(&dir);
    }
    require_unshare!();
    let (_dir, project) = project();
    let host = lock(&project);
    let guard = host.acquire(Wait::NoWait).unwrap();
    let read_only = [
        "unshare",
        "--mount",
        "sh",
        "-c",
        r#"mount --bind "$SOLEWRITER_TEST_CHILD_DIR" "$SOLEWRITER_TEST_CHILD_DIR" && mount -o remount,bind,ro "$SOLEWRITER_TEST_CHILD_DIR" && exec "$@""#,
        "sh",
    ];
    let name = "a_busy_try_needs_no_write_access";
    let mut child = ChildProc::spawn_wrapped(&read_only, name, "holder", &project);
    assert_eq!(child.line(), "ready");
    child.send("acquire");
    assert_eq!(child.line(), "busy");
    child.send("status");
    assert_eq!(child.line(), "Held/alive");
    assert_eq!(guard.release().unwrap(), Released::Removed);
    // Free now, the read-only view cannot become the writer: an error, not a lock.
    child.send("acquire-wait");
    let answer = child.line();
    assert!(answer.starts_with("error "), "{answer}");
    child.finish();
    assert_eq!(host.current().unwrap(), None);
}

/// A holder whose main thread has exited while another thread holds the lock: its main
/// thread is a zombie (`Z` in `/proc/<pid>/stat`), yet the process lives — classified alive,
/// never `Dead(Exited)`, and the lock stays excluded (also for a record-only contender, which
/// only classifies).
#[test]
fn a_holder_whose_main_thread_exited_is_alive_and_excludes() {
    if let Some((_, dir)) = role() {
        // Fork: the child is single-threaded, so its one thread is its main thread. A second
        // thread takes the lock; the main thread then exits alone (`SYS_exit`, not
        // `exit_group`).
        // SAFETY: test-only; the forked child only spawns a thread and exits threads.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            std::thread::spawn(move || {
                let guard = lock(&dir).acquire(Wait::NoWait).unwrap();
                say(&format!("held {}", std::process::id()));
                let _ = commands().next();
                assert_eq!(guard.release().unwrap(), Released::Removed);
                say("released");
                std::process::exit(0);
            });
            // SAFETY: ends the calling (main) thread only; the holder thread runs on.
            unsafe { libc::syscall(libc::SYS_exit, 0) };
        }
        let mut status = 0;
        // SAFETY: waits for the forked child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        return;
    }
    let (_dir, project) = project();
    let name = "a_holder_whose_main_thread_exited_is_alive_and_excludes";
    let mut child = ChildProc::spawn(name, "holder", &project);
    let line = child.line();
    let pid: u32 = line.strip_prefix("held ").unwrap().parse().unwrap();
    // Wait (bounded: a hang guard) until the main thread has become a zombie.
    let deadline = std::time::Instant::now() + HANG_GUARD;
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        if parse_proc_stat(&stat).unwrap().exited() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "main thread never exited"
        );
        std::thread::yield_now();
    }
    let record = lock(&project).current().unwrap().unwrap();
    assert_eq!(record.owner.pid, pid);
    let seen = SystemProbe.observe(pid);
    assert!(
        matches!(seen.process, ProcessSeen::Present { exited: false, .. }),
        "{seen:?}"
    );
    assert_eq!(classify(&record.owner, &seen), Ownership::Alive);
    for contender in [lock(&project), lock(&project).record_only()] {
        let err = contender.acquire(Wait::NoWait).unwrap_err();
        assert!(
            matches!(&err, LockError::Busy { owner: Some(o), .. } if o.pid == pid),
            "{contender:?}: {err}"
        );
    }
    let status = lock(&project).status().unwrap();
    assert_eq!(
        (status.kernel, status.ownership),
        (KernelState::Held, Some(Ownership::Alive))
    );
    child.send("release");
    assert_eq!(child.line(), "released");
    child.finish();
    // Once the whole process has exited, an unreaped leftover would be dead, not alive.
    assert_ne!(
        classify(&record.owner, &SystemProbe.observe(pid)),
        Ownership::Alive
    );
    let guard = lock(&project).acquire(Wait::Within(HANG_GUARD)).unwrap();
    assert_eq!(guard.release().unwrap(), Released::Removed);
}
