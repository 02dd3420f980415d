//! The system clock: the trait every broker clock implements and the wall clock. Test clocks
//! (moved by hand, read from a file) are the adapter's (`solewriter_adapters::clock`).

use solewriter_core::time::Millis;
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
