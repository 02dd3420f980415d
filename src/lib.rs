//! solewriter: fenced single-writer primitives for services that share one host.
//!
//! This crate is the facade: it re-exports the pure decision core ([`core`]) and the adapters
//! that execute its plans ([`adapters`]), and names the types a host links against most.
//! See the README for the guarantee and `verification/FENCING.md` for its proof.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub use solewriter_adapters as adapters;
pub use solewriter_core as core;

pub use solewriter_adapters::clock::{Clock, ManualClock, SystemClock};
pub use solewriter_adapters::git_source::GitSource;
pub use solewriter_adapters::lease::{Acquisition, Grant, HeldLease, ReleaseOutcome};
pub use solewriter_adapters::ledger::{Ledger, LedgerError, Outcome, Persisted, Source};
pub use solewriter_adapters::process::{ProcessProbe, SystemProbe};
pub use solewriter_adapters::project_lock::{
    LockError, ProjectLock, ProjectLockGuard, Released, Wait,
};
pub use solewriter_adapters::publication::{Published, PublishedNow};
pub use solewriter_adapters::runtime::{read_projection, RuntimeRoot};
pub use solewriter_adapters::store::{ProjectionStore, StoreOptions};
pub use solewriter_adapters::submission::SubmitOutcome;
pub use solewriter_adapters::write_guard::WriteGuard;
pub use solewriter_adapters::Error;
pub use solewriter_core::channel::{
    ChannelName, ChannelRegistry, ChannelSpec, ProducerId, Submission,
};
pub use solewriter_core::config::TimingConfig;
pub use solewriter_core::lease::{Fenced, HeldBy};
pub use solewriter_core::names::InstanceDigest;
pub use solewriter_core::projection::ProjectionDocument;
pub use solewriter_core::target::{TargetId, TargetTuple};
pub use solewriter_core::time::Millis;
