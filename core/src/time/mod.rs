//! Broker time as a value. The core never reads a clock: callers pass [`Millis`] in.
//!
//! - [`iso`]: the one ISO-8601 form read and written (JavaScript's `toISOString()`).

pub mod iso;

use serde::{Deserialize, Serialize};
use std::fmt;

/// Milliseconds since the Unix epoch, as read from the broker's clock by an adapter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Millis(pub u64);

impl Millis {
    /// `self + ms`, saturating at [`crate::STORAGE_INTEGER_MAX`].
    pub fn plus_ms(self, ms: u64) -> Millis {
        Millis(self.0.saturating_add(ms).min(crate::STORAGE_INTEGER_MAX))
    }

    /// Milliseconds from `self` until `later`, zero if `later` is not after `self`.
    pub fn until(self, later: Millis) -> u64 {
        later.0.saturating_sub(self.0)
    }
}

impl fmt::Display for Millis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}ms", self.0)
    }
}
