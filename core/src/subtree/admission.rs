//! Write admission: from a message's context and target component to "mutate" or "deny".
//!
//! [`admit_write`] decides in a fixed order, and the first failure denies:
//!
//! | step | outcome |
//! |---|---|
//! | no context (legacy frame) | admitted `legacy`, no lock |
//! | context is half-stamped | denied `incomplete-identity` |
//! | target path not derivable | denied `unresolvable-target` |
//! | no lock authority | denied `no-write-guard` |
//! | authority reports a conflict | denied `conflict` (with a copy of the held lock) |
//! | authority cannot answer | denied `authority-unavailable` |
//! | otherwise | admitted `granted` or `reentrant`, lock held until released |
//!
//! A denied write must not mutate anything; [`WriteDenied`] is an error so a host can `?` it.

use super::envelope::AgentContext;
use super::index::{Acquired, LockTable};
use super::lock::{Lock, Writer};
use super::path::{derive_subtree_path, Parent, SubtreePath};

/// Why a write was denied. Nothing was mutated and no lock was taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WriteDenied {
    /// The context lacks a valid agent id or session id.
    #[error("write denied: the writer identity is incomplete (agentId and sessionId required)")]
    IncompleteIdentity,
    /// The target's absolute path cannot be derived (malformed id, not in the tree, cycle, too
    /// deep).
    #[error("write denied: target `{0}` has no resolvable root-to-node path")]
    UnresolvableTarget(String),
    /// An agent write arrived but no lock authority is wired.
    #[error("write denied: no write guard is configured")]
    NoWriteGuard,
    /// Another writer holds an overlapping subtree; the held-lock table is unchanged.
    #[error("write denied: {requested} conflicts with {held}")]
    Conflict {
        /// The lock the write needed.
        requested: Box<Lock>,
        /// A copy of the conflicting held lock.
        held: Box<Lock>,
    },
    /// The authority could not answer (e.g. its state is poisoned); fail closed.
    #[error("write denied: the write guard is unavailable: {0}")]
    AuthorityUnavailable(String),
}

impl WriteDenied {
    /// The reason as a stable kebab-case word, for logs and wire errors.
    pub fn reason(&self) -> &'static str {
        match self {
            WriteDenied::IncompleteIdentity => "incomplete-identity",
            WriteDenied::UnresolvableTarget(_) => "unresolvable-target",
            WriteDenied::NoWriteGuard => "no-write-guard",
            WriteDenied::Conflict { .. } => "conflict",
            WriteDenied::AuthorityUnavailable(_) => "authority-unavailable",
        }
    }
}

/// Why a write was admitted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admitted {
    /// A context-less (non-agent) frame: no lock is involved.
    Legacy,
    /// The lock was newly acquired and is held until released.
    Granted(Lock),
    /// The writer already held a covering subtree.
    Reentrant(Lock),
}

impl Admitted {
    /// The reason as a stable kebab-case word.
    pub fn reason(&self) -> &'static str {
        match self {
            Admitted::Legacy => "legacy",
            Admitted::Granted(_) => "granted",
            Admitted::Reentrant(_) => "reentrant",
        }
    }

    /// The lock the write runs under (`None` for legacy).
    pub fn lock(&self) -> Option<&Lock> {
        match self {
            Admitted::Legacy => None,
            Admitted::Granted(lock) | Admitted::Reentrant(lock) => Some(lock),
        }
    }
}

/// Why a lock authority refused a lock.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refusal {
    /// Another writer holds this overlapping lock (a copy).
    Conflict(Lock),
    /// The authority cannot answer; the request must be denied.
    Unavailable(String),
}

/// The stateful authority [`admit_write`] asks to acquire-and-hold a lock. Implemented for
/// `&mut T` of every [`LockTable`]; the adapters' `WriteGuard` implements it for a shared
/// reference.
pub trait LockAuthority {
    /// Acquires and holds `lock`, or refuses it leaving the held locks unchanged.
    fn acquire(&mut self, lock: Lock) -> Result<Acquired, Refusal>;
}

impl<T: LockTable> LockAuthority for &mut T {
    fn acquire(&mut self, lock: Lock) -> Result<Acquired, Refusal> {
        LockTable::acquire(*self, lock).map_err(|conflict| Refusal::Conflict(conflict.held))
    }
}

/// Builds a lock from raw parts (e.g. a stored or introspected lock): denies a half-stamped
/// writer and a path that is not a valid absolute path in text form.
pub fn normalize_lock(
    agent_id: Option<&str>,
    session_id: Option<&str>,
    subtree_path: &str,
) -> Result<Lock, WriteDenied> {
    let writer = Writer::new(agent_id, session_id).ok_or(WriteDenied::IncompleteIdentity)?;
    let path = SubtreePath::parse(subtree_path)
        .map_err(|_| WriteDenied::UnresolvableTarget(subtree_path.to_owned()))?;
    Ok(Lock { path, writer })
}

/// The lock a write to `component_id` needs: the context's writer over the component's
/// derived absolute path.
pub fn resolve_write_lock<'t>(
    context: &AgentContext,
    component_id: &str,
    parent_of: impl FnMut(&str) -> Parent<'t>,
) -> Result<Lock, WriteDenied> {
    let writer = context.writer().ok_or(WriteDenied::IncompleteIdentity)?;
    let path = derive_subtree_path(component_id, parent_of)
        .ok_or_else(|| WriteDenied::UnresolvableTarget(component_id.to_owned()))?;
    Ok(Lock { path, writer })
}

/// Decides whether a write to `component_id` may mutate, acquiring its lock through
/// `authority` (see the module table for the order of the checks).
pub fn admit_write<'t, A: LockAuthority>(
    context: Option<&AgentContext>,
    component_id: &str,
    parent_of: impl FnMut(&str) -> Parent<'t>,
    authority: Option<A>,
) -> Result<Admitted, WriteDenied> {
    let Some(context) = context else {
        return Ok(Admitted::Legacy);
    };
    let lock = resolve_write_lock(context, component_id, parent_of)?;
    let mut authority = authority.ok_or(WriteDenied::NoWriteGuard)?;
    match authority.acquire(lock.clone()) {
        Ok(Acquired::Granted) => Ok(Admitted::Granted(lock)),
        Ok(Acquired::Reentrant) => Ok(Admitted::Reentrant(lock)),
        Err(Refusal::Conflict(held)) => Err(WriteDenied::Conflict {
            requested: Box::new(lock),
            held: Box::new(held),
        }),
        Err(Refusal::Unavailable(why)) => Err(WriteDenied::AuthorityUnavailable(why)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::subtree::LockIndex;

    fn tree(id: &str) -> Parent<'static> {
        match id {
            "root" => Parent::Root,
            "a" | "b" => Parent::Id("root"),
            "a1" => Parent::Id("a"),
            "loop" => Parent::Id("loop"),
            _ => Parent::Unknown,
        }
    }

    fn context(agent: Option<&str>, session: Option<&str>) -> AgentContext {
        AgentContext {
            agent_id: agent.map(str::to_owned),
            session_id: session.map(str::to_owned),
        }
    }

    fn ok() -> AgentContext {
        context(Some("agent"), Some("s1"))
    }

    #[test]
    fn absent_context_is_legacy_even_without_a_guard() {
        let admitted = admit_write(None, "a", tree, None::<&mut LockIndex>).unwrap();
        assert_eq!(admitted.reason(), "legacy");
        assert_eq!(admitted.lock(), None);
    }

    #[test]
    fn half_stamped_context_is_denied_and_takes_no_lock() {
        let mut index = LockIndex::new();
        for ctx in [
            context(Some("agent"), None),
            context(None, Some("s1")),
            context(Some(""), Some("s1")),
            context(None, None),
        ] {
            let denied = admit_write(Some(&ctx), "a", tree, Some(&mut index)).unwrap_err();
            assert_eq!(denied, WriteDenied::IncompleteIdentity);
        }
        assert!(index.is_empty());
        assert_eq!(
            normalize_lock(Some("agent"), None, "/root"),
            Err(WriteDenied::IncompleteIdentity)
        );
    }

    #[test]
    fn unresolvable_target_is_denied_and_takes_no_lock() {
        let mut index = LockIndex::new();
        for id in ["missing", "loop", "bad/id", ""] {
            let denied = admit_write(Some(&ok()), id, tree, Some(&mut index)).unwrap_err();
            assert_eq!(denied, WriteDenied::UnresolvableTarget(id.to_owned()));
            assert_eq!(denied.reason(), "unresolvable-target");
        }
        assert!(index.is_empty());
        assert!(matches!(
            normalize_lock(Some("agent"), Some("s1"), "root/a"),
            Err(WriteDenied::UnresolvableTarget(_))
        ));
    }

    #[test]
    fn agent_write_without_a_guard_is_denied() {
        let denied = admit_write(Some(&ok()), "a", tree, None::<&mut LockIndex>).unwrap_err();
        assert_eq!(denied, WriteDenied::NoWriteGuard);
    }

    #[test]
    fn cross_writer_overlap_is_denied_with_a_copy_and_no_change() {
        let mut index = LockIndex::new();
        let granted = admit_write(Some(&ok()), "a", tree, Some(&mut index)).unwrap();
        assert_eq!(granted.reason(), "granted");
        let before = index.held();
        let other = context(Some("agent"), Some("s2"));
        let denied = admit_write(Some(&other), "a1", tree, Some(&mut index)).unwrap_err();
        let WriteDenied::Conflict {
            requested,
            mut held,
        } = denied
        else {
            panic!("expected a conflict, got {denied:?}");
        };
        assert_eq!(requested.path.to_string(), "/root/a/a1");
        assert_eq!(*held, before[0]);
        assert_eq!(index.held(), before);
        // The conflict is an owned copy: changing it cannot reach the index.
        held.path = SubtreePath::parse("/elsewhere").unwrap();
        assert_eq!(index.held(), before);
        let sibling = admit_write(Some(&other), "b", tree, Some(&mut index)).unwrap();
        assert_eq!(sibling.reason(), "granted");
    }

    #[test]
    fn same_writer_is_reentrant() {
        let mut index = LockIndex::new();
        admit_write(Some(&ok()), "a", tree, Some(&mut index)).unwrap();
        let again = admit_write(Some(&ok()), "a1", tree, Some(&mut index)).unwrap();
        assert_eq!(again.reason(), "reentrant");
        assert_eq!(index.len(), 1);
    }
}
