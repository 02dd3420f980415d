//! The panic boundary: no Rust panic unwinds into the Node host. Unwinding out of a native
//! entry point (an `extern "C"` function) aborts the process, which would take the whole host
//! service down for one call. So every entry point runs its body through [`answer`] (or
//! [`caught`]), and the work a publication runs on the libuv thread pool does too
//! (`turns::PoolTurn`): a panic becomes the failure `INTERNAL` — a bug of solewriter's,
//! reported as a thrown JS error like any other. What a panicking call leaves behind is what a
//! crash at that point leaves (the models' crash points): an open transaction on the host's
//! connection is rolled back by the JS layer, a temp sibling is removed by the next
//! publication's orphan sweep, a target lock is let go when its file is dropped.

use super::failure::{Code, Failure, JsAnswer, Outcome};
use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// The failure of a body that panicked.
pub(crate) fn internal(payload: Box<dyn Any + Send>) -> Failure {
    let what = payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned());
    Failure::new(
        Code::Internal,
        format!("solewriter failed internally ({what}); please report it. The call was abandoned like a crash at that point: nothing it had not committed was committed"),
    )
}

/// Runs `body`, a panic becoming [`internal`]'s failure.
pub(crate) fn caught<T>(body: impl FnOnce() -> Result<T, Failure>) -> Result<T, Failure> {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|payload| Err(internal(payload)))
}

/// The answer of `body`: its value, or its failure (thrown as a coded JS error) — also when it
/// panicked.
pub(crate) fn answer(body: impl FnOnce() -> Outcome) -> JsAnswer {
    JsAnswer(caught(body))
}
