//! The lock envelope every machine runs its body in, in one fixed order: run the body's part
//! before the transaction (no lock), take the target's kernel lock, begin the store's
//! serialized write transaction, run the body, commit or roll back, release the target lock,
//! run the body's part after the transaction (no lock). The transaction's body runs only while
//! both locks are held; the target lock is taken right before the transaction begins and let
//! go right after it ends, with no other effect in between, so no exclusion outlives a
//! transaction (a holder frozen in its draft or before its directory fsync holds no lock).
//! This and the batch's envelope (`publish_many.rs`, every target lock then the store's) are
//! the only code that orders the locks, so no machine can take them the other way round.

use super::{Answer, Effect, FileEffect, LeaseInput, ProtocolError, StoreEffect};

/// How a finished body ends its transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum End {
    Commit,
    Rollback,
}

/// The part of a machine that runs inside the envelope.
pub(crate) trait Body<E> {
    /// Before the transaction (no lock held): the next effect, or `None` when the body is
    /// ready for the transaction. Most bodies have nothing to do here.
    fn poll_before(&self) -> Option<Effect<'_, E>> {
        None
    }
    /// The transaction began (`true`), or could not begin (`false`: the target lock or the
    /// transaction could not be had; the envelope keeps the error, the transaction's body will
    /// not run, the part after it will).
    fn begun(&mut self, _began: bool) {}
    /// Inside the transaction: the next effect, while [`Body::end`] is `None` (a body that
    /// names none then is stuck: its machine ends unfinished).
    fn poll(&self) -> Option<Effect<'_, E>>;
    /// The answer to the effect last polled (before, inside or after the transaction); an
    /// answer to another effect is refused, the body unchanged.
    fn handle(&mut self, answer: Answer<LeaseInput<E>>) -> Result<(), ProtocolError>;
    /// `Some` once the transaction's body has finished: how its transaction ends.
    fn end(&self) -> Option<End>;
    /// The transaction has ended (committed, or rolled back).
    fn ended(&mut self) {}
    /// After the transaction (both locks let go): the next effect, or `None` when the machine
    /// has ended.
    fn poll_after(&self) -> Option<Effect<'_, E>> {
        None
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    Before,
    Begin,
    Body,
    RollbackAfterFailedCommit,
    Unlock,
    After,
    Done,
}

/// A body inside the lock envelope.
#[derive(Debug)]
pub(crate) struct Serialized<E, B> {
    pub(crate) body: B,
    phase: Stage,
    /// The target lock or the transaction could not be had: the transaction's body never ran.
    pub(crate) not_started: Option<E>,
    /// The commit failed (the transaction was then rolled back).
    pub(crate) commit_failed: Option<E>,
}

impl<E, B: Body<E>> Serialized<E, B> {
    pub(crate) fn new(body: B) -> Self {
        Serialized {
            body,
            phase: Stage::Before,
            not_started: None,
            commit_failed: None,
        }
    }

    pub(crate) fn is_done(&self) -> bool {
        self.phase == Stage::Done
    }

    pub(crate) fn poll(&self) -> Option<Effect<'_, E>> {
        Some(match self.phase {
            // The body is ready for the transaction: the target lock is taken right before it.
            Stage::Before => self
                .body
                .poll_before()
                .unwrap_or_else(|| FileEffect::lock_target().into()),
            Stage::Begin => StoreEffect::begin().into(),
            Stage::Body => match self.body.end() {
                None => return self.body.poll(),
                Some(End::Commit) => StoreEffect::commit().into(),
                Some(End::Rollback) => StoreEffect::rollback().into(),
            },
            Stage::RollbackAfterFailedCommit => StoreEffect::rollback().into(),
            Stage::Unlock => FileEffect::unlock_target().into(),
            // `After` is entered only while the body has an effect there.
            Stage::After => return self.body.poll_after(),
            Stage::Done => return None,
        })
    }

    /// Consumes the answer to the effect last polled; an answer to another effect is
    /// refused, the envelope unchanged.
    pub(crate) fn handle(&mut self, answer: Answer<LeaseInput<E>>) -> Result<(), ProtocolError> {
        // Every answer, the body's included, must answer the effect polled: an answer kept
        // from an earlier effect (a `sync-parents` handed to a `rename`) is refused here, so a
        // body never takes one effect's answer for another's.
        if self.poll().map(|effect| effect.name()) != Some(answer.effect()) {
            return Err(ProtocolError::wrong("lock envelope", answer.effect()));
        }
        self.phase = match self.phase {
            Stage::Before if self.body.poll_before().is_some() => {
                self.body.handle(answer)?;
                Stage::Before
            }
            // `After` is entered only while the body has an effect there (`after`).
            Stage::After => {
                self.body.handle(answer)?;
                self.after()
            }
            Stage::Body if self.body.end().is_none() => {
                self.body.handle(answer)?;
                Stage::Body
            }
            phase => {
                let (_, input) = answer.into_parts();
                self.envelope(phase, input)
            }
        };
        Ok(())
    }

    /// The envelope's own effects (the locks and the transaction's edges), answered.
    fn envelope(&mut self, phase: Stage, input: LeaseInput<E>) -> Stage {
        let failed = match input {
            LeaseInput::Failed(e) => Some(e),
            _ => None,
        };
        match (phase, failed) {
            // The body polled nothing before the transaction: this answers the target lock.
            (Stage::Before, None) => Stage::Begin,
            (Stage::Before, Some(e)) => {
                self.not_started = Some(e);
                self.body.begun(false);
                self.after()
            }
            (Stage::Begin, None) => {
                self.body.begun(true);
                Stage::Body
            }
            (Stage::Begin, Some(e)) => {
                self.not_started = Some(e);
                self.body.begun(false);
                Stage::Unlock
            }
            (Stage::Body, failed) => match (self.body.end(), failed) {
                (Some(End::Commit), Some(e)) => {
                    self.commit_failed = Some(e);
                    Stage::RollbackAfterFailedCommit
                }
                // A failed rollback is the executor's to report; the transaction ends either
                // way.
                _ => self.ended(),
            },
            (Stage::RollbackAfterFailedCommit, _) => self.ended(),
            (Stage::Unlock, _) => self.after(),
            // No effect is polled in these phases (`After` is handled by the body).
            (Stage::After | Stage::Done, _) => phase,
        }
    }

    fn ended(&mut self) -> Stage {
        self.body.ended();
        Stage::Unlock
    }

    /// The part after the transaction, or the end if the body has nothing (more) to do there.
    fn after(&self) -> Stage {
        if self.body.poll_after().is_some() {
            Stage::After
        } else {
            Stage::Done
        }
    }
}
