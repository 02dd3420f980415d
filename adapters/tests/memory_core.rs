//! The Memory Core profile on the SQLite adapter: a store adopted from the Memory Core's own
//! JavaScript writer (its tables filled by its own statements, `support/js_writer.rs`) keeps
//! the writer's 32-hex target ids and carries ISO-8601 and instant-plus-sequence watermarks in
//! their own order; the writer's statements, still called after the adoption, change nothing;
//! publications carry the consumer binding and land where the hooks already read, numbered past
//! the epoch of the document in place. (The Node path's switch, with the hooks' reader rules:
//! `bindings/node/test/memory_core_switch.test.js`.)

#[path = "support/js_writer.rs"]
mod js;
mod support;

use rusqlite::Connection;
use solewriter_adapters::clock::ManualClock;
use solewriter_adapters::projection::adoption::Adopted;
use solewriter_adapters::projection::publication::PublishedNow;
use solewriter_adapters::projection::runtime::RuntimeRoot;
use solewriter_adapters::projection::store::{Initialized, ProjectionStore, StoreOptions};
use solewriter_adapters::projection::submission::SubmitOutcome;
use solewriter_adapters::Error;
use solewriter_core::projection::channel::{
    ChannelName, ChannelRegistry, ChannelSpec, ProducerId, Submission,
};
use solewriter_core::projection::memory_core;
use solewriter_core::projection::profile::{ConsumerBinding, Profile};
use solewriter_core::projection::target::TargetId;
use solewriter_core::projection::watermark::{SubmissionRejected, Watermark, WatermarkKind};
use solewriter_core::time::{iso, Millis};
use std::sync::Arc;
use support::{holder, timing, tuple};

/// 2026-07-28T18:29:00.000Z.
const T0: u64 = 1_785_263_340_000;
const BINDING: &str = r#"{"capability":"self-awareness","agentId":"@neo-gpt","harnessType":"codex","instanceKeyDigest":"inst-1","workspaceKeyDigest":"ws-1","status":"attested","provenance":{"producer":"MemoryCoreProjectionBroker"},"assertedAt":"2026-07-28T18:00:00.000Z","expiresAt":"2026-07-28T19:00:00.000Z","conflicts":[],"scopeResolution":"agent-instance"}"#;

fn registry() -> ChannelRegistry {
    let spec = |name: &str, owner: &str, schema: &str, watermark| ChannelSpec {
        name: ChannelName::parse(name).unwrap(),
        owner: ProducerId::parse(owner).unwrap(),
        envelope_schema: schema.into(),
        max_envelope_bytes: 64 * 1024,
        watermark,
        envelope_json_schema: None,
    };
    ChannelRegistry::new([
        spec(
            "lifecycle-frontier",
            "lifecycle",
            "lifecycle-frontier.v1",
            WatermarkKind::Instant,
        ),
        spec(
            "computed-route",
            "golden-path",
            "computed-route.v1",
            WatermarkKind::InstantSequence,
        ),
    ])
    .unwrap()
}

fn at(ms: u64) -> String {
    iso::format(Millis(ms)).unwrap()
}

fn route_envelope(watermark: &str) -> String {
    format!(
        r#"{{"schemaVersion":"computed-route.v1","sourceWatermark":"{watermark}","notAuthority":true}}"#
    )
}

/// Every row of both tables, as text, and the two `CREATE TABLE` statements.
fn dump(db: &Connection) -> Vec<String> {
    let mut out = Vec::new();
    for sql in [
        "SELECT sql FROM sqlite_master WHERE name LIKE 'HookProjection%' ORDER BY name",
        "SELECT quote(target_id) || quote(fencing_epoch) || quote(holder_token_hash) || quote(state) || quote(expires_at) FROM HookProjectionLeases ORDER BY target_id",
        "SELECT quote(target_id) || channel || quote(source_watermark) || envelope_json || quote(updated_at) || quote(conflict_reason) FROM HookProjectionChannels ORDER BY target_id, channel",
    ] {
        let mut stmt = db.prepare(sql).unwrap();
        let rows = stmt.query_map([], |r| r.get::<_, String>(0)).unwrap();
        out.extend(rows.map(Result::unwrap));
    }
    out
}

#[test]
fn a_store_adopted_from_the_javascript_writer_publishes_its_document_at_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("runtime");
    std::fs::create_dir(&root).unwrap();
    let path = dir.path().join("memory-core.sqlite");
    let db = Connection::open(&path).unwrap();
    db.query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0))
        .unwrap();
    db.execute_batch("PRAGMA foreign_keys = ON;").unwrap();
    js::create_tables(&db);
    let id = js::target_id(&tuple("a"));
    let (nine, ten) = (format!("{}:9", at(T0)), format!("{}:10", at(T0)));
    let frontier = at(T0);
    let submit = |channel: &str, payload: &str, watermark: &str| {
        js::submit(
            &db,
            &id,
            channel,
            payload,
            watermark,
            &at(T0),
            &at(T0 + 600_000),
            &at(T0 + 1),
        )
    };
    assert_eq!(
        submit(
            "lifecycle-frontier",
            r#"{"schemaVersion":"lifecycle-frontier.v1","notAuthority":true}"#,
            &frontier
        ),
        "advanced"
    );
    assert_eq!(
        submit("computed-route", &route_envelope(&nine), &nine),
        "advanced"
    );
    // The writer orders watermarks as text: the later pass of the same millisecond is refused.
    assert_eq!(
        submit("computed-route", &route_envelope(&ten), &ten),
        "regressed-watermark"
    );
    assert_eq!(
        js::acquire(&db, &id, "inst-1", T0 as i64, 15_000, "tok-1").unwrap(),
        Some(1)
    );
    assert!(js::release(&db, &id, 1, "tok-1"));
    // A document the writer left in place at epoch 2 (its grant's commit lost after the
    // rename): one above its row (1).
    let current = RuntimeRoot::new(&root).current_path(&TargetId::parse(&id).unwrap());
    std::fs::create_dir_all(current.parent().unwrap()).unwrap();
    std::fs::write(
        &current,
        r#"{"schemaVersion":"live-lane-awareness-projection.v1","publication":{"targetId":"x","fencingEpoch":2,"generatedAt":1,"producerWatermarks":{}},"notAuthority":true}"#,
    )
    .unwrap();

    let clock = ManualClock::new(Millis(T0 + 2_000));
    let timing = timing(15_000, 1_000);
    assert_eq!(
        ProjectionStore::adopt_js_writer_tables(
            &path,
            &timing,
            &clock,
            Profile::MemoryCore,
            &registry(),
            &[]
        )
        .unwrap(),
        Adopted::Converted {
            leases: 1,
            channels: 2
        }
    );
    assert_eq!(
        ProjectionStore::initialize_profile(&path, &timing, Profile::MemoryCore).unwrap(),
        Initialized::AlreadyPresent
    );
    assert!(matches!(
        ProjectionStore::initialize(&path, &timing),
        Err(Error::ProfileMismatch { .. })
    ));

    // The writer's own statements, still called, change nothing.
    let before = dump(&db);
    js::create_tables(&db);
    let has_conflict_column: bool = db
        .query_row(
            "SELECT count(*) FROM pragma_table_info('HookProjectionChannels') WHERE name = 'conflict_reason'",
            [],
            |r| r.get::<_, i64>(0).map(|n| n == 1),
        )
        .unwrap();
    assert!(has_conflict_column, "its ensureSchema() adds nothing");
    // (`…:99` is after the stored `…:9` in its text order too, so it tries to write.)
    let later = format!("{}:99", at(T0));
    let refused = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        submit("computed-route", &route_envelope(&later), &later)
    }));
    assert!(refused.is_err(), "its submission fails on the STRICT table");
    db.execute_batch("ROLLBACK").ok();
    let grant = js::acquire(&db, &id, "inst-1", (T0 + 3_000) as i64, 15_000, "tok-2");
    assert!(
        matches!(&grant, Err(e) if e.to_string().contains("cannot store TEXT value in BLOB column")),
        "its grant fails on the BLOB hash column: {grant:?}"
    );
    assert!(!js::release(&db, &id, 1, "tok-1"));
    assert_eq!(dump(&db), before, "nothing changed");

    let options = StoreOptions::new(
        &path,
        RuntimeRoot::new(&root),
        timing,
        registry(),
        Arc::new(clock.clone()),
    );
    let mut store = ProjectionStore::open(&options).unwrap();
    assert_eq!(store.profile(), Profile::MemoryCore);
    let target = store.admit_target(&tuple("a")).unwrap();
    assert_eq!(target.as_str(), id, "the writer's id, the hooks' path");
    let rows = store.channel_rows(&target).unwrap();
    assert_eq!(rows[0].source_watermark, Watermark::Text(nine.clone()));
    // In the channel's own order, `…:10` is after `…:9`.
    let submission = Submission {
        target_id: target.clone(),
        channel: ChannelName::parse("computed-route").unwrap(),
        source_watermark: Watermark::Text(ten.clone()),
        envelope_json: route_envelope(&ten),
        captured_at: Millis(T0),
        expires_at: Millis(T0 + 600_000),
    };
    assert_eq!(
        store
            .submit(&ProducerId::parse("golden-path").unwrap(), &submission)
            .unwrap(),
        SubmitOutcome::Advanced
    );
    let mut generic_envelope = submission.clone();
    generic_envelope.envelope_json = generic_envelope
        .envelope_json
        .replace("schemaVersion", "schema");
    generic_envelope.source_watermark = Watermark::Text(format!("{}:11", at(T0)));
    assert!(matches!(
        store.submit(&ProducerId::parse("golden-path").unwrap(), &generic_envelope),
        Err(Error::Rejected(SubmissionRejected::SchemaInvalid(m))) if m.contains("schemaVersion")
    ));

    // No binding: refused, nothing written.
    let in_place = std::fs::read(&current).unwrap();
    assert!(matches!(
        store.publish_now(&target, &holder("mc-1")),
        Err(Error::Profile(_))
    ));
    assert_eq!(std::fs::read(&current).unwrap(), in_place);
    store.set_consumer_binding(Some(ConsumerBinding::from_json(BINDING).unwrap()));
    let PublishedNow::Published(published) = store.publish_now(&target, &holder("mc-1")).unwrap()
    else {
        panic!("held")
    };
    assert_eq!(
        published.fencing_epoch, 3,
        "past the epoch of the document in place (2), not the row's (1)"
    );
    let bytes = std::fs::read(&current).unwrap();
    assert_eq!(memory_core::published_epoch(&bytes), Some(3));
    let doc: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(doc["publication"]["targetId"], id.as_str());
    assert_eq!(
        doc["publication"]["producerWatermarks"]["computed-route"],
        ten.as_str()
    );
    assert_eq!(doc["computedRoute"]["status"], "fresh");
    assert_eq!(
        doc["consumerBinding"],
        serde_json::from_str::<serde_json::Value>(BINDING).unwrap()
    );
}

#[test]
fn a_generic_store_refuses_what_only_the_memory_core_profile_publishes() {
    let f = support::Fixture::new();
    let mut store = f.open();
    assert_eq!(store.profile(), Profile::Generic);
    let target = store.admit_target(&tuple("a")).unwrap();
    assert_eq!(target.as_str().len(), 64);
    store.set_consumer_binding(Some(ConsumerBinding::from_json("{}").unwrap()));
    assert!(matches!(
        store.publish_now(&target, &holder("h")),
        Err(Error::Profile(_))
    ));
    assert!(f.current_bytes(&target).is_none(), "nothing written");
    let mut options = f.options.clone();
    options.registry = registry();
    assert!(
        matches!(ProjectionStore::open(&options), Err(Error::Profile(m)) if m.contains("integer watermarks only"))
    );
}
