//! solewriter-adapters: the stateful side of solewriter, executing the core's decisions.
//!
//! Modules:
//! - [`write_guard`]: the per-heap subtree write authority (ADR 0021).
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod write_guard;
