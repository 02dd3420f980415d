//! What the machines end with, in one shape for every executor: one failure type for every
//! lease operation ([`LeaseFailure`]) and a publication's result with its conditional release
//! folded in ([`Unpublished`]). An executor maps these to its own errors with one `match`
//! each; which combinations exist, and what each means, is decided here.

use crate::projection::document::DocumentError;
use crate::projection::lease::{
    Credential, DeadlinePassed, Fenced, ForeignEpoch, InconsistentLease,
};
use crate::time::Millis;

/// Why a lease operation (acquisition, publication, release) did not do what it was asked.
#[derive(Debug)]
pub enum LeaseFailure<E> {
    /// The target has no lease row. Nothing was written.
    NotAdmitted,
    /// The lease row breaks the row invariants. Nothing was written.
    Inconsistent(InconsistentLease),
    /// The epoch cannot be raised any further. Nothing was written.
    EpochExhausted,
    /// The document in place carries an epoch no grant of this store can have produced.
    /// Nothing was written; the row did not move.
    ForeignEpoch(ForeignEpoch),
    /// A conditional write changed no row although the decision, made under the same locks,
    /// said it would: the row changed behind the write lock.
    RowChanged,
    /// The holder no longer holds the lease. No file was touched.
    Fenced(Fenced),
    /// The document could not be composed. No file was touched.
    Document(DocumentError),
    /// The deadline passed before the rename: aborted, the temp removed, no renewal.
    Expired(DeadlinePassed),
    /// An effect failed (a busy store or target lock, a store or file error, the commit);
    /// for a publication: before the rename, so `current.json` is untouched.
    Effect(E),
    /// The rename happened but the directory fsync failed: readers see the new document, a
    /// power loss may bring back the old one.
    NotDurable(E),
}

/// What a release did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReleaseOutcome {
    /// The row was released.
    Released,
    /// The presented credential does not hold the row (superseded, released, forged):
    /// nothing changed.
    NotHolder(Fenced),
}

/// A publication that renamed its document durably.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PublishReport {
    /// Epoch of the publishing grant.
    pub fencing_epoch: u64,
    /// Size of the document in bytes.
    pub bytes: usize,
    /// Broker time of composition.
    pub published_at: Millis,
}

/// Why a publication did not end published and released.
#[derive(Debug)]
pub enum Unpublished<E> {
    /// The target lock or the transaction could not be had (`error`): nothing was renamed or
    /// released, the grant was not used. The executor releases it as it releases any grant a
    /// holder leaves unused (the adapter: when the lease is dropped, or at once after a
    /// one-shot's takeover; the Node binding: at once, its target lock tried once; the model:
    /// never, the grant expires).
    NotStarted {
        /// Why it could not start.
        error: E,
        /// The grant it did not use (after a one-shot's takeover: the grant it took).
        credential: Credential,
    },
    /// The publication failed (`failure`); its conditional release ran too if the grant
    /// existed (a one-shot refused before its grant has none), and did not commit if `release`
    /// says why.
    Failed {
        /// Why it did not publish (durably).
        failure: LeaseFailure<E>,
        /// The epoch of the grant that did not publish (`None`: a one-shot refused before it
        /// had one).
        epoch: Option<u64>,
        /// Why the release did not commit (the grant then ends at its expiry).
        release: Option<LeaseFailure<E>>,
    },
    /// `current.json` was replaced durably, but the conditional release did not commit: the
    /// grant ends at its expiry.
    NotReleased {
        /// The publication.
        published: PublishReport,
        /// Why the release did not commit.
        release: LeaseFailure<E>,
    },
}

/// A publication's result and its release's, folded into one (`epoch`: the grant's).
pub(crate) fn fold<E>(
    result: Result<PublishReport, LeaseFailure<E>>,
    release: Result<ReleaseOutcome, LeaseFailure<E>>,
    epoch: u64,
) -> Result<PublishReport, Unpublished<E>> {
    // A release that found another holder (the publication was fenced, or a successor took
    // over after the rename) wrote nothing, and has nothing to report.
    let release = release.err();
    match (result, release) {
        (Ok(published), None) => Ok(published),
        (Ok(published), Some(release)) => Err(Unpublished::NotReleased { published, release }),
        (Err(failure), release) => Err(Unpublished::Failed {
            failure,
            epoch: Some(epoch),
            release,
        }),
    }
}
