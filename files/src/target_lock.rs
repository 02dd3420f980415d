//! The per-target kernel lock: the second exclusion of every grant, publication and release,
//! taken right before the store's write lock and let go right after the commit — around the
//! transaction and nothing else, so it never outlives a holder's lease by more than the two
//! lock calls next to its transaction.
//!
//! SQLite's write lock rests on POSIX advisory record locks, which belong to the *process*:
//! when the process closes ANY descriptor of the database file (a backup or checksum with
//! plain file I/O, a second copy of SQLite), every lock it holds on that file vanishes
//! silently. This lock is a `flock(2)` on `<runtime_root>/hook-projections/<target_id>.lock`,
//! which belongs to the open file description: closing another descriptor does not drop it,
//! two descriptions conflict even inside one process, and the kernel drops it when the
//! holder dies. So the takeover of a target stays excluded while its publication runs even if
//! the store's lock was lost.
//!
//! The lock file is created once and never removed (removing a lock file races with its
//! next taker); its content is empty and nothing reads it. It is opened relative to the held
//! `hook-projections` directory ([`TargetLock::acquire_in`]), no symlink followed.

use crate::atomic_file::{ensure_private_dir, DirError, DirHandle, RealFs, FILE_MODE};
use crate::error::{FileError, Result};
use crate::runtime::RuntimeRoot;
use rustix::fs::{Mode, OFlags};
use solewriter_core::projection::target::TargetId;
use std::fs::{File, TryLockError};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Suffix of a target's lock file, beside its directory.
pub const LOCK_SUFFIX: &str = ".lock";

/// Longest sleep between two attempts while the lock is taken: a waiter gets the lock within
/// this much of its release.
const MAX_POLL: Duration = Duration::from_millis(2);

/// How many attempts of this process found a target lock taken (observed by tests: an event
/// to wait for instead of a sleep).
static BLOCKED_ATTEMPTS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// How many attempts of this process have found a target lock taken so far. A test seam: a
/// test waits for this to move instead of sleeping.
#[doc(hidden)]
pub fn blocked_attempts() -> usize {
    BLOCKED_ATTEMPTS.load(std::sync::atomic::Ordering::SeqCst)
}

/// A held target lock; dropping it releases the lock.
#[derive(Debug)]
pub struct TargetLock {
    file: File,
}

impl Drop for TargetLock {
    /// Unlocks explicitly (`LOCK_UN`) before the descriptor closes: a child forked by any
    /// thread of this process shares the open file description until it execs, and closing
    /// alone would leave the lock held for that long.
    fn drop(&mut self) {
        if let Err(error) = self.file.unlock() {
            tracing::warn!(%error, "unlocking a target lock failed; it ends when the file closes");
        }
    }
}

/// Holds the projections directory `name` (`hook-projections/`) of the held runtime `root`
/// open, creating it (mode 0700, fsynced in the root) on first use; a symlink, a file, a
/// directory of another user or one that group or others may write is
/// [`FileError::UnsafeRuntimeDir`].
pub fn projections_dir(root: &DirHandle, name: &str) -> Result<DirHandle> {
    ensure_private_dir(&RealFs, root, name).map_err(|e| dir_error(root, name, e))
}

/// The error of a directory `name` of `parent` that cannot be used.
pub(crate) fn dir_error(parent: &DirHandle, name: &str, e: DirError) -> FileError {
    match e {
        DirError::Unsafe(reason) => FileError::UnsafeRuntimeDir {
            path: parent.join(name),
            reason,
        },
        DirError::Io(source) => FileError::Io {
            step: "create directory",
            path: parent.join(name),
            source,
        },
    }
}

/// `<runtime_root>/hook-projections/<target_id>.lock`.
pub fn lock_path(root: &RuntimeRoot, target: &TargetId) -> PathBuf {
    root.path()
        .join(root.projections_name())
        .join(format!("{}{LOCK_SUFFIX}", target.as_str()))
}

impl TargetLock {
    /// Takes the lock of `target`, waiting until `deadline` at most for another holder to let
    /// go ([`FileError::Busy`] after that, naming `timeout`, the busy timeout). Holds the root and
    /// `hook-projections/` open ([`projections_dir`]) and takes the lock in it
    /// ([`Self::acquire_in`]).
    pub fn acquire(
        root: &RuntimeRoot,
        target: &TargetId,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<Self> {
        let dir = projections_dir(&root.open()?, root.projections_name())?;
        Self::acquire_in(&dir, target, deadline, timeout)
    }

    /// [`Self::acquire`] in the held `hook-projections` directory `dir`: the lock file
    /// (mode 0600) is created on first use and opened relative to `dir`, no symlink followed.
    pub fn acquire_in(
        dir: &DirHandle,
        target: &TargetId,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<Self> {
        let name = format!("{}{LOCK_SUFFIX}", target.as_str());
        let path = dir.join(&name);
        let file = rustix::fs::openat(
            dir,
            name.as_str(),
            OFlags::RDWR | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(FILE_MODE),
        )
        .map(File::from)
        .map_err(|e| FileError::Io {
            step: "open target lock",
            path: path.clone(),
            source: e.into(),
        })?;
        let mut pause = Duration::from_micros(50);
        loop {
            match file.try_lock() {
                Ok(()) => return Ok(TargetLock { file }),
                Err(TryLockError::WouldBlock) => {
                    BLOCKED_ATTEMPTS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
                Err(TryLockError::Error(source)) => {
                    return Err(FileError::Io {
                        step: "lock target",
                        path,
                        source,
                    })
                }
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(FileError::Busy {
                    timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
                });
            }
            std::thread::sleep(pause.min(deadline - now));
            pause = (pause * 2).min(MAX_POLL);
        }
    }
}
