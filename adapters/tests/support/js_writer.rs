//! The Memory Core's own JavaScript writer, as far as its SQL goes: its statements copied
//! verbatim from the public `neomjs/neo` repository (`ai/services/memory-core/`
//! `hookProjectionLease.mjs`: `createHookProjectionTables`, `acquireProjectionLease`,
//! `releaseProjectionLease`; `hookProjectionSubmission.mjs`: `submitProjectionChannel`;
//! `hookProjectionWriter.mjs`: `deriveTargetId`, `hashToken`), driven the way those functions
//! drive them, so a test database holds exactly what that writer leaves behind.
#![allow(dead_code)]

use rusqlite::{params, Connection, OptionalExtension};
use sha2::{Digest, Sha256};
use solewriter_core::projection::target::TargetTuple;

/// `createHookProjectionTables`, its two `db.exec` texts.
pub const CREATE_CHANNELS: &str = "
        CREATE TABLE IF NOT EXISTS HookProjectionChannels (
            target_id TEXT NOT NULL,
            channel TEXT NOT NULL,
            source_watermark TEXT NOT NULL,
            envelope_json TEXT NOT NULL,
            captured_at TEXT NOT NULL,
            expires_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            conflict_reason TEXT,
            PRIMARY KEY (target_id, channel)
        );
    ";
pub const CREATE_LEASES: &str = "
        CREATE TABLE IF NOT EXISTS HookProjectionLeases (
            target_id TEXT PRIMARY KEY,
            fencing_epoch INTEGER NOT NULL,
            holder_token_hash TEXT,
            holder_instance_digest TEXT,
            acquired_at INTEGER,
            expires_at INTEGER,
            state TEXT NOT NULL CHECK(state IN ('held', 'released'))
        );
    ";
const ACQUIRE_READ: &str =
    "SELECT fencing_epoch, expires_at, state FROM HookProjectionLeases WHERE target_id = ?";
const ACQUIRE_WRITE: &str = "
            INSERT INTO HookProjectionLeases
                (target_id, fencing_epoch, holder_token_hash, holder_instance_digest, acquired_at, expires_at, state)
            VALUES (?, ?, ?, ?, ?, ?, 'held')
            ON CONFLICT(target_id) DO UPDATE SET
                fencing_epoch          = excluded.fencing_epoch,
                holder_token_hash      = excluded.holder_token_hash,
                holder_instance_digest = excluded.holder_instance_digest,
                acquired_at            = excluded.acquired_at,
                expires_at             = excluded.expires_at,
                state                  = 'held'
        ";
const RELEASE: &str = "
            UPDATE HookProjectionLeases
            SET state = 'released', holder_token_hash = NULL, expires_at = 0
            WHERE target_id = ? AND fencing_epoch = ? AND holder_token_hash = ?
        ";
const PUBLISH_READ: &str = "SELECT fencing_epoch, holder_token_hash, expires_at, state FROM HookProjectionLeases WHERE target_id = ?";
const SUBMIT_READ: &str = "
            SELECT source_watermark, envelope_json FROM HookProjectionChannels
            WHERE target_id = ? AND channel = ?
        ";
const SUBMIT_CONFLICT: &str = "
                    UPDATE HookProjectionChannels SET conflict_reason = ?, updated_at = ?
                    WHERE target_id = ? AND channel = ?
                ";
const SUBMIT_WRITE: &str = "
        INSERT INTO HookProjectionChannels
                (target_id, channel, source_watermark, envelope_json, captured_at, expires_at, updated_at, conflict_reason)
            VALUES (?, ?, ?, ?, ?, ?, ?, NULL)
            ON CONFLICT(target_id, channel) DO UPDATE SET
                source_watermark = excluded.source_watermark,
                envelope_json    = excluded.envelope_json,
                captured_at      = excluded.captured_at,
                expires_at       = excluded.expires_at,
                updated_at       = excluded.updated_at,
                conflict_reason  = NULL
        ";

/// `ensureSchema`: the two tables.
pub fn create_tables(db: &Connection) {
    db.execute_batch(CREATE_CHANNELS).unwrap();
    db.execute_batch(CREATE_LEASES).unwrap();
}

/// `deriveTargetId`: 32 hex digits of sha256 over `field=value` joined by NUL.
pub fn target_id(tuple: &TargetTuple) -> String {
    let json = serde_json::to_value(tuple).unwrap();
    let canonical: Vec<String> = solewriter_core::projection::target::FIELDS
        .iter()
        .map(|f| format!("{f}={}", json[f].as_str().unwrap()))
        .collect();
    hex(&Sha256::digest(canonical.join("\0").as_bytes()))[..32].to_owned()
}

/// `hashToken`: sha256 of the token string (64 hex characters), in hex.
pub fn hash_token(token: &str) -> String {
    hex(&Sha256::digest(token.as_bytes()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `acquireProjectionLease` (one IMMEDIATE transaction): the epoch granted, or `None` when
/// held; an error when a statement fails (rolled back).
pub fn acquire(
    db: &Connection,
    target: &str,
    instance: &str,
    now: i64,
    ttl: i64,
    token: &str,
) -> rusqlite::Result<Option<i64>> {
    db.execute_batch("BEGIN IMMEDIATE")?;
    let result = (|| {
        let row: Option<(i64, i64, String)> = db
            .query_row(ACQUIRE_READ, [target], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
            .optional()?;
        if let Some((_, expires_at, state)) = &row {
            if state == "held" && *expires_at > now {
                return Ok(None);
            }
        }
        let epoch = row.map_or(0, |r| r.0) + 1;
        db.execute(
            ACQUIRE_WRITE,
            params![target, epoch, hash_token(token), instance, now, now + ttl],
        )?;
        Ok(Some(epoch))
    })();
    db.execute_batch(if result.is_ok() { "COMMIT" } else { "ROLLBACK" })?;
    result
}

/// `releaseProjectionLease`: whether the holder's row was released.
pub fn release(db: &Connection, target: &str, epoch: i64, token: &str) -> bool {
    db.execute(RELEASE, params![target, epoch, hash_token(token)])
        .unwrap()
        == 1
}

/// `publishProjection`'s fencing checks: `None` when it would publish, else its reason.
pub fn publish_refusal(
    db: &Connection,
    target: &str,
    epoch: i64,
    token: &str,
    now: i64,
) -> Option<&'static str> {
    let row = db
        .query_row(PUBLISH_READ, [target], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, rusqlite::types::Value>(1)?,
                r.get::<_, i64>(2)?,
                r.get::<_, String>(3)?,
            ))
        })
        .optional()
        .unwrap();
    let Some((fencing_epoch, hash, expires_at, state)) = row else {
        return Some("not-held");
    };
    if state != "held" {
        return Some("not-held");
    }
    if fencing_epoch != epoch {
        return Some("superseded-epoch");
    }
    if hash != rusqlite::types::Value::Text(hash_token(token)) {
        return Some("foreign-token");
    }
    if expires_at <= now {
        return Some("lease-expired");
    }
    None
}

/// `submitProjectionChannel`'s transaction: `advanced`, `replayed`, `regressed-watermark` or
/// `source-conflict`.
#[allow(clippy::too_many_arguments)]
pub fn submit(
    db: &Connection,
    target: &str,
    channel: &str,
    payload: &str,
    watermark: &str,
    captured_at: &str,
    expires_at: &str,
    now: &str,
) -> &'static str {
    db.execute_batch("BEGIN IMMEDIATE").unwrap();
    let row: Option<(String, String)> = db
        .query_row(SUBMIT_READ, [target, channel], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .optional()
        .unwrap();
    let outcome = match row {
        Some((previous, _)) if watermark < previous.as_str() => "regressed-watermark",
        Some((previous, stored)) if watermark == previous => {
            if stored == payload {
                "replayed"
            } else {
                let reason = format!("two payloads claim watermark {watermark}");
                db.execute(SUBMIT_CONFLICT, params![reason, now, target, channel])
                    .unwrap();
                "source-conflict"
            }
        }
        _ => {
            db.execute(
                SUBMIT_WRITE,
                params![
                    target,
                    channel,
                    watermark,
                    payload,
                    captured_at,
                    expires_at,
                    now
                ],
            )
            .unwrap();
            "advanced"
        }
    };
    db.execute_batch("COMMIT").unwrap();
    outcome
}
