//! The text of the two operational tables: their `CREATE TABLE` statements and the
//! schema-version marker they carry. One text for every executor: the SQLite adapter creates
//! and verifies the tables with it, and the Node binding hands it to the host's connection.
//! (Why a marker comment and not a pragma: see the adapters' `schema` module.)
//!
//! Schema 2 (this build) records the store's [`Profile`] in its marker and differs from
//! schema 1 in three columns:
//! - `HookProjectionLeases.target_id` is checked to the profile's id length (64 or 32);
//! - `HookProjectionChannels.source_watermark` holds an integer or a text watermark
//!   ([`crate::projection::watermark`]), checked by storage class;
//! - `HookProjectionChannels.conflict_reason` exists and is always `NULL`. The Memory Core's
//!   own JavaScript writer adds that column (`ALTER TABLE`) to a channels table that lacks it
//!   whenever its `ensureSchema()` runs; present, it makes that call change nothing, and the
//!   `CHECK` refuses any value the writer's statements would put in it.
//!
//! Stores of schema 1 (and release 0.1.0's unmarked tables) are upgraded by `initialize`
//! ([`Shape`], [`crate::projection::adoption`]): their rows are read, both tables dropped and
//! created again in schema 2, the rows written back, in one transaction.

use crate::projection::profile::Profile;

/// The schema version this build reads and writes.
pub const SCHEMA_VERSION: i64 = 2;

/// The two tables, in creation order (the channels refer to the leases).
pub const TABLE_NAMES: [&str; 2] = ["HookProjectionLeases", "HookProjectionChannels"];

/// A shape the two tables have been created in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// Release 0.1.0: schema 1 without a marker (the version was in the pragmas).
    Unmarked,
    /// Schema 1: marked `-- solewriter schema 1`.
    V1,
    /// Schema 2 ([`SCHEMA_VERSION`]) of a profile.
    Current(Profile),
}

impl Shape {
    /// Every shape a store may be found in, the current ones first.
    pub const ALL: [Shape; 4] = [
        Shape::Current(Profile::Generic),
        Shape::Current(Profile::MemoryCore),
        Shape::V1,
        Shape::Unmarked,
    ];

    /// The shape of the two stored `CREATE TABLE` statements, if they are one.
    pub fn of(statements: [&str; 2]) -> Option<Shape> {
        Self::ALL
            .into_iter()
            .find(|shape| (0..2).all(|i| statements[i] == create_statement(i, *shape)))
    }
}

/// The marker every table of [`SCHEMA_VERSION`] of `profile` carries at the start of its
/// column list: `-- solewriter schema 2 profile <profile name>`.
pub fn marker(profile: Profile) -> String {
    format!(
        "-- solewriter schema {SCHEMA_VERSION} profile {}",
        profile.name()
    )
}

/// Schema 1's column lists, in [`TABLE_NAMES`] order.
const COLUMNS_V1: [&str; 2] = [
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

/// Schema 2's column lists of `profile`, in [`TABLE_NAMES`] order.
fn columns_v2(profile: Profile) -> [String; 2] {
    [
        format!(
            "
    target_id              TEXT    NOT NULL PRIMARY KEY CHECK (length(target_id) = {}),
    fencing_epoch          INTEGER NOT NULL CHECK (fencing_epoch >= 0),
    holder_token_hash      BLOB    CHECK (holder_token_hash IS NULL OR length(holder_token_hash) = 32),
    holder_instance_digest TEXT,
    acquired_at            INTEGER,
    expires_at             INTEGER,
    state                  TEXT    NOT NULL CHECK (state IN ('unheld', 'held', 'released'))
",
            profile.target_id_len()
        ),
        "
    target_id        TEXT    NOT NULL REFERENCES HookProjectionLeases (target_id),
    channel          TEXT    NOT NULL,
    source_watermark ANY     NOT NULL CHECK (
                         (typeof(source_watermark) = 'integer' AND source_watermark >= 0)
                         OR (typeof(source_watermark) = 'text' AND length(source_watermark) > 0)),
    envelope_json    TEXT    NOT NULL,
    captured_at      INTEGER NOT NULL,
    expires_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    degraded_reason  TEXT,
    conflict_reason  TEXT    CHECK (conflict_reason IS NULL),
    PRIMARY KEY (target_id, channel)
"
        .to_owned(),
    ]
}

/// The `CREATE TABLE` statement of table `index` (of [`TABLE_NAMES`]) in `shape`, as SQLite
/// stores it.
pub fn create_statement(index: usize, shape: Shape) -> String {
    let name = TABLE_NAMES[index];
    let (marker, columns) = match shape {
        Shape::Unmarked => (String::new(), COLUMNS_V1[index].to_owned()),
        Shape::V1 => (
            " -- solewriter schema 1".to_owned(),
            COLUMNS_V1[index].to_owned(),
        ),
        Shape::Current(profile) => (
            format!(" {}", marker(profile)),
            columns_v2(profile)[index].clone(),
        ),
    };
    format!("CREATE TABLE {name} ({marker}{columns}) STRICT")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shape_is_recognised_and_only_its_own() {
        for shape in Shape::ALL {
            let statements = [create_statement(0, shape), create_statement(1, shape)];
            assert_eq!(Shape::of([&statements[0], &statements[1]]), Some(shape));
        }
        let generic = create_statement(0, Shape::Current(Profile::Generic));
        let memory_core = create_statement(1, Shape::Current(Profile::MemoryCore));
        assert_eq!(
            Shape::of([&generic, &memory_core]),
            None,
            "tables of two profiles"
        );
        assert!(generic.contains("length(target_id) = 64"));
        assert!(create_statement(0, Shape::Current(Profile::MemoryCore))
            .contains("length(target_id) = 32"));
        assert!(memory_core
            .contains("-- solewriter schema 2 profile live-lane-awareness-projection.v1"));
    }
}
