//! The event ledger's pure parts: immutable facts keyed by id, the integrity-checked snapshot
//! format, the derivation that collects one transaction's additions, and the decisions of the
//! build transaction (which snapshot to build on, whether the source interpretation moved,
//! whether to replace the snapshot).
//!
//! A snapshot file is one header line `solewriter-ledger v1 sha256=<hex>` followed by the
//! body: canonical JSON `{"format":1,"interpretation":…,"facts":{…}}`. The hash covers the
//! exact body bytes, so a torn, truncated or edited snapshot is rejected, never half-used.
//! The ledger stores facts, not verdicts: a fact, once recorded, never changes, so a reader
//! that derives a fact itself and a writer that persists it later give the same answer.

pub mod git_facts;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

/// Format version of the snapshot body.
pub const LEDGER_FORMAT: u32 = 1;
/// Header prefix of a version-1 snapshot.
pub const SNAPSHOT_MAGIC: &str = "solewriter-ledger v1 sha256=";
/// How many times the source interpretation may move during one transaction before the
/// transaction fails loudly. One move (say, a configuration edit) is re-derived once.
pub const MAX_INTERPRETATION_MOVES: u32 = 1;
/// Largest snapshot file, in bytes, that is decoded (a reader reads at most one byte more) and
/// that is encoded: a larger file is not a reusable snapshot, so the writer refuses to write
/// one ([`Snapshot::encode`]) rather than write a snapshot every later read would reject.
pub const MAX_SNAPSHOT_BYTES: usize = 64 << 20;

fn bounded_text(text: &str, max: usize, what: &'static str) -> Result<(), LedgerTextError> {
    if text.is_empty() || text.len() > max || text.chars().any(char::is_control) {
        Err(LedgerTextError(what))
    } else {
        Ok(())
    }
}

crate::names::validated_text!(
    /// The key of one immutable fact (e.g. `commit/<oid>`): 1 to 512 bytes, no control
    /// characters.
    FactId,
    LedgerTextError,
    |t| bounded_text(t, 512, "fact id")
);
crate::names::validated_text!(
    /// The identity of how the source is interpreted: everything that changes the source's
    /// answers (for Git: object format, diff settings, git version). Facts derived under one
    /// interpretation are never reused under another. 1 to 256 bytes, no control characters.
    Interpretation,
    LedgerTextError,
    |t| bounded_text(t, 256, "interpretation identity")
);

impl FactId {
    /// Wraps text the caller built within the bounds (ASCII, 1 to 512 bytes, no controls).
    pub(crate) fn from_bounded(text: String) -> Self {
        debug_assert!(FactId::parse(&text).is_ok(), "{text:?}");
        FactId(text)
    }
}

/// An empty, oversized or control-character id.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid {0}: it must be 1 to its bound of bytes without control characters")]
pub struct LedgerTextError(pub &'static str);

/// One complete ledger: an interpretation and the facts derived under it.
#[derive(Clone, Debug, PartialEq)]
pub struct Snapshot {
    /// The interpretation every fact was derived under.
    pub interpretation: Interpretation,
    /// The facts.
    pub facts: BTreeMap<FactId, Value>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Body {
    format: u32,
    interpretation: Interpretation,
    facts: BTreeMap<FactId, Value>,
}

/// Why snapshot bytes are not a reusable snapshot.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SnapshotError {
    /// The header line is missing or not a version-1 header.
    #[error("no version-1 snapshot header")]
    Header,
    /// The body does not match the recorded SHA-256 (torn or edited).
    #[error("body does not match its SHA-256")]
    Integrity,
    /// The body is not a version-1 snapshot body.
    #[error("body is malformed: {0}")]
    Body(String),
    /// The file is larger than its bound, [`MAX_SNAPSHOT_BYTES`] unless a test set another
    /// (`size` counts at most one byte past when reading; it is exact when encoding).
    #[error("snapshot of {size} bytes or more exceeds the bound of {max} bytes")]
    TooLarge {
        /// The size seen.
        size: usize,
        /// The bound.
        max: usize,
    },
}

impl Snapshot {
    /// A snapshot with no facts.
    pub fn empty(interpretation: Interpretation) -> Self {
        Snapshot {
            interpretation,
            facts: BTreeMap::new(),
        }
    }

    /// The file bytes: header with the body's SHA-256, then the body; refused
    /// ([`SnapshotError::TooLarge`]) past [`MAX_SNAPSHOT_BYTES`], which [`Snapshot::decode`]
    /// would reject.
    pub fn encode(&self) -> Result<Vec<u8>, SnapshotError> {
        self.encode_within(MAX_SNAPSHOT_BYTES)
    }

    /// [`Snapshot::encode`] with the bound `max` (the writer and its reader share one bound).
    pub fn encode_within(&self, max: usize) -> Result<Vec<u8>, SnapshotError> {
        let body = Body {
            format: LEDGER_FORMAT,
            interpretation: self.interpretation.clone(),
            facts: self.facts.clone(),
        };
        // Serializing string-keyed maps of JSON values cannot fail; an empty body must never be
        // hashed and published as a valid snapshot, so this is not defaulted.
        let body = serde_json::to_vec(&body).expect("a ledger body always serializes");
        let mut out = format!(
            "{SNAPSHOT_MAGIC}{}\n",
            crate::hex::encode(&Sha256::digest(&body))
        )
        .into_bytes();
        out.extend_from_slice(&body);
        if out.len() > max {
            return Err(SnapshotError::TooLarge {
                size: out.len(),
                max,
            });
        }
        Ok(out)
    }

    /// Checks and parses file bytes: bound ([`MAX_SNAPSHOT_BYTES`]), header, SHA-256 of the
    /// body, then a strict body parse.
    pub fn decode(bytes: &[u8]) -> Result<Self, SnapshotError> {
        Self::decode_within(bytes, MAX_SNAPSHOT_BYTES)
    }

    /// [`Snapshot::decode`] with the bound `max`.
    pub fn decode_within(bytes: &[u8], max: usize) -> Result<Self, SnapshotError> {
        if bytes.len() > max {
            return Err(SnapshotError::TooLarge {
                size: bytes.len(),
                max,
            });
        }
        let newline = bytes
            .iter()
            .position(|&b| b == b'\n')
            .ok_or(SnapshotError::Header)?;
        let (header, body) = (&bytes[..newline], &bytes[newline + 1..]);
        let hash = std::str::from_utf8(header)
            .ok()
            .and_then(|h| h.strip_prefix(SNAPSHOT_MAGIC))
            .and_then(crate::hex::decode32)
            .ok_or(SnapshotError::Header)?;
        if <[u8; 32]>::from(Sha256::digest(body)) != hash {
            return Err(SnapshotError::Integrity);
        }
        let body: Body =
            serde_json::from_slice(body).map_err(|e| SnapshotError::Body(e.to_string()))?;
        if body.format != LEDGER_FORMAT {
            return Err(SnapshotError::Body(format!("format {}", body.format)));
        }
        Ok(Snapshot {
            interpretation: body.interpretation,
            facts: body.facts,
        })
    }
}

/// What a transaction builds on.
#[derive(Clone, Debug, PartialEq)]
pub enum Base {
    /// The stored snapshot, checked and of the current interpretation.
    Reused,
    /// No snapshot exists yet.
    Missing,
    /// The stored snapshot was rejected as reusable; the build starts from no facts.
    Rejected(SnapshotError),
    /// The stored snapshot was derived under another interpretation; it starts from no facts.
    Reinterpreted(Interpretation),
}

/// Chooses the snapshot a transaction builds on, given the current interpretation and what
/// reading the stored snapshot gave.
pub fn choose_base(
    current: &Interpretation,
    stored: Result<Option<Snapshot>, SnapshotError>,
) -> (Snapshot, Base) {
    let empty = || Snapshot::empty(current.clone());
    match stored {
        Ok(Some(s)) if s.interpretation == *current => (s, Base::Reused),
        Ok(Some(s)) => (empty(), Base::Reinterpreted(s.interpretation)),
        Ok(None) => (empty(), Base::Missing),
        Err(e) => (empty(), Base::Rejected(e)),
    }
}

/// A derived fact that contradicts the recorded one (facts are immutable).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("fact {id} was derived as {derived} but the ledger records {recorded}")]
pub struct FactConflict {
    /// The fact.
    pub id: FactId,
    /// What the ledger holds.
    pub recorded: Value,
    /// What was derived.
    pub derived: Value,
}

/// One transaction's view: the base snapshot plus the facts this transaction discovered.
#[derive(Debug)]
pub struct Derivation {
    base: Snapshot,
    added: BTreeMap<FactId, Value>,
}

/// What to do with the stored snapshot at the end of a writer transaction.
#[derive(Debug, PartialEq)]
pub enum CommitPlan {
    /// Nothing to persist: no additions, and the stored snapshot is reusable (or absent).
    Unchanged,
    /// Replace the stored snapshot by this one, atomically, once.
    Replace {
        /// The new snapshot: base facts plus additions.
        snapshot: Snapshot,
        /// How many facts were added.
        added: usize,
    },
}

impl Derivation {
    /// A derivation over `base`.
    pub fn new(base: Snapshot) -> Self {
        Derivation {
            base,
            added: BTreeMap::new(),
        }
    }

    /// The recorded or already-derived fact `id`.
    pub fn get(&self, id: &FactId) -> Option<&Value> {
        self.base.facts.get(id).or_else(|| self.added.get(id))
    }

    /// Records a newly derived fact. Deriving a fact already held is a no-op when equal and a
    /// [`FactConflict`] when different.
    pub fn add(&mut self, id: FactId, value: Value) -> Result<(), FactConflict> {
        match self.get(&id) {
            Some(recorded) if *recorded == value => Ok(()),
            Some(recorded) => Err(FactConflict {
                id,
                recorded: recorded.clone(),
                derived: value,
            }),
            None => {
                self.added.insert(id, value);
                Ok(())
            }
        }
    }

    /// How many facts this derivation added.
    pub fn added(&self) -> usize {
        self.added.len()
    }

    /// The facts this derivation added (to carry them into a derivation over a newer base).
    pub fn into_added(self) -> BTreeMap<FactId, Value> {
        self.added
    }

    /// Whether a writer would replace the stored snapshot: facts were added, or the stored
    /// snapshot was not reusable (rejected, or of another interpretation). A demand read for
    /// which this is false needs nothing from the lock ([`demand_plan`]).
    pub fn must_replace(&self, base: &Base) -> bool {
        !self.added.is_empty() || matches!(base, Base::Rejected(_) | Base::Reinterpreted(_))
    }

    /// The writer's plan: replace when [`Derivation::must_replace`]; otherwise change nothing.
    pub fn commit(self, base: &Base) -> CommitPlan {
        if !self.must_replace(base) {
            return CommitPlan::Unchanged;
        }
        let added = self.added.len();
        let mut snapshot = self.base;
        snapshot.facts.extend(self.added);
        CommitPlan::Replace { snapshot, added }
    }
}

/// What a demand read does once it has derived without the lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DemandPlan {
    /// Answer now; the lock is not consulted. Every asked fact was in a reusable snapshot, or
    /// no fact was asked at all (then neither the source nor the snapshot was read either:
    /// a malformed or reinterpreted snapshot is rebuilt by the next read that needs a fact).
    Answer,
    /// A fact was derived, or the snapshot it was read against is not reusable: try to be the
    /// writer without waiting, and answer from this derivation if a live writer holds the lock.
    TryWrite,
}

/// The demand read's decision: `derived` is its derivation and base, `None` when it asked no
/// fact (its derivation was never opened).
pub fn demand_plan(derived: Option<(&Derivation, &Base)>) -> DemandPlan {
    match derived {
        Some((derivation, base)) if derivation.must_replace(base) => DemandPlan::TryWrite,
        _ => DemandPlan::Answer,
    }
}

/// The interpretation check at the end of a derivation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recheck {
    /// Unchanged: the derivation stands.
    Stable,
    /// Moved once: discard this derivation and derive again under the new interpretation.
    Retry,
    /// Moved again: fail loudly.
    Moved,
}

/// Compares the interpretation before and after a derivation, `moves` being how many times
/// it already moved in this transaction.
pub fn recheck(before: &Interpretation, after: &Interpretation, moves: u32) -> Recheck {
    if before == after {
        Recheck::Stable
    } else if moves < MAX_INTERPRETATION_MOVES {
        Recheck::Retry
    } else {
        Recheck::Moved
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn interp(s: &str) -> Interpretation {
        Interpretation::parse(s).unwrap()
    }

    fn id(s: &str) -> FactId {
        FactId::parse(s).unwrap()
    }

    fn sample() -> Snapshot {
        let mut s = Snapshot::empty(interp("git-1"));
        s.facts.insert(id("commit/a"), json!({"subject": "one"}));
        s
    }

    #[test]
    fn snapshots_round_trip_and_damage_is_rejected() {
        let bytes = sample().encode().unwrap();
        assert_eq!(Snapshot::decode(&bytes), Ok(sample()));
        for cut in 0..bytes.len() {
            assert!(Snapshot::decode(&bytes[..cut]).is_err(), "{cut}");
        }
        let mut flipped = bytes.clone();
        let last = flipped.len() - 2;
        flipped[last] ^= 1;
        assert_eq!(Snapshot::decode(&flipped), Err(SnapshotError::Integrity));
        let text = String::from_utf8(bytes).unwrap();
        let (header, body) = text.split_once('\n').unwrap();
        let rehash = |body: &str| {
            let h = crate::hex::encode(&Sha256::digest(body.as_bytes()));
            format!("{SNAPSHOT_MAGIC}{h}\n{body}").into_bytes()
        };
        for bad in [
            body.replace("\"format\":1", "\"format\":2"),
            format!("{},\"extra\":1}}", &body[..body.len() - 1]),
            body.replace("git-1", ""),
        ] {
            assert!(
                matches!(Snapshot::decode(&rehash(&bad)), Err(SnapshotError::Body(_))),
                "{bad}"
            );
        }
        let v2 = format!("{}\n{body}", header.replace("v1", "v2"));
        assert_eq!(Snapshot::decode(v2.as_bytes()), Err(SnapshotError::Header));
    }

    #[test]
    fn a_demand_writes_only_what_it_derived_or_a_snapshot_it_could_not_reuse() {
        let current = interp("git-1");
        let reused = choose_base(&current, Ok(Some(sample())));
        let rejected = choose_base(&current, Err(SnapshotError::Integrity));
        let plan = |(snapshot, base): &(Snapshot, Base), add: bool| {
            let mut derivation = Derivation::new(snapshot.clone());
            if add {
                derivation.add(id("commit/b"), json!({})).unwrap();
            }
            demand_plan(Some((&derivation, base)))
        };
        assert_eq!(demand_plan(None), DemandPlan::Answer, "asked no fact");
        assert_eq!(plan(&reused, false), DemandPlan::Answer);
        assert_eq!(plan(&reused, true), DemandPlan::TryWrite);
        assert_eq!(plan(&rejected, false), DemandPlan::TryWrite);
        assert_eq!(plan(&rejected, true), DemandPlan::TryWrite);
    }

    #[test]
    fn the_writer_refuses_what_its_reader_would_refuse() {
        let bytes = sample().encode().unwrap();
        let exact = bytes.len();
        assert_eq!(sample().encode_within(exact), Ok(bytes.clone()));
        assert_eq!(Snapshot::decode_within(&bytes, exact), Ok(sample()));
        assert_eq!(
            sample().encode_within(exact - 1),
            Err(SnapshotError::TooLarge {
                size: exact,
                max: exact - 1
            })
        );
        assert_eq!(
            Snapshot::decode_within(&bytes, exact - 1),
            Err(SnapshotError::TooLarge {
                size: exact,
                max: exact - 1
            })
        );
    }

    #[test]
    fn the_base_is_reused_only_when_checked_and_of_this_interpretation() {
        let current = interp("git-1");
        assert_eq!(
            choose_base(&current, Ok(Some(sample()))),
            (sample(), Base::Reused)
        );
        let (s, base) = choose_base(&interp("git-2"), Ok(Some(sample())));
        assert_eq!(
            (s.facts.len(), base),
            (0, Base::Reinterpreted(current.clone()))
        );
        assert_eq!(choose_base(&current, Ok(None)).1, Base::Missing);
        let (s, base) = choose_base(&current, Err(SnapshotError::Integrity));
        assert_eq!(
            (s.facts.len(), base),
            (0, Base::Rejected(SnapshotError::Integrity))
        );
    }

    #[test]
    fn facts_are_immutable_and_commit_replaces_only_when_needed() {
        let mut d = Derivation::new(sample());
        assert_eq!(d.add(id("commit/a"), json!({"subject": "one"})), Ok(()));
        assert!(d.add(id("commit/a"), json!({"subject": "two"})).is_err());
        assert_eq!(d.commit(&Base::Reused), CommitPlan::Unchanged);
        assert!(matches!(
            Derivation::new(sample()).commit(&Base::Rejected(SnapshotError::Header)),
            CommitPlan::Replace { added: 0, .. }
        ));
        let mut d = Derivation::new(sample());
        d.add(id("commit/b"), json!(2)).unwrap();
        assert_eq!(d.get(&id("commit/b")), Some(&json!(2)));
        assert!(d.add(id("commit/b"), json!(3)).is_err());
        let CommitPlan::Replace { snapshot, added } = d.commit(&Base::Reused) else {
            panic!("additions are persisted");
        };
        assert_eq!((snapshot.facts.len(), added), (2, 1));
        let mut d = Derivation::new(sample());
        d.add(id("commit/c"), json!(3)).unwrap();
        assert_eq!(d.into_added(), BTreeMap::from([(id("commit/c"), json!(3))]));
    }

    #[test]
    fn one_interpretation_move_is_retried_a_second_fails() {
        let (a, b) = (interp("a"), interp("b"));
        assert_eq!(recheck(&a, &a, 0), Recheck::Stable);
        assert_eq!(recheck(&a, &b, 0), Recheck::Retry);
        assert_eq!(recheck(&a, &b, MAX_INTERPRETATION_MOVES), Recheck::Moved);
        assert!(FactId::parse("").is_err());
        assert!(FactId::parse("a\nb").is_err());
        assert!(FactId::parse(&"a".repeat(513)).is_err());
    }
}
