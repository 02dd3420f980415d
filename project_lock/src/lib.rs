//! solewriter-project-lock: the project lock, with no SQLite in its dependency tree (the Node
//! binding takes it too), executing the core's lock machines (`solewriter_core::project_lock`).
//!
//! The project lock: one sole writer per project directory. Exclusion while the owner lives
//! is the kernel's: the guard holds an `flock(2)` on `<dir>/project.lock.kernel`. The lock
//! record `<dir>/project.lock` — owner `{pid, start token, boot id, PID namespace}`, guard,
//! per-acquisition nonce — serves diagnostics, conditional release and recovery.
//!
//! # The kernel lock
//! `project.lock.kernel` is created once (mode 0600, no symlink followed) and never removed
//! or written; its content is empty and nothing reads it. An `flock` belongs to the open file
//! description: the kernel drops it when the holder closes it or dies (`kill -9` included),
//! two descriptions conflict even inside one process, and it excludes across PID namespaces
//! (containers) on one kernel, because it is keyed on the inode, not on a pid. Never removing
//! the file is what keeps it sound: if it were unlinked under a holder, the next taker would
//! create a new inode and lock that one while the holder still holds the old — two holders.
//! The directory is 0700 and must belong to the caller (anything else is refused), so no
//! other user can remove it either. The descriptor is opened close-on-exec, so a child the
//! holder executes does not keep the lock; but between its `fork` and its `exec` the child
//! shares the description, so a release while another thread spawns a process lets the
//! kernel lock go only at that `exec`, and a `fork` without `exec` keeps it alive after the
//! holder dies (busy for longer, never two holders).
//!
//! The kernel lock is tried without blocking and before anything is written: an attempt that
//! finds it taken opens an existing file read-only, learns "busy" and has created, written
//! and fsynced nothing (so a demand read beside a writer costs no fsync, and works in a
//! directory it cannot write). A file system that refuses locks (`EOPNOTSUPP`, `ENOLCK`) is
//! [`LockError::KernelLockUnavailable`] unless the host opted into record-only mode
//! ([`ProjectLock::record_only`]).
//!
//! # The rule
//! 1. Take the kernel lock without blocking. Taken by another: busy ([`LockError::Busy`],
//!    naming the record's owner if there is a record), or wait and retry within the bound.
//! 2. With the kernel lock held, create the record. If a record is already there, it is
//!    judged (`solewriter_core::project_lock::ownership::judge`): a record written under the kernel lock is
//!    stale (its writer's kernel lock is gone, so it released or died), whatever `/proc`
//!    shows of its owner — another PID namespace, another boot, a hidden `/proc`. It is
//!    removed and creation retried. A record-only record is classified: a dead owner is
//!    recovered, a live one is waited for (the kernel lock is let go meanwhile), an unknown one
//!    fails loudly ([`LockError::UnknownOwner`]).
//! 3. Release removes the record if it still carries this acquisition's nonce, then lets the
//!    kernel lock go.
//!
//! In record-only mode step 1 is skipped, and every record is classified (an owner in
//! another PID namespace or boot, or hidden by `/proc`, is unknown: loud, never dead).
//!
//! # The lock file
//! `<dir>/project.lock` holds a [`LockRecord`] (see `solewriter_core::project_lock::ownership`). It appears
//! complete or not at all: the record is written to a unique temp sibling and fsynced
//! ([`TempFile::write`]), then hard-linked to the lock name. `link(2)` fails if the name
//! exists, so creation is exclusive, and a crash at any point leaves either no lock file or a
//! complete one (never an empty or torn one). Temp files of crashed creators are swept by the
//! next successful acquirer; their names carry the creator's pid, start token, boot id and
//! PID namespace, so only temps of creators classified dead are removed.
//!
//! # Race-free recovery
//! Renaming or unlinking "the dead lock" is not safe by itself when record-only processes
//! recover too: between reading the dead record and removing `project.lock`, another
//! recoverer may already have removed it and a successor may have created a live lock under
//! the same name, which a naive recoverer would then remove. So the rule is:
//!
//! > A record carrying nonce N at path P is removed only by N's owner (release) or by the
//! > holder of the *claim* `P.recover-<N>`, after its owner was judged dead.
//!
//! (The claim's name carries the first 128 bits of N in hex.)
//! The claim is itself a lock file, created by the same exclusive hard link, so at most one
//! live process holds the claim for N. The claim holder re-reads P and unlinks it only if it
//! still carries N. Between that read and the unlink nothing else can change P: creation
//! needs P absent, N's owner is dead, and every other recoverer of N needs the claim. Nonces
//! are never reused, so once N is gone P never carries N again: a late recoverer that takes
//! the claim afterwards finds another nonce (or nothing) and removes nothing. After removal,
//! every recoverer competes for creation normally, so exactly one of them wins. A claim whose
//! holder died is recovered by the same rule one level up (`P.recover-<N>.recover-<M>`), at
//! most [`MAX_RECOVERY_DEPTH`] levels, then [`LockError::RecoveryAbandoned`] fails loudly.
//! (Under the kernel lock, a claim written by an earlier kernel holder is stale like any
//! kernel-guarded record.)
//!
//! # Release
//! Release unlinks the lock only if it still carries this acquisition's nonce, so it never
//! removes a successor's lock. (While the owner holds the kernel lock no one else may remove
//! its record, so its own read-then-unlink cannot race with a recovery.)
//!
//! # One sequence
//! The attempt (rule steps 1–2, recovery included) and the release are the core's step
//! machines (`solewriter_core::project_lock::machine`); this module executes their effects —
//! the kernel lock, reads, creation by temp and link, `/proc` observations, unlinks — and keeps
//! only the waiting between attempts, the sweep and the kernel lock's release. The model
//! executes the same machines under shuttle (`verification/tests/project_lock_shuttle.rs`).
//!
//! # Crash points
//! Every step reports a [`LockStep`] to the lock's [`LockProbe`] (none by default;
//! [`ProjectLock::with_probe`]), so tests can kill an acquirer, recoverer or releaser
//! exactly there. A successful acquisition also clears recovery claims left by dead
//! recoverers (by the same claim rule, one level up), so a recoverer killed after removing the
//! dead record leaves nothing behind for long.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod clear;
pub mod process;

pub use clear::Cleared;
pub use solewriter_core::project_lock::clear::ClearRefused;

use crate::process::{effective_uid, ProcessProbe};
use solewriter_core::contract::{run, Answer, Machine, ProtocolError};
use solewriter_core::project_lock::machine::{
    Attempt, AttemptEnd, KernelSeen, LockEffect, LockInput, LockProtocol, LockRelease, Slot,
};
use solewriter_core::project_lock::ownership::{
    judge, refuse_lock_dir, BootId, Guard, LockNonce, LockRecord, OwnerIdentity, Ownership,
    RecordError, UnknownReason, LOCK_RECORD_MAX_BYTES,
};
use solewriter_core::ErrorKind;
use solewriter_files::atomic_file::{
    ensure_private_dir, read_bounded, DirError, DirHandle, FileSystem, RealFs, TempFile, FILE_MODE,
};
use solewriter_files::clock::{Clock, SystemClock};
use std::fs::{File, OpenOptions, TryLockError};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use solewriter_core::project_lock::machine::{LOCK_FILE, MAX_RECOVERY_DEPTH};
/// File name of the kernel lock inside the project directory: created once, never removed.
pub const KERNEL_LOCK_FILE: &str = "project.lock.kernel";
/// First pause between attempts while a live owner holds the lock; it doubles after every
/// attempt up to [`MAX_BACKOFF`], and never extends past the caller's bound.
pub const FIRST_BACKOFF: Duration = Duration::from_millis(1);
/// Largest pause between attempts while waiting for a live owner.
pub const MAX_BACKOFF: Duration = Duration::from_millis(50);

/// A step of acquisition, recovery or release, reported with the path it concerns (the
/// kernel lock file, the lock or a recovery claim, `project.lock.recover-…`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockStep {
    /// The kernel lock was found taken by another holder; nothing was written.
    KernelBusy,
    /// The kernel lock is taken; nothing is written yet.
    KernelLocked,
    /// A record is written and fsynced to a temp sibling; not yet linked to its name.
    TempWritten,
    /// The record is linked to its name; the temp sibling still exists.
    Linked,
    /// The lock is taken and its temp removed; dead creators' temps are not yet swept.
    Acquired,
    /// A record carrying the expected nonce was read (release, or removal of a dead owner's
    /// record or of one's own claim); the unlink follows.
    Checked,
    /// That record was unlinked.
    Unlinked,
}

impl LockStep {
    /// Every step, in the order an uncontended acquisition and release reach them
    /// ([`LockStep::KernelBusy`] is reached only under contention).
    pub const ALL: [LockStep; 6] = [
        LockStep::KernelLocked,
        LockStep::TempWritten,
        LockStep::Linked,
        LockStep::Acquired,
        LockStep::Checked,
        LockStep::Unlinked,
    ];
}

/// Observes the lock's file-system steps: crash tests stop or kill a process at one of them.
pub trait LockProbe: Send + Sync {
    /// Called when `step` has been reached on `path`.
    fn reached(&self, step: LockStep, path: &Path);
}

/// The probe that observes nothing (the default).
#[derive(Clone, Copy, Debug, Default)]
pub struct NoSteps;

impl LockProbe for NoSteps {
    fn reached(&self, _: LockStep, _: &Path) {}
}

/// How long [`ProjectLock::acquire`] may wait for a live owner. There is no default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// Do not wait: a live owner is [`LockError::Busy`] at once.
    NoWait,
    /// Wait at most this long for a live owner to release (dead owners are recovered at once).
    Within(Duration),
}

/// Why the project lock was not taken or released.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LockError {
    /// Another holder holds the lock (after the allowed wait). Nothing was changed.
    #[error("project lock {lock} is held by {}; nothing was changed", owner.as_ref().map_or_else(|| "a holder that has no record yet (or no longer)".to_owned(), |o| format!("owner {o}")))]
    Busy {
        /// The lock (or recovery claim) file.
        lock: PathBuf,
        /// The recorded owner, when there is a record (the kernel lock can be held for a
        /// moment before its record is written or after it is removed).
        owner: Option<OwnerIdentity>,
    },
    /// The file system refuses the kernel lock, and the host did not opt into record-only
    /// mode. Nothing was written.
    #[error("the file system refuses the kernel lock on {lock} ({source}); nothing was written (a host whose file system refuses locks may opt into record-only mode)")]
    KernelLockUnavailable {
        /// The kernel lock file.
        lock: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// An operator's clear ([`ProjectLock::clear_unknown`]) was refused: the kernel lock is
    /// held, the owner is known (alive or dead), or the record carries another nonce. Nothing
    /// was removed.
    #[error("project lock {lock} was not cleared: {refused}; nothing was removed")]
    ClearRefused {
        /// The lock file.
        lock: PathBuf,
        /// Why (boxed: it carries the record found).
        refused: Box<ClearRefused>,
    },
    /// The project directory does not exist (reported by [`ProjectLock::status`] and
    /// [`ProjectLock::clear_unknown`]).
    #[error("project directory {dir} does not exist; nothing was read")]
    NoDirectory {
        /// The directory.
        dir: PathBuf,
    },
    /// The owner's liveness cannot be decided. The lock was left untouched.
    #[error("project lock {lock} has owner {owner} whose liveness is unknown ({reason}); the lock was left untouched")]
    UnknownOwner {
        /// The lock (or recovery claim) file.
        lock: PathBuf,
        /// The recorded owner.
        owner: OwnerIdentity,
        /// Why it cannot be classified.
        reason: UnknownReason,
    },
    /// The lock file is not a complete lock record (a foreign writer). It was left untouched.
    #[error("project lock {lock} is not a lock record ({reason}); it was left untouched")]
    Malformed {
        /// The lock (or recovery claim) file.
        lock: PathBuf,
        /// What is wrong with it.
        reason: RecordError,
    },
    /// Recoverers kept dying while recovering this lock. Nothing more was removed.
    #[error("recovery of project lock {lock} abandoned after {depth} levels of crashed recoverers; nothing more was removed")]
    RecoveryAbandoned {
        /// The innermost claim that could not be recovered.
        lock: PathBuf,
        /// How many claim levels deep.
        depth: usize,
    },
    /// This process's own identity cannot be read, so it cannot own a lock. Nothing was created.
    #[error("this process's identity is unreadable ({0}); no lock was created")]
    OwnIdentity(String),
    /// The lock directory is a symlink or not a directory, is not owned by this user, or is
    /// writable by group or others. Nothing was created.
    #[error("lock directory {dir} is unsafe ({reason}); nothing was created")]
    UnsafeDir {
        /// The directory.
        dir: PathBuf,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A file-system step failed. No other owner's lock was removed.
    #[error(
        "project lock step `{step}` failed on {path}: {source}; no other owner's lock was removed"
    )]
    Io {
        /// The step.
        step: &'static str,
        /// The path involved.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The OS random source failed. Nothing was created.
    #[error("random source failed ({0}); nothing was created")]
    Random(String),
    /// A bug in this library's executor of the lock machines, reported instead of a panic.
    /// Nothing more was done.
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
    /// A holder found it no longer holds the lock ([`ProjectLockGuard::verify`], or a release
    /// that found another record): its record was removed or replaced, or its kernel lock
    /// file is no longer the one at the lock's path. Nothing was removed.
    #[error("project lock {lock} is no longer held by this guard ({reason}); nothing was removed")]
    Lost {
        /// The lock (or kernel lock) file.
        lock: PathBuf,
        /// What was found instead.
        reason: String,
    },
}

impl LockError {
    /// Who must act on this error: a busy lock is contention, a lost one lost authority, a
    /// clear refused the operator's input; everything else an operator must look at.
    pub fn kind(&self) -> ErrorKind {
        match self {
            LockError::Busy { .. } => ErrorKind::Contention,
            LockError::Lost { .. } => ErrorKind::LostAuthority,
            LockError::ClearRefused { refused, .. } => refused.kind(),
            LockError::KernelLockUnavailable { .. }
            | LockError::NoDirectory { .. }
            | LockError::UnknownOwner { .. }
            | LockError::Malformed { .. }
            | LockError::RecoveryAbandoned { .. }
            | LockError::OwnIdentity(_)
            | LockError::UnsafeDir { .. }
            | LockError::Io { .. }
            | LockError::Random(_)
            | LockError::Protocol(_) => ErrorKind::Environment,
        }
    }

    /// Whether the same call may succeed if made again later, unchanged: only contention.
    pub fn is_retryable(&self) -> bool {
        self.kind().is_retryable()
    }

    /// [`LockError::Lost`] for a holder that found `found` (or nothing) at `lock` where its
    /// own record should be.
    pub fn lost(lock: PathBuf, found: Option<&LockRecord>) -> Self {
        LockError::Lost {
            lock,
            reason: found.map_or_else(
                || "the record is gone".to_owned(),
                |r| format!("the record now names owner {} with another nonce", r.owner),
            ),
        }
    }
}

/// The lock's error is what an attempt's end carries when one of its effects failed: the end
/// takes its kind from here.
impl solewriter_core::error_kind::Classified for LockError {
    fn kind(&self) -> ErrorKind {
        LockError::kind(self)
    }
}

fn io_err(step: &'static str, path: &Path) -> impl FnOnce(io::Error) -> LockError {
    let path = path.to_owned();
    move |source| LockError::Io { step, path, source }
}

/// What the release found: `Removed`, or `NotHolder` with what was there instead.
pub use solewriter_core::project_lock::machine::ReleaseEnd as Released;

/// A kernel lock this process holds; let go explicitly (`LOCK_UN`) when dropped, not only
/// closed: a child forked by any thread of this process shares the open file description
/// until it execs, and would keep the lock held.
#[derive(Debug)]
struct KernelLock(File);

impl KernelLock {
    fn unlock(&self) {
        if let Err(error) = self.0.unlock() {
            tracing::warn!(%error, "unlocking the project's kernel lock failed; it ends when this process closes it");
        }
    }
}

impl Drop for KernelLock {
    fn drop(&mut self) {
        self.unlock();
    }
}

/// How a machine run ended, when it did not fail.
enum RunEnd {
    /// The lock is taken with this record.
    Acquired(LockRecord),
    /// Held by another, whose record names this owner (if there is a record).
    Busy(Option<OwnerIdentity>),
    /// A clear-only run is done.
    Cleared,
}

/// What one attempt at the whole lock found.
enum Outcome {
    /// Taken.
    Acquired(ProjectLockGuard),
    /// Held by another, whose record names this owner (if there is a record).
    Busy(Option<OwnerIdentity>),
}

/// The state of the kernel lock as [`ProjectLock::status`] found it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum KernelState {
    /// Another holder holds it: the lock is taken, whatever the record says.
    Held,
    /// Nobody held it (the status taker held it for the moment of its look).
    Free,
    /// No kernel lock file: no holder has used the kernel lock in this directory.
    NoFile,
    /// Record-only mode: the kernel lock is not consulted.
    NotUsed,
}

/// What [`ProjectLock::status`] found: the kernel lock, the record and the record's judgement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockStatus {
    /// The kernel lock.
    pub kernel: KernelState,
    /// The record, if any.
    pub record: Option<LockRecord>,
    /// The record judged from here: with the kernel lock free, a kernel-guarded record is
    /// stale; otherwise its owner is classified. `None` without a record.
    pub ownership: Option<Ownership>,
}

/// A project lock directory and the probe that classifies owners. Cheap to clone.
#[derive(Clone)]
pub struct ProjectLock {
    dir: PathBuf,
    probe: Arc<dyn ProcessProbe>,
    steps: Arc<dyn LockProbe>,
    fs: Arc<dyn FileSystem>,
    record_only: bool,
}

impl std::fmt::Debug for ProjectLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProjectLock")
            .field("dir", &self.dir)
            .field("record_only", &self.record_only)
            .finish_non_exhaustive()
    }
}

impl ProjectLock {
    /// The lock of project directory `dir` (created with mode 0700 on first acquisition; its
    /// parent must exist; an existing one must belong to this user and be writable by no one
    /// else), classifying owners with `probe`.
    pub fn new(dir: impl Into<PathBuf>, probe: Arc<dyn ProcessProbe>) -> Self {
        ProjectLock {
            dir: dir.into(),
            probe,
            steps: Arc::new(NoSteps),
            fs: Arc::new(RealFs),
            record_only: false,
        }
    }

    /// This lock in record-only mode: no kernel lock, exclusion by the record alone, judged by
    /// classifying its owner. Only for a file system that refuses locks
    /// ([`LockError::KernelLockUnavailable`]): an owner in another PID namespace or boot, or
    /// hidden by `/proc`, then fails loudly ([`LockError::UnknownOwner`]) instead of being
    /// excluded by the kernel, and a holder that dies while its pid is reused by a process of
    /// the same start token (practically never) would be taken for alive.
    pub fn record_only(self) -> Self {
        ProjectLock {
            record_only: true,
            ..self
        }
    }

    /// This lock, reporting its steps to `steps`.
    pub fn with_probe(self, steps: Arc<dyn LockProbe>) -> Self {
        ProjectLock { steps, ..self }
    }

    /// This lock, creating and removing its files (and drawing its nonces) through `fs`
    /// instead of the operating system; a ledger guarded by this lock writes its snapshot
    /// through `fs` too. A test seam (recording the sequence the crash model checks, injecting
    /// faults), not for production use.
    #[doc(hidden)]
    pub fn with_file_system(self, fs: Arc<dyn FileSystem>) -> Self {
        ProjectLock { fs, ..self }
    }

    /// The file system this lock (and the ledger guarded by it) writes through.
    #[doc(hidden)]
    pub fn file_system(&self) -> &dyn FileSystem {
        &*self.fs
    }

    /// The project directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The lock file's path.
    pub fn path(&self) -> PathBuf {
        self.dir.join(LOCK_FILE)
    }

    /// The kernel lock file's path.
    pub fn kernel_path(&self) -> PathBuf {
        self.dir.join(KERNEL_LOCK_FILE)
    }

    /// Takes the lock, waiting for another holder as `wait` allows. Stale records are
    /// recovered (race-free, see the module doc); an unknown owner of a record-only record or
    /// a malformed lock fails loudly.
    pub fn acquire(&self, wait: Wait) -> Result<ProjectLockGuard, LockError> {
        self.make_dir()?;
        self.check_dir()?;
        let me = self.probe.current().map_err(LockError::OwnIdentity)?;
        // `None`: the bound is too large to represent, i.e. wait as long as it takes.
        let deadline = match wait {
            Wait::NoWait => Some(Instant::now()),
            Wait::Within(bound) => Instant::now().checked_add(bound),
        };
        let path = self.path();
        let mut backoff = FIRST_BACKOFF;
        loop {
            let owner = match self.attempt(&me, &path)? {
                Outcome::Acquired(guard) => return Ok(guard),
                Outcome::Busy(owner) => owner,
            };
            let now = Instant::now();
            let pause = match deadline {
                Some(deadline) if now >= deadline => {
                    tracing::info!(lock = %path.display(), owner = ?owner, outcome = "busy", "project lock");
                    return Err(LockError::Busy { lock: path, owner });
                }
                Some(deadline) => backoff.min(deadline - now),
                None => backoff,
            };
            std::thread::sleep(pause);
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }

    /// One attempt: the core's [`Attempt`] machine (the kernel lock, then the record, stale
    /// records recovered by the claim rule), executed here. A busy kernel lock ends before
    /// anything is written; a live owner ends with the kernel lock let go.
    fn attempt(&self, me: &OwnerIdentity, path: &Path) -> Result<Outcome, LockError> {
        let mut kernel = None;
        let end = self.run(Attempt::new(me.clone()), &mut kernel)?;
        match self.ended(end)? {
            RunEnd::Acquired(record) => {
                let held = kernel.is_some();
                tracing::info!(lock = %path.display(), owner = %me, kernel_lock = held, outcome = "acquired", "project lock");
                self.steps.reached(LockStep::Acquired, path);
                self.sweep(me, held);
                Ok(Outcome::Acquired(ProjectLockGuard {
                    lock: self.clone(),
                    record,
                    armed: true,
                    kernel,
                }))
            }
            RunEnd::Busy(owner) => Ok(Outcome::Busy(owner)),
            RunEnd::Cleared => Err(ProtocolError::ImpossibleEnd {
                machine: "project lock attempt",
                end: "cleared",
            }
            .into()),
        }
    }

    /// Runs a lock machine to its end; a kernel lock taken is kept in `kernel`.
    fn run<M: Machine<Protocol = LockProtocol<LockError>>>(
        &self,
        machine: M,
        kernel: &mut Option<KernelLock>,
    ) -> Result<M::Output, LockError> {
        Ok(run(machine, |effect| self.execute(effect, kernel))?)
    }

    /// The end of an attempt, with its failures as errors.
    fn ended(&self, end: AttemptEnd<LockError>) -> Result<RunEnd, LockError> {
        match end {
            AttemptEnd::Acquired(record) => Ok(RunEnd::Acquired(record)),
            AttemptEnd::Busy(_, owner) => Ok(RunEnd::Busy(owner)),
            AttemptEnd::Cleared => Ok(RunEnd::Cleared),
            AttemptEnd::Unknown(slot, owner, reason) => Err(LockError::UnknownOwner {
                lock: self.dir.join(slot.file_name()),
                owner,
                reason,
            }),
            AttemptEnd::Abandoned(slot) => Err(LockError::RecoveryAbandoned {
                lock: self.dir.join(slot.file_name()),
                depth: slot.depth(),
            }),
            AttemptEnd::Failed(error) => Err(error),
        }
    }

    /// Executes one effect of a lock machine; a kernel lock taken is kept in `kernel`.
    fn execute(
        &self,
        effect: LockEffect<LockError>,
        kernel: &mut Option<KernelLock>,
    ) -> Answer<LockInput<LockError>> {
        match effect {
            LockEffect::TryKernel(ask) => ask.answer(self.kernel_lock().map(|(seen, taken)| {
                *kernel = taken;
                let step = match seen {
                    KernelSeen::Busy => Some(LockStep::KernelBusy),
                    KernelSeen::Taken => Some(LockStep::KernelLocked),
                    KernelSeen::NotUsed => None,
                };
                if let Some(step) = step {
                    self.steps.reached(step, &self.kernel_path());
                }
                seen
            })),
            LockEffect::Read(slot, ask) => ask.answer(self.read(&self.dir.join(slot.file_name()))),
            LockEffect::Fresh(ask) => {
                ask.answer(fresh_nonce(&*self.fs).map(|nonce| (nonce, SystemClock.now())))
            }
            LockEffect::Create(slot, record, ask) => {
                ask.answer(self.create(&self.dir.join(slot.file_name()), &record))
            }
            LockEffect::Observe(pid, ask) => ask.answer(Ok(self.probe.observe(pid))),
            LockEffect::Unlink(slot, ask) => ask.answer(self.unlink(&slot)),
        }
    }

    /// Unlinks a slot: whether it was there.
    fn unlink(&self, slot: &Slot) -> Result<bool, LockError> {
        let path = self.dir.join(slot.file_name());
        self.steps.reached(LockStep::Checked, &path);
        let dir = self.held_dir()?;
        match self.fs.remove_file(&dir, slot.file_name()) {
            Ok(()) => {
                self.steps.reached(LockStep::Unlinked, &path);
                Ok(true)
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(io_err("remove lock", &path)(e)),
        }
    }

    /// Tries the kernel lock without blocking. The file is opened read-only when it exists
    /// (nothing written, also in a read-only directory) and created (0600) only when absent.
    fn kernel_lock(&self) -> Result<(KernelSeen, Option<KernelLock>), LockError> {
        if self.record_only {
            return Ok((KernelSeen::NotUsed, None));
        }
        let path = self.kernel_path();
        let file = match open_kernel_file(&path, false) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => open_kernel_file(&path, true),
            opened => opened,
        }
        .map_err(io_err("open kernel lock", &path))?;
        let meta = file.metadata().map_err(io_err("open kernel lock", &path))?;
        if !meta.is_file() {
            return Err(io_err("open kernel lock", &path)(io::Error::other(
                "not a regular file",
            )));
        }
        match self.fs.try_lock(&file) {
            Ok(()) => Ok((KernelSeen::Taken, Some(KernelLock(file)))),
            Err(TryLockError::WouldBlock) => Ok((KernelSeen::Busy, None)),
            Err(TryLockError::Error(source)) if locks_refused(&source) => {
                Err(LockError::KernelLockUnavailable { lock: path, source })
            }
            Err(TryLockError::Error(source)) => Err(io_err("take kernel lock", &path)(source)),
        }
    }

    /// Creates the project directory (mode 0700, fsynced in its parent) if absent, in its
    /// parent opened by path; an existing one is checked like [`Self::check_dir`] does.
    fn make_dir(&self) -> Result<(), LockError> {
        let Some(name) = self.dir.file_name().and_then(|n| n.to_str()) else {
            return self.held_dir().map(drop);
        };
        let parent = self
            .dir
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let parent = DirHandle::open(parent).map_err(io_err("create lock directory", parent))?;
        ensure_private_dir(&*self.fs, &parent, name)
            .map(drop)
            .map_err(|e| match e {
                DirError::Unsafe(reason) => LockError::UnsafeDir {
                    dir: self.dir.clone(),
                    reason,
                },
                DirError::Io(source) => io_err("create lock directory", &self.dir)(source),
            })
    }

    /// The project directory, held open for the steps of one effect (no symlink followed).
    /// The project lock still opens it by path at each effect that writes or removes a file;
    /// the files inside are then named relative to this handle.
    fn held_dir(&self) -> Result<DirHandle, LockError> {
        DirHandle::open_nofollow(&self.dir).map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP | libc::ENOTDIR) => LockError::UnsafeDir {
                dir: self.dir.clone(),
                reason: "is a symlink or not a directory",
            },
            _ => io_err("open lock directory", &self.dir)(e),
        })
    }

    /// Refuses a directory this user does not own or others may write.
    fn check_dir(&self) -> Result<(), LockError> {
        let meta = self
            .dir
            .symlink_metadata()
            .map_err(io_err("inspect lock directory", &self.dir))?;
        let uid = effective_uid().map_err(LockError::OwnIdentity)?;
        match refuse_lock_dir(meta.uid(), uid, meta.mode()) {
            Some(reason) => Err(LockError::UnsafeDir {
                dir: self.dir.clone(),
                reason,
            }),
            None => Ok(()),
        }
    }

    /// The current lock record, if any (for diagnostics).
    pub fn current(&self) -> Result<Option<LockRecord>, LockError> {
        self.read(&self.path())
    }

    /// What an operator needs to know, read without writing anything: the kernel lock (taken
    /// for the moment of the look if free — an acquirer trying at that very moment is told
    /// busy), the record and its judgement. A missing directory is
    /// [`LockError::NoDirectory`]; an unsafe one is refused like [`Self::acquire`] does.
    pub fn status(&self) -> Result<LockStatus, LockError> {
        self.existing_dir()?;
        let (kernel, _look) = if self.record_only {
            (KernelState::NotUsed, None)
        } else {
            match open_kernel_file(&self.kernel_path(), false) {
                Err(e) if e.kind() == io::ErrorKind::NotFound => (KernelState::NoFile, None),
                Err(e) => return Err(io_err("open kernel lock", &self.kernel_path())(e)),
                Ok(file) => match file.try_lock() {
                    Ok(()) => (KernelState::Free, Some(file)),
                    Err(TryLockError::WouldBlock) => (KernelState::Held, None),
                    Err(TryLockError::Error(source)) => {
                        return Err(io_err("take kernel lock", &self.kernel_path())(source))
                    }
                },
            }
        };
        // Read while the look holds a free kernel lock, so no record appears meanwhile.
        let record = self.current()?;
        let ownership = record.as_ref().map(|r| {
            judge(&r.owner, r.guard, kernel == KernelState::Free, || {
                self.probe.observe(r.owner.pid)
            })
        });
        Ok(LockStatus {
            kernel,
            record,
            ownership,
        })
    }

    /// Refuses a directory that is missing ([`LockError::NoDirectory`]: an operator's command
    /// creates nothing), a symlink or not a directory, or unsafe (like [`Self::acquire`]).
    fn existing_dir(&self) -> Result<(), LockError> {
        match self.dir.symlink_metadata() {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Err(LockError::NoDirectory {
                dir: self.dir.clone(),
            }),
            Err(e) => Err(io_err("inspect lock directory", &self.dir)(e)),
            Ok(meta) if meta.file_type().is_symlink() || !meta.is_dir() => {
                Err(LockError::UnsafeDir {
                    dir: self.dir.clone(),
                    reason: "is a symlink or not a directory",
                })
            }
            Ok(_) => self.check_dir(),
        }
    }

    /// Reads the record at `path`; `None` if there is none. Reads at most one byte past
    /// [`LOCK_RECORD_MAX_BYTES`], so a planted huge file is refused by the parse without
    /// being loaded whole.
    fn read(&self, path: &Path) -> Result<Option<LockRecord>, LockError> {
        match read_bounded(path, LOCK_RECORD_MAX_BYTES) {
            Ok(bytes) => {
                LockRecord::parse(&bytes)
                    .map(Some)
                    .map_err(|reason| LockError::Malformed {
                        lock: path.to_owned(),
                        reason,
                    })
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_err("read lock", path)(e)),
        }
    }

    /// Creates `path` holding `record`, complete or not at all; `false` if it exists.
    fn create(&self, path: &Path, record: &LockRecord) -> Result<bool, LockError> {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or(LOCK_FILE);
        let owner = &record.owner;
        let tag = format!(
            "{name}.{}.{}.{}.{}.{}",
            owner.pid,
            owner.start_token,
            owner.boot_id.as_str(),
            owner.pid_ns,
            record.guard.as_str()
        );
        let dir = self.held_dir()?;
        let temp = TempFile::write(&*self.fs, &dir, &tag, record.encode().as_bytes())
            .map_err(io_err("write temp lock", &self.dir))?;
        self.steps.reached(LockStep::TempWritten, path);
        // `temp` removes its own name when dropped; the link keeps the content.
        match self.fs.hard_link(&dir, temp.name(), name) {
            Ok(()) => {
                self.steps.reached(LockStep::Linked, path);
                Ok(true)
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(io_err("link lock into place", path)(e)),
        }
    }

    /// Runs the release machine: removes the lock if it still carries `nonce`.
    fn remove_if_carries(&self, nonce: &LockNonce) -> Result<Released, LockError> {
        let mut kernel = None;
        self.run(LockRelease::new(*nonce), &mut kernel)?
    }

    /// Removes temp files and recovery claims judged stale like records are (written under the
    /// kernel lock this acquirer now holds, or by a creator classified dead; best effort: a
    /// failure is logged and leaves the file for a later sweep). A live creator's temp and a
    /// live recoverer's claim are never touched; a claim is removed by the claim rule one
    /// level up, exactly as an acquirer meeting it would.
    fn sweep(&self, me: &OwnerIdentity, kernel_held: bool) {
        let (Ok(entries), Ok(dir)) = (std::fs::read_dir(&self.dir), self.held_dir()) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str() else {
                continue;
            };
            if let Some(claim) = Slot::of_name(name).filter(|slot| slot.depth() > 0) {
                let mut kernel = None;
                let machine = Attempt::clear(me.clone(), kernel_held, claim);
                let cleared = self.run(machine, &mut kernel);
                if let Err(e) = cleared.and_then(|end| self.ended(end)) {
                    tracing::warn!(claim = %entry.path().display(), error = %e, "recovery claim not cleared");
                }
                continue;
            }
            let Some((creator, guard)) = temp_creator(name) else {
                continue;
            };
            let judged = judge(&creator, guard, kernel_held, || {
                self.probe.observe(creator.pid)
            });
            if matches!(judged, Ownership::Dead(_)) {
                if let Err(e) = self.fs.remove_file(&dir, name) {
                    tracing::warn!(temp = %entry.path().display(), error = %e, "orphan lock temp not removed");
                }
            }
        }
    }
}

/// The creator of a lock temp file
/// `.project.lock[.recover-…].<pid>.<start>.<boot>.<pidns>.<guard>.tmp-<hex>`, and the guard
/// it wrote under. The boot and the PID namespace are part of the name because start tokens
/// count from boot and pids from their namespace: a temp left before a reboot, or by a
/// process in another namespace, must not pass for a dead (or live) process here with the
/// same pid. The guard lets a kernel lock holder sweep what earlier kernel lock holders left.
fn temp_creator(name: &str) -> Option<(OwnerIdentity, Guard)> {
    let tagged = name.strip_prefix('.')?.rsplit_once(".tmp-")?.0;
    if !tagged.starts_with(LOCK_FILE) {
        return None;
    }
    let mut parts = tagged.rsplitn(6, '.');
    let guard = Guard::parse(parts.next()?)?;
    let pid_ns = parts.next()?.parse().ok()?;
    let boot_id = BootId::parse(parts.next()?).ok()?;
    let start_token = parts.next()?.parse().ok()?;
    let pid = parts.next()?.parse().ok()?;
    Some((
        OwnerIdentity {
            pid,
            start_token,
            boot_id,
            pid_ns,
        },
        guard,
    ))
}

/// Opens the kernel lock file (no symlink followed, close-on-exec as every std open):
/// read-only, or creating it (mode 0600) when `create`.
fn open_kernel_file(path: &Path, create: bool) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(create)
        .create(create)
        .truncate(false)
        .mode(FILE_MODE)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

/// Whether `error` from taking an `flock` means the file system refuses locks.
fn locks_refused(error: &io::Error) -> bool {
    error.kind() == io::ErrorKind::Unsupported
        || matches!(error.raw_os_error(), Some(libc::EOPNOTSUPP | libc::ENOLCK))
}

/// The held project lock. Dropping it releases it (conditionally, like [`Self::release`]).
#[must_use = "the project lock is released when this guard is dropped"]
#[derive(Debug)]
pub struct ProjectLockGuard {
    lock: ProjectLock,
    record: LockRecord,
    armed: bool,
    /// The kernel lock (none in record-only mode), let go explicitly (`LOCK_UN`) after the
    /// release has removed the record — closing alone would not do: a child forked by any
    /// thread of this process shares the open file description until it execs, and would keep
    /// the lock held.
    kernel: Option<KernelLock>,
}

impl ProjectLockGuard {
    /// This acquisition's record (owner, nonce, acquisition time).
    pub fn record(&self) -> &LockRecord {
        &self.record
    }

    /// The lock.
    pub fn lock(&self) -> &ProjectLock {
        &self.lock
    }

    /// Proves this guard still holds the lock, for a holder about to act on it (the ledger,
    /// immediately before replacing its snapshot): the kernel lock file at the lock's path is
    /// still the file this guard holds the `flock` on, and the record still carries this
    /// acquisition's nonce. Otherwise [`LockError::Lost`] (a read failure is its own error).
    /// Nothing is written.
    pub fn verify(&self) -> Result<(), LockError> {
        if let Some(held) = &self.kernel {
            let path = self.lock.kernel_path();
            let lost = |reason: String| LockError::Lost {
                lock: path.clone(),
                reason,
            };
            let mine = held
                .0
                .metadata()
                .map_err(io_err("inspect held kernel lock", &path))?;
            match path.symlink_metadata() {
                Ok(now) if (now.dev(), now.ino()) == (mine.dev(), mine.ino()) => {}
                Ok(_) => return Err(lost("the kernel lock file was replaced".into())),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    return Err(lost("the kernel lock file was removed".into()))
                }
                Err(e) => return Err(io_err("inspect kernel lock", &path)(e)),
            }
        }
        match self.lock.current()? {
            Some(found) if found.nonce == self.record.nonce => Ok(()),
            found => Err(LockError::lost(self.lock.path(), found.as_ref())),
        }
    }

    /// Releases the lock if it still carries this acquisition's nonce (a successor's lock is
    /// never removed), then lets the kernel lock go.
    pub fn release(mut self) -> Result<Released, LockError> {
        self.armed = false;
        self.release_now()
    }

    fn release_now(&self) -> Result<Released, LockError> {
        let path = self.lock.path();
        let outcome = self.lock.remove_if_carries(&self.record.nonce);
        if let Some(kernel) = &self.kernel {
            kernel.unlock();
        }
        let outcome = outcome?;
        tracing::info!(lock = %path.display(), owner = %self.record.owner, outcome = ?matches!(outcome, Released::Removed), "project lock released");
        Ok(outcome)
    }
}

impl Drop for ProjectLockGuard {
    fn drop(&mut self) {
        if self.armed {
            if let Err(e) = self.release_now() {
                tracing::warn!(error = %e, "project lock release on drop failed");
            }
        }
    }
}

/// 256 random bits for a record's nonce.
fn fresh_nonce(fs: &dyn FileSystem) -> Result<LockNonce, LockError> {
    let mut bytes = [0u8; 32];
    fs.fill_random(&mut bytes)
        .map_err(|e| LockError::Random(e.to_string()))?;
    Ok(LockNonce::from_bytes(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_names_carry_their_creator() {
        let creator =
            |n| temp_creator(n).map(|(o, g)| (o.pid, o.start_token, o.boot_id, o.pid_ns, g));
        let boot = BootId::parse("b00f-12").unwrap();
        assert_eq!(
            creator(".project.lock.42.7.b00f-12.99.kernel.tmp-00ff"),
            Some((42, 7, boot.clone(), 99, Guard::Kernel))
        );
        assert_eq!(
            creator(".project.lock.recover-abcd.42.7.b00f-12.99.record-only.tmp-00ff"),
            Some((42, 7, boot, 99, Guard::RecordOnly))
        );
        assert_eq!(creator(".ledger.snapshot.tmp-00ff"), None);
        assert_eq!(creator("project.lock"), None);
        assert_eq!(creator(".project.lock.x.7.b00f.99.kernel.tmp-00"), None);
        assert_eq!(creator(".project.lock.42.7.NOTHEX.99.kernel.tmp-00"), None);
        assert_eq!(creator(".project.lock.42.7.b00f.x.kernel.tmp-00"), None);
        assert_eq!(creator(".project.lock.42.7.b00f.99.other.tmp-00"), None);
        // A name of the earlier format (no namespace, no guard) is left alone.
        assert_eq!(creator(".project.lock.42.7.b00f-12.tmp-00ff"), None);
    }

    /// An attempt that did not take the lock ends in an error of the kind the core gives that
    /// end (a busy one once its wait is over).
    #[test]
    fn an_attempt_that_failed_keeps_the_core_kind() {
        let lock = ProjectLock::new("project", Arc::new(process::SystemProbe));
        let owner = OwnerIdentity {
            pid: 42,
            start_token: 7,
            boot_id: BootId::parse("b00f-12").unwrap(),
            pid_ns: 99,
        };
        let busy = AttemptEnd::<LockError>::Busy(Slot::lock(), None);
        let timed_out = LockError::Busy {
            lock: PathBuf::from(LOCK_FILE),
            owner: None,
        };
        assert_eq!(busy.failure_kind(), Some(timed_out.kind()));
        let ends = [
            AttemptEnd::Unknown(
                Slot::lock(),
                owner,
                UnknownReason::NamespaceUnreadable("a sample".into()),
            ),
            AttemptEnd::Abandoned(Slot::lock()),
            AttemptEnd::Failed(LockError::Random("a sample".into())),
        ];
        for end in ends {
            let kind = end.failure_kind();
            let shape = format!("{end:?}");
            let error = lock.ended(end).err().map(|e| e.kind());
            assert_eq!(error, kind, "{shape}");
        }
    }

    #[test]
    fn only_refused_locks_are_unavailable() {
        for errno in [libc::EOPNOTSUPP, libc::ENOLCK] {
            assert!(
                locks_refused(&io::Error::from_raw_os_error(errno)),
                "{errno}"
            );
        }
        assert!(locks_refused(&io::Error::from(io::ErrorKind::Unsupported)));
        for errno in [libc::EIO, libc::EBADF, libc::EINTR, libc::EWOULDBLOCK] {
            assert!(
                !locks_refused(&io::Error::from_raw_os_error(errno)),
                "{errno}"
            );
        }
    }
}
