//! The synchronization shim. The model takes every lock through [`Shim`], so the same model
//! runs on std mutexes (conformance tests), under loom (exhaustive interleavings) and under
//! shuttle (randomized and PCT schedules). Each lock acquisition is a scheduling point for
//! the checkers. A guard may be held across several effects of a machine (the target lock
//! and the store's transaction are), exactly as the adapter holds its locks.

use std::ops::DerefMut;

/// A family of mutexes. Implementations for loom and shuttle live in `solewriter-verification`.
pub trait Shim: 'static {
    /// The mutex type.
    type Mutex<T: Send + 'static>: Send + Sync + 'static;
    /// The guard of a locked mutex.
    type Guard<'a, T: Send + 'static>: DerefMut<Target = T>;

    /// Creates a mutex holding `value`.
    fn mutex<T: Send + 'static>(value: T) -> Self::Mutex<T>;

    /// Locks `mutex` (a poisoned lock is entered anyway: the model's state is only ever
    /// replaced whole, at commit).
    fn lock<T: Send + 'static>(mutex: &Self::Mutex<T>) -> Self::Guard<'_, T>;

    /// Locks `mutex` if no one holds it (`None` otherwise): a contender that gives up at once
    /// (the liveness checks: a lock a frozen process keeps is never had).
    fn try_lock<T: Send + 'static>(mutex: &Self::Mutex<T>) -> Option<Self::Guard<'_, T>>;

    /// Runs `f` with the lock held.
    fn with<T: Send + 'static, R>(mutex: &Self::Mutex<T>, f: impl FnOnce(&mut T) -> R) -> R {
        f(&mut Self::lock(mutex))
    }
}

/// Declares a [`Shim`] named `$name` over the mutex of the module `$sync` (its `Mutex` and
/// `MutexGuard`, whose lock results are `std`'s): the one declaration of the shim for std
/// here and for loom and shuttle in `solewriter-verification`.
#[macro_export]
macro_rules! declare_shim {
    ($(#[$meta:meta])* $name:ident, $($sync:ident)::+) => {
        $(#[$meta])*
        #[derive(Debug)]
        pub struct $name;

        impl $crate::Shim for $name {
            type Mutex<T: Send + 'static> = $($sync)::+::Mutex<T>;
            type Guard<'a, T: Send + 'static> = $($sync)::+::MutexGuard<'a, T>;

            fn mutex<T: Send + 'static>(value: T) -> Self::Mutex<T> {
                $($sync)::+::Mutex::new(value)
            }

            fn lock<T: Send + 'static>(mutex: &Self::Mutex<T>) -> Self::Guard<'_, T> {
                mutex
                    .lock()
                    .unwrap_or_else(::std::sync::PoisonError::into_inner)
            }

            fn try_lock<T: Send + 'static>(
                mutex: &Self::Mutex<T>,
            ) -> Option<Self::Guard<'_, T>> {
                match mutex.try_lock() {
                    Ok(guard) => Some(guard),
                    Err(::std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
                    Err(::std::sync::TryLockError::WouldBlock) => None,
                }
            }
        }
    };
}

declare_shim!(
    /// `std::sync::Mutex`.
    StdShim,
    std::sync
);
