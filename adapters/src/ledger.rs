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
//! **Demand** ([`Ledger::demand`]): attempt the build without waiting. If the lock was free,
//! the read was the writer and its new facts are durable. If a live writer holds the lock,
//! run the same derivation against the current snapshot and discard only this read's
//! additions. Never an empty answer: a missing fact is derived from the source. Unknown lock
//! ownership, source failures and repeated interpretation movement are loud. No cache, no
//! background work: a later uncontended read persists what this one discarded.

use crate::atomic_file::{read_bounded, remove_orphans, FileSystem, RealFs, TempFile};
use crate::process::ProcessProbe;
use crate::project_lock::{LockError, ProjectLock, Wait};
use serde_json::Value;
use solewriter_core::ledger::{
    choose_base, recheck, Base, CommitPlan, Derivation, FactConflict, FactId, Interpretation,
    Recheck, Snapshot, SnapshotError, MAX_SNAPSHOT_BYTES,
};
use solewriter_core::ownership::OwnerIdentity;
use std::path::{Path, PathBuf};
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

/// Why a ledger transaction failed. The stored snapshot is the previous complete one unless
/// the variant says otherwise.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LedgerError {
    /// The project lock was not taken (busy after the allowed wait, unknown or malformed
    /// owner, ...). The snapshot was not touched.
    #[error(transparent)]
    Lock(#[from] LockError),
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

/// What became of the facts a transaction derived.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Persisted {
    /// The snapshot was atomically replaced; `added` facts are new (0 when only a malformed or
    /// reinterpreted snapshot was rebuilt).
    Replaced {
        /// Facts added.
        added: usize,
    },
    /// Nothing new: the snapshot was left as it was.
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
/// and added to this transaction.
pub struct Derive<'a> {
    source: &'a dyn Source,
    derivation: Derivation,
}

impl Derive<'_> {
    /// Fact `id`: from the snapshot, from this transaction, or derived from the source now.
    pub fn fact(&mut self, id: &FactId) -> Result<Value, LedgerError> {
        if let Some(value) = self.derivation.get(id) {
            return Ok(value.clone());
        }
        let value = self.source.derive(id)?;
        self.derivation.add(id.clone(), value.clone())?;
        Ok(value)
    }

    /// How many facts this transaction has added so far.
    pub fn added(&self) -> usize {
        self.derivation.added()
    }
}

/// The ledger of one project directory: its snapshot, its project lock and its source.
pub struct Ledger<S> {
    lock: ProjectLock,
    source: S,
}

impl<S: Source> Ledger<S> {
    /// The ledger in project directory `dir` (shared with the project lock), deriving from
    /// `source`, classifying lock owners with `probe`.
    pub fn new(dir: impl Into<PathBuf>, source: S, probe: Arc<dyn ProcessProbe>) -> Self {
        Ledger {
            lock: ProjectLock::new(dir, probe),
            source,
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
        let path = self.snapshot_path();
        match read_bounded(&path, MAX_SNAPSHOT_BYTES) {
            Ok(bytes) => Ok(Snapshot::decode(&bytes).map(Some)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Ok(None)),
            Err(source) => Err(LedgerError::Io {
                step: "read snapshot",
                path,
                source,
            }),
        }
    }

    /// The build transaction, the sole writer: see the module doc. `consume` may run more
    /// than once (a moved interpretation re-derives), so it must not have outside effects.
    pub fn build<T>(
        &self,
        wait: Wait,
        mut consume: impl FnMut(&mut Derive<'_>) -> Result<T, LedgerError>,
    ) -> Result<Outcome<T>, LedgerError> {
        self.build_with(wait, &mut consume)
    }

    /// The demand read: see the module doc.
    pub fn demand<T>(
        &self,
        mut consume: impl FnMut(&mut Derive<'_>) -> Result<T, LedgerError>,
    ) -> Result<Outcome<T>, LedgerError> {
        match self.build_with(Wait::NoWait, &mut consume) {
            Err(LedgerError::Lock(LockError::Busy { owner, .. })) => {
                let (value, derivation, _) = self.derive(&mut consume)?;
                tracing::info!(ledger = %self.snapshot_path().display(), writer = ?owner, discarded = derivation.added(), "demand read beside a live writer");
                Ok(Outcome {
                    value,
                    persisted: Persisted::Discarded {
                        added: derivation.added(),
                        writer: owner,
                    },
                })
            }
            other => other,
        }
    }

    fn build_with<T>(
        &self,
        wait: Wait,
        consume: &mut dyn FnMut(&mut Derive<'_>) -> Result<T, LedgerError>,
    ) -> Result<Outcome<T>, LedgerError> {
        let guard = self.lock.acquire(wait)?;
        let (value, derivation, base) = self.derive(consume)?;
        let persisted = match derivation.commit(&base) {
            CommitPlan::Unchanged => Persisted::Unchanged,
            CommitPlan::Replace { snapshot, added } => {
                self.replace(&snapshot)?;
                tracing::info!(ledger = %self.snapshot_path().display(), added, base = ?base, "ledger snapshot replaced");
                Persisted::Replaced { added }
            }
        };
        guard.release()?;
        Ok(Outcome { value, persisted })
    }

    /// Runs the consumers over the checked snapshot, rechecking the interpretation.
    fn derive<T>(
        &self,
        consume: &mut dyn FnMut(&mut Derive<'_>) -> Result<T, LedgerError>,
    ) -> Result<(T, Derivation, Base), LedgerError> {
        let mut moves = 0;
        loop {
            let before = self.source.interpretation()?;
            let (snapshot, base) = choose_base(&before, self.read_snapshot()?);
            if let Base::Rejected(why) = &base {
                tracing::warn!(ledger = %self.snapshot_path().display(), reason = %why, "ledger snapshot rejected; rebuilding from the source");
            }
            let mut derive = Derive {
                source: &self.source,
                derivation: Derivation::new(snapshot),
            };
            let value = consume(&mut derive)?;
            let after = self.source.interpretation()?;
            match recheck(&before, &after, moves) {
                Recheck::Stable => return Ok((value, derive.derivation, base)),
                Recheck::Retry => {
                    tracing::warn!(%before, %after, "source interpretation moved; deriving again");
                    moves += 1;
                }
                Recheck::Moved => return Err(LedgerError::InterpretationMoved { before, after }),
            }
        }
    }

    /// Replaces the snapshot atomically. Only called while holding the project lock, which
    /// every creator of a snapshot temp also holds, so leftover temps are orphans.
    fn replace(&self, snapshot: &Snapshot) -> Result<(), LedgerError> {
        let dir = self.lock.dir();
        let io = |step, path: &Path| {
            let path = path.to_owned();
            move |source| LedgerError::Io { step, path, source }
        };
        remove_orphans(&RealFs, dir, LEDGER_FILE).map_err(io("remove orphan temps", dir))?;
        let temp = TempFile::write(&RealFs, dir, LEDGER_FILE, &snapshot.encode())
            .map_err(io("write temp snapshot", dir))?;
        let path = temp
            .rename_into_place()
            .map_err(io("rename snapshot into place", &self.snapshot_path()))?;
        RealFs
            .sync_dir(dir)
            .map_err(|source| LedgerError::NotDurable { path, source })
    }
}
