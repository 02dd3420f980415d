//! The in-process queue in front of the store's write lock.
//!
//! SQLite's busy handler waits for the write lock by sleeping with back-off (1, 2, 5, 10, …
//! ms), so threads of one process that contend for the lock mostly sleep while it is free:
//! eight publisher threads got a seventeenth of what one gets. Every write transaction of a
//! process first passes this gate — one per database file per process, a mutex and a condition
//! variable — so a waiting thread wakes as soon as the thread before it commits, and SQLite's
//! busy handler only arbitrates between processes. Waiting at the gate is bounded by the
//! store's busy timeout like waiting for SQLite is (`Busy` after it).
//!
//! Lock order: the target lock, then this gate, then SQLite's write lock.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

/// The gate of one database file.
#[derive(Debug, Default)]
pub(crate) struct Gate {
    taken: Mutex<bool>,
    freed: Condvar,
    /// Threads waiting at the gate now (observed by tests).
    waiting: std::sync::atomic::AtomicUsize,
}

/// Passage through a gate; dropping it lets the next thread through.
#[derive(Debug)]
pub(crate) struct Pass {
    gate: Arc<Gate>,
}

impl Gate {
    /// How many threads wait at the gate now (for tests: an event to wait for).
    #[cfg(test)]
    pub(crate) fn waiters(&self) -> usize {
        self.waiting.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The gate of the database at `path` (canonicalized, so that every store of one file in
    /// this process shares it).
    pub(crate) fn of(path: &Path) -> Arc<Gate> {
        static GATES: OnceLock<Mutex<HashMap<PathBuf, Arc<Gate>>>> = OnceLock::new();
        let key = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned());
        let mut gates = GATES
            .get_or_init(Mutex::default)
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        gates.entry(key).or_default().clone()
    }

    /// Waits at most `timeout` to pass; `None` when it stayed taken that long.
    pub(crate) fn enter(self: &Arc<Self>, timeout: Duration) -> Option<Pass> {
        let deadline = Instant::now() + timeout;
        let mut taken = self.taken.lock().unwrap_or_else(PoisonError::into_inner);
        let waiting = &self.waiting;
        while *taken {
            let now = Instant::now();
            if now >= deadline {
                return None;
            }
            waiting.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            taken = self
                .freed
                .wait_timeout(taken, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
            waiting.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        }
        *taken = true;
        Some(Pass { gate: self.clone() })
    }
}

impl Drop for Pass {
    fn drop(&mut self) {
        let mut taken = self
            .gate
            .taken
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *taken = false;
        drop(taken);
        self.gate.freed.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering::SeqCst;

    #[test]
    fn every_store_of_one_database_file_shares_one_gate() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.sqlite");
        std::fs::write(&path, b"").unwrap();
        let other = dir.path().join("other.sqlite");
        std::fs::write(&other, b"").unwrap();
        // Spelled differently, the same file.
        let dotted = dir.path().join(".").join("store.sqlite");
        assert!(Arc::ptr_eq(&Gate::of(&path), &Gate::of(&dotted)));
        assert!(!Arc::ptr_eq(&Gate::of(&path), &Gate::of(&other)));
    }

    #[test]
    fn a_waiter_passes_when_the_holder_leaves_and_not_before() {
        let gate = Arc::new(Gate::default());
        let pass = gate
            .enter(Duration::ZERO)
            .expect("a free gate lets in at once");
        assert!(
            gate.enter(Duration::ZERO).is_none(),
            "a taken gate refuses a zero wait"
        );
        std::thread::scope(|s| {
            let waiter = s.spawn(|| gate.enter(Duration::from_secs(60)).is_some());
            // An event, not a sleep: the waiter is inside the wait.
            while gate.waiting.load(SeqCst) == 0 {
                assert!(
                    !waiter.is_finished(),
                    "the waiter gave up while the gate was taken"
                );
                std::thread::yield_now();
            }
            drop(pass);
            assert!(
                waiter.join().unwrap(),
                "the waiter passed once the holder left"
            );
        });
        assert!(
            gate.enter(Duration::ZERO).is_some(),
            "the waiter's pass was dropped"
        );
    }
}
