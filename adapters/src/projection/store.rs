//! The SQLite store: explicit `initialize` (a new file, or the two tables added to the host's
//! database), fail-closed `open`, the serialized write transaction every mutation runs in, and
//! read-only inspection.
//!
//! Each thread or process opens its own [`ProjectionStore`] (one connection each); SQLite's
//! write lock, taken by `BEGIN IMMEDIATE`, serializes every mutation across all of them.

use crate::atomic_file::{DirHandle, FileSystem, RealFs};
use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::projection::rows;
use crate::projection::runtime::RuntimeRoot;
use crate::projection::schema;
use crate::projection::write_gate::{Gate, Pass};
use rusqlite::{Connection, ErrorCode, OpenFlags, Transaction, TransactionBehavior};
use solewriter_core::config::TimingConfig;
use solewriter_core::projection::adoption::AdoptionPlan;
use solewriter_core::projection::channel::{ChannelRecord, ChannelRegistry};
use solewriter_core::projection::composition::Composition;
use solewriter_core::projection::lease::LeaseRecord;
use solewriter_core::projection::profile::{ConsumerBinding, Profile};
use solewriter_core::projection::target::{TargetId, TargetTuple};
use solewriter_files::steps::DurableDirs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Everything needed to open a store. Cheap to clone: each thread opens its own store.
#[derive(Clone)]
pub struct StoreOptions {
    /// Path of the SQLite database.
    pub db_path: PathBuf,
    /// Root under which `hook-projections/<target_id>/current.json` is written.
    pub runtime_root: RuntimeRoot,
    /// Lease TTL and busy timeout (required; no defaults).
    pub timing: TimingConfig,
    /// The host's channel registry.
    pub registry: ChannelRegistry,
    /// The broker clock.
    pub clock: Arc<dyn Clock>,
}

impl StoreOptions {
    /// The options of a store: its database, the runtime root, the timing (required, no
    /// defaults), the host's channel registry and the broker clock.
    pub fn new(
        db_path: impl Into<PathBuf>,
        runtime_root: RuntimeRoot,
        timing: TimingConfig,
        registry: ChannelRegistry,
        clock: Arc<dyn Clock>,
    ) -> Self {
        StoreOptions {
            db_path: db_path.into(),
            runtime_root,
            timing,
            registry,
            clock,
        }
    }
}

/// One connection to the shared store, with the configuration it runs under.
pub struct ProjectionStore {
    pub(crate) conn: Connection,
    /// The store's profile, read from its schema marker at `open`.
    pub(crate) profile: Profile,
    /// The consumer binding the next publications carry (Memory Core profile only).
    binding: Option<ConsumerBinding>,
    pub(crate) options: StoreOptions,
    /// The file system publication writes through ([`RealFs`] unless replaced).
    pub(crate) fs: Arc<dyn FileSystem>,
    /// Target directories whose creation this store has seen fsynced in their parent.
    pub(crate) durable_dirs: DurableDirs,
    /// This process's queue for the database's write lock.
    gate: Arc<Gate>,
}

/// The serialized write transaction: the passage through the in-process gate, then SQLite's
/// write lock (`BEGIN IMMEDIATE`), both held until commit or rollback (dropped: rolled back).
pub(crate) struct WriteTx<'s> {
    // Field order is drop order: the transaction ends before the gate lets the next in.
    tx: Transaction<'s>,
    _pass: Pass,
}

impl WriteTx<'_> {
    /// Commits; the gate opens either way.
    pub(crate) fn commit(self) -> rusqlite::Result<()> {
        self.tx.commit()
    }

    /// Rolls back; the gate opens either way.
    pub(crate) fn rollback(self) -> rusqlite::Result<()> {
        self.tx.rollback()
    }
}

impl std::ops::Deref for WriteTx<'_> {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        &self.tx
    }
}

impl std::fmt::Debug for ProjectionStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProjectionStore")
            .field("db_path", &self.options.db_path)
            .finish_non_exhaustive()
    }
}

fn configure(conn: &Connection, timing: &TimingConfig) -> rusqlite::Result<()> {
    conn.busy_timeout(timing.busy_timeout.as_duration())?;
    // FULL: a committed submission or grant survives power loss, not only a process crash.
    conn.execute_batch("PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;")
}

/// What [`ProjectionStore::initialize`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Initialized {
    /// The two tables were created (in a new file, or added to the host's database).
    Created,
    /// Both tables were already there, of this schema and profile; nothing was changed.
    AlreadyPresent,
    /// Both tables were there, of schema 1: they were upgraded to this schema, every row
    /// kept, in one transaction.
    Upgraded,
}

pub(crate) fn open_existing(path: &Path, timing: &TimingConfig) -> Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags).map_err(|e| unreadable(path, e))?;
    configure(&conn, timing).map_err(|e| unreadable(path, e))?;
    Ok(conn)
}

fn unreadable(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Unreadable {
        path: path.to_owned(),
        reason: e.to_string(),
    }
}

/// `BEGIN IMMEDIATE` on `conn` (the database at `path`), waiting at most the busy timeout
/// ([`Error::Busy`]).
pub(crate) fn begin_immediate<'c>(
    conn: &'c Connection,
    path: &Path,
    timing: &TimingConfig,
) -> Result<Transaction<'c>> {
    Transaction::new_unchecked(conn, TransactionBehavior::Immediate).map_err(|e| {
        match e.sqlite_error_code() {
            Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => Error::Busy {
                timeout_ms: timing.busy_timeout.as_millis(),
            },
            _ => unreadable(path, e),
        }
    })
}

/// Adds the two tables of `profile` to the existing database at `path` (or upgrades tables
/// of schema 1) in one `BEGIN IMMEDIATE` transaction, after checking, under the same write
/// lock, that neither exists in another shape or profile and that the database is in WAL mode.
fn add_tables(path: &Path, timing: &TimingConfig, profile: Profile) -> Result<Initialized> {
    let conn = open_existing(path, timing)?;
    let tx = begin_immediate(&conn, path, timing)?;
    schema::verify_wal(&tx, path)?;
    let mismatch = |found: Profile| Error::ProfileMismatch {
        path: path.to_owned(),
        found: found.name(),
        wanted: profile.name(),
    };
    match schema::layout(&tx, path)? {
        schema::Layout::Absent => {
            schema::create(&tx, profile).map_err(|e| unreadable(path, e))?;
            tx.commit().map_err(|e| unreadable(path, e))?;
            Ok(Initialized::Created)
        }
        schema::Layout::Current(found) if found == profile => Ok(Initialized::AlreadyPresent),
        schema::Layout::Current(found) => Err(mismatch(found)),
        // Schema 1 knew one profile, the generic one (its target ids are 64 hex digits).
        schema::Layout::Earlier if profile != Profile::Generic => Err(mismatch(Profile::Generic)),
        schema::Layout::Earlier => {
            let plan =
                AdoptionPlan::upgrade(rows::read_leases(&tx)?, rows::read_all_channels(&tx)?);
            schema::execute_plan(&tx, &plan).map_err(|e| unreadable(path, e))?;
            tx.commit().map_err(|e| unreadable(path, e))?;
            tracing::info!(path = %path.display(), "store upgraded to schema 2");
            Ok(Initialized::Upgraded)
        }
    }
}

/// The directory holding `path` (`.` for a bare file name).
fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    }
}

/// Builds a new store under a temp name beside `path` and links it into place. `Ok(false)`:
/// another initializer's file appeared at `path` first (the temp is removed).
fn create_database(path: &Path, timing: &TimingConfig, profile: Profile) -> Result<bool> {
    use std::os::unix::fs::OpenOptionsExt;
    let parent = parent_dir(path);
    let name = path
        .file_name()
        .ok_or_else(|| unreadable(path, "not a file name"))?;
    let mut nonce = [0u8; 8];
    RealFs
        .fill_random(&mut nonce)
        .map_err(|e| Error::Random(e.to_string()))?;
    let mut temp_name = std::ffi::OsString::from(".");
    temp_name.push(name);
    temp_name.push(format!(".init-{}", solewriter_core::hex::encode(&nonce)));
    let temp = parent.join(temp_name);
    let remove_temp = || {
        for suffix in ["", "-wal", "-shm"] {
            let mut p = temp.as_os_str().to_owned();
            p.push(suffix);
            let _ = std::fs::remove_file(PathBuf::from(p));
        }
    };
    let built = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(crate::atomic_file::FILE_MODE)
        .open(&temp)
        .map_err(|e| unreadable(path, format!("cannot create {}: {e}", temp.display())))
        .and_then(|_| {
            let conn = open_existing(&temp, timing)?;
            let build = || -> rusqlite::Result<()> {
                conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0))?;
                conn.execute_batch("BEGIN IMMEDIATE")?;
                schema::create(&conn, profile)?;
                conn.execute_batch("COMMIT")?;
                // Everything into the main file before it is linked into place.
                conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
                    r.get::<_, i64>(0)
                })
                .and_then(|busy| match busy {
                    0 => Ok(()),
                    _ => Err(rusqlite::Error::SqliteFailure(
                        rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_BUSY),
                        Some("checkpoint of the new store did not complete".into()),
                    )),
                })
            };
            build().map_err(|e| unreadable(path, format!("initialize failed: {e}")))?;
            conn.close().map_err(|(_, e)| unreadable(path, e))?;
            std::fs::File::open(&temp)
                .and_then(|f| f.sync_all())
                .map_err(|e| unreadable(path, format!("fsync of the new store failed: {e}")))
        });
    if let Err(e) = built {
        remove_temp();
        return Err(e);
    }
    let linked = std::fs::hard_link(&temp, path);
    remove_temp();
    match linked {
        Ok(()) => DirHandle::open(parent)
            .and_then(|dir| RealFs.sync_dir(&dir))
            .map(|()| true)
            .map_err(|e| {
                unreadable(
                    path,
                    format!("created, but its directory fsync failed: {e}"),
                )
            }),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(unreadable(
            path,
            format!("cannot link the new store into place: {e}"),
        )),
    }
}

impl ProjectionStore {
    /// Adds the two tables to the database at `db_path` — a new file, or an existing database
    /// of the host's (in WAL mode, which the host sets) — in one transaction, touching nothing
    /// else: no pragma, no other table. Idempotent: a database that already holds both tables
    /// of this schema is left as it is ([`Initialized::AlreadyPresent`]). Refuses, changing
    /// nothing, when either table exists with another shape or version, or only one of them
    /// exists ([`Error::ForeignSchema`], [`Error::SchemaVersion`]).
    ///
    /// A new file is made complete before it appears: it is built under a unique temp name
    /// (WAL mode, both tables, checkpointed and fsynced), then hard-linked to `db_path`, which
    /// fails if the name exists — so of concurrent initializers one creates the file and the
    /// others find it complete, and a crash leaves either no file or a complete store (plus,
    /// at worst, the temp file of the crashed call).
    pub fn initialize(db_path: &Path, timing: &TimingConfig) -> Result<Initialized> {
        Self::initialize_profile(db_path, timing, Profile::Generic)
    }

    /// [`Self::initialize`] for a store of `profile` (the Memory Core's, or the generic one).
    /// A store's profile is fixed when it is made: tables of another profile are refused
    /// ([`Error::ProfileMismatch`]), changing nothing. Tables of schema 1 (generic) are
    /// upgraded in place ([`Initialized::Upgraded`]).
    pub fn initialize_profile(
        db_path: &Path,
        timing: &TimingConfig,
        profile: Profile,
    ) -> Result<Initialized> {
        // Nothing at the path (or nothing we can see): create the file, which fails loudly
        // when the path cannot be written; another initializer's file may win the race.
        if db_path.symlink_metadata().is_err() && create_database(db_path, timing, profile)? {
            return Ok(Initialized::Created);
        }
        add_tables(db_path, timing, profile)
    }

    /// Opens the store in an existing database. Fails closed — creating nothing — on a
    /// missing file or missing tables ([`Error::StoreMissing`]), tables of another shape or
    /// version, a database not in WAL mode, or an unreadable file.
    pub fn open(options: &StoreOptions) -> Result<Self> {
        let path = &options.db_path;
        match path.metadata() {
            Ok(m) if m.is_file() => {}
            Ok(_) => return Err(unreadable(path, "not a regular file")),
            Err(_) => return Err(Error::StoreMissing { path: path.clone() }),
        }
        let conn = open_existing(path, &options.timing)?;
        let profile = schema::verify(&conn, path)?;
        options
            .registry
            .check_profile(profile)
            .map_err(|e| Error::Profile(e.to_string()))?;
        Ok(ProjectionStore {
            conn,
            profile,
            binding: None,
            options: options.clone(),
            fs: Arc::new(RealFs),
            durable_dirs: DurableDirs::default(),
            gate: Gate::of(path),
        })
    }

    /// Makes publication write through `fs` instead of the operating system's file system.
    /// A test seam (fault injection, crash-sequence recording), not for production use.
    #[doc(hidden)]
    pub fn with_file_system(mut self, fs: Arc<dyn FileSystem>) -> Self {
        self.fs = fs;
        self
    }

    /// The options this store was opened with.
    pub fn options(&self) -> &StoreOptions {
        &self.options
    }

    /// The store's busy timeout.
    pub(crate) fn busy_timeout(&self) -> Duration {
        self.options.timing.busy_timeout.as_duration()
    }

    /// Begins the serialized write transaction, waiting at most the busy timeout.
    pub(crate) fn begin(&self) -> Result<WriteTx<'_>> {
        self.begin_by(Instant::now() + self.busy_timeout())
    }

    /// Begins the serialized write transaction: passes this process's gate, then
    /// `BEGIN IMMEDIATE` takes SQLite's write lock; both are held until commit or rollback.
    /// All waiting ends at `deadline` ([`Error::Busy`]).
    pub(crate) fn begin_by(&self, deadline: Instant) -> Result<WriteTx<'_>> {
        let busy = || Error::Busy {
            timeout_ms: self.options.timing.busy_timeout.as_millis(),
        };
        let left = || deadline.saturating_duration_since(Instant::now());
        let pass = self.gate.enter(left()).ok_or_else(busy)?;
        // SQLite's own wait (for another process) gets what is left of the deadline.
        self.conn
            .busy_timeout(left())
            .map_err(|e| self.map_err(e))?;
        let begun = Transaction::new_unchecked(&self.conn, TransactionBehavior::Immediate);
        let restored = self.conn.busy_timeout(self.busy_timeout());
        let tx = begun.map_err(|e| self.map_err(e))?;
        restored.map_err(|e| self.map_err(e))?;
        Ok(WriteTx { tx, _pass: pass })
    }

    /// After a failed commit: make sure the connection is not left inside a transaction
    /// (which would keep the write lock and make every other writer `Busy`).
    pub(crate) fn abandon_transaction(&self) {
        if !self.conn.is_autocommit() {
            if let Err(error) = self.conn.execute_batch("ROLLBACK") {
                tracing::error!(%error, "rollback after a failed commit failed");
            }
        }
    }

    /// Maps an error of a plain read: a busy/locked SQLite error becomes [`Error::Busy`].
    pub(crate) fn busy_aware(&self, error: Error) -> Error {
        match error {
            Error::Sqlite(e) => self.map_err(e),
            other => other,
        }
    }

    /// Maps a SQLite error: busy/locked becomes [`Error::Busy`].
    pub(crate) fn map_err(&self, e: rusqlite::Error) -> Error {
        match e.sqlite_error_code() {
            Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => Error::Busy {
                timeout_ms: self.options.timing.busy_timeout.as_millis(),
            },
            _ => Error::Sqlite(e),
        }
    }

    /// The store's profile (what its documents, target ids and envelopes look like).
    pub fn profile(&self) -> Profile {
        self.profile
    }

    /// Sets the consumer binding every later publication through this handle carries, as the
    /// Memory Core's writer takes one with every publication (`publish({tuple,
    /// consumerBinding})`): set it before each publication whose binding changed. A store of
    /// the Memory Core profile refuses to publish without one, a generic store with one
    /// ([`Error::Profile`], nothing written).
    pub fn set_consumer_binding(&mut self, binding: Option<ConsumerBinding>) {
        self.binding = binding;
    }

    /// What a publication composes with: the registry, and the binding the profile needs.
    pub(crate) fn composition(&self) -> Result<Composition<'_>> {
        Composition::for_store(self.profile, &self.options.registry, self.binding.as_ref())
            .map_err(|e| Error::Profile(e.to_string()))
    }

    /// Admits a target: inserts its lease row (unheld, epoch 0) if absent. Idempotent.
    /// The target id is derived here, from the attested tuple, by the store's profile; no
    /// caller chooses it.
    pub fn admit_target(&self, tuple: &TargetTuple) -> Result<TargetId> {
        let target = self.profile.target_id(tuple);
        let tx = self.begin()?;
        rows::insert_admitted(&tx, &target).map_err(|e| self.map_err(e))?;
        tx.commit().map_err(|e| self.map_err(e))?;
        tracing::info!(target_id = %target, "target admitted");
        Ok(target)
    }

    /// The lease row of `target`, if admitted (read-only).
    pub fn lease_row(&self, target: &TargetId) -> Result<Option<LeaseRecord>> {
        rows::read_lease(&self.conn, target)
    }

    /// Every lease row, by target id (read-only).
    pub fn lease_rows(&self) -> Result<Vec<LeaseRecord>> {
        rows::read_leases(&self.conn)
    }

    /// The channel rows of `target`, by channel name (read-only).
    pub fn channel_rows(&self, target: &TargetId) -> Result<Vec<ChannelRecord>> {
        rows::read_channels(&self.conn, target)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    #[test]
    fn the_parent_of_a_bare_file_name_is_the_current_directory() {
        assert_eq!(parent_dir(Path::new("store.sqlite")), Path::new("."));
        assert_eq!(parent_dir(Path::new("a/store.sqlite")), Path::new("a"));
        assert_eq!(parent_dir(Path::new("/a/b.sqlite")), Path::new("/a"));
    }

    /// The per-connection settings every store connection runs with.
    #[test]
    fn a_store_connection_is_durable_checks_foreign_keys_and_waits_its_busy_timeout() {
        let dir = tempfile::tempdir().unwrap();
        let timing = TimingConfig::from_values(Some(60_000), Some(1_234)).unwrap();
        let db_path = dir.path().join("store.sqlite");
        ProjectionStore::initialize(&db_path, &timing).unwrap();
        let store = ProjectionStore::open(&StoreOptions::new(
            &db_path,
            RuntimeRoot::new(dir.path()),
            timing,
            ChannelRegistry::new([]).unwrap(),
            Arc::new(ManualClock::new(Millis(1))),
        ))
        .unwrap();
        let pragma = |name: &str| -> i64 {
            store
                .conn
                .query_row(&format!("PRAGMA {name}"), [], |r| r.get(0))
                .unwrap()
        };
        assert_eq!(pragma("synchronous"), 2, "FULL");
        assert_eq!(pragma("foreign_keys"), 1);
        assert_eq!(pragma("busy_timeout"), 1_234);
        assert_eq!(
            format!("{store:?}"),
            format!("ProjectionStore {{ db_path: {db_path:?}, .. }}")
        );
    }
    use solewriter_core::projection::target::TargetTuple;
    use solewriter_core::time::Millis;

    /// A write transaction waits for another thread's within the busy timeout and starts as
    /// soon as it ends, instead of answering `Busy` at once.
    #[test]
    fn a_writer_waits_at_the_gate_within_its_busy_timeout() {
        let dir = tempfile::tempdir().unwrap();
        let timing = TimingConfig::from_values(Some(60_000), Some(60_000)).unwrap();
        let db_path = dir.path().join("store.sqlite");
        ProjectionStore::initialize(&db_path, &timing).unwrap();
        let options = StoreOptions {
            db_path: db_path.clone(),
            runtime_root: RuntimeRoot::new(dir.path()),
            timing,
            registry: ChannelRegistry::new([]).unwrap(),
            clock: Arc::new(ManualClock::new(Millis(1_000))),
        };
        let holder = ProjectionStore::open(&options).unwrap();
        let tx = holder.begin().unwrap();
        let gate = Gate::of(&db_path);
        std::thread::scope(|s| {
            let waiter = s.spawn(|| {
                let store = ProjectionStore::open(&options).unwrap();
                let tuple = TargetTuple::new(["1", "c", "a", "h", "i", "w", "k"]).unwrap();
                store.admit_target(&tuple).is_ok()
            });
            while gate.waiters() == 0 {
                assert!(!waiter.is_finished(), "the writer gave up at once");
                std::thread::yield_now();
            }
            tx.commit().unwrap();
            assert!(
                waiter.join().unwrap(),
                "admitted once the other transaction ended"
            );
        });
    }
}
