//! The model's durable state: the store (lease and channel rows) and the runtime directory
//! (per target: the current document and the temp siblings). Plain values; the world wraps
//! each in one shim mutex.

use solewriter_core::projection::channel::{ChannelName, ChannelRecord};
use solewriter_core::projection::lease::LeaseRecord;
use solewriter_core::projection::target::TargetId;
use std::collections::BTreeMap;

/// The store: exactly the two tables. A transaction works on a clone and replaces the whole
/// state at commit; a rollback (or a crash) drops the clone.
#[derive(Clone, Debug, Default)]
pub struct StoreState {
    /// `HookProjectionLeases`.
    pub leases: BTreeMap<TargetId, LeaseRecord>,
    /// `HookProjectionChannels`.
    pub channels: BTreeMap<(TargetId, ChannelName), ChannelRecord>,
}

impl StoreState {
    /// The channel rows of `target`, by channel name.
    pub fn channel_rows(&self, target: &TargetId) -> Vec<ChannelRecord> {
        self.channels
            .iter()
            .filter(|((t, _), _)| t == target)
            .map(|(_, r)| r.clone())
            .collect()
    }
}

/// One target's directory.
#[derive(Clone, Debug, Default)]
pub struct TargetDir {
    /// `current.json`, if published.
    pub current: Option<Vec<u8>>,
    /// Temp siblings by creation number.
    pub temps: BTreeMap<u64, Vec<u8>>,
    /// Next temp number (unique names).
    pub next_temp: u64,
}

/// The runtime directory.
#[derive(Clone, Debug, Default)]
pub struct FsState {
    /// Per target directory.
    pub dirs: BTreeMap<TargetId, TargetDir>,
}

impl FsState {
    /// The directory of `target`, created on first use.
    pub fn dir(&mut self, target: &TargetId) -> &mut TargetDir {
        self.dirs.entry(target.clone()).or_default()
    }
}
