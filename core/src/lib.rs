//! solewriter-core: the pure decision core of solewriter.
//!
//! Everything here is a value or a pure function. The core does no I/O, reads no clock, makes
//! no random numbers and spawns no threads: the broker time, the stored rows and the holder's
//! random token are all parameters. Decisions come back as *plans* (data) that an adapter
//! executes inside its own transaction; the same plans drive the reference model in
//! `solewriter-models`, so the model and the SQLite adapter cannot drift apart.
//!
//! Modules, in dependency order:
//! - [`time`]: broker time as a value.
//! - [`config`]: timing configuration that has no defaults.
//! - [`target`]: the attested target tuple and its derived [`target::TargetId`].
//! - [`hex`]: the lowercase hex encoding of digests, tokens and nonces.
//! - [`token`]: holder tokens and their hashes.
//! - [`names`]: restricted channel, producer and instance names.
//! - [`lease`]: the lease type-state (`Lease<Unheld|Held|Expired|Released>`) and its plans.
//! - [`channel`]: producers, channels, the channel registry and channel rows.
//! - [`watermark`]: producer-submission admission.
//! - [`projection`]: composition of committed channel rows into the published document.
//! - [`publication`]: the named steps of the fenced publication sequence.
//! - [`machine`]: acquisition, publication and release as sans-IO step machines — the one
//!   sequence both the SQLite adapter and the model checkers execute.
//! - [`subtree`]: subtree write locks of (agent, session) writers and fail-closed write admission.
//! - [`ledger`]: the event ledger's facts, integrity-checked snapshot and build decisions.
//! - [`git_facts`]: Git history and hunk facts, and the parsers of Git's answers.
//! - [`ownership`]: process-generation authority of the project lock and its lock record.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod channel;
pub mod columns;
pub mod config;
pub mod git_facts;
pub mod hex;
pub mod lease;
pub mod ledger;
pub mod machine;
pub mod names;
pub mod ownership;
pub mod projection;
pub mod publication;
pub mod schema;
pub mod subtree;
pub mod target;
pub mod time;
pub mod token;
pub mod watermark;

/// Largest integer the SQLite store can hold (`INTEGER` is a signed 64-bit value). Epochs,
/// watermarks and timestamps above it are rejected before they reach a plan.
pub const STORAGE_INTEGER_MAX: u64 = i64::MAX as u64;
