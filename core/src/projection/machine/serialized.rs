//! The lock envelope every machine runs its body in, in one fixed order: take the target's
//! kernel lock, begin the store's serialized write transaction, run the body, commit or roll
//! back, release the target lock. The body runs only while both locks are held, and this is
//! the only code that orders them, so no machine can take them the other way round.

use super::{protocol_violation, Effect, Input};

/// How a finished body ends its transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum End {
    Commit,
    Rollback,
}

/// The part of a machine that runs inside the envelope.
pub(crate) trait Body<E> {
    /// The next effect of the body, while [`Body::end`] is `None`.
    fn poll(&self) -> Effect<'_>;
    /// The result of the effect last polled.
    fn handle(&mut self, input: Input<E>);
    /// `Some` once the body has finished: how its transaction ends.
    fn end(&self) -> Option<End>;
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Lock,
    Begin,
    Body,
    RollbackAfterFailedCommit,
    Unlock,
    Done,
}

/// A body inside the lock envelope.
#[derive(Debug)]
pub(crate) struct Serialized<E, B> {
    pub(crate) body: B,
    phase: Phase,
    /// The target lock or the transaction could not be had: the body never ran.
    pub(crate) not_started: Option<E>,
    /// The commit failed (the transaction was then rolled back).
    pub(crate) commit_failed: Option<E>,
}

impl<E, B: Body<E>> Serialized<E, B> {
    pub(crate) fn new(body: B) -> Self {
        Serialized {
            body,
            phase: Phase::Lock,
            not_started: None,
            commit_failed: None,
        }
    }

    pub(crate) fn is_done(&self) -> bool {
        self.phase == Phase::Done
    }

    pub(crate) fn poll(&self) -> Effect<'_> {
        match self.phase {
            Phase::Lock => Effect::LockTarget,
            Phase::Begin => Effect::Begin,
            Phase::Body => match self.body.end() {
                None => self.body.poll(),
                Some(End::Commit) => Effect::Commit,
                Some(End::Rollback) => Effect::Rollback,
            },
            Phase::RollbackAfterFailedCommit => Effect::Rollback,
            Phase::Unlock => Effect::UnlockTarget,
            Phase::Done => Effect::Finished,
        }
    }

    pub(crate) fn handle(&mut self, input: Input<E>) {
        self.phase = match (self.phase, input) {
            (Phase::Lock, Input::Done) => Phase::Begin,
            (Phase::Lock, Input::Failed(e)) => {
                self.not_started = Some(e);
                Phase::Done
            }
            (Phase::Begin, Input::Done) => Phase::Body,
            (Phase::Begin, Input::Failed(e)) => {
                self.not_started = Some(e);
                Phase::Unlock
            }
            (Phase::Body, input) => match self.body.end() {
                None => {
                    self.body.handle(input);
                    Phase::Body
                }
                Some(End::Commit) => match input {
                    Input::Done => Phase::Unlock,
                    Input::Failed(e) => {
                        self.commit_failed = Some(e);
                        Phase::RollbackAfterFailedCommit
                    }
                    other => protocol_violation("commit", &other),
                },
                // A failed rollback is the executor's to report; the transaction ends either way.
                Some(End::Rollback) => match input {
                    Input::Done | Input::Failed(_) => Phase::Unlock,
                    other => protocol_violation("rollback", &other),
                },
            },
            (Phase::RollbackAfterFailedCommit, Input::Done | Input::Failed(_)) => Phase::Unlock,
            (Phase::Unlock, Input::Done | Input::Failed(_)) => Phase::Done,
            (phase, other) => protocol_violation(&format!("{phase:?}"), &other),
        };
    }
}
