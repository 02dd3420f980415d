//! The hidden `holder` subcommand: a lease holder driven one line at a time, used by the
//! demo and by cross-process fencing tests.
//!
//! ```text
//! solewriter holder --config FILE --target HEX --instance NAME [--consumer-binding-file FILE]
//! ```
//!
//! The holder opens its own connection to the store (on the broker clock of its settings:
//! the system clock in `solewriter`; with the consumer binding of `--consumer-binding-file`,
//! which a store of the Memory Core profile needs to publish) and reads one command per
//! stdin line. It answers every command with exactly one line on stdout, flushed at once:
//!
//! | command   | answers                                                                      |
//! |-----------|------------------------------------------------------------------------------|
//! | `acquire` | `acquired <epoch> <expires_at_ms>` · `held <epoch> <retry_after_ms>` · `busy` · `error <message>` |
//! | `publish` | `published <epoch> <bytes>` · `fenced <reason>` · `expired` · `busy` · `error <message>` |
//! | `publish-now` | a one-shot (grant, publish and release in one transaction): `published <epoch> <bytes>` · `held <epoch> <retry_after_ms>` · `expired` · `busy` · `error <message>` |
//! | `release` | `released` · `not-holder <reason>` · `busy` · `error <message>`              |
//! | `ping`    | `pong`, at once: the holder is up (and a driver's measure of the pipe's round trip) |
//! | `quit`    | `bye`, then the process exits 0                                              |
//!
//! - `<reason>` is one word, `superseded`, `token-mismatch`, `expired`, `released`,
//!   `never-granted` or `document-ahead`; `superseded` is followed by the current epoch
//!   (`fenced superseded 4`), `document-ahead` by the epoch of the document in place (a
//!   document of the grant's epoch or a later one is there already: `fenced document-ahead 3`).
//! - `fenced` means the lease was revalidated and refused: `current.json` was not touched.
//!   `expired` means the lease expired during the publication (after revalidation, before
//!   the rename): the publication aborted, no renewal.
//! - `busy`: SQLite's write lock was not obtained within `busy_timeout_ms`.
//! - `publish` and `release` consume the held lease, whatever their answer; `acquire` while
//!   holding one, or `publish`/`release` without one, answer `error`. `publish-now` neither
//!   needs nor touches a held lease.
//! - End of stdin acts as `quit` without an answer. A lease still held at exit is released
//!   conditionally (token hash and epoch), as a dropped lease always is.
//!
//! The test binary `solewriter-testkit` (`src/bin/solewriter-testkit.rs`) adds one flag,
//! `--stall-at STEP` (a publication step in kebab-case, in order: `composed`, `temp-written`,
//! `transaction-open`, `revalidated`, `deadline-checked`, `renamed`, `released`, `unlocked`,
//! `directory-synced`): a `publish` or `publish-now` that reaches STEP prints `stalled <step>`
//! and blocks until it reads one more stdin line (any text), then continues and gives its
//! answer. From `transaction-open` to `released` it holds the target's lock and SQLite's write
//! lock; at every other step it holds neither. `solewriter` itself has no such flag: its
//! publications are never observed ([`run`] is given no probe).

use crate::config::Settings;
use crate::error::{CliError, CliResult};
use crate::store_cmds::read_consumer_binding;
use crate::{parse_instance, parse_target};
use solewriter::projection::Fenced;
use solewriter::projection::{FileError, PublishProbe};
use solewriter::{
    Acquisition, Error, HeldLease, ProjectionStore, PublishedNow, ReleaseOutcome, TargetId,
};
use std::io::{BufRead, Write};
use std::path::PathBuf;

/// Arguments of `holder`.
#[derive(clap::Args, Debug)]
pub struct HolderArgs {
    /// Target id (64 lowercase hex).
    #[arg(long, value_name = "HEX")]
    target: String,
    /// Name of this holder instance.
    #[arg(long, value_name = "NAME")]
    instance: String,
    /// A file holding the hooks' consumer binding (a JSON object), published with every
    /// document of a store of the Memory Core profile (refused by a generic store).
    #[arg(long, value_name = "FILE")]
    consumer_binding_file: Option<PathBuf>,
}

/// Writes one answer line and flushes it.
pub fn answer(line: &str) {
    let mut out = std::io::stdout().lock();
    // A closed stdout means the driver is gone; the next stdin read sees EOF and we exit.
    let _ = writeln!(out, "{line}").and_then(|()| out.flush());
}

/// Reads one stdin line; `None` at end of input or on a read error.
pub fn next_line() -> Option<String> {
    let mut line = String::new();
    match std::io::stdin().lock().read_line(&mut line) {
        Ok(0) | Err(_) => None,
        Ok(_) => Some(line.trim().to_owned()),
    }
}

/// The one-word spelling of a fencing reason (plus the epoch when superseded).
pub fn fenced_reason(fenced: Fenced) -> String {
    match fenced {
        Fenced::Superseded { current_epoch } => format!("superseded {current_epoch}"),
        Fenced::TokenMismatch => "token-mismatch".into(),
        Fenced::Expired => "expired".into(),
        Fenced::Released => "released".into(),
        Fenced::NeverGranted => "never-granted".into(),
        Fenced::DocumentAhead { document_epoch } => format!("document-ahead {document_epoch}"),
        other => format!("other ({other})"),
    }
}

/// The answer for a failed store operation.
fn failure(error: &Error) -> String {
    match error {
        Error::Busy { .. } | Error::File(FileError::Busy { .. }) => "busy".into(),
        Error::Fenced(fenced) => format!("fenced {}", fenced_reason(*fenced)),
        Error::LeaseExpired(_) => "expired".into(),
        other => format!("error {}", other.to_string().replace('\n', " ")),
    }
}

fn acquire<'s>(
    store: &'s ProjectionStore,
    target: &TargetId,
    instance: &solewriter::InstanceDigest,
    lease: &mut Option<HeldLease<'s>>,
) -> String {
    if let Some(held) = lease {
        return format!("error already holding epoch {}", held.epoch());
    }
    match store.acquire(target, instance) {
        Ok(Acquisition::Acquired(granted)) => {
            let line = format!("acquired {} {}", granted.epoch(), granted.expires_at().0);
            *lease = Some(granted);
            line
        }
        Ok(Acquisition::Held(held)) => {
            format!("held {} {}", held.fencing_epoch, held.retry_after_ms)
        }
        Err(e) => failure(&e),
    }
}

fn publish(lease: Option<HeldLease<'_>>, probe: Option<&dyn PublishProbe>) -> String {
    let Some(lease) = lease else {
        return "error no lease held (acquire first)".into();
    };
    let result = match probe {
        Some(probe) => lease.publish_observed(probe),
        None => lease.publish(),
    };
    match result {
        Ok(published) => format!("published {} {}", published.fencing_epoch, published.bytes),
        Err(e) => failure(&e),
    }
}

fn publish_now(
    store: &ProjectionStore,
    target: &TargetId,
    instance: &solewriter::InstanceDigest,
    probe: Option<&dyn PublishProbe>,
) -> String {
    let result = match probe {
        Some(probe) => store.publish_now_observed(target, instance, probe),
        None => store.publish_now(target, instance),
    };
    match result {
        Ok(PublishedNow::Published(published)) => {
            format!("published {} {}", published.fencing_epoch, published.bytes)
        }
        Ok(PublishedNow::Held(held)) => {
            format!("held {} {}", held.fencing_epoch, held.retry_after_ms)
        }
        Err(e) => failure(&e),
    }
}

fn release(lease: Option<HeldLease<'_>>) -> String {
    let Some(lease) = lease else {
        return "error no lease held (acquire first)".into();
    };
    match lease.release() {
        Ok(ReleaseOutcome::Released) => "released".into(),
        Ok(ReleaseOutcome::NotHolder(fenced)) => format!("not-holder {}", fenced_reason(fenced)),
        Err(e) => failure(&e),
    }
}

/// Runs the holder protocol until `quit` or end of stdin; `probe` (the test binary's
/// `--stall-at`, never given by `solewriter`) observes every publication.
pub fn run(
    settings: &Settings,
    args: &HolderArgs,
    probe: Option<&dyn PublishProbe>,
) -> CliResult<()> {
    let target = parse_target(&args.target)?;
    let instance = parse_instance(&args.instance)?;
    let binding = read_consumer_binding(args.consumer_binding_file.as_deref())?;
    let mut store = ProjectionStore::open(&settings.store_options()?).map_err(CliError::from)?;
    store.set_consumer_binding(binding);
    let mut lease: Option<HeldLease<'_>> = None;
    while let Some(command) = next_line() {
        let reply = match command.as_str() {
            "acquire" => acquire(&store, &target, &instance, &mut lease),
            "publish" => publish(lease.take(), probe),
            "publish-now" => publish_now(&store, &target, &instance, probe),
            "release" => release(lease.take()),
            "ping" => "pong".into(),
            "quit" => {
                answer("bye");
                break;
            }
            other => format!("error unknown command `{other}`"),
        };
        answer(&reply);
    }
    Ok(())
}
