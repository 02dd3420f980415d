//! The adoption of the Memory Core's JavaScript writer's tables, for the JS executor
//! (`lib/adopt.js`): the addon hands out the reading statements, surveys and plans
//! (`solewriter_core::projection::adoption`, the same decisions the SQLite adapter's
//! `adopt_js_writer_tables` executes); the host's connection runs every statement inside one
//! `BEGIN IMMEDIATE` transaction. Rows come in as arrays of text or null, exactly as the
//! reading statements return them; statements go out with their parameters as `null`,
//! `{"int": "<decimal>"}` (bound as a BigInt), `{"text": …}` or `{"blobHex": …}`.

use super::boundary::answer;
use super::config::channel_specs;
use super::failure::{Code, Failure, JsAnswer};
use super::from_js;
use napi_derive::napi;
use serde_json::{json, Value};
use solewriter_core::projection::adoption::{self, js_writer, AdoptionRefused, Param, Survey};
use solewriter_core::projection::channel::ChannelRegistry;
use solewriter_core::projection::profile::Profile;
use solewriter_core::projection::target::TargetTuple;
use solewriter_core::time::Millis;
use solewriter_files::clock::{Clock, SystemClock};

type Rows = Vec<Vec<Option<String>>>;

fn refused(e: AdoptionRefused) -> Failure {
    let detail = match &e {
        AdoptionRefused::Value {
            table,
            rowid,
            column,
            problem,
        } => {
            json!({"table": table, "rowid": rowid, "column": column, "problem": problem.to_string()})
        }
        AdoptionRefused::Shape { table, reason } => json!({"table": table, "reason": reason}),
        _ => Value::Null,
    };
    Failure::new(Code::AdoptionRefused, format!("adoption refused: {e}")).with(detail)
}

/// The reading statements: `{"catalog", "columns" (one parameter: the table), "tables",
/// "rows": [leases, channels]}`.
#[napi]
pub fn adoption_statements() -> JsAnswer {
    answer(|| {
        Ok(json!({
            "catalog": js_writer::READ_CATALOG,
            "columns": js_writer::READ_COLUMNS,
            "tables": solewriter_core::projection::schema::TABLE_NAMES,
            "rows": adoption::read_statements(),
        }))
    })
}

/// The profile named by `profile` (the generic one when absent).
fn profile(profile: Option<&str>) -> Result<Profile, Failure> {
    profile.map_or(Ok(Profile::Generic), |name| {
        Profile::parse(name).map_err(|e| super::invalid(format!("profile: {e}")))
    })
}

/// What the database holds for an adoption into a store of `profile` (the generic one when
/// absent): `{"survey": "nothingToAdopt" | "alreadyAdopted" | "jsWriterTables"}`, or
/// `ADOPTION_REFUSED`.
#[napi]
pub fn adoption_survey(
    profile_name: Option<String>,
    catalog: Rows,
    lease_columns: Rows,
    channel_columns: Rows,
) -> JsAnswer {
    answer(|| {
        adoption::survey(
            profile(profile_name.as_deref())?,
            &catalog,
            [&lease_columns, &channel_columns],
        )
        .map(|survey| {
            json!({"survey": match survey {
                Survey::NothingToAdopt => "nothingToAdopt",
                Survey::AlreadyAdopted => "alreadyAdopted",
                Survey::JsWriterTables => "jsWriterTables",
            }})
        })
        .map_err(refused)
    })
}

/// The statements of `plan`, as the JS executor binds them.
fn statements(plan: &adoption::AdoptionPlan) -> Vec<Value> {
    plan.statements()
        .into_iter()
        .map(|s| json!({"sql": s.sql, "params": s.params.into_iter().map(param).collect::<Vec<_>>()}))
        .collect()
}

fn param(p: Param) -> Value {
    match p {
        Param::Null => Value::Null,
        Param::Integer(i) => json!({"int": i.to_string()}),
        Param::Text(t) => json!({"text": t}),
        Param::Blob(b) => json!({"blobHex": solewriter_core::hex::encode(&b)}),
    }
}

/// The conversion of the rows read into a store of `profile_name` (the generic one when
/// absent), at `clock_ms` (the system clock when absent), with the host's channel registry
/// (`channels_json`, as `Options.channelsJson`: each channel's watermark kind) and the
/// attested tuples of the host's targets (a JSON array of tuple objects; the generic profile
/// maps the writer's ids through them): `{"statements": [{sql, params}], "leases": n,
/// "channels": m}`, or `ADOPTION_REFUSED`.
#[napi]
pub fn adoption_plan(
    clock_ms: Option<f64>,
    profile_name: Option<String>,
    channels_json: String,
    tuples_json: String,
    leases: Rows,
    channels: Rows,
) -> JsAnswer {
    answer(|| {
        let now = match clock_ms {
            Some(ms) => Millis(from_js(ms, "clockMs")?),
            None => SystemClock.now(),
        };
        let tuples: Vec<Value> = serde_json::from_str(&tuples_json)
            .map_err(|e| super::invalid(format!("tuples: {e}")))?;
        let tuples = tuples
            .iter()
            .map(|t| TargetTuple::from_json(&t.to_string()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| super::invalid(format!("tuples: {e}")))?;
        let specs =
            channel_specs(&channels_json).map_err(|e| super::invalid(format!("channels: {e}")))?;
        let registry =
            ChannelRegistry::new(specs).map_err(|e| super::invalid(format!("channels: {e}")))?;
        let plan = adoption::plan(
            now,
            profile(profile_name.as_deref())?,
            &registry,
            &tuples,
            &leases,
            &channels,
        )
        .map_err(refused)?;
        let statements = statements(&plan);
        Ok(
            json!({"statements": statements, "leases": plan.leases.len(), "channels": plan.channels.len()}),
        )
    })
}

/// The upgrade of tables of schema 1 (generic) to the current schema, from every row the
/// caller read (`readLeases`, `readAllChannels`: decoded strictly, a corrupt row refuses the
/// upgrade): `{"statements": [{sql, params}]}` — drop both tables, create them, insert the
/// rows (the same plan the Rust adapter runs).
#[napi]
pub fn upgrade_statements(
    leases: Vec<super::LeaseRow>,
    channels: Vec<super::ChannelRow>,
) -> JsAnswer {
    answer(|| {
        let leases = leases
            .into_iter()
            .map(|row| row.columns().decode())
            .collect::<Result<Vec<_>, _>>()?;
        let channels = channels
            .into_iter()
            .map(|row| row.columns().decode())
            .collect::<Result<Vec<_>, _>>()?;
        let plan = adoption::AdoptionPlan::upgrade(leases, channels);
        let statements = statements(&plan);
        Ok(json!({"statements": statements}))
    })
}
