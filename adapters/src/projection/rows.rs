//! Reading and writing rows of `HookProjectionLeases` and `HookProjectionChannels`.
//!
//! Decoding is strict (`solewriter_core::projection::columns`, shared with the Node binding): a row
//! solewriter could not have written (negative integers, a token hash of the wrong length, an
//! unknown state) is an error, never a guess.

use crate::error::{Error, Result};
use rusqlite::{params, Connection, OptionalExtension, Row};
use solewriter_core::projection::channel::{ChannelName, ChannelRecord, DegradedReason};
use solewriter_core::projection::columns::{
    ChannelColumns, CorruptRow, LeaseColumns, WatermarkColumn,
};
use solewriter_core::projection::lease::{AcquirePlan, LeaseRecord, ReleasePlan};
use solewriter_core::projection::target::TargetId;
use solewriter_core::projection::watermark::Watermark;

const LEASE_COLUMNS: &str =
    "target_id, fencing_epoch, holder_token_hash, holder_instance_digest, acquired_at, expires_at, state";
/// The channel row's columns, in [`decode_channel`]'s order (a macro, so that the statements
/// below are constants).
macro_rules! channel_columns {
    () => {
        "target_id, channel, source_watermark, envelope_json, captured_at, expires_at, updated_at, degraded_reason"
    };
}
const CHANNEL_COLUMNS: &str = channel_columns!();
/// The channel rows of one target, by channel name: what every grant and publication reads.
pub(crate) const CHANNELS_OF_TARGET: &str = concat!(
    "SELECT ",
    channel_columns!(),
    " FROM HookProjectionChannels WHERE target_id = ?1 ORDER BY channel"
);

fn corrupt(what: impl std::fmt::Display) -> Error {
    Error::CorruptRow(what.to_string())
}

/// A `u64` as a SQLite integer; the core keeps every value within range.
fn int(value: u64) -> Result<i64> {
    i64::try_from(value).map_err(|_| corrupt(format!("integer {value} out of range")))
}

fn raw_lease(row: &Row<'_>) -> rusqlite::Result<LeaseColumns> {
    Ok(LeaseColumns {
        target_id: row.get(0)?,
        fencing_epoch: row.get(1)?,
        holder_token_hash: row.get(2)?,
        holder_instance_digest: row.get(3)?,
        acquired_at: row.get(4)?,
        expires_at: row.get(5)?,
        state: row.get(6)?,
    })
}

fn decode_lease(raw: LeaseColumns) -> Result<LeaseRecord> {
    raw.decode()
        .map_err(|CorruptRow(what)| Error::CorruptRow(what))
}

/// Inserts the admission row of `target` unless present (admission is idempotent).
pub(crate) fn insert_admitted(conn: &Connection, target: &TargetId) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT OR IGNORE INTO HookProjectionLeases (target_id, fencing_epoch, state) VALUES (?1, 0, 'unheld')",
    )?
    .execute([target.as_str()])?;
    Ok(())
}

/// The lease row of `target`.
pub(crate) fn read_lease(conn: &Connection, target: &TargetId) -> Result<Option<LeaseRecord>> {
    let sql = format!("SELECT {LEASE_COLUMNS} FROM HookProjectionLeases WHERE target_id = ?1");
    let raw = conn
        .prepare_cached(&sql)
        .and_then(|mut stmt| stmt.query_row([target.as_str()], raw_lease).optional())
        .map_err(Error::Sqlite)?;
    raw.map(decode_lease).transpose()
}

/// Every lease row, by target id.
pub(crate) fn read_leases(conn: &Connection) -> Result<Vec<LeaseRecord>> {
    let sql = format!("SELECT {LEASE_COLUMNS} FROM HookProjectionLeases ORDER BY target_id");
    let mut stmt = conn.prepare(&sql).map_err(Error::Sqlite)?;
    let raws = stmt
        .query_map([], raw_lease)
        .and_then(Iterator::collect::<rusqlite::Result<Vec<_>>>);
    raws.map_err(Error::Sqlite)?
        .into_iter()
        .map(decode_lease)
        .collect()
}

/// Executes a grant: the row moves from `prior_epoch` to the planned row, or nothing changes.
/// True if the row was granted.
pub(crate) fn write_acquire(conn: &Connection, plan: &AcquirePlan) -> Result<bool> {
    let grant = &plan.grant;
    let (epoch, acquired_at, expires_at, prior_epoch) = (
        int(plan.epoch)?,
        int(grant.acquired_at.0)?,
        int(grant.expires_at.0)?,
        int(plan.prior_epoch)?,
    );
    let n = conn
        .prepare_cached(
            "UPDATE HookProjectionLeases SET fencing_epoch = ?1, holder_token_hash = ?2, holder_instance_digest = ?3,
                 acquired_at = ?4, expires_at = ?5, state = 'held'
             WHERE target_id = ?6 AND fencing_epoch = ?7",
        )
        .and_then(|mut stmt| {
            stmt.execute(params![
                epoch,
                grant.holder_token_hash.as_bytes().as_slice(),
                grant.holder_instance_digest.as_str(),
                acquired_at,
                expires_at,
                plan.target_id.as_str(),
                prior_epoch,
            ])
        })
        .map_err(Error::Sqlite)?;
    Ok(n == 1)
}

/// Executes a conditional release; true if the row was released. The WHERE clause carries
/// the whole condition (target, epoch, token hash, held), so the write itself is fenced.
pub(crate) fn execute_release(conn: &Connection, plan: &ReleasePlan) -> Result<bool> {
    let epoch = int(plan.epoch)?;
    let n = conn
        .prepare_cached(
            "UPDATE HookProjectionLeases SET state = 'released'
             WHERE target_id = ?1 AND fencing_epoch = ?2 AND holder_token_hash = ?3 AND state = 'held'",
        )
        .and_then(|mut stmt| {
            stmt.execute(params![
                plan.target_id.as_str(),
                epoch,
                plan.token_hash.as_bytes().as_slice()
            ])
        })
        .map_err(Error::Sqlite)?;
    Ok(n == 1)
}

/// A stored `source_watermark`: an integer or text (anything else is a corrupt row).
fn watermark_column(row: &Row<'_>, index: usize) -> rusqlite::Result<Result<WatermarkColumn>> {
    use rusqlite::types::ValueRef;
    Ok(match row.get_ref(index)? {
        ValueRef::Integer(n) => Ok(WatermarkColumn::Integer(n)),
        ValueRef::Text(t) => String::from_utf8(t.to_vec())
            .map(WatermarkColumn::Text)
            .map_err(|_| corrupt("source_watermark is not UTF-8")),
        _ => Err(corrupt("source_watermark is neither an integer nor text")),
    })
}

fn decode_channel(row: &Row<'_>) -> rusqlite::Result<Result<ChannelRecord>> {
    let source_watermark = match watermark_column(row, 2)? {
        Ok(column) => column,
        Err(e) => return Ok(Err(e)),
    };
    let columns = ChannelColumns {
        target_id: row.get(0)?,
        channel: row.get(1)?,
        source_watermark,
        envelope_json: row.get(3)?,
        captured_at: row.get(4)?,
        expires_at: row.get(5)?,
        updated_at: row.get(6)?,
        degraded_reason: row.get(7)?,
    };
    Ok(columns
        .decode()
        .map_err(|CorruptRow(what)| Error::CorruptRow(what)))
}

/// The channel row of (`target`, `channel`).
pub(crate) fn read_channel(
    conn: &Connection,
    target: &TargetId,
    channel: &ChannelName,
) -> Result<Option<ChannelRecord>> {
    let sql = format!("SELECT {CHANNEL_COLUMNS} FROM HookProjectionChannels WHERE target_id = ?1 AND channel = ?2");
    let row = conn.prepare_cached(&sql).and_then(|mut stmt| {
        stmt.query_row([target.as_str(), channel.as_str()], decode_channel)
            .optional()
    });
    row.map_err(Error::Sqlite)?.transpose()
}

/// Every channel row, by target and channel name.
pub(crate) fn read_all_channels(conn: &Connection) -> Result<Vec<ChannelRecord>> {
    let sql =
        format!("SELECT {CHANNEL_COLUMNS} FROM HookProjectionChannels ORDER BY target_id, channel");
    let mut stmt = conn.prepare(&sql).map_err(Error::Sqlite)?;
    let rows = stmt
        .query_map([], decode_channel)
        .and_then(Iterator::collect::<rusqlite::Result<Vec<_>>>);
    rows.map_err(Error::Sqlite)?.into_iter().collect()
}

/// The channel rows of `target`, by channel name.
pub(crate) fn read_channels(conn: &Connection, target: &TargetId) -> Result<Vec<ChannelRecord>> {
    let mut stmt = conn
        .prepare_cached(CHANNELS_OF_TARGET)
        .map_err(Error::Sqlite)?;
    let rows = stmt
        .query_map([target.as_str()], decode_channel)
        .and_then(Iterator::collect::<rusqlite::Result<Vec<_>>>);
    rows.map_err(Error::Sqlite)?.into_iter().collect()
}

/// Inserts or replaces a channel row.
pub(crate) fn upsert_channel(conn: &Connection, record: &ChannelRecord) -> Result<()> {
    let watermark = match &record.source_watermark {
        Watermark::Integer(n) => rusqlite::types::Value::Integer(int(*n)?),
        Watermark::Text(t) => rusqlite::types::Value::Text(t.clone()),
    };
    let (captured_at, expires_at, updated_at) = (
        int(record.captured_at.0)?,
        int(record.expires_at.0)?,
        int(record.updated_at.0)?,
    );
    conn.prepare_cached(&format!(
        "INSERT OR REPLACE INTO HookProjectionChannels ({CHANNEL_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"
    ))
    .and_then(|mut stmt| {
        stmt.execute(params![
            record.target_id.as_str(),
            record.channel.as_str(),
            watermark,
            record.envelope_json,
            captured_at,
            expires_at,
            updated_at,
            record.degraded_reason.map(DegradedReason::as_str),
        ])
    })
    .map_err(Error::Sqlite)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    //! The conditional writes are fenced by their own `WHERE` clauses, not only by the core's
    //! decision made before them: each condition, broken alone, changes no row.
    use super::*;
    use solewriter_core::names::InstanceDigest;
    use solewriter_core::projection::lease::RecordedGrant;
    use solewriter_core::projection::profile::Profile;
    use solewriter_core::time::Millis;
    use solewriter_core::token::HolderToken;

    fn store() -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        crate::projection::schema::create(&conn, Profile::Generic).unwrap();
        conn
    }

    fn target() -> TargetId {
        TargetId::parse(&"ab".repeat(32)).unwrap()
    }

    fn grant(epoch: u64, token: u8) -> AcquirePlan {
        AcquirePlan {
            target_id: target(),
            prior_epoch: epoch - 1,
            epoch,
            grant: RecordedGrant {
                holder_token_hash: HolderToken::from_bytes([token; 32]).hash(),
                holder_instance_digest: InstanceDigest::parse("h").unwrap(),
                acquired_at: Millis(10),
                expires_at: Millis(20),
            },
        }
    }

    fn release(epoch: u64, token: u8) -> ReleasePlan {
        ReleasePlan {
            target_id: target(),
            epoch,
            token_hash: HolderToken::from_bytes([token; 32]).hash(),
        }
    }

    fn state(conn: &Connection) -> (u64, String) {
        let row = read_lease(conn, &target()).unwrap().unwrap();
        (row.fencing_epoch, row.state.name().to_owned())
    }

    #[test]
    fn a_grant_is_written_only_over_the_epoch_it_was_decided_on() {
        let conn = store();
        insert_admitted(&conn, &target()).unwrap();
        assert!(write_acquire(&conn, &grant(1, 1)).unwrap());
        assert!(
            !write_acquire(&conn, &grant(1, 2)).unwrap(),
            "stale prior epoch"
        );
        assert_eq!(state(&conn), (1, "held".into()));
        assert!(write_acquire(&conn, &grant(2, 2)).unwrap());
        assert_eq!(state(&conn), (2, "held".into()));
    }

    #[test]
    fn a_release_changes_the_row_only_with_its_epoch_its_token_and_a_held_row() {
        let conn = store();
        insert_admitted(&conn, &target()).unwrap();
        assert!(write_acquire(&conn, &grant(1, 1)).unwrap());
        assert!(write_acquire(&conn, &grant(2, 2)).unwrap());
        assert!(
            !execute_release(&conn, &release(1, 2)).unwrap(),
            "wrong epoch"
        );
        assert!(
            !execute_release(&conn, &release(2, 1)).unwrap(),
            "wrong token"
        );
        assert_eq!(state(&conn), (2, "held".into()));
        assert!(execute_release(&conn, &release(2, 2)).unwrap());
        assert_eq!(state(&conn), (2, "released".into()));
        assert!(
            !execute_release(&conn, &release(2, 2)).unwrap(),
            "already released"
        );
    }
}
