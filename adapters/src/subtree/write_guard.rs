//! The per-heap subtree write authority: [`WriteGuard`], a mutex around the core's
//! [`GuardState`] (the held-lock index and the disconnect barrier), with the host's canonical
//! form of component ids.
//!
//! One `WriteGuard` per shared heap, shared by reference (or `Arc`) across threads. Every
//! operation takes the mutex once, so a conflict check and the insert that follows it are one
//! atomic step, and so is a sweep with the tombstone it leaves: a write of the swept writer
//! admitted after [`WriteGuard::release_writer`] is refused ([`GuardError::Disconnected`]),
//! so its lock cannot leak (how long tombstones live: `solewriter_core::subtree::GuardState`).
//! A poisoned mutex fails closed: every operation returns [`GuardError::Poisoned`] and
//! admission denies.

use solewriter_core::subtree::{
    Acquired, GuardRefusal, GuardState, Lock, LockAuthority, Refusal, Writer,
};
use solewriter_core::ErrorKind;
use std::sync::{Arc, Mutex, MutexGuard};

/// Why a write guard operation failed. A failed operation changed nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GuardError {
    /// Another writer holds an overlapping subtree; the held locks are unchanged.
    #[error("lock denied: conflicts with {held}")]
    Conflict {
        /// A copy of the conflicting held lock.
        held: Box<Lock>,
    },
    /// The writer was swept by a disconnect and never acquires again.
    #[error("lock denied: writer {writer} has disconnected")]
    Disconnected {
        /// The swept writer.
        writer: Writer,
    },
    /// A thread panicked while holding the guard's mutex; the held-lock table can no longer be
    /// trusted, so nothing is granted or released.
    #[error("the write guard is poisoned (a thread panicked while holding it); nothing changed")]
    Poisoned,
}

impl GuardError {
    /// Who must act on this error: a conflict is contention (the write may be admitted once
    /// the holder releases), a swept writer has lost its authority, a poisoned guard is for an
    /// operator.
    pub fn kind(&self) -> ErrorKind {
        match self {
            GuardError::Conflict { .. } => ErrorKind::Contention,
            GuardError::Disconnected { .. } => ErrorKind::LostAuthority,
            GuardError::Poisoned => ErrorKind::Environment,
        }
    }

    /// Whether the same call may succeed if made again later, unchanged: only contention.
    pub fn is_retryable(&self) -> bool {
        self.kind().is_retryable()
    }
}

impl From<GuardRefusal> for GuardError {
    fn from(refusal: GuardRefusal) -> Self {
        match refusal {
            GuardRefusal::Conflict(held) => GuardError::Conflict {
                held: Box::new(held),
            },
            GuardRefusal::Swept(writer) => GuardError::Disconnected { writer },
        }
    }
}

/// The host's canonical form of one component id.
type Canonical = Arc<dyn Fn(&str) -> String + Send + Sync>;

/// The held-lock authority of one shared heap. `Send + Sync`.
#[derive(Default)]
pub struct WriteGuard {
    state: Mutex<GuardState>,
    canonical: Option<Canonical>,
}

impl std::fmt::Debug for WriteGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteGuard")
            .field("state", &self.state)
            .field("canonical", &self.canonical.is_some())
            .finish()
    }
}

impl WriteGuard {
    /// A guard holding no lock, comparing component ids as spelled.
    pub fn new() -> Self {
        Self::default()
    }

    /// A guard holding no lock that derives and compares paths with every component id in the
    /// canonical form `canonical` gives (e.g. `str::to_lowercase` for a host whose lookup is
    /// case-insensitive). It must give one form to every spelling the host's lookup takes for
    /// one component, and be idempotent. Locks passed to [`WriteGuard::acquire`] and
    /// [`WriteGuard::release`] by hand must already be in that form; `admit_write` and
    /// `admit_move` derive them so.
    pub fn with_canonical(canonical: impl Fn(&str) -> String + Send + Sync + 'static) -> Self {
        WriteGuard {
            state: Mutex::default(),
            canonical: Some(Arc::new(canonical)),
        }
    }

    fn state(&self) -> Result<MutexGuard<'_, GuardState>, GuardError> {
        self.state.lock().map_err(|_| GuardError::Poisoned)
    }

    /// Acquires and holds `lock`: granted, re-entrant (same writer, covering subtree: nothing
    /// added), or denied with a copy of the conflicting lock (or because its writer was swept)
    /// and the table unchanged.
    pub fn acquire(&self, lock: Lock) -> Result<Acquired, GuardError> {
        let outcome = self.state()?.acquire(lock.clone());
        match &outcome {
            Ok(acquired) => tracing::debug!(
                agent = lock.writer.agent_id(),
                session = lock.writer.session_id(),
                path = %lock.path,
                outcome = ?acquired,
                "subtree lock acquired"
            ),
            Err(refusal) => tracing::info!(
                agent = lock.writer.agent_id(),
                session = lock.writer.session_id(),
                path = %lock.path,
                %refusal,
                "subtree lock denied"
            ),
        }
        outcome.map_err(GuardError::from)
    }

    /// Releases exactly `lock` (same writer and path). `Ok(true)` when it was held.
    pub fn release(&self, lock: &Lock) -> Result<bool, GuardError> {
        let released = self.state()?.release(lock);
        tracing::debug!(
            agent = lock.writer.agent_id(),
            session = lock.writer.session_id(),
            path = %lock.path,
            released,
            "subtree lock release"
        );
        Ok(released)
    }

    /// The disconnect sweep: releases every lock of `writer` (agent id *and* session id),
    /// returns what it freed, sorted, and bars the writer from acquiring again. Another
    /// session of the same agent keeps its locks.
    pub fn release_writer(&self, writer: &Writer) -> Result<Vec<Lock>, GuardError> {
        let freed = self.state()?.release_writer(writer);
        tracing::info!(
            agent = writer.agent_id(),
            session = writer.session_id(),
            freed = freed.len(),
            "writer swept"
        );
        Ok(freed)
    }

    /// A copy of every held lock, sorted (introspection).
    pub fn snapshot(&self) -> Result<Vec<Lock>, GuardError> {
        Ok(self.state()?.held())
    }
}

fn refusal(error: GuardError) -> Refusal {
    match error {
        GuardError::Conflict { held } => Refusal::Conflict(*held),
        GuardError::Disconnected { writer } => Refusal::Swept(writer),
        GuardError::Poisoned => Refusal::Unavailable(error.to_string()),
    }
}

impl LockAuthority for &WriteGuard {
    fn acquire(&mut self, lock: Lock) -> Result<Acquired, Refusal> {
        WriteGuard::acquire(self, lock).map_err(refusal)
    }

    fn acquire_all(&mut self, locks: Vec<Lock>) -> Result<Vec<Acquired>, Refusal> {
        let mut state = self.state().map_err(refusal)?;
        state
            .acquire_all(locks)
            .map_err(|r| refusal(GuardError::from(r)))
    }

    fn canonical(&self, id: &str) -> String {
        match &self.canonical {
            Some(canonical) => canonical(id),
            None => id.to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use solewriter_core::subtree::{admit_write, AgentContext, Parent, SubtreePath, WriteDenied};

    fn lock(agent: &str, path: &str) -> Lock {
        Lock {
            path: SubtreePath::parse(path).unwrap(),
            writer: Writer::new(Some(agent), Some("s")).unwrap(),
        }
    }

    fn poisoned() -> WriteGuard {
        let guard = WriteGuard::new();
        guard.acquire(lock("a", "/r")).unwrap();
        let poison = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _held = guard.state.lock();
            panic!("poison the guard");
        }));
        assert!(poison.is_err());
        guard
    }

    #[test]
    fn poisoned_guard_fails_closed() {
        let guard = poisoned();
        assert_eq!(guard.acquire(lock("b", "/q")), Err(GuardError::Poisoned));
        assert_eq!(guard.release(&lock("a", "/r")), Err(GuardError::Poisoned));
        let a = Writer::new(Some("a"), Some("s")).unwrap();
        assert_eq!(guard.release_writer(&a), Err(GuardError::Poisoned));
        assert_eq!(guard.snapshot(), Err(GuardError::Poisoned));
    }

    #[test]
    fn poisoned_guard_denies_admission() {
        let guard = poisoned();
        let context = AgentContext {
            agent_id: Some("b".into()),
            session_id: Some("s".into()),
        };
        let root = |_: &str| Parent::Root;
        let denied = admit_write(Some(&context), "q", root, Some(&guard)).unwrap_err();
        assert!(matches!(denied, WriteDenied::AuthorityUnavailable(_)));
        assert_eq!(denied.reason(), "authority-unavailable");
    }
}
