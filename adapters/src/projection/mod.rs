//! The fenced projection writer (seed 000), its I/O half.
//!
//! - [`adoption`]: taking over the tables of the Memory Core's own JavaScript writer.
//! - [`store`]: the SQLite store — initializing (in the host's database), opening, the
//!   serialized transaction.
//! - [`schema`]: the two tables, their schema marker, and the checks that refuse another shape.
//! - [`rows`]: reading and writing lease and channel rows.
//! - [`submission`]: producer submissions.
//! - `executor`: runs the core's lease machines against SQLite, the files and the target lock.
//! - [`target_lock`]: the per-target kernel lock every grant, publication and release holds.
//! - [`lease`]: acquisition, [`lease::HeldLease`], the owned [`lease::Grant`] and the
//!   conditional release.
//! - [`publication`]: the fenced publication of `current.json`.
//! - [`group`]: group commit — one-shot publications of many threads combined into batches.
//! - [`probe`]: what a publication's probe sees between its steps (tests pause or crash there).
//! - [`runtime`]: the runtime root, the derived output paths, and the hook reader.
//! - [`watch`]: waiting for a newer publication (inotify, not polling).
//! - `write_gate`: the in-process queue in front of the store's write lock.

pub mod adoption;
mod executor;
pub mod group;
pub mod lease;
pub mod probe;
pub mod publication;
pub mod rows;
pub mod runtime;
pub mod schema;
pub mod store;
pub mod submission;
pub mod target_lock;
pub mod watch;
mod write_gate;
