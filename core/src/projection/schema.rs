//! The text of the two operational tables: their `CREATE TABLE` statements and the
//! schema-version marker they carry. One text for every executor: the SQLite adapter creates
//! and verifies the tables with it, and the Node binding hands it to the host's connection.
//! (Why a marker comment and not a pragma: see the adapters' `schema` module.)

/// The schema version this build reads and writes.
pub const SCHEMA_VERSION: i64 = 1;

/// The marker every table of [`SCHEMA_VERSION`] carries at the start of its column list.
pub const MARKER: &str = "-- solewriter schema 1";

/// The two tables, in creation order (the channels refer to the leases).
pub const TABLE_NAMES: [&str; 2] = ["HookProjectionLeases", "HookProjectionChannels"];

/// The column list of each table, in [`TABLE_NAMES`] order (everything between the marker and
/// the closing `) STRICT`).
const COLUMNS: [&str; 2] = [
    "
    target_id              TEXT    NOT NULL PRIMARY KEY CHECK (length(target_id) = 64),
    fencing_epoch          INTEGER NOT NULL CHECK (fencing_epoch >= 0),
    holder_token_hash      BLOB    CHECK (holder_token_hash IS NULL OR length(holder_token_hash) = 32),
    holder_instance_digest TEXT,
    acquired_at            INTEGER,
    expires_at             INTEGER,
    state                  TEXT    NOT NULL CHECK (state IN ('unheld', 'held', 'released'))
",
    "
    target_id        TEXT    NOT NULL REFERENCES HookProjectionLeases (target_id),
    channel          TEXT    NOT NULL,
    source_watermark INTEGER NOT NULL CHECK (source_watermark >= 0),
    envelope_json    TEXT    NOT NULL,
    captured_at      INTEGER NOT NULL,
    expires_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    degraded_reason  TEXT,
    PRIMARY KEY (target_id, channel)
",
];

/// The `CREATE TABLE` statement of table `index` (of [`TABLE_NAMES`]), as SQLite stores it;
/// with the [`MARKER`], or as release 0.1.0 wrote it (`marked == false`).
pub fn create_statement(index: usize, marked: bool) -> String {
    let (name, columns) = (TABLE_NAMES[index], COLUMNS[index]);
    let marker = if marked {
        format!(" {MARKER}")
    } else {
        String::new()
    };
    format!("CREATE TABLE {name} ({marker}{columns}) STRICT")
}
