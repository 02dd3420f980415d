//! solewriter-adapters: the I/O half of solewriter. It executes the pure core's plans.
//!
//! Shared by every product:
//! - [`clock`]: the broker clock (system wall clock, or a manual clock for tests).
//! - [`atomic_file`]: temp sibling, fsync, rename, directory fsync; the file-system seam (from
//!   `solewriter-files`, which holds the file effects without SQLite for every executor).
//! - [`error`]: the projection writer's error, saying what failed and what was left untouched.
//!
//! One folder per product:
//! - [`projection`]: the fenced projection writer — the SQLite store in the host's database,
//!   submissions, the executor of the core's lease machines, leases and grants, publication,
//!   the per-target kernel lock, the runtime root and the hook reader.
//! - [`subtree`]: the per-heap subtree write-lock authority (ADR 0021).
//! - [`project_lock`]: the project lock, whose authority is one process generation, and the
//!   process identities it is judged by (from `solewriter-project-lock`, which holds it
//!   without SQLite so that the Node binding shares it).
//! - [`ledger`]: the event ledger's sole-writer build transaction and the demand read, and
//!   the reference Git source (from `solewriter-ledger`, without SQLite for the Node binding's
//!   sake too).
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub use solewriter_files::atomic_file;
pub use solewriter_ledger as ledger;
pub use solewriter_project_lock as project_lock;
pub mod clock;
pub mod error;
pub mod projection;
pub mod subtree;

pub use error::{Error, ErrorKind, FileError};
