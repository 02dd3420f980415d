//! `initialize` versus `open`: explicit creation in a new file or the host's database,
//! fail-closed opening, busy store, racing initializers.

mod support;

use rusqlite::Connection;
use solewriter_adapters::projection::schema::marker;
use solewriter_adapters::projection::store::{Initialized, ProjectionStore};
use solewriter_adapters::Error;
use solewriter_core::projection::profile::Profile;
use support::*;

fn master(path: &std::path::Path) -> Vec<(String, String, Option<String>)> {
    let conn = Connection::open(path).unwrap();
    let rows = conn
        .prepare("SELECT type, name, sql FROM sqlite_master ORDER BY type, name")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    rows
}

fn pragma(conn: &Connection, name: &str) -> i64 {
    conn.query_row(&format!("PRAGMA {name}"), [], |r| r.get(0))
        .unwrap()
}

/// The host's database: its own table, pragmas and rows, in WAL mode (set by the host).
fn host_database(path: &std::path::Path) {
    let conn = Connection::open(path).unwrap();
    conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0))
        .unwrap();
    conn.execute_batch(
        "PRAGMA application_id = 4242; PRAGMA user_version = 17;
         CREATE TABLE SummarizationJobs (id INTEGER PRIMARY KEY, state TEXT NOT NULL);
         INSERT INTO SummarizationJobs (state) VALUES ('queued'), ('done');",
    )
    .unwrap();
}

/// Release 0.1.0's DDL and pragmas, byte for byte as that release wrote them.
const RELEASE_0_1_0: &str = "
CREATE TABLE HookProjectionLeases (
    target_id              TEXT    NOT NULL PRIMARY KEY CHECK (length(target_id) = 64),
    fencing_epoch          INTEGER NOT NULL CHECK (fencing_epoch >= 0),
    holder_token_hash      BLOB    CHECK (holder_token_hash IS NULL OR length(holder_token_hash) = 32),
    holder_instance_digest TEXT,
    acquired_at            INTEGER,
    expires_at             INTEGER,
    state                  TEXT    NOT NULL CHECK (state IN ('unheld', 'held', 'released'))
) STRICT;
CREATE TABLE HookProjectionChannels (
    target_id        TEXT    NOT NULL REFERENCES HookProjectionLeases (target_id),
    channel          TEXT    NOT NULL,
    source_watermark INTEGER NOT NULL CHECK (source_watermark >= 0),
    envelope_json    TEXT    NOT NULL,
    captured_at      INTEGER NOT NULL,
    expires_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    degraded_reason  TEXT,
    PRIMARY KEY (target_id, channel)
) STRICT;
";

#[test]
fn initialize_creates_exactly_the_two_tables_marked_and_sets_no_database_pragma() {
    let f = Fixture::new();
    let conn = Connection::open(&f.options.db_path).unwrap();
    let objects = master(&f.options.db_path);
    let names: Vec<&str> = objects.iter().map(|(_, n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "sqlite_autoindex_HookProjectionChannels_1",
            "sqlite_autoindex_HookProjectionLeases_1",
            "HookProjectionChannels",
            "HookProjectionLeases"
        ]
    );
    for (name, columns) in [("HookProjectionLeases", 7), ("HookProjectionChannels", 9)] {
        let sql = &objects.iter().find(|(_, n, _)| n == name).unwrap().2;
        let sql = sql.as_deref().unwrap();
        assert!(sql.contains(&marker(Profile::Generic)), "{sql}");
        let found: i64 = conn
            .query_row("SELECT count(*) FROM pragma_table_info(?1)", [name], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(found, columns, "{name}");
    }
    assert_eq!(pragma(&conn, "user_version"), 0, "no user_version claimed");
    assert_eq!(
        pragma(&conn, "application_id"),
        0,
        "no application_id claimed"
    );
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal", "a file solewriter creates is its own: WAL");
    let leftovers: Vec<_> = std::fs::read_dir(f.dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.contains(".init-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    assert!(f.open().lease_rows().unwrap().is_empty());
}

#[test]
fn initialize_adds_the_tables_to_a_host_database_and_touches_nothing_else() {
    let f = Fixture::new();
    let path = f.dir.path().join("host.sqlite");
    host_database(&path);
    let before = master(&path);
    let initialized = ProjectionStore::initialize(&path, &f.options.timing).unwrap();
    assert_eq!(initialized, Initialized::Created);
    let after = master(&path);
    let host_objects: Vec<_> = after
        .iter()
        .filter(|(_, n, _)| !n.contains("HookProjection"))
        .cloned()
        .collect();
    assert_eq!(host_objects, before, "the host's schema is untouched");
    assert_eq!(after.len(), before.len() + 4, "two tables, their two keys");
    let conn = Connection::open(&path).unwrap();
    assert_eq!(pragma(&conn, "application_id"), 4242);
    assert_eq!(pragma(&conn, "user_version"), 17);
    let jobs: Vec<String> = conn
        .prepare("SELECT state FROM SummarizationJobs ORDER BY id")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(jobs, ["queued", "done"]);
    let mut options = f.options.clone();
    options.db_path = path.clone();
    let store = ProjectionStore::open(&options).unwrap();
    store.admit_target(&tuple("a")).unwrap();
    assert_eq!(
        ProjectionStore::initialize(&path, &f.options.timing).unwrap(),
        Initialized::AlreadyPresent
    );
    assert_eq!(
        store.lease_rows().unwrap().len(),
        1,
        "the second call changed nothing"
    );
}

#[test]
fn initialize_twice_changes_nothing() {
    let f = Fixture::new();
    f.open().admit_target(&tuple("a")).unwrap();
    let before = master(&f.options.db_path);
    assert_eq!(
        ProjectionStore::initialize(&f.options.db_path, &f.options.timing).unwrap(),
        Initialized::AlreadyPresent
    );
    assert_eq!(master(&f.options.db_path), before);
    assert_eq!(f.open().lease_rows().unwrap().len(), 1);
}

#[test]
fn initialize_refuses_a_database_not_in_wal_mode_and_changes_nothing() {
    let f = Fixture::new();
    let path = f.dir.path().join("host.sqlite");
    Connection::open(&path)
        .unwrap()
        .execute_batch("CREATE TABLE SummarizationJobs (id INTEGER PRIMARY KEY);")
        .unwrap();
    let before = std::fs::read(&path).unwrap();
    let err = ProjectionStore::initialize(&path, &f.options.timing).unwrap_err();
    assert!(
        matches!(&err, Error::ForeignSchema { reason, .. } if reason.contains("journal_mode delete")),
        "{err}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), before);
}

/// A way to change a store, and the error `open` and `initialize` must answer with.
type Case = (&'static str, &'static str, fn(&Error) -> bool);

/// Each way the two tables can exist in another shape, applied to a store: `open` and
/// `initialize` both refuse it with the named error, and the file is unchanged.
#[test]
fn tables_of_another_shape_or_version_are_refused_by_open_and_initialize() {
    let cases: [Case; 7] = [
        (
            "a column added",
            "ALTER TABLE HookProjectionLeases ADD COLUMN extra TEXT;",
            |e| matches!(e, Error::ForeignSchema { reason, .. } if reason.contains("another shape")),
        ),
        (
            "one table only",
            "DROP TABLE HookProjectionChannels;",
            |e| matches!(e, Error::ForeignSchema { reason, .. } if reason.contains("missing")),
        ),
        (
            "an index attached",
            "CREATE INDEX by_state ON HookProjectionLeases (state);",
            |e| matches!(e, Error::ForeignSchema { reason, .. } if reason.contains("index by_state")),
        ),
        (
            "a trigger attached",
            "CREATE TRIGGER t AFTER UPDATE ON HookProjectionLeases BEGIN SELECT 1; END;",
            |e| matches!(e, Error::ForeignSchema { reason, .. } if reason.contains("trigger t")),
        ),
        (
            "a view over a table",
            "CREATE VIEW HookProjectionChannelsView AS SELECT * FROM HookProjectionChannels;",
            |_| false,
        ),
        (
            "a later version",
            "PRAGMA writable_schema = ON; UPDATE sqlite_master SET sql = replace(sql, 'solewriter schema 2', 'solewriter schema 3'); PRAGMA writable_schema = OFF;",
            |e| matches!(e, Error::SchemaVersion { found: 3, expected: 2, .. }),
        ),
        (
            "no marker",
            "PRAGMA writable_schema = ON; UPDATE sqlite_master SET sql = replace(sql, ' -- solewriter schema 2 profile solewriter.hook-projection.v2', ''); PRAGMA writable_schema = OFF;",
            |e| matches!(e, Error::ForeignSchema { reason, .. } if reason.contains("another shape")),
        ),
    ];
    for (case, sql, expected) in cases {
        let f = Fixture::new();
        let conn = Connection::open(&f.options.db_path).unwrap();
        conn.execute_batch(sql).unwrap();
        drop(conn);
        let before = std::fs::read(&f.options.db_path).unwrap();
        let opened = ProjectionStore::open(&f.options);
        let initialized = ProjectionStore::initialize(&f.options.db_path, &f.options.timing);
        if case == "a view over a table" {
            // A view is the host's own object: it attaches to no table of ours.
            assert!(opened.is_ok(), "{case}: {:?}", opened.err());
            assert_eq!(initialized.unwrap(), Initialized::AlreadyPresent, "{case}");
            continue;
        }
        let err = opened.unwrap_err();
        assert!(expected(&err), "{case}: open said {err}");
        let err = initialized.unwrap_err();
        assert!(expected(&err), "{case}: initialize said {err}");
        assert_eq!(std::fs::read(&f.options.db_path).unwrap(), before, "{case}");
    }
}

/// A store made by release 0.1.0 (unmarked tables, its two pragmas) or of schema 1 is refused
/// by `open` (nothing changed) and upgraded by `initialize`, every row kept; it then works.
#[test]
fn stores_of_schema_1_are_upgraded_by_initialize_with_every_row() {
    for marked in [false, true] {
        let f = Fixture::new();
        let path = f.dir.path().join("old.sqlite");
        let conn = Connection::open(&path).unwrap();
        conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0))
            .unwrap();
        let tables = if marked {
            RELEASE_0_1_0.replace(" (\n", " ( -- solewriter schema 1\n")
        } else {
            RELEASE_0_1_0.to_owned()
        };
        conn.execute_batch(&format!(
            "BEGIN;{tables}PRAGMA application_id = 1399802967; PRAGMA user_version = 1; COMMIT;"
        ))
        .unwrap();
        let target = Profile::Generic.target_id(&tuple("a"));
        conn.execute(
            "INSERT INTO HookProjectionLeases VALUES (?1, 4, zeroblob(32), 'h', 1, 2, 'released')",
            [target.as_str()],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO HookProjectionChannels VALUES (?1, 'computed-route', 9, \
             '{\"schema\":\"computed-route.v1\",\"notAuthority\":true}', 1, 9007199254740991, 2, 'source-conflict')",
            [target.as_str()],
        )
        .unwrap();
        drop(conn);
        let mut options = f.options.clone();
        options.db_path = path.clone();
        let before = std::fs::read(&path).unwrap();
        let err = ProjectionStore::open(&options).unwrap_err();
        assert!(
            matches!(
                err,
                Error::SchemaVersion {
                    found: 1,
                    expected: 2,
                    ..
                }
            ),
            "{err}"
        );
        assert_eq!(
            std::fs::read(&path).unwrap(),
            before,
            "open changed nothing"
        );
        // Schema 1 knew the generic profile only: asked for another, nothing is upgraded.
        assert!(matches!(
            ProjectionStore::initialize_profile(&path, &options.timing, Profile::MemoryCore),
            Err(Error::ProfileMismatch {
                found: "solewriter.hook-projection.v2",
                ..
            })
        ));
        assert_eq!(std::fs::read(&path).unwrap(), before, "nothing changed");
        assert_eq!(
            ProjectionStore::initialize(&path, &options.timing).unwrap(),
            Initialized::Upgraded,
            "marked: {marked}"
        );
        assert_eq!(
            ProjectionStore::initialize(&path, &options.timing).unwrap(),
            Initialized::AlreadyPresent
        );
        let store = ProjectionStore::open(&options).unwrap();
        assert_eq!(store.lease_row(&target).unwrap().unwrap().fencing_epoch, 4);
        let rows = store.channel_rows(&target).unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].source_watermark, 9.into());
        assert_eq!(
            rows[0].degraded_reason,
            Some(solewriter_core::projection::channel::DegradedReason::SourceConflict)
        );
        store.submit(&router(), &route(&target, 10, "x")).unwrap();
        let lease = expect_acquired(store.acquire(&target, &holder("h")).unwrap());
        assert_eq!(lease.epoch(), 5, "the epoch goes on from the upgraded row");
        lease.publish().unwrap();
        assert!(std::fs::read(options.runtime_root.current_path(&target)).is_ok());
    }
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
fn open_a_database_without_the_tables_fails_and_changes_nothing() {
    let f = Fixture::new();
    let mut options = f.options.clone();
    options.db_path = f.dir.path().join("host.sqlite");
    host_database(&options.db_path);
    let before = master(&options.db_path);
    let err = ProjectionStore::open(&options).unwrap_err();
    assert!(matches!(err, Error::StoreMissing { .. }), "{err}");
    assert_eq!(master(&options.db_path), before, "nothing changed");
}

/// The database-wide pragmas are the host's: changing them does not concern the store.
#[test]
fn the_hosts_pragmas_are_not_the_stores() {
    let f = Fixture::new();
    let conn = Connection::open(&f.options.db_path).unwrap();
    conn.execute_batch("PRAGMA user_version = 7; PRAGMA application_id = 99;")
        .unwrap();
    drop(conn);
    f.open().admit_target(&tuple("a")).unwrap();
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

/// Initializers racing for one new path, and for one host database: exactly one creates the
/// tables, the others find them complete (`AlreadyPresent`), and none destroys the others' work.
#[test]
fn concurrent_initializers_create_the_tables_once() {
    for round in 0..20 {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.sqlite");
        if round % 2 == 1 {
            host_database(&path);
        }
        let timing = timing(TTL_MS, 5_000);
        let results: Vec<_> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..3)
                .map(|_| s.spawn(|| ProjectionStore::initialize(&path, &timing)))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let created = results
            .iter()
            .filter(|r| matches!(r, Ok(Initialized::Created)))
            .count();
        let present = results
            .iter()
            .filter(|r| matches!(r, Ok(Initialized::AlreadyPresent)))
            .count();
        assert_eq!((created, present), (1, 2), "round {round}: {results:?}");
        let mut f = Fixture::new();
        f.options.db_path = path.clone();
        f.open();
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.contains(".init-"))
            .collect();
        assert!(names.is_empty(), "temp files left: {names:?}");
    }
}

/// `initialize` on an existing database waits for another writer at most its busy timeout,
/// then answers `Busy` and changes nothing.
#[test]
fn initialize_on_a_busy_database_is_busy_and_changes_nothing() {
    let f = Fixture::with_timing(timing(TTL_MS, 50), 1024);
    let path = f.dir.path().join("host.sqlite");
    host_database(&path);
    let blocker = Connection::open(&path).unwrap();
    blocker.execute_batch("BEGIN IMMEDIATE;").unwrap();
    let err = ProjectionStore::initialize(&path, &f.options.timing).unwrap_err();
    assert!(matches!(err, Error::Busy { timeout_ms: 50 }), "{err}");
    blocker.execute_batch("ROLLBACK;").unwrap();
    assert!(master(&path)
        .iter()
        .all(|(_, n, _)| !n.contains("HookProjection")));
}

/// A path that is a directory is refused before SQLite sees it (a FIFO would block an open).
#[test]
fn open_a_directory_is_unreadable_and_says_so() {
    let f = Fixture::new();
    let mut options = f.options.clone();
    options.db_path = f.dir.path().join("runtime");
    let err = ProjectionStore::open(&options).unwrap_err();
    assert!(
        matches!(&err, Error::Unreadable { reason, .. } if reason == "not a regular file"),
        "{err}"
    );
}
