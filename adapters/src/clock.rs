//! The broker clock. Safety never depends on it: a clock jump can only make a lease expire
//! earlier or later, never let a superseded holder write (see `verification/FENCING.md`).

use solewriter_core::time::Millis;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub use solewriter_files::clock::{Clock, SystemClock};

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

/// A clock read from a file holding decimal milliseconds: a test seam that lets one test
/// move the broker clock of several processes at once (the CLI's test binary,
/// `solewriter-testkit`, reads it when the `SOLEWRITER_TEST_CLOCK_FILE` variable names the
/// file; the shipped `solewriter` never does). Nothing in the library constructs one;
/// production code runs on [`SystemClock`].
///
/// The writer must replace the file atomically (write a sibling, rename it over), so a
/// reader never sees a half-written number. A file that cannot be read or parsed is a broken
/// test setup, not a runtime condition: `now` panics and names the file.
#[derive(Clone, Debug)]
pub struct FileClock {
    path: std::path::PathBuf,
}

impl FileClock {
    /// A clock reading the file at `path` on every call.
    pub fn new(path: impl Into<std::path::PathBuf>) -> Self {
        FileClock { path: path.into() }
    }

    /// Writes `to` into the file at `path` atomically (sibling then rename), for the test
    /// that moves the clock.
    pub fn write(path: &std::path::Path, to: Millis) -> std::io::Result<()> {
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        std::fs::write(&tmp, to.0.to_string())?;
        std::fs::rename(&tmp, path)
    }
}

impl Clock for FileClock {
    fn now(&self) -> Millis {
        let text = std::fs::read_to_string(&self.path)
            .unwrap_or_else(|e| panic!("test clock file {} unreadable: {e}", self.path.display()));
        let ms = text.trim().parse().unwrap_or_else(|e| {
            panic!(
                "test clock file {} holds {text:?}, not milliseconds: {e}",
                self.path.display()
            )
        });
        Millis(ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_clock_reads_what_was_last_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("clock");
        FileClock::write(&path, Millis(1_000)).unwrap();
        let clock = FileClock::new(&path);
        assert_eq!(clock.now(), Millis(1_000));
        FileClock::write(&path, Millis(61_000)).unwrap();
        assert_eq!(clock.now(), Millis(61_000));
    }
}
