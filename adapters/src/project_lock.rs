//! The project lock: one sole writer per project directory, whose authority is one exact
//! process generation `{pid, start token, boot id}` plus a per-acquisition nonce.
//!
//! # The lock file
//! `<dir>/project.lock` holds a [`LockRecord`] (see `solewriter_core::ownership`). It appears
//! complete or not at all: the record is written to a unique temp sibling and fsynced
//! ([`TempFile::write`]), then hard-linked to the lock name. `link(2)` fails if the name
//! exists, so creation is exclusive, and a crash at any point leaves either no lock file or a
//! complete one (never an empty or torn one). Temp files of crashed creators are swept by the
//! next successful acquirer; their names carry the creator's pid, start token and boot id, so
//! only temps of dead creators are removed.
//!
//! # Acquisition
//! Try to create the lock. If it exists, read it and classify its owner through the
//! [`ProcessProbe`]: a live owner means wait (with backoff, within the caller's bound) or
//! [`LockError::Busy`]; an unknown owner is [`LockError::UnknownOwner`] (never guessed dead or
//! alive); a dead owner is recovered, then creation is tried again. A lock that disappears
//! between a losing create and the read is a normal release race: the loop simply retries.
//!
//! # Race-free recovery
//! Renaming or unlinking "the dead lock" is not safe by itself: between reading the dead
//! record and removing `project.lock`, another recoverer may already have removed it and a
//! successor may have created a live lock under the same name, which a naive recoverer would
//! then remove (or rename away and try to put back, leaving a window where a third process
//! creates a lock too). So the rule is:
//!
//! > A record carrying nonce N at path P is removed only by N's owner (release) or by the
//! > holder of the *claim* `P.recover-<N>`, after its owner was classified dead.
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
//!
//! # Release
//! Release unlinks the lock only if it still carries this acquisition's nonce, so it never
//! removes a successor's lock. (While the owner is alive no one else may remove its record,
//! so its own read-then-unlink cannot race with a recovery.)
//!
//! # Crash points
//! Every file-system step reports a [`LockStep`] to the lock's [`LockProbe`] (none by
//! default; [`ProjectLock::with_probe`]), so tests can kill an acquirer, recoverer or releaser
//! exactly there. A successful acquisition also clears recovery claims left by dead
//! recoverers (by the same claim rule, one level up), so a recoverer killed after removing the
//! dead record leaves nothing behind for long.

use crate::atomic_file::{
    ensure_private_dir, read_bounded, DirError, FileSystem, RealFs, TempFile,
};
use crate::clock::{Clock, SystemClock};
use crate::process::ProcessProbe;
use crate::publication::NoProbe;
use solewriter_core::ownership::{
    classify, BootId, LockNonce, LockRecord, OwnerIdentity, Ownership, RecordError, UnknownReason,
    LOCK_RECORD_MAX_BYTES,
};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// File name of the lock inside the project directory.
pub const LOCK_FILE: &str = "project.lock";
/// How many levels of crashed recoverers are recovered before giving up loudly.
pub const MAX_RECOVERY_DEPTH: usize = 3;
/// First pause between attempts while a live owner holds the lock; it doubles after every
/// attempt up to [`MAX_BACKOFF`], and never extends past the caller's bound.
pub const FIRST_BACKOFF: Duration = Duration::from_millis(1);
/// Largest pause between attempts while waiting for a live owner.
pub const MAX_BACKOFF: Duration = Duration::from_millis(50);

/// A file-system step of acquisition, recovery or release, reported with the path it concerns
/// (the lock or a recovery claim, `project.lock.recover-…`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockStep {
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
    /// Every step, in the order an uncontended acquisition and release reach them.
    pub const ALL: [LockStep; 5] = [
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

impl LockProbe for NoProbe {
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
    /// A live owner holds the lock (after the allowed wait). Nothing was changed.
    #[error("project lock {lock} is held by live owner {owner}; nothing was changed")]
    Busy {
        /// The lock (or recovery claim) file.
        lock: PathBuf,
        /// Its live owner.
        owner: OwnerIdentity,
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
    /// The lock directory is a symlink or not a directory. Nothing was created.
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
}

fn io_err(step: &'static str, path: &Path) -> impl FnOnce(io::Error) -> LockError {
    let path = path.to_owned();
    move |source| LockError::Io { step, path, source }
}

/// What the release found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Released {
    /// The lock carried this acquisition's nonce and was removed.
    Removed,
    /// The lock did not carry this acquisition's nonce (recovered from this owner, or
    /// already gone): nothing was removed. Holds what was found there.
    NotHolder(Option<LockRecord>),
}

/// What clearing a lock path found.
enum Clear {
    /// Nothing is there any more (released, or a dead owner's record was removed).
    Gone,
    /// A live process holds it (the lock's owner, or a live recoverer's claim).
    Live(OwnerIdentity),
}

/// A project lock directory and the probe that classifies owners. Cheap to clone.
#[derive(Clone)]
pub struct ProjectLock {
    dir: PathBuf,
    probe: Arc<dyn ProcessProbe>,
    steps: Arc<dyn LockProbe>,
    fs: Arc<dyn FileSystem>,
}

impl std::fmt::Debug for ProjectLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProjectLock")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

impl ProjectLock {
    /// The lock of project directory `dir` (created with mode 0700 on first acquisition; its
    /// parent must exist), classifying owners with `probe`.
    pub fn new(dir: impl Into<PathBuf>, probe: Arc<dyn ProcessProbe>) -> Self {
        ProjectLock {
            dir: dir.into(),
            probe,
            steps: Arc::new(NoProbe),
            fs: Arc::new(RealFs),
        }
    }

    /// This lock, reporting its file-system steps to `steps`.
    pub fn with_probe(self, steps: Arc<dyn LockProbe>) -> Self {
        ProjectLock { steps, ..self }
    }

    /// This lock, creating and removing its files through `fs` instead of the operating
    /// system's file system. A test seam (recording the sequence the crash model checks), not
    /// for production use.
    #[doc(hidden)]
    pub fn with_file_system(self, fs: Arc<dyn FileSystem>) -> Self {
        ProjectLock { fs, ..self }
    }

    /// The project directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The lock file's path.
    pub fn path(&self) -> PathBuf {
        self.dir.join(LOCK_FILE)
    }

    /// Takes the lock, waiting for a live owner as `wait` allows. Dead owners are recovered
    /// (race-free, see the module doc); an unknown owner or a malformed lock fails loudly.
    pub fn acquire(&self, wait: Wait) -> Result<ProjectLockGuard, LockError> {
        ensure_private_dir(&*self.fs, &self.dir).map_err(|e| match e {
            DirError::Unsafe(reason) => LockError::UnsafeDir {
                dir: self.dir.clone(),
                reason,
            },
            DirError::Io(source) => io_err("create lock directory", &self.dir)(source),
        })?;
        let me = self.probe.current().map_err(LockError::OwnIdentity)?;
        // `None`: the bound is too large to represent, i.e. wait as long as it takes.
        let deadline = match wait {
            Wait::NoWait => Some(Instant::now()),
            Wait::Within(bound) => Instant::now().checked_add(bound),
        };
        let path = self.path();
        let record = self.new_record(&me)?;
        let mut backoff = FIRST_BACKOFF;
        loop {
            if self.create(&path, &record)? {
                tracing::info!(lock = %path.display(), owner = %me, outcome = "acquired", "project lock");
                self.steps.reached(LockStep::Acquired, &path);
                self.sweep(&me);
                return Ok(ProjectLockGuard {
                    lock: self.clone(),
                    record,
                    armed: true,
                });
            }
            let owner = match self.clear(&path, &me, 0)? {
                Clear::Gone => continue,
                Clear::Live(owner) => owner,
            };
            let now = Instant::now();
            let pause = match deadline {
                Some(deadline) if now >= deadline => {
                    tracing::info!(lock = %path.display(), owner = %owner, outcome = "busy", "project lock");
                    return Err(LockError::Busy { lock: path, owner });
                }
                Some(deadline) => backoff.min(deadline - now),
                None => backoff,
            };
            std::thread::sleep(pause);
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }

    /// The current lock record, if any (for diagnostics).
    pub fn current(&self) -> Result<Option<LockRecord>, LockError> {
        self.read(&self.path())
    }

    fn new_record(&self, me: &OwnerIdentity) -> Result<LockRecord, LockError> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).map_err(|e| LockError::Random(e.to_string()))?;
        Ok(LockRecord {
            owner: me.clone(),
            nonce: LockNonce::from_bytes(bytes),
            acquired_at: SystemClock.now(),
        })
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
            "{name}.{}.{}.{}",
            owner.pid,
            owner.start_token,
            owner.boot_id.as_str()
        );
        let temp = TempFile::write(&*self.fs, &self.dir, &tag, record.encode().as_bytes())
            .map_err(io_err("write temp lock", &self.dir))?;
        self.steps.reached(LockStep::TempWritten, path);
        // `temp` removes its own name when dropped; the link keeps the content.
        match self.fs.hard_link(temp.path(), path) {
            Ok(()) => {
                self.steps.reached(LockStep::Linked, path);
                Ok(true)
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(io_err("link lock into place", path)(e)),
        }
    }

    /// Looks at `path` and removes its record if the owner is dead.
    fn clear(&self, path: &Path, me: &OwnerIdentity, depth: usize) -> Result<Clear, LockError> {
        let Some(seen) = self.read(path)? else {
            return Ok(Clear::Gone);
        };
        match classify(&seen.owner, &self.probe.observe(seen.owner.pid)) {
            Ownership::Alive => Ok(Clear::Live(seen.owner)),
            Ownership::Unknown(reason) => Err(LockError::UnknownOwner {
                lock: path.to_owned(),
                owner: seen.owner,
                reason,
            }),
            Ownership::Dead(why) => {
                tracing::warn!(lock = %path.display(), owner = %seen.owner, reason = ?why, outcome = "recovering", "project lock");
                self.remove_dead(path, &seen.nonce, me, depth)
            }
        }
    }

    /// Removes the record carrying `nonce` at `path` (whose owner was seen dead) while holding
    /// the claim on that nonce. See the module doc for why this is race-free.
    fn remove_dead(
        &self,
        path: &Path,
        nonce: &LockNonce,
        me: &OwnerIdentity,
        depth: usize,
    ) -> Result<Clear, LockError> {
        if depth >= MAX_RECOVERY_DEPTH {
            return Err(LockError::RecoveryAbandoned {
                lock: path.to_owned(),
                depth,
            });
        }
        let claim_path = claim_path(path, nonce);
        let claim = self.new_record(me)?;
        loop {
            if self.create(&claim_path, &claim)? {
                let removed = self.remove_if_carries(path, nonce);
                let unclaimed = self.remove_if_carries(&claim_path, &claim.nonce);
                removed?;
                unclaimed?;
                return Ok(Clear::Gone);
            }
            if let live @ Clear::Live(_) = self.clear(&claim_path, me, depth + 1)? {
                return Ok(live);
            }
        }
    }

    /// Unlinks `path` if it carries `nonce`; otherwise leaves it and says what is there.
    fn remove_if_carries(&self, path: &Path, nonce: &LockNonce) -> Result<Released, LockError> {
        match self.read(path)? {
            Some(found) if found.nonce == *nonce => {
                self.steps.reached(LockStep::Checked, path);
                match self.fs.remove_file(path) {
                    Ok(()) => {
                        self.steps.reached(LockStep::Unlinked, path);
                        Ok(Released::Removed)
                    }
                    Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Released::NotHolder(None)),
                    Err(e) => Err(io_err("remove lock", path)(e)),
                }
            }
            found => Ok(Released::NotHolder(found)),
        }
    }

    /// Removes temp files of lock creators that are dead and recovery claims whose holders
    /// are dead (best effort: a failure is logged and leaves the file for a later sweep). A
    /// live creator's temp and a live recoverer's claim are never touched; a claim is removed
    /// by the claim rule one level up, exactly as an acquirer meeting it would.
    fn sweep(&self, me: &OwnerIdentity) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str() else {
                continue;
            };
            if let Some(depth) = claim_depth(name) {
                if let Err(e) = self.clear(&entry.path(), me, depth) {
                    tracing::warn!(claim = %entry.path().display(), error = %e, "recovery claim not cleared");
                }
                continue;
            }
            let Some(creator) = temp_creator(name) else {
                continue;
            };
            let seen = self.probe.observe(creator.pid);
            if matches!(classify(&creator, &seen), Ownership::Dead(_)) {
                if let Err(e) = self.fs.remove_file(&entry.path()) {
                    tracing::warn!(temp = %entry.path().display(), error = %e, "orphan lock temp not removed");
                }
            }
        }
    }
}

/// The claim on removing the record carrying `nonce` at `path`.
fn claim_path(path: &Path, nonce: &LockNonce) -> PathBuf {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(LOCK_FILE);
    let hex = nonce.to_hex();
    path.with_file_name(format!("{name}.recover-{}", &hex[..32]))
}

/// How many claim levels deep `name` is, if it is a recovery claim (`project.lock.recover-…`,
/// one level per `.recover-`); its temps (`.project.lock.recover-….tmp-…`) are not claims.
fn claim_depth(name: &str) -> Option<usize> {
    let rest = name.strip_prefix(LOCK_FILE)?;
    if !rest.starts_with(".recover-") || rest.contains(".tmp-") {
        return None;
    }
    Some(rest.matches(".recover-").count())
}

/// The creator of a lock temp file `.project.lock[.recover-…].<pid>.<start>.<boot>.tmp-<hex>`.
/// The boot is part of the name because start tokens count from boot: a temp left before a
/// reboot must not pass for a live process of this boot with the same pid and start token.
fn temp_creator(name: &str) -> Option<OwnerIdentity> {
    let tagged = name.strip_prefix('.')?.rsplit_once(".tmp-")?.0;
    if !tagged.starts_with(LOCK_FILE) {
        return None;
    }
    let mut parts = tagged.rsplitn(4, '.');
    let boot_id = BootId::parse(parts.next()?).ok()?;
    let start_token = parts.next()?.parse().ok()?;
    let pid = parts.next()?.parse().ok()?;
    Some(OwnerIdentity {
        pid,
        start_token,
        boot_id,
    })
}

/// The held project lock. Dropping it releases it (conditionally, like [`Self::release`]).
#[must_use = "the project lock is released when this guard is dropped"]
#[derive(Debug)]
pub struct ProjectLockGuard {
    lock: ProjectLock,
    record: LockRecord,
    armed: bool,
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

    /// Releases the lock if it still carries this acquisition's nonce; a successor's lock is
    /// never removed.
    pub fn release(mut self) -> Result<Released, LockError> {
        self.armed = false;
        self.release_now()
    }

    fn release_now(&self) -> Result<Released, LockError> {
        let path = self.lock.path();
        let outcome = self.lock.remove_if_carries(&path, &self.record.nonce)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_names_carry_their_creator() {
        let creator = |n| temp_creator(n).map(|o| (o.pid, o.start_token, o.boot_id));
        let boot = BootId::parse("b00f-12").unwrap();
        assert_eq!(
            creator(".project.lock.42.7.b00f-12.tmp-00ff"),
            Some((42, 7, boot.clone()))
        );
        assert_eq!(
            creator(".project.lock.recover-abcd.42.7.b00f-12.tmp-00ff"),
            Some((42, 7, boot))
        );
        assert_eq!(creator(".ledger.snapshot.tmp-00ff"), None);
        assert_eq!(creator("project.lock"), None);
        assert_eq!(creator(".project.lock.x.7.b00f.tmp-00"), None);
        assert_eq!(creator(".project.lock.42.7.NOTHEX.tmp-00"), None);
        // A name without a boot (three fields) is not a creator's: it is left alone.
        assert_eq!(creator(".project.lock.42.7.tmp-00ff"), None);
    }

    #[test]
    fn claim_names_carry_their_depth() {
        assert_eq!(claim_depth("project.lock.recover-ab"), Some(1));
        assert_eq!(claim_depth("project.lock.recover-ab.recover-cd"), Some(2));
        assert_eq!(claim_depth("project.lock"), None);
        assert_eq!(claim_depth(".project.lock.recover-ab.1.2.tmp-00"), None);
        assert_eq!(claim_depth("project.lock.recover-ab.1.2.tmp-00"), None);
        assert_eq!(claim_depth("ledger.snapshot"), None);
    }
}
