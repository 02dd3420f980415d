//! The tables of the Memory Core's own JavaScript writer, as its source (public repository
//! `neomjs/neo`, `ai/services/memory-core/`) makes and fills them:
//!
//! - `hookProjectionLease.mjs` (`createHookProjectionTables`): `HookProjectionLeases(target_id
//!   TEXT PRIMARY KEY, fencing_epoch INTEGER NOT NULL, holder_token_hash TEXT,
//!   holder_instance_digest TEXT, acquired_at INTEGER, expires_at INTEGER, state TEXT NOT NULL
//!   CHECK(state IN ('held', 'released')))` and `HookProjectionChannels(target_id TEXT NOT NULL,
//!   channel TEXT NOT NULL, source_watermark TEXT NOT NULL, envelope_json TEXT NOT NULL,
//!   captured_at TEXT NOT NULL, expires_at TEXT NOT NULL, updated_at TEXT NOT NULL,
//!   conflict_reason TEXT, PRIMARY KEY (target_id, channel))`, neither `STRICT`.
//!   `acquireProjectionLease` upserts `held` rows (epoch + 1, the token hash, `now`,
//!   `now + leaseTtlMs`); a release sets `state = 'released', holder_token_hash = NULL,
//!   expires_at = 0`.
//! - `hookProjectionSubmission.mjs` (`submitProjectionChannel`): `source_watermark` is the
//!   producer's string, compared as a string; `envelope_json` is `JSON.stringify(envelope)`;
//!   the times are ISO strings; an equal watermark with another payload keeps the row and sets
//!   `conflict_reason = 'two payloads claim watermark <w>'`; a newer one clears it.
//!   (`addProjectionConflictColumn` adds `conflict_reason` to older tables with `ALTER TABLE`.)
//! - `hookProjectionWriter.mjs`: the target id is `sha256(fields.map(f => f + '=' +
//!   value).join('\0'))` in hex, cut to 32 digits (128 bits), over the same seven attested
//!   fields solewriter hashes; the token is 32 random bytes in hex and its stored hash is
//!   `sha256(<those 64 hex characters>)` in hex — not solewriter's SHA-256 of the 32 bytes.
//!
//! Here: the columns that shape is checked against, the statements that read it (every value
//! as its storage class and its text, so no executor converts anything), the writer's target
//! id, and its conflict reason.

use crate::projection::profile::Profile;
use crate::projection::target::TargetTuple;

/// A column as `pragma_table_info` reports it: name, declared type, NOT NULL, primary-key
/// position.
pub type ColumnInfo = (&'static str, &'static str, bool, u8);

/// `HookProjectionLeases` as `createHookProjectionTables` declares it.
pub const LEASE_COLUMNS: [ColumnInfo; 7] = [
    ("target_id", "TEXT", false, 1),
    ("fencing_epoch", "INTEGER", true, 0),
    ("holder_token_hash", "TEXT", false, 0),
    ("holder_instance_digest", "TEXT", false, 0),
    ("acquired_at", "INTEGER", false, 0),
    ("expires_at", "INTEGER", false, 0),
    ("state", "TEXT", true, 0),
];

/// `HookProjectionChannels` as `createHookProjectionTables` (or its `ALTER TABLE` migration)
/// declares it.
pub const CHANNEL_COLUMNS: [ColumnInfo; 8] = [
    ("target_id", "TEXT", true, 1),
    ("channel", "TEXT", true, 2),
    ("source_watermark", "TEXT", true, 0),
    ("envelope_json", "TEXT", true, 0),
    ("captured_at", "TEXT", true, 0),
    ("expires_at", "TEXT", true, 0),
    ("updated_at", "TEXT", true, 0),
    ("conflict_reason", "TEXT", false, 0),
];

/// Every object of `sqlite_master` that belongs to either table: `type, name, tbl_name, sql`.
pub const READ_CATALOG: &str = "SELECT type, name, tbl_name, sql FROM main.sqlite_master \
     WHERE lower(tbl_name) IN ('hookprojectionleases', 'hookprojectionchannels') ORDER BY name";

/// The columns of the table named by the one parameter: `name, type, notnull, dflt_value, pk`
/// (the integers as text).
pub const READ_COLUMNS: &str = "SELECT name, type, CAST(\"notnull\" AS TEXT), dflt_value, \
     CAST(pk AS TEXT) FROM pragma_table_info(?, 'main') ORDER BY cid";

/// The statement reading every row of `table` with `columns`: the `rowid` as text, then for
/// each column its storage class (`typeof`) and its value as text (a BLOB as hex), by rowid.
pub fn read_rows(table: &str, columns: &[ColumnInfo]) -> String {
    let cells: Vec<String> = columns
        .iter()
        .map(|(c, ..)| {
            format!("typeof({c}), CASE typeof({c}) WHEN 'blob' THEN hex({c}) ELSE CAST({c} AS TEXT) END")
        })
        .collect();
    format!(
        "SELECT CAST(rowid AS TEXT), {} FROM main.\"{table}\" ORDER BY rowid",
        cells.join(", ")
    )
}

/// The JavaScript writer's 128-bit target id of `tuple` (`deriveTargetId` in
/// `hookProjectionWriter.mjs`): the Memory Core profile's target id.
pub fn target_id(tuple: &TargetTuple) -> String {
    Profile::MemoryCore.target_id(tuple).as_str().to_owned()
}

pub use crate::projection::memory_core::conflict_reason;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_read_as_storage_class_and_text() {
        assert_eq!(
            read_rows("T", &[("a", "TEXT", false, 0)]),
            "SELECT CAST(rowid AS TEXT), typeof(a), CASE typeof(a) WHEN 'blob' THEN hex(a) ELSE CAST(a AS TEXT) END FROM main.\"T\" ORDER BY rowid"
        );
    }
}
