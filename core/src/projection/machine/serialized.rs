//! The lock envelope every machine runs its body in, in one fixed order: run the body's part
//! before the transaction (no lock), take the target's kernel lock, begin the store's
//! serialized write transaction, run the body, commit or roll back, release the target lock,
//! run the body's part after the transaction (no lock). The transaction's body runs only while
//! both locks are held; the target lock is taken right before the transaction begins and let
//! go right after it ends, with no other effect in between, so no exclusion outlives a
//! transaction (a holder frozen in its draft or before its directory fsync holds no lock).
//! This is the only code that orders the locks, so no machine can take them the other way
//! round.

use super::{protocol_violation, Effect, Input};

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
    fn poll_before(&self) -> Option<Effect<'_>> {
        None
    }
    /// The transaction began (`true`), or could not begin (`false`: the target lock or the
    /// transaction could not be had; the envelope keeps the error, the transaction's body will
    /// not run, the part after it will).
    fn begun(&mut self, _began: bool) {}
    /// Inside the transaction: the next effect, while [`Body::end`] is `None`.
    fn poll(&self) -> Effect<'_>;
    /// The result of the effect last polled (before, inside or after the transaction).
    fn handle(&mut self, input: Input<E>);
    /// `Some` once the transaction's body has finished: how its transaction ends.
    fn end(&self) -> Option<End>;
    /// The transaction has ended (committed, or rolled back).
    fn ended(&mut self) {}
    /// After the transaction (both locks let go): the next effect, or `None` when the machine
    /// has ended.
    fn poll_after(&self) -> Option<Effect<'_>> {
        None
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
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
    phase: Phase,
    /// The target lock or the transaction could not be had: the transaction's body never ran.
    pub(crate) not_started: Option<E>,
    /// The commit failed (the transaction was then rolled back).
    pub(crate) commit_failed: Option<E>,
}

impl<E, B: Body<E>> Serialized<E, B> {
    pub(crate) fn new(body: B) -> Self {
        Serialized {
            body,
            phase: Phase::Before,
            not_started: None,
            commit_failed: None,
        }
    }

    pub(crate) fn is_done(&self) -> bool {
        self.phase == Phase::Done
    }

    pub(crate) fn poll(&self) -> Effect<'_> {
        match self.phase {
            // The body is ready for the transaction: the target lock is taken right before it.
            Phase::Before => self.body.poll_before().unwrap_or(Effect::LockTarget),
            Phase::Begin => Effect::Begin,
            Phase::Body => match self.body.end() {
                None => self.body.poll(),
                Some(End::Commit) => Effect::Commit,
                Some(End::Rollback) => Effect::Rollback,
            },
            Phase::RollbackAfterFailedCommit => Effect::Rollback,
            Phase::Unlock => Effect::UnlockTarget,
            // `After` is entered only while the body has an effect there.
            Phase::After => self.body.poll_after().unwrap_or(Effect::Finished),
            Phase::Done => Effect::Finished,
        }
    }

    pub(crate) fn handle(&mut self, input: Input<E>) {
        self.phase = match (self.phase, input) {
            (Phase::Before, input) if self.body.poll_before().is_some() => {
                self.body.handle(input);
                Phase::Before
            }
            // The body polled nothing before the transaction: this answers `LockTarget`.
            (Phase::Before, Input::Done) => Phase::Begin,
            (Phase::Before, Input::Failed(e)) => {
                self.not_started = Some(e);
                self.body.begun(false);
                self.after()
            }
            (Phase::Begin, Input::Done) => {
                self.body.begun(true);
                Phase::Body
            }
            (Phase::Begin, Input::Failed(e)) => {
                self.not_started = Some(e);
                self.body.begun(false);
                Phase::Unlock
            }
            (Phase::Body, input) => match self.body.end() {
                None => {
                    self.body.handle(input);
                    Phase::Body
                }
                Some(End::Commit) => match input {
                    Input::Done => self.ended(),
                    Input::Failed(e) => {
                        self.commit_failed = Some(e);
                        Phase::RollbackAfterFailedCommit
                    }
                    other => protocol_violation("commit", &other),
                },
                // A failed rollback is the executor's to report; the transaction ends either way.
                Some(End::Rollback) => match input {
                    Input::Done | Input::Failed(_) => self.ended(),
                    other => protocol_violation("rollback", &other),
                },
            },
            (Phase::RollbackAfterFailedCommit, Input::Done | Input::Failed(_)) => self.ended(),
            (Phase::Unlock, Input::Done | Input::Failed(_)) => self.after(),
            // `After` is entered only while the body has an effect there (`after`).
            (Phase::After, input) => {
                self.body.handle(input);
                self.after()
            }
            (phase, other) => protocol_violation(&format!("{phase:?}"), &other),
        };
    }

    fn ended(&mut self) -> Phase {
        self.body.ended();
        Phase::Unlock
    }

    /// The part after the transaction, or the end if the body has nothing (more) to do there.
    fn after(&self) -> Phase {
        if self.body.poll_after().is_some() {
            Phase::After
        } else {
            Phase::Done
        }
    }
}
