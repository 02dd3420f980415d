//! The named steps of the fenced publication sequence.
//!
//! The sequence itself is executed by the SQLite adapter and, identically, by the reference
//! model in `solewriter-models`; the steps are named here so tests, probes and the model
//! checkers of both speak about the same points.

/// A named point of the publication sequence, reported to the adapter's `PublishProbe`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PublishStep {
    /// The serialized write transaction is open.
    TransactionOpen,
    /// The lease was revalidated.
    Revalidated,
    /// The document was composed from the committed rows.
    Composed,
    /// The temp sibling is written and fsynced.
    TempWritten,
    /// The deadline check before the rename passed.
    DeadlineChecked,
    /// `current.json` was replaced (directory not yet fsynced).
    Renamed,
    /// The directory was fsynced.
    DirectorySynced,
    /// The conditional release was executed (the commit follows).
    Released,
}

impl PublishStep {
    /// Every step, in order.
    pub const ALL: [PublishStep; 8] = [
        PublishStep::TransactionOpen,
        PublishStep::Revalidated,
        PublishStep::Composed,
        PublishStep::TempWritten,
        PublishStep::DeadlineChecked,
        PublishStep::Renamed,
        PublishStep::DirectorySynced,
        PublishStep::Released,
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
