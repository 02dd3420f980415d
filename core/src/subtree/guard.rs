//! The held-lock authority's state: the held locks ([`LockIndex`]) plus the disconnect
//! barrier — a tombstone per swept writer — and the atomic acquisition of several locks that a
//! structural move needs. Pure: the adapters' `WriteGuard` is a mutex around a [`GuardState`],
//! and the shuttle model wraps the same value in its own mutex.
//!
//! # The sweep is a barrier
//! [`GuardState::release_writer`] frees every lock of the writer *and* leaves a tombstone, so
//! a write of that writer still in flight (parsed before the disconnect frame, admitted after
//! the sweep) is refused ([`GuardRefusal::Swept`]) instead of taking a lock that no later
//! disconnect frame would ever free. The sweep and the check are each one critical section of
//! the authority, so every acquisition is ordered before the sweep (and freed by it) or after
//! it (and refused).
//!
//! A tombstone lives until [`GuardState::tombstone_capacity`] later sweeps have happened (a
//! bounded FIFO: memory stays at most that many writers, each at most two 256-byte ids). That
//! is safe while a write is in flight for less than that many later disconnects — a write is in
//! flight only between its frame's parse and its admission, one handler call, so with the
//! default capacity ([`DEFAULT_TOMBSTONES`]) 65,536 other sessions would have to disconnect
//! during one handler call. A session id that comes back (a Bridge that reuses them) stays
//! refused while its tombstone lives: the barrier fails closed.

use super::index::{Acquired, LockIndex, LockTable};
use super::lock::{Lock, Writer};
use std::collections::{HashSet, VecDeque};

/// How many swept writers [`GuardState::new`] remembers.
pub const DEFAULT_TOMBSTONES: usize = 65_536;

/// Why the authority refused a lock. The held locks are unchanged. Deliberately exhaustive:
/// every adapter maps each refusal to its own error, and a new refusal must fail their
/// compilation rather than fall into a catch-all arm.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GuardRefusal {
    /// Another writer holds this overlapping lock (a copy).
    #[error("conflicts with {0}")]
    Conflict(Lock),
    /// The writer was swept by a disconnect; it never acquires again.
    #[error("writer {0} was swept by a disconnect")]
    Swept(Writer),
}

/// The held locks and the tombstones of swept writers.
#[derive(Clone, Debug)]
pub struct GuardState {
    index: LockIndex,
    tombstones: HashSet<Writer>,
    order: VecDeque<Writer>,
    capacity: usize,
}

impl Default for GuardState {
    fn default() -> Self {
        Self::new(DEFAULT_TOMBSTONES)
    }
}

impl GuardState {
    /// No lock held; remembers the last `tombstone_capacity` swept writers (0: no barrier,
    /// only for showing that the model catches its absence).
    pub fn new(tombstone_capacity: usize) -> Self {
        GuardState {
            index: LockIndex::new(),
            tombstones: HashSet::new(),
            order: VecDeque::new(),
            capacity: tombstone_capacity,
        }
    }

    /// How many swept writers are remembered.
    pub fn tombstone_capacity(&self) -> usize {
        self.capacity
    }

    /// Acquires and holds `lock` (see [`LockTable::acquire`]), unless its writer was swept.
    pub fn acquire(&mut self, lock: Lock) -> Result<Acquired, GuardRefusal> {
        self.barrier(std::slice::from_ref(&lock))?;
        self.index
            .acquire(lock)
            .map_err(|conflict| GuardRefusal::Conflict(conflict.held))
    }

    /// Acquires every lock of `locks` or none ([`LockTable::acquire_all`]), unless a writer
    /// of them was swept.
    pub fn acquire_all(&mut self, locks: Vec<Lock>) -> Result<Vec<Acquired>, GuardRefusal> {
        self.barrier(&locks)?;
        self.index
            .acquire_all(locks)
            .map_err(|conflict| GuardRefusal::Conflict(conflict.held))
    }

    /// Refuses locks of a swept writer.
    fn barrier(&self, locks: &[Lock]) -> Result<(), GuardRefusal> {
        match locks.iter().find(|l| self.tombstones.contains(&l.writer)) {
            Some(swept) => Err(GuardRefusal::Swept(swept.writer.clone())),
            None => Ok(()),
        }
    }

    /// Releases exactly `lock`. True when it was held.
    pub fn release(&mut self, lock: &Lock) -> bool {
        self.index.release(lock)
    }

    /// The disconnect sweep: frees every lock of `writer` (returned, sorted) and leaves its
    /// tombstone, evicting the oldest beyond the capacity.
    pub fn release_writer(&mut self, writer: &Writer) -> Vec<Lock> {
        if self.capacity > 0 && self.tombstones.insert(writer.clone()) {
            self.order.push_back(writer.clone());
            while self.order.len() > self.capacity {
                if let Some(oldest) = self.order.pop_front() {
                    self.tombstones.remove(&oldest);
                }
            }
        }
        self.index.release_writer(writer)
    }

    /// Every held lock, sorted.
    pub fn held(&self) -> Vec<Lock> {
        self.index.held()
    }

    /// The held lock `lock` would conflict with, if any.
    pub fn conflict(&self, lock: &Lock) -> Option<Lock> {
        self.index.conflict(lock)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::subtree::SubtreePath;

    fn writer(agent: &str) -> Writer {
        Writer::new(Some(agent), Some("s")).unwrap()
    }

    fn lock(agent: &str, path: &str) -> Lock {
        Lock {
            path: SubtreePath::parse(path).unwrap(),
            writer: writer(agent),
        }
    }

    #[test]
    fn a_swept_writer_never_acquires_again_and_others_are_unaffected() {
        let mut state = GuardState::default();
        state.acquire(lock("a", "/r/x")).unwrap();
        assert_eq!(state.release_writer(&writer("a")), vec![lock("a", "/r/x")]);
        assert_eq!(
            state.acquire(lock("a", "/q")),
            Err(GuardRefusal::Swept(writer("a")))
        );
        assert_eq!(state.acquire(lock("b", "/r")), Ok(Acquired::Granted));
        assert_eq!(state.held(), vec![lock("b", "/r")]);
    }

    #[test]
    fn tombstones_are_bounded_oldest_first() {
        let mut state = GuardState::new(2);
        for agent in ["a", "b", "a", "c"] {
            state.release_writer(&writer(agent));
        }
        // "a" was swept twice but remembered once; "c" evicted it.
        assert_eq!(state.tombstones.len(), 2);
        assert_eq!(state.acquire(lock("a", "/r")), Ok(Acquired::Granted));
        for agent in ["b", "c"] {
            assert!(matches!(
                state.acquire(lock(agent, "/q")),
                Err(GuardRefusal::Swept(_))
            ));
        }
    }

    #[test]
    fn acquire_all_is_all_or_nothing() {
        let mut state = GuardState::default();
        state.acquire(lock("b", "/r/y")).unwrap();
        state.acquire(lock("a", "/r/x")).unwrap();
        let before = state.held();
        assert_eq!(
            state.acquire_all(vec![lock("a", "/q"), lock("a", "/r/x/z"), lock("a", "/r")]),
            Err(GuardRefusal::Conflict(lock("b", "/r/y")))
        );
        assert_eq!(state.held(), before, "the granted /q was rolled back");
        assert_eq!(
            state.acquire_all(vec![lock("a", "/q"), lock("a", "/r/x/z")]),
            Ok(vec![Acquired::Granted, Acquired::Reentrant])
        );
    }
}
