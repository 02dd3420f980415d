//! The model's synchronization shim for loom and for shuttle: the same reference model runs
//! under each checker with that checker's mutex, so every lock acquisition in the model is a
//! point where the checker may switch threads.

use solewriter_models::Shim;

/// loom's mutex: loom explores every interleaving of these lock acquisitions (within the
/// preemption bound).
#[derive(Debug)]
pub struct LoomShim;

impl Shim for LoomShim {
    type Mutex<T: Send + 'static> = loom::sync::Mutex<T>;
    type Guard<'a, T: Send + 'static> = loom::sync::MutexGuard<'a, T>;

    fn mutex<T: Send + 'static>(value: T) -> Self::Mutex<T> {
        loom::sync::Mutex::new(value)
    }

    fn lock<T: Send + 'static>(mutex: &Self::Mutex<T>) -> Self::Guard<'_, T> {
        mutex
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn try_lock<T: Send + 'static>(mutex: &Self::Mutex<T>) -> Option<Self::Guard<'_, T>> {
        match mutex.try_lock() {
            Ok(guard) => Some(guard),
            Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }
}

/// shuttle's mutex: shuttle's random and PCT schedulers pick the interleavings.
#[derive(Debug)]
pub struct ShuttleShim;

impl Shim for ShuttleShim {
    type Mutex<T: Send + 'static> = shuttle::sync::Mutex<T>;
    type Guard<'a, T: Send + 'static> = shuttle::sync::MutexGuard<'a, T>;

    fn mutex<T: Send + 'static>(value: T) -> Self::Mutex<T> {
        shuttle::sync::Mutex::new(value)
    }

    fn lock<T: Send + 'static>(mutex: &Self::Mutex<T>) -> Self::Guard<'_, T> {
        mutex
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn try_lock<T: Send + 'static>(mutex: &Self::Mutex<T>) -> Option<Self::Guard<'_, T>> {
        match mutex.try_lock() {
            Ok(guard) => Some(guard),
            Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }
}
