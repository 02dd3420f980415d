//! `solewriter lock status DIR`: whether a project lock is held (the kernel lock answers that
//! exactly), who its record names (and its nonce), and whether that exact process generation
//! is alive, dead or stale (recoverable), or unknown from here (another PID namespace, another
//! boot, a hidden `/proc`). Writes nothing. A missing directory is an error (exit 7). The
//! report ([`report`]) is also what `ledger status` shows of the lock.
//!
//! `solewriter lock clear DIR --nonce N`: removes the record of an owner that is unknown from
//! here, only if it carries nonce N (`ProjectLock::clear_unknown`); refused (exit 14) when the
//! kernel lock is held, the owner is known, or the nonce differs.
//!
//! The hidden `lock-holder DIR` holds a project lock for the demo ([`hold`]).

use super::error::{classify_lock, Class, CliError, CliResult};
use crate::holder;
use crate::say;
use serde_json::json;
use solewriter::project_lock::SystemProbe;
use solewriter::project_lock::{Cleared, KernelState, LockError, ProjectLock, Wait};
use solewriter::project_lock::{DeadReason, LockNonce, OwnerIdentity, Ownership};
use std::path::Path;
use std::sync::Arc;

fn dead_reason(reason: DeadReason) -> &'static str {
    match reason {
        DeadReason::KernelLockFree => "its kernel lock is free (released, or the owner died)",
        DeadReason::NoSuchProcess => "no such process",
        DeadReason::PidReused => "the pid belongs to another process generation (reused)",
        DeadReason::Exited => "the process has exited",
    }
}

fn kernel_state(kernel: KernelState) -> &'static str {
    match kernel {
        KernelState::Held => "held",
        KernelState::Free => "free",
        KernelState::NoFile => "never used",
        // Record-only mode is not offered by this command; kept for completeness.
        _ => "not used",
    }
}

/// The recorded owner, as JSON.
pub fn owner_json(owner: &OwnerIdentity) -> serde_json::Value {
    json!({
        "pid": owner.pid,
        "startToken": owner.start_token,
        "bootId": owner.boot_id.to_string(),
        "pidNamespace": owner.pid_ns,
    })
}

/// The CLI's error for a project lock failure, of the class [`classify_lock`] gives it (a
/// refused clear is its own class, a busy claim is retry-later, everything else is the file
/// system's); the message says what was left untouched where the error does not.
pub fn lock_error(error: LockError) -> CliError {
    let class = classify_lock(&error);
    let message = match &error {
        LockError::ClearRefused { .. } | LockError::Busy { .. } | LockError::Protocol(_) => {
            error.to_string()
        }
        LockError::Malformed { .. } => format!("{error}; the lock file was left untouched"),
        other => format!("{other}; nothing was changed"),
    };
    CliError::new(class, message)
}

/// What `lock status` says about one project lock: its JSON object and its text lines.
/// `ledger status` shows the same report beside the ledger snapshot.
pub struct LockReport {
    /// The `--json` object (`$defs/lockStatus` of `cli.v2.schema.json`).
    pub json: serde_json::Value,
    /// The text lines.
    pub lines: Vec<String>,
}

/// Prints the state of the project lock in `dir`.
pub fn status(dir: &Path, json_out: bool) -> CliResult<()> {
    let report = report(&ProjectLock::new(dir, Arc::new(SystemProbe)))?;
    if json_out {
        say!("{}", report.json);
    } else {
        for line in &report.lines {
            say!("{line}");
        }
    }
    Ok(())
}

/// Reads the state of `lock` (writing nothing) and renders it; a missing directory is an
/// error (exit 7).
pub fn report(lock: &ProjectLock) -> CliResult<LockReport> {
    let status = lock.status().map_err(lock_error)?;
    let path = lock.path();
    let kernel = kernel_state(status.kernel);
    let held = status.kernel == KernelState::Held;
    let (state, why) = match &status.ownership {
        None => ("none", String::new()),
        Some(Ownership::Alive) => ("alive", String::new()),
        Some(Ownership::Dead(reason)) => ("dead", dead_reason(*reason).to_owned()),
        Some(Ownership::Unknown(reason)) => ("unknown", reason.to_string()),
    };
    let json = json!({
        "lock": path,
        "held": held,
        "kernelLock": kernel,
        "state": state,
        "reason": why,
        "owner": status.record.as_ref().map(|r| owner_json(&r.owner)),
        "nonce": status.record.as_ref().map(|r| r.nonce.to_hex()),
        "acquiredAt": status.record.as_ref().map(|r| r.acquired_at),
    });
    let Some(record) = &status.record else {
        let line = if held {
            format!(
                "{}: held (kernel lock taken) by a holder that has not written its record yet, or has just removed it",
                path.display()
            )
        } else {
            format!("{}: free (no lock file)", path.display())
        };
        return Ok(LockReport {
            json,
            lines: vec![line],
        });
    };
    let first = format!(
        "{}: {} — kernel lock {kernel}; record names {}, nonce {}",
        path.display(),
        if held { "held" } else { "not held" },
        record.owner,
        record.nonce.to_hex()
    );
    let detail = if why.is_empty() {
        String::new()
    } else {
        format!(": {why}")
    };
    let consequence = match (held, state) {
        (true, "alive") => "the owner is running; acquisitions wait or fail",
        (true, "unknown") => {
            "the holder cannot be named from here; acquisitions wait or fail until it releases"
        }
        (true, _) => "a holder is mid-acquisition or mid-release; acquisitions wait or fail",
        (false, "unknown") => {
            "acquisitions fail loudly until an operator checks the owner (then `lock clear DIR --nonce N`)"
        }
        (false, "alive") => "a record-only owner is running; acquisitions wait or fail",
        _ => "the next acquisition recovers it",
    };
    Ok(LockReport {
        json,
        lines: vec![first, format!("  owner {state}{detail} — {consequence}")],
    })
}

/// Clears the project lock in `dir` if its owner is unknown from here and its record carries
/// `nonce` (64 lowercase hex, as `lock status` prints it); says what it did.
pub fn clear(dir: &Path, nonce: &str, json_out: bool) -> CliResult<()> {
    let nonce = LockNonce::parse_hex(nonce).ok_or_else(|| {
        CliError::new(
            Class::Rejected,
            "--nonce refused: it must be 64 lowercase hex characters (as `lock status` prints it); nothing was read or removed",
        )
    })?;
    let lock = ProjectLock::new(dir, Arc::new(SystemProbe));
    let cleared = lock.clear_unknown(&nonce).map_err(lock_error)?;
    let path = lock.path();
    let removed = match &cleared {
        Cleared::Removed(record) => Some(record),
        Cleared::NoLock => None,
    };
    if json_out {
        say!(
            "{}",
            json!({
                "lock": path,
                "cleared": removed.is_some(),
                "owner": removed.map(|r| owner_json(&r.owner)),
                "nonce": removed.map(|r| r.nonce.to_hex()),
            })
        );
    } else if let Some(record) = removed {
        say!(
            "cleared {}: removed the record of owner {} (unknown from here), nonce {}; the next acquisition takes the lock",
            path.display(),
            record.owner,
            record.nonce.to_hex()
        );
    } else {
        say!(
            "nothing to clear: {} does not exist; nothing was removed",
            path.display()
        );
    }
    Ok(())
}

/// The hidden `lock-holder DIR` subcommand, for the demo: takes the project lock without
/// waiting and answers `acquired <nonce>` (or `error <message>`) on stdout, then holds it
/// until one stdin line (or its end) arrives, releases it and answers `released`.
pub fn hold(dir: &Path) -> CliResult<()> {
    let lock = ProjectLock::new(dir, Arc::new(SystemProbe));
    let guard = match lock.acquire(Wait::NoWait) {
        Ok(guard) => guard,
        Err(e) => {
            holder::answer(&format!("error {e}"));
            return Err(lock_error(e));
        }
    };
    holder::answer(&format!("acquired {}", guard.record().nonce.to_hex()));
    let _ = holder::next_line();
    guard.release().map_err(lock_error)?;
    holder::answer("released");
    Ok(())
}
