//! Who must act on an error: the one classification every product's error answers
//! (`kind()` on the projection store's error, the file effects', the project lock's, the
//! ledger's and the write guard's), so a host handles "retry", "acquire again" and "an operator
//! must look" the same way whichever product failed.
//!
//! A machine's outcome answers its kind beside its own definition (a lease operation's
//! `Failure`, a publication's `Unpublished`, the project lock's attempt end): the core decides
//! it once, and an executor only wraps its own error type around it. An executor's own error
//! (a store's, a file's, a model's fault) answers through [`Classified`], which is how an
//! outcome that carries one (an effect that failed) takes that error's kind.

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

/// An error that answers who must act on it: implemented by the machines' outcomes and by each
/// executor's own error type (which an outcome carries when an effect failed).
pub trait Classified {
    /// Who must act on this error.
    fn kind(&self) -> ErrorKind;
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
