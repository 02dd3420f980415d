//! The per-heap subtree write authority: [`WriteGuard`], a mutex around the core's
//! [`LockIndex`].
//!
//! One `WriteGuard` per shared heap, shared by reference (or `Arc`) across threads. Every
//! operation takes the mutex once, so a conflict check and the insert that follows it are one
//! atomic step. A poisoned mutex fails closed: every operation returns
//! [`GuardError::Poisoned`] and admission denies.

use solewriter_core::subtree::{
    Acquired, Lock, LockAuthority, LockIndex, LockTable, Refusal, Writer,
};
use std::sync::{Mutex, MutexGuard};

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
    /// A thread panicked while holding the guard's mutex; the held-lock table can no longer be
    /// trusted, so nothing is granted or released.
    #[error("the write guard is poisoned (a thread panicked while holding it); nothing changed")]
    Poisoned,
}

/// The held-lock authority of one shared heap. `Send + Sync`.
#[derive(Debug, Default)]
pub struct WriteGuard {
    index: Mutex<LockIndex>,
}

impl WriteGuard {
    /// A guard holding no lock.
    pub fn new() -> Self {
        Self::default()
    }

    fn index(&self) -> Result<MutexGuard<'_, LockIndex>, GuardError> {
        self.index.lock().map_err(|_| GuardError::Poisoned)
    }

    /// Acquires and holds `lock`: granted, re-entrant (same writer, covering subtree: nothing
    /// added), or denied with a copy of the conflicting lock and the table unchanged.
    pub fn acquire(&self, lock: Lock) -> Result<Acquired, GuardError> {
        let outcome = self.index()?.acquire(lock.clone());
        match &outcome {
            Ok(acquired) => tracing::debug!(
                agent = lock.writer.agent_id(),
                session = lock.writer.session_id(),
                path = %lock.path,
                outcome = ?acquired,
                "subtree lock acquired"
            ),
            Err(conflict) => tracing::info!(
                agent = lock.writer.agent_id(),
                session = lock.writer.session_id(),
                path = %lock.path,
                held = %conflict.held,
                "subtree lock denied"
            ),
        }
        outcome.map_err(|conflict| GuardError::Conflict {
            held: Box::new(conflict.held),
        })
    }

    /// Releases exactly `lock` (same writer and path). `Ok(true)` when it was held.
    pub fn release(&self, lock: &Lock) -> Result<bool, GuardError> {
        let released = self.index()?.release(lock);
        tracing::debug!(
            agent = lock.writer.agent_id(),
            session = lock.writer.session_id(),
            path = %lock.path,
            released,
            "subtree lock release"
        );
        Ok(released)
    }

    /// The disconnect sweep: releases every lock of `writer` (agent id *and* session id) and
    /// returns what it freed, sorted. Another session of the same agent keeps its locks.
    pub fn release_writer(&self, writer: &Writer) -> Result<Vec<Lock>, GuardError> {
        let freed = self.index()?.release_writer(writer);
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
        Ok(self.index()?.held())
    }
}

impl LockAuthority for &WriteGuard {
    fn acquire(&mut self, lock: Lock) -> Result<Acquired, Refusal> {
        WriteGuard::acquire(self, lock).map_err(|error| match error {
            GuardError::Conflict { held } => Refusal::Conflict(*held),
            GuardError::Poisoned => Refusal::Unavailable(error.to_string()),
        })
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
            let _held = guard.index.lock();
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
