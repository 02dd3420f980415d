//! What an operator looks at: `inspect` (every target's lease and channels, read-only) and
//! `read` (the validated `current.json` of one target). Both print text, or JSON with `--json`.

use crate::config::Settings;
use crate::error::{classify, Class, CliError, CliResult};
use crate::parse_target;
use crate::say;
use crate::time::{relative, rfc3339};
use serde_json::{json, Value};
use solewriter::projection::wait_for_projection;
use solewriter::projection::{channel_status, ChannelStatus, StatusReason};
use solewriter::projection::{ChannelRecord, FileError};
use solewriter::projection::{LeaseRecord, LeaseState};
use solewriter::{
    read_projection, ChannelRegistry, Error as LibError, Millis, ProjectionDocument,
    ProjectionStore, RuntimeRoot, TargetId,
};

/// The observed state of a lease row at `now`: `expired` is derived, never stored.
fn lease_state(record: &LeaseRecord, now: Millis) -> &'static str {
    match &record.state {
        LeaseState::Held(grant) if grant.expires_at <= now => "expired",
        other => other.name(),
    }
}

/// The v1 `freshness` of a row at `now` (kept in `inspect --json` for compatibility; `status`
/// says more).
fn freshness(expires_at: Millis, now: Millis) -> &'static str {
    if expires_at <= now {
        "expired"
    } else {
        "fresh"
    }
}

/// A status and its reason as one phrase: `fresh`, `stale (expired)`, `DEGRADED (…)`.
fn status_phrase(status: ChannelStatus, reason: Option<StatusReason>) -> String {
    let reason = match reason {
        None => return "fresh".into(),
        Some(StatusReason::Expired) => "expired",
        Some(StatusReason::SourceConflict) => "source-conflict",
        Some(StatusReason::CorruptEnvelope) => "corrupt-envelope",
    };
    match status {
        ChannelStatus::Degraded => format!("DEGRADED ({reason})"),
        _ => format!("stale ({reason})"),
    }
}

fn channel_json(row: &ChannelRecord, registry: &ChannelRegistry, now: Millis) -> Value {
    let (status, reason) = channel_status(row, now);
    json!({
        "channel": row.channel,
        "producer": registry.get(&row.channel).map(|s| s.owner.clone()),
        "sourceWatermark": row.source_watermark,
        "capturedAt": row.captured_at,
        "expiresAt": row.expires_at,
        "updatedAt": row.updated_at,
        "capturedAtRfc3339": rfc3339(row.captured_at),
        "expiresAtRfc3339": rfc3339(row.expires_at),
        "updatedAtRfc3339": rfc3339(row.updated_at),
        "freshness": freshness(row.expires_at, now),
        "degraded": row.degraded_reason,
        "status": status,
        "reason": reason,
    })
}

fn target_json(
    record: &LeaseRecord,
    rows: &[ChannelRecord],
    registry: &ChannelRegistry,
    now: Millis,
) -> Value {
    let grant = record.state.grant();
    let missing: Vec<_> = registry
        .iter()
        .filter(|spec| !rows.iter().any(|r| r.channel == spec.name))
        .map(|spec| spec.name.clone())
        .collect();
    json!({
        "targetId": record.target_id,
        "fencingEpoch": record.fencing_epoch,
        "state": lease_state(record, now),
        "holder": grant.map(|g| g.holder_instance_digest.clone()),
        "acquiredAt": grant.map(|g| g.acquired_at),
        "expiresAt": grant.map(|g| g.expires_at),
        "expiresInMs": match &record.state {
            LeaseState::Held(g) => Some(now.until(g.expires_at)),
            _ => None,
        },
        "acquiredAtRfc3339": grant.map(|g| rfc3339(g.acquired_at)),
        "expiresAtRfc3339": grant.map(|g| rfc3339(g.expires_at)),
        "channels": rows.iter().map(|r| channel_json(r, registry, now)).collect::<Vec<_>>(),
        "missing": missing,
    })
}

/// Prints one target's lease and channels, each line starting with `indent`.
pub fn print_target(record: &LeaseRecord, rows: &[ChannelRecord], now: Millis, indent: &str) {
    say!("{indent}target {}", record.target_id);
    let epoch = record.fencing_epoch;
    let lease = match &record.state {
        LeaseState::Unheld => format!("unheld, epoch {epoch} (never granted)"),
        LeaseState::Held(g) => format!(
            "{} by {}, epoch {epoch}, expires {}",
            lease_state(record, now),
            g.holder_instance_digest,
            relative(g.expires_at, now)
        ),
        LeaseState::Released(g) => format!(
            "released by {}, epoch {epoch}, granted {}",
            g.holder_instance_digest,
            relative(g.acquired_at, now)
        ),
    };
    say!("{indent}  lease    {lease}");
    for row in rows {
        let (status, reason) = channel_status(row, now);
        say!(
            "{indent}  channel  {:<24} watermark {:<6} {}, expires {}",
            row.channel.as_str(),
            row.source_watermark,
            status_phrase(status, reason),
            relative(row.expires_at, now),
        );
    }
}

/// `inspect [TARGET]`: every target (or the one given, which must be admitted) with its
/// lease and channels.
pub fn inspect(settings: &Settings, only: Option<&str>, as_json: bool) -> CliResult<()> {
    let only = only.map(parse_target).transpose()?;
    let options = settings.store_options()?;
    let store = ProjectionStore::open(&options)?;
    let now = options.clock.now();
    let leases = match &only {
        None => store.lease_rows()?,
        Some(target) => vec![store
            .lease_row(target)?
            .ok_or_else(|| LibError::NotAdmitted(target.clone()))?],
    };
    let mut targets = Vec::with_capacity(leases.len());
    for record in leases {
        let rows = store.channel_rows(&record.target_id)?;
        targets.push((record, rows));
    }
    if as_json {
        let value = json!({
            "store": options.db_path,
            "now": now,
            "nowRfc3339": rfc3339(now),
            "targets": targets
                .iter()
                .map(|(record, rows)| target_json(record, rows, &options.registry, now))
                .collect::<Vec<_>>(),
        });
        say!("{value}");
        return Ok(());
    }
    say!(
        "store {}: {} target(s), broker clock {}",
        options.db_path.display(),
        targets.len(),
        rfc3339(now)
    );
    for (record, rows) in &targets {
        print_target(record, rows, now, "");
    }
    Ok(())
}

/// Prints a validated document, each line starting with `indent`.
pub fn print_document(doc: &ProjectionDocument, now: Millis, indent: &str) {
    say!("{indent}target    {}", doc.target_id);
    say!("{indent}format    {}", doc.format);
    say!("{indent}epoch     {} (diagnostic)", doc.fencing_epoch);
    say!("{indent}published {}", relative(doc.published_at, now));
    for ch in &doc.channels {
        let producer = ch
            .producer
            .as_ref()
            .map_or("(unregistered)", |p| p.as_str());
        say!(
            "{indent}channel   {} from {producer}, watermark {}, {} at publication",
            ch.channel,
            ch.source_watermark,
            status_phrase(ch.status, ch.reason)
        );
        match &ch.envelope {
            Some(envelope) => say!("{indent}  {}", envelope.get()),
            None => say!("{indent}  (envelope withheld: the stored envelope is corrupt)"),
        }
    }
    for name in &doc.missing {
        say!("{indent}missing   {name}");
    }
    let c = doc.coverage;
    say!(
        "{indent}coverage  {} registered: {} fresh, {} stale, {} degraded, {} missing; {} unregistered",
        c.registered,
        c.fresh,
        c.stale,
        c.degraded,
        c.missing,
        c.unregistered
    );
}

/// `read`: validates and prints one target's `current.json`.
pub fn read(settings: &Settings, target: &str, as_json: bool) -> CliResult<()> {
    let target = parse_target(target)?;
    let root = settings.runtime_root()?;
    let doc = read_projection(&root, &target);
    show(settings, &root, &target, doc, as_json)
}

/// `watch`: waits (inotify, not polling) for a document newer than `after_epoch`, then prints
/// it as `read` does.
pub fn watch(
    settings: &Settings,
    target: &str,
    after_epoch: Option<u64>,
    timeout_ms: u64,
    as_json: bool,
) -> CliResult<()> {
    let target = parse_target(target)?;
    if timeout_ms == 0 {
        return Err(CliError::new(
            Class::Usage,
            "--timeout-ms must be greater than zero; nothing was read".to_owned(),
        ));
    }
    let root = settings.runtime_root()?;
    let doc = wait_for_projection(
        &root,
        &target,
        after_epoch,
        std::time::Duration::from_millis(timeout_ms),
    );
    show(settings, &root, &target, doc, as_json)
}

/// Prints a document read for `read` or `watch`, or turns the failure into the CLI's error.
fn show(
    settings: &Settings,
    root: &RuntimeRoot,
    target: &TargetId,
    doc: Result<ProjectionDocument, LibError>,
    as_json: bool,
) -> CliResult<()> {
    let doc = doc.map_err(|e| {
        let class = classify(&e);
        match e {
            // The library's message names no path: a script needs to know which file.
            LibError::File(FileError::Document(refused)) => CliError::new(
                class,
                format!(
                    "{} refused: {refused}; it was left untouched",
                    root.current_path(target).display()
                ),
            ),
            other => CliError::new(class, other.to_string()),
        }
    })?;
    if as_json {
        say!("{}", String::from_utf8_lossy(&doc.to_bytes()).trim_end());
    } else {
        print_document(&doc, settings.clock().now(), "");
    }
    Ok(())
}
