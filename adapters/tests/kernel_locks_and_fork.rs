//! Kernel locks (`flock`) belong to an open file description, which a forked child shares
//! until it execs or dies. A host that spawns processes (the Memory Core spawns hooks) forks
//! while other threads hold locks; releasing a lock must still let it go at once — an explicit
//! unlock, not just a close — or the next acquirer is refused for as long as that child lives.

use solewriter_adapters::project_lock::process::SystemProbe;
use solewriter_adapters::project_lock::{ProjectLock, Wait};
use solewriter_adapters::projection::runtime::RuntimeRoot;
use solewriter_adapters::projection::target_lock::TargetLock;
use solewriter_core::projection::target::TargetId;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Runs `release` while a forked child that shares every open file description of this
/// process is alive, then `again`, then kills the child. The child calls only
/// async-signal-safe functions, so forking the multi-threaded test process is sound.
fn with_forked_child<T>(release: impl FnOnce(), again: impl FnOnce() -> T) -> T {
    // SAFETY: the child runs pause and _exit only.
    let child = unsafe { libc::fork() };
    assert!(child >= 0, "fork failed");
    if child == 0 {
        // SAFETY: async-signal-safe calls in the child of a fork.
        unsafe {
            libc::pause();
            libc::_exit(0)
        }
    }
    release();
    let answer = again();
    // SAFETY: plain syscalls on this process's own child.
    unsafe {
        libc::kill(child, libc::SIGKILL);
        libc::waitpid(child, std::ptr::null_mut(), 0);
    }
    answer
}

#[test]
fn a_released_project_lock_is_free_while_a_child_forked_under_it_lives() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("project");
    let lock = || ProjectLock::new(project.clone(), Arc::new(SystemProbe));
    let guard = lock().acquire(Wait::NoWait).unwrap();
    let again = with_forked_child(
        || {
            guard.release().unwrap();
        },
        || lock().acquire(Wait::NoWait),
    );
    assert!(again.is_ok(), "refused after release: {:?}", again.err());
}

#[test]
fn a_released_target_lock_is_free_while_a_child_forked_under_it_lives() {
    let dir = tempfile::tempdir().unwrap();
    let root = RuntimeRoot::new(dir.path());
    let target = TargetId::parse(&"ab".repeat(32)).unwrap();
    let take = || TargetLock::acquire(&root, &target, Instant::now(), Duration::ZERO);
    let held = take().unwrap();
    let again = with_forked_child(|| drop(held), take);
    assert!(again.is_ok(), "refused after release: {:?}", again.err());
}
