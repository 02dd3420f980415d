//! The model's synchronization shim for loom and for shuttle: the same reference model runs
//! under each checker with that checker's mutex, so every lock acquisition in the model is a
//! point where the checker may switch threads. Also [`loom_spawn`], how every loom model
//! starts its threads.

solewriter_models::declare_shim!(
    /// loom's mutex: loom explores every interleaving of these lock acquisitions (within the
    /// preemption bound).
    LoomShim,
    loom::sync
);

solewriter_models::declare_shim!(
    /// shuttle's mutex: shuttle's random and PCT schedulers pick the interleavings.
    ShuttleShim,
    shuttle::sync
);

/// The stack of every thread a loom model spawns: 1 MiB. loom runs each model thread on a
/// coroutine whose default stack is far smaller than a real thread's, and a publication's
/// debug-build frames (composing and parsing a document) outgrew it — the checker then
/// aborts the execution with "coroutine has overflowed its stack", which is no finding about
/// the model.
pub const LOOM_STACK_BYTES: usize = 1 << 20;

/// Spawns a loom model thread with [`LOOM_STACK_BYTES`] of stack.
pub fn loom_spawn<F, T>(f: F) -> loom::thread::JoinHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    loom::thread::Builder::new()
        .stack_size(LOOM_STACK_BYTES)
        .spawn(f)
        .expect("loom spawns a model thread")
}

/// shuttle's configuration for the checkers: its warnings silenced (the figures are reported
/// by each check).
pub fn quiet_shuttle() -> shuttle::Config {
    let mut config = shuttle::Config::new();
    config.silence_warnings = true;
    config
}
