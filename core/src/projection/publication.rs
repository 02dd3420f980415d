//! The named steps of the fenced publication sequence.
//!
//! The sequence itself is executed by the SQLite adapter and, identically, by the reference
//! model in `solewriter-models`; the steps are named here so tests, probes and the model
//! checkers of both speak about the same points.

/// A named point of the publication sequence, reported to the adapter's `PublishProbe`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PublishStep {
    /// The draft was composed from the committed rows (before the transaction: no lock held).
    Composed,
    /// The draft's temp sibling is written and fsynced (before the transaction: no lock held).
    TempWritten,
    /// The serialized write transaction is open.
    TransactionOpen,
    /// The lease was revalidated.
    Revalidated,
    /// The deadline check before the rename passed (the draft was confirmed, or composed and
    /// written again).
    DeadlineChecked,
    /// `current.json` was replaced (directory not yet fsynced).
    Renamed,
    /// The conditional release was executed (the commit follows).
    Released,
    /// The transaction has ended and the target lock is let go, after a rename (the directory
    /// fsync follows; no lock held).
    Unlocked,
    /// The directory was fsynced (after the commit: no lock held).
    DirectorySynced,
}

impl PublishStep {
    /// Every step, in order.
    pub const ALL: [PublishStep; 9] = [
        PublishStep::Composed,
        PublishStep::TempWritten,
        PublishStep::TransactionOpen,
        PublishStep::Revalidated,
        PublishStep::DeadlineChecked,
        PublishStep::Renamed,
        PublishStep::Released,
        PublishStep::Unlocked,
        PublishStep::DirectorySynced,
    ];

    /// The kebab-case name of the step (e.g. `temp-written`).
    pub fn name(self) -> &'static str {
        match self {
            PublishStep::TransactionOpen => "transaction-open",
            PublishStep::Revalidated => "revalidated",
            PublishStep::Composed => "composed",
            PublishStep::TempWritten => "temp-written",
            PublishStep::DeadlineChecked => "deadline-checked",
            PublishStep::Renamed => "renamed",
            PublishStep::Unlocked => "unlocked",
            PublishStep::DirectorySynced => "directory-synced",
            PublishStep::Released => "released",
        }
    }

    /// Parses a kebab-case step name.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.name() == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for step in PublishStep::ALL {
            assert_eq!(PublishStep::parse(step.name()), Some(step));
        }
        assert_eq!(PublishStep::parse("TempWritten"), None);
    }
}
