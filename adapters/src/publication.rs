//! The fenced publication of `current.json`.
//!
//! Everything happens inside ONE serialized SQLite write transaction (`BEGIN IMMEDIATE`), so
//! no acquisition can commit between the revalidation and the rename:
//!
//! 1. read the lease row and revalidate {target, epoch, token hash, held, not expired}
//!    against the broker clock — else `Fenced`, nothing touched;
//! 2. read the committed channel rows and compose the document (pure);
//! 3. remove orphan temp siblings, write a unique temp sibling and fsync it;
//! 4. re-read the clock: at or past `expires_at` the publication aborts (no renewal);
//! 5. rename over `current.json`, fsync the directory;
//! 6. conditional release (token hash AND epoch), commit.
//!
//! Every failure after the transaction opens also ends with the conditional release and a
//! commit; a temp file that was not renamed is removed.

use crate::atomic_file::{remove_orphans, TempFile};
use crate::error::{Error, Result};
use crate::lease::{release_in, HeldLease};
use crate::rows;
use crate::runtime::CURRENT_FILE;
use crate::store::ProjectionStore;
use rusqlite::Connection;
use solewriter_core::lease::{observe, Credential};
use solewriter_core::projection::compose;
pub use solewriter_core::publication::PublishStep;
use solewriter_core::target::TargetId;
use solewriter_core::time::Millis;
use std::path::PathBuf;

/// Observes the publication sequence: tests pause or crash a publisher between steps. The
/// probe runs inside the transaction, so while it blocks, every other writer of the store
/// waits (or gets `Busy`).
pub trait PublishProbe {
    /// Called when `step` has been reached.
    fn reached(&self, step: PublishStep, target: &TargetId, epoch: u64);
}

/// The probe that does nothing.
#[derive(Clone, Copy, Debug)]
pub struct NoProbe;

impl PublishProbe for NoProbe {
    fn reached(&self, _: PublishStep, _: &TargetId, _: u64) {}
}

/// A completed publication.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Published {
    /// The target.
    pub target_id: TargetId,
    /// Epoch of the publishing grant.
    pub fencing_epoch: u64,
    /// Path of the replaced `current.json`.
    pub path: PathBuf,
    /// Size of the document in bytes.
    pub bytes: usize,
    /// Broker time of composition.
    pub published_at: Millis,
}

/// How a publication inside the transaction ended.
enum Inner {
    Done(Published),
    /// The rename happened but the directory fsync failed.
    NotDurable(PathBuf, std::io::Error),
}

impl<'s> HeldLease<'s> {
    /// Publishes `current.json` for this lease's target; see the module documentation.
    pub fn publish(self) -> Result<Published> {
        self.publish_observed(&NoProbe)
    }

    /// [`Self::publish`], reporting each step to `probe`.
    pub fn publish_observed(mut self, probe: &dyn PublishProbe) -> Result<Published> {
        let store = self.store;
        // `Busy` here: the lease was not used. It stays armed, so dropping it attempts the
        // conditional release; if the store is still busy, the grant expires after its TTL.
        let tx = store.begin()?;
        // From here the publication performs the release itself, on every path.
        self.armed = false;
        let credential = self.credential.clone();
        let at = |step| probe.reached(step, &credential.target_id, credential.epoch);
        at(PublishStep::TransactionOpen);
        let inner = publish_in(&tx, store, &credential, &at);
        let released = release_in(&tx, store, &credential);
        at(PublishStep::Released);
        // Commit even after a failure: the only write in this transaction is the release.
        let committed = tx.commit().map_err(|e| store.map_err(e));
        if committed.is_err() {
            store.abandon_transaction();
        }
        let (target, epoch) = (&credential.target_id, credential.epoch);
        let not_released = match (&released, &committed) {
            (Err(e), _) | (Ok(_), Err(e)) => {
                tracing::error!(target_id = %target, epoch, error = %e, "conditional release did not commit; the lease expires on its own");
                Some(e.to_string())
            }
            _ => None,
        };
        match inner {
            Ok(Inner::Done(published)) => match not_released {
                None => {
                    tracing::info!(target_id = %target, epoch, bytes = published.bytes, "published");
                    Ok(published)
                }
                Some(reason) => Err(Error::PublishedNotReleased {
                    path: published.path,
                    reason,
                }),
            },
            Ok(Inner::NotDurable(path, source)) => {
                tracing::error!(target_id = %target, epoch, %source, "published but directory fsync failed");
                Err(with_release_failure(
                    Error::NotDurable { path, source },
                    not_released,
                ))
            }
            Err(error) => {
                match &error {
                    Error::Fenced(reason) => {
                        tracing::warn!(target_id = %target, epoch, %reason, "publication fenced")
                    }
                    other => {
                        tracing::warn!(target_id = %target, epoch, error = %other, "publication aborted")
                    }
                }
                Err(with_release_failure(error, not_released))
            }
        }
    }
}

/// `error`, wrapped in [`Error::ReleaseFailed`] when the failure path's release did not commit.
fn with_release_failure(error: Error, not_released: Option<String>) -> Error {
    match not_released {
        None => error,
        Some(reason) => Error::ReleaseFailed {
            cause: Box::new(error),
            reason,
        },
    }
}

fn publish_in(
    conn: &Connection,
    store: &ProjectionStore,
    credential: &Credential,
    at: &dyn Fn(PublishStep),
) -> Result<Inner> {
    let options = &store.options;
    let target = &credential.target_id;
    // 1. Revalidate against the broker clock, inside the transaction.
    let record =
        rows::read_lease(conn, target)?.ok_or_else(|| Error::NotAdmitted(target.clone()))?;
    let now = options.clock.now();
    let authority = observe(record, now)?
        .authorize_publish(credential)
        .map_err(Error::Fenced)?;
    at(PublishStep::Revalidated);
    // 2. Compose from the committed rows.
    let rows = rows::read_channels(conn, target)?;
    let bytes = compose(&authority, &options.registry, &rows, now)?.to_bounded_bytes()?;
    at(PublishStep::Composed);
    // 3. Temp sibling: orphans first (none can be live: creating one needs this transaction).
    let fs = &*store.fs;
    let dir = options.runtime_root.prepare_target_dir(fs, target)?;
    let io = |step: &'static str, path: &PathBuf| {
        let path = path.clone();
        move |source| Error::Io { step, path, source }
    };
    remove_orphans(fs, &dir, CURRENT_FILE).map_err(io("remove orphan temp files", &dir))?;
    let temp =
        TempFile::write(fs, &dir, CURRENT_FILE, &bytes).map_err(io("write temp file", &dir))?;
    at(PublishStep::TempWritten);
    // 4. Bounded lease: a write that ran past the expiry aborts; the temp is dropped (removed).
    authority
        .check_deadline(options.clock.now())
        .map_err(Error::LeaseExpired)?;
    at(PublishStep::DeadlineChecked);
    // 5. Rename, then make it durable.
    let path = temp
        .rename_into_place()
        .map_err(io("rename into place", &dir))?;
    at(PublishStep::Renamed);
    if let Err(source) = fs.sync_dir(&dir) {
        return Ok(Inner::NotDurable(path, source));
    }
    at(PublishStep::DirectorySynced);
    Ok(Inner::Done(Published {
        target_id: target.clone(),
        fencing_epoch: authority.epoch(),
        path,
        bytes: bytes.len(),
        published_at: now,
    }))
}
