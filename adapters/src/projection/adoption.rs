//! Adoption of the tables the Memory Core's own JavaScript writer made in the host's database
//! (`ai/services/memory-core/hookProjection*.mjs` of the public `neomjs/neo` repository): the
//! SQLite executor of `solewriter_core::projection::adoption`, which decides everything.
//!
//! One `BEGIN IMMEDIATE` transaction: survey the two tables, read every row, plan, drop the
//! writer's tables, create solewriter's, insert the carried rows, commit. A refusal or any
//! failure before the commit rolls it all back: the writer's tables stay as they were.

use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::projection::schema;
use crate::projection::store::{begin_immediate, open_existing, ProjectionStore};
use rusqlite::{params_from_iter, Connection};
use solewriter_core::config::TimingConfig;
use solewriter_core::projection::adoption::{self, js_writer, Survey};
pub use solewriter_core::projection::adoption::{Adopted, AdoptionRefused, ValueProblem};
use solewriter_core::projection::channel::ChannelRegistry;
use solewriter_core::projection::profile::Profile;
use solewriter_core::projection::schema::TABLE_NAMES;
use solewriter_core::projection::target::TargetTuple;
use std::path::Path;

/// Every row of `sql` (bound to `params`), each value as text or `None` for NULL.
fn read(
    conn: &Connection,
    sql: &str,
    params: &[&str],
) -> rusqlite::Result<Vec<Vec<Option<String>>>> {
    let mut stmt = conn.prepare(sql)?;
    let width = stmt.column_count();
    let rows = stmt.query_map(params_from_iter(params), |row| {
        (0..width)
            .map(|i| row.get::<_, Option<String>>(i))
            .collect()
    })?;
    rows.collect()
}

impl ProjectionStore {
    /// Converts the JavaScript writer's `HookProjectionLeases` and `HookProjectionChannels` in
    /// the host's WAL database at `db_path` into solewriter's two tables of `profile`, in one
    /// `BEGIN IMMEDIATE` transaction, at the broker time `clock` reads. Each channel's
    /// watermarks are carried as the kind `registry` declares. Under the Memory Core profile
    /// the writer's target ids are kept; under the generic profile `tuples` (the attested
    /// tuples of the host's targets) map them to solewriter's. What is carried and what is
    /// refused:
    /// `solewriter_core::projection::adoption::carry` and docs/memory-core.md.
    ///
    /// Idempotent: tables already solewriter's answer [`Adopted::AlreadyAdopted`], no tables
    /// [`Adopted::NothingToAdopt`], both changing nothing. Refuses, changing nothing:
    /// [`Error::AdoptionRefused`] (a value, column or object it does not understand),
    /// [`Error::ForeignSchema`] (not WAL), [`Error::Busy`]; a failure while converting
    /// ([`Error::Sqlite`]) rolls the whole conversion back.
    pub fn adopt_js_writer_tables(
        db_path: &Path,
        timing: &TimingConfig,
        clock: &dyn Clock,
        profile: Profile,
        registry: &ChannelRegistry,
        tuples: &[TargetTuple],
    ) -> Result<Adopted> {
        let conn = open_existing(db_path, timing)?;
        let tx = begin_immediate(&conn, db_path, timing)?;
        schema::verify_wal(&tx, db_path)?;
        let catalog = read(&tx, js_writer::READ_CATALOG, &[]).map_err(Error::Sqlite)?;
        let columns = TABLE_NAMES
            .map(|table| read(&tx, js_writer::READ_COLUMNS, &[table]))
            .into_iter()
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(Error::Sqlite)?;
        match adoption::survey(profile, &catalog, [&columns[0], &columns[1]])? {
            Survey::NothingToAdopt => return Ok(Adopted::NothingToAdopt),
            Survey::AlreadyAdopted => return Ok(Adopted::AlreadyAdopted),
            Survey::JsWriterTables => {}
        }
        let [leases, channels] = adoption::read_statements();
        let leases = read(&tx, &leases, &[]).map_err(Error::Sqlite)?;
        let channels = read(&tx, &channels, &[]).map_err(Error::Sqlite)?;
        let plan = adoption::plan(clock.now(), profile, registry, tuples, &leases, &channels)?;
        schema::execute_plan(&tx, &plan).map_err(Error::Sqlite)?;
        tx.commit().map_err(Error::Sqlite)?;
        tracing::info!(adopted = ?plan.adopted(), "JavaScript writer's tables adopted");
        Ok(plan.adopted())
    }
}
