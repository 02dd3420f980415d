//! The synchronization shim. The model takes every lock through [`Shim`], so the same model
//! runs on std mutexes (conformance tests), under loom (exhaustive interleavings) and under
//! shuttle (randomized and PCT schedules). Each lock acquisition is a scheduling point for
//! the checkers.

/// A family of mutexes. Implementations for loom and shuttle live in `solewriter-verification`.
pub trait Shim: 'static {
    /// The mutex type.
    type Mutex<T: Send + 'static>: Send + Sync + 'static;

    /// Creates a mutex holding `value`.
    fn mutex<T: Send + 'static>(value: T) -> Self::Mutex<T>;

    /// Runs `f` with the lock held.
    fn with<T: Send + 'static, R>(mutex: &Self::Mutex<T>, f: impl FnOnce(&mut T) -> R) -> R;
}

/// `std::sync::Mutex`. A poisoned lock is entered anyway: the model's state is only ever
/// replaced whole, at commit.
#[derive(Debug)]
pub struct StdShim;

impl Shim for StdShim {
    type Mutex<T: Send + 'static> = std::sync::Mutex<T>;

    fn mutex<T: Send + 'static>(value: T) -> Self::Mutex<T> {
        std::sync::Mutex::new(value)
    }

    fn with<T: Send + 'static, R>(mutex: &Self::Mutex<T>, f: impl FnOnce(&mut T) -> R) -> R {
        let mut guard = mutex
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut guard)
    }
}
