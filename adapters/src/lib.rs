//! solewriter-adapters: the I/O half of solewriter. It executes the pure core's plans.
//!
//! - [`clock`]: the broker clock (system wall clock, or a manual clock for tests).
//! - [`store`]: the SQLite store — opening, initializing, serialized transactions.
//! - [`schema`]: the two operational tables and the checks that refuse a foreign store.
//! - [`rows`]: reading and writing lease and channel rows.
//! - [`submission`]: producer submissions.
//! - `executor`: runs the core's lease machines against SQLite, the files and the target lock.
//! - [`target_lock`]: the per-target kernel lock every grant, publication and release holds
//!   (from `solewriter-files`).
//! - [`lease`]: acquisition, [`lease::HeldLease`] and the conditional release.
//! - [`publication`]: the fenced publication of `current.json`.
//! - [`atomic_file`]: temp sibling, fsync, rename, directory fsync (from `solewriter-files`,
//!   which holds the file effects without SQLite, for every executor of the machines).
//! - [`runtime`]: the runtime root, the derived output paths, and the hook reader (from
//!   `solewriter-files`).
//! - `write_gate`: the in-process queue in front of the store's write lock.
//! - [`write_guard`]: the per-heap subtree write-lock authority (ADR 0021).
//! - [`process`]: process identities (pid, start token, boot id) read from the OS.
//! - [`project_lock`]: the project lock, whose authority is one process generation.
//! - [`ledger`]: the event ledger's sole-writer build transaction and the demand read.
//! - [`git_source`]: the reference ledger source, a Git repository read through `git`.
//! - [`error`]: the one error type, saying what failed and what was left untouched.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub use solewriter_files::atomic_file;
pub mod clock;
pub mod error;
mod executor;
pub mod git_source;
pub mod lease;
pub mod ledger;
pub mod process;
pub mod project_lock;
pub mod publication;
pub mod rows;
pub mod runtime;
pub mod schema;
pub mod store;
pub mod submission;
pub mod target_lock;
mod write_gate;
pub mod write_guard;

pub use error::{Error, ErrorKind};
