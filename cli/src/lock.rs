//! `solewriter lock status DIR`: whether a project lock is held (the kernel lock answers that
//! exactly), who its record names, and whether that exact process generation is alive, dead
//! or stale (recoverable), or unknown from here (another PID namespace, another boot, a
//! hidden `/proc`). Writes nothing. A missing directory is an error (exit 7).

use super::error::{Class, CliError, CliResult};
use crate::say;
use serde_json::json;
use solewriter::adapters::project_lock::process::SystemProbe;
use solewriter::adapters::project_lock::{KernelState, LockError, ProjectLock};
use solewriter::core::project_lock::ownership::{DeadReason, Ownership};
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

/// Prints the state of the project lock in `dir`.
pub fn status(dir: &Path, json_out: bool) -> CliResult<()> {
    let lock = ProjectLock::new(dir, Arc::new(SystemProbe));
    let status = lock.status().map_err(|e| match e {
        LockError::Malformed { .. } => {
            CliError::new(Class::Io, format!("{e}; the lock file was left untouched"))
        }
        other => CliError::new(Class::Io, format!("{other}; nothing was changed")),
    })?;
    let path = lock.path();
    let kernel = kernel_state(status.kernel);
    let held = status.kernel == KernelState::Held;
    let (state, why) = match &status.ownership {
        None => ("none", String::new()),
        Some(Ownership::Alive) => ("alive", String::new()),
        Some(Ownership::Dead(reason)) => ("dead", dead_reason(*reason).to_owned()),
        Some(Ownership::Unknown(reason)) => ("unknown", reason.to_string()),
    };
    if json_out {
        let owner = status.record.as_ref().map(|r| {
            json!({
                "pid": r.owner.pid,
                "startToken": r.owner.start_token,
                "bootId": r.owner.boot_id.to_string(),
                "pidNamespace": r.owner.pid_ns,
            })
        });
        let doc = json!({
            "lock": path,
            "held": held,
            "kernelLock": kernel,
            "state": state,
            "reason": why,
            "owner": owner,
            "acquiredAt": status.record.as_ref().map(|r| r.acquired_at),
        });
        say!("{doc}");
        return Ok(());
    }
    let Some(record) = &status.record else {
        if held {
            say!(
                "{}: held (kernel lock taken) by a holder that has not written its record yet, or has just removed it",
                path.display()
            );
        } else {
            say!("{}: free (no lock file)", path.display());
        }
        return Ok(());
    };
    say!(
        "{}: {} — kernel lock {kernel}; record names {}",
        path.display(),
        if held { "held" } else { "not held" },
        record.owner
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
        (false, "unknown") => "acquisitions fail loudly until an operator checks the owner",
        (false, "alive") => "a record-only owner is running; acquisitions wait or fail",
        _ => "the next acquisition recovers it",
    };
    say!("  owner {state}{detail} — {consequence}");
    Ok(())
}
