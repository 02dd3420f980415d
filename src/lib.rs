//! solewriter: fenced single-writer primitives for services that share one host — a stale
//! writer can never overwrite its successor, a reader never sees a torn file, nothing committed
//! is lost. The proof (every claim, the test or model that pins it) is `verification/FENCING.md`
//! in the repository; the manuals per audience are in its `docs/`.
//!
//! # The facade
//!
//! This crate is the facade a host links. Each product has its complete surface — its types,
//! inputs and errors — in one module:
//!
//! - [`projection`]: the fenced projection writer (seed 000): the store in the host's SQLite
//!   database, submissions, leases, publication of `current.json`, the reader.
//! - [`subtree`]: the subtree write guard (seed 002).
//! - [`project_lock`]: the project lock whose authority is one process generation (seed 003).
//! - [`ledger`]: the event ledger's sole-writer build and demand reads (seed 003).
//!
//! - [`files`]: the atomic file publisher every product writes with (temp sibling, fsync,
//!   rename, directory fsync) and bounded reads.
//! - [`prelude`]: the names a host needs most (the projection writer's, and each product's
//!   entry point), also re-exported at the root.
//!
//! The crates underneath (`solewriter-core`, the pure decisions; `solewriter-files` and
//! `solewriter-adapters`, what executes them) are not re-exported: every name a host needs is
//! in one of these modules.
//!
//! ```
//! use solewriter::projection::{
//!     Acquisition, ChannelName, ChannelRegistry, ChannelSpec, InstanceDigest, ManualClock,
//!     Millis, ProducerId, ProjectionStore, RuntimeRoot, StoreOptions, Submission,
//!     TargetTuple, TimingConfig,
//! };
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let scratch = tempfile::tempdir()?;
//! # let dir = scratch.path();
//! let timing = TimingConfig::new(Duration::from_secs(5), Duration::from_secs(1))?;
//! let db = dir.join("host.sqlite");
//! ProjectionStore::initialize(&db, &timing)?; // idempotent: the two tables, nothing else
//! let registry = ChannelRegistry::new([ChannelSpec {
//!     name: "computed-route".parse()?,
//!     owner: "router".parse()?,
//!     envelope_schema: "computed-route.v1".into(),
//!     max_envelope_bytes: 64 * 1024,
//!     watermark: Default::default(), // integer watermarks
//!     envelope_json_schema: None,
//! }])?;
//! let clock = ManualClock::new(Millis(1_000));
//! let options = StoreOptions::new(db, RuntimeRoot::new(dir), timing, registry, Arc::new(clock));
//! let store = ProjectionStore::open(&options)?;
//! let tuple = TargetTuple::new(["1", "hook-projection", "agent-7", "claude-code", "i", "w", "k"])?;
//! let target = store.admit_target(&tuple)?;
//! let router: ProducerId = "router".parse()?;
//! store.submit(&router, &Submission {
//!     target_id: target.clone(),
//!     channel: "computed-route".parse::<ChannelName>()?,
//!     source_watermark: 1.into(),
//!     envelope_json: r#"{"schema":"computed-route.v1","notAuthority":true}"#.into(),
//!     captured_at: Millis(1_000),
//!     expires_at: Millis(61_000),
//! })?;
//! let holder: InstanceDigest = "memory-core-1".parse()?;
//! match store.acquire(&target, &holder)? {
//!     Acquisition::Acquired(lease) => assert_eq!(lease.publish()?.fencing_epoch, 1),
//!     Acquisition::Held(held) => unreachable!("nobody else holds it: {held:?}"),
//! }
//! let doc = solewriter::projection::read_projection(&options.runtime_root, &target)?;
//! assert_eq!(doc.channels.len(), 1);
//! # Ok(())
//! # }
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

/// The fenced projection writer: the store (two tables in the host's database), producer
/// submissions, leases and grants, publication of `current.json`, the hook reader, and their
/// errors.
pub mod projection {
    pub use solewriter_adapters::clock::{Clock, FileClock, ManualClock, SystemClock};
    pub use solewriter_adapters::projection::adoption::{Adopted, AdoptionRefused, ValueProblem};
    pub use solewriter_adapters::projection::group::PublicationGroup;
    pub use solewriter_adapters::projection::lease::{
        Acquisition, EndOutcome, Grant, HeldLease, ReleaseOutcome,
    };
    pub use solewriter_adapters::projection::probe::{NoProbe, PublishProbe};
    pub use solewriter_adapters::projection::publication::{Published, PublishedNow};
    pub use solewriter_adapters::projection::runtime::{read_projection, RuntimeRoot};
    pub use solewriter_adapters::projection::store::{Initialized, ProjectionStore, StoreOptions};
    pub use solewriter_adapters::projection::submission::SubmitOutcome;
    pub use solewriter_adapters::projection::watch::wait_for_projection;
    pub use solewriter_adapters::{Error, FileError};
    pub use solewriter_core::config::{BusyTimeout, ConfigError, LeaseTtl, TimingConfig};
    pub use solewriter_core::names::{InstanceDigest, NameError};
    pub use solewriter_core::projection::channel::{
        ChannelName, ChannelRecord, ChannelRegistry, ChannelSpec, DegradedReason, ProducerId,
        RegistryError, Submission,
    };
    pub use solewriter_core::projection::envelope_schema::EnvelopeSchema;
    pub use solewriter_core::projection::lease::{Fenced, HeldBy, LeaseRecord, LeaseState};
    pub use solewriter_core::projection::machine::publish_many::BatchRefused;
    pub use solewriter_core::projection::profile::{ConsumerBinding, Profile, MAX_BINDING_BYTES};
    pub use solewriter_core::projection::publication::PublishStep;
    pub use solewriter_core::projection::target::{
        TargetError, TargetId, TargetTuple, MAX_TUPLE_JSON_BYTES,
    };
    pub use solewriter_core::projection::watermark::SubmissionRejected;
    pub use solewriter_core::projection::watermark::{Watermark, WatermarkKind};
    pub use solewriter_core::projection::{
        channel_status, ChannelStatus, Coverage, DocumentError, ProjectionDocument,
        PublishedChannel, StatusReason, MAX_DOCUMENT_BYTES,
    };
    pub use solewriter_core::time::Millis;
    pub use solewriter_core::token::HolderToken;
    pub use solewriter_core::{ErrorKind, EXACT_INTEGER_MAX};
}

/// The subtree write guard: held-until-release locks on component subtrees keyed on the
/// (agentId, sessionId) writer, fail-closed write admission, the disconnect sweep.
pub mod subtree {
    pub use solewriter_adapters::subtree::write_guard::{GuardError, WriteGuard};
    pub use solewriter_core::subtree::{
        admit_move, admit_write, conflicts, derive_canonical_subtree_path, derive_subtree_path,
        normalize_lock, overlaps, parse_agent_envelope, parse_bridge_frame, resolve_write_lock,
        Acquired, Admitted, AgentContext, BridgeFrame, ComponentId, Conflict, Envelope,
        EnvelopeError, GuardRefusal, GuardState, LinearLockTable, Lock, LockAuthority, LockIndex,
        LockTable, MoveAdmitted, Parent, PathError, Refusal, SubtreePath, WriteDenied, Writer,
        AGENT_DISCONNECTED, AGENT_MESSAGE, DEFAULT_TOMBSTONES, MAX_COMPONENT_ID_BYTES,
        MAX_FRAME_BYTES, MAX_IDENTITY_BYTES, MAX_SUBTREE_DEPTH,
    };
    pub use solewriter_core::ErrorKind;
}

/// The project lock: one sole writer per project directory, whose authority is one exact
/// process generation, with dead-owner recovery.
pub mod project_lock {
    pub use solewriter_adapters::project_lock::process::{self, ProcessProbe, SystemProbe};
    pub use solewriter_adapters::project_lock::{
        ClearRefused, Cleared, KernelState, LockError, LockProbe, LockStatus, LockStep, NoSteps,
        ProjectLock, ProjectLockGuard, Released, Wait, FIRST_BACKOFF, KERNEL_LOCK_FILE, LOCK_FILE,
        MAX_BACKOFF, MAX_RECOVERY_DEPTH,
    };
    pub use solewriter_core::project_lock::ownership::{
        BootId, DeadReason, Guard, IdentityError, LockNonce, LockRecord, OwnerIdentity, Ownership,
        RecordError, UnknownReason,
    };
    pub use solewriter_core::ErrorKind;
}

/// The event ledger: the sole-writer build transaction, demand reads that never queue behind
/// an unrelated writer, and the reference Git source.
pub mod ledger {
    pub use solewriter_adapters::ledger::git_source::{self, GitSource};
    pub use solewriter_adapters::ledger::{
        history, snapshot_status, Derive, Ledger, LedgerError, Outcome, Persisted, SnapshotState,
        SnapshotStatus, Source, SourceError, LEDGER_FILE,
    };
    pub use solewriter_core::ledger::git_facts::{
        self, parse_commit, parse_hunks, CommitFact, FileHunks, GitFactId, GitParseError, Hunk,
        HunkFact, Oid, COMMIT_FORMAT,
    };
    pub use solewriter_core::ledger::{
        choose_base, demand_plan, recheck, Base, CommitPlan, DemandPlan, Derivation, FactConflict,
        FactId, Interpretation, LedgerTextError, Recheck, Snapshot, SnapshotError, LEDGER_FORMAT,
        MAX_INTERPRETATION_MOVES, MAX_SNAPSHOT_BYTES, SNAPSHOT_MAGIC,
    };
    pub use solewriter_core::ErrorKind;
}

/// The atomic file publisher every product writes with — a temp sibling, its fsync, the rename
/// and the directory's fsync — behind a file-system seam, and bounded reads.
pub mod files {
    pub use solewriter_adapters::atomic_file::{
        ensure_private_dir, make_private_dir, open_private_dir, open_regular, read_bounded,
        read_capped, remove_orphans, remove_orphans_but, DirError, DirHandle, FileSystem,
        OldDocument, Opened, RealFs, TempFile, DIR_MODE, FILE_MODE,
    };
}

/// The prelude's items, named once: [`prelude`] and the crate's root each re-export them.
macro_rules! prelude_items {
    () => {
        pub use crate::ledger::{Ledger, LedgerError, Outcome, Persisted, Source};
        pub use crate::project_lock::{
            LockError, ProcessProbe, ProjectLock, ProjectLockGuard, Released, SystemProbe, Wait,
        };
        pub use crate::projection::{
            channel_status, read_projection, wait_for_projection, Acquisition, Adopted,
            AdoptionRefused, BusyTimeout, ChannelName, ChannelRecord, ChannelRegistry, ChannelSpec,
            ChannelStatus, Clock, ConfigError, ConsumerBinding, Coverage, DegradedReason,
            DocumentError, EndOutcome, EnvelopeSchema, Error, ErrorKind, Fenced, FileClock,
            FileError, Grant, HeldBy, HeldLease, HolderToken, Initialized, InstanceDigest,
            LeaseRecord, LeaseState, LeaseTtl, ManualClock, Millis, NameError, NoProbe, ProducerId,
            Profile, ProjectionDocument, ProjectionStore, PublicationGroup, PublishProbe,
            PublishStep, Published, PublishedChannel, PublishedNow, RegistryError, ReleaseOutcome,
            RuntimeRoot, StatusReason, StoreOptions, Submission, SubmissionRejected, SubmitOutcome,
            SystemClock, TargetError, TargetId, TargetTuple, TimingConfig, ValueProblem, Watermark,
            WatermarkKind, EXACT_INTEGER_MAX, MAX_BINDING_BYTES, MAX_DOCUMENT_BYTES,
            MAX_TUPLE_JSON_BYTES,
        };
        pub use crate::subtree::WriteGuard;
    };
}

/// The names a host needs most: the projection writer's, and each product's entry point.
pub mod prelude {
    prelude_items!();
}

prelude_items!();
