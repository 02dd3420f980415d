//! The project lock in one process: the kernel lock decides (a record whose kernel lock is free
//! is stale whatever its owner looks like; a busy kernel lock is busy before anything is
//! written), recovery of dead record-only owners (a real exited process, PID reuse), loud
//! failure on unknown owners (permission denied) and malformed locks, refusal of unsafe
//! directories, bounded waiting for live owners, exclusion between threads, a release that
//! never removes a successor's lock, and an operator's clear of an unknown owner's record.

mod children;
mod scripted_fs;

use children::dead_owner;
use scripted_fs::{Call, Script, ScriptedFs};
use solewriter_adapters::project_lock::process::{ProcessProbe, SystemProbe};
use solewriter_adapters::project_lock::{
    ClearRefused, Cleared, LockError, LockProbe, LockStep, ProjectLock, Released, Wait,
    KERNEL_LOCK_FILE, LOCK_FILE, MAX_RECOVERY_DEPTH,
};
use solewriter_core::project_lock::ownership::{
    BootSeen, DeadReason, Guard, LockNonce, LockRecord, OwnerIdentity, Ownership, ProbeReport,
    ProcessSeen, UnknownReason,
};
use solewriter_core::time::Millis;
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A probe that is the real OS for the calling process and reports scripted sightings for
/// other pids.
struct ScriptedProbe {
    seen: Mutex<HashMap<u32, ProcessSeen>>,
}

impl ScriptedProbe {
    fn new(pid: u32, seen: ProcessSeen) -> Arc<Self> {
        Arc::new(ScriptedProbe {
            seen: Mutex::new(HashMap::from([(pid, seen)])),
        })
    }
}

impl ProcessProbe for ScriptedProbe {
    fn current(&self) -> Result<OwnerIdentity, String> {
        SystemProbe.current()
    }

    fn observe(&self, pid: u32) -> ProbeReport {
        match self.seen.lock().unwrap().get(&pid) {
            Some(process) => ProbeReport {
                process: process.clone(),
                ..SystemProbe.observe(pid)
            },
            None => SystemProbe.observe(pid),
        }
    }
}

/// Reports every time the kernel lock is found taken (a waiter meeting the holder).
struct MetBusy {
    met: Mutex<std::sync::mpsc::Sender<()>>,
}

impl LockProbe for MetBusy {
    fn reached(&self, step: LockStep, _: &Path) {
        if step == LockStep::KernelBusy {
            let _ = self.met.lock().unwrap().send(());
        }
    }
}

fn me() -> OwnerIdentity {
    SystemProbe.current().unwrap()
}

/// A record written under the kernel lock.
fn record(owner: OwnerIdentity, nonce: u8) -> LockRecord {
    LockRecord {
        owner,
        guard: Guard::Kernel,
        nonce: LockNonce::from_bytes([nonce; 32]),
        acquired_at: Millis(1),
    }
}

/// A record written in record-only mode: only classifying its owner judges it.
fn record_only(owner: OwnerIdentity, nonce: u8) -> LockRecord {
    LockRecord {
        guard: Guard::RecordOnly,
        ..record(owner, nonce)
    }
}

/// The names in `dir` other than the kernel lock file (which is never removed).
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n != KERNEL_LOCK_FILE)
        .collect();
    names.sort();
    names
}

fn plant(dir: &Path, record: &LockRecord) {
    std::fs::write(dir.join(LOCK_FILE), record.encode()).unwrap();
}

fn lock_bytes(dir: &Path) -> Option<Vec<u8>> {
    std::fs::read(dir.join(LOCK_FILE)).ok()
}

fn lock_in(dir: &Path) -> ProjectLock {
    ProjectLock::new(dir.join("p"), Arc::new(SystemProbe))
}

#[test]
fn a_real_dead_process_is_recovered() {
    let dir = tempfile::tempdir().unwrap();
    let lock = lock_in(dir.path());
    std::fs::create_dir(lock.dir()).unwrap();
    for planted in [record(dead_owner(), 1), record_only(dead_owner(), 2)] {
        plant(lock.dir(), &planted);
        let guard = lock.acquire(Wait::NoWait).unwrap();
        assert_eq!(guard.record().owner, me());
        assert_eq!(guard.record().guard, Guard::Kernel);
        assert_eq!(lock.current().unwrap().as_ref(), Some(guard.record()));
        assert_eq!(guard.release().unwrap(), Released::Removed);
        assert_eq!(lock_bytes(lock.dir()), None);
        assert_eq!(names(lock.dir()), Vec::<String>::new(), "no temp or claim");
    }
    assert!(lock.kernel_path().is_file(), "the kernel lock file stays");
}

/// The kernel lock is the authority: a record written under it whose kernel lock is free is
/// stale — even when its owner is this very (live) process, sits in another PID namespace or
/// cannot be looked at — while a record-only record of a live owner is not.
#[test]
fn a_kernel_guarded_record_whose_kernel_lock_is_free_is_stale_whatever_its_owner() {
    let dir = tempfile::tempdir().unwrap();
    let other_ns = OwnerIdentity {
        pid: 1,
        pid_ns: me().pid_ns + 1,
        ..me()
    };
    let denied = ScriptedProbe::new(4_000_004, ProcessSeen::PermissionDenied);
    let hidden = OwnerIdentity {
        pid: 4_000_004,
        ..me()
    };
    for (n, owner) in [me(), other_ns, hidden].into_iter().enumerate() {
        let lock = ProjectLock::new(dir.path().join(format!("p{n}")), denied.clone());
        std::fs::create_dir(lock.dir()).unwrap();
        plant(lock.dir(), &record(owner.clone(), 1));
        let guard = lock
            .acquire(Wait::NoWait)
            .unwrap_or_else(|e| panic!("{owner}: {e}"));
        assert_eq!(guard.release().unwrap(), Released::Removed);
        assert_eq!(names(lock.dir()), Vec::<String>::new(), "{owner}");
    }
    let lock = lock_in(dir.path());
    std::fs::create_dir(lock.dir()).unwrap();
    plant(lock.dir(), &record_only(me(), 1));
    let err = lock.acquire(Wait::NoWait).unwrap_err();
    assert!(
        matches!(&err, LockError::Busy { owner: Some(o), .. } if *o == me()),
        "{err}"
    );
}

#[test]
fn a_reused_pid_is_dead_authority() {
    let dir = tempfile::tempdir().unwrap();
    let owner = OwnerIdentity {
        pid: 4_000_001,
        start_token: 10,
        ..me()
    };
    let probe = ScriptedProbe::new(
        owner.pid,
        ProcessSeen::Present {
            start_token: 11,
            exited: false,
        },
    );
    let lock = ProjectLock::new(dir.path().join("p"), probe.clone());
    std::fs::create_dir(lock.dir()).unwrap();
    plant(lock.dir(), &record_only(owner.clone(), 1));
    let guard = lock.acquire(Wait::NoWait).unwrap();
    assert_eq!(guard.record().owner, me());
    drop(guard);
    // The same pid with the recorded start token is that very process: alive.
    probe.seen.lock().unwrap().insert(
        owner.pid,
        ProcessSeen::Present {
            start_token: 10,
            exited: false,
        },
    );
    plant(lock.dir(), &record_only(owner.clone(), 2));
    let err = lock.acquire(Wait::NoWait).unwrap_err();
    assert!(
        matches!(&err, LockError::Busy { owner: Some(o), .. } if *o == owner),
        "{err}"
    );
}

#[test]
fn permission_denied_is_unknown_and_fails_loudly() {
    let dir = tempfile::tempdir().unwrap();
    let owner = OwnerIdentity {
        pid: 4_000_002,
        start_token: 10,
        ..me()
    };
    let probe = ScriptedProbe::new(owner.pid, ProcessSeen::PermissionDenied);
    let lock = ProjectLock::new(dir.path().join("p"), probe);
    std::fs::create_dir(lock.dir()).unwrap();
    plant(lock.dir(), &record_only(owner.clone(), 1));
    let before = lock_bytes(lock.dir());
    for wait in [Wait::NoWait, Wait::Within(Duration::from_secs(60))] {
        let err = lock.acquire(wait).unwrap_err();
        match &err {
            LockError::UnknownOwner {
                lock: path,
                owner: o,
                reason: UnknownReason::PermissionDenied,
            } => {
                assert_eq!(*o, owner);
                assert!(err.to_string().contains(&path.display().to_string()));
                assert!(err.to_string().contains("pid 4000002"), "{err}");
            }
            other => panic!("expected an unknown owner, got {other:?}"),
        }
        assert_eq!(lock_bytes(lock.dir()), before, "the lock is untouched");
    }
}

#[test]
fn an_unreadable_boot_is_unknown_not_alive() {
    struct NoBoot;
    impl ProcessProbe for NoBoot {
        fn current(&self) -> Result<OwnerIdentity, String> {
            SystemProbe.current()
        }
        fn observe(&self, pid: u32) -> ProbeReport {
            ProbeReport {
                boot: BootSeen::Unreadable("eio".into()),
                ..SystemProbe.observe(pid)
            }
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let lock = ProjectLock::new(dir.path().join("p"), Arc::new(NoBoot)).record_only();
    let _held = lock.acquire(Wait::NoWait).unwrap();
    let err = lock.acquire(Wait::NoWait).unwrap_err();
    assert!(
        matches!(
            err,
            LockError::UnknownOwner {
                reason: UnknownReason::BootUnreadable(_),
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn malformed_or_empty_lock_files_fail_loudly_and_are_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let lock = lock_in(dir.path());
    std::fs::create_dir(lock.dir()).unwrap();
    let huge = vec![b'x'; 1 << 20];
    for content in [
        &b""[..],
        b"solewriter-project-lock v1\npid 1\n",
        b"garbage",
        &huge,
    ] {
        std::fs::write(lock.path(), content).unwrap();
        let err = lock.acquire(Wait::NoWait).unwrap_err();
        assert!(matches!(err, LockError::Malformed { .. }), "{err}");
        assert_eq!(lock_bytes(lock.dir()).unwrap(), content);
    }
}

#[test]
fn a_live_owner_is_waited_for_within_the_bound_only() {
    let dir = tempfile::tempdir().unwrap();
    let lock = lock_in(dir.path());
    let held = lock.acquire(Wait::NoWait).unwrap();
    let err = lock.acquire(Wait::NoWait).unwrap_err();
    assert!(
        matches!(&err, LockError::Busy { owner: Some(o), .. } if *o == me()),
        "{err}"
    );
    let err = lock
        .acquire(Wait::Within(Duration::from_millis(20)))
        .unwrap_err();
    assert!(matches!(err, LockError::Busy { .. }), "{err}");
    let nonce = held.record().nonce;
    // The waiter's probe reports each time it finds the kernel lock taken, so the release
    // below happens after the waiter has met the held lock at least once — an event, not a
    // sleep.
    let (met, meeting) = std::sync::mpsc::channel();
    let waiting = lock_in(dir.path()).with_probe(Arc::new(MetBusy {
        met: Mutex::new(met),
    }));
    std::thread::scope(|s| {
        let waiter = s.spawn(|| waiting.acquire(Wait::Within(Duration::from_secs(30))));
        // (A hang guard, not a timing assertion.)
        meeting
            .recv_timeout(Duration::from_secs(60))
            .expect("the waiter looked at the live owner");
        assert!(
            !waiter.is_finished(),
            "the waiter waits while the lock is held"
        );
        assert_eq!(held.release().unwrap(), Released::Removed);
        let next = waiter.join().unwrap().unwrap();
        assert_ne!(next.record().nonce, nonce, "a new acquisition, a new nonce");
    });
}

#[test]
fn threads_are_excluded_and_release_races_retry() {
    let dir = tempfile::tempdir().unwrap();
    let lock = lock_in(dir.path());
    let inside = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..100 {
                    let guard = lock.acquire(Wait::Within(Duration::from_secs(30))).unwrap();
                    assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders");
                    inside.fetch_sub(1, Ordering::SeqCst);
                    assert_eq!(guard.release().unwrap(), Released::Removed);
                }
            });
        }
    });
    assert_eq!(lock_bytes(lock.dir()), None);
}

#[test]
fn release_never_removes_a_successors_lock() {
    let dir = tempfile::tempdir().unwrap();
    let first = lock_in(dir.path());
    let stale = first.acquire(Wait::NoWait).unwrap();
    // A record-only successor whose probe wrongly sees this process as a reused pid recovers
    // the lock while the first guard still exists: the guard is now stale.
    let probe = ScriptedProbe::new(
        me().pid,
        ProcessSeen::Present {
            start_token: me().start_token + 1,
            exited: false,
        },
    );
    let successor_lock = ProjectLock::new(first.dir(), probe).record_only();
    let successor = successor_lock.acquire(Wait::NoWait).unwrap();
    let successor_bytes = lock_bytes(first.dir());
    match stale.release().unwrap() {
        Released::NotHolder(Some(found)) => assert_eq!(found, *successor.record()),
        other => panic!("expected NotHolder, got {other:?}"),
    }
    assert_eq!(
        lock_bytes(first.dir()),
        successor_bytes,
        "successor's lock kept"
    );
    assert_eq!(successor.release().unwrap(), Released::Removed);
}

/// Plants a dead lock and a chain of `claims` recovery claims left by dead recoverers (each
/// claiming the removal of the previous record).
fn plant_abandoned_recovery(dir: &Path, claims: usize) {
    let dead = dead_owner();
    let mut path = dir.join(LOCK_FILE);
    for level in 0..=claims {
        let rec = record(dead.clone(), level as u8 + 1);
        std::fs::write(&path, rec.encode()).unwrap();
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        path = dir.join(format!("{name}.recover-{}", &rec.nonce.to_hex()[..32]));
    }
}

#[test]
fn claims_of_crashed_recoverers_are_recovered_up_to_the_depth_bound() {
    let dir = tempfile::tempdir().unwrap();
    let lock = lock_in(dir.path());
    std::fs::create_dir(lock.dir()).unwrap();
    plant_abandoned_recovery(lock.dir(), MAX_RECOVERY_DEPTH - 1);
    let guard = lock.acquire(Wait::NoWait).unwrap();
    assert_eq!(guard.release().unwrap(), Released::Removed);
    assert_eq!(
        names(lock.dir()),
        Vec::<String>::new(),
        "every dead claim removed"
    );

    let dir = tempfile::tempdir().unwrap();
    let lock = lock_in(dir.path());
    std::fs::create_dir(lock.dir()).unwrap();
    plant_abandoned_recovery(lock.dir(), MAX_RECOVERY_DEPTH);
    let before = lock_bytes(lock.dir());
    let err = lock.acquire(Wait::NoWait).unwrap_err();
    assert!(
        matches!(err, LockError::RecoveryAbandoned { depth, .. } if depth == MAX_RECOVERY_DEPTH),
        "{err}"
    );
    assert_eq!(
        lock_bytes(lock.dir()),
        before,
        "the dead lock is left for an operator"
    );
}

/// Temp files of crashed creators are swept by the next acquirer, judged like records: a
/// temp written under the kernel lock (its name says so) is stale once the acquirer holds the
/// kernel lock — even one of this live process, or of another boot; a record-only temp is
/// swept only when its creator is classified dead, so a live creator's temp and one of
/// another boot (unknown: a reboot, or another kernel) are left.
#[test]
fn temps_are_swept_when_judged_stale_like_records() {
    let dir = tempfile::tempdir().unwrap();
    let lock = lock_in(dir.path());
    std::fs::create_dir(lock.dir()).unwrap();
    let (me, dead) = (me(), dead_owner());
    let name = |o: &OwnerIdentity, boot: &str, guard: Guard, n: u8| {
        format!(
            ".{LOCK_FILE}.{}.{}.{boot}.{}.{}.tmp-{n:02x}",
            o.pid,
            o.start_token,
            o.pid_ns,
            guard.as_str()
        )
    };
    let other_boot = if me.boot_id.as_str().starts_with('0') {
        "1"
    } else {
        "0"
    };
    let this_boot = me.boot_id.as_str();
    let swept = [
        name(&me, other_boot, Guard::Kernel, 1),
        name(&me, this_boot, Guard::Kernel, 2),
        name(&dead, this_boot, Guard::RecordOnly, 3),
    ];
    let mut kept = vec![
        name(&me, this_boot, Guard::RecordOnly, 4),
        name(&me, other_boot, Guard::RecordOnly, 5),
    ];
    for temp in swept.iter().chain(&kept) {
        std::fs::write(lock.dir().join(temp), b"").unwrap();
    }
    lock.acquire(Wait::NoWait).unwrap().release().unwrap();
    kept.sort();
    assert_eq!(names(lock.dir()), kept, "swept: {swept:?}");
}

/// A lock name that is not a regular file — a dangling symlink, a symlink to a valid record
/// elsewhere, a directory — fails loudly and is left alone. (A dangling symlink used to read
/// as "no lock" while its name made every create fail: the acquirer spun forever.)
#[test]
fn a_lock_name_that_is_no_regular_file_fails_loudly_and_is_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    plant(&elsewhere, &record(dead_owner(), 1));
    type Make<'a> = &'a dyn Fn(&Path);
    let cases: [(&str, Make); 3] = [
        ("dangling symlink", &|lock| {
            std::os::unix::fs::symlink(dir.path().join("nowhere"), lock).unwrap()
        }),
        ("symlink to a record", &|lock| {
            std::os::unix::fs::symlink(elsewhere.join(LOCK_FILE), lock).unwrap()
        }),
        ("directory", &|lock| std::fs::create_dir(lock).unwrap()),
    ];
    for (name, make) in cases {
        let lock = ProjectLock::new(dir.path().join(name), Arc::new(SystemProbe));
        std::fs::create_dir(lock.dir()).unwrap();
        make(&lock.path());
        // A hang guard, not a timing assertion: the answer comes at once.
        let (tx, rx) = std::sync::mpsc::channel();
        let probe = lock.clone();
        std::thread::spawn(move || tx.send(probe.acquire(Wait::NoWait).map(|_| ())));
        let answer = rx
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("{name}: acquire did not answer"));
        assert!(
            matches!(answer, Err(LockError::Io { .. })),
            "{name}: {answer:?}"
        );
        assert!(lock.path().symlink_metadata().is_ok(), "{name}: left alone");
    }
    assert!(
        elsewhere.join(LOCK_FILE).exists(),
        "the record elsewhere untouched"
    );
}

/// The real file system, except that linking or unlinking the lock's own name fails with
/// `errno` (the lock's temps are linked and removed normally), and the kernel lock and the
/// random source fail with their errno when one is given.
struct FailingOnLock {
    lock: std::path::PathBuf,
    link_errno: Option<i32>,
    unlink_errno: Option<i32>,
    flock_errno: Option<i32>,
    random_errno: Option<i32>,
}

impl FailingOnLock {
    /// Fails nothing (yet).
    fn real(lock: std::path::PathBuf) -> Self {
        FailingOnLock {
            lock,
            link_errno: None,
            unlink_errno: None,
            flock_errno: None,
            random_errno: None,
        }
    }
}

impl Script for FailingOnLock {
    fn before(&self, call: Call<'_>) -> std::io::Result<()> {
        let errno = match call {
            Call::RemoveFile(path) if path == self.lock => self.unlink_errno,
            Call::HardLink { to, .. } if to == self.lock => self.link_errno,
            Call::TryLock => self.flock_errno,
            Call::FillRandom => self.random_errno,
            _ => None,
        };
        errno.map_or(Ok(()), |errno| {
            Err(std::io::Error::from_raw_os_error(errno))
        })
    }
}

fn failing_lock(dir: &Path, link_errno: Option<i32>, unlink_errno: Option<i32>) -> ProjectLock {
    let lock = lock_in(dir);
    let fs = FailingOnLock {
        link_errno,
        unlink_errno,
        ..FailingOnLock::real(lock.path())
    };
    lock.with_file_system(Arc::new(ScriptedFs(fs)))
}

/// A random source that fails gives no nonce: no record, no lock, a typed error.
#[test]
fn a_failing_random_source_creates_no_lock() {
    let dir = tempfile::tempdir().unwrap();
    let lock = lock_in(dir.path());
    let fs = FailingOnLock {
        random_errno: Some(5),
        ..FailingOnLock::real(lock.path())
    };
    let lock = lock.with_file_system(Arc::new(ScriptedFs(fs)));
    let err = lock.acquire(Wait::NoWait).unwrap_err();
    assert!(
        matches!(&err, LockError::Random(why) if why.contains("Input/output error")),
        "{err:?}"
    );
    assert_eq!(lock_bytes(lock.dir()), None, "no lock created");
}

/// A file system that refuses kernel locks (EOPNOTSUPP, ENOLCK) is a typed refusal that
/// writes no record, unless the host opted into record-only mode; another flock error is an
/// I/O error of its step.
#[test]
fn a_file_system_refusing_kernel_locks_is_refused_unless_record_only() {
    for errno in [libc::EOPNOTSUPP, libc::ENOLCK] {
        let dir = tempfile::tempdir().unwrap();
        let lock = lock_in(dir.path());
        let fs = Arc::new(ScriptedFs(FailingOnLock {
            flock_errno: Some(errno),
            ..FailingOnLock::real(lock.path())
        }));
        let lock = lock.with_file_system(fs.clone());
        let err = lock.acquire(Wait::NoWait).unwrap_err();
        assert!(
            matches!(&err, LockError::KernelLockUnavailable { lock: path, source }
                if *path == lock.dir().join(KERNEL_LOCK_FILE) && source.raw_os_error() == Some(errno)),
            "{errno}: {err:?}"
        );
        assert_eq!(lock_bytes(lock.dir()), None, "{errno}: no record written");
        let record_only = lock.record_only();
        let guard = record_only.acquire(Wait::NoWait).unwrap();
        assert!(
            lock_bytes(record_only.dir()).is_some(),
            "{errno}: record-only holds"
        );
        guard.release().unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let lock = lock_in(dir.path());
    let fs = FailingOnLock {
        flock_errno: Some(libc::EIO),
        ..FailingOnLock::real(lock.path())
    };
    let err = lock
        .with_file_system(Arc::new(ScriptedFs(fs)))
        .acquire(Wait::NoWait)
        .unwrap_err();
    assert!(
        matches!(&err, LockError::Io { step: "take kernel lock", source, .. } if source.raw_os_error() == Some(libc::EIO)),
        "{err:?}"
    );
}

/// A link that fails for another reason than an existing lock (here EIO) is an error, not a
/// busy lock to wait for; the temp is removed and no lock appears.
#[test]
fn a_failing_link_is_an_error_not_a_busy_lock() {
    let dir = tempfile::tempdir().unwrap();
    let lock = failing_lock(dir.path(), Some(5), None);
    let answer = lock.acquire(Wait::Within(Duration::from_secs(60)));
    assert!(
        matches!(
            &answer,
            Err(LockError::Io {
                step: "link lock into place",
                ..
            })
        ),
        "{answer:?}"
    );
    assert_eq!(
        names(lock.dir()),
        Vec::<String>::new(),
        "no lock and no temp"
    );
}

/// Release reports an unlink that fails (EIO) instead of claiming success or "not holder",
/// and treats a lock already gone (ENOENT between its read and its unlink) as not held.
#[test]
fn a_failing_release_is_reported_and_a_vanished_lock_is_not_held() {
    let dir = tempfile::tempdir().unwrap();
    let eio = failing_lock(&dir.path().join("eio"), None, Some(5));
    std::fs::create_dir(dir.path().join("eio")).unwrap();
    let answer = eio.acquire(Wait::NoWait).unwrap().release();
    assert!(
        matches!(
            &answer,
            Err(LockError::Io {
                step: "remove lock",
                ..
            })
        ),
        "{answer:?}"
    );
    assert!(eio.current().unwrap().is_some(), "the lock is still there");
    std::fs::create_dir(dir.path().join("gone")).unwrap();
    let gone = failing_lock(&dir.path().join("gone"), None, Some(2));
    let answer = gone.acquire(Wait::NoWait).unwrap().release();
    assert!(
        matches!(answer, Ok(Released::NotHolder(None))),
        "{answer:?}"
    );
}

/// Dropping the guard releases the lock (the safety net of a holder that forgot).
#[test]
fn dropping_the_guard_releases_the_lock() {
    let dir = tempfile::tempdir().unwrap();
    let lock = lock_in(dir.path());
    drop(lock.acquire(Wait::NoWait).unwrap());
    assert_eq!(lock.current().unwrap(), None);
    assert!(format!("{lock:?}").contains(&lock.dir().display().to_string()));
}

/// A probe that cannot read the calling process's own identity.
struct NoIdentity;

impl ProcessProbe for NoIdentity {
    fn current(&self) -> Result<OwnerIdentity, String> {
        Err("scripted: /proc/self unreadable".into())
    }

    fn observe(&self, pid: u32) -> ProbeReport {
        SystemProbe.observe(pid)
    }
}

#[test]
fn an_unreadable_own_identity_or_an_unsafe_directory_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let lock = ProjectLock::new(dir.path().join("p"), Arc::new(NoIdentity));
    let err = lock.acquire(Wait::NoWait).unwrap_err();
    assert!(
        matches!(&err, LockError::OwnIdentity(why) if why == "scripted: /proc/self unreadable"),
        "{err:?}"
    );
    assert_eq!(lock_bytes(lock.dir()), None, "no lock created");

    // The project directory is a symlink (to a real directory), or a regular file.
    let real = dir.path().join("real");
    std::fs::create_dir(&real).unwrap();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let file = dir.path().join("file");
    std::fs::write(&file, b"not a directory").unwrap();
    for (project, why) in [(&link, "is a symlink"), (&file, "is not a directory")] {
        let lock = ProjectLock::new(project, Arc::new(SystemProbe));
        let err = lock.acquire(Wait::NoWait).unwrap_err();
        assert!(
            matches!(&err, LockError::UnsafeDir { dir, reason } if dir == project && *reason == why),
            "{err:?}"
        );
    }
    assert_eq!(
        std::fs::read_dir(&real).unwrap().count(),
        0,
        "nothing created"
    );
    assert_eq!(std::fs::read(&file).unwrap(), b"not a directory");
}

/// The real file system, counting every call that touches a file (not the kernel lock, not the
/// random source) made through it.
#[derive(Default)]
struct Counting(AtomicUsize);

impl Script for Counting {
    fn before(&self, call: Call<'_>) -> std::io::Result<()> {
        if !matches!(call, Call::TryLock | Call::FillRandom) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
        Ok(())
    }
}

/// A `NoWait` try that finds the kernel lock taken learns "busy" having created, written,
/// fsynced, linked and removed nothing: no file-system call at all, the directory's names and
/// its modification time unchanged. (Before the kernel lock, it wrote and fsynced a temp
/// record first.) Also when a stale record of a dead owner is in place.
#[test]
fn a_busy_no_wait_try_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let lock = lock_in(dir.path());
    let held = lock.acquire(Wait::NoWait).unwrap();
    let counting = Arc::new(ScriptedFs(Counting::default()));
    let trying = lock_in(dir.path()).with_file_system(counting.clone());
    let before = (
        names(lock.dir()),
        lock.dir().metadata().unwrap().modified().unwrap(),
    );
    for _ in 0..3 {
        let err = trying.acquire(Wait::NoWait).unwrap_err();
        assert!(
            matches!(&err, LockError::Busy { owner: Some(o), .. } if *o == me()),
            "{err}"
        );
    }
    assert_eq!(
        counting.0 .0.load(Ordering::SeqCst),
        0,
        "no file-system call"
    );
    let after = (
        names(lock.dir()),
        lock.dir().metadata().unwrap().modified().unwrap(),
    );
    assert_eq!(before, after, "nothing created or removed");
    // The holder's record replaced by a dead owner's (the holder is between removing its
    // record and letting the kernel lock go): still busy, still nothing written.
    std::fs::remove_file(lock.path()).unwrap();
    plant(lock.dir(), &record(dead_owner(), 9));
    let planted = lock_bytes(lock.dir());
    let err = trying.acquire(Wait::NoWait).unwrap_err();
    assert!(matches!(err, LockError::Busy { .. }), "{err}");
    assert_eq!(
        counting.0 .0.load(Ordering::SeqCst),
        0,
        "no file-system call"
    );
    assert_eq!(lock_bytes(lock.dir()), planted, "the record is left alone");
    drop(held);
}

/// An existing project directory writable by group or others, or (when this test runs as
/// root, which can give it away) owned by another user, is refused before anything is
/// created in it: another user could plant a record naming their own live process, or
/// remove the kernel lock file under a holder.
#[test]
fn a_directory_others_may_write_or_own_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let lock = lock_in(dir.path());
    std::fs::create_dir(lock.dir()).unwrap();
    for mode in [0o770, 0o707, 0o777] {
        std::fs::set_permissions(lock.dir(), std::fs::Permissions::from_mode(mode)).unwrap();
        let err = lock.acquire(Wait::NoWait).unwrap_err();
        assert!(
            matches!(&err, LockError::UnsafeDir { reason, .. } if *reason == "is writable by group or others"),
            "{mode:o}: {err}"
        );
        assert!(matches!(lock.status(), Err(LockError::UnsafeDir { .. })));
        assert_eq!(names(lock.dir()), Vec::<String>::new(), "{mode:o}");
        assert!(!lock.kernel_path().exists(), "{mode:o}");
    }
    std::fs::set_permissions(lock.dir(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let nobody = 65_534;
    match std::os::unix::fs::chown(lock.dir(), Some(nobody), None) {
        Ok(()) => {
            let err = lock.acquire(Wait::NoWait).unwrap_err();
            assert!(
                matches!(&err, LockError::UnsafeDir { reason, .. } if *reason == "is not owned by this user"),
                "{err}"
            );
            assert!(!lock.kernel_path().exists());
        }
        Err(e) => eprintln!("SKIPPED the foreign-owner case: cannot give the directory away ({e})"),
    }
    let missing = lock_in(&dir.path().join("nowhere"));
    assert!(
        matches!(missing.status(), Err(LockError::NoDirectory { .. })),
        "status of a missing directory is an error"
    );
}

/// `status` reads the kernel lock without holding it: never used, free, held by another;
/// a symlink or a file in place of the directory is refused, as `acquire` refuses it.
#[test]
fn status_tells_the_kernel_lock_apart_and_refuses_what_acquire_refuses() {
    use solewriter_adapters::project_lock::KernelState;
    let dir = tempfile::tempdir().unwrap();
    let lock = lock_in(dir.path());
    std::fs::create_dir(lock.dir()).unwrap();
    let mut perms = std::fs::metadata(lock.dir()).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o700);
    std::fs::set_permissions(lock.dir(), perms).unwrap();
    assert_eq!(lock.status().unwrap().kernel, KernelState::NoFile);
    let guard = lock.acquire(Wait::NoWait).unwrap();
    assert_eq!(lock.status().unwrap().kernel, KernelState::Held);
    guard.release().unwrap();
    assert_eq!(lock.status().unwrap().kernel, KernelState::Free);

    let link = dir.path().join("link");
    std::os::unix::fs::symlink(lock.dir(), &link).unwrap();
    let file = dir.path().join("file");
    std::fs::write(&file, b"").unwrap();
    for not_a_dir in [link, file] {
        let err = ProjectLock::new(not_a_dir, Arc::new(SystemProbe))
            .status()
            .unwrap_err();
        assert!(matches!(err, LockError::UnsafeDir { .. }), "{err}");
    }
}

/// A holder whose kernel lock file was removed under it has lost the lock (the next acquirer
/// would lock a new file): `verify` says so.
#[test]
fn a_removed_kernel_lock_file_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    let lock = lock_in(dir.path());
    let guard = lock.acquire(Wait::NoWait).unwrap();
    guard.verify().unwrap();
    std::fs::remove_file(lock.kernel_path()).unwrap();
    let err = guard.verify().unwrap_err();
    assert!(
        matches!(&err, LockError::Lost { reason, .. } if reason.contains("removed")),
        "{err}"
    );
}

/// An operator clears a record whose owner is unknown (here: `/proc` refuses to show it) only
/// with the record's nonce, by the claim rule, leaving no claim behind; then acquisitions
/// work again. Refused, with the lock file untouched: another nonce, a kernel lock held by a
/// holder, a known owner (alive, dead, or a kernel-guarded record whose kernel lock is free),
/// a malformed record. No lock is nothing to clear; a missing directory is an error and is
/// not created.
#[test]
fn an_operator_clears_an_unknown_owners_record_only_with_its_nonce() {
    let dir = tempfile::tempdir().unwrap();
    let unknown = OwnerIdentity {
        pid: 4_000_003,
        start_token: 10,
        ..me()
    };
    let dead = OwnerIdentity {
        pid: 4_000_004,
        ..unknown.clone()
    };
    let probe = ScriptedProbe::new(unknown.pid, ProcessSeen::PermissionDenied);
    probe
        .seen
        .lock()
        .unwrap()
        .insert(dead.pid, ProcessSeen::Absent);
    let nonce = |n| LockNonce::from_bytes([n; 32]);
    let missing = ProjectLock::new(dir.path().join("nowhere"), probe.clone());
    assert!(matches!(
        missing.clear_unknown(&nonce(1)),
        Err(LockError::NoDirectory { .. })
    ));
    assert!(!missing.dir().exists(), "nothing created");
    let lock = ProjectLock::new(dir.path().join("p"), probe);
    std::fs::create_dir(lock.dir()).unwrap();
    assert_eq!(lock.clear_unknown(&nonce(1)).unwrap(), Cleared::NoLock);
    let refused = |n| match lock.clear_unknown(&nonce(n)) {
        Err(LockError::ClearRefused {
            lock: path,
            refused,
        }) => {
            assert_eq!(path, lock.path());
            *refused
        }
        other => panic!("expected a refusal, got {other:?}"),
    };
    // An unknown owner: another nonce is refused, the right one clears.
    let planted = record_only(unknown, 1);
    plant(lock.dir(), &planted);
    let before = lock_bytes(lock.dir());
    assert_eq!(refused(2), ClearRefused::NonceMismatch(planted.clone()));
    assert_eq!(lock_bytes(lock.dir()), before, "left untouched");
    assert!(matches!(
        lock.acquire(Wait::NoWait),
        Err(LockError::UnknownOwner { .. })
    ));
    assert_eq!(
        lock.clear_unknown(&nonce(1)).unwrap(),
        Cleared::Removed(planted)
    );
    assert_eq!(
        names(lock.dir()),
        Vec::<String>::new(),
        "no record, no claim"
    );
    // A holder's kernel lock: refused even with its own nonce.
    let guard = lock.acquire(Wait::NoWait).unwrap();
    let held = guard.record().clone();
    match lock.clear_unknown(&held.nonce) {
        Err(LockError::ClearRefused { refused, .. }) => {
            assert_eq!(*refused, ClearRefused::Held(Some(held.clone())))
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(lock.current().unwrap(), Some(held));
    guard.release().unwrap();
    // Known owners, whatever the nonce.
    for (record, ownership) in [
        (record_only(me(), 3), Ownership::Alive),
        (
            record_only(dead, 3),
            Ownership::Dead(DeadReason::NoSuchProcess),
        ),
        (record(me(), 3), Ownership::Dead(DeadReason::KernelLockFree)),
    ] {
        std::fs::remove_file(lock.path()).ok();
        plant(lock.dir(), &record);
        assert_eq!(refused(3), ClearRefused::Known(record.clone(), ownership));
        assert_eq!(lock_bytes(lock.dir()), Some(record.encode().into_bytes()));
    }
    std::fs::write(lock.path(), b"garbage").unwrap();
    assert!(matches!(
        lock.clear_unknown(&nonce(3)),
        Err(LockError::Malformed { .. })
    ));
    assert_eq!(lock_bytes(lock.dir()).unwrap(), b"garbage");
}

/// A directory that cannot be inspected for another reason than its absence (here a path
/// through a regular file: not a directory) is an I/O error of the inspection, not "no such
/// directory", for `status` and for an operator's clear alike; nothing is created.
#[test]
fn an_uninspectable_directory_is_an_io_error_not_a_missing_one() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("file");
    std::fs::write(&file, b"").unwrap();
    let lock = ProjectLock::new(file.join("p"), Arc::new(SystemProbe));
    let inspected = |e: LockError| {
        matches!(
            e,
            LockError::Io {
                step: "inspect lock directory",
                ..
            }
        )
    };
    assert!(inspected(lock.status().unwrap_err()));
    assert!(inspected(
        lock.clear_unknown(&LockNonce::from_bytes([1; 32]))
            .unwrap_err()
    ));
    assert_eq!(std::fs::read(&file).unwrap(), b"");
}
