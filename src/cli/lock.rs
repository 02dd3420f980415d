//! `solewriter lock status DIR`: who owns a project lock, and whether that exact process
//! generation is alive, dead (recoverable) or unknown (the lock fails loudly). Read-only.

use super::error::{Class, CliError, CliResult};
use serde_json::json;
use solewriter::adapters::process::{ProcessProbe, SystemProbe};
use solewriter::adapters::project_lock::{LockError, ProjectLock};
use solewriter::core::ownership::{classify, DeadReason, Ownership};
use std::path::Path;
use std::sync::Arc;

fn dead_reason(reason: DeadReason) -> &'static str {
    match reason {
        DeadReason::OtherBoot => "the machine rebooted since",
        DeadReason::NoSuchProcess => "no such process",
        DeadReason::PidReused => "the pid belongs to another process generation (reused)",
        DeadReason::Exited => "the process has exited",
    }
}

/// Prints the owner of the project lock in `dir` and its liveness.
pub fn status(dir: &Path, json_out: bool) -> CliResult<()> {
    let lock = ProjectLock::new(dir, Arc::new(SystemProbe));
    let record = lock.current().map_err(|e| match e {
        LockError::Malformed { .. } => {
            CliError::new(Class::Io, format!("{e}; the lock file was left untouched"))
        }
        other => CliError::new(Class::Io, format!("{other}; nothing was changed")),
    })?;
    let path = lock.path();
    let Some(record) = record else {
        if json_out {
            println!("{}", json!({ "lock": path, "state": "free" }));
        } else {
            println!("{}: free (no lock file)", path.display());
        }
        return Ok(());
    };
    let ownership = classify(&record.owner, &SystemProbe.observe(record.owner.pid));
    let (state, why) = match &ownership {
        Ownership::Alive => ("alive", String::new()),
        Ownership::Dead(reason) => ("dead", dead_reason(*reason).to_owned()),
        Ownership::Unknown(reason) => ("unknown", reason.to_string()),
    };
    if json_out {
        let doc = json!({
            "lock": path,
            "state": state,
            "reason": why,
            "owner": { "pid": record.owner.pid, "startToken": record.owner.start_token, "bootId": record.owner.boot_id.to_string() },
            "acquiredAt": record.acquired_at,
        });
        println!("{doc}");
    } else {
        println!(
            "{}: held by pid {} (start token {}, boot {})",
            path.display(),
            record.owner.pid,
            record.owner.start_token,
            record.owner.boot_id
        );
        let detail = if why.is_empty() {
            String::new()
        } else {
            format!(": {why}")
        };
        let consequence = match state {
            "alive" => "the owner is running; acquisitions wait or fail",
            "dead" => "the next acquisition recovers it",
            _ => "acquisitions fail loudly until an operator checks the owner",
        };
        println!("  owner {state}{detail} — {consequence}");
    }
    Ok(())
}
