//! Waiting for a newer publication without polling: an inotify watch on the target's directory
//! (and, until the directories exist, on `hook-projections/` and the runtime root), and
//! `poll(2)` on it with the caller's timeout.
//!
//! The watches are added before `current.json` is read, so a publication that lands after the
//! read raises an event the wait sees: no publication is missed between the check and the
//! sleep. Every event — a rename into the directory, a directory created — only triggers a
//! fresh read through [`read_projection`], with its guarantees (bounded, no symlink followed,
//! the target checked); the event itself is never trusted.

use crate::error::{Error, FileError, Result};
use crate::projection::runtime::{read_projection, RuntimeRoot, PROJECTIONS_DIR};
use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustix::fs::inotify::{self, CreateFlags, WatchFlags};
use solewriter_core::projection::target::TargetId;
use solewriter_core::projection::ProjectionDocument;
use std::mem::MaybeUninit;
use std::path::Path;
use std::time::{Duration, Instant};

/// Blocks until `target`'s `current.json` holds a document of an epoch greater than
/// `after_epoch` (any document when `None`), and returns it; [`Error::WatchTimedOut`] when
/// `timeout` passes first. A document that is there already answers at once.
pub fn wait_for_projection(
    root: &RuntimeRoot,
    target: &TargetId,
    after_epoch: Option<u64>,
    timeout: Duration,
) -> Result<ProjectionDocument> {
    let deadline = Instant::now().checked_add(timeout);
    let dir = root.target_dir(target);
    let watched = [
        root.path().to_owned(),
        root.path().join(PROJECTIONS_DIR),
        dir.clone(),
    ];
    let fail = |path: &Path| {
        let path = path.to_owned();
        move |errno: rustix::io::Errno| {
            Error::File(FileError::Read {
                path,
                source: errno.into(),
            })
        }
    };
    let inotify =
        inotify::init(CreateFlags::NONBLOCK | CreateFlags::CLOEXEC).map_err(fail(&dir))?;
    let mut buffer = [MaybeUninit::uninit(); 4096];
    loop {
        // Watch every directory of the chain that exists now (re-adding one is harmless),
        // before reading: a publication after the read raises an event.
        for path in &watched {
            match inotify::add_watch(
                &inotify,
                path.as_path(),
                WatchFlags::MOVED_TO | WatchFlags::CREATE | WatchFlags::ONLYDIR,
            ) {
                Ok(_) | Err(rustix::io::Errno::NOENT) => {}
                Err(errno) => return Err(fail(path)(errno)),
            }
        }
        match read_projection(root, target) {
            Ok(doc) if after_epoch.is_none_or(|after| doc.fencing_epoch > after) => return Ok(doc),
            Ok(_) | Err(Error::File(FileError::NotPublished { .. })) => {}
            Err(other) => return Err(other),
        }
        let left = match deadline {
            Some(deadline) => match deadline.checked_duration_since(Instant::now()) {
                Some(left) if !left.is_zero() => Some(left),
                _ => {
                    return Err(Error::WatchTimedOut {
                        path: root.current_path(target),
                        after_epoch,
                        timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
                    })
                }
            },
            None => None,
        };
        let timespec = left.map(|left| Timespec {
            tv_sec: i64::try_from(left.as_secs()).unwrap_or(i64::MAX),
            tv_nsec: i64::from(left.subsec_nanos()),
        });
        let mut fds = [PollFd::new(&inotify, PollFlags::IN)];
        match poll(&mut fds, timespec.as_ref()) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(errno) => return Err(fail(&dir)(errno)),
        }
        // Drain what arrived; which events they were does not matter: the read decides.
        let mut events = inotify::Reader::new(&inotify, &mut buffer);
        loop {
            match events.next() {
                Ok(_) => {}
                Err(rustix::io::Errno::WOULDBLOCK | rustix::io::Errno::INTR) => break,
                Err(errno) => return Err(fail(&dir)(errno)),
            }
        }
    }
}
