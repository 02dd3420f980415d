//! `solewriter ledger …`: the event ledger of a project directory (`solewriter::ledger`) from
//! the command line, over a Git repository, answering the one shared product read — the
//! first-parent history from some revisions, with their hunks if asked
//! (`ledger::history::history`).
//!
//! - `ledger build DIR --repo REPO [--rev REV]… [--limit N] [--hunks] (--wait-ms MS |
//!   --no-wait)`: the sole-writer build transaction (`Ledger::build`) deriving the history's
//!   facts under the project lock, waiting for a live writer exactly as long as told (there
//!   is no default wait). Says what was persisted and how many commits were read.
//! - `ledger read DIR --repo REPO [--rev REV]… [--limit N] [--hunks]`: the demand read
//!   (`Ledger::demand`), which never waits for a live writer. Prints the history and what
//!   became of the facts it derived.
//! - `ledger status DIR`: the stored snapshot (absent, reusable or rejected) and the project
//!   lock as `lock status` reports it ([`crate::lock::report`]). Runs no `git` and writes
//!   nothing; the lock is looked at as `lock status` does (a free kernel lock is taken for the
//!   moment of the look); a missing directory is an error (exit 7).
//!
//! Each `--rev` (default `HEAD`) is resolved to a commit id before the transaction
//! (`GitSource::resolve`: refs move, so a resolved name is not a fact). Every
//! [`LedgerError`] is classed in [`crate::error::classify_ledger`].

use crate::error::{classify_ledger, Class, CliError, CliResult};
use crate::lock::{lock_error, owner_json, report};
use crate::say;
use crate::time::rfc3339;
use serde_json::json;
use solewriter::ledger::history::{history, HistoryEntry, HistoryQuery};
use solewriter::ledger::{
    snapshot_status, GitSource, Ledger, LedgerError, Oid, Persisted, SnapshotStatus, LEDGER_FILE,
};
use solewriter::project_lock::OwnerIdentity;
use solewriter::{Millis, ProjectLock, SystemProbe, Wait};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Arguments of `ledger read`, and of `ledger build` with its wait.
#[derive(clap::Args, Debug)]
pub struct QueryArgs {
    /// The project directory holding `ledger.snapshot` and `project.lock` (created, mode
    /// 0700, when missing).
    dir: PathBuf,
    /// The Git repository the facts are derived from (the repository at or containing this
    /// path).
    #[arg(long, value_name = "REPO")]
    repo: PathBuf,
    /// Where a first-parent walk starts; repeatable, walks in the order given, each commit
    /// listed once (default: `HEAD`). Resolved to a commit id before the transaction.
    #[arg(long = "rev", value_name = "REV")]
    revs: Vec<String>,
    /// At most N commits in all (a whole number greater than zero; default: every one).
    #[arg(long, value_name = "N", value_parser = positive, allow_negative_numbers = true)]
    limit: Option<usize>,
    /// Read each commit's hunk facts too (its changed line ranges per file).
    #[arg(long)]
    hunks: bool,
}

/// Arguments of `ledger build`: the query, and how long to wait for a live writer (required:
/// exactly one of `--wait-ms` and `--no-wait`).
#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("wait").required(true).args(["wait_ms", "no_wait"])))]
pub struct BuildArgs {
    #[command(flatten)]
    query: QueryArgs,
    /// Wait at most MS milliseconds for a live writer to release the project lock (greater
    /// than zero); still held then: exit 6.
    #[arg(long, value_name = "MS", value_parser = positive_ms, allow_negative_numbers = true)]
    wait_ms: Option<u64>,
    /// Do not wait: a live writer holding the project lock is exit 6 at once.
    #[arg(long)]
    no_wait: bool,
}

/// A whole number greater than zero (`--limit`).
fn positive(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err("it must be a whole number greater than zero".into()),
    }
}

/// A whole number of milliseconds greater than zero (`--wait-ms`; `--no-wait` does not wait).
fn positive_ms(text: &str) -> Result<u64, String> {
    match text.parse::<u64>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(
            "it must be a whole number of milliseconds greater than zero (--no-wait does not wait)"
                .into(),
        ),
    }
}

/// `text` on one line: its non-empty lines, trimmed, joined by ` / ` (git may print several).
fn one_line(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .collect::<Vec<_>>()
        .join(" / ")
}

/// The CLI's error for a failed ledger transaction (`verb` is `build` or `read`), of the class
/// [`classify_ledger`] gives it. Every variant is classed deliberately:
///
/// | variant | class (exit) | why |
/// |---|---|---|
/// | `Lock` | as `lock` commands class it ([`lock_error`]): busy 6, others 7 | the project lock was not taken; nothing was written |
/// | `LockLost`, snapshot untouched | lost authority (9) | the build lost its lock before the rename |
/// | `LockLost`, snapshot replaced | partial (13) | replaced, but the release found another record or none |
/// | `Release`, snapshot replaced | partial (13) | replaced, but the release failed |
/// | `Release`, snapshot untouched | io (7) | nothing to persist, and the release failed |
/// | `SnapshotTooLarge` | rejected (5) | the history asked is past the snapshot bound: ask less (`--limit`) |
/// | `NestedInterpretation` | invariant (8) | the CLI never nests a demand in a build |
/// | `Source` | io (7) | a `git` command failed; the message names what git was asked |
/// | `InterpretationMoved` | retry later (6) | the repository's settings moved during the build |
/// | `Conflict` | corrupt document (11) | the snapshot holds a fact git now answers otherwise |
/// | `Consumer` | corrupt document (11) | a stored fact is not of its kind |
/// | `Io` | io (7) | a file-system step failed; the snapshot is the previous one |
/// | `NotDurable` | partial (13) | replaced, but the directory fsync failed |
/// | a variant added later | its kind's class; io (7) for the environment | until it is classed there |
pub fn ledger_error(verb: &str, error: LedgerError) -> CliError {
    let error = match error {
        LedgerError::Lock(lock) => {
            let refused = lock_error(lock);
            return CliError::new(
                refused.class,
                format!(
                    "ledger {verb} did not start: {}",
                    one_line(&refused.message)
                ),
            );
        }
        other => other,
    };
    let class = classify_ledger(&error);
    CliError::new(
        class,
        format!("ledger {verb}: {}", one_line(&error.to_string())),
    )
}

/// An answer the library rules out for this call (a build never discards, nothing here is
/// nested in a build): a broken check, not an outcome to print.
fn ruled_out(verb: &str, persisted: &Persisted) -> CliError {
    CliError::new(
        Class::Invariant,
        format!("ledger {verb} answered {persisted:?}, which its library rules out for it; what it derived may or may not be persisted"),
    )
}

/// The ledger of `args.dir` over `args.repo`, and the history query with every revision
/// resolved (no lock taken, nothing written yet).
fn open(args: &QueryArgs) -> CliResult<(Ledger<GitSource>, HistoryQuery)> {
    let ledger = Ledger::new(&args.dir, GitSource::new(&args.repo), Arc::new(SystemProbe));
    let head = ["HEAD".to_owned()];
    let revs = if args.revs.is_empty() {
        &head[..]
    } else {
        &args.revs[..]
    };
    let heads = revs
        .iter()
        .map(|rev| {
            ledger.source().resolve(rev).map_err(|e| {
                CliError::new(
                    Class::Io,
                    format!(
                        "revision `{rev}` of repository {} not resolved ({}); nothing was read or written",
                        args.repo.display(),
                        one_line(&e.to_string())
                    ),
                )
            })
        })
        .collect::<CliResult<Vec<Oid>>>()?;
    let query = HistoryQuery {
        heads,
        limit: args.limit,
        hunks: args.hunks,
    };
    Ok((ledger, query))
}

/// What became of the facts, as the text line says it (after `ledger P: `).
fn persisted_text(persisted: &str, added: usize, writer: Option<&OwnerIdentity>) -> String {
    match persisted {
        "replaced" => format!("replaced, {added} fact(s) added"),
        "unchanged" => "unchanged, every fact was already there (nothing written)".to_owned(),
        _ => format!(
            "discarded, {added} fact(s) derived and not persisted: a live writer holds the project lock ({}); a later read persists them",
            writer.map_or_else(
                || "no record names it yet, or no longer".to_owned(),
                |owner| format!("owner {owner}")
            )
        ),
    }
}

/// `ledger build`: derives the history's facts under the project lock and persists them.
pub fn build(args: &BuildArgs, json_out: bool) -> CliResult<()> {
    let wait = match args.wait_ms {
        Some(ms) => Wait::Within(Duration::from_millis(ms)),
        None => Wait::NoWait,
    };
    let (ledger, query) = open(&args.query)?;
    let outcome = ledger
        .build(wait, |d| history(d, &query))
        .map_err(|e| ledger_error("build", e))?;
    let (persisted, added) = match outcome.persisted {
        Persisted::Replaced { added } => ("replaced", added),
        Persisted::Unchanged => ("unchanged", 0),
        ref other @ (Persisted::Discarded { .. } | Persisted::Joined { .. }) => {
            return Err(ruled_out("build", other))
        }
    };
    let path = ledger.snapshot_path();
    let commits = outcome.value.len();
    if json_out {
        say!(
            "{}",
            json!({
                "snapshot": path,
                "heads": heads(&query),
                "commits": commits,
                "persisted": persisted,
                "added": added,
            })
        );
    } else {
        say!(
            "ledger {}: {}; {commits} commit(s) read",
            path.display(),
            persisted_text(persisted, added, None)
        );
    }
    Ok(())
}

/// `ledger read`: the demand read of the history; prints it and what became of its facts.
pub fn read(args: &QueryArgs, json_out: bool) -> CliResult<()> {
    let (ledger, query) = open(args)?;
    let outcome = ledger
        .demand(|d| history(d, &query))
        .map_err(|e| ledger_error("read", e))?;
    let (persisted, added, writer) = match outcome.persisted {
        Persisted::Replaced { added } => ("replaced", added, None),
        Persisted::Unchanged => ("unchanged", 0, None),
        Persisted::Discarded { added, writer } => ("discarded", added, writer),
        ref other @ Persisted::Joined { .. } => return Err(ruled_out("read", other)),
    };
    let path = ledger.snapshot_path();
    let entries = outcome.value;
    if json_out {
        say!(
            "{}",
            json!({
                "snapshot": path,
                "heads": heads(&query),
                "commits": entries.len(),
                "persisted": persisted,
                "added": added,
                "writer": writer.as_ref().map(owner_json),
                "history": entries,
            })
        );
        return Ok(());
    }
    for entry in &entries {
        print_entry(entry);
    }
    say!(
        "ledger {}: {}; {} commit(s) read",
        path.display(),
        persisted_text(persisted, added, writer.as_ref()),
        entries.len()
    );
    Ok(())
}

fn heads(query: &HistoryQuery) -> Vec<&str> {
    query.heads.iter().map(Oid::as_str).collect()
}

/// A commit's author time (Git's seconds) as the other commands print times, or the integer
/// when it is before 1970 or beyond what milliseconds hold.
fn author_time(seconds: i64) -> String {
    u64::try_from(seconds)
        .ok()
        .and_then(|s| s.checked_mul(1000))
        .map_or_else(|| seconds.to_string(), |ms| rfc3339(Millis(ms)))
}

/// One commit: `<oid> <author time> <subject>`, then with hunks `  <path>` per file and
/// `    -<old start>,<old lines> +<new start>,<new lines>` per changed range.
fn print_entry(entry: &HistoryEntry) {
    let commit = &entry.commit;
    say!(
        "{} {} {}",
        commit.commit.as_str(),
        author_time(commit.author_time),
        commit.subject
    );
    for file in entry.hunks.iter().flat_map(|h| &h.files) {
        if file.hunks.is_empty() {
            say!("  {} (no line ranges)", file.path);
        } else {
            say!("  {}", file.path);
        }
        for hunk in &file.hunks {
            say!(
                "    -{},{} +{},{}",
                hunk.old_start,
                hunk.old_lines,
                hunk.new_start,
                hunk.new_lines
            );
        }
    }
}

/// `ledger status`: the stored snapshot and the project lock of `dir`, read without `git`,
/// without the lock, writing nothing.
pub fn status(dir: &Path, json_out: bool) -> CliResult<()> {
    // The lock first: a missing or unsafe directory fails here, before anything is read.
    let lock = report(&ProjectLock::new(dir, Arc::new(SystemProbe)))?;
    let path = dir.join(LEDGER_FILE);
    let stored = snapshot_status(dir).map_err(|e| ledger_error("status", e))?;
    let (state, interpretation, facts, bytes, reason) = match &stored {
        SnapshotStatus::Absent => ("absent", None, None, None, None),
        SnapshotStatus::Reusable {
            interpretation,
            facts,
            bytes,
        } => (
            "reusable",
            Some(interpretation.as_str()),
            Some(*facts),
            Some(*bytes),
            None,
        ),
        SnapshotStatus::Rejected(why) => ("rejected", None, None, None, Some(why.to_string())),
    };
    if json_out {
        say!(
            "{}",
            json!({
                "snapshot": {
                    "path": path,
                    "state": state,
                    "interpretation": interpretation,
                    "facts": facts,
                    "bytes": bytes,
                    "reason": reason,
                },
                "lock": lock.json,
            })
        );
        return Ok(());
    }
    match &stored {
        SnapshotStatus::Absent => say!(
            "ledger {}: absent (no snapshot yet: the first build, or read that derives a fact, writes it)",
            path.display()
        ),
        SnapshotStatus::Reusable {
            interpretation,
            facts,
            bytes,
        } => say!(
            "ledger {}: reusable — interpretation {interpretation}, {facts} fact(s), {bytes} bytes",
            path.display(),
        ),
        SnapshotStatus::Rejected(why) => say!(
            "ledger {}: rejected ({why}) — not reused: the next build, or read that derives a fact, rebuilds it from the source",
            path.display()
        ),
    }
    for line in &lock.lines {
        say!("{line}");
    }
    Ok(())
}
