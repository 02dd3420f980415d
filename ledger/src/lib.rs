//! solewriter-ledger: the event ledger, with no SQLite in its dependency tree (the Node binding
//! runs it too), built over the project lock (`solewriter-project-lock`).
//!
//! The event ledger's sole-writer build transaction and the demand read.
//!
//! **Build** ([`Ledger::build`]): take the project lock (waiting as the caller allows), read
//! one complete integrity-checked snapshot, let every nested consumer add facts through
//! [`Derive`], recheck the source interpretation, perform at most one atomic replacement of
//! the snapshot (temp sibling, fsync, rename, directory fsync — the same publisher as
//! `current.json`), release. A malformed snapshot is rejected as reusable and rebuilt from the
//! source; a snapshot of another interpretation is rebuilt; one interpretation move re-derives
//! once, a second fails loudly ([`LedgerError::InterpretationMoved`]).
//!
//! **The replace is fenced.** Immediately before the rename (and before removing orphan
//! temps) the build proves it still holds the project lock ([`ProjectLockGuard::verify`]: the
//! kernel lock file is still the one it holds the `flock` on, and the record still carries its
//! nonce). A lost lock is [`LedgerError::LockLost`] with the snapshot untouched, never
//! [`Persisted::Replaced`]. The release's answer is checked too: a release that finds another
//! record (or none) is [`LedgerError::LockLost`], and a release that fails is
//! [`LedgerError::Release`]; both say whether the snapshot was replaced.
//!
//! **Bounded.** A snapshot larger than the reader's bound ([`MAX_SNAPSHOT_BYTES`]) is refused
//! before anything is written ([`LedgerError::SnapshotTooLarge`]): the writer never writes a
//! snapshot its reader would reject.
//!
//! **Demand** ([`Ledger::demand`]) is lazy and ambient:
//! 1. Nested inside a build of the same ledger directory on the same thread (a consumer of the
//!    build calls `demand`), it joins that build: it adds to the build's derivation (which the
//!    build persists, or discards if it fails) and answers [`Persisted::Joined`]. It never
//!    touches the lock, so it cannot take its own process for a live writer.
//! 2. Otherwise it derives from the current snapshot without the lock. The derivation is
//!    opened by the first fact the consumers ask (the source's interpretation is asked and
//!    the snapshot read then): a demand that asks no fact runs no source (no `git`), reads no
//!    snapshot — a malformed one is left to the next read that needs a fact — and answers
//!    [`Persisted::Unchanged`]. If every needed fact was there (and the snapshot is
//!    reusable), it answers [`Persisted::Unchanged`] too. Either way the lock was not
//!    consulted at all, so a live writer costs nothing.
//! 3. A fact was missing: it tries the build without waiting. Lock free: the read is the
//!    writer; it derives again under the lock over the snapshot as it is now, with the facts
//!    it already derived carried over (same interpretation), and persists them. A live writer
//!    holds it: the answer of step 2 stands and this read's additions are discarded
//!    ([`Persisted::Discarded`]).
//!
//! What can block, and on what: [`Ledger::build`] waits for a live writer as its [`Wait`]
//! allows; [`Ledger::demand`] never waits for one (it tries the lock once, without waiting,
//! and only when it derived a fact); [`Ledger::read_snapshot`] reads one file and takes no
//! lock. Every call runs the source (for Git: `git` processes) as its consumers need facts.
//!
//! Never an empty answer: a missing fact is derived from the source. Unknown lock ownership,
//! source failures and repeated interpretation movement are loud. No cache, no background
//! work: a later uncontended read persists what this one discarded.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod git_source;
pub mod history;

use serde_json::Value;
use solewriter_core::ledger::{
    choose_base, demand_plan, recheck, Base, CommitPlan, DemandPlan, Derivation, FactConflict,
    FactId, Interpretation, Recheck, Snapshot, SnapshotError, MAX_SNAPSHOT_BYTES,
};
use solewriter_core::project_lock::ownership::OwnerIdentity;
use solewriter_core::ErrorKind;
use solewriter_files::atomic_file::{read_bounded, remove_orphans, DirHandle, TempFile};
use solewriter_project_lock::process::ProcessProbe;
use solewriter_project_lock::{LockError, ProjectLock, ProjectLockGuard, Released, Wait};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

/// File name of the snapshot inside the project directory.
pub const LEDGER_FILE: &str = "ledger.snapshot";

/// A source failure: what was asked and what went wrong.
#[derive(Debug, thiserror::Error)]
#[error("source failed to {what}: {detail}")]
pub struct SourceError {
    /// What the source was asked.
    pub what: String,
    /// What went wrong.
    pub detail: String,
}

/// Where facts come from. Deriving the same fact under the same interpretation must always
/// give the same value (facts are immutable).
pub trait Source {
    /// The current interpretation identity: everything that changes the source's answers.
    fn interpretation(&self) -> Result<Interpretation, SourceError>;
    /// Derives fact `id` from the source.
    fn derive(&self, id: &FactId) -> Result<Value, SourceError>;
}

/// What became of the stored snapshot when a transaction failed after deriving.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SnapshotState {
    /// Not touched: it is the previous complete one.
    Untouched,
    /// Atomically replaced by this transaction's snapshot (readers see it).
    Replaced,
}

impl fmt::Display for SnapshotState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SnapshotState::Untouched => "the ledger snapshot was not touched",
            SnapshotState::Replaced => "the ledger snapshot WAS replaced by this build",
        })
    }
}

/// Why a ledger transaction failed. The stored snapshot is the previous complete one unless
/// the variant says otherwise.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LedgerError {
    /// The project lock was not taken (busy after the allowed wait, unknown or malformed
    /// owner, ...). The snapshot was not touched.
    #[error(transparent)]
    Lock(#[from] LockError),
    /// The build lost the project lock: found before the rename (the snapshot was not
    /// touched) or by the release (`snapshot` says whether it was replaced). `source` is
    /// [`LockError::Lost`], or the error that kept the check from reading the lock.
    #[error("the ledger build lost the project lock ({source}); {snapshot}")]
    LockLost {
        /// What became of the snapshot.
        snapshot: SnapshotState,
        /// What the check found.
        #[source]
        source: LockError,
    },
    /// The build's release failed; `snapshot` says whether the snapshot was replaced.
    #[error("releasing the project lock after the ledger build failed ({source}); {snapshot}")]
    Release {
        /// What became of the snapshot.
        snapshot: SnapshotState,
        /// The release's error.
        #[source]
        source: LockError,
    },
    /// The new snapshot would exceed the bound its reader accepts, so it was not written. The
    /// snapshot is the previous complete one; the facts of this build are not persisted.
    #[error("the new ledger snapshot would exceed the bound ({0}); nothing was written, the ledger snapshot is the previous complete one")]
    SnapshotTooLarge(#[source] SnapshotError),
    /// A demand nested inside a build of the same ledger derives under another interpretation
    /// than that build (another source on the same ledger directory). Nothing was added.
    #[error("a demand nested in a ledger build derives under {demand} but the build under {build}; nothing was added")]
    NestedInterpretation {
        /// The enclosing build's interpretation.
        build: Interpretation,
        /// The nested demand's.
        demand: Interpretation,
    },
    /// The source failed. The snapshot was not touched.
    #[error("{0}; the ledger snapshot was not touched")]
    Source(#[from] SourceError),
    /// The source interpretation moved repeatedly during the transaction. The snapshot was
    /// not touched.
    #[error("source interpretation moved repeatedly during the build (last {before} -> {after}); the ledger snapshot was not touched")]
    InterpretationMoved {
        /// The interpretation when the last derivation started.
        before: Interpretation,
        /// The interpretation when it ended.
        after: Interpretation,
    },
    /// A derived fact contradicts the recorded one. The snapshot was not touched.
    #[error("{0}; the ledger snapshot was not touched")]
    Conflict(#[from] FactConflict),
    /// A consumer failed. The snapshot was not touched.
    #[error("ledger consumer failed ({0}); the ledger snapshot was not touched")]
    Consumer(String),
    /// A file-system step failed. The snapshot is the previous complete one.
    #[error("ledger step `{step}` failed on {path}: {source}; the ledger snapshot is the previous complete one")]
    Io {
        /// The step.
        step: &'static str,
        /// The path.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The snapshot was replaced but the directory fsync failed: readers see the new one, but
    /// it may not survive power loss.
    #[error("ledger snapshot {path} was replaced but its directory fsync failed ({source}); it may not survive power loss")]
    NotDurable {
        /// The snapshot path.
        path: PathBuf,
        /// The fsync error.
        #[source]
        source: std::io::Error,
    },
}

impl LedgerError {
    /// Who must act on this error: a lock error is of its own kind; a lost lock is lost
    /// authority; a failed release after the snapshot was replaced, or a snapshot not made
    /// durable, is partial success; an interpretation that kept moving is contention; a
    /// consumer's failure or a nested demand of another interpretation is the caller's input;
    /// everything else an operator must look at.
    pub fn kind(&self) -> ErrorKind {
        match self {
            LedgerError::Lock(lock) => lock.kind(),
            LedgerError::LockLost { .. } => ErrorKind::LostAuthority,
            LedgerError::Release {
                snapshot: SnapshotState::Replaced,
                ..
            }
            | LedgerError::NotDurable { .. } => ErrorKind::PartialSuccess,
            LedgerError::InterpretationMoved { .. } => ErrorKind::Contention,
            LedgerError::Consumer(_) | LedgerError::NestedInterpretation { .. } => ErrorKind::Input,
            LedgerError::Release { .. }
            | LedgerError::SnapshotTooLarge(_)
            | LedgerError::Source(_)
            | LedgerError::Conflict(_)
            | LedgerError::Io { .. } => ErrorKind::Environment,
        }
    }

    /// Whether the same call may succeed if made again later, unchanged: only contention.
    pub fn is_retryable(&self) -> bool {
        self.kind().is_retryable()
    }
}

/// What became of the facts a transaction derived.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Persisted {
    /// The snapshot was atomically replaced; `added` facts are new (0 when only a malformed or
    /// reinterpreted snapshot was rebuilt).
    Replaced {
        /// Facts added.
        added: usize,
    },
    /// Nothing new: the snapshot was left as it was (for a demand read: every fact was there,
    /// and the lock was not consulted).
    Unchanged,
    /// A live writer held the lock: the answer was derived from the current snapshot and this
    /// read's `added` facts were discarded.
    Discarded {
        /// Facts derived and discarded.
        added: usize,
        /// The live writer, as its lock record names it (`None` when the kernel lock was held
        /// with no record written yet, or no longer).
        writer: Option<OwnerIdentity>,
    },
    /// A demand nested inside a build of the same ledger on this thread: its `added` facts
    /// joined that build, which persists them when it succeeds.
    Joined {
        /// Facts this demand added to the build.
        added: usize,
    },
}

/// The stored snapshot as a report shows it: judged without the source and without the lock.
#[derive(Clone, Debug, PartialEq)]
pub enum SnapshotStatus {
    /// There is no snapshot.
    Absent,
    /// A reusable snapshot.
    Reusable {
        /// The interpretation its facts were derived under.
        interpretation: Interpretation,
        /// How many facts it holds.
        facts: usize,
        /// The file's size, of the very bytes judged.
        bytes: usize,
    },
    /// A snapshot that is not reusable (the next read that needs a fact rebuilds it).
    Rejected(SnapshotError),
}

/// The snapshot of project directory `dir` ([`LEDGER_FILE`]), judged as [`Ledger::read_snapshot`]
/// judges it: one bounded read of one file, then the checked decode. No source, no lock,
/// nothing written.
pub fn snapshot_status(dir: &Path) -> Result<SnapshotStatus, LedgerError> {
    Ok(
        match read_stored(&dir.join(LEDGER_FILE), MAX_SNAPSHOT_BYTES)? {
            None => SnapshotStatus::Absent,
            Some((Ok(snapshot), bytes)) => SnapshotStatus::Reusable {
                interpretation: snapshot.interpretation,
                facts: snapshot.facts.len(),
                bytes,
            },
            Some((Err(why), _)) => SnapshotStatus::Rejected(why),
        },
    )
}

/// A stored snapshot as read: its decoding and the number of bytes read.
type Stored = (Result<Snapshot, SnapshotError>, usize);

/// Reads the snapshot at `path` with bound `max`: `None` if there is none. One `read` of one
/// file: a concurrent replacement is seen whole or not at all; at most one byte past `max` is
/// read.
fn read_stored(path: &Path, max: usize) -> Result<Option<Stored>, LedgerError> {
    match read_bounded(path, max) {
        Ok(bytes) => Ok(Some((Snapshot::decode_within(&bytes, max), bytes.len()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(LedgerError::Io {
            step: "read snapshot",
            path: path.to_owned(),
            source,
        }),
    }
}

/// A transaction's answer and what became of its facts.
#[derive(Debug)]
pub struct Outcome<T> {
    /// The consumers' answer.
    pub value: T,
    /// Whether new facts were persisted.
    pub persisted: Persisted,
}

/// The consumers' handle on one derivation: recorded facts, or facts derived from the source
/// and added to this transaction. A demand nested in a build shares the build's derivation.
///
/// A demand's derivation is opened by the first fact its consumers ask: only then are the
/// source's interpretation asked and the snapshot read. So a demand whose consumers ask no
/// fact runs no source (no `git`), reads no snapshot and never consults the lock.
pub struct Derive<'a> {
    source: &'a dyn Source,
    opened: Option<Opened>,
    opener: Option<Opener<'a>>,
    /// Why opening failed: the transaction's error, whatever the consumers made of theirs (a
    /// consumer that swallows it must not turn a failed read into an empty answer).
    failure: Option<LedgerError>,
}

/// A derivation in progress: its facts (shared with nested demands), the interpretation it
/// derives under, and the base it started from (`None` for a nested demand's view of its
/// build's derivation).
struct Opened {
    derivation: Rc<RefCell<Derivation>>,
    interpretation: Interpretation,
    base: Option<Base>,
}

/// Opens a deferred derivation (asks the source, reads the snapshot).
type Opener<'a> = Box<dyn FnOnce() -> Result<Opened, LedgerError> + 'a>;

impl<'a> Derive<'a> {
    fn open(source: &'a dyn Source, opened: Opened) -> Self {
        Derive {
            source,
            opened: Some(opened),
            opener: None,
            failure: None,
        }
    }

    fn deferred(source: &'a dyn Source, opener: Opener<'a>) -> Self {
        Derive {
            source,
            opened: None,
            opener: Some(opener),
            failure: None,
        }
    }

    /// The derivation, opened now if this is the first fact asked.
    fn derivation(&mut self) -> Result<Rc<RefCell<Derivation>>, LedgerError> {
        if let Some(opened) = &self.opened {
            return Ok(Rc::clone(&opened.derivation));
        }
        let opener = self.opener.take().ok_or_else(|| {
            LedgerError::Consumer("a fact was asked after this derivation failed to open".into())
        })?;
        match opener() {
            Ok(opened) => {
                let derivation = Rc::clone(&opened.derivation);
                self.opened = Some(opened);
                Ok(derivation)
            }
            Err(failure) => {
                let told = LedgerError::Consumer(format!("the ledger failed to open: {failure}"));
                self.failure = Some(failure);
                Err(told)
            }
        }
    }

    /// Fact `id`: from the snapshot, from this transaction, or derived from the source now.
    pub fn fact(&mut self, id: &FactId) -> Result<Value, LedgerError> {
        let derivation = self.derivation()?;
        if let Some(value) = derivation.borrow().get(id) {
            return Ok(value.clone());
        }
        let value = self.source.derive(id)?;
        derivation.borrow_mut().add(id.clone(), value.clone())?;
        Ok(value)
    }

    /// The consumers' answer, unless the derivation failed to open: then that failure.
    fn settle<T>(&mut self, answer: Result<T, LedgerError>) -> Result<T, LedgerError> {
        match self.failure.take() {
            Some(failure) => Err(failure),
            None => answer,
        }
    }

    /// How many facts this transaction has added so far.
    pub fn added(&self) -> usize {
        self.opened
            .as_ref()
            .map_or(0, |opened| opened.derivation.borrow().added())
    }
}

/// A build deriving on this thread, which a nested demand on the same directory joins.
struct ActiveBuild {
    dir: PathBuf,
    interpretation: Interpretation,
    derivation: Rc<RefCell<Derivation>>,
}

thread_local! {
    /// The builds deriving on this thread, innermost last.
    static ACTIVE: RefCell<Vec<ActiveBuild>> = const { RefCell::new(Vec::new()) };
}

/// Registers a deriving build for its lifetime (unregistered on return and on unwind).
struct Registration;

impl Registration {
    fn new(build: ActiveBuild) -> Self {
        ACTIVE.with(|active| active.borrow_mut().push(build));
        Registration
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        ACTIVE.with(|active| active.borrow_mut().pop());
    }
}

/// One finished derivation: the consumers' answer and, unless they asked no fact (a demand's
/// derivation is opened by its first fact), what they derived.
struct Derived<T> {
    value: T,
    derived: Option<Finished>,
}

/// A derivation that was opened and whose interpretation held.
struct Finished {
    derivation: Derivation,
    base: Base,
    interpretation: Interpretation,
}

/// Facts a lock-free derivation found, carried into the derivation under the lock.
struct Carried {
    interpretation: Interpretation,
    facts: BTreeMap<FactId, Value>,
}

/// Whether a derivation is the writer's (opened at once, joinable by nested demands) or a
/// demand's lock-free read (opened by its first fact).
#[derive(Clone, Copy)]
enum Mode {
    Writer,
    Reader,
}

/// A consumer of one transaction.
type Consumer<'c, T> = dyn FnMut(&mut Derive<'_>) -> Result<T, LedgerError> + 'c;

/// The ledger of one project directory: its snapshot, its project lock and its source.
pub struct Ledger<S> {
    lock: ProjectLock,
    source: S,
    max_snapshot_bytes: usize,
}

impl<S: Source> Ledger<S> {
    /// The ledger in project directory `dir` (shared with the project lock), deriving from
    /// `source`, classifying lock owners with `probe`.
    pub fn new(dir: impl Into<PathBuf>, source: S, probe: Arc<dyn ProcessProbe>) -> Self {
        Self::with_lock(ProjectLock::new(dir, probe), source)
    }

    /// The ledger in `lock`'s project directory, guarded by `lock` as configured (record-only
    /// mode, a step probe), deriving from `source`.
    pub fn with_lock(lock: ProjectLock, source: S) -> Self {
        Ledger {
            lock,
            source,
            max_snapshot_bytes: MAX_SNAPSHOT_BYTES,
        }
    }

    /// This ledger with snapshot bound `max` instead of [`MAX_SNAPSHOT_BYTES`], for reading
    /// and writing alike. A test seam (a bound small enough to reach), not for production use.
    #[doc(hidden)]
    pub fn with_snapshot_bound(self, max: usize) -> Self {
        Ledger {
            max_snapshot_bytes: max,
            ..self
        }
    }

    /// The project lock.
    pub fn lock(&self) -> &ProjectLock {
        &self.lock
    }

    /// The source.
    pub fn source(&self) -> &S {
        &self.source
    }

    /// The snapshot's path.
    pub fn snapshot_path(&self) -> PathBuf {
        self.lock.dir().join(LEDGER_FILE)
    }

    /// Reads the stored snapshot: `Ok(None)` if there is none, the inner error if it is not a
    /// reusable snapshot. One `read` of one file: a concurrent replacement is seen whole or
    /// not at all. At most one byte past [`MAX_SNAPSHOT_BYTES`] is read.
    pub fn read_snapshot(&self) -> Result<Result<Option<Snapshot>, SnapshotError>, LedgerError> {
        Ok(
            match read_stored(&self.snapshot_path(), self.max_snapshot_bytes)? {
                None => Ok(None),
                Some((decoded, _)) => decoded.map(Some),
            },
        )
    }

    /// The build transaction, the sole writer: see the module doc. `consume` may run more
    /// than once (a moved interpretation re-derives), so it must not have outside effects.
    pub fn build<T>(
        &self,
        wait: Wait,
        mut consume: impl FnMut(&mut Derive<'_>) -> Result<T, LedgerError>,
    ) -> Result<Outcome<T>, LedgerError> {
        let guard = self.lock.acquire(wait)?;
        self.write(guard, &mut consume, None)
    }

    /// The demand read: see the module doc. `consume` may run more than once (once without
    /// the lock, once under it when a fact was missing and the lock was free).
    pub fn demand<T>(
        &self,
        mut consume: impl FnMut(&mut Derive<'_>) -> Result<T, LedgerError>,
    ) -> Result<Outcome<T>, LedgerError> {
        if let Some(joined) = self.join(&mut consume) {
            return joined;
        }
        let read = self.derive(&mut consume, None, Mode::Reader)?;
        let finished = match read.derived {
            Some(finished)
                if demand_plan(Some((&finished.derivation, &finished.base)))
                    == DemandPlan::TryWrite =>
            {
                finished
            }
            _ => {
                return Ok(Outcome {
                    value: read.value,
                    persisted: Persisted::Unchanged,
                })
            }
        };
        match self.lock.acquire(Wait::NoWait) {
            Ok(guard) => {
                let carried = Carried {
                    interpretation: finished.interpretation,
                    facts: finished.derivation.into_added(),
                };
                self.write(guard, &mut consume, Some(carried))
            }
            Err(LockError::Busy { owner, .. }) => {
                let added = finished.derivation.added();
                tracing::info!(ledger = %self.snapshot_path().display(), writer = ?owner, discarded = added, "demand read beside a live writer");
                Ok(Outcome {
                    value: read.value,
                    persisted: Persisted::Discarded {
                        added,
                        writer: owner,
                    },
                })
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The directory as builds register it (resolved, so two spellings of one directory
    /// match; as given when it cannot be resolved).
    fn key(&self) -> PathBuf {
        std::fs::canonicalize(self.lock.dir()).unwrap_or_else(|_| self.lock.dir().to_owned())
    }

    /// Joins a build of this directory deriving on this thread, if there is one. The demand's
    /// interpretation is compared with the build's when its consumers ask their first fact.
    fn join<T>(&self, consume: &mut Consumer<'_, T>) -> Option<Result<Outcome<T>, LedgerError>> {
        let found = ACTIVE.with(|active| {
            let active = active.borrow();
            if active.is_empty() {
                return None;
            }
            let key = self.key();
            active
                .iter()
                .rev()
                .find(|build| build.dir == key)
                .map(|build| (build.interpretation.clone(), Rc::clone(&build.derivation)))
        });
        let (build, derivation) = found?;
        let before = derivation.borrow().added();
        let source: &dyn Source = &self.source;
        let mut derive = Derive::deferred(
            source,
            Box::new(move || {
                let demand = source.interpretation()?;
                if demand != build {
                    return Err(LedgerError::NestedInterpretation { build, demand });
                }
                Ok(Opened {
                    derivation,
                    interpretation: build,
                    base: None,
                })
            }),
        );
        let answer = consume(&mut derive);
        Some(derive.settle(answer).map(|value| Outcome {
            value,
            persisted: Persisted::Joined {
                added: match derive.opened {
                    Some(_) => derive.added() - before,
                    None => 0,
                },
            },
        }))
    }

    /// The writer's part under `guard`: derive (joinable), replace at most once (fenced),
    /// release (checked).
    fn write<T>(
        &self,
        guard: ProjectLockGuard,
        consume: &mut Consumer<'_, T>,
        carried: Option<Carried>,
    ) -> Result<Outcome<T>, LedgerError> {
        let built = self.derive(consume, carried, Mode::Writer)?;
        let (plan, base) = match built.derived {
            Some(finished) => (
                finished.derivation.commit(&finished.base),
                Some(finished.base),
            ),
            None => (CommitPlan::Unchanged, None),
        };
        let (persisted, snapshot) = match plan {
            CommitPlan::Unchanged => (Persisted::Unchanged, SnapshotState::Untouched),
            CommitPlan::Replace { snapshot, added } => {
                self.replace(&guard, &snapshot)?;
                tracing::info!(ledger = %self.snapshot_path().display(), added, ?base, "ledger snapshot replaced");
                (Persisted::Replaced { added }, SnapshotState::Replaced)
            }
        };
        match guard.release() {
            Ok(Released::Removed) => Ok(Outcome {
                value: built.value,
                persisted,
            }),
            Ok(Released::NotHolder(found)) => Err(LedgerError::LockLost {
                snapshot,
                source: LockError::lost(self.lock.path(), found.as_ref()),
            }),
            Err(source) => Err(LedgerError::Release { snapshot, source }),
        }
    }

    /// Opens a derivation: asks the source's interpretation, reads the stored snapshot,
    /// chooses the base and adds the `carried` facts of the same interpretation.
    fn open(&self, carried: Option<&Carried>) -> Result<Opened, LedgerError> {
        let interpretation = self.source.interpretation()?;
        let (snapshot, base) = choose_base(&interpretation, self.read_snapshot()?);
        if let Base::Rejected(why) = &base {
            tracing::warn!(ledger = %self.snapshot_path().display(), reason = %why, "ledger snapshot rejected; rebuilding from the source");
        }
        let mut derivation = Derivation::new(snapshot);
        if let Some(carried) = carried.filter(|c| c.interpretation == interpretation) {
            for (id, value) in &carried.facts {
                derivation.add(id.clone(), value.clone())?;
            }
        }
        Ok(Opened {
            derivation: Rc::new(RefCell::new(derivation)),
            interpretation,
            base: Some(base),
        })
    }

    /// Runs the consumers over the checked snapshot (plus `carried` facts of the same
    /// interpretation), rechecking the interpretation. A [`Mode::Writer`] derivation is opened
    /// at once and a demand nested in its consumers joins it; a [`Mode::Reader`] one is opened
    /// by the first fact asked, and one that asked none touched neither source nor snapshot.
    fn derive<T>(
        &self,
        consume: &mut Consumer<'_, T>,
        carried: Option<Carried>,
        mode: Mode,
    ) -> Result<Derived<T>, LedgerError> {
        let mut moves = 0;
        loop {
            let mut derive = match mode {
                Mode::Writer => Derive::open(&self.source, self.open(carried.as_ref())?),
                Mode::Reader => {
                    Derive::deferred(&self.source, Box::new(|| self.open(carried.as_ref())))
                }
            };
            let value = {
                let _registered = derive.opened.as_ref().map(|opened| {
                    Registration::new(ActiveBuild {
                        dir: self.key(),
                        interpretation: opened.interpretation.clone(),
                        derivation: Rc::clone(&opened.derivation),
                    })
                });
                let answer = consume(&mut derive);
                derive.settle(answer)?
            };
            let Some(Opened {
                derivation,
                interpretation: before,
                base: Some(base),
            }) = derive.opened
            else {
                return Ok(Derived {
                    value,
                    derived: None,
                });
            };
            let derivation = Rc::try_unwrap(derivation)
                .map_err(|_| {
                    LedgerError::Consumer("a nested demand kept the build's derivation".into())
                })?
                .into_inner();
            let after = self.source.interpretation()?;
            match recheck(&before, &after, moves) {
                Recheck::Stable => {
                    return Ok(Derived {
                        value,
                        derived: Some(Finished {
                            derivation,
                            base,
                            interpretation: before,
                        }),
                    })
                }
                Recheck::Retry => {
                    tracing::warn!(%before, %after, "source interpretation moved; deriving again");
                    moves += 1;
                }
                Recheck::Moved => return Err(LedgerError::InterpretationMoved { before, after }),
            }
        }
    }

    /// Replaces the snapshot atomically, refusing one past the bound, and only while `guard`
    /// provably holds the project lock (checked before touching any file and again
    /// immediately before the rename). Every creator of a snapshot temp holds the lock, so
    /// leftover temps are orphans.
    fn replace(&self, guard: &ProjectLockGuard, snapshot: &Snapshot) -> Result<(), LedgerError> {
        let bytes = snapshot
            .encode_within(self.max_snapshot_bytes)
            .map_err(LedgerError::SnapshotTooLarge)?;
        let fenced = || {
            guard.verify().map_err(|source| LedgerError::LockLost {
                snapshot: SnapshotState::Untouched,
                source,
            })
        };
        let dir = self.lock.dir();
        let io = |step, path: &Path| {
            let path = path.to_owned();
            move |source| LedgerError::Io { step, path, source }
        };
        let fs = self.lock.file_system();
        fenced()?;
        // Held once: the sweep, the temp, the rename and the fsync below are all relative to it.
        let held = DirHandle::open_nofollow(dir).map_err(io("open project directory", dir))?;
        remove_orphans(fs, &held, LEDGER_FILE).map_err(io("remove orphan temps", dir))?;
        let temp = TempFile::write(fs, &held, LEDGER_FILE, &bytes)
            .map_err(io("write temp snapshot", dir))?;
        fenced()?;
        let path = temp
            .rename_into_place()
            .map_err(io("rename snapshot into place", &self.snapshot_path()))?;
        fs.sync_dir(&held)
            .map_err(|source| LedgerError::NotDurable { path, source })
    }
}
