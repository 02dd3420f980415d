//! solewriter-files: the file effects of solewriter's lease machines, with no SQLite in its
//! dependency tree, so that every executor of the machines shares them — the SQLite adapter
//! (`solewriter-adapters`) and the Node binding, which runs its SQL on the host's own
//! connection and must not link a second SQLite.
//!
//! - [`atomic_file`]: held directory handles, temp sibling, fsync, rename, directory fsync;
//!   regular files opened for reading without blocking.
//! - [`target_lock`]: the per-target kernel lock every grant, publication and release holds.
//! - [`runtime`]: the runtime root, the derived output paths, and the hook reader.
//! - [`steps`]: the file effects of a machine run ([`steps::FileSteps`]).
//! - [`project_lock`]: the project lock, whose authority is one process generation, and the
//!   process identities it is judged by (its files and the kernel lock; no SQLite either, so
//!   the Node binding takes it too).
//! - [`ledger`]: the event ledger's sole-writer build and demand reads over the project lock,
//!   and the reference Git source (no SQLite: the Node binding runs it too).
//! - [`clock`]: the broker clock's trait and the system clock.
//! - [`error`]: what a file effect failed with.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod atomic_file;
pub mod clock;
pub mod error;
pub mod ledger;
pub mod project_lock;
pub mod runtime;
pub mod steps;
pub mod target_lock;

pub use error::FileError;
