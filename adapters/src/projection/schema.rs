//! The two operational tables, the schema-version marker they carry, and the checks that make
//! `initialize` and `open` refuse anything else.
//!
//! The tables live in the host's database, beside its own tables, so solewriter claims nothing
//! database-wide: no `application_id`, no `user_version`, no third table. The schema version
//! and the store's profile are a comment inside each table's `CREATE TABLE` statement
//! (`-- solewriter schema 2 profile <name>`), which
//! SQLite keeps verbatim in `sqlite_master.sql`. A table's shape is verified by comparing that
//! stored statement with [`create_statement`] byte for byte, so any change — a column added,
//! a constraint dropped, another version — is seen; and no index, trigger or view may be
//! attached to either table.
//!
//! Stores of schema 1 (`-- solewriter schema 1`, and release 0.1.0's, which carry no marker:
//! their version was in the database-wide pragmas `application_id` 0x536f4c57 and
//! `user_version` 1) are upgraded by `initialize` in one transaction; `open` refuses them.
//! The statements of an upgrade or an adoption (the core's `AdoptionPlan`: drop, create,
//! insert) run here too ([`execute_plan`]), in the caller's transaction.

use crate::error::{Error, Result};
use rusqlite::types::Value;
use rusqlite::{params_from_iter, Connection};
use solewriter_core::projection::adoption::{AdoptionPlan, Param};
use std::path::Path;

use solewriter_core::projection::profile::Profile;
pub use solewriter_core::projection::schema::{
    create_statement, marker, Shape, SCHEMA_VERSION, TABLE_NAMES,
};

/// `application_id` of a release-0.1.0 store ("SoLW"); read only to recognise one.
pub const LEGACY_APPLICATION_ID: i64 = 0x536f_4c57;

/// What a database holds of solewriter's schema.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// Neither table exists.
    Absent,
    /// Both tables, of [`SCHEMA_VERSION`] and this profile.
    Current(Profile),
    /// Both tables of schema 1 (marked, or as release 0.1.0 made them, with its pragmas):
    /// `initialize` upgrades them; `open` refuses them.
    Earlier,
}

/// Creates both tables of `profile` in the caller's transaction.
pub(crate) fn create(conn: &Connection, profile: Profile) -> rusqlite::Result<()> {
    for index in 0..TABLE_NAMES.len() {
        conn.execute_batch(&create_statement(index, Shape::Current(profile)))?;
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
    let both = match (&statements[0], &statements[1]) {
        (None, None) => return Ok(Layout::Absent),
        (Some(a), Some(b)) => Shape::of([a, b]),
        _ => None,
    };
    match both {
        Some(Shape::Current(profile)) => return Ok(Layout::Current(profile)),
        Some(Shape::V1) => return Ok(Layout::Earlier),
        Some(Shape::Unmarked) => {
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
                1 => Ok(Layout::Earlier),
                found => Err(Error::SchemaVersion {
                    path: path.to_owned(),
                    found,
                    expected: SCHEMA_VERSION,
                }),
            };
        }
        None => {}
    }
    let known = |index: usize, sql: &str| {
        Shape::ALL
            .iter()
            .any(|shape| sql == create_statement(index, *shape))
    };
    for (index, statement) in statements.iter().enumerate() {
        let table = TABLE_NAMES[index];
        let Some(sql) = statement else {
            return Err(foreign(format!("table {table} is missing")));
        };
        if let Some(found) = marked_version(sql).filter(|v| *v > SCHEMA_VERSION) {
            return Err(Error::SchemaVersion {
                path: path.to_owned(),
                found,
                expected: SCHEMA_VERSION,
            });
        }
        if !known(index, sql) {
            return Err(foreign(format!("table {table} has another shape: {sql}")));
        }
    }
    Err(foreign(
        "the two tables are of different releases or profiles".to_owned(),
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

/// The profile of a store of both tables of [`SCHEMA_VERSION`] in a WAL database; anything
/// else is refused (tables of schema 1: [`Error::SchemaVersion`], which `initialize` upgrades).
pub(crate) fn verify(conn: &Connection, path: &Path) -> Result<Profile> {
    match layout(conn, path)? {
        Layout::Absent => Err(Error::StoreMissing {
            path: path.to_owned(),
        }),
        Layout::Earlier => Err(Error::SchemaVersion {
            path: path.to_owned(),
            found: 1,
            expected: SCHEMA_VERSION,
        }),
        Layout::Current(profile) => verify_wal(conn, path).map(|()| profile),
    }
}

/// Runs the statements of `plan` (drop the two tables, create them, insert the rows) in the
/// caller's transaction.
pub(crate) fn execute_plan(conn: &Connection, plan: &AdoptionPlan) -> rusqlite::Result<()> {
    for statement in plan.statements() {
        let params: Vec<Value> = statement.params.into_iter().map(value).collect();
        conn.execute(&statement.sql, params_from_iter(params))?;
    }
    Ok(())
}

fn value(param: Param) -> Value {
    match param {
        Param::Null => Value::Null,
        Param::Integer(i) => Value::Integer(i),
        Param::Text(t) => Value::Text(t),
        Param::Blob(b) => Value::Blob(b),
    }
}
