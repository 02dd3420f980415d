//! The demo's project lock section: a holder process (this binary as `lock-holder`) takes the
//! lock of a project directory; beside the live writer, a status read from another process
//! answers at once and a contender is refused busy, neither writing anything; the holder is
//! killed with SIGKILL while holding, the kernel drops its lock, and the next acquisition
//! recovers the dead owner's record.

use super::Tally;
use crate::error::{Class, CliError, CliResult};
use crate::process::Child;
use crate::say;
use serde_json::Value;
use solewriter::{LockError, ProjectLock, Released, SystemProbe, Wait};
use std::path::Path;
use std::sync::Arc;

/// What is in the project directory: each name and its bytes.
fn contents(dir: &Path) -> CliResult<Vec<(String, Vec<u8>)>> {
    let entries = std::fs::read_dir(dir).map_err(|e| CliError::io("listing", dir, &e))?;
    let mut found = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| CliError::io("listing", dir, &e))?;
        let bytes = std::fs::read(entry.path()).unwrap_or_default();
        found.push((entry.file_name().to_string_lossy().into_owned(), bytes));
    }
    found.sort();
    Ok(found)
}

/// `solewriter --json lock status DIR`, run as another process.
fn status(dir: &Path) -> CliResult<Value> {
    let exe = std::env::current_exe()
        .map_err(|e| CliError::new(Class::Io, format!("locating the executable failed: {e}")))?;
    let out = std::process::Command::new(exe)
        .args(["--json", "lock", "status"])
        .arg(dir)
        .output()
        .map_err(|e| CliError::new(Class::Io, format!("running lock status failed: {e}")))?;
    serde_json::from_slice(&out.stdout).map_err(|e| {
        CliError::new(
            Class::Invariant,
            format!(
                "lock status printed no JSON ({e}): {}",
                String::from_utf8_lossy(&out.stderr).trim_end()
            ),
        )
    })
}

/// Runs the section in `dir/project`; counts the dead owners recovered in `t`.
pub(super) fn run(dir: &Path, t: &mut Tally) -> CliResult<()> {
    say!("\n11. The project lock: one sole writer per project directory");
    let project = dir.join("project");
    let mut holder = Child::spawn(
        "lock-holder",
        &["lock-holder".into(), project.clone().into_os_string()],
    )?;
    let answer = holder.recv()?;
    let nonce = answer
        .strip_prefix("acquired ")
        .unwrap_or_default()
        .to_owned();
    say!(
        "   lock-holder (pid {}) holds {}: {answer}",
        holder.pid(),
        project.display()
    );
    t.check(!nonce.is_empty(), "a holder process takes the lock");
    let before = contents(&project)?;
    let seen = status(&project)?;
    say!(
        "   lock status, from another process: held {}, owner pid {} {}",
        seen["held"],
        seen["owner"]["pid"],
        seen["state"].as_str().unwrap_or_default()
    );
    t.check(
        seen["held"] == true
            && seen["state"] == "alive"
            && seen["owner"]["pid"] == holder.pid()
            && seen["nonce"] == nonce.as_str(),
        "a status read beside the live writer answers at once: held, its owner alive",
    );
    let lock = ProjectLock::new(&project, Arc::new(SystemProbe));
    let contender = lock.acquire(Wait::NoWait);
    if let Err(e) = &contender {
        say!("   this process tries without waiting: {e}");
    }
    t.check(
        matches!(&contender, Err(LockError::Busy { owner: Some(o), .. }) if o.pid == holder.pid()),
        "a contender is refused busy at once, naming the owner",
    );
    t.check(
        contents(&project)? == before,
        "neither the read nor the refused contender wrote anything",
    );
    holder.signal("KILL")?;
    holder.wait()?;
    say!("   lock-holder killed (kill -KILL) while holding; its record stays behind");
    let seen = status(&project)?;
    say!(
        "   lock status: held {}, owner {}: {}",
        seen["held"],
        seen["state"].as_str().unwrap_or_default(),
        seen["reason"].as_str().unwrap_or_default()
    );
    t.check(
        seen["held"] == false && seen["state"] == "dead" && seen["nonce"] == nonce.as_str(),
        "the kernel dropped the dead holder's lock: not held, its recorded owner dead",
    );
    let recovered = lock.acquire(Wait::NoWait);
    let took = match &recovered {
        Ok(guard) => {
            say!(
                "   this process acquires: nonce {}, owner pid {}",
                guard.record().nonce.to_hex(),
                guard.record().owner.pid
            );
            guard.record().nonce.to_hex() != nonce && guard.record().owner.pid == std::process::id()
        }
        Err(e) => {
            say!("   this process fails to acquire: {e}");
            false
        }
    };
    t.check(
        took,
        "the next acquisition recovers the dead owner's lock, with a new nonce",
    );
    if took {
        t.recovered += 1;
    }
    let released = recovered.map(|guard| guard.release());
    t.check(
        matches!(released, Ok(Ok(Released::Removed))) && !lock.path().exists(),
        "its release removes the record",
    );
    Ok(())
}
