//! solewriter-models: the executable reference model — the specification in code.
//!
//! The model holds the store (lease rows, channel rows, ONE serialized write transaction),
//! the per-target locks and the runtime directory (current documents, temp siblings, atomic
//! rename) in memory, and executes the SAME core machines as the SQLite adapter
//! (`solewriter_core::projection::machine`: acquisition, publication, release) and the same submission
//! decision (`decide_submission`). It is small and obviously right, so it can serve as the
//! oracle of the conformance test and as the system under the loom and shuttle checkers.
//!
//! - [`shim`]: the synchronization shim (std here; loom and shuttle in `solewriter-verification`).
//! - [`design`]: the real design and the deliberately broken trap variants.
//! - [`ghost`]: the invariant checker, fed from inside each critical section.
//! - [`state`]: the store and file-system state.
//! - [`executor`]: the model's executor of the core's acquisition, publication and release
//!   machines, for one target or a batch of them — the same machines the SQLite adapter
//!   executes; the traps are misbehaving executors.
//! - [`world`]: the model world (store, runtime directory, clock, checker) and its
//!   transactions (admit, submit, read, clock).
//! - [`runs`]: the lease machines run on the world (acquire, publish, publish-now, a batch of
//!   one-shots, release, frozen publications) and their answers.
//! - [`project_lock`]: the project directory, kernel lock and process table, and the model
//!   executor of the core's project-lock machines, with crashes at every step.
//! - [`crash`]: the file system's durable and volatile views, and the exhaustive crash check
//!   of the publisher's write / fsync / rename / fsync sequence.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod crash;
pub mod design;
pub mod executor;
pub mod ghost;
pub mod project_lock;
pub mod runs;
pub mod shim;
pub mod state;
pub mod world;

pub use design::Design;
pub use shim::{Shim, StdShim};
pub use world::World;
