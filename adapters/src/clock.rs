//! The broker clock. Safety never depends on it: a clock jump can only make a lease expire
//! earlier or later, never let a superseded holder write (see `verification/FENCING.md`).

use solewriter_core::time::Millis;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// A source of broker time.
pub trait Clock: Send + Sync {
    /// The current broker time.
    fn now(&self) -> Millis;
}

/// Wall-clock milliseconds since the Unix epoch. A clock before 1970 reads as 0.
#[derive(Clone, Copy, Debug)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Millis {
        let ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0);
        Millis(u64::try_from(ms).unwrap_or(u64::MAX))
    }
}

/// A clock moved by hand, shared between clones (tests, models, the demo).
#[derive(Clone, Debug)]
pub struct ManualClock(Arc<AtomicU64>);

impl ManualClock {
    /// A clock reading `start`.
    pub fn new(start: Millis) -> Self {
        ManualClock(Arc::new(AtomicU64::new(start.0)))
    }

    /// Sets the time (backwards jumps allowed).
    pub fn set(&self, to: Millis) {
        self.0.store(to.0, Ordering::SeqCst);
    }

    /// Moves the time forward by `ms`.
    pub fn advance(&self, ms: u64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Millis {
        Millis(self.0.load(Ordering::SeqCst))
    }
}
