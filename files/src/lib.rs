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
//! - [`parts`]: a batch's lock-free parts, run at once on a thread per target.
//! - [`clock`]: the broker clock's trait and the system clock.
//! - [`error`]: what a file effect failed with.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod atomic_file;
pub mod clock;
pub mod error;
pub mod parts;
pub mod runtime;
pub mod steps;
pub mod target_lock;

pub use error::FileError;
