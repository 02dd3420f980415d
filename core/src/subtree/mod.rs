//! The subtree write guard (ADR 0021): held-until-release subtree locks keyed on the
//! (agent id, session id) writer, and fail-closed write admission.
//!
//! Only a fully valid, identified, non-conflicting write mutates:
//! - a frame without the agent envelope is legacy; a present but malformed envelope is refused
//!   ([`parse_agent_envelope`]);
//! - a half-stamped writer never holds a lock ([`Writer::new`], [`normalize_lock`],
//!   [`resolve_write_lock`]);
//! - a target whose absolute path cannot be derived is denied ([`derive_subtree_path`]);
//! - an agent write with no lock authority is denied;
//! - a cross-writer overlap is denied, leaves the held locks unchanged and reports a copy of
//!   the held lock ([`admit_write`]).
//!
//! Files: `path` (ids, paths, overlap, derivation in the host's canonical form), `lock`
//! (writer, lock, conflict), `envelope` (Bridge frames), `index` (the held-lock tables),
//! `guard` (the authority's state: held locks and the disconnect barrier), `admission` (the
//! decisions for writes and moves).

mod admission;
mod envelope;
mod guard;
mod index;
mod lock;
mod path;

pub use admission::{
    admit_move, admit_write, normalize_lock, resolve_write_lock, Admitted, LockAuthority,
    MoveAdmitted, Refusal, WriteDenied,
};
pub use envelope::{
    parse_agent_envelope, parse_bridge_frame, AgentContext, BridgeFrame, Envelope, EnvelopeError,
    AGENT_DISCONNECTED, AGENT_MESSAGE, MAX_FRAME_BYTES,
};
pub use guard::{GuardRefusal, GuardState, DEFAULT_TOMBSTONES};
pub use index::{Acquired, Conflict, LinearLockTable, LockIndex, LockTable};
pub use lock::{conflicts, Lock, Writer, MAX_IDENTITY_BYTES};
pub use path::{
    derive_canonical_subtree_path, derive_subtree_path, overlaps, ComponentId, Parent, PathError,
    SubtreePath, MAX_COMPONENT_ID_BYTES, MAX_SUBTREE_DEPTH,
};
