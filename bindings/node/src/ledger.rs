//! The event ledger for Node (seed 003): `solewriter_ledger::Ledger` over the Git source
//! (the same code the Rust API and `solewriter ledger …` run) with the system process probe,
//! answering the shared history read (`solewriter_ledger::history`).
//!
//! JSON shapes: a query is `{heads: [oid…], limit?: n, hunks?: bool}` (`build` adds its
//! `wait`, as the project lock's `acquire` takes it); an answer is `{history: [{commit,
//! hunks?}…], persisted}` with the facts as the ledger stores them, and `persisted` one of
//! `{state: "replaced", added}`, `{state: "unchanged"}`, `{state: "discarded", added,
//! writer}` (`writer`: the live writer's owner identity, or null); `joined` cannot reach JS (a
//! nested demand is a Rust consumer's). Every [`LedgerError`] is an error with its own code.

use super::boundary::{answer, caught};
use super::failure::{invalid, Code, Failure, JsAnswer};
use super::from_js;
use super::project_lock::{lock_failure, owner_json, parse_wait, status_json};
use napi::bindgen_prelude::AsyncTask;
use napi::{Env, Task};
use napi_derive::napi;
use serde_json::{json, Value};
use solewriter_core::ledger::git_facts::Oid;
use solewriter_ledger::git_source::GitSource;
use solewriter_ledger::history::{history, HistoryEntry, HistoryQuery};
use solewriter_ledger::{
    snapshot_status, Ledger, LedgerError, Outcome, Persisted, SnapshotState, SnapshotStatus,
};
use solewriter_project_lock::process::SystemProbe;
use solewriter_project_lock::ProjectLock;
use std::sync::Arc;

fn snapshot_name(state: &SnapshotState) -> &'static str {
    match state {
        SnapshotState::Untouched => "untouched",
        SnapshotState::Replaced => "replaced",
    }
}

/// The error of a failed ledger call: one code per [`LedgerError`] kind.
fn ledger_failure(error: LedgerError) -> Failure {
    let error = match error {
        LedgerError::Lock(lock) => return lock_failure(lock),
        other => other,
    };
    let (code, detail) = match &error {
        LedgerError::LockLost { snapshot, .. } => {
            (Code::LockLost, json!({"snapshot": snapshot_name(snapshot)}))
        }
        LedgerError::Release { snapshot, .. } => (
            Code::ReleaseFailed,
            json!({"snapshot": snapshot_name(snapshot)}),
        ),
        LedgerError::SnapshotTooLarge(_) => (Code::SnapshotTooLarge, Value::Null),
        LedgerError::Source(source) => (Code::Source, json!({"what": source.what})),
        LedgerError::InterpretationMoved { before, after } => (
            Code::InterpretationMoved,
            json!({"before": before.as_str(), "after": after.as_str()}),
        ),
        LedgerError::Conflict(conflict) => {
            (Code::FactConflict, json!({"id": conflict.id.as_str()}))
        }
        LedgerError::Consumer(_) => (Code::Consumer, Value::Null),
        LedgerError::Io { step, path, .. } => (
            Code::Io,
            json!({"step": step, "path": path.to_string_lossy()}),
        ),
        LedgerError::NotDurable { path, .. } => {
            (Code::NotDurable, json!({"path": path.to_string_lossy()}))
        }
        _ => (Code::Ledger, Value::Null),
    };
    let kind = error.kind();
    Failure::new(code, &error).with(detail).of_kind(kind)
}

fn persisted_json(persisted: &Persisted) -> Value {
    match persisted {
        Persisted::Replaced { added } => json!({"state": "replaced", "added": added}),
        Persisted::Unchanged => json!({"state": "unchanged"}),
        Persisted::Discarded { added, writer } => json!({
            "state": "discarded",
            "added": added,
            "writer": writer.as_ref().map(owner_json),
        }),
        Persisted::Joined { added } => json!({"state": "joined", "added": added}),
    }
}

/// The query of the caller's JSON: `heads` (commit ids, required, may be empty), `limit` (a
/// positive safe integer) and `hunks` (a boolean), each optional but `heads`.
fn parse_query(query_json: &str) -> Result<HistoryQuery, Failure> {
    let value: Value =
        serde_json::from_str(query_json).map_err(|e| invalid(format!("query: {e}")))?;
    let heads = value
        .get("heads")
        .and_then(Value::as_array)
        .ok_or_else(|| invalid("query.heads must be an array of commit ids"))?
        .iter()
        .map(|head| {
            head.as_str()
                .and_then(|text| Oid::parse(text).ok())
                .ok_or_else(|| {
                    invalid("query.heads holds commit ids (40 or 64 lowercase hex); resolve names with resolve()")
                })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let limit = match value.get("limit") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => match from_js(n.as_f64().unwrap_or(-1.0), "query.limit")? {
            0 => return Err(invalid("query.limit must be at least 1")),
            n => Some(usize::try_from(n).map_err(|_| invalid("query.limit is too large"))?),
        },
        Some(_) => return Err(invalid("query.limit must be a number")),
    };
    let hunks = match value.get("hunks") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(invalid("query.hunks must be a boolean")),
    };
    Ok(HistoryQuery {
        heads,
        limit,
        hunks,
    })
}

fn outcome_json(outcome: Outcome<Vec<HistoryEntry>>) -> Value {
    json!({
        "history": outcome.value,
        "persisted": persisted_json(&outcome.persisted),
    })
}

/// A ledger call: the demand read, or the build with its wait.
#[derive(Clone, Copy)]
enum Call {
    Demand,
    Build,
}

/// Runs `call` with the query of `query_json` on `ledger`: its answer.
fn run(ledger: &Ledger<GitSource>, call: Call, query_json: &str) -> JsAnswer {
    answer(|| {
        let query = parse_query(query_json)?;
        let outcome = match call {
            Call::Demand => ledger.demand(|d| history(d, &query)),
            Call::Build => {
                let wait = parse_wait(query_json)?;
                ledger.build(wait, |d| history(d, &query))
            }
        };
        outcome.map(outcome_json).map_err(ledger_failure)
    })
}

/// A ledger call run on the libuv thread pool, so that its `git` processes (and a build's wait
/// for the lock) do not block the event loop. Its answer is the synchronous call's: the promise
/// resolves with its value or rejects with its coded error.
pub struct LedgerTask {
    ledger: Arc<Ledger<GitSource>>,
    call: Call,
    query_json: String,
}

impl Task for LedgerTask {
    type Output = JsAnswer;
    type JsValue = JsAnswer;

    fn compute(&mut self) -> napi::Result<JsAnswer> {
        Ok(run(&self.ledger, self.call, &self.query_json))
    }

    fn resolve(&mut self, _: Env, answer: JsAnswer) -> napi::Result<JsAnswer> {
        Ok(answer)
    }
}

/// The ledger of one project directory over one Git repository.
#[napi]
pub struct NativeLedger {
    ledger: Arc<Ledger<GitSource>>,
}

impl NativeLedger {
    fn task(&self, call: Call, query_json: String) -> AsyncTask<LedgerTask> {
        AsyncTask::new(LedgerTask {
            ledger: Arc::clone(&self.ledger),
            call,
            query_json,
        })
    }
}

#[napi]
impl NativeLedger {
    /// The ledger in project directory `dir` (shared with its project lock; record-only: no
    /// kernel lock) deriving from the repository at `repo`, running `git` with the extra
    /// environment `git_env` (a JSON object of strings; `{}` for none).
    #[napi(constructor)]
    pub fn new(
        env: Env,
        dir: String,
        repo: String,
        record_only: bool,
        git_env: String,
    ) -> napi::Result<Self> {
        caught(|| {
            let git_env: serde_json::Map<String, Value> = serde_json::from_str(&git_env)
                .map_err(|e| invalid(format!("gitEnv must be an object of strings: {e}")))?;
            let mut source = GitSource::new(repo);
            for (key, value) in git_env {
                let value = value
                    .as_str()
                    .ok_or_else(|| invalid(format!("gitEnv.{key} must be a string")))?;
                source = source.env(key, value);
            }
            let lock = ProjectLock::new(dir, Arc::new(SystemProbe));
            let lock = if record_only {
                lock.record_only()
            } else {
                lock
            };
            Ok(NativeLedger {
                ledger: Arc::new(Ledger::with_lock(lock, source)),
            })
        })
        .map_err(|failure| failure.into_js(&env))
    }

    /// Resolves a revision (`HEAD`, a branch, an id) to a commit id: `{oid}`. Runs `git`; not
    /// a fact (refs move), so it touches neither the snapshot nor the lock.
    #[napi]
    pub fn resolve(&self, rev: String) -> JsAnswer {
        answer(|| {
            let oid = self
                .ledger
                .source()
                .resolve(&rev)
                .map_err(|e| ledger_failure(e.into()))?;
            Ok(json!({"oid": oid.as_str()}))
        })
    }

    /// The demand read of the query (JSON): never waits for a live writer.
    #[napi]
    pub fn demand(&self, query_json: String) -> JsAnswer {
        run(&self.ledger, Call::Demand, &query_json)
    }

    /// The build transaction of the query (JSON, with its `wait`): the sole writer.
    #[napi]
    pub fn build(&self, query_json: String) -> JsAnswer {
        run(&self.ledger, Call::Build, &query_json)
    }

    /// [`NativeLedger::demand`] on the thread pool: a promise of the same answer.
    #[napi]
    pub fn demand_async(&self, query_json: String) -> AsyncTask<LedgerTask> {
        self.task(Call::Demand, query_json)
    }

    /// [`NativeLedger::build`] on the thread pool: a promise of the same answer.
    #[napi]
    pub fn build_async(&self, query_json: String) -> AsyncTask<LedgerTask> {
        self.task(Call::Build, query_json)
    }

    /// `{snapshot, lock}`: the stored snapshot (`{path, state: "absent"}`, `{path, state:
    /// "reusable", interpretation, facts, bytes}` or `{path, state: "rejected", reason}`), read
    /// without `git` and without the lock, and the project lock's status (as
    /// `ProjectLock.status()` gives it; null when the directory does not exist).
    #[napi]
    pub fn status(&self) -> JsAnswer {
        answer(|| {
            let path = self.ledger.snapshot_path().to_string_lossy().into_owned();
            let stored = snapshot_status(self.ledger.lock().dir()).map_err(ledger_failure)?;
            let snapshot = match stored {
                SnapshotStatus::Absent => json!({"path": path, "state": "absent"}),
                SnapshotStatus::Reusable {
                    interpretation,
                    facts,
                    bytes,
                } => json!({
                    "path": path,
                    "state": "reusable",
                    "interpretation": interpretation.as_str(),
                    "facts": facts,
                    "bytes": bytes,
                }),
                SnapshotStatus::Rejected(why) => {
                    json!({"path": path, "state": "rejected", "reason": why.to_string()})
                }
            };
            let lock = match status_json(self.ledger.lock()) {
                Ok(status) => status,
                Err(failure) if failure.code == Code::NoDirectory => Value::Null,
                Err(failure) => return Err(failure),
            };
            Ok(json!({"snapshot": snapshot, "lock": lock}))
        })
    }
}
