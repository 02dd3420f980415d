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
//! | the writer was swept by a disconnect | denied `writer-disconnected` |
//! | authority cannot answer | denied `authority-unavailable` |
//! | otherwise | admitted `granted` or `reentrant`, lock held until released |
//!
//! Paths are derived in the authority's canonical form ([`LockAuthority::canonical`]), so
//! two spellings of one component are one lock.
//!
//! **Moves.** A structural edit that moves node N from its old path O to under a new parent
//! whose path is P is admitted by [`admit_move`] only when its writer holds or can acquire,
//! in one atomic step, both O (N's whole subtree where it is) and P/N (N's whole subtree where
//! it will be); the writer then holds both until it releases them. So no other writer holds
//! anything overlapping N's subtree at either place: not a lock inside it (which would be
//! carried to a path no lock names), not an ancestor lock at the old place (N leaving that
//! writer's subtree is a write to it) nor at the new one (N entering it is too). After the move
//! every component of N's subtree is covered by the mover's P/N lock and by no other writer's,
//! so two writers are never admitted to one component. A move without an identified writer
//! (a legacy frame) is denied `incomplete-identity`, as is a half-stamped one; a move under
//! N itself or its own subtree is `unresolvable-target`.
//!
//! A denied write must not mutate anything; [`WriteDenied`] is an error so a host can `?` it.

use super::envelope::AgentContext;
use super::guard::{GuardRefusal, GuardState};
use super::index::{Acquired, LockTable};
use super::lock::{Lock, Writer};
use super::path::{derive_canonical_subtree_path, Parent, SubtreePath};

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
    /// The writer was swept by a disconnect; a write of it still in flight is refused.
    #[error("write denied: writer {0} has disconnected")]
    Disconnected(Writer),
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
            WriteDenied::Disconnected(_) => "writer-disconnected",
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
    /// The writer was swept by a disconnect.
    Swept(Writer),
    /// The authority cannot answer; the request must be denied.
    Unavailable(String),
}

impl From<GuardRefusal> for Refusal {
    fn from(refusal: GuardRefusal) -> Self {
        match refusal {
            GuardRefusal::Conflict(held) => Refusal::Conflict(held),
            GuardRefusal::Swept(writer) => Refusal::Swept(writer),
        }
    }
}

/// The stateful authority [`admit_write`] and [`admit_move`] ask to acquire-and-hold locks.
/// Implemented for `&mut T` of every [`LockTable`] and for `&mut GuardState`; the adapters'
/// `WriteGuard` implements it for a shared reference.
pub trait LockAuthority {
    /// Acquires and holds `lock`, or refuses it leaving the held locks unchanged.
    fn acquire(&mut self, lock: Lock) -> Result<Acquired, Refusal>;
    /// Acquires every lock of `locks` or none, in one atomic step.
    fn acquire_all(&mut self, locks: Vec<Lock>) -> Result<Vec<Acquired>, Refusal>;
    /// The canonical form of one component id, in which paths are derived and compared
    /// (unchanged unless the host defines one).
    fn canonical(&self, id: &str) -> String {
        id.to_owned()
    }
}

impl<T: LockTable> LockAuthority for &mut T {
    fn acquire(&mut self, lock: Lock) -> Result<Acquired, Refusal> {
        LockTable::acquire(*self, lock).map_err(|conflict| Refusal::Conflict(conflict.held))
    }
    fn acquire_all(&mut self, locks: Vec<Lock>) -> Result<Vec<Acquired>, Refusal> {
        LockTable::acquire_all(*self, locks).map_err(|conflict| Refusal::Conflict(conflict.held))
    }
}

impl LockAuthority for &mut GuardState {
    fn acquire(&mut self, lock: Lock) -> Result<Acquired, Refusal> {
        GuardState::acquire(self, lock).map_err(Refusal::from)
    }
    fn acquire_all(&mut self, locks: Vec<Lock>) -> Result<Vec<Acquired>, Refusal> {
        GuardState::acquire_all(self, locks).map_err(Refusal::from)
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
/// derived absolute path (segments as spelled).
pub fn resolve_write_lock<'t>(
    context: &AgentContext,
    component_id: &str,
    parent_of: impl FnMut(&str) -> Parent<'t>,
) -> Result<Lock, WriteDenied> {
    resolve_canonical(context, component_id, parent_of, &str::to_owned)
}

fn resolve_canonical<'t>(
    context: &AgentContext,
    component_id: &str,
    parent_of: impl FnMut(&str) -> Parent<'t>,
    canonical: &dyn Fn(&str) -> String,
) -> Result<Lock, WriteDenied> {
    let writer = context.writer().ok_or(WriteDenied::IncompleteIdentity)?;
    let path = derive_canonical_subtree_path(component_id, parent_of, canonical)
        .ok_or_else(|| WriteDenied::UnresolvableTarget(component_id.to_owned()))?;
    Ok(Lock { path, writer })
}

/// The canonical form of `authority`, or the identity without one.
fn canonical_of<A: LockAuthority>(authority: &Option<A>) -> impl Fn(&str) -> String + '_ {
    move |id| match authority {
        Some(authority) => authority.canonical(id),
        None => id.to_owned(),
    }
}

fn denial(lock: Lock, refusal: Refusal) -> WriteDenied {
    match refusal {
        Refusal::Conflict(held) => WriteDenied::Conflict {
            requested: Box::new(lock),
            held: Box::new(held),
        },
        Refusal::Swept(writer) => WriteDenied::Disconnected(writer),
        Refusal::Unavailable(why) => WriteDenied::AuthorityUnavailable(why),
    }
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
    let lock = resolve_canonical(context, component_id, parent_of, &canonical_of(&authority))?;
    let mut authority = authority.ok_or(WriteDenied::NoWriteGuard)?;
    match authority.acquire(lock.clone()) {
        Ok(Acquired::Granted) => Ok(Admitted::Granted(lock)),
        Ok(Acquired::Reentrant) => Ok(Admitted::Reentrant(lock)),
        Err(refusal) => Err(denial(lock, refusal)),
    }
}

/// An admitted move: the writer holds both locks until it releases them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MoveAdmitted {
    /// The moved node's subtree where it was.
    pub from: Lock,
    /// The moved node's subtree where it goes.
    pub to: Lock,
}

/// Decides whether moving `node_id` under `new_parent_id` may mutate the tree (the rule is in
/// the module doc): both paths are derived from the tree *before* the move, in the
/// authority's canonical form, and acquired together or not at all.
pub fn admit_move<'t, A: LockAuthority>(
    context: Option<&AgentContext>,
    node_id: &str,
    new_parent_id: &str,
    mut parent_of: impl FnMut(&str) -> Parent<'t>,
    authority: Option<A>,
) -> Result<MoveAdmitted, WriteDenied> {
    let context = context.ok_or(WriteDenied::IncompleteIdentity)?;
    let (from, parent) = {
        let canonical = canonical_of(&authority);
        (
            resolve_canonical(context, node_id, &mut parent_of, &canonical)?,
            resolve_canonical(context, new_parent_id, &mut parent_of, &canonical)?,
        )
    };
    let node = from.path.components().last().cloned();
    let to = node
        .and_then(|node| {
            let mut components = parent.path.components().to_vec();
            components.push(node);
            SubtreePath::new(components).ok()
        })
        .map(|path| Lock {
            path,
            writer: from.writer.clone(),
        })
        .ok_or_else(|| WriteDenied::UnresolvableTarget(new_parent_id.to_owned()))?;
    let mut authority = authority.ok_or(WriteDenied::NoWriteGuard)?;
    match authority.acquire_all(vec![from.clone(), to.clone()]) {
        Ok(_) => Ok(MoveAdmitted { from, to }),
        Err(refusal) => Err(denial(to, refusal)),
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
    fn a_move_needs_both_places_free_of_other_writers() {
        // root ─┬─ a ── a1
        //       └─ b
        let mut state = GuardState::default();
        let other = context(Some("other"), Some("s1"));
        admit_write(Some(&other), "a", tree, Some(&mut state)).unwrap();
        let before = state.held();
        // Moving a1 out of another writer's subtree, or b into it: denied, nothing taken.
        for (node, parent) in [("a1", "b"), ("b", "a")] {
            let denied = admit_move(Some(&ok()), node, parent, tree, Some(&mut state));
            assert!(
                matches!(denied, Err(WriteDenied::Conflict { .. })),
                "{node} under {parent}: {denied:?}"
            );
            assert_eq!(state.held(), before);
        }
        // Moving a node under its own subtree, or without a writer: denied.
        let mine = context(Some("other"), Some("s1"));
        assert_eq!(
            admit_move(Some(&mine), "a", "a1", tree, Some(&mut state)),
            Err(WriteDenied::UnresolvableTarget("a1".into()))
        );
        assert_eq!(
            admit_move(None, "a1", "b", tree, Some(&mut state)),
            Err(WriteDenied::IncompleteIdentity)
        );
        // The holder moves a1 under b: it now holds both places; b's subtree is its.
        let moved = admit_move(Some(&mine), "a1", "b", tree, Some(&mut state)).unwrap();
        assert_eq!(moved.from.path.to_string(), "/root/a/a1");
        assert_eq!(moved.to.path.to_string(), "/root/b/a1");
        let denied = admit_write(Some(&ok()), "b", tree, Some(&mut state)).unwrap_err();
        assert_eq!(denied.reason(), "conflict");
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
