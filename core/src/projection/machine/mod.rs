//! The lease's multi-step sequences as sans-IO step machines: acquisition, publication and
//! release.
//!
//! A machine never performs an effect. It names the next one ([`Machine::poll`] returns an
//! [`Effect`]: take the target lock, begin the serialized transaction, read the lease row,
//! read the clock, write and sync the temp file, rename, conditional release, commit, ...) and
//! consumes its result ([`Machine::handle`] takes an [`Input`]). Every decision between two
//! effects is made here, by the core's pure functions (`observe`, `decide_acquire`,
//! `authorize_publish`, `check_deadline`, `decide_release`, `compose`).
//!
//! Two executors run these machines: the SQLite adapter (`solewriter-adapters`) against the
//! store and the file system, and the reference model (`solewriter-models`) against its
//! model store and model file system under loom and shuttle. So the sequence the model
//! checkers explore is the sequence that runs: it exists once, here.
//!
//! Lock discipline, the same in every machine: the body's part before the transaction (no
//! lock) → [`Effect::LockTarget`] (the target's kernel lock) → [`Effect::Begin`] (the store's
//! write lock) → body → [`Effect::Commit`] or [`Effect::Rollback`] → [`Effect::UnlockTarget`]
//! → the body's part after the transaction (no lock). Both locks are held for the whole
//! transaction's body and neither outside it (only a publication has work outside: its draft
//! and temp file before, its directory fsync after), so a holder frozen anywhere outside its
//! transaction holds no exclusion past its lease; [`serialized`] is the one place that orders
//! them.
//!
//! - [`acquire`]: the grant (a `Held` answer from the committed snapshot needs no lock).
//! - [`release`]: the conditional release, alone or as the end of a publication, and an
//!   operator's end of the current grant (the same write, decided without a credential).
//! - [`publish`]: the fenced publication of `current.json`.
//! - [`publish_now`]: grant, publish and release in one envelope (one commit).

pub mod acquire;
pub mod publish;
pub mod publish_now;
pub mod release;
mod serialized;
#[cfg(test)]
mod tests;

use crate::projection::channel::ChannelRecord;
use crate::projection::lease::{AcquirePlan, LeaseRecord, ReleasePlan};
use crate::projection::publication::PublishStep;
use crate::time::Millis;

/// The next effect a machine needs. Borrowed data (a plan, the document) lives in the
/// machine; the executor uses it before it hands the result back.
#[derive(Debug)]
pub enum Effect<'m> {
    /// Read the target's lease row from the last committed state WITHOUT the write lock
    /// (SQLite: a plain read in WAL mode). Answer [`Input::Lease`].
    ReadCommittedLease,
    /// Take the target's exclusive kernel lock, waiting at most the busy timeout. Answer
    /// [`Input::Done`] or [`Input::Failed`] (busy: nothing was touched).
    LockTarget,
    /// Open the serialized write transaction (SQLite: `BEGIN IMMEDIATE`). Answer
    /// [`Input::Done`] or [`Input::Failed`].
    Begin,
    /// Read the target's lease row inside the transaction. Answer [`Input::Lease`].
    ReadLease,
    /// Read the target's `current.json` inside the transaction (the target lock held, so no
    /// rename runs meanwhile). Answer [`Input::Current`] (`None`: there is none).
    ReadCurrent,
    /// Read the broker clock. Answer [`Input::Clock`].
    ReadClock,
    /// Read the target's committed channel rows: inside the transaction, as it sees them;
    /// before it, the last committed state without the write lock (SQLite: a plain read in
    /// WAL mode). Answer [`Input::Channels`].
    ReadChannels,
    /// Write the grant: set the row to the plan's epoch and grant WHERE its epoch is still
    /// `prior_epoch`. Answer [`Input::Written`] (whether a row changed).
    WriteGrant(&'m AcquirePlan),
    /// The conditional release: set `state = released` WHERE target, epoch AND token hash
    /// match and the row is held. Answer [`Input::Written`].
    WriteRelease(&'m ReleasePlan),
    /// Make sure the target's directory chain exists (mode 0700, no symlinks). Answer
    /// [`Input::Dir`].
    PrepareDir,
    /// Fsync the parent of every directory of the chain that is not yet known durable, and
    /// remember those that now are. Answer [`Input::Done`].
    SyncParents,
    /// Remove every temp sibling of `current.json` but none a transaction is about to rename
    /// (the machine asks only inside its transaction, after its own rename: a temp written
    /// inside another transaction is renamed there, so what is left are drafts of publications
    /// outside their transaction — crashed, frozen, superseded, or to be written again).
    /// Answer [`Input::Done`] (a failure changes nothing: the next publication sweeps again).
    RemoveOrphans,
    /// Create a unique temp sibling (`create_new`, 0600), write these bytes, fsync it.
    /// Answer [`Input::Done`]; on failure the executor keeps the temp's name, if it has one,
    /// for [`Effect::RemoveTemp`].
    WriteTemp(&'m [u8]),
    /// Remove this publication's temp sibling, if it exists. Answer [`Input::Done`] (a
    /// failure is ignored: the next publication removes orphans).
    RemoveTemp,
    /// Atomically rename the temp sibling over `current.json`. Answer [`Input::Done`].
    Rename,
    /// Fsync the target directory (makes the rename durable). Answer [`Input::Done`].
    SyncDir,
    /// A named point of the publication was reached (for probes: pause, crash, observe).
    /// Answer [`Input::Done`].
    Reached(PublishStep),
    /// Commit the transaction. Answer [`Input::Done`] or [`Input::Failed`].
    Commit,
    /// Roll the transaction back (also after a failed commit). Answer [`Input::Done`].
    Rollback,
    /// Release the target's kernel lock. Answer [`Input::Done`].
    UnlockTarget,
    /// The machine has ended; take its result.
    Finished,
}

impl Effect<'_> {
    /// The kebab-case name of the effect (for probes and reports).
    pub fn name(&self) -> &'static str {
        match self {
            Effect::ReadCommittedLease => "read-committed-lease",
            Effect::LockTarget => "lock-target",
            Effect::Begin => "begin",
            Effect::ReadLease => "read-lease",
            Effect::ReadCurrent => "read-current",
            Effect::ReadClock => "read-clock",
            Effect::ReadChannels => "read-channels",
            Effect::WriteGrant(_) => "write-grant",
            Effect::WriteRelease(_) => "write-release",
            Effect::PrepareDir => "prepare-dir",
            Effect::SyncParents => "sync-parents",
            Effect::RemoveOrphans => "remove-orphans",
            Effect::WriteTemp(_) => "write-temp",
            Effect::RemoveTemp => "remove-temp",
            Effect::Rename => "rename",
            Effect::SyncDir => "sync-dir",
            Effect::Reached(_) => "reached",
            Effect::Commit => "commit",
            Effect::Rollback => "rollback",
            Effect::UnlockTarget => "unlock-target",
            Effect::Finished => "finished",
        }
    }
}

/// The result of an effect, handed back to the machine. `E` is the executor's error type:
/// the machine carries it to its result without looking inside.
#[derive(Debug)]
pub enum Input<E> {
    /// The effect succeeded and has nothing to report.
    Done,
    /// The lease row (`None`: the target is not admitted).
    Lease(Option<LeaseRecord>),
    /// The broker clock.
    Clock(Millis),
    /// The bytes of the target's `current.json` (`None`: no such file).
    Current(Option<Vec<u8>>),
    /// The committed channel rows of the target.
    Channels(Vec<ChannelRecord>),
    /// The target directory chain exists; `verified` says whether every directory of it is
    /// already known to be durable (its creation fsynced in its parent).
    Dir {
        /// Every directory of the chain is known durable.
        verified: bool,
    },
    /// A conditional write ran; whether it changed a row.
    Written(bool),
    /// The effect failed.
    Failed(E),
}

/// A step machine: poll the next effect, execute it, hand back its input.
pub trait Machine<E> {
    /// The next effect ([`Effect::Finished`] once the machine has ended).
    fn poll(&self) -> Effect<'_>;
    /// Consumes the result of the effect last polled.
    ///
    /// # Panics
    /// On an input that does not answer the polled effect — a bug in the executor, never
    /// an outside input.
    fn handle(&mut self, input: Input<E>);
}

/// Runs `machine` until it has ended, executing each effect with `execute` — or until
/// `execute` answers `None` (the executor stopped: a crash in a model). Returns whether the
/// machine ended. The whole executor of a machine is this loop plus one `match` on [`Effect`].
pub fn drive<E, M: Machine<E>>(
    machine: &mut M,
    mut execute: impl FnMut(Effect<'_>) -> Option<Input<E>>,
) -> bool {
    loop {
        let effect = machine.poll();
        if matches!(effect, Effect::Finished) {
            return true;
        }
        match execute(effect) {
            Some(input) => machine.handle(input),
            None => return false,
        }
    }
}

/// Panics on an input that does not answer the effect: an executor bug.
#[track_caller]
fn protocol_violation<E>(effect: &str, input: &Input<E>) -> ! {
    let got = match input {
        Input::Done => "Done",
        Input::Lease(_) => "Lease",
        Input::Clock(_) => "Clock",
        Input::Current(_) => "Current",
        Input::Channels(_) => "Channels",
        Input::Dir { .. } => "Dir",
        Input::Written(_) => "Written",
        Input::Failed(_) => "Failed",
    };
    panic!("executor bug: effect `{effect}` answered with {got}")
}
