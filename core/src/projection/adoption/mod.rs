//! Adoption of the tables the Memory Core's own JavaScript writer made (public repository
//! `neomjs/neo`, `ai/services/memory-core/hookProjectionLease.mjs`,
//! `hookProjectionSubmission.mjs`, `hookProjectionWriter.mjs`): tables of solewriter's names,
//! in another shape, in the host's database. The adoption converts them into solewriter's
//! tables in one write transaction; this is its pure half, for every executor (the SQLite
//! adapter and the Node binding):
//!
//! 1. the executor reads [`js_writer::READ_CATALOG`] and [`js_writer::READ_COLUMNS`] of both
//!    tables; [`survey`] says whether there is nothing to adopt, the tables are already
//!    solewriter's (adopted before: nothing to do), or they are the writer's;
//! 2. it reads every row ([`read_statements`]); [`plan`] decides the rows solewriter stores
//!    ([`carry`] says how) or refuses ([`AdoptionRefused`]);
//! 3. it runs [`AdoptionPlan::statements`] — drop the writer's tables, create solewriter's,
//!    insert the rows — and commits. Any refusal or failure rolls everything back.
//!
//! - [`js_writer`]: the writer's shape, its target id, its conflict reason.
//! - [`carry`]: how each row is carried over.
//! - [`refusal`]: the refusals.

pub mod carry;
pub mod js_writer;
pub mod refusal;
mod statements;
#[cfg(test)]
mod tests;
mod values;

pub use refusal::{AdoptionRefused, ValueProblem};
pub use statements::{Param, Statement};

use crate::projection::channel::{ChannelRecord, ChannelRegistry};
use crate::projection::lease::LeaseRecord;
use crate::projection::profile::Profile;
use crate::projection::schema::{Shape, TABLE_NAMES};
use crate::projection::target::TargetTuple;
use crate::time::Millis;
use js_writer::{ColumnInfo, CHANNEL_COLUMNS, LEASE_COLUMNS};
use std::collections::BTreeMap;

/// Rows as an executor returns them: each value as text, or `None` for NULL.
pub type Rows = [Vec<Option<String>>];

/// What the database holds under the two tables' names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Survey {
    /// Neither table: nothing to adopt (`initialize` creates solewriter's).
    NothingToAdopt,
    /// Both tables are solewriter's, of this schema: adopted before; nothing to do.
    AlreadyAdopted,
    /// Both tables are the JavaScript writer's.
    JsWriterTables,
}

/// What an adoption did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Adopted {
    /// The writer's tables were converted: this many lease and channel rows were carried.
    Converted {
        /// Lease rows written (the writer's, and admissions of targets with channels only).
        leases: usize,
        /// Channel rows written.
        channels: usize,
    },
    /// The tables were already solewriter's; nothing was changed.
    AlreadyAdopted,
    /// Neither table exists; nothing was changed.
    NothingToAdopt,
}

/// The expected columns of table `index` (of [`TABLE_NAMES`]).
const JS_COLUMNS: [&[ColumnInfo]; 2] = [&LEASE_COLUMNS, &CHANNEL_COLUMNS];

/// The statements reading every row of the writer's two tables, in [`TABLE_NAMES`] order.
pub fn read_statements() -> [String; 2] {
    [0, 1].map(|i| js_writer::read_rows(TABLE_NAMES[i], JS_COLUMNS[i]))
}

/// Decides from the catalog rows ([`js_writer::READ_CATALOG`]) and the column rows of each
/// table ([`js_writer::READ_COLUMNS`], in [`TABLE_NAMES`] order) what the database holds, for
/// an adoption into a store of `profile`. Refuses anything else: one table of the two, an
/// index, trigger or view attached, a column unknown, missing or declared otherwise;
/// solewriter's tables of another profile or of an earlier schema.
pub fn survey(
    profile: Profile,
    catalog: &Rows,
    columns: [&Rows; 2],
) -> Result<Survey, AdoptionRefused> {
    let mut statements = [None, None];
    for (index, table) in TABLE_NAMES.into_iter().enumerate() {
        let shape = |reason: String| AdoptionRefused::Shape { table, reason };
        let text = |row: &Vec<Option<String>>, i: usize| row.get(i).cloned().flatten();
        for object in catalog {
            let tbl_name = text(object, 2).unwrap_or_default();
            if !tbl_name.eq_ignore_ascii_case(table) {
                continue;
            }
            let (kind, name, sql) = (text(object, 0), text(object, 1), text(object, 3));
            match (kind.as_deref(), sql) {
                (Some("table"), Some(sql)) if name.as_deref() == Some(table) => {
                    statements[index] = Some(sql)
                }
                (Some("index"), None) => {} // the primary key's own index
                _ => {
                    return Err(shape(format!(
                        "found {} {} besides the writer's table",
                        kind.unwrap_or_default(),
                        name.unwrap_or_default()
                    )))
                }
            }
        }
    }
    match &statements {
        [None, None] => return Ok(Survey::NothingToAdopt),
        [Some(a), Some(b)] => match Shape::of([a, b]) {
            Some(Shape::Current(found)) if found == profile => return Ok(Survey::AlreadyAdopted),
            Some(Shape::Current(found)) => {
                return Err(AdoptionRefused::OtherProfile {
                    found: found.name(),
                    wanted: profile.name(),
                })
            }
            Some(Shape::V1 | Shape::Unmarked) => return Err(AdoptionRefused::EarlierSchema),
            None => {}
        },
        _ => {}
    }
    for (index, table) in TABLE_NAMES.into_iter().enumerate() {
        if statements[index].is_none() {
            return Err(AdoptionRefused::Shape {
                table,
                reason: "the table is missing".to_owned(),
            });
        }
        check_columns(table, JS_COLUMNS[index], columns[index])?;
    }
    Ok(Survey::JsWriterTables)
}

/// Refuses columns other than `expected` (name, declared type, NOT NULL, primary-key position,
/// no default).
fn check_columns(
    table: &'static str,
    expected: &[ColumnInfo],
    found: &Rows,
) -> Result<(), AdoptionRefused> {
    let described = |row: &Vec<Option<String>>| -> (String, String) {
        let at = |i: usize| row.get(i).cloned().flatten();
        let name = at(0).unwrap_or_default();
        let declared = format!(
            "{} notnull={} default={} pk={}",
            at(1).unwrap_or_default(),
            at(2).unwrap_or_default(),
            at(3).unwrap_or_else(|| "none".to_owned()),
            at(4).unwrap_or_default()
        );
        (name, declared)
    };
    let found: BTreeMap<String, String> = found.iter().map(described).collect();
    let shape = |reason: String| AdoptionRefused::Shape { table, reason };
    for name in found.keys() {
        if !expected.iter().any(|(n, ..)| n == name) {
            return Err(shape(format!("unknown column {name}")));
        }
    }
    for (name, declared_type, not_null, pk) in expected {
        let wanted = format!(
            "{declared_type} notnull={} default=none pk={pk}",
            u8::from(*not_null)
        );
        match found.get(*name) {
            None => return Err(shape(format!("missing column {name}"))),
            Some(declared) if *declared != wanted => {
                return Err(shape(format!(
                    "column {name} is declared `{declared}`, the writer declares `{wanted}`"
                )))
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// The rows solewriter stores in place of the writer's (or of its own earlier schema's).
#[derive(Clone, Debug)]
pub struct AdoptionPlan {
    /// The profile of the store the tables are created in.
    pub profile: Profile,
    /// One per target, by target id.
    pub leases: Vec<LeaseRecord>,
    /// In the order read.
    pub channels: Vec<ChannelRecord>,
}

/// Decides the adoption of the writer's rows (read by [`read_statements`]) into a store of
/// `profile` at broker time `now`, with the host's channel `registry` (each channel's
/// watermark kind) and, under the generic profile, the attested tuples of the host's targets
/// (their writer ids map them to solewriter's). Every row is carried ([`carry`]) or the whole
/// adoption is refused.
pub fn plan(
    now: Millis,
    profile: Profile,
    registry: &ChannelRegistry,
    tuples: &[TargetTuple],
    leases: &Rows,
    channels: &Rows,
) -> Result<AdoptionPlan, AdoptionRefused> {
    if now.0 > crate::STORAGE_INTEGER_MAX {
        return Err(AdoptionRefused::ClockOutOfRange(now.0));
    }
    registry
        .check_profile(profile)
        .map_err(AdoptionRefused::Registry)?;
    let targets = carry::TargetMap::new(profile, tuples)?;
    let mut by_target = BTreeMap::new();
    for raw in leases {
        let record = carry::lease(raw, &targets, now)?;
        by_target.insert(record.target_id.clone(), record);
    }
    let channels = channels
        .iter()
        .map(|raw| carry::channel(raw, &targets, registry))
        .collect::<Result<Vec<_>, _>>()?;
    for row in &channels {
        by_target
            .entry(row.target_id.clone())
            .or_insert_with(|| LeaseRecord::admitted(row.target_id.clone()));
    }
    Ok(AdoptionPlan {
        profile,
        leases: by_target.into_values().collect(),
        channels,
    })
}

impl AdoptionPlan {
    /// The upgrade of a store of an earlier schema ([`Shape::V1`], [`Shape::Unmarked`]; always
    /// of the generic profile) to the current one: its own rows, read and decoded as usual
    /// (the earlier tables have the same columns, less `conflict_reason`), written back into
    /// tables created again.
    pub fn upgrade(leases: Vec<LeaseRecord>, channels: Vec<ChannelRecord>) -> Self {
        AdoptionPlan {
            profile: Profile::Generic,
            leases,
            channels,
        }
    }

    /// What the executor runs, in order, inside the adoption's transaction.
    pub fn statements(&self) -> Vec<Statement> {
        statements::of(self)
    }

    /// What the adoption did, once committed.
    pub fn adopted(&self) -> Adopted {
        Adopted::Converted {
            leases: self.leases.len(),
            channels: self.channels.len(),
        }
    }
}
