//! `initialize` versus `open`: explicit creation, fail-closed opening, busy store.

mod support;

use rusqlite::Connection;
use solewriter_adapters::schema::{SCHEMA_VERSION, TABLES};
use solewriter_adapters::store::ProjectionStore;
use solewriter_adapters::Error;
use support::*;

#[test]
fn initialize_creates_exactly_the_two_tables_with_their_columns() {
    let f = Fixture::new();
    let conn = Connection::open(&f.options.db_path).unwrap();
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(tables, ["HookProjectionChannels", "HookProjectionLeases"]);
    for (table, columns) in TABLES {
        let found: Vec<String> = conn
            .prepare("SELECT name FROM pragma_table_info(?1) ORDER BY cid")
            .unwrap()
            .query_map([table], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(found, columns, "{table}");
    }
    assert_eq!(
        conn.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0))
            .unwrap(),
        SCHEMA_VERSION
    );
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    assert!(f.open().lease_rows().unwrap().is_empty());
}

#[test]
fn initialize_refuses_an_existing_path() {
    let f = Fixture::new();
    let before = std::fs::read(&f.options.db_path).unwrap();
    let err = ProjectionStore::initialize(&f.options.db_path, &f.options.timing).unwrap_err();
    assert!(matches!(err, Error::StoreExists { .. }), "{err}");
    assert_eq!(std::fs::read(&f.options.db_path).unwrap(), before);
}

#[test]
fn open_missing_store_fails_and_creates_nothing() {
    let f = Fixture::new();
    let mut options = f.options.clone();
    options.db_path = f.dir.path().join("absent.sqlite");
    let err = ProjectionStore::open(&options).unwrap_err();
    assert!(matches!(err, Error::StoreMissing { .. }), "{err}");
    assert!(!options.db_path.exists());
    assert!(!f.dir.path().join("absent.sqlite-wal").exists());
}

#[test]
fn open_foreign_database_fails() {
    let f = Fixture::new();
    let mut options = f.options.clone();
    options.db_path = f.dir.path().join("foreign.sqlite");
    let conn = Connection::open(&options.db_path).unwrap();
    conn.execute_batch("CREATE TABLE other (x INTEGER);")
        .unwrap();
    drop(conn);
    let before = std::fs::read(&options.db_path).unwrap();
    let err = ProjectionStore::open(&options).unwrap_err();
    assert!(matches!(err, Error::ForeignSchema { .. }), "{err}");
    assert_eq!(
        std::fs::read(&options.db_path).unwrap(),
        before,
        "nothing changed"
    );
}

#[test]
fn open_store_without_the_tables_fails() {
    let f = Fixture::new();
    let conn = Connection::open(&f.options.db_path).unwrap();
    conn.execute_batch("DROP TABLE HookProjectionChannels; DROP TABLE HookProjectionLeases;")
        .unwrap();
    drop(conn);
    let err = ProjectionStore::open(&f.options).unwrap_err();
    assert!(matches!(err, Error::ForeignSchema { .. }), "{err}");
}

#[test]
fn open_wrong_user_version_fails() {
    let f = Fixture::new();
    let conn = Connection::open(&f.options.db_path).unwrap();
    conn.execute_batch("PRAGMA user_version = 7;").unwrap();
    drop(conn);
    match ProjectionStore::open(&f.options).unwrap_err() {
        Error::SchemaVersion {
            found: 7, expected, ..
        } => assert_eq!(expected, SCHEMA_VERSION),
        other => panic!("{other}"),
    }
}

#[test]
fn open_unreadable_file_fails() {
    let f = Fixture::new();
    let mut options = f.options.clone();
    options.db_path = f.dir.path().join("garbage.sqlite");
    std::fs::write(&options.db_path, vec![0x5a; 8192]).unwrap();
    let err = ProjectionStore::open(&options).unwrap_err();
    assert!(matches!(err, Error::Unreadable { .. }), "{err}");
    assert_eq!(std::fs::read(&options.db_path).unwrap(), vec![0x5a; 8192]);
}

#[test]
fn busy_store_returns_busy_and_writes_nothing() {
    let f = Fixture::with_timing(timing(TTL_MS, 50), 1024);
    let store = f.open();
    let target = store.admit_target(&tuple("a")).unwrap();
    let blocker = Connection::open(&f.options.db_path).unwrap();
    blocker.execute_batch("BEGIN IMMEDIATE;").unwrap();
    let err = store.acquire(&target, &holder("b")).unwrap_err();
    assert!(matches!(err, Error::Busy { timeout_ms: 50 }), "{err}");
    let err = store
        .submit(&router(), &route(&target, 1, "x"))
        .unwrap_err();
    assert!(matches!(err, Error::Busy { .. }), "{err}");
    blocker.execute_batch("ROLLBACK;").unwrap();
    let row = store.lease_row(&target).unwrap().unwrap();
    assert_eq!(row.fencing_epoch, 0, "no grant was written");
    assert!(
        store.channel_rows(&target).unwrap().is_empty(),
        "no submission was written"
    );
}

/// Two initializers racing for one path: exactly one creates the store, the other gets
/// `StoreExists` and touches nothing (in particular, it never deletes the winner's files).
#[test]
fn concurrent_initializers_never_destroy_each_others_store() {
    for _ in 0..20 {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.sqlite");
        let timing = timing(TTL_MS, 1000);
        let results: Vec<_> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..2)
                .map(|_| s.spawn(|| ProjectionStore::initialize(&path, &timing)))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(
            results.iter().filter(|r| r.is_ok()).count(),
            1,
            "{results:?}"
        );
        assert!(
            results
                .iter()
                .any(|r| matches!(r, Err(Error::StoreExists { .. }))),
            "{results:?}"
        );
        let mut f = Fixture::new();
        f.options.db_path = path.clone();
        f.open();
    }
}
