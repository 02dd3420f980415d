//! Shared fixtures of the store benchmarks: an initialized store on the real disk (under
//! Cargo's target tmp directory, never tmpfs), admitted targets with one submitted channel,
//! the short criterion settings that keep the whole set within a few minutes, the unfenced
//! atomic write every publication is compared with, and the warm-up of publishers' stores.
#![allow(dead_code)] // each bench binary uses a different part of this module

use criterion::Criterion;
use solewriter::files::{DirHandle, FileSystem, RealFs, TempFile};
use solewriter::{
    Acquisition, ChannelName, ChannelRegistry, ChannelSpec, InstanceDigest, Millis, ProducerId,
    ProjectionStore, RuntimeRoot, StoreOptions, Submission, SystemClock, TargetId, TargetTuple,
    TimingConfig,
};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Lease TTL of the benchmarks: far longer than any measured operation.
pub const LEASE_TTL_MS: u64 = 60_000;
/// Busy timeout of the benchmarks: contenders wait for the write lock rather than fail.
pub const BUSY_TIMEOUT_MS: u64 = 30_000;
/// The one registered channel.
pub const CHANNEL: &str = "payload";
/// Its owner.
pub const PRODUCER: &str = "bench";

/// Short criterion settings: 10 samples, 2 s of measurement.
pub fn criterion() -> Criterion {
    Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
}

/// A temp directory on the same disk as the build, holding a store and a runtime root.
pub struct Bench {
    pub dir: tempfile::TempDir,
    pub options: StoreOptions,
    pub targets: Vec<TargetId>,
}

pub fn producer() -> ProducerId {
    ProducerId::parse(PRODUCER).expect("bench producer")
}

pub fn holder(name: &str) -> InstanceDigest {
    InstanceDigest::parse(name).expect("bench holder")
}

/// A valid envelope of exactly `bytes` bytes (at least 64).
pub fn envelope(bytes: usize) -> String {
    let head = format!(r#"{{"schema":"{CHANNEL}.v1","notAuthority":true,"body":""#);
    let pad = bytes.saturating_sub(head.len() + 2);
    format!("{head}{}\"}}", "x".repeat(pad))
}

pub fn submission(target: &TargetId, watermark: u64, envelope_json: String) -> Submission {
    Submission {
        target_id: target.clone(),
        channel: ChannelName::parse(CHANNEL).expect("bench channel"),
        source_watermark: watermark.into(),
        envelope_json,
        captured_at: Millis(1),
        expires_at: Millis(solewriter::projection::EXACT_INTEGER_MAX),
    }
}

impl Bench {
    /// A store with `targets` admitted targets, each with one `envelope_bytes` envelope.
    pub fn new(targets: usize, envelope_bytes: usize) -> Bench {
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("bench dir");
        let timing = TimingConfig::from_values(Some(LEASE_TTL_MS), Some(BUSY_TIMEOUT_MS))
            .expect("bench timing");
        let db_path = dir.path().join("store.sqlite");
        ProjectionStore::initialize(&db_path, &timing).expect("initialize");
        let root = dir.path().join("runtime");
        std::fs::create_dir(&root).expect("runtime root");
        let registry = ChannelRegistry::new([ChannelSpec {
            name: ChannelName::parse(CHANNEL).expect("bench channel"),
            owner: producer(),
            envelope_schema: format!("{CHANNEL}.v1"),
            max_envelope_bytes: 1 << 20,
            watermark: solewriter::projection::WatermarkKind::Integer,
            envelope_json_schema: None,
        }])
        .expect("registry");
        let options = StoreOptions {
            db_path,
            runtime_root: RuntimeRoot::new(root),
            timing,
            registry,
            clock: Arc::new(SystemClock),
        };
        let store = ProjectionStore::open(&options).expect("open");
        let targets = (0..targets)
            .map(|i| {
                let agent = format!("agent-{i}");
                let tuple = TargetTuple::new(["1", "bench", &agent, "h", "i", "w", "p"])
                    .expect("bench tuple");
                let target = store.admit_target(&tuple).expect("admit");
                store
                    .submit(
                        &producer(),
                        &submission(&target, 1, envelope(envelope_bytes)),
                    )
                    .expect("submit");
                target
            })
            .collect();
        Bench {
            dir,
            options,
            targets,
        }
    }

    pub fn open(&self) -> ProjectionStore {
        ProjectionStore::open(&self.options).expect("open")
    }
}

/// One acquire + publish (which ends with the conditional release). `false` when held.
pub fn publish_once(store: &ProjectionStore, target: &TargetId, who: &InstanceDigest) -> bool {
    match store.acquire(target, who).expect("acquire") {
        Acquisition::Acquired(lease) => {
            lease.publish().expect("publish");
            true
        }
        Acquisition::Held(_) => false,
    }
}

/// One one-shot publication (grant, publish and release in one transaction). `false` when
/// held.
pub fn publish_now_once(store: &ProjectionStore, target: &TargetId, who: &InstanceDigest) -> bool {
    match store.publish_now(target, who).expect("publish_now") {
        solewriter::PublishedNow::Published(_) => true,
        solewriter::PublishedNow::Held(_) => false,
    }
}

/// One batch of one-shot publications of every target in one transaction. `false` when any
/// target was held.
pub fn publish_many_once(
    store: &ProjectionStore,
    targets: &[TargetId],
    who: &InstanceDigest,
) -> bool {
    store
        .publish_many(targets, who)
        .expect("publish_many")
        .into_iter()
        .all(|(_, answer)| {
            matches!(
                answer.expect("publish_many of a target"),
                solewriter::PublishedNow::Published(_)
            )
        })
}

/// The unfenced baseline: `bytes` written to `dir/current.json` the plain atomic way (temp
/// sibling, fsync, rename, directory fsync), with the same file effects a publication uses.
pub fn atomic_write(dir: &Path, bytes: &[u8]) {
    let dir = DirHandle::open(dir).expect("open dir");
    let temp = TempFile::write(&RealFs, &dir, "current.json", bytes).expect("temp");
    temp.rename_into_place().expect("rename");
    RealFs.sync_dir(&dir).expect("dir fsync");
}

/// True when the benchmark is measured (`cargo bench` passes `--bench`), false under
/// `cargo test`, which runs each benchmark once.
pub fn measuring() -> bool {
    std::env::args().any(|a| a == "--bench")
}

/// Publishes every target once from each store (the stores in parallel, retrying a target
/// another holds): a store's first publication of a target also fsyncs the target's parent
/// directory, once per store and target, which a long-running host has long paid. Only when
/// [`measuring`]: under `cargo test` the benchmarks run from cold stores.
pub fn warm(publishers: &mut [(ProjectionStore, InstanceDigest)], targets: &[TargetId]) {
    if !measuring() {
        return;
    }
    std::thread::scope(|s| {
        for publisher in publishers.iter_mut() {
            s.spawn(move || {
                let (store, who) = (&publisher.0, &publisher.1);
                for target in targets {
                    while !publish_now_once(store, target, who) {
                        std::thread::yield_now();
                    }
                }
            });
        }
    });
}
