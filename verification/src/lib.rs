//! solewriter-verification: model checks, conformance tests and trap mutants.
//!
//! The checks live under `tests/` (see `FENCING.md` beside this crate for what each one
//! pins); the loom and shuttle models run only with the `model-check` feature
//! (`cargo test --features model-check` at the workspace root). This library holds what the
//! harnesses share: the loom and shuttle shims of the reference model, the scenario
//! fixtures, and the liveness scenario.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod fixtures;
pub mod liveness;

#[cfg(feature = "model-check")]
pub mod shims;

/// The number in the environment variable `name` (a checker's bound or iteration count a
/// reviewer raises), or `default` when it is unset or not a number.
pub fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Writes one line of figures (what a check explored) straight to stderr, past the test
/// harness's output capture, so that `cargo test --features model-check` shows them in
/// every run.
pub fn report(line: &str) {
    use std::io::Write;
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{line}");
}

/// The text of a caught panic (the checkers' violation reports are `String` or `&str`).
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}
