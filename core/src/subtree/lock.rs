//! The writer pair and the subtree lock.
//!
//! A writer is the (agent id, session id) pair, not the agent id alone: the same agent on two
//! Bridge connections is two writers. A half-stamped pair — either id missing, empty or
//! invalid — is no writer at all, so it can never hold a lock.

use super::path::{overlaps, SubtreePath};
use std::fmt;

/// Largest number of bytes of an agent id or a session id.
pub const MAX_IDENTITY_BYTES: usize = 256;

/// The (agent id, session id) pair that holds locks. Both ids are non-empty, at most
/// [`MAX_IDENTITY_BYTES`] bytes, without control characters.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Writer {
    agent_id: String,
    session_id: String,
}

fn valid_identity(text: &str) -> bool {
    !text.is_empty() && text.len() <= MAX_IDENTITY_BYTES && !text.chars().any(char::is_control)
}

impl Writer {
    /// The writer of a fully stamped pair; `None` when either id is missing or invalid.
    pub fn new(agent_id: Option<&str>, session_id: Option<&str>) -> Option<Writer> {
        match (agent_id, session_id) {
            (Some(agent), Some(session)) if valid_identity(agent) && valid_identity(session) => {
                Some(Writer {
                    agent_id: agent.to_owned(),
                    session_id: session.to_owned(),
                })
            }
            _ => None,
        }
    }

    /// The agent id.
    pub fn agent_id(&self) -> &str {
        &self.agent_id
    }

    /// The session id.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }
}

impl fmt::Display for Writer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}#{}", self.agent_id, self.session_id)
    }
}

/// A subtree lock: `writer` holds `path` and everything below it. Ordered by path, then writer.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Lock {
    /// The subtree held.
    pub path: SubtreePath,
    /// Who holds it.
    pub writer: Writer,
}

impl fmt::Display for Lock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} held by {}", self.path, self.writer)
    }
}

/// True when the two locks cannot both be held: their subtrees overlap and their writers
/// differ. Overlapping locks of one writer do not conflict (re-entrancy).
pub fn conflicts(a: &Lock, b: &Lock) -> bool {
    a.writer != b.writer && overlaps(&a.path, &b.path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lock(agent: &str, session: &str, path: &str) -> Lock {
        Lock {
            path: SubtreePath::parse(path).unwrap(),
            writer: Writer::new(Some(agent), Some(session)).unwrap(),
        }
    }

    #[test]
    fn half_stamped_pair_is_no_writer() {
        assert!(Writer::new(Some("a"), None).is_none());
        assert!(Writer::new(None, Some("s")).is_none());
        assert!(Writer::new(Some(""), Some("s")).is_none());
        assert!(Writer::new(Some("a"), Some("")).is_none());
        assert!(Writer::new(Some("a\n"), Some("s")).is_none());
        let long = "x".repeat(MAX_IDENTITY_BYTES + 1);
        assert!(Writer::new(Some("a"), Some(&long)).is_none());
        assert!(Writer::new(Some("a"), Some("s")).is_some());
    }

    #[test]
    fn conflict_is_overlap_between_different_writers() {
        assert!(conflicts(&lock("a", "1", "/r/x"), &lock("b", "1", "/r")));
        assert!(!conflicts(&lock("a", "1", "/r/x"), &lock("a", "1", "/r")));
        assert!(!conflicts(&lock("a", "1", "/r/x"), &lock("b", "1", "/r/y")));
    }

    #[test]
    fn same_agent_on_two_sessions_is_two_writers() {
        assert!(conflicts(&lock("a", "1", "/r"), &lock("a", "2", "/r")));
    }
}
