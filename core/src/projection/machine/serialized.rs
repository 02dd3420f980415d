//! The lock envelope every machine runs its body in, in one fixed order: run the body's part
//! before the transaction (no lock), begin the store's serialized write transaction, take the
//! target's kernel lock, run the body, let the target lock go, commit or roll back, run the
//! body's part after the transaction (no lock). The target lock nests strictly inside the
//! transaction: it is held only while the store's write lock is, so no exclusion outlives a
//! transaction — a holder frozen anywhere outside its transaction (its draft, its directory
//! fsync) holds no lock at all, and a successor goes on once its lease has expired. The
//! transaction's body runs only while both locks are held, so each lock alone orders it
//! against every other grant and publication of the target. This is the only code that orders
//! the locks, so no machine can take them the other way round.

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
    /// Both locks are held and the body starts (`true`), or it never will (`false`: the
    /// transaction or the target lock could not be had; the envelope keeps the error and ends
    /// any transaction it began, the part after it runs).
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
    /// The transaction has begun: the target lock is taken.
    Lock,
    /// Both locks held; once the body has ended, the target lock is let go.
    Body,
    /// The target lock is let go: the transaction ends so.
    Finish(End),
    /// The target lock could not be had: the transaction is rolled back.
    Abandon,
    RollbackAfterFailedCommit,
    After,
    Done,
}

/// A body inside the lock envelope.
#[derive(Debug)]
pub(crate) struct Serialized<E, B> {
    pub(crate) body: B,
    phase: Phase,
    /// The transaction or the target lock could not be had: the transaction's body never ran.
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
            // The body is ready for the transaction: it begins, then the target lock is taken.
            Phase::Before => self.body.poll_before().unwrap_or(Effect::Begin),
            Phase::Lock => Effect::LockTarget,
            Phase::Body => match self.body.end() {
                None => self.body.poll(),
                Some(_) => Effect::UnlockTarget,
            },
            Phase::Finish(End::Commit) => Effect::Commit,
            Phase::Finish(End::Rollback) | Phase::Abandon | Phase::RollbackAfterFailedCommit => {
                Effect::Rollback
            }
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
            // The body polled nothing before the transaction: this answers `Begin`.
            (Phase::Before, Input::Done) => Phase::Lock,
            (Phase::Before, Input::Failed(e)) => self.not_started(e, false),
            (Phase::Lock, Input::Done) => {
                self.body.begun(true);
                Phase::Body
            }
            (Phase::Lock, Input::Failed(e)) => self.not_started(e, true),
            (Phase::Body, input) => match self.body.end() {
                None => {
                    self.body.handle(input);
                    Phase::Body
                }
                // This answers `UnlockTarget` (its failure changes nothing: the lock is gone
                // with its descriptor either way).
                Some(end) => match input {
                    Input::Done | Input::Failed(_) => Phase::Finish(end),
                    other => protocol_violation("unlock-target", &other),
                },
            },
            (Phase::Finish(End::Commit), Input::Done) => self.ended(),
            (Phase::Finish(End::Commit), Input::Failed(e)) => {
                self.commit_failed = Some(e);
                Phase::RollbackAfterFailedCommit
            }
            // A failed rollback is the executor's to report; the transaction ends either way.
            (
                Phase::Finish(End::Rollback) | Phase::RollbackAfterFailedCommit,
                Input::Done | Input::Failed(_),
            ) => self.ended(),
            (Phase::Abandon, Input::Done | Input::Failed(_)) => self.after(),
            (Phase::After, input) if self.body.poll_after().is_some() => {
                self.body.handle(input);
                self.after()
            }
            (phase, other) => protocol_violation(&format!("{phase:?}"), &other),
        };
    }

    /// The transaction (`began`: it began, the target lock did not) or the target lock could
    /// not be had: the body never runs; a transaction begun is rolled back.
    fn not_started(&mut self, e: E, began: bool) -> Phase {
        self.not_started = Some(e);
        self.body.begun(false);
        if began {
            Phase::Abandon
        } else {
            self.after()
        }
    }

    fn ended(&mut self) -> Phase {
        self.body.ended();
        self.after()
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
