//! Runs `examples/async_host.rs` — tokio tasks over a host database, grants crossing threads
//! and `.await`s — and checks what it reports: every publication of every round succeeded.

#[path = "../examples/async_host.rs"]
mod example;

#[test]
fn the_async_host_example_publishes_every_target_every_round() {
    let scratch = tempfile::tempdir().unwrap();
    let published = example::run(scratch.path()).unwrap();
    assert_eq!(published, example::TARGETS * example::ROUNDS as usize);
}

/// What an async host needs to move between tasks and threads.
#[test]
fn grants_and_stores_are_send() {
    fn send<T: Send>() {}
    send::<solewriter::Grant>();
    send::<solewriter::ProjectionStore>();
}

/// Dropping a `Grant` does no I/O (so it never blocks the thread that drops it): the lease row
/// stays held, while a dropped `HeldLease` releases it.
#[test]
fn dropping_a_grant_writes_nothing() {
    use solewriter::*;
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path();
    let timing = TimingConfig::from_values(Some(60_000), Some(1_000)).unwrap();
    let db_path = dir.join("store.sqlite");
    ProjectionStore::initialize(&db_path, &timing).unwrap();
    let clock = ManualClock::new(Millis(1_000));
    let options = StoreOptions {
        db_path,
        runtime_root: RuntimeRoot::new(dir),
        timing,
        registry: ChannelRegistry::new([]).unwrap(),
        clock: std::sync::Arc::new(clock.clone()),
    };
    let store = ProjectionStore::open(&options).unwrap();
    let tuple = TargetTuple::new(["1", "c", "a", "h", "i", "w", "k"]).unwrap();
    let target = store.admit_target(&tuple).unwrap();
    let holder = InstanceDigest::parse("h").unwrap();
    let state = || {
        let state = format!("{:?}", store.lease_row(&target).unwrap().unwrap().state);
        state[..state.find('(').unwrap_or(state.len())].to_owned()
    };
    match store.acquire(&target, &holder).unwrap() {
        Acquisition::Acquired(lease) => drop(lease.into_grant()),
        Acquisition::Held(h) => panic!("held {h:?}"),
    }
    assert_eq!(state(), "Held", "the dropped grant wrote nothing");
    clock.advance(60_000);
    match store.acquire(&target, &holder).unwrap() {
        Acquisition::Acquired(lease) => drop(lease),
        Acquisition::Held(h) => panic!("held {h:?}"),
    }
    assert_eq!(
        state(),
        "Released",
        "the dropped HeldLease released its grant"
    );
}
