//! Who must act on an error: the one classification every product's error answers
//! (`kind()` on the projection store's error, the file effects', the project lock's, the
//! ledger's and the write guard's), so a host handles "retry", "acquire again" and "an operator
//! must look" the same way whichever product failed.

/// Who must act on an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The caller's input was refused (a submission, an unadmitted target, a clear of the wrong
    /// lock): fix the input.
    Input,
    /// A lock or the store was busy: the same call may succeed later (`is_retryable`).
    Contention,
    /// This holder's authority is gone (fenced, its lease expired before the rename, its
    /// project lock lost, its writer swept): acquire again; never retry with the old grant.
    LostAuthority,
    /// The store, the files or the operating system: an operator must look.
    Environment,
    /// Part of the work took effect (`current.json` replaced, but not durably, or not
    /// released): the error says which part.
    PartialSuccess,
}

impl ErrorKind {
    /// Whether an error of this kind may go away if the same call is made again later,
    /// unchanged: only contention.
    pub fn is_retryable(self) -> bool {
        self == ErrorKind::Contention
    }
}

#[cfg(test)]
mod tests {
    use super::ErrorKind;

    #[test]
    fn only_contention_is_retryable() {
        use ErrorKind::*;
        for kind in [Input, LostAuthority, Environment, PartialSuccess] {
            assert!(!kind.is_retryable(), "{kind:?}");
        }
        assert!(Contention.is_retryable());
    }
}
