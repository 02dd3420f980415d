//! Who must act on the project lock machines' ends that are failures: an attempt that found
//! the lock held, an owner it cannot judge or a recovery it abandoned, a clear refused. Decided
//! here, once, beside the machines; an executor wraps its own error type around them.

use super::clear::{ClearEnd, ClearRefused};
use super::machine::AttemptEnd;
use crate::error_kind::{Classified, ErrorKind};

impl<E: Classified> AttemptEnd<E> {
    /// Who must act when the attempt did not take the lock: another live holder is
    /// contention, an owner that cannot be judged from here or a recovery abandoned needs an
    /// operator, a failed effect is of its error's kind. `None`: it took the lock, or cleared
    /// what it was asked to.
    pub fn failure_kind(&self) -> Option<ErrorKind> {
        match self {
            AttemptEnd::Acquired(_) | AttemptEnd::Cleared => None,
            AttemptEnd::Busy(..) => Some(ErrorKind::Contention),
            AttemptEnd::Unknown(..) | AttemptEnd::Abandoned(_) => Some(ErrorKind::Environment),
            AttemptEnd::Failed(error) => Some(error.kind()),
        }
    }
}

impl ClearRefused {
    /// A clear refused (the kernel lock held, the owner known, another nonce) is the
    /// operator's input to fix.
    pub fn kind(&self) -> ErrorKind {
        ErrorKind::Input
    }
}

impl<E: Classified> ClearEnd<E> {
    /// Who must act when the clear did not clear: refused, or stopped as its attempt ended.
    /// `None`: the record is gone, or there was none.
    pub fn failure_kind(&self) -> Option<ErrorKind> {
        match self {
            ClearEnd::Cleared(_) | ClearEnd::NoLock => None,
            ClearEnd::Refused(refused) => Some(refused.kind()),
            ClearEnd::Stopped(end) => end.failure_kind(),
        }
    }
}
