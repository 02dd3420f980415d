//! What the machines end with, in one shape for every executor: one failure type for every
//! lease operation ([`LeaseFailure`]) and a publication's result with its conditional release
//! folded in ([`Unpublished`]). An executor maps these to its own errors with one `match`
//! each; which combinations exist, what each means, and who must act on each
//! ([`Classified::kind`]) is decided here.

use crate::error_kind::{Classified, ErrorKind};
use crate::projection::document::DocumentError;
use crate::projection::lease::{
    Credential, DeadlinePassed, Fenced, ForeignEpoch, InconsistentLease,
};
use crate::projection::target::TargetId;
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

impl<E: Classified> Classified for LeaseFailure<E> {
    /// Who must act on a lease operation's failure: a failed effect is of its error's kind
    /// (the executor's own); a rename not made durable is partial success, whatever error
    /// the executor reports it with; everything else is decided here, once for every
    /// executor.
    fn kind(&self) -> ErrorKind {
        match self {
            LeaseFailure::NotAdmitted => ErrorKind::Input,
            LeaseFailure::Inconsistent(inconsistent) => inconsistent.kind(),
            LeaseFailure::EpochExhausted | LeaseFailure::RowChanged => ErrorKind::Environment,
            LeaseFailure::ForeignEpoch(foreign) => foreign.kind(),
            LeaseFailure::Fenced(fenced) => fenced.kind(),
            LeaseFailure::Document(document) => document.kind(),
            LeaseFailure::Expired(passed) => passed.kind(),
            LeaseFailure::Effect(error) => error.kind(),
            LeaseFailure::NotDurable(_) => ErrorKind::PartialSuccess,
        }
    }
}

impl<E> LeaseFailure<E> {
    /// One failure of every variant, for the tests that check an executor classifies each as
    /// [`Classified::kind`] does: `effect` makes the executor's error for a failed effect,
    /// `not_durable` its error for a directory fsync that failed after the rename. A variant
    /// added to [`LeaseFailure`] fails to compile here until it is listed.
    pub fn every(
        effect: impl FnOnce() -> E,
        not_durable: impl FnOnce() -> E,
    ) -> Vec<LeaseFailure<E>> {
        let target_id = TargetId::parse(&"a".repeat(64)).expect("a valid target id");
        let every = vec![
            LeaseFailure::NotAdmitted,
            LeaseFailure::Inconsistent(InconsistentLease {
                target_id: target_id.to_string(),
                reason: "a sample",
            }),
            LeaseFailure::EpochExhausted,
            LeaseFailure::ForeignEpoch(ForeignEpoch {
                target_id,
                document_epoch: 9,
                row_epoch: 1,
            }),
            LeaseFailure::RowChanged,
            LeaseFailure::Fenced(Fenced::Released),
            LeaseFailure::Document(DocumentError::Malformed("a sample".into())),
            LeaseFailure::Expired(DeadlinePassed {
                expires_at: Millis(1),
                now: Millis(2),
            }),
            LeaseFailure::Effect(effect()),
            LeaseFailure::NotDurable(not_durable()),
        ];
        // Every variant once, in declaration order: the exhaustive match below names them.
        let place = |failure: &LeaseFailure<E>| match failure {
            LeaseFailure::NotAdmitted => 0,
            LeaseFailure::Inconsistent(_) => 1,
            LeaseFailure::EpochExhausted => 2,
            LeaseFailure::ForeignEpoch(_) => 3,
            LeaseFailure::RowChanged => 4,
            LeaseFailure::Fenced(_) => 5,
            LeaseFailure::Document(_) => 6,
            LeaseFailure::Expired(_) => 7,
            LeaseFailure::Effect(_) => 8,
            LeaseFailure::NotDurable(_) => 9,
        };
        assert!(every.iter().map(place).eq(0..every.len()));
        every
    }
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

impl<E: Classified> Classified for Unpublished<E> {
    /// Who must act on a publication that did not end published and released: one that could
    /// not start is of its error's kind, one that failed of its failure's (whether or not its
    /// release committed), one that replaced `current.json` without its release committing is
    /// partial success.
    fn kind(&self) -> ErrorKind {
        match self {
            Unpublished::NotStarted { error, .. } => error.kind(),
            Unpublished::Failed { failure, .. } => failure.kind(),
            Unpublished::NotReleased { .. } => ErrorKind::PartialSuccess,
        }
    }
}

impl<E> Unpublished<E> {
    /// One unpublished publication of every shape, for the tests that check an executor
    /// classifies each as [`Classified::kind`] does (`effect` and `not_durable` as
    /// [`LeaseFailure::every`]): one that could not start; one that failed of each
    /// [`LeaseFailure`], its release committed, and again with its release failed; one that
    /// replaced `current.json` without its release committing. A variant added to
    /// [`Unpublished`] fails to compile here until it is listed.
    pub fn every(effect: impl Fn() -> E, not_durable: impl Fn() -> E) -> Vec<Unpublished<E>> {
        let credential = Credential {
            target_id: TargetId::parse(&"a".repeat(64)).expect("a valid target id"),
            epoch: 1,
            token_hash: crate::token::HolderToken::from_bytes([1; 32]).hash(),
        };
        let mut every = vec![Unpublished::NotStarted {
            error: effect(),
            credential,
        }];
        for release in [false, true] {
            every.extend(
                LeaseFailure::every(&effect, &not_durable)
                    .into_iter()
                    .map(|failure| Unpublished::Failed {
                        failure,
                        epoch: Some(1),
                        release: release.then(|| LeaseFailure::Effect(effect())),
                    }),
            );
        }
        every.push(Unpublished::NotReleased {
            published: PublishReport {
                fencing_epoch: 1,
                bytes: 1,
                published_at: Millis(1),
            },
            release: LeaseFailure::Effect(effect()),
        });
        // Every variant listed: the exhaustive match below names them.
        let shape = |unpublished: &Unpublished<E>| match unpublished {
            Unpublished::NotStarted { .. } => 0,
            Unpublished::Failed { .. } => 1,
            Unpublished::NotReleased { .. } => 2,
        };
        assert!((0..3).all(|n| every.iter().any(|u| shape(u) == n)));
        every
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// An executor's error that is always of one kind.
    struct Of(ErrorKind);

    impl Classified for Of {
        fn kind(&self) -> ErrorKind {
            self.0
        }
    }

    #[test]
    fn every_failure_has_its_kind() {
        use ErrorKind::*;
        let every = LeaseFailure::every(|| Of(Contention), || Of(Environment));
        let kinds: Vec<ErrorKind> = every.iter().map(Classified::kind).collect();
        assert_eq!(
            kinds,
            [
                Input,
                Environment,
                Environment,
                Environment,
                Environment,
                LostAuthority,
                Environment,
                LostAuthority,
                Contention,
                PartialSuccess,
            ]
        );
    }

    #[test]
    fn every_unpublished_shape_is_listed_once_a_failure_with_and_without_its_release() {
        use ErrorKind::*;
        let failures = LeaseFailure::every(|| Of(Contention), || Of(Environment));
        let every = Unpublished::every(|| Of(Contention), || Of(Environment));
        assert_eq!(every.len(), 1 + 2 * failures.len() + 1);
        let kinds: Vec<ErrorKind> = every.iter().map(Classified::kind).collect();
        let failed: Vec<ErrorKind> = failures.iter().map(Classified::kind).collect();
        assert_eq!(kinds[0], Contention, "not started: its error's kind");
        assert_eq!(&kinds[1..=failed.len()], failed.as_slice());
        assert_eq!(
            &kinds[failed.len() + 1..=2 * failed.len()],
            failed.as_slice()
        );
        assert_eq!(
            kinds.last(),
            Some(&PartialSuccess),
            "published, not released"
        );
    }

    #[test]
    fn an_unpublished_publication_has_its_failure_kind_or_partial_success() {
        let credential = Credential {
            target_id: TargetId::parse(&"a".repeat(64)).expect("valid"),
            epoch: 1,
            token_hash: crate::token::HolderToken::from_bytes([1; 32]).hash(),
        };
        let published = PublishReport {
            fencing_epoch: 1,
            bytes: 1,
            published_at: Millis(1),
        };
        let cases = [
            (
                Unpublished::NotStarted {
                    error: Of(ErrorKind::Contention),
                    credential,
                },
                ErrorKind::Contention,
            ),
            (
                Unpublished::Failed {
                    failure: LeaseFailure::Fenced(Fenced::Released),
                    epoch: Some(1),
                    release: Some(LeaseFailure::Effect(Of(ErrorKind::Environment))),
                },
                ErrorKind::LostAuthority,
            ),
            (
                Unpublished::NotReleased {
                    published,
                    release: LeaseFailure::Effect(Of(ErrorKind::Contention)),
                },
                ErrorKind::PartialSuccess,
            ),
        ];
        for (unpublished, kind) in cases {
            assert_eq!(unpublished.kind(), kind);
        }
    }
}
