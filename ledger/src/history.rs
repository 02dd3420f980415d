//! The reference product read over the Git facts: the first-parent history from some commits,
//! with their hunks if asked. What the `ledger` commands of the CLI and the Node `Ledger`
//! answer, and what the ledger's tests and benchmark read. A host's own reads (list, summary,
//! export, review payloads) are consumers like this one: each runs inside one `demand` (or
//! `build`), so each inherits the demand policy.

use crate::git_source::{commit_fact, hunk_fact};
use crate::{Derive, LedgerError};
use serde::Serialize;
use solewriter_core::ledger::git_facts::{CommitFact, HunkFact, Oid};
use std::collections::HashSet;

/// Which history to read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HistoryQuery {
    /// Where each walk starts (resolved commit ids: refs move, so resolving a name is not a
    /// fact). Each walk follows first parents to a root; a commit is listed once. No heads:
    /// the read asks no fact, so it runs no `git`, reads no snapshot and takes no lock.
    pub heads: Vec<Oid>,
    /// At most this many commits in all (`None`: every one).
    pub limit: Option<usize>,
    /// Whether each commit's hunk facts are read too.
    pub hunks: bool,
}

/// One commit of the history: its history fact, and its hunk facts when they were asked.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct HistoryEntry {
    /// The `commit/<oid>` fact.
    pub commit: CommitFact,
    /// The `hunks/<oid>` fact, when the query asked for hunks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hunks: Option<HunkFact>,
}

/// Reads `query`'s history through `d`: the commits of each head's first-parent chain in
/// order, newest first, each once, at most `limit` in all.
pub fn history(d: &mut Derive<'_>, query: &HistoryQuery) -> Result<Vec<HistoryEntry>, LedgerError> {
    let mut seen = HashSet::new();
    let mut entries = Vec::new();
    for head in &query.heads {
        let mut next = Some(head.clone());
        while let Some(oid) = next {
            if query.limit.is_some_and(|limit| entries.len() >= limit) || !seen.insert(oid.clone())
            {
                break;
            }
            let commit = commit_fact(d, &oid)?;
            let hunks = match query.hunks {
                true => Some(hunk_fact(d, &oid)?),
                false => None,
            };
            next = commit.parents.first().cloned();
            entries.push(HistoryEntry { commit, hunks });
        }
    }
    Ok(entries)
}
