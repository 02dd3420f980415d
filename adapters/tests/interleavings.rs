//! Adapter-level interleavings of the takeover path, on the real SQLite adapter.
//!
//! A holder publishes on its own thread and is parked — before every effect of the core's
//! publication machine, and inside every `FileSystem` call — while the broker clock moves past
//! its expiry (and, in half the runs, back again before it resumes). While it is parked, a
//! contender on its own connection tries to take over: it acquires, and a rogue presents the
//! holder's epoch with its own token to release. The suite asserts, at every park point:
//!
//! - inside the holder's lock envelope, the store's write lock is held (a raw `BEGIN
//!   IMMEDIATE` on another connection is busy) and the target's kernel lock is held (a
//!   `try_lock` of its lock file would block), and no contender is granted;
//! - outside it (the draft and its temp file before the transaction, the directory fsync
//!   after it), the holder holds neither lock, and the contender is granted on its first
//!   attempt and publishes (liveness: no exclusion outlives the holder's lease) — and then the
//!   holder is fenced, unless it had renamed and committed before the grant;
//! - in every run: no rename by the holder after a successor's grant committed, the rogue
//!   releases nothing, and `current.json` is always a complete document.
//!
//! So any change that lets go of either lock anywhere between the revalidation and the rename
//! fails here (FENCING.md records the spans broken on purpose). A second test reproduces the
//! descriptor hazard across real processes: a holder process closes a descriptor of the
//! database file inside its transaction, which drops SQLite's POSIX locks — and the target
//! lock still refuses the successor.

mod children;
mod scripted_fs;
mod support;

use scripted_fs::{Call, Script, ScriptedFs};
use solewriter_adapters::projection::lease::{Acquisition, ReleaseOutcome};
use solewriter_adapters::projection::publication::{PublishProbe, PublishStep};
use solewriter_adapters::projection::store::StoreOptions;
use solewriter_adapters::projection::target_lock::lock_path;
use solewriter_adapters::{Error, FileError};
use solewriter_core::projection::target::TargetId;
use solewriter_core::time::Millis;
use solewriter_core::token::HolderToken;
use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::*;

/// Where the holder parks: before the `n`-th effect of its publication, or inside its `n`-th
/// file-system call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Point {
    Effect(usize),
    FsCall(usize),
}

/// A global order of events, to tell whether a rename came after a successor's grant.
static SEQ: AtomicU64 = AtomicU64::new(0);

fn tick() -> u64 {
    SEQ.fetch_add(1, SeqCst) + 1
}

/// Parks the holder at one point and records what it did.
struct Parker {
    at: Option<Point>,
    effects: AtomicUsize,
    fs_calls: AtomicUsize,
    /// Effect names in order (recorded on every run; the first, unparked run lists them).
    effect_names: Mutex<Vec<&'static str>>,
    fs_names: Mutex<Vec<&'static str>>,
    /// For each file-system call, the index of the effect it ran in.
    fs_effects: Mutex<Vec<usize>>,
    parked: Mutex<Option<Sender<&'static str>>>,
    resume: Mutex<Option<Receiver<()>>>,
    /// When the rename was executed (a [`tick`]).
    renamed_at: AtomicU64,
}

impl Parker {
    fn new(at: Option<Point>) -> (Arc<Self>, Receiver<&'static str>, Sender<()>) {
        let (parked_tx, parked_rx) = channel();
        let (resume_tx, resume_rx) = channel();
        let parker = Arc::new(Parker {
            at,
            effects: AtomicUsize::new(0),
            fs_calls: AtomicUsize::new(0),
            effect_names: Mutex::default(),
            fs_names: Mutex::default(),
            fs_effects: Mutex::default(),
            parked: Mutex::new(Some(parked_tx)),
            resume: Mutex::new(Some(resume_rx)),
            renamed_at: AtomicU64::new(0),
        });
        (parker, parked_rx, resume_tx)
    }

    fn maybe_park(&self, here: Point, name: &'static str) {
        if self.at == Some(here) {
            let parked = self.parked.lock().unwrap().take().expect("parks once");
            parked.send(name).unwrap();
            let resume = self.resume.lock().unwrap().take().expect("parks once");
            // Resumed by a message or by the sender being dropped.
            let _ = resume.recv();
        }
    }

    fn fs_call(&self, name: &'static str) {
        self.fs_names.lock().unwrap().push(name);
        let effect = self
            .effects
            .load(SeqCst)
            .checked_sub(1)
            .expect("inside an effect");
        self.fs_effects.lock().unwrap().push(effect);
        let n = self.fs_calls.fetch_add(1, SeqCst);
        self.maybe_park(Point::FsCall(n), name);
    }
}

impl PublishProbe for Parker {
    fn reached(&self, _: PublishStep, _: &TargetId, _: u64) {}

    fn before(&self, effect: &'static str, _: &TargetId, _: u64) {
        self.effect_names.lock().unwrap().push(effect);
        let n = self.effects.fetch_add(1, SeqCst);
        self.maybe_park(Point::Effect(n), effect);
    }
}

/// The real file system, reporting each call that touches a file (not the kernel lock or
/// the random source) to the parker first.
struct ParkingFs(Arc<Parker>);

impl Script for ParkingFs {
    fn before(&self, call: Call<'_>) -> io::Result<()> {
        if !matches!(call, Call::TryLock | Call::FillRandom) {
            self.0.fs_call(call.name());
        }
        Ok(())
    }
    fn after(&self, call: Call<'_>, succeeded: bool) {
        if matches!(call, Call::Rename { .. }) && succeeded {
            self.0.renamed_at.store(tick(), SeqCst);
        }
    }
}

/// What one run saw.
#[derive(Debug, Default)]
struct Run {
    /// The contender was granted (and when).
    contender_granted_at: Option<u64>,
    /// The contender got `Busy`.
    contender_busy: bool,
    /// The contender, once granted, published.
    contender_published: bool,
    holder: Option<Result<u64, String>>,
}

/// Whether, parked at this point, the holder holds the store's write lock and the target
/// lock (from the unparked run's effect list).
fn envelope(effects: &[&str], fs_effects: &[usize], at: Point) -> (bool, bool) {
    let index = |name| effects.iter().position(|e| *e == name).expect("effect ran");
    // Parked before effect `n` (or inside a file-system call of effect `n`, which is neither
    // `begin` nor `commit`): the store's lock is held from `begin` until `commit` has run, the
    // target's from `lock-target` until `unlock-target` has run.
    let n = match at {
        Point::FsCall(call) => fs_effects[call],
        Point::Effect(n) => n,
    };
    (
        n > index("begin") && n <= index("commit"),
        n > index("lock-target") && n <= index("unlock-target"),
    )
}

fn target_of() -> TargetId {
    tuple("a").target_id()
}

/// The holder: its own store writing through the parker, a grant (its epoch sent on
/// `granted`), then a publication reporting each effect to the parker.
fn holder_publishes(
    options: &StoreOptions,
    parker: Arc<Parker>,
    granted: Sender<u64>,
) -> Result<u64, String> {
    let store = solewriter_adapters::projection::store::ProjectionStore::open(options)
        .unwrap()
        .with_file_system(Arc::new(ScriptedFs(ParkingFs(parker.clone()))));
    let lease = expect_acquired(store.acquire(&target_of(), &holder("a")).unwrap());
    let _ = granted.send(lease.epoch());
    match lease.publish_observed(&*parker) {
        Ok(p) => Ok(p.fencing_epoch),
        Err(e) => Err(e.to_string()),
    }
}

fn store_lock_is_held(options: &StoreOptions) -> bool {
    let conn = rusqlite::Connection::open(&options.db_path).unwrap();
    conn.busy_timeout(Duration::ZERO).unwrap();
    match conn.execute_batch("BEGIN IMMEDIATE") {
        Ok(()) => {
            conn.execute_batch("ROLLBACK").unwrap();
            false
        }
        Err(e) => {
            assert_eq!(
                e.sqlite_error_code(),
                Some(rusqlite::ErrorCode::DatabaseBusy),
                "{e}"
            );
            true
        }
    }
}

fn target_lock_is_held(options: &StoreOptions, target: &TargetId) -> bool {
    let file = File::open(lock_path(&options.runtime_root, target)).unwrap();
    match file.try_lock() {
        Ok(()) => {
            file.unlock().unwrap();
            false
        }
        Err(std::fs::TryLockError::WouldBlock) => true,
        Err(e) => panic!("try_lock: {e:?}"),
    }
}

/// Admits the target and publishes it once (holder `z`): a document of an earlier epoch
/// exists, so a stale rename would replace something, and every run of the holder makes the
/// same file-system calls (its directory chain is already known durable).
fn published_by_z(f: &Fixture) -> TargetId {
    let setup = f.open();
    let target = setup.admit_target(&tuple("a")).unwrap();
    setup.submit(&router(), &route(&target, 1, "one")).unwrap();
    expect_acquired(setup.acquire(&target, &holder("z")).unwrap())
        .publish()
        .unwrap();
    target
}

/// One run: the holder parks at `at` (or nowhere), the clock moves forward past its expiry
/// (and back when `back`), contenders act, the holder resumes.
fn run(at: Option<Point>, back: bool) -> (Run, Arc<Parker>) {
    let f = Fixture::new();
    let target = published_by_z(&f);
    let (parker, parked, resume) = Parker::new(at);
    let mut contender_options = f.options.clone();
    contender_options.timing = timing(TTL_MS, 20);
    let mut seen = Run::default();
    std::thread::scope(|s| {
        let (granted_tx, granted_rx) = channel();
        let (probe, options) = (parker.clone(), &f.options);
        let publisher = s.spawn(move || holder_publishes(options, probe, granted_tx));
        let epoch = granted_rx.recv().unwrap();
        if at.is_none() {
            // The listing run: one undisturbed publication.
            seen.holder = Some(publisher.join().unwrap());
            return;
        }
        wait_parked(&parked, at);
        f.clock.advance(TTL_MS);
        let contender =
            solewriter_adapters::projection::store::ProjectionStore::open(&contender_options)
                .unwrap();
        // A rogue presents the holder's epoch with its own token: never a release.
        match contender.release_token(&target, epoch, &HolderToken::from_bytes([7; 32])) {
            Ok(ReleaseOutcome::NotHolder(_)) => {}
            Err(e) if e.is_retryable() => {}
            other => panic!("rogue release at {at:?}: {other:?}"),
        }
        let granted: Option<solewriter_adapters::projection::lease::HeldLease<'_>> =
            match contender.acquire(&target, &holder("b")) {
                Ok(Acquisition::Acquired(b)) => {
                    seen.contender_granted_at = Some(tick());
                    // The successor publishes while the holder is still parked.
                    seen.contender_published = b.publish().is_ok();
                    None
                }
                Ok(Acquisition::Held(h)) => panic!("holder expired, yet held: {h:?}"),
                Err(e) if e.is_retryable() => {
                    seen.contender_busy = true;
                    None
                }
                Err(e) => panic!("contender at {at:?}: {e}"),
            };
        if back {
            f.clock.set(Millis(START.0 + 1));
        }
        drop(resume);
        seen.holder = Some(publisher.join().unwrap());
        if let Some(b) = granted {
            b.release().unwrap();
        }
    });
    // Whatever happened, current.json is a complete document.
    let bytes = f.current_bytes(&target).expect("published");
    serde_json::from_slice::<serde_json::Value>(&bytes).expect("a complete document");
    (seen, parker)
}

#[test]
fn a_contender_is_refused_inside_the_locks_and_publishes_at_once_outside_them() {
    // The unparked run lists the effects and file-system calls of one publication.
    let (listing_run, listing) = run(None, false);
    let effects = listing.effect_names.lock().unwrap().clone();
    let fs_calls = listing.fs_names.lock().unwrap().clone();
    let fs_effects = listing.fs_effects.lock().unwrap().clone();
    assert!(matches!(listing_run.holder, Some(Ok(_))), "{listing_run:?}");
    let points: Vec<Point> = (0..effects.len())
        .map(Point::Effect)
        .chain((0..fs_calls.len()).map(Point::FsCall))
        .collect();
    let (mut inside, mut granted, mut fenced, mut published) = (0, 0, 0, 0);
    // Parks under the target lock alone (only between `lock-target` and `begin`, and between
    // `commit` and `unlock-target`): a contender must be refused there too.
    let mut target_only = 0;
    // Parks outside both locks: the successor must be granted and publish.
    let mut outside = 0;
    for &at in &points {
        for back in [false, true] {
            let (seen, parker) = run(Some(at), back);
            let (store_lock, target_lock) = envelope(&effects, &fs_effects, at);
            let name = match at {
                Point::Effect(n) => effects[n],
                Point::FsCall(n) => fs_calls[n],
            };
            let renamed_at = parker.renamed_at.load(SeqCst);
            // No rename by the holder after a successor's grant committed.
            if let Some(granted_at) = seen.contender_granted_at {
                granted += 1;
                assert!(
                    renamed_at == 0 || renamed_at < granted_at,
                    "{at:?} ({name}), back {back}: the holder renamed after the successor's grant"
                );
                let fenced_now =
                    matches!(&seen.holder, Some(Err(e)) if e.contains("fenced (superseded"));
                // Parked after its own commit, the holder had published before the grant.
                let done_before = renamed_at != 0 && matches!(seen.holder, Some(Ok(_)));
                assert!(
                    fenced_now || done_before,
                    "{at:?} ({name}): granted a successor, yet the holder ended with {:?}",
                    seen.holder
                );
                fenced += usize::from(fenced_now);
            }
            if !store_lock && !target_lock {
                outside += 1;
                assert!(
                    seen.contender_granted_at.is_some() && seen.contender_published,
                    "{at:?} ({name}), back {back}: the holder held no lock, yet its successor was not granted and published at once: {seen:?}"
                );
            }
            if target_lock && !store_lock {
                target_only += 1;
            }
            if store_lock || target_lock {
                inside += 1;
                assert!(
                    seen.contender_granted_at.is_none() && seen.contender_busy,
                    "{at:?} ({name}), back {back}: a contender was granted while the holder held its locks: {seen:?}"
                );
            }
            if matches!(seen.holder, Some(Ok(_))) {
                published += 1;
            }
        }
    }
    // The lock checks proper, at each point once more (a run without contenders).
    for &at in &points {
        let (store_lock, target_lock) = envelope(&effects, &fs_effects, at);
        assert_eq!(
            locks_while_parked(at),
            (store_lock, target_lock),
            "{at:?}: the locks held while parked"
        );
    }
    solewriter_adapters_report(&format!(
        "adapter interleavings: ({} effect points + {} file-system points) x 2 clock moves = {} runs; {inside} inside the locks (no grant; {target_only} of them under the target lock alone), {outside} outside both (each granted a successor that published at once; {granted} grants in all, holder fenced in {fenced}), {published} holder publications",
        effects.len(),
        fs_calls.len(),
        2 * points.len()
    ));
    // Non-vacuity: both sides of the envelope were exercised — exactly the figures FENCING.md
    // quotes (the sequence is deterministic; update both together).
    assert_eq!(
        (
            effects.len(),
            fs_calls.len(),
            inside,
            target_only,
            outside,
            granted,
            fenced,
            published
        ),
        (29, 9, 40, 4, 36, 36, 26, 42),
        "the figures FENCING.md quotes"
    );
}

/// Parks the holder at `at` and reports (store lock held, target lock held).
fn locks_while_parked(at: Point) -> (bool, bool) {
    let f = Fixture::new();
    let target = published_by_z(&f);
    let (parker, parked, resume) = Parker::new(Some(at));
    std::thread::scope(|s| {
        let (probe, options) = (parker.clone(), &f.options);
        let publisher = s.spawn(move || holder_publishes(options, probe, channel().0));
        wait_parked(&parked, Some(at));
        let held = (
            store_lock_is_held(&f.options),
            target_lock_is_held(&f.options, &target),
        );
        drop(resume);
        publisher.join().unwrap().expect("publishes");
        held
    })
}

/// Waits for the holder to park. The points come from an unparked run of the same sequence,
/// so each is reached; the bound only turns a hang into a failure.
fn wait_parked(parked: &Receiver<&'static str>, at: Option<Point>) {
    if let Err(e) = parked.recv_timeout(Duration::from_secs(120)) {
        panic!("the holder never reached {at:?}: {e}");
    }
}

fn solewriter_adapters_report(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

/// The descriptor hazard, across real processes. A holder process, inside its publication
/// transaction (right after the revalidation), reads the store's files with plain file I/O,
/// as a naive backup would; closing those descriptors silently drops every POSIX lock its
/// process held on them, SQLite's write lock included — shown here by another process's
/// `BEGIN IMMEDIATE` succeeding. A successor whose clock says the holder's grant expired then
/// tries to take over: the target's kernel lock still refuses it (`Busy`), so the holder's
/// rename cannot land after a successor's grant. With the target lock made a no-op, the
/// successor is granted here and the test fails.
#[test]
fn a_holder_that_drops_sqlites_locks_still_excludes_the_successor() {
    const NAME: &str = "a_holder_that_drops_sqlites_locks_still_excludes_the_successor";
    if let Some((role, dir)) = children::role() {
        assert_eq!(role, "holder");
        return descriptor_closing_holder(&dir);
    }
    let f = Fixture::new();
    let setup = f.open();
    let target = setup.admit_target(&tuple("a")).unwrap();
    setup.submit(&router(), &route(&target, 1, "one")).unwrap();
    drop(setup);
    let mut holder_proc = children::ChildProc::spawn(NAME, "holder", f.dir.path());
    assert_eq!(holder_proc.line(), "parked");
    assert!(
        !store_lock_is_held(&f.options),
        "the hazard is reproduced: SQLite's write lock vanished with the closed descriptors"
    );
    assert!(target_lock_is_held(&f.options, &target));
    // The successor's clock is past the holder's expiry.
    f.clock.set(Millis(START.0 + 2 * TTL_MS));
    let mut contender_options = f.options.clone();
    contender_options.timing = timing(TTL_MS, 50);
    let contender =
        solewriter_adapters::projection::store::ProjectionStore::open(&contender_options).unwrap();
    match contender.acquire(&target, &holder("b")) {
        // Held out by the holder's target lock, which it holds for its whole transaction.
        Err(Error::File(FileError::Busy { .. })) => {}
        Ok(Acquisition::Acquired(b)) => panic!(
            "a successor was granted epoch {} while the holder was inside its publication",
            b.epoch()
        ),
        other => panic!("{other:?}"),
    }
    holder_proc.send("go");
    assert_eq!(holder_proc.line(), "published 1");
    holder_proc.finish();
    let b = expect_acquired(contender.acquire(&target, &holder("b")).unwrap());
    assert_eq!(b.epoch(), 2);
    assert_eq!(b.publish().unwrap().fencing_epoch, 2);
}

/// The child of the descriptor-hazard test.
fn descriptor_closing_holder(dir: &Path) {
    struct CopyTheStore<'a>(&'a Path);
    impl PublishProbe for CopyTheStore<'_> {
        fn reached(&self, step: PublishStep, _: &TargetId, _: u64) {
            if step == PublishStep::Revalidated {
                for name in ["store.sqlite", "store.sqlite-wal", "store.sqlite-shm"] {
                    let _ = std::fs::read(self.0.join(name));
                }
                children::say("parked");
                let go = children::commands().next();
                assert_eq!(go.as_deref(), Some("go"));
            }
        }
    }
    let options = StoreOptions {
        db_path: dir.join("store.sqlite"),
        runtime_root: solewriter_adapters::projection::runtime::RuntimeRoot::new(
            dir.join("runtime"),
        ),
        timing: timing(TTL_MS, 100),
        registry: registry(64 * 1024),
        clock: Arc::new(solewriter_adapters::clock::ManualClock::new(START)),
    };
    let store = solewriter_adapters::projection::store::ProjectionStore::open(&options).unwrap();
    let target = tuple("a").target_id();
    let lease = expect_acquired(store.acquire(&target, &holder("a")).unwrap());
    match lease.publish_observed(&CopyTheStore(dir)) {
        Ok(p) => children::say(&format!("published {}", p.fencing_epoch)),
        Err(e) => children::say(&format!("error {e}")),
    }
}
