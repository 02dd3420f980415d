//! Shared fixtures of the adapter tests: a store in a temp directory with a manual clock and
//! two registered channels.
#![allow(dead_code)]

use solewriter_adapters::clock::ManualClock;
use solewriter_adapters::projection::lease::{Acquisition, HeldLease};
use solewriter_adapters::projection::runtime::RuntimeRoot;
use solewriter_adapters::projection::store::{ProjectionStore, StoreOptions};
use solewriter_core::config::TimingConfig;
use solewriter_core::names::InstanceDigest;
use solewriter_core::projection::channel::{
    ChannelName, ChannelRegistry, ChannelSpec, ProducerId, Submission,
};
use solewriter_core::projection::target::{TargetId, TargetTuple};
use solewriter_core::projection::watermark::WatermarkKind;
use solewriter_core::time::Millis;
use std::sync::Arc;

pub const TTL_MS: u64 = 1_000;
pub const START: Millis = Millis(1_000_000);

pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub clock: ManualClock,
    pub options: StoreOptions,
}

pub fn registry(max_envelope_bytes: usize) -> ChannelRegistry {
    ChannelRegistry::new([
        ChannelSpec {
            name: ChannelName::parse("computed-route").unwrap(),
            owner: ProducerId::parse("router").unwrap(),
            envelope_schema: "computed-route.v1".into(),
            max_envelope_bytes,
            watermark: WatermarkKind::Integer,
            envelope_json_schema: None,
        },
        ChannelSpec {
            name: ChannelName::parse("lifecycle-frontier").unwrap(),
            owner: ProducerId::parse("frontier").unwrap(),
            envelope_schema: "lifecycle-frontier.v1".into(),
            max_envelope_bytes,
            watermark: WatermarkKind::Integer,
            envelope_json_schema: None,
        },
    ])
    .unwrap()
}

pub fn timing(ttl_ms: u64, busy_ms: u64) -> TimingConfig {
    TimingConfig::from_values(Some(ttl_ms), Some(busy_ms)).unwrap()
}

impl Fixture {
    /// A fresh, initialized store with the default test timing.
    pub fn new() -> Self {
        Self::with_timing(timing(TTL_MS, 100), 64 * 1024)
    }

    pub fn with_timing(timing: TimingConfig, max_envelope_bytes: usize) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let db_path = dir.path().join("store.sqlite");
        let runtime = dir.path().join("runtime");
        std::fs::create_dir(&runtime).unwrap();
        ProjectionStore::initialize(&db_path, &timing).unwrap();
        let clock = ManualClock::new(START);
        let options = StoreOptions {
            db_path,
            runtime_root: RuntimeRoot::new(runtime),
            timing,
            registry: registry(max_envelope_bytes),
            clock: Arc::new(clock.clone()),
        };
        Fixture {
            dir,
            clock,
            options,
        }
    }

    pub fn open(&self) -> ProjectionStore {
        ProjectionStore::open(&self.options).unwrap()
    }

    pub fn current_path(&self, target: &TargetId) -> std::path::PathBuf {
        self.options.runtime_root.current_path(target)
    }

    pub fn current_bytes(&self, target: &TargetId) -> Option<Vec<u8>> {
        std::fs::read(self.current_path(target)).ok()
    }

    /// Files in the target directory other than `current.json` (temp leftovers).
    pub fn leftovers(&self, target: &TargetId) -> Vec<String> {
        let dir = self.options.runtime_root.target_dir(target);
        match std::fs::read_dir(dir) {
            Err(_) => vec![],
            Ok(entries) => entries
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .filter(|n| n != "current.json")
                .collect(),
        }
    }
}

pub fn tuple(agent: &str) -> TargetTuple {
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

pub fn holder(name: &str) -> InstanceDigest {
    InstanceDigest::parse(name).unwrap()
}

pub fn envelope(schema: &str, body: &str) -> String {
    format!(r#"{{"schema":"{schema}","notAuthority":true,"body":"{body}"}}"#)
}

pub fn route(target: &TargetId, watermark: u64, body: &str) -> Submission {
    Submission {
        target_id: target.clone(),
        channel: ChannelName::parse("computed-route").unwrap(),
        source_watermark: watermark.into(),
        envelope_json: envelope("computed-route.v1", body),
        captured_at: START,
        expires_at: Millis(START.0 + 60_000),
    }
}

pub fn router() -> ProducerId {
    ProducerId::parse("router").unwrap()
}

pub fn expect_acquired<'s>(a: Acquisition<'s>) -> HeldLease<'s> {
    match a {
        Acquisition::Acquired(lease) => lease,
        Acquisition::Held(h) => panic!("expected a grant, got held {h:?}"),
    }
}
