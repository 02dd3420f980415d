//! The subtree write guard for Node (seed 002): the per-heap authority as a class over the
//! core's [`GuardState`], Bridge frame parsing, and write and move admission with the host's
//! parent lookup as a JS callback. Every decision is the core's (`solewriter_core::subtree`:
//! `parse_bridge_frame`, `admit_write`, `admit_move`, `GuardState`), the same functions the
//! Rust `WriteGuard` calls; this module only carries values across the boundary.
//!
//! JSON shapes (the seed's names): a writer is `{agentId, sessionId}`, a lock `{agentId,
//! sessionId, subtreePath: [rootId, …, componentId]}`, a context `{agentId, sessionId}` (either
//! may be null: half-stamped) or null (a legacy frame). Admission answers `{admitted: true,
//! reason: "legacy"|"granted"|"reentrant", lock, conflict: null}` or `{admitted: false, reason, conflict,
//! message}` with `reason` one of `WriteDenied::reason`'s words and `conflict` a copy of the
//! held lock (null unless `reason` is `conflict`).
//!
//! A JS heap is one thread, so the state is a `RefCell`: while an admission runs (the host's
//! `parentOf` is called during it), the state is borrowed, and a call into the same guard from
//! that callback finds it unavailable — an admission is denied `authority-unavailable`, any
//! other call is the error `AUTHORITY_UNAVAILABLE` — and changes nothing.

use super::boundary::answer;
use super::failure::{invalid, Code, Failure, JsAnswer, Outcome};
use napi::bindgen_prelude::{Either3, Function, Null, Undefined};
use napi_derive::napi;
use serde_json::{json, Value};
use solewriter_core::subtree::{
    admit_move, admit_write, parse_bridge_frame, AgentContext, BridgeFrame, ComponentId,
    GuardState, Lock, Parent, SubtreePath, WriteDenied, Writer,
};
use std::cell::{RefCell, RefMut};

/// What the host's `parentOf(id)` answers: the parent's id, `null` at a root, `undefined` for
/// an id not in the tree.
type ParentOf<'f> = Function<'f, String, Either3<String, Null, Undefined>>;

fn writer_json(writer: &Writer) -> Value {
    json!({"agentId": writer.agent_id(), "sessionId": writer.session_id()})
}

fn lock_json(lock: &Lock) -> Value {
    let path: Vec<&str> = lock.path.components().iter().map(|c| c.as_str()).collect();
    json!({
        "agentId": lock.writer.agent_id(),
        "sessionId": lock.writer.session_id(),
        "subtreePath": path,
    })
}

fn context_json(context: Option<&AgentContext>) -> Value {
    context.map_or(
        Value::Null,
        |c| json!({"agentId": c.agent_id, "sessionId": c.session_id}),
    )
}

fn text_field(object: &Value, key: &str) -> Option<String> {
    object.get(key).and_then(Value::as_str).map(str::to_owned)
}

/// The context the host passed: null is a legacy frame's; an object's string ids are kept
/// (a missing or non-string id is absent: the context is half-stamped, which admission
/// denies); any other value is a present but malformed context, denied the same way — never
/// taken for legacy.
fn parse_context(context_json: &str) -> Result<Option<AgentContext>, Failure> {
    let value: Value =
        serde_json::from_str(context_json).map_err(|e| invalid(format!("context: {e}")))?;
    Ok(match value {
        Value::Null => None,
        object @ Value::Object(_) => Some(AgentContext {
            agent_id: text_field(&object, "agentId"),
            session_id: text_field(&object, "sessionId"),
        }),
        _ => Some(AgentContext::default()),
    })
}

fn parse_writer(value: &Value) -> Result<Writer, Failure> {
    Writer::new(
        value.get("agentId").and_then(Value::as_str),
        value.get("sessionId").and_then(Value::as_str),
    )
    .ok_or_else(|| invalid("a writer needs a valid agentId and sessionId"))
}

fn parse_lock(lock_json: &str) -> Result<Lock, Failure> {
    let value: Value =
        serde_json::from_str(lock_json).map_err(|e| invalid(format!("lock: {e}")))?;
    let writer = parse_writer(&value)?;
    let components = value
        .get("subtreePath")
        .and_then(Value::as_array)
        .ok_or_else(|| invalid("a lock needs a subtreePath array"))?
        .iter()
        .map(|c| {
            c.as_str()
                .ok_or_else(|| invalid("subtreePath holds component ids (strings)"))
                .and_then(|id| ComponentId::parse(id).map_err(invalid))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let path = SubtreePath::new(components).map_err(invalid)?;
    Ok(Lock { path, writer })
}

/// The host's parent lookup as the core asks it. The first callback failure (a throw, or an
/// answer that is not a string, null or undefined) ends the walk as "not in the tree" and is
/// kept: the call then fails with it (`HOST`), having acquired nothing — the core derives the
/// path before it asks for any lock.
struct Lookup<'a, 'f> {
    parent_of: &'a ParentOf<'f>,
    failed: Option<Failure>,
}

impl<'a, 'f> Lookup<'a, 'f> {
    fn new(parent_of: &'a ParentOf<'f>) -> Self {
        Lookup {
            parent_of,
            failed: None,
        }
    }

    /// The host's answer for `id`, as the core reads it.
    fn parent(&mut self, id: &str) -> Parent<'static> {
        if self.failed.is_some() {
            return Parent::Unknown;
        }
        match self.parent_of.call(id.to_owned()) {
            Ok(Either3::A(parent)) => Parent::OwnedId(parent),
            Ok(Either3::B(Null)) => Parent::Root,
            Ok(Either3::C(())) => Parent::Unknown,
            Err(e) => {
                self.failed = Some(Failure::new(
                    Code::Host,
                    format!("parentOf failed on `{id}` (it must return a parent id, null at a root, or undefined for an id not in the tree): {e}"),
                ));
                Parent::Unknown
            }
        }
    }

    /// `answer`, unless the host's callback failed on the way.
    fn settle<T>(self, answer: T) -> Result<T, Failure> {
        match self.failed {
            Some(failure) => Err(failure),
            None => Ok(answer),
        }
    }
}

/// A denial as JS sees it.
fn denied_json(denied: &WriteDenied) -> Value {
    let conflict = match denied {
        WriteDenied::Conflict { held, .. } => lock_json(held),
        _ => Value::Null,
    };
    json!({
        "admitted": false,
        "reason": denied.reason(),
        "conflict": conflict,
        "message": denied.to_string(),
    })
}

/// The error of a guard call made while the guard is in use (from a `parentOf` callback).
fn unavailable() -> Failure {
    Failure::new(
        Code::AuthorityUnavailable,
        "the write guard is in use by an admission that has not returned (a parentOf callback called into it); nothing changed",
    )
}

/// Why an admission re-entered from a `parentOf` callback is denied.
fn reentered() -> WriteDenied {
    WriteDenied::AuthorityUnavailable(
        "the write guard is in use by an admission that has not returned (a parentOf callback called into it)".into(),
    )
}

/// Parses one Bridge frame (JSON text): `{type: "message", jsonrpc, context}` (`context` null
/// for a legacy frame) or `{type: "disconnected", writer}`; a malformed frame is the error
/// `MALFORMED_FRAME`, and reaches no service.
#[napi]
pub fn parse_bridge_frame_json(frame: String) -> JsAnswer {
    answer(|| {
        match parse_bridge_frame(&frame).map_err(|e| Failure::new(Code::MalformedFrame, e))? {
            BridgeFrame::Message(envelope) => Ok(json!({
                "type": "message",
                "jsonrpc": envelope.message,
                "context": context_json(envelope.context.as_ref()),
            })),
            BridgeFrame::Disconnected(writer) => Ok(json!({
                "type": "disconnected",
                "writer": writer_json(&writer),
            })),
        }
    })
}

/// Admits a write with no write guard wired: legacy frames are admitted, anything else is
/// denied (`incomplete-identity`, `unresolvable-target` or `no-write-guard`, in the core's order).
#[napi]
pub fn admit_unguarded_write(
    context_json: String,
    component_id: String,
    parent_of: ParentOf<'_>,
) -> JsAnswer {
    answer(|| {
        let context = parse_context(&context_json)?;
        let mut lookup = Lookup::new(&parent_of);
        let admitted = admit_write::<&mut GuardState>(
            context.as_ref(),
            &component_id,
            |id| lookup.parent(id),
            None,
        );
        admission_json(lookup.settle(admitted)?)
    })
}

fn admission_json(admitted: Result<solewriter_core::subtree::Admitted, WriteDenied>) -> Outcome {
    Ok(match admitted {
        Ok(admitted) => json!({
            "admitted": true,
            "reason": admitted.reason(),
            "lock": admitted.lock().map_or(Value::Null, lock_json),
            "conflict": Value::Null,
        }),
        Err(denied) => denied_json(&denied),
    })
}

/// The held-lock authority of one JS heap: the core's [`GuardState`] (held locks and the
/// disconnect barrier).
#[napi]
pub struct NativeWriteGuard {
    state: RefCell<GuardState>,
}

/// The core's lookup of a component's parent, as the host answers it.
type Lookups<'l> = &'l mut dyn FnMut(&str) -> Parent<'static>;

impl NativeWriteGuard {
    fn state(&self) -> Result<RefMut<'_, GuardState>, Failure> {
        self.state.try_borrow_mut().map_err(|_| unavailable())
    }

    /// Runs one of the core's admissions (`decide`) on this guard's state with the parsed
    /// context and the host's `parentOf`: a guard already in use denies `authority-unavailable`,
    /// and a failure of the host's callback wins over the core's answer.
    fn admit<T>(
        &self,
        context_json: &str,
        parent_of: &ParentOf<'_>,
        decide: impl FnOnce(
            Option<&AgentContext>,
            Lookups<'_>,
            &mut GuardState,
        ) -> Result<T, WriteDenied>,
    ) -> Result<Result<T, WriteDenied>, Failure> {
        let context = parse_context(context_json)?;
        let Ok(mut state) = self.state.try_borrow_mut() else {
            return Ok(Err(reentered()));
        };
        let mut lookup = Lookup::new(parent_of);
        let decided = decide(context.as_ref(), &mut |id| lookup.parent(id), &mut state);
        lookup.settle(decided)
    }
}

#[napi]
impl NativeWriteGuard {
    /// A guard holding no lock, remembering the last `DEFAULT_TOMBSTONES` swept writers.
    #[napi(constructor)]
    #[allow(clippy::new_without_default)]
    pub fn new() -> Self {
        NativeWriteGuard {
            state: RefCell::new(GuardState::default()),
        }
    }

    /// Admits a write of `context` (JSON) to `component_id`: the lock is held until released
    /// or swept. The answer's shape is in the module doc.
    #[napi]
    pub fn admit_write(
        &self,
        context_json: String,
        component_id: String,
        parent_of: ParentOf<'_>,
    ) -> JsAnswer {
        answer(|| {
            admission_json(
                self.admit(&context_json, &parent_of, |context, parent, state| {
                    admit_write(context, &component_id, parent, Some(state))
                })?,
            )
        })
    }

    /// Admits a move of `node_id` under `new_parent_id`: both its subtree where it is and where
    /// it will be are acquired in one step, or neither. `{admitted: true, from, to}` or a
    /// denial.
    #[napi]
    pub fn admit_move(
        &self,
        context_json: String,
        node_id: String,
        new_parent_id: String,
        parent_of: ParentOf<'_>,
    ) -> JsAnswer {
        answer(|| {
            let moved = self.admit(&context_json, &parent_of, |context, parent, state| {
                admit_move(context, &node_id, &new_parent_id, parent, Some(state))
            })?;
            Ok(match moved {
                Ok(moved) => json!({
                    "admitted": true,
                    "from": lock_json(&moved.from),
                    "to": lock_json(&moved.to),
                }),
                Err(denied) => denied_json(&denied),
            })
        })
    }

    /// Releases exactly `lock` (JSON: same writer and path): `{released: bool}`.
    #[napi]
    pub fn release(&self, lock_json: String) -> JsAnswer {
        answer(|| {
            let lock = parse_lock(&lock_json)?;
            Ok(json!({"released": self.state()?.release(&lock)}))
        })
    }

    /// The disconnect sweep of `writer` (JSON `{agentId, sessionId}`): frees its locks
    /// (returned, sorted) and bars it from acquiring again.
    #[napi]
    pub fn release_agent(&self, writer_json: String) -> JsAnswer {
        answer(|| {
            let value: Value =
                serde_json::from_str(&writer_json).map_err(|e| invalid(format!("writer: {e}")))?;
            let writer = parse_writer(&value)?;
            let freed = self.state()?.release_writer(&writer);
            Ok(Value::Array(freed.iter().map(lock_json).collect()))
        })
    }

    /// A copy of every held lock, sorted.
    #[napi]
    pub fn held_locks(&self) -> JsAnswer {
        answer(|| {
            let state = self.state.try_borrow().map_err(|_| unavailable())?;
            Ok(Value::Array(state.held().iter().map(lock_json).collect()))
        })
    }
}
