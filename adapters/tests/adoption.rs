//! Adopting the tables the Memory Core's own JavaScript writer leaves in the host's database
//! (populated by that writer's own statements, `support/js_writer.rs`): epochs go on upward,
//! grants end and their holders are fenced, channel rows and conflicts carry over, the host's
//! table is untouched, a second adoption changes nothing, and every refusal or failure leaves
//! the writer's tables exactly as they were.

#[path = "support/js_writer.rs"]
mod js;
mod support;

use rusqlite::Connection;
use solewriter_adapters::clock::ManualClock;
use solewriter_adapters::projection::adoption::{Adopted, AdoptionRefused, ValueProblem};
use solewriter_adapters::projection::lease::Acquisition;
use solewriter_adapters::projection::publication::PublishedNow;
use solewriter_adapters::projection::runtime::read_projection;
use solewriter_adapters::projection::store::{ProjectionStore, StoreOptions};
use solewriter_adapters::Error;
use solewriter_core::projection::channel::DegradedReason;
use solewriter_core::projection::lease::LeaseState;
use solewriter_core::projection::profile::Profile;
use solewriter_core::projection::target::TargetTuple;
use solewriter_core::projection::watermark::WatermarkKind;
use solewriter_core::projection::StatusReason;
use solewriter_core::time::Millis;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use support::*;

/// 2026-07-16T12:05:00.000Z, the adoption's broker time.
const NOW: i64 = 1_784_203_500_000;
const T0: &str = "2026-07-16T12:00:00.000Z";
const T0_MS: u64 = 1_784_203_200_000;
const T1: &str = "2026-07-16T13:00:00.000Z";
const TOKEN_A: &str = "aa11aa11aa11aa11aa11aa11aa11aa11aa11aa11aa11aa11aa11aa11aa11aa11";
const TOKEN_B: &str = "bb22bb22bb22bb22bb22bb22bb22bb22bb22bb22bb22bb22bb22bb22bb22bb22";

struct Host {
    dir: tempfile::TempDir,
    path: PathBuf,
    db: Connection,
}

/// The Memory Core's database: WAL, its own `SummarizationJobs`, the writer's two tables.
fn host() -> Host {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("runtime")).unwrap();
    let path = dir.path().join("memory-core.sqlite");
    let db = Connection::open(&path).unwrap();
    db.query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0))
        .unwrap();
    db.execute_batch(
        "CREATE TABLE SummarizationJobs (id INTEGER PRIMARY KEY, session TEXT, state TEXT);
         CREATE INDEX jobs_by_state ON SummarizationJobs (state);
         INSERT INTO SummarizationJobs (session, state) VALUES ('s1', 'done'), ('s2', 'queued');",
    )
    .unwrap();
    js::create_tables(&db);
    Host { dir, path, db }
}

fn agent(name: &str) -> TargetTuple {
    tuple(name)
}

fn legacy(name: &str) -> String {
    js::target_id(&agent(name))
}

fn envelope(schema: &str, body: &str) -> String {
    format!(r#"{{"schemaVersion":"{schema}","notAuthority":true,"items":["{body}"]}}"#)
}

/// What the writer leaves after a while: agent `a` held live at epoch 3, agent `b` released
/// at epoch 4 (one takeover of an expired grant on the way), agent `c` with a channel only;
/// `a`'s lifecycle channel in conflict.
fn populate(db: &Connection) {
    let (a, b, c) = (legacy("a"), legacy("b"), legacy("c"));
    assert_eq!(
        js::acquire(db, &a, "inst-1", NOW - 50_000, 10_000, TOKEN_A),
        Ok(Some(1))
    );
    assert!(js::release(db, &a, 1, TOKEN_A));
    assert_eq!(
        js::acquire(db, &a, "inst-1", NOW - 30_000, 10_000, TOKEN_B),
        Ok(Some(2))
    );
    assert!(js::release(db, &a, 2, TOKEN_B));
    assert_eq!(
        js::acquire(db, &a, "inst-1", NOW - 1_000, 60_000, TOKEN_A),
        Ok(Some(3))
    );
    assert_eq!(
        js::acquire(db, &b, "inst-2", NOW - 40_000, 5_000, TOKEN_A),
        Ok(Some(1))
    );
    assert_eq!(
        js::acquire(db, &b, "inst-2", NOW - 30_000, 5_000, TOKEN_B),
        Ok(Some(2))
    );
    assert!(js::release(db, &b, 2, TOKEN_B));
    assert_eq!(
        js::acquire(db, &b, "inst-2", NOW - 20_000, 5_000, TOKEN_A),
        Ok(Some(3))
    );
    assert!(js::release(db, &b, 3, TOKEN_A));
    assert_eq!(
        js::acquire(db, &b, "inst-2", NOW - 10_000, 5_000, TOKEN_B),
        Ok(Some(4))
    );
    assert!(js::release(db, &b, 4, TOKEN_B));
    let route = envelope("computed-route.v1", "r");
    let submit = |target: &str, channel: &str, payload: &str, watermark: &str| {
        js::submit(db, target, channel, payload, watermark, T0, T1, T0)
    };
    assert_eq!(submit(&a, "computed-route", &route, "6"), "advanced");
    assert_eq!(submit(&a, "computed-route", &route, "7"), "advanced");
    let frontier = envelope("lifecycle-frontier.v1", "f");
    assert_eq!(submit(&a, "lifecycle-frontier", &frontier, "3"), "advanced");
    let other = envelope("lifecycle-frontier.v1", "g");
    assert_eq!(
        submit(&a, "lifecycle-frontier", &other, "3"),
        "source-conflict"
    );
    assert_eq!(submit(&c, "computed-route", &route, "12"), "advanced");
}

fn adopt(path: &Path, tuples: &[TargetTuple]) -> Result<Adopted, Error> {
    let clock = ManualClock::new(Millis(NOW as u64));
    ProjectionStore::adopt_js_writer_tables(
        path,
        &timing(TTL_MS, 1_000),
        &clock,
        Profile::Generic,
        &registry(1 << 20),
        tuples,
    )
}

fn all_agents() -> Vec<TargetTuple> {
    ["a", "b", "c"].map(agent).to_vec()
}

/// Every schema object and every row of every table, in text.
fn dump(db: &Connection) -> Vec<String> {
    dump_where(db, "1")
}

/// The host's own schema objects and rows.
fn host_objects(db: &Connection) -> Vec<String> {
    dump_where(db, "tbl_name NOT LIKE 'HookProjection%'")
}

/// The schema objects matching `filter`, each followed by its table's rows, in text.
fn dump_where(db: &Connection, filter: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let tables: Vec<(String, Option<String>)> = db
        .prepare(&format!(
            "SELECT name, sql FROM sqlite_master WHERE {filter} ORDER BY name"
        ))
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    for (name, sql) in tables {
        out.push(format!("{name}: {sql:?}"));
        if sql
            .as_deref()
            .is_some_and(|s| s.starts_with("CREATE TABLE"))
        {
            let mut stmt = db
                .prepare(&format!("SELECT * FROM {name} ORDER BY rowid"))
                .unwrap();
            let width = stmt.column_count();
            let rows: Vec<String> = stmt
                .query_map([], |r| {
                    Ok((0..width)
                        .map(|i| format!("{:?}", r.get::<_, rusqlite::types::Value>(i).unwrap()))
                        .collect::<Vec<_>>()
                        .join("|"))
                })
                .unwrap()
                .map(Result::unwrap)
                .collect();
            out.extend(rows);
        }
    }
    out
}

fn store(host: &Host, clock: &ManualClock) -> ProjectionStore {
    ProjectionStore::open(&StoreOptions::new(
        &host.path,
        solewriter_adapters::projection::runtime::RuntimeRoot::new(host.dir.path().join("runtime")),
        timing(TTL_MS, 1_000),
        registry(64 * 1024),
        Arc::new(clock.clone()),
    ))
    .unwrap()
}

#[test]
fn adoption_continues_epochs_ends_grants_and_carries_channels_and_conflicts() {
    let host = host();
    populate(&host.db);
    let host_before = host_objects(&host.db);
    assert_eq!(host_before.len(), 4, "the table, its two rows, its index");
    assert_eq!(
        adopt(&host.path, &all_agents()).unwrap(),
        Adopted::Converted {
            leases: 3,
            channels: 3
        }
    );
    let clock = ManualClock::new(Millis(NOW as u64));
    let store = store(&host, &clock);
    let (a, b, c) = (
        agent("a").target_id(),
        agent("b").target_id(),
        agent("c").target_id(),
    );

    // Epochs kept; a's live grant ended at the adoption; b released; c admitted.
    let row = |t| store.lease_row(t).unwrap().unwrap();
    let a_row = row(&a);
    assert_eq!(a_row.fencing_epoch, 3);
    let LeaseState::Held(g) = &a_row.state else {
        panic!("{a_row:?}")
    };
    assert_eq!(
        (g.acquired_at, g.expires_at),
        (Millis(NOW as u64 - 1_000), Millis(NOW as u64))
    );
    assert_eq!(
        solewriter_core::hex::encode(g.holder_token_hash.as_bytes()),
        js::hash_token(TOKEN_A)
    );
    let b_row = row(&b);
    assert!(
        matches!(b_row.state, LeaseState::Released(_)) && b_row.fencing_epoch == 4,
        "{b_row:?}"
    );
    let c_row = row(&c);
    assert!(
        matches!(c_row.state, LeaseState::Unheld) && c_row.fencing_epoch == 0,
        "{c_row:?}"
    );

    // Channel rows and the conflict carried over.
    let channels = store.channel_rows(&a).unwrap();
    assert_eq!(channels.len(), 2);
    assert_eq!(
        (
            channels[0].channel.as_str(),
            channels[0].source_watermark.clone()
        ),
        ("computed-route", 7.into())
    );
    assert_eq!(channels[0].degraded_reason, None);
    assert_eq!(
        (channels[0].captured_at, channels[0].expires_at),
        (Millis(T0_MS), Millis(T0_MS + 3_600_000))
    );
    assert_eq!(
        (
            channels[1].channel.as_str(),
            channels[1].source_watermark.clone()
        ),
        ("lifecycle-frontier", 3.into())
    );
    assert_eq!(
        channels[1].degraded_reason,
        Some(DegradedReason::SourceConflict)
    );
    assert_eq!(
        channels[1].envelope_json,
        envelope("lifecycle-frontier.v1", "f")
    );
    assert_eq!(
        store.channel_rows(&c).unwrap()[0].source_watermark,
        12.into()
    );

    // The next grants continue upward from the stored epochs.
    let Acquisition::Acquired(lease) = store.acquire(&a, &holder("solewriter-1")).unwrap() else {
        panic!("a's ended grant is acquirable at once")
    };
    assert_eq!(lease.epoch(), 4);
    let published = lease.publish().unwrap();
    assert_eq!(published.fencing_epoch, 4);
    let doc = read_projection(&store.options().runtime_root, &a).unwrap();
    assert_eq!(doc.fencing_epoch, 4);
    assert_eq!(doc.channels.len(), 2);
    assert_eq!(doc.channels[1].reason, Some(StatusReason::SourceConflict));
    assert_eq!(
        doc.channels[0].envelope.as_ref().map(|e| e.get()),
        Some(envelope("computed-route.v1", "r").as_str())
    );
    match store.publish_now(&b, &holder("solewriter-1")).unwrap() {
        PublishedNow::Published(p) => assert_eq!(p.fencing_epoch, 5),
        other => panic!("{other:?}"),
    }
    match store.publish_now(&c, &holder("solewriter-1")).unwrap() {
        PublishedNow::Published(p) => assert_eq!(p.fencing_epoch, 1),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        read_projection(&store.options().runtime_root, &c)
            .unwrap()
            .channels
            .len(),
        1
    );

    // The host's own table and rows are as they were.
    assert_eq!(host_objects(&host.db), host_before);

    // A second adoption says so and changes nothing.
    let before = dump(&host.db);
    assert_eq!(
        adopt(&host.path, &all_agents()).unwrap(),
        Adopted::AlreadyAdopted
    );
    assert_eq!(dump(&host.db), before);
}

#[test]
fn a_js_writer_still_running_after_adoption_can_neither_publish_nor_grant() {
    let host = host();
    populate(&host.db);
    let a = legacy("a");
    let live = NOW - 500;
    assert_eq!(
        js::publish_refusal(&host.db, &a, 3, TOKEN_A, live),
        None,
        "its holder could publish before"
    );
    adopt(&host.path, &all_agents()).unwrap();
    let a_new = agent("a").target_id();
    // Its row is now keyed by solewriter's id, and even at its own epoch and token the
    // writer's checks fail on the carried row.
    assert_eq!(
        js::publish_refusal(&host.db, &a, 3, TOKEN_A, live),
        Some("not-held")
    );
    assert_eq!(
        js::publish_refusal(&host.db, a_new.as_str(), 3, TOKEN_A, live),
        Some("foreign-token")
    );
    // Its acquisition cannot write into solewriter's STRICT table (a hex TEXT hash in a BLOB).
    assert!(js::acquire(&host.db, a_new.as_str(), "inst-1", NOW, 5_000, TOKEN_B).is_err());
    let clock = ManualClock::new(Millis(NOW as u64));
    assert_eq!(
        store(&host, &clock)
            .lease_row(&a_new)
            .unwrap()
            .unwrap()
            .fencing_epoch,
        3
    );
}

/// Runs an adoption expected to fail and checks the database is byte for byte as it was.
fn refused(host: &Host, tuples: &[TargetTuple]) -> Error {
    let before = dump(&host.db);
    let error = adopt(&host.path, tuples).unwrap_err();
    assert_eq!(dump(&host.db), before, "{error}");
    error
}

fn value_problem(error: Error) -> (&'static str, &'static str, ValueProblem) {
    match error {
        Error::AdoptionRefused(AdoptionRefused::Value {
            table,
            column,
            problem,
            ..
        }) => (table, column, problem),
        other => panic!("{other}"),
    }
}

#[test]
fn a_bad_row_late_in_the_table_refuses_everything_and_changes_nothing() {
    let host = host();
    populate(&host.db);
    let mut tuples = all_agents();
    for i in 0..40 {
        let t = agent(&format!("bulk-{i}"));
        js::submit(
            &host.db,
            &js::target_id(&t),
            "computed-route",
            &envelope("computed-route.v1", "x"),
            "1",
            T0,
            T1,
            T0,
        );
        tuples.push(t);
    }
    // As the writer's own busy test plants it: opaque times.
    host.db
        .execute(
            "INSERT INTO HookProjectionChannels (target_id, channel, source_watermark, envelope_json, captured_at, expires_at, updated_at, conflict_reason)
             VALUES (?, 'computed-route', 'w-1', '{\"schemaVersion\":\"computed-route.v1\"}', 'c', 'e', 'u', NULL)",
            [legacy("d")],
        )
        .unwrap();
    tuples.push(agent("d"));
    let error = refused(&host, &tuples);
    assert!(
        error
            .to_string()
            .contains("HookProjectionChannels rowid 44, column source_watermark"),
        "{error}"
    );
    assert_eq!(
        value_problem(error),
        (
            "HookProjectionChannels",
            "source_watermark",
            ValueProblem::UnorderableWatermark {
                watermark: "w-1".into(),
                kind: WatermarkKind::Integer
            }
        )
    );
    host.db
        .execute(
            "UPDATE HookProjectionChannels SET source_watermark = '1' WHERE target_id = ?",
            [legacy("d")],
        )
        .unwrap();
    assert_eq!(
        value_problem(refused(&host, &tuples)),
        (
            "HookProjectionChannels",
            "captured_at",
            ValueProblem::UnparsableTime("c".into())
        )
    );
}

#[test]
fn each_value_the_writer_would_not_store_is_refused_by_table_column_and_kind() {
    let cases: [(&str, &str, &str, ValueProblem); 5] = [
        // The writer's own tests inject this hash function; its stored hashes are not hex.
        ("UPDATE HookProjectionLeases SET holder_token_hash = 'h-1a2b' WHERE state = 'held'", "HookProjectionLeases", "holder_token_hash", ValueProblem::BadHex("h-1a2b".into())),
        ("UPDATE HookProjectionLeases SET fencing_epoch = 2.5 WHERE state = 'held'", "HookProjectionLeases", "fencing_epoch", ValueProblem::WrongType { expected: "integer", found: "real".into() }),
        ("UPDATE HookProjectionLeases SET holder_instance_digest = NULL WHERE state = 'held'", "HookProjectionLeases", "holder_instance_digest", ValueProblem::WrongType { expected: "text", found: "null".into() }),
        ("UPDATE HookProjectionChannels SET envelope_json = '{\"schemaVersion\":' WHERE channel = 'computed-route'", "HookProjectionChannels", "envelope_json", ValueProblem::NotJsonObject),
        ("UPDATE HookProjectionChannels SET conflict_reason = 'unreadable envelope' WHERE channel = 'computed-route'", "HookProjectionChannels", "conflict_reason", ValueProblem::UnknownConflictReason("unreadable envelope".into())),
    ];
    for (plant, table, column, problem) in cases {
        let host = host();
        populate(&host.db);
        host.db.execute_batch(plant).unwrap();
        assert_eq!(
            value_problem(refused(&host, &all_agents())),
            (table, column, problem),
            "{plant}"
        );
    }
    // A target whose attested tuple the host did not give cannot be mapped.
    let host = host();
    populate(&host.db);
    assert_eq!(
        value_problem(refused(&host, &[agent("a"), agent("c")])),
        (
            "HookProjectionLeases",
            "target_id",
            ValueProblem::UnmappedTarget(legacy("b"))
        )
    );
}

#[test]
fn another_shape_a_database_not_in_wal_and_a_busy_store_are_refused() {
    let host = host();
    populate(&host.db);
    host.db
        .execute_batch("ALTER TABLE HookProjectionLeases ADD COLUMN lease_note TEXT")
        .unwrap();
    match refused(&host, &all_agents()) {
        Error::AdoptionRefused(AdoptionRefused::Shape { table, reason }) => {
            assert_eq!(
                (table, reason.as_str()),
                ("HookProjectionLeases", "unknown column lease_note")
            )
        }
        other => panic!("{other}"),
    }
    let host = self::host();
    populate(&host.db);
    host.db
        .execute_batch("CREATE INDEX leases_by_state ON HookProjectionLeases (state)")
        .unwrap();
    assert!(matches!(
        refused(&host, &all_agents()),
        Error::AdoptionRefused(AdoptionRefused::Shape { .. })
    ));
    let host = self::host();
    populate(&host.db);
    host.db
        .execute_batch("DROP TABLE HookProjectionChannels")
        .unwrap();
    assert!(matches!(
        refused(&host, &all_agents()),
        Error::AdoptionRefused(AdoptionRefused::Shape { .. })
    ));

    let host = self::host();
    populate(&host.db);
    host.db
        .query_row("PRAGMA journal_mode = DELETE", [], |r| {
            r.get::<_, String>(0)
        })
        .unwrap();
    assert!(matches!(
        refused(&host, &all_agents()),
        Error::ForeignSchema { .. }
    ));

    let host = self::host();
    populate(&host.db);
    let other = Connection::open(&host.path).unwrap();
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    assert!(matches!(refused(&host, &all_agents()), Error::Busy { .. }));
    other.execute_batch("ROLLBACK").unwrap();
    assert!(matches!(
        adopt(&host.path, &all_agents()),
        Ok(Adopted::Converted { .. })
    ));
}

#[test]
fn a_failure_midway_through_the_conversion_rolls_all_of_it_back() {
    let host = host();
    populate(&host.db);
    // A host table referring to the writer's leases: dropping them fails, after the channel
    // table was already dropped inside the same transaction.
    host.db
        .execute_batch(&format!(
            "CREATE TABLE HostRefs (target TEXT REFERENCES HookProjectionLeases (target_id));
             INSERT INTO HostRefs VALUES ('{}');",
            legacy("a")
        ))
        .unwrap();
    assert!(matches!(refused(&host, &all_agents()), Error::Sqlite(_)));
}

#[test]
fn no_tables_is_nothing_to_adopt() {
    let host = host();
    host.db
        .execute_batch("DROP TABLE HookProjectionChannels; DROP TABLE HookProjectionLeases;")
        .unwrap();
    let before = dump(&host.db);
    assert_eq!(adopt(&host.path, &[]).unwrap(), Adopted::NothingToAdopt);
    assert_eq!(dump(&host.db), before);
}
