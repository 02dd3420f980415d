//! The statements that replace the JavaScript writer's tables (or solewriter's of an earlier
//! schema) by solewriter's, with the rows of an [`AdoptionPlan`]: drop the two tables, create
//! solewriter's of the plan's profile (the text of `projection::schema`), insert every row. Positional `?` parameters (better-sqlite3 binds no `?N`), bound by the
//! executor from [`Param`]s.

use super::AdoptionPlan;
use crate::projection::channel::ChannelRecord;
use crate::projection::lease::LeaseRecord;
use crate::projection::schema::{create_statement, Shape, TABLE_NAMES};
use crate::projection::watermark::Watermark;

/// A value to bind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Param {
    /// NULL.
    Null,
    /// An INTEGER.
    Integer(i64),
    /// A TEXT.
    Text(String),
    /// A BLOB.
    Blob(Vec<u8>),
}

/// One statement and its parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Statement {
    /// The SQL text.
    pub sql: String,
    /// The values of the `?` parameters, in order.
    pub params: Vec<Param>,
}

const INSERT_LEASE: &str = "INSERT INTO main.\"HookProjectionLeases\" (target_id, fencing_epoch, \
     holder_token_hash, holder_instance_digest, acquired_at, expires_at, state) \
     VALUES (?, ?, ?, ?, ?, ?, ?)";
const INSERT_CHANNEL: &str = "INSERT INTO main.\"HookProjectionChannels\" (target_id, channel, \
     source_watermark, envelope_json, captured_at, expires_at, updated_at, degraded_reason) \
     VALUES (?, ?, ?, ?, ?, ?, ?, ?)";

/// An integer of a carried row: every one was read from a SQLite INTEGER or bounded by
/// `STORAGE_INTEGER_MAX` (`plan` refuses a later clock), so the conversion is exact.
fn int(value: u64) -> Param {
    Param::Integer(value as i64)
}

fn lease(record: &LeaseRecord) -> Statement {
    let grant = record.state.grant();
    Statement {
        sql: INSERT_LEASE.to_owned(),
        params: vec![
            Param::Text(record.target_id.as_str().to_owned()),
            int(record.fencing_epoch),
            grant.map_or(Param::Null, |g| {
                Param::Blob(g.holder_token_hash.as_bytes().to_vec())
            }),
            grant.map_or(Param::Null, |g| {
                Param::Text(g.holder_instance_digest.as_str().to_owned())
            }),
            grant.map_or(Param::Null, |g| int(g.acquired_at.0)),
            grant.map_or(Param::Null, |g| int(g.expires_at.0)),
            Param::Text(record.state.name().to_owned()),
        ],
    }
}

fn channel(record: &ChannelRecord) -> Statement {
    Statement {
        sql: INSERT_CHANNEL.to_owned(),
        params: vec![
            Param::Text(record.target_id.as_str().to_owned()),
            Param::Text(record.channel.as_str().to_owned()),
            match &record.source_watermark {
                Watermark::Integer(n) => int(*n),
                Watermark::Text(t) => Param::Text(t.clone()),
            },
            Param::Text(record.envelope_json.clone()),
            int(record.captured_at.0),
            int(record.expires_at.0),
            int(record.updated_at.0),
            record
                .degraded_reason
                .map_or(Param::Null, |d| Param::Text(d.as_str().to_owned())),
        ],
    }
}

/// The statements of `plan`, in order.
pub(super) fn of(plan: &AdoptionPlan) -> Vec<Statement> {
    let bare = |sql: String| Statement {
        sql,
        params: Vec::new(),
    };
    // The channels refer to the leases: dropped first, created second.
    let mut out = vec![
        bare(format!("DROP TABLE main.\"{}\"", TABLE_NAMES[1])),
        bare(format!("DROP TABLE main.\"{}\"", TABLE_NAMES[0])),
        bare(create_statement(0, Shape::Current(plan.profile))),
        bare(create_statement(1, Shape::Current(plan.profile))),
    ];
    out.extend(plan.leases.iter().map(lease));
    out.extend(plan.channels.iter().map(channel));
    out
}
