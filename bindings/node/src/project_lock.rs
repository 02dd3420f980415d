//! The project lock for Node: `solewriter_project_lock::ProjectLock` (the same code the
//! Rust API and `solewriter lock …` run) with the system process probe. Answers are JS values
//! like the rest of the addon's; every [`LockError`] variant is an error with its own `code`
//! and the fields a caller acts on (the owner of a busy lock, the record a clear refused, ...).
//!
//! JSON shapes (kebab-case names, as the record and the CLI spell them): a record is `{owner:
//! {pid, startToken, bootId, pidNamespace}, guard: "kernel"|"record-only", nonce, acquiredAt}`;
//! the kernel lock is `held`, `free`, `no-file` or `not-used`; an ownership is `{state:
//! "alive"}`, `{state: "dead", reason}` or `{state: "unknown", reason, detail}`.

use super::boundary::{answer, caught};
use super::failure::{invalid, Code, Failure, JsAnswer, Outcome};
use super::from_js;
use napi::Env;
use napi_derive::napi;
use serde_json::{json, Value};
use solewriter_core::project_lock::ownership::{
    DeadReason, LockNonce, LockRecord, OwnerIdentity, Ownership, UnknownReason,
};
use solewriter_project_lock::process::SystemProbe;
use solewriter_project_lock::{
    ClearRefused, Cleared, KernelState, LockError, ProjectLock, ProjectLockGuard, Released, Wait,
};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

fn path_json(path: &Path) -> Value {
    Value::String(path.to_string_lossy().into_owned())
}

pub(crate) fn owner_json(owner: &OwnerIdentity) -> Value {
    json!({
        "pid": owner.pid,
        "startToken": owner.start_token,
        "bootId": owner.boot_id.as_str(),
        "pidNamespace": owner.pid_ns,
    })
}

fn record_json(record: &LockRecord) -> Value {
    json!({
        "owner": owner_json(&record.owner),
        "guard": record.guard.as_str(),
        "nonce": record.nonce.to_hex(),
        "acquiredAt": record.acquired_at.0,
    })
}

fn kernel_name(kernel: KernelState) -> &'static str {
    match kernel {
        KernelState::Held => "held",
        KernelState::Free => "free",
        KernelState::NoFile => "no-file",
        KernelState::NotUsed => "not-used",
        _ => "unknown",
    }
}

fn dead_name(reason: DeadReason) -> &'static str {
    match reason {
        DeadReason::KernelLockFree => "kernel-lock-free",
        DeadReason::NoSuchProcess => "no-such-process",
        DeadReason::PidReused => "pid-reused",
        DeadReason::Exited => "exited",
    }
}

fn unknown_name(reason: &UnknownReason) -> &'static str {
    match reason {
        UnknownReason::OtherPidNamespace { .. } => "other-pid-namespace",
        UnknownReason::NamespaceUnreadable(_) => "namespace-unreadable",
        UnknownReason::OtherBoot => "other-boot",
        UnknownReason::Hidden => "hidden",
        UnknownReason::PermissionDenied => "permission-denied",
        UnknownReason::ProcessUnreadable(_) => "process-unreadable",
        UnknownReason::BootUnreadable(_) => "boot-unreadable",
        UnknownReason::Unsupported => "unsupported",
        _ => "other",
    }
}

fn ownership_json(ownership: &Ownership) -> Value {
    match ownership {
        Ownership::Alive => json!({"state": "alive"}),
        Ownership::Dead(reason) => json!({"state": "dead", "reason": dead_name(*reason)}),
        Ownership::Unknown(reason) => json!({
            "state": "unknown",
            "reason": unknown_name(reason),
            "detail": reason.to_string(),
        }),
    }
}

/// The error of a failed lock operation: one code per [`LockError`] variant.
pub(crate) fn lock_failure(error: LockError) -> Failure {
    let (code, detail) = match &error {
        LockError::Busy { lock, owner } => (
            Code::Busy,
            json!({"lock": path_json(lock), "owner": owner.as_ref().map(owner_json)}),
        ),
        LockError::KernelLockUnavailable { lock, .. } => (
            Code::KernelLockUnavailable,
            json!({"lock": path_json(lock)}),
        ),
        LockError::ClearRefused { lock, refused } => {
            let (why, record, ownership) = match &**refused {
                ClearRefused::Held(record) => ("held", record.as_ref(), None),
                ClearRefused::Known(record, ownership) => ("known", Some(record), Some(ownership)),
                ClearRefused::NonceMismatch(record) => ("nonce-mismatch", Some(record), None),
            };
            (
                Code::ClearRefused,
                json!({
                    "lock": path_json(lock),
                    "refused": why,
                    "record": record.map(record_json),
                    "ownership": ownership.map(ownership_json),
                }),
            )
        }
        LockError::NoDirectory { dir } => (Code::NoDirectory, json!({"dir": path_json(dir)})),
        LockError::UnknownOwner {
            lock,
            owner,
            reason,
        } => (
            Code::UnknownOwner,
            json!({
                "lock": path_json(lock),
                "owner": owner_json(owner),
                "reason": unknown_name(reason),
                "detail": reason.to_string(),
            }),
        ),
        LockError::Malformed { lock, reason } => (
            Code::MalformedLock,
            json!({"lock": path_json(lock), "reason": reason.0}),
        ),
        LockError::RecoveryAbandoned { lock, depth } => (
            Code::RecoveryAbandoned,
            json!({"lock": path_json(lock), "depth": depth}),
        ),
        LockError::OwnIdentity(_) => (Code::OwnIdentity, Value::Null),
        LockError::UnsafeDir { dir, reason } => (
            Code::UnsafeLockDir,
            json!({"dir": path_json(dir), "reason": reason}),
        ),
        LockError::Io { step, path, .. } => {
            (Code::Io, json!({"step": step, "path": path_json(path)}))
        }
        LockError::Random(_) => (Code::Random, Value::Null),
        LockError::Protocol(_) => (Code::Internal, Value::Null),
        LockError::Lost { lock, reason } => (
            Code::LockLost,
            json!({"lock": path_json(lock), "reason": reason}),
        ),
        _ => (Code::Lock, Value::Null),
    };
    let kind = error.kind();
    Failure::new(code, &error).with(detail).of_kind(kind)
}

/// `{lock, kernel, record, ownership}`: `lock`'s status (the Rust `LockStatus`), read without
/// writing.
pub(crate) fn status_json(lock: &ProjectLock) -> Outcome {
    lock.status().map_err(lock_failure).map(|status| {
        json!({
            "lock": path_json(&lock.path()),
            "kernel": kernel_name(status.kernel),
            "record": status.record.as_ref().map(record_json),
            "ownership": status.ownership.as_ref().map(ownership_json),
        })
    })
}

/// How long `acquire` may wait, from the caller's options (JSON): `{"wait": "noWait"}` or
/// `{"wait": {"timeoutMs": n}}`. There is no default: anything else is `INVALID_INPUT`.
pub(crate) fn parse_wait(options_json: &str) -> Result<Wait, Failure> {
    let options: Value =
        serde_json::from_str(options_json).map_err(|e| invalid(format!("options: {e}")))?;
    match options.get("wait") {
        Some(Value::String(s)) if s == "noWait" => Ok(Wait::NoWait),
        Some(Value::Object(bound)) if bound.len() == 1 => match bound.get("timeoutMs") {
            Some(Value::Number(ms)) => Ok(Wait::Within(Duration::from_millis(from_js(
                ms.as_f64().unwrap_or(-1.0),
                "wait.timeoutMs",
            )?))),
            _ => Err(invalid("wait must be 'noWait' or { timeoutMs }")),
        },
        _ => Err(invalid(
            "wait must be 'noWait' or { timeoutMs } (there is no default wait)",
        )),
    }
}

/// A project lock directory, with the system process probe.
#[napi]
pub struct NativeProjectLock {
    lock: ProjectLock,
}

#[napi]
impl NativeProjectLock {
    /// The lock of project directory `dir` (record-only: no kernel lock, for a file system
    /// that refuses locks).
    #[napi(constructor)]
    pub fn new(env: Env, dir: String, record_only: bool) -> napi::Result<Self> {
        caught(|| {
            #[cfg(feature = "test-seams")]
            super::seams::panic_at("project-lock-new");
            let lock = ProjectLock::new(dir, Arc::new(SystemProbe));
            Ok(NativeProjectLock {
                lock: if record_only {
                    lock.record_only()
                } else {
                    lock
                },
            })
        })
        .map_err(|failure| failure.into_js(&env))
    }

    /// Takes the lock, waiting as the options' `wait` allows (blocking the calling thread):
    /// the guard, or the error thrown.
    #[napi]
    pub fn acquire(&self, env: Env, options_json: String) -> napi::Result<NativeLockGuard> {
        caught(|| {
            parse_wait(&options_json).and_then(|wait| self.lock.acquire(wait).map_err(lock_failure))
        })
        .map(|guard| NativeLockGuard { guard: Some(guard) })
        .map_err(|failure| failure.into_js(&env))
    }

    /// `{lock, kernel, record, ownership}`: the Rust `LockStatus`, read without writing.
    #[napi]
    pub fn status(&self) -> JsAnswer {
        answer(|| status_json(&self.lock))
    }

    /// Clears the record carrying `nonce` if its owner is unknown from here (`clear_unknown`):
    /// `{"removed": record}` or `{"noLock": true}`.
    #[napi]
    pub fn clear(&self, nonce: String) -> JsAnswer {
        answer(|| {
            let nonce = LockNonce::parse_hex(&nonce)
                .ok_or_else(|| invalid("nonce must be 64 lowercase hex characters"))?;
            Ok(
                match self.lock.clear_unknown(&nonce).map_err(lock_failure)? {
                    Cleared::Removed(record) => json!({"removed": record_json(&record)}),
                    Cleared::NoLock => json!({"noLock": true}),
                },
            )
        })
    }
}

/// A held project lock. Released by `release()`; one dropped unreleased (garbage-collected)
/// is released then, like a Rust guard dropped.
#[napi]
pub struct NativeLockGuard {
    guard: Option<ProjectLockGuard>,
}

impl NativeLockGuard {
    fn held(&self) -> Result<&ProjectLockGuard, Failure> {
        self.guard
            .as_ref()
            .ok_or_else(|| invalid("this guard was released"))
    }
}

#[napi]
impl NativeLockGuard {
    /// This acquisition's record.
    #[napi]
    pub fn record(&self) -> JsAnswer {
        answer(|| self.held().map(|g| record_json(g.record())))
    }

    /// `{}` while this guard still holds the lock; `LOCK_LOST` otherwise.
    #[napi]
    pub fn verify(&self) -> JsAnswer {
        answer(|| {
            self.held().and_then(|g| {
                g.verify().map_err(lock_failure)?;
                Ok(json!({}))
            })
        })
    }

    /// Releases the lock if it still carries this acquisition's nonce: `{"removed": true}` or
    /// `{"notHolder": {"found": record | null}}`.
    #[napi]
    pub fn release(&mut self) -> JsAnswer {
        answer(|| match self.guard.take() {
            None => Err(invalid("this guard was released")),
            Some(guard) => guard.release().map_err(lock_failure).map(|r| match r {
                Released::Removed => json!({"removed": true}),
                Released::NotHolder(found) => {
                    json!({"notHolder": {"found": found.as_ref().map(record_json)}})
                }
            }),
        })
    }
}
