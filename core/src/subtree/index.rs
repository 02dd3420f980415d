//! The held-lock table: [`LockIndex`], a trie over path segments that answers a conflict query
//! in O(path depth), and [`LinearLockTable`], the reference model that answers the same
//! questions by scanning every held lock.
//!
//! Both are pure values behind the [`LockTable`] trait. The stateful authority is a mutex
//! around a `LockIndex`; the model checks wrap the same index in their own mutex, and the
//! property tests and benchmarks compare it against `LinearLockTable`.
//!
//! Rules (identical for both tables):
//! - a request conflicts with a held lock of a *different* writer whose subtree overlaps it;
//!   the reported lock is the smallest such lock (path order, then writer), as a copy;
//! - otherwise, when the same writer already holds an ancestor-or-equal subtree, the request is
//!   re-entrant and nothing is added (re-entrancy is not counted: one release frees the lock);
//! - otherwise the lock is added (a writer may hold several locks, including nested ones).

use super::lock::{conflicts, Lock, Writer};
use super::path::{ComponentId, SubtreePath};
use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Bound;

/// How a lock request was granted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Acquired {
    /// The lock was added to the table.
    Granted,
    /// The writer already held an ancestor-or-equal subtree; nothing was added.
    Reentrant,
}

/// A request was denied because another writer holds an overlapping subtree. The table is
/// unchanged.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("conflicts with {held}")]
pub struct Conflict {
    /// A copy of the conflicting held lock (never a reference into the table).
    pub held: Lock,
}

/// A table of held locks in which no two different writers hold overlapping subtrees.
pub trait LockTable {
    /// Acquire-and-hold: grants, re-enters, or reports a conflict and leaves the table unchanged.
    fn acquire(&mut self, lock: Lock) -> Result<Acquired, Conflict>;
    /// The held lock `lock` would conflict with, if any; the table is not changed.
    fn conflict(&self, lock: &Lock) -> Option<Lock>;
    /// Releases exactly this lock (same writer, same path). True when it was held.
    fn release(&mut self, lock: &Lock) -> bool;
    /// Releases every lock of `writer` (the disconnect sweep) and returns them, sorted.
    fn release_writer(&mut self, writer: &Writer) -> Vec<Lock>;
    /// Every held lock, sorted.
    fn held(&self) -> Vec<Lock>;

    /// Acquires every lock of `locks` or none (one step of the table): on a conflict, the
    /// locks this call granted are released again and the table is as before.
    fn acquire_all(&mut self, locks: Vec<Lock>) -> Result<Vec<Acquired>, Conflict> {
        let mut granted = Vec::new();
        let mut outcomes = Vec::new();
        for lock in locks {
            match self.acquire(lock.clone()) {
                Ok(acquired) => {
                    if acquired == Acquired::Granted {
                        granted.push(lock);
                    }
                    outcomes.push(acquired);
                }
                Err(conflict) => {
                    for lock in &granted {
                        self.release(lock);
                    }
                    return Err(conflict);
                }
            }
        }
        Ok(outcomes)
    }
}

/// One trie node: the writer holding exactly this path, and how many locks of each writer are
/// held strictly below it.
#[derive(Clone, Debug, Default)]
struct Node {
    holder: Option<Writer>,
    below: BTreeMap<Writer, usize>,
    children: HashMap<ComponentId, Node>,
}

impl Node {
    fn is_vacant(&self) -> bool {
        self.holder.is_none() && self.children.is_empty()
    }
}

/// What a request finds in the index.
enum Probe {
    Conflict(Lock),
    Covered,
    Free,
}

/// The indexed held-lock table: a trie over path segments with per-node counts of holders
/// below, plus each writer's paths in order. A conflict query walks the request's path once and
/// then, only if other writers hold locks below it, does one ordered lookup per such writer.
#[derive(Clone, Debug, Default)]
pub struct LockIndex {
    root: Node,
    by_writer: BTreeMap<Writer, BTreeSet<SubtreePath>>,
    len: usize,
}

impl LockIndex {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of held locks.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when no lock is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn probe(&self, lock: &Lock) -> Probe {
        let path = &lock.path;
        let mut node = &self.root;
        for (depth, component) in path.components().iter().enumerate() {
            match node.children.get(component) {
                Some(child) => node = child,
                None => return Probe::Free,
            }
            match &node.holder {
                Some(holder) if *holder != lock.writer => {
                    return Probe::Conflict(Lock {
                        path: path.truncated(depth + 1),
                        writer: holder.clone(),
                    })
                }
                Some(_) => return Probe::Covered,
                None => {}
            }
        }
        node.below
            .keys()
            .filter(|writer| **writer != lock.writer)
            .filter_map(|writer| {
                let paths = self.by_writer.get(writer)?;
                let first = paths
                    .range((Bound::Excluded(path), Bound::Unbounded))
                    .next()
                    .filter(|below| path.contains(below))?;
                Some(Lock {
                    path: first.clone(),
                    writer: writer.clone(),
                })
            })
            .min()
            .map_or(Probe::Free, Probe::Conflict)
    }

    fn insert(&mut self, lock: Lock) {
        let mut node = &mut self.root;
        for component in lock.path.components() {
            *node.below.entry(lock.writer.clone()).or_insert(0) += 1;
            node = node.children.entry(component.clone()).or_default();
        }
        node.holder = Some(lock.writer.clone());
        self.by_writer
            .entry(lock.writer)
            .or_default()
            .insert(lock.path);
        self.len += 1;
    }

    /// Removes `writer`'s lock at `rest` below `node`; prunes vacant nodes on the way back.
    fn remove(node: &mut Node, rest: &[ComponentId], writer: &Writer) -> bool {
        let Some((head, tail)) = rest.split_first() else {
            if node.holder.as_ref() == Some(writer) {
                node.holder = None;
                return true;
            }
            return false;
        };
        let Some(child) = node.children.get_mut(head) else {
            return false;
        };
        if !Self::remove(child, tail, writer) {
            return false;
        }
        if child.is_vacant() {
            node.children.remove(head);
        }
        if let Entry::Occupied(mut count) = node.below.entry(writer.clone()) {
            *count.get_mut() -= 1;
            if *count.get() == 0 {
                count.remove();
            }
        }
        true
    }
}

impl LockTable for LockIndex {
    fn acquire(&mut self, lock: Lock) -> Result<Acquired, Conflict> {
        match self.probe(&lock) {
            Probe::Conflict(held) => Err(Conflict { held }),
            Probe::Covered => Ok(Acquired::Reentrant),
            Probe::Free => {
                self.insert(lock);
                Ok(Acquired::Granted)
            }
        }
    }

    fn conflict(&self, lock: &Lock) -> Option<Lock> {
        match self.probe(lock) {
            Probe::Conflict(held) => Some(held),
            Probe::Covered | Probe::Free => None,
        }
    }

    fn release(&mut self, lock: &Lock) -> bool {
        let Some(paths) = self.by_writer.get_mut(&lock.writer) else {
            return false;
        };
        if !paths.remove(&lock.path) {
            return false;
        }
        if paths.is_empty() {
            self.by_writer.remove(&lock.writer);
        }
        Self::remove(&mut self.root, lock.path.components(), &lock.writer);
        self.len -= 1;
        true
    }

    fn release_writer(&mut self, writer: &Writer) -> Vec<Lock> {
        let Some(paths) = self.by_writer.remove(writer) else {
            return Vec::new();
        };
        paths
            .into_iter()
            .map(|path| {
                Self::remove(&mut self.root, path.components(), writer);
                self.len -= 1;
                Lock {
                    path,
                    writer: writer.clone(),
                }
            })
            .collect()
    }

    fn held(&self) -> Vec<Lock> {
        let mut held: Vec<Lock> = self
            .by_writer
            .iter()
            .flat_map(|(writer, paths)| {
                paths.iter().map(|path| Lock {
                    path: path.clone(),
                    writer: writer.clone(),
                })
            })
            .collect();
        held.sort();
        held
    }
}

/// The reference model: a plain list of held locks, every question answered by scanning all of
/// them. Slow by design; it states the rules in the most direct form.
#[derive(Clone, Debug, Default)]
pub struct LinearLockTable {
    locks: Vec<Lock>,
}

impl LinearLockTable {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }
}

impl LockTable for LinearLockTable {
    fn acquire(&mut self, lock: Lock) -> Result<Acquired, Conflict> {
        if let Some(held) = self.conflict(&lock) {
            return Err(Conflict { held });
        }
        if self
            .locks
            .iter()
            .any(|held| held.writer == lock.writer && held.path.contains(&lock.path))
        {
            return Ok(Acquired::Reentrant);
        }
        self.locks.push(lock);
        Ok(Acquired::Granted)
    }

    fn conflict(&self, lock: &Lock) -> Option<Lock> {
        self.locks
            .iter()
            .filter(|held| conflicts(held, lock))
            .min()
            .cloned()
    }

    fn release(&mut self, lock: &Lock) -> bool {
        let before = self.locks.len();
        self.locks.retain(|held| held != lock);
        self.locks.len() != before
    }

    fn release_writer(&mut self, writer: &Writer) -> Vec<Lock> {
        let (mut freed, kept): (Vec<Lock>, Vec<Lock>) = std::mem::take(&mut self.locks)
            .into_iter()
            .partition(|held| held.writer == *writer);
        self.locks = kept;
        freed.sort();
        freed
    }

    fn held(&self) -> Vec<Lock> {
        let mut held = self.locks.clone();
        held.sort();
        held
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lock(writer: &str, path: &str) -> Lock {
        Lock {
            path: SubtreePath::parse(path).unwrap(),
            writer: Writer::new(Some(writer), Some("s")).unwrap(),
        }
    }

    fn both() -> [Box<dyn LockTable>; 2] {
        [Box::new(LockIndex::new()), Box::new(LinearLockTable::new())]
    }

    #[test]
    fn cross_writer_overlap_is_denied_and_leaves_the_table_unchanged() {
        for mut table in both() {
            table.acquire(lock("a", "/r/x")).unwrap();
            let before = table.held();
            for path in ["/r", "/r/x", "/r/x/y"] {
                let denied = table.acquire(lock("b", path)).unwrap_err();
                assert_eq!(denied.held, lock("a", "/r/x"));
                assert_eq!(table.held(), before);
            }
        }
    }

    #[test]
    fn sibling_with_a_shared_name_prefix_is_not_an_overlap() {
        for mut table in both() {
            table.acquire(lock("a", "/r/b")).unwrap();
            assert_eq!(table.acquire(lock("b", "/r/bc")), Ok(Acquired::Granted));
        }
    }

    #[test]
    fn same_writer_is_reentrant_without_a_duplicate() {
        for mut table in both() {
            assert_eq!(table.acquire(lock("a", "/r")), Ok(Acquired::Granted));
            assert_eq!(table.acquire(lock("a", "/r")), Ok(Acquired::Reentrant));
            assert_eq!(table.acquire(lock("a", "/r/x")), Ok(Acquired::Reentrant));
            assert_eq!(table.held(), vec![lock("a", "/r")]);
            assert!(table.release(&lock("a", "/r")));
            assert!(table.held().is_empty());
        }
    }

    #[test]
    fn conflict_reports_the_smallest_held_lock_below() {
        let mut index = LockIndex::new();
        index.acquire(lock("b", "/r/y/z")).unwrap();
        index.acquire(lock("c", "/r/x")).unwrap();
        index.acquire(lock("a", "/r/w")).unwrap();
        assert_eq!(index.conflict(&lock("a", "/r")), Some(lock("c", "/r/x")));
        assert_eq!(index.conflict(&lock("d", "/r")), Some(lock("a", "/r/w")));
    }

    #[test]
    fn release_frees_only_the_exact_lock_of_its_writer() {
        for mut table in both() {
            table.acquire(lock("a", "/r/x")).unwrap();
            assert!(!table.release(&lock("b", "/r/x")));
            assert!(!table.release(&lock("a", "/r")));
            assert!(table.release(&lock("a", "/r/x")));
            assert!(!table.release(&lock("a", "/r/x")));
            assert_eq!(table.acquire(lock("b", "/r")), Ok(Acquired::Granted));
        }
    }

    #[test]
    fn release_writer_frees_that_writer_only() {
        let mut index = LockIndex::new();
        index.acquire(lock("a", "/r/x")).unwrap();
        index.acquire(lock("a", "/q")).unwrap();
        index.acquire(lock("b", "/r/y")).unwrap();
        let a = Writer::new(Some("a"), Some("s")).unwrap();
        assert_eq!(
            index.release_writer(&a),
            vec![lock("a", "/q"), lock("a", "/r/x")]
        );
        assert_eq!(index.held(), vec![lock("b", "/r/y")]);
        assert_eq!(index.len(), 1);
        assert_eq!(index.conflict(&lock("c", "/r")), Some(lock("b", "/r/y")));
        assert_eq!(index.conflict(&lock("c", "/q")), None);
    }

    #[test]
    fn released_nodes_are_pruned() {
        let mut index = LockIndex::new();
        index.acquire(lock("a", "/r/x/y")).unwrap();
        index.release(&lock("a", "/r/x/y"));
        assert!(index.root.children.is_empty() && index.root.below.is_empty());
        assert!(index.is_empty());
    }
}
