//! solewriter-verification: model checks, conformance tests and trap mutants.
//!
//! The checks live under `tests/` (see `FENCING.md` beside this crate for what each one
//! pins); the loom and shuttle models run only with the `model-check` feature
//! (`cargo test --features model-check` at the workspace root). This library holds what the
//! harnesses share: the loom and shuttle shims of the reference model, and the scenario
//! fixtures.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod fixtures;

#[cfg(feature = "model-check")]
pub mod shims;
