//! The adoption's decisions on rows as the JavaScript writer stores them, and each refusal.

use super::carry::NO_SURVIVING_HASH;
use super::js_writer::{self, CHANNEL_COLUMNS, LEASE_COLUMNS};
use super::*;
use crate::projection::channel::{ChannelName, ChannelSpec, DegradedReason, ProducerId};
use crate::projection::lease::LeaseState;
use crate::projection::schema::{create_statement, Shape};
use crate::projection::watermark::{Watermark, WatermarkKind};
use crate::token::HolderToken;

const NOW: Millis = Millis(1_784_203_500_000); // 2026-07-16T12:05:00.000Z

fn tuple(agent: &str) -> TargetTuple {
    TargetTuple::new([
        "1",
        "hook-projection",
        agent,
        "claude-code",
        "inst-1",
        "ws-1",
        "live-lane",
    ])
    .unwrap()
}

fn text(value: &str) -> (String, Option<String>) {
    ("text".into(), Some(value.into()))
}

fn integer(value: i64) -> (String, Option<String>) {
    ("integer".into(), Some(value.to_string()))
}

fn null() -> (String, Option<String>) {
    ("null".into(), None)
}

fn row(rowid: i64, cells: Vec<(String, Option<String>)>) -> Vec<Option<String>> {
    let mut raw = vec![Some(rowid.to_string())];
    for (kind, value) in cells {
        raw.push(Some(kind));
        raw.push(value);
    }
    raw
}

/// The token hash the writer stores: sha256 of the token's 64 hex characters, in hex.
const WRITER_HASH: &str = "271a413bd339c5709fdceaec41f14f11e9fbfb5042d72d331c65f32b284cd09a";

fn held(agent: &str, epoch: i64, acquired: i64, expires: i64) -> Vec<(String, Option<String>)> {
    vec![
        text(&js_writer::target_id(&tuple(agent))),
        integer(epoch),
        text(WRITER_HASH),
        text("inst-1"),
        integer(acquired),
        integer(expires),
        text("held"),
    ]
}

fn released(agent: &str, epoch: i64, acquired: i64) -> Vec<(String, Option<String>)> {
    vec![
        text(&js_writer::target_id(&tuple(agent))),
        integer(epoch),
        null(),
        text("inst-1"),
        integer(acquired),
        integer(0),
        text("released"),
    ]
}

fn channel_cells(
    agent: &str,
    watermark: &str,
    conflict: Option<&str>,
) -> Vec<(String, Option<String>)> {
    vec![
        text(&js_writer::target_id(&tuple(agent))),
        text("computed-route"),
        text(watermark),
        text(r#"{"schemaVersion":"computed-route.v1","notAuthority":true}"#),
        text("2026-07-16T12:00:00.000Z"),
        text("2026-07-16T13:00:00.000Z"),
        text("2026-07-16T12:01:00.000Z"),
        conflict.map_or_else(null, text),
    ]
}

fn tuples() -> Vec<TargetTuple> {
    ["a", "b", "c", "d"].map(tuple).to_vec()
}

/// The host's registry: `computed-route`, of integer watermarks.
fn registry() -> ChannelRegistry {
    registry_of(WatermarkKind::Integer)
}

fn registry_of(kind: WatermarkKind) -> ChannelRegistry {
    ChannelRegistry::new([ChannelSpec {
        name: ChannelName::parse("computed-route").unwrap(),
        owner: ProducerId::parse("router").unwrap(),
        envelope_schema: "computed-route.v1".into(),
        max_envelope_bytes: 4096,
        watermark: kind,
        envelope_json_schema: None,
    }])
    .unwrap()
}

fn adopt(leases: &Rows, channels: &Rows) -> Result<AdoptionPlan, AdoptionRefused> {
    plan(
        NOW,
        Profile::Generic,
        &registry(),
        &tuples(),
        leases,
        channels,
    )
}

#[test]
fn grants_end_at_the_adoption_epochs_stay_and_channels_carry_over() {
    let now = NOW.0 as i64;
    let leases = [
        row(1, held("a", 7, now - 1_000, now + 60_000)), // live
        row(2, held("b", 3, now - 9_000, now - 4_000)),  // already expired
        row(3, released("c", 12, now - 5_000)),
    ];
    // As `submitProjectionChannel` writes it, spelled out (not derived from the code under test).
    let reason = "two payloads claim watermark 42";
    let channels = [
        row(1, channel_cells("a", "41", None)),
        row(2, channel_cells("d", "42", Some(reason))),
    ];
    let plan = adopt(&leases, &channels).unwrap();
    let by_agent = |agent: &str| {
        let id = tuple(agent).target_id();
        plan.leases
            .iter()
            .find(|l| l.target_id == id)
            .unwrap()
            .clone()
    };
    let a = by_agent("a");
    assert_eq!(a.fencing_epoch, 7);
    let LeaseState::Held(g) = &a.state else {
        panic!("{a:?}")
    };
    assert_eq!((g.acquired_at, g.expires_at), (Millis(NOW.0 - 1_000), NOW));
    assert_eq!(
        crate::hex::encode(g.holder_token_hash.as_bytes()),
        WRITER_HASH
    );
    assert_eq!(g.holder_instance_digest.as_str(), "inst-1");
    // The writer's token cannot validate against it: solewriter hashes the 32 bytes.
    let writer_token = HolderToken::from_hex(&"ab".repeat(32)).unwrap();
    assert!(!writer_token.hash().ct_eq(&g.holder_token_hash));
    let b = by_agent("b");
    let LeaseState::Held(g) = &b.state else {
        panic!("{b:?}")
    };
    assert_eq!((b.fencing_epoch, g.expires_at), (3, Millis(NOW.0 - 4_000)));
    let c = by_agent("c");
    let LeaseState::Released(g) = &c.state else {
        panic!("{c:?}")
    };
    assert_eq!(c.fencing_epoch, 12);
    assert_eq!(g.holder_token_hash.as_bytes(), &NO_SURVIVING_HASH);
    assert_eq!((g.acquired_at, g.expires_at), (Millis(NOW.0 - 5_000), NOW));
    let d = by_agent("d");
    assert!(
        matches!(d.state, LeaseState::Unheld) && d.fencing_epoch == 0,
        "admitted"
    );
    assert_eq!(plan.leases.len(), 4);
    assert_eq!(plan.channels.len(), 2);
    let (first, second) = (&plan.channels[0], &plan.channels[1]);
    assert_eq!(first.source_watermark, Watermark::Integer(41));
    assert_eq!(first.degraded_reason, None);
    assert_eq!(first.captured_at, Millis(NOW.0 - 300_000));
    assert_eq!(first.expires_at, Millis(NOW.0 + 3_300_000));
    assert_eq!(first.updated_at, Millis(NOW.0 - 240_000));
    assert_eq!(
        first.envelope_json,
        r#"{"schemaVersion":"computed-route.v1","notAuthority":true}"#
    );
    assert_eq!(second.degraded_reason, Some(DegradedReason::SourceConflict));
    assert_eq!(
        plan.adopted(),
        Adopted::Converted {
            leases: 4,
            channels: 2
        }
    );
    // Drop both, create both, then one insert per row, leases first.
    let statements = plan.statements();
    assert_eq!(statements.len(), 4 + 4 + 2);
    assert_eq!(
        statements[0].sql,
        "DROP TABLE main.\"HookProjectionChannels\""
    );
    assert_eq!(
        statements[1].sql,
        "DROP TABLE main.\"HookProjectionLeases\""
    );
    assert_eq!(
        statements[2].sql,
        create_statement(0, Shape::Current(Profile::Generic))
    );
    assert_eq!(
        statements[3].sql,
        create_statement(1, Shape::Current(Profile::Generic))
    );
    assert!(statements[4..8].iter().all(|s| s
        .sql
        .starts_with("INSERT INTO main.\"HookProjectionLeases\"")));
    let admitted = statements[4..8]
        .iter()
        .find(|s| s.params[0] == Param::Text(tuple("d").target_id().as_str().into()))
        .unwrap();
    assert_eq!(
        admitted.params[1..],
        [
            Param::Integer(0),
            Param::Null,
            Param::Null,
            Param::Null,
            Param::Null,
            Param::Text("unheld".into())
        ]
    );
    assert_eq!(
        statements[9].params[7],
        Param::Text("source-conflict".into())
    );
    assert_eq!(statements[9].params[2], Param::Integer(42));
}

fn refused_lease(cells: Vec<(String, Option<String>)>) -> (&'static str, ValueProblem) {
    match adopt(&[row(1, held("a", 1, 1, 2)), row(9, cells)], &[]).unwrap_err() {
        AdoptionRefused::Value {
            table,
            rowid: 9,
            column,
            problem,
        } => {
            assert_eq!(table, "HookProjectionLeases");
            (column, problem)
        }
        other => panic!("{other:?}"),
    }
}

fn refused_channel(cells: Vec<(String, Option<String>)>) -> (&'static str, ValueProblem) {
    match adopt(&[], &[row(1, channel_cells("a", "1", None)), row(5, cells)]).unwrap_err() {
        AdoptionRefused::Value {
            table,
            rowid: 5,
            column,
            problem,
        } => {
            assert_eq!(table, "HookProjectionChannels");
            (column, problem)
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn each_lease_value_the_writer_would_not_store_is_refused_by_name() {
    let now = NOW.0 as i64;
    let with = |i: usize, cell| {
        let mut cells = held("a", 2, now - 10, now + 10);
        cells[i] = cell;
        cells
    };
    let cases = [
        (
            with(6, text("stolen")),
            "state",
            ValueProblem::UnknownState("stolen".into()),
        ),
        (
            with(0, text("ADE4FAF905981C8A3ABE4C13EF31779F")),
            "target_id",
            ValueProblem::BadHex("ADE4FAF905981C8A3ABE4C13EF31779F".into()),
        ),
        (
            with(0, text(&"0".repeat(32))),
            "target_id",
            ValueProblem::UnmappedTarget("0".repeat(32)),
        ),
        (
            with(0, text(tuple("a").target_id().as_str())),
            "target_id",
            ValueProblem::BadHex(tuple("a").target_id().as_str().into()),
        ),
        (
            with(1, integer(0)),
            "fencing_epoch",
            ValueProblem::EpochBelowOne(0),
        ),
        (
            with(1, integer(-3)),
            "fencing_epoch",
            ValueProblem::OutOfRange(-3),
        ),
        (
            with(1, ("real".into(), Some("2.5".into()))),
            "fencing_epoch",
            ValueProblem::WrongType {
                expected: "integer",
                found: "real".into(),
            },
        ),
        (
            with(1, text("7")),
            "fencing_epoch",
            ValueProblem::WrongType {
                expected: "integer",
                found: "text".into(),
            },
        ),
        (
            with(2, text("h-1f")),
            "holder_token_hash",
            ValueProblem::BadHex("h-1f".into()),
        ),
        (
            with(2, null()),
            "holder_token_hash",
            ValueProblem::WrongType {
                expected: "text",
                found: "null".into(),
            },
        ),
        (
            with(3, null()),
            "holder_instance_digest",
            ValueProblem::WrongType {
                expected: "text",
                found: "null".into(),
            },
        ),
        (
            with(3, text("Inst 1")),
            "holder_instance_digest",
            ValueProblem::BadName("Inst 1".into()),
        ),
        (
            with(4, text("2026-07-16T12:05:00.000Z")),
            "acquired_at",
            ValueProblem::WrongType {
                expected: "integer",
                found: "text".into(),
            },
        ),
        (
            with(4, integer(now)),
            "acquired_at",
            ValueProblem::AcquiredNotBeforeNow {
                acquired_at: now,
                now: NOW.0,
            },
        ),
        (
            with(5, integer(now - 10)),
            "expires_at",
            ValueProblem::EndsBeforeStart {
                acquired_at: now - 10,
                expires_at: now - 10,
            },
        ),
        (
            with(5, ("blob".into(), Some("00".into()))),
            "expires_at",
            ValueProblem::WrongType {
                expected: "integer",
                found: "blob".into(),
            },
        ),
    ];
    for (cells, column, problem) in cases {
        assert_eq!(refused_lease(cells), (column, problem.clone()), "{problem}");
    }
    let mut hash_kept = released("a", 2, now - 10);
    hash_kept[2] = text(WRITER_HASH);
    assert_eq!(
        refused_lease(hash_kept),
        ("holder_token_hash", ValueProblem::NotNull)
    );
    let mut not_zeroed = released("a", 2, now - 10);
    not_zeroed[5] = integer(now + 10);
    assert_eq!(
        refused_lease(not_zeroed),
        ("expires_at", ValueProblem::ReleasedExpiry(now + 10))
    );
}

#[test]
fn each_channel_value_the_writer_would_not_store_is_refused_by_name() {
    let with = |i: usize, cell| {
        let mut cells = channel_cells("a", "1", None);
        cells[i] = cell;
        cells
    };
    let cases = [
        (
            with(1, text("context-view:x")),
            "channel",
            ValueProblem::BadName("context-view:x".into()),
        ),
        (
            with(2, text("w-1")),
            "source_watermark",
            ValueProblem::UnorderableWatermark {
                watermark: "w-1".into(),
                kind: WatermarkKind::Integer,
            },
        ),
        (
            with(2, text("01")),
            "source_watermark",
            ValueProblem::UnorderableWatermark {
                watermark: "01".into(),
                kind: WatermarkKind::Integer,
            },
        ),
        (
            with(2, text("")),
            "source_watermark",
            ValueProblem::UnorderableWatermark {
                watermark: "".into(),
                kind: WatermarkKind::Integer,
            },
        ),
        (
            with(2, text("9007199254740992")),
            "source_watermark",
            ValueProblem::UnorderableWatermark {
                watermark: "9007199254740992".into(),
                kind: WatermarkKind::Integer,
            },
        ),
        (
            with(2, integer(1)),
            "source_watermark",
            ValueProblem::WrongType {
                expected: "text",
                found: "integer".into(),
            },
        ),
        (
            with(3, text(r#"{"schemaVersion":"#)),
            "envelope_json",
            ValueProblem::NotJsonObject,
        ),
        (
            with(3, text("[1]")),
            "envelope_json",
            ValueProblem::NotJsonObject,
        ),
        (
            with(4, text("c")),
            "captured_at",
            ValueProblem::UnparsableTime("c".into()),
        ),
        (
            with(5, text("2026-07-16T13:00:00Z")),
            "expires_at",
            ValueProblem::UnparsableTime("2026-07-16T13:00:00Z".into()),
        ),
        (
            with(6, text("u")),
            "updated_at",
            ValueProblem::UnparsableTime("u".into()),
        ),
        (
            with(7, text("two payloads claim watermark 2")),
            "conflict_reason",
            ValueProblem::UnknownConflictReason("two payloads claim watermark 2".into()),
        ),
        (
            with(0, text(&"f".repeat(32))),
            "target_id",
            ValueProblem::UnmappedTarget("f".repeat(32)),
        ),
    ];
    for (cells, column, problem) in cases {
        assert_eq!(
            refused_channel(cells),
            (column, problem.clone()),
            "{problem}"
        );
    }
    let top = with(2, text("9007199254740991"));
    assert_eq!(
        adopt(&[], &[row(1, top)]).unwrap().channels[0].source_watermark,
        Watermark::Integer(crate::EXACT_INTEGER_MAX)
    );
    assert_eq!(
        adopt(&[], &[row(1, with(2, text("0")))]).unwrap().channels[0].source_watermark,
        Watermark::Integer(0)
    );
}

#[test]
fn a_row_of_another_width_ambiguous_tuples_and_an_impossible_clock_are_refused() {
    let mut short = row(1, held("a", 1, 1, 2));
    short.pop();
    assert!(matches!(
        adopt(&[short], &[]),
        Err(AdoptionRefused::Shape {
            table: "HookProjectionLeases",
            ..
        })
    ));
    let no_rowid = vec![None; 1 + 2 * CHANNEL_COLUMNS.len()];
    assert!(matches!(
        adopt(&[], &[no_rowid]),
        Err(AdoptionRefused::Shape {
            table: "HookProjectionChannels",
            ..
        })
    ));
    let beyond = crate::STORAGE_INTEGER_MAX + 1;
    assert_eq!(
        plan(Millis(beyond), Profile::Generic, &registry(), &[], &[], &[]).unwrap_err(),
        AdoptionRefused::ClockOutOfRange(beyond)
    );
    assert!(plan(
        Millis(crate::STORAGE_INTEGER_MAX),
        Profile::Generic,
        &registry(),
        &[],
        &[],
        &[]
    )
    .is_ok());
    // The same tuple twice is one target.
    assert!(plan(
        NOW,
        Profile::Generic,
        &registry(),
        &[tuple("a"), tuple("a")],
        &[row(1, held("a", 1, 1, 2))],
        &[]
    )
    .is_ok());
}

fn catalog(entries: &[(&str, &str, &str, Option<&str>)]) -> Vec<Vec<Option<String>>> {
    entries
        .iter()
        .map(|(kind, name, table, sql)| {
            vec![
                Some(kind.to_string()),
                Some(name.to_string()),
                Some(table.to_string()),
                sql.map(str::to_owned),
            ]
        })
        .collect()
}

fn columns(expected: &[js_writer::ColumnInfo]) -> Vec<Vec<Option<String>>> {
    expected
        .iter()
        .map(|(name, kind, not_null, pk)| {
            vec![
                Some(name.to_string()),
                Some(kind.to_string()),
                Some(u8::from(*not_null).to_string()),
                None,
                Some(pk.to_string()),
            ]
        })
        .collect()
}

#[test]
fn the_survey_tells_the_writer_s_tables_solewriter_s_and_none_apart() {
    let js = catalog(&[
        (
            "table",
            "HookProjectionChannels",
            "HookProjectionChannels",
            Some("CREATE TABLE HookProjectionChannels (…)"),
        ),
        (
            "index",
            "sqlite_autoindex_HookProjectionChannels_1",
            "HookProjectionChannels",
            None,
        ),
        (
            "table",
            "HookProjectionLeases",
            "HookProjectionLeases",
            Some("CREATE TABLE HookProjectionLeases (…)"),
        ),
        (
            "index",
            "sqlite_autoindex_HookProjectionLeases_1",
            "HookProjectionLeases",
            None,
        ),
        (
            "table",
            "SummarizationJobs",
            "SummarizationJobs",
            Some("CREATE TABLE SummarizationJobs (id)"),
        ),
    ]);
    let (lc, cc) = (columns(&LEASE_COLUMNS), columns(&CHANNEL_COLUMNS));
    assert_eq!(
        survey(Profile::Generic, &js, [&lc, &cc]),
        Ok(Survey::JsWriterTables)
    );
    assert_eq!(
        survey(Profile::Generic, &[], [&[], &[]]),
        Ok(Survey::NothingToAdopt)
    );
    let s0 = create_statement(0, Shape::Current(Profile::Generic));
    let s1 = create_statement(1, Shape::Current(Profile::Generic));
    let ours = catalog(&[
        (
            "table",
            "HookProjectionLeases",
            "HookProjectionLeases",
            Some(&s0),
        ),
        (
            "table",
            "HookProjectionChannels",
            "HookProjectionChannels",
            Some(&s1),
        ),
    ]);
    assert_eq!(
        survey(Profile::Generic, &ours, [&[], &[]]),
        Ok(Survey::AlreadyAdopted)
    );
    let shape =
        |catalog: &Rows, lc: &Rows, cc: &Rows| match survey(Profile::Generic, catalog, [lc, cc]) {
            Err(AdoptionRefused::Shape { table, reason }) => format!("{table}: {reason}"),
            other => panic!("{other:?}"),
        };
    assert_eq!(
        shape(&js[..2], &[], &cc),
        "HookProjectionLeases: the table is missing"
    );
    let mut extra = lc.clone();
    extra.push(vec![
        Some("lease_note".into()),
        Some("TEXT".into()),
        Some("0".into()),
        None,
        Some("0".into()),
    ]);
    assert_eq!(
        shape(&js, &extra, &cc),
        "HookProjectionLeases: unknown column lease_note"
    );
    assert_eq!(
        shape(&js, &lc, &cc[..7]),
        "HookProjectionChannels: missing column conflict_reason"
    );
    let mut retyped = cc.clone();
    retyped[2][1] = Some("INTEGER".into());
    assert_eq!(
        shape(&js, &lc, &retyped),
        "HookProjectionChannels: column source_watermark is declared `INTEGER notnull=1 default=none pk=0`, the writer declares `TEXT notnull=1 default=none pk=0`"
    );
    let mut defaulted = lc.clone();
    defaulted[6][3] = Some("'held'".into());
    assert!(
        shape(&js, &defaulted, &cc).starts_with("HookProjectionLeases: column state is declared")
    );
    let mut indexed = js.clone();
    indexed.extend(catalog(&[(
        "index",
        "by_state",
        "hookprojectionleases",
        Some("CREATE INDEX by_state ON …"),
    )]));
    assert_eq!(
        shape(&indexed, &lc, &cc),
        "HookProjectionLeases: found index by_state besides the writer's table"
    );
    // A table of the name in another case is not the writer's table.
    let lowercase = catalog(&[
        (
            "table",
            "hookprojectionleases",
            "hookprojectionleases",
            Some("CREATE TABLE hookprojectionleases (…)"),
        ),
        (
            "table",
            "HookProjectionChannels",
            "HookProjectionChannels",
            Some("CREATE TABLE HookProjectionChannels (…)"),
        ),
    ]);
    assert_eq!(
        shape(&lowercase, &lc, &cc),
        "HookProjectionLeases: found table hookprojectionleases besides the writer's table"
    );
    let view = catalog(&[(
        "view",
        "HookProjectionLeases",
        "HookProjectionLeases",
        Some("CREATE VIEW …"),
    )]);
    assert_eq!(
        shape(&view, &lc, &cc),
        "HookProjectionLeases: found view HookProjectionLeases besides the writer's table"
    );
    // One table solewriter's, the other the writer's: neither adopted nor adoptable.
    let mixed = catalog(&[
        (
            "table",
            "HookProjectionLeases",
            "HookProjectionLeases",
            Some(&s0),
        ),
        (
            "table",
            "HookProjectionChannels",
            "HookProjectionChannels",
            Some("CREATE TABLE HookProjectionChannels (…)"),
        ),
    ]);
    let ours_lc = vec![vec![
        Some("target_id".into()),
        Some("TEXT".into()),
        Some("1".into()),
        None,
        Some("1".into()),
    ]];
    assert!(shape(&mixed, &ours_lc, &cc)
        .starts_with("HookProjectionLeases: column target_id is declared `TEXT notnull=1"));
    assert_eq!(
        read_statements()[0],
        js_writer::read_rows("HookProjectionLeases", &LEASE_COLUMNS)
    );
}
