//! The two operational tables, the schema-version marker they carry, and the checks that make
//! `initialize` and `open` refuse anything else.
//!
//! The tables live in the host's database, beside its own tables, so solewriter claims nothing
//! database-wide: no `application_id`, no `user_version`, no third table. The schema version
//! is a comment inside each table's `CREATE TABLE` statement (`-- solewriter schema 1`), which
//! SQLite keeps verbatim in `sqlite_master.sql`. A table's shape is verified by comparing that
//! stored statement with [`create_statement`] byte for byte, so any change — a column added,
//! a constraint dropped, another version — is seen; and no index, trigger or view may be
//! attached to either table.
//!
//! Stores made by release 0.1.0 carry no marker: their statements are the same without the
//! comment, and the version was in the database-wide pragmas (`application_id` 0x536f4c57,
//! `user_version` 1). Such a store opens as it is (the shape is the same); see [`Layout`].

use crate::error::{Error, Result};
use rusqlite::Connection;
use std::path::Path;

pub use solewriter_core::projection::schema::{
    create_statement, MARKER, SCHEMA_VERSION, TABLE_NAMES,
};

/// `application_id` of a release-0.1.0 store ("SoLW"); read only to recognise one.
pub const LEGACY_APPLICATION_ID: i64 = 0x536f_4c57;

/// What a database holds of solewriter's schema.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// Neither table exists.
    Absent,
    /// Both tables, marked with [`SCHEMA_VERSION`].
    Current,
    /// Both tables as release 0.1.0 made them (unmarked, with its pragmas): opens as it is.
    Legacy,
}

/// Creates both tables in the caller's transaction.
pub(crate) fn create(conn: &Connection) -> rusqlite::Result<()> {
    for index in 0..TABLE_NAMES.len() {
        conn.execute_batch(&create_statement(index, true))?;
    }
    Ok(())
}

/// Reads what the database at `path` (open on `conn`) holds of the schema. Anything but
/// [`Layout`] — one table without the other, another shape, another version, an index,
/// trigger or view attached to either table — is an error naming what did not match.
pub(crate) fn layout(conn: &Connection, path: &Path) -> Result<Layout> {
    let unreadable = |e: rusqlite::Error| Error::Unreadable {
        path: path.to_owned(),
        reason: e.to_string(),
    };
    let foreign = |reason: String| Error::ForeignSchema {
        path: path.to_owned(),
        reason,
    };
    let mut statements = Vec::with_capacity(TABLE_NAMES.len());
    for table in TABLE_NAMES {
        let mut stmt = conn
            .prepare(
                "SELECT type, name, sql FROM sqlite_master WHERE tbl_name = ?1 COLLATE NOCASE \
                 AND NOT (type = 'index' AND sql IS NULL) ORDER BY type DESC, name",
            )
            .map_err(unreadable)?;
        let objects = stmt
            .query_map([table], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, Option<String>>(2)?,
                ))
            })
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
            .map_err(unreadable)?;
        match objects.as_slice() {
            [] => statements.push(None),
            // One object of the table's name: its statement is compared below, so a view or a
            // table of another spelling is another shape.
            [(_, _, sql)] => statements.push(Some(sql.clone().unwrap_or_default())),
            _ => {
                let names: Vec<String> =
                    objects.iter().map(|(k, n, _)| format!("{k} {n}")).collect();
                return Err(foreign(format!(
                    "table {table} must stand alone, found {}",
                    names.join(", ")
                )));
            }
        }
    }
    let marked: Vec<bool> = (0..TABLE_NAMES.len())
        .map(|i| statements[i].as_deref() == Some(create_statement(i, true).as_str()))
        .collect();
    let unmarked: Vec<bool> = (0..TABLE_NAMES.len())
        .map(|i| statements[i].as_deref() == Some(create_statement(i, false).as_str()))
        .collect();
    if statements.iter().all(Option::is_none) {
        return Ok(Layout::Absent);
    }
    if marked.iter().all(|m| *m) {
        return Ok(Layout::Current);
    }
    if unmarked.iter().all(|m| *m) {
        let pragma = |name: &str| {
            conn.query_row(&format!("PRAGMA {name}"), [], |r| r.get::<_, i64>(0))
                .map_err(unreadable)
        };
        if pragma("application_id")? != LEGACY_APPLICATION_ID {
            return Err(foreign(
                "the two tables carry no schema marker and no release-0.1.0 application_id"
                    .to_owned(),
            ));
        }
        return match pragma("user_version")? {
            SCHEMA_VERSION => Ok(Layout::Legacy),
            found => Err(Error::SchemaVersion {
                path: path.to_owned(),
                found,
                expected: SCHEMA_VERSION,
            }),
        };
    }
    for (index, statement) in statements.iter().enumerate() {
        let table = TABLE_NAMES[index];
        let Some(sql) = statement else {
            return Err(foreign(format!("table {table} is missing")));
        };
        if let Some(found) = marked_version(sql).filter(|v| *v != SCHEMA_VERSION) {
            return Err(Error::SchemaVersion {
                path: path.to_owned(),
                found,
                expected: SCHEMA_VERSION,
            });
        }
        if !marked[index] && !unmarked[index] {
            return Err(foreign(format!("table {table} has another shape: {sql}")));
        }
    }
    Err(foreign(
        "the two tables are of different releases".to_owned(),
    ))
}

/// The version in a `-- solewriter schema N` marker of a stored statement, if any.
fn marked_version(sql: &str) -> Option<i64> {
    let rest = &sql[sql.find("-- solewriter schema ")? + "-- solewriter schema ".len()..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// Refuses a database whose journal mode is not WAL (the host sets it; solewriter never does
/// on a database it did not create).
pub(crate) fn verify_wal(conn: &Connection, path: &Path) -> Result<()> {
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .map_err(|e| Error::Unreadable {
            path: path.to_owned(),
            reason: e.to_string(),
        })?;
    if mode.eq_ignore_ascii_case("wal") {
        Ok(())
    } else {
        Err(Error::ForeignSchema {
            path: path.to_owned(),
            reason: format!("journal_mode {mode}; solewriter needs WAL, which the host sets"),
        })
    }
}

/// Refuses anything but both tables of [`SCHEMA_VERSION`] (or a release-0.1.0 store) in a
/// WAL database.
pub(crate) fn verify(conn: &Connection, path: &Path) -> Result<()> {
    match layout(conn, path)? {
        Layout::Absent => Err(Error::StoreMissing {
            path: path.to_owned(),
        }),
        Layout::Current | Layout::Legacy => verify_wal(conn, path),
    }
}
