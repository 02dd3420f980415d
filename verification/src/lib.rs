//! solewriter-verification: model checks, conformance tests and trap mutants.
//!
//! The checks live under `tests/`; the loom and shuttle models run only with the
//! `model-check` feature (`cargo test --features model-check` at the workspace root).
#![forbid(unsafe_code)]
#![deny(missing_docs)]
