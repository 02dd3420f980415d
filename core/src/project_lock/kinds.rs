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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::project_lock::machine::Slot;
    use crate::project_lock::ownership::{
        BootId, Guard, LockNonce, LockRecord, OwnerIdentity, Ownership, UnknownReason,
    };
    use crate::time::Millis;

    /// An executor's error that is always of one kind.
    #[derive(Debug)]
    struct Of(ErrorKind);

    impl Classified for Of {
        fn kind(&self) -> ErrorKind {
            self.0
        }
    }

    fn record() -> LockRecord {
        LockRecord {
            owner: OwnerIdentity {
                pid: 1,
                start_token: 2,
                boot_id: BootId::parse("b00f").unwrap(),
                pid_ns: 3,
            },
            guard: Guard::Kernel,
            nonce: LockNonce::from_bytes([4; 32]),
            acquired_at: Millis(5),
        }
    }

    #[test]
    fn each_end_of_an_attempt_and_a_clear_has_its_kind() {
        use ErrorKind::*;
        let owner = record().owner;
        let attempts: [(AttemptEnd<Of>, Option<ErrorKind>); 6] = [
            (AttemptEnd::Acquired(record()), None),
            (AttemptEnd::Cleared, None),
            (AttemptEnd::Busy(Slot::lock(), None), Some(Contention)),
            (
                AttemptEnd::Unknown(Slot::lock(), owner, UnknownReason::Hidden),
                Some(Environment),
            ),
            (AttemptEnd::Abandoned(Slot::lock()), Some(Environment)),
            (AttemptEnd::Failed(Of(PartialSuccess)), Some(PartialSuccess)),
        ];
        for (end, kind) in attempts {
            assert_eq!(end.failure_kind(), kind, "{end:?}");
        }
        let clears: [(ClearEnd<Of>, Option<ErrorKind>); 4] = [
            (ClearEnd::Cleared(record()), None),
            (ClearEnd::NoLock, None),
            (
                ClearEnd::Refused(ClearRefused::Known(record(), Ownership::Alive)),
                Some(Input),
            ),
            (
                ClearEnd::Stopped(AttemptEnd::Busy(Slot::lock(), None)),
                Some(Contention),
            ),
        ];
        for (end, kind) in clears {
            assert_eq!(end.failure_kind(), kind, "{end:?}");
        }
    }
}
