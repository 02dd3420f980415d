//! The per-target kernel lock, re-exported from `solewriter-files` (where it lives so that the
//! Node binding shares it without SQLite); its test with the store stays here.

pub use solewriter_files::target_lock::*;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::projection::lease::Acquisition;
    use crate::projection::runtime::RuntimeRoot;
    use crate::projection::store::{ProjectionStore, StoreOptions};
    use solewriter_core::config::TimingConfig;
    use solewriter_core::names::InstanceDigest;
    use solewriter_core::projection::channel::ChannelRegistry;
    use solewriter_core::projection::target::TargetTuple;
    use solewriter_core::time::Millis;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    /// A grant waits for the target lock within its busy timeout — and gets it as soon as the
    /// holder lets go — instead of answering `Busy` at the first attempt.
    #[test]
    fn a_grant_waits_for_the_target_lock_within_its_busy_timeout() {
        let dir = tempfile::tempdir().unwrap();
        let timing = TimingConfig::from_values(Some(60_000), Some(60_000)).unwrap();
        let db_path = dir.path().join("store.sqlite");
        ProjectionStore::initialize(&db_path, &timing).unwrap();
        std::fs::create_dir(dir.path().join("runtime")).unwrap();
        let options = StoreOptions {
            db_path,
            runtime_root: RuntimeRoot::new(dir.path().join("runtime")),
            timing,
            registry: ChannelRegistry::new([]).unwrap(),
            clock: Arc::new(ManualClock::new(Millis(1_000))),
        };
        let tuple = TargetTuple::new(["1", "c", "a", "h", "i", "w", "k"]).unwrap();
        let target = ProjectionStore::open(&options)
            .unwrap()
            .admit_target(&tuple)
            .unwrap();
        let held = TargetLock::acquire(
            &options.runtime_root,
            &target,
            Instant::now(),
            Duration::ZERO,
        )
        .unwrap();
        let before = blocked_attempts();
        std::thread::scope(|s| {
            let waiter = s.spawn(|| {
                let store = ProjectionStore::open(&options).unwrap();
                let who = InstanceDigest::parse("w").unwrap();
                let granted = matches!(store.acquire(&target, &who), Ok(Acquisition::Acquired(_)));
                granted
            });
            while blocked_attempts() == before {
                assert!(
                    !waiter.is_finished(),
                    "the grant gave up at its first attempt"
                );
                std::thread::yield_now();
            }
            drop(held);
            assert!(waiter.join().unwrap(), "granted once the lock was let go");
        });
    }
}
