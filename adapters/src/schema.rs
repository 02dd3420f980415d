//! The two operational tables, the schema version, and the checks that make `open` refuse a
//! store it did not create (missing, foreign, outdated, unreadable).

use crate::error::{Error, Result};
use rusqlite::Connection;
use std::path::Path;

/// `PRAGMA user_version` of the current schema.
pub const SCHEMA_VERSION: i64 = 1;
/// `PRAGMA application_id` of a solewriter store ("SoLW").
pub const APPLICATION_ID: i64 = 0x536f_4c57;

/// The DDL of the store: exactly the two tables of the storage contract.
pub const DDL: &str = "
CREATE TABLE HookProjectionLeases (
    target_id              TEXT    NOT NULL PRIMARY KEY CHECK (length(target_id) = 64),
    fencing_epoch          INTEGER NOT NULL CHECK (fencing_epoch >= 0),
    holder_token_hash      BLOB    CHECK (holder_token_hash IS NULL OR length(holder_token_hash) = 32),
    holder_instance_digest TEXT,
    acquired_at            INTEGER,
    expires_at             INTEGER,
    state                  TEXT    NOT NULL CHECK (state IN ('unheld', 'held', 'released'))
) STRICT;
CREATE TABLE HookProjectionChannels (
    target_id        TEXT    NOT NULL REFERENCES HookProjectionLeases (target_id),
    channel          TEXT    NOT NULL,
    source_watermark INTEGER NOT NULL CHECK (source_watermark >= 0),
    envelope_json    TEXT    NOT NULL,
    captured_at      INTEGER NOT NULL,
    expires_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    degraded_reason  TEXT,
    PRIMARY KEY (target_id, channel)
) STRICT;
";

/// The columns each table must have, in order.
pub const TABLES: [(&str, &[&str]); 2] = [
    (
        "HookProjectionLeases",
        &[
            "target_id",
            "fencing_epoch",
            "holder_token_hash",
            "holder_instance_digest",
            "acquired_at",
            "expires_at",
            "state",
        ],
    ),
    (
        "HookProjectionChannels",
        &[
            "target_id",
            "channel",
            "source_watermark",
            "envelope_json",
            "captured_at",
            "expires_at",
            "updated_at",
            "degraded_reason",
        ],
    ),
];

/// Creates the schema in a fresh database (inside one transaction).
pub(crate) fn create(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(&format!(
        "BEGIN IMMEDIATE;{DDL}PRAGMA application_id = {APPLICATION_ID};PRAGMA user_version = {SCHEMA_VERSION};COMMIT;"
    ))
}

/// Refuses anything but a solewriter store of [`SCHEMA_VERSION`] in WAL mode.
pub(crate) fn verify(conn: &Connection, path: &Path) -> Result<()> {
    let unreadable = |e: rusqlite::Error| Error::Unreadable {
        path: path.to_owned(),
        reason: e.to_string(),
    };
    let foreign = |reason: String| Error::ForeignSchema {
        path: path.to_owned(),
        reason,
    };
    let app: i64 = conn
        .query_row("PRAGMA application_id", [], |r| r.get(0))
        .map_err(unreadable)?;
    if app != APPLICATION_ID {
        return Err(foreign(format!("application_id {app:#x}")));
    }
    let found: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(unreadable)?;
    if found != SCHEMA_VERSION {
        return Err(Error::SchemaVersion {
            path: path.to_owned(),
            found,
            expected: SCHEMA_VERSION,
        });
    }
    for (table, expected) in TABLES {
        let mut stmt = conn
            .prepare("SELECT name FROM pragma_table_info(?1) ORDER BY cid")
            .map_err(unreadable)?;
        let columns = stmt
            .query_map([table], |r| r.get::<_, String>(0))
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
            .map_err(unreadable)?;
        if columns != expected {
            return Err(foreign(format!("table {table} has columns {columns:?}")));
        }
    }
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .map_err(unreadable)?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(foreign(format!("journal_mode {mode}, expected wal")));
    }
    Ok(())
}
