//! solewriter-core: the pure decision core of solewriter.
//!
//! Everything here is a value or a pure function. The core does no I/O, reads no clock, makes
//! no random numbers and spawns no threads: the broker time, the stored rows and the holder's
//! random token are all parameters. Decisions come back as *plans* (data) that an adapter
//! executes inside its own transaction; the same plans drive the reference model in
//! `solewriter-models`, so the model and the SQLite adapter cannot drift apart.
//!
//! Modules: the contract every step machine speaks, the values every product shares, then one
//! folder per product.
//! - [`contract`]: the one machine contract — the step-machine trait, typed asks and their
//!   answers bound to the step that asked, the error a machine reports when its executor
//!   breaks the contract, and the one `run` every executor calls.
//! - [`time`]: broker time as a value.
//! - [`config`]: timing configuration that has no defaults.
//! - [`hex`]: the lowercase hex encoding of digests, tokens and nonces.
//! - [`token`]: holder tokens and their hashes.
//! - [`names`]: restricted channel, producer and instance names.
//! - [`projection`]: the fenced projection writer — target ids, the lease type-state,
//!   channels, watermark admission, composition of the document, and the acquire / publish /
//!   release step machines both the SQLite adapter and the model checkers execute.
//! - [`error_kind`]: who must act on an error, the classification every product's error answers.
//! - [`subtree`]: subtree write locks of (agent, session) writers and fail-closed write admission.
//! - [`project_lock`]: process-generation authority of the project lock and its lock record.
//! - [`ledger`]: the event ledger's facts, integrity-checked snapshot and build decisions, and
//!   the Git facts it is built from.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod config;
pub mod contract;
pub mod error_kind;
pub mod hex;
pub mod ledger;
pub mod names;
pub mod project_lock;
pub mod projection;
pub mod subtree;
pub mod time;
pub mod token;

pub use error_kind::ErrorKind;

/// Largest integer the SQLite store can hold (`INTEGER` is a signed 64-bit value). Epochs,
/// watermarks and timestamps above it are rejected before they reach a plan.
pub const STORAGE_INTEGER_MAX: u64 = i64::MAX as u64;

/// Largest integer every executor and every reader holds exactly: 2^53 − 1, JavaScript's
/// `Number.MAX_SAFE_INTEGER` (better-sqlite3 hands the Node executor integers as numbers, and
/// the Node hook reader parses `current.json` with `JSON.parse`). A submission's watermark,
/// capture and expiry times above it are rejected, and a stored channel row holding one is a
/// corrupt row, so no executor can publish a rounded value and no reader can refuse a
/// document for one.
pub const EXACT_INTEGER_MAX: u64 = (1 << 53) - 1;
