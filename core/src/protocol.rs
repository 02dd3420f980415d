//! The error every sans-IO machine of the core reports instead of panicking when its executor
//! breaks the contract: an answer to an effect it did not name, a result asked before the end.
//! Nothing changed when it is reported; it is always a bug in this library.

/// An executor bug, reported instead of a panic: nothing changed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    /// An answer was handed to a machine that did not ask for it (an answer kept from an
    /// earlier effect); the machine is unchanged.
    #[error("executor bug: the {machine} machine was handed an answer to `{answered}` it did not ask for; nothing changed")]
    WrongAnswer {
        /// The machine (and its stage).
        machine: &'static str,
        /// The effect the answer was made for (for the project lock's machines: the kind of
        /// result).
        answered: &'static str,
    },
    /// An answer made for an earlier step of the machine (kept from an earlier poll) was
    /// handed to a later one, even if both asked an effect of the same name; the machine is
    /// unchanged.
    #[error("executor bug: the {machine} machine was handed an answer to `{answered}` made for its step {asked}, while it is at step {current}; nothing changed")]
    KeptAnswer {
        /// The machine.
        machine: &'static str,
        /// The effect the answer was made for.
        answered: &'static str,
        /// The serial of the step that asked it.
        asked: u64,
        /// The serial of the machine's current step.
        current: u64,
    },
    /// A machine's result was asked before it ended.
    #[error("executor bug: the {machine} machine's result was asked before it ended")]
    Unfinished {
        /// The machine.
        machine: &'static str,
    },
    /// A machine ended in a way the run that drove it cannot end (an attempt to acquire the
    /// project lock that ended `cleared`, a clear that ended `acquired`): nothing more was done.
    #[error(
        "bug: the {machine} machine ended `{end}`, which its run cannot; nothing more was done"
    )]
    ImpossibleEnd {
        /// The machine.
        machine: &'static str,
        /// How it ended.
        end: &'static str,
    },
}

impl ProtocolError {
    /// An answer to `answered` handed to `machine`, which did not ask for it.
    pub(crate) fn wrong(machine: &'static str, answered: &'static str) -> Self {
        ProtocolError::WrongAnswer { machine, answered }
    }
}
