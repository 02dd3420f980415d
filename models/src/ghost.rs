//! The invariant checker ("ghost state"). The world feeds it from INSIDE the critical
//! section of each action — a commit, a rename, a release, a read — so the order it sees is
//! the order the actions took effect. A broken invariant panics with a message starting
//! with `VIOLATION:`, which the model checkers report together with a replayable schedule.
//!
//! Invariants:
//! - **fenced rename**: a rename is made only by the holder of the lease row (same epoch, same
//!   token hash, state held) as committed — or as the renamer's own open transaction has just
//!   granted it (a one-shot publication) — and never when a higher epoch has committed; so
//!   never after a successor's acquisition committed, and never by a released or fenced lease;
//! - **bounded lease**: every clock reading of the renamer's run before the rename was before its
//!   `expires_at`;
//! - **a document at most one ahead of its row**: a rename never puts a document more than
//!   one epoch above the committed row (only a one-shot's uncommitted grant is ahead), so no
//!   lost commit can leave a document a later grant would refuse as foreign;
//! - **unique, rising publication**: every published document carries an epoch strictly
//!   greater than every document renamed before it — crash or not, one-shot or two-step (so
//!   no epoch names two documents, and a watcher waiting for "newer than N" misses none);
//! - **complete reads**: every read of `current.json` parses as a complete document, and a
//!   reader's successive epochs never decrease;
//! - **no renewal**: every committed grant has `expires_at = acquired_at + ttl`, and a grant's
//!   `expires_at` never changes;
//! - **unique grants**: an epoch is granted once, to one token;
//! - **conditional release**: a release only ever frees the grant whose epoch AND token hash
//!   it presented.

use crate::state::StoreState;
use solewriter_core::projection::channel::{ChannelRecord, DegradedReason};
use solewriter_core::projection::lease::{LeaseRecord, LeaseState};
use solewriter_core::projection::target::TargetId;
use solewriter_core::projection::{ProjectionDocument, StatusReason};
use solewriter_core::time::Millis;
use solewriter_core::token::TokenHash;
use std::collections::BTreeMap;

/// Who renames, as the renamer itself believes.
#[derive(Clone, Copy, Debug)]
pub struct Renamer {
    /// The renamer's grant epoch.
    pub epoch: u64,
    /// Hash of the renamer's token.
    pub token_hash: TokenHash,
    /// The renamer's grant expiry.
    pub expires_at: Millis,
    /// The renamer's latest clock reading before the rename (the largest its run has seen: a
    /// holder that once read its expiry must not rename, even after the clock stepped back).
    pub last_clock: Millis,
}

/// The checker's state: a mirror of the committed lease rows plus the publication history.
#[derive(Debug)]
pub struct Ghost {
    ttl_ms: u64,
    committed: BTreeMap<TargetId, LeaseRecord>,
    last_published: BTreeMap<TargetId, u64>,
    /// Number of renames observed.
    pub renames: u64,
}

/// Reports a broken invariant (panics with `VIOLATION: ...`).
pub(crate) fn violation(message: String) -> ! {
    panic!("VIOLATION: {message}")
}

impl Ghost {
    /// A checker for leases of `ttl_ms`.
    pub fn new(ttl_ms: u64) -> Self {
        Ghost {
            ttl_ms,
            committed: BTreeMap::new(),
            last_published: BTreeMap::new(),
            renames: 0,
        }
    }

    /// A store transaction commits `after`.
    pub fn on_commit(&mut self, after: &StoreState) {
        for (target, row) in &after.leases {
            let before = self.committed.get(target);
            if let Some(grant) = row.state.grant() {
                if grant.expires_at.0 != grant.acquired_at.0.saturating_add(self.ttl_ms) {
                    violation(format!(
                        "lease of {target} epoch {} held past acquired_at + ttl (acquired {}, expires {})",
                        row.fencing_epoch, grant.acquired_at, grant.expires_at
                    ));
                }
                if let Some(prev) = before.filter(|p| p.fencing_epoch == row.fencing_epoch) {
                    let prev_grant = prev.state.grant();
                    let same = prev_grant.is_some_and(|p| {
                        p.holder_token_hash.ct_eq(&grant.holder_token_hash)
                            && p.expires_at == grant.expires_at
                    });
                    if !same {
                        violation(format!(
                            "epoch {} of {target} granted twice or its expiry moved",
                            row.fencing_epoch
                        ));
                    }
                }
            }
            if let Some(prev) = before {
                if row.fencing_epoch < prev.fencing_epoch {
                    violation(format!("fencing epoch of {target} went back"));
                }
            }
        }
        self.committed = after.leases.clone();
    }

    /// `renamer` replaces `current.json` of `target` with a document of `doc_epoch`. `open` is
    /// the target's row as the renamer's own open transaction sees it, if it has one (a
    /// one-shot publication renames under its own, not yet committed, grant).
    pub fn on_rename(
        &mut self,
        target: &TargetId,
        renamer: &Renamer,
        doc_epoch: u64,
        open: Option<&LeaseRecord>,
    ) {
        self.renames += 1;
        let committed = self.committed.get(target);
        let row = open.or(committed);
        let holds = row.is_some_and(|r| {
            r.fencing_epoch == renamer.epoch
                && matches!(&r.state, LeaseState::Held(g) if g.holder_token_hash.ct_eq(&renamer.token_hash))
        }) && committed.is_none_or(|c| c.fencing_epoch <= renamer.epoch);
        if !holds {
            let (epoch, state) = row.map_or((0, "absent"), |r| (r.fencing_epoch, r.state.name()));
            violation(format!(
                "rename by epoch {} while the committed lease is at epoch {epoch} ({state}): a stale, released or fenced holder mutated current.json",
                renamer.epoch
            ));
        }
        if renamer.last_clock >= renamer.expires_at {
            violation(format!(
                "rename by epoch {} after its lease expired (clock {} >= expires_at {})",
                renamer.epoch, renamer.last_clock, renamer.expires_at
            ));
        }
        let row_epoch = committed.map_or(0, |c| c.fencing_epoch);
        if doc_epoch > row_epoch.saturating_add(1) {
            violation(format!(
                "a document of epoch {doc_epoch} renamed while the committed row is at {row_epoch}: two ahead of its row (a lost commit would make the next grant refuse it as foreign)"
            ));
        }
        let last = self
            .last_published
            .insert(target.clone(), doc_epoch)
            .unwrap_or(0);
        if doc_epoch <= last {
            violation(format!(
                "published epoch did not rise: {doc_epoch} renamed over a document of epoch {last}"
            ));
        }
    }

    /// The document `renamed` replaces `current.json` while the renamer's own transaction sees
    /// the channel rows `rows`: it must be composed from exactly those rows (a draft composed
    /// before the transaction and not confirmed against them would publish rows that are no
    /// longer the committed ones).
    pub fn on_rename_rows(&self, renamed: &ProjectionDocument, rows: &[ChannelRecord]) {
        let mut expected: Vec<&ChannelRecord> = rows.iter().collect();
        expected.sort_by(|a, b| a.channel.cmp(&b.channel));
        let composed_from_rows = renamed.channels.len() == expected.len()
            && renamed.channels.iter().zip(&expected).all(|(c, r)| {
                c.channel == r.channel
                    && c.source_watermark == r.source_watermark
                    && c.envelope.as_ref().map(|e| e.get()) == Some(r.envelope_json.as_str())
                    && (c.reason == Some(StatusReason::SourceConflict))
                        == (r.degraded_reason == Some(DegradedReason::SourceConflict))
            });
        if !composed_from_rows {
            let seen = |w: Vec<(String, String)>| format!("{w:?}");
            violation(format!(
                "renamed a document of channels {} while the transaction sees rows {}: not composed from the committed rows",
                seen(renamed.channels.iter().map(|c| (c.channel.to_string(), c.source_watermark.to_string())).collect()),
                seen(expected.iter().map(|r| (r.channel.to_string(), r.source_watermark.to_string())).collect()),
            ));
        }
    }

    /// A release by (`epoch`, `token_hash`) is about to free `row`.
    pub fn on_release(&self, row: &LeaseRecord, epoch: u64, token_hash: &TokenHash) {
        let own = row.fencing_epoch == epoch
            && row
                .state
                .grant()
                .is_some_and(|g| g.holder_token_hash.ct_eq(token_hash));
        if !own {
            violation(format!(
                "a release presenting epoch {epoch} freed the grant at epoch {} it does not hold",
                row.fencing_epoch
            ));
        }
    }
}

/// A reader's view: checks each read and remembers the last epoch it saw.
#[derive(Debug, Default)]
pub struct ReaderCheck {
    last_epoch: Option<u64>,
    /// Distinct epochs this reader observed, in order.
    pub epochs: Vec<u64>,
}

impl ReaderCheck {
    /// Checks one read of `current.json`; `None` means not published yet.
    pub fn observe(&mut self, bytes: Option<&[u8]>) {
        let Some(bytes) = bytes else {
            if self.last_epoch.is_some() {
                violation("current.json disappeared after it was published".into());
            }
            return;
        };
        let doc = ProjectionDocument::parse(bytes).unwrap_or_else(|e| {
            violation(format!("torn or unparseable read of current.json: {e}"))
        });
        if let Some(last) = self.last_epoch {
            if doc.fencing_epoch < last {
                violation(format!(
                    "reader saw epoch {} after {last}",
                    doc.fencing_epoch
                ));
            }
        }
        if self.last_epoch != Some(doc.fencing_epoch) {
            self.epochs.push(doc.fencing_epoch);
        }
        self.last_epoch = Some(doc.fencing_epoch);
    }
}
