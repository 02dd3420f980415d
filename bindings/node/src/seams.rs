//! Test seams, compiled only with the `test-seams` feature (the Node tests build a second addon
//! with it; the shipped addon has none of this code): a panic planted where a bug would panic,
//! chosen by the environment variable `SOLEWRITER_TEST_PANIC` — `write-release` (a SQL effect
//! inside a publication's transaction, after its rename, on the JS thread) or `pool` (a
//! publication's file work on the libuv thread pool) or `project-lock-new` (a native
//! constructor, which can only throw) — so the tests can show that the panic boundary (`boundary.rs`)
//! turns it into an `INTERNAL` error and the host lives on.

/// Panics when `SOLEWRITER_TEST_PANIC` names `place`.
pub(crate) fn panic_at(place: &str) {
    if std::env::var("SOLEWRITER_TEST_PANIC").as_deref() == Ok(place) {
        panic!("test seam: a planted panic at {place}");
    }
}
