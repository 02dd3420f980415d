//! The lease machines' protocol: the effects they name, in three families (store, files,
//! clock), each declared once, and the input the machines read from an answer. The contract
//! itself (asks, answers, step serials, the machine trait and its one `run`) is
//! [`crate::contract`].

use crate::contract::{effects, Answer, Ask, Protocol, Stamped};
use crate::projection::channel::ChannelRecord;
use crate::projection::lease::{AcquirePlan, LeaseRecord, ReleasePlan};
use crate::projection::publication::PublishStep;
use crate::time::Millis;

/// The protocol of the lease machines (acquisition, publication, one-shot publication,
/// release), whose executors fail with `E`.
#[derive(Debug)]
pub struct LeaseProtocol<E>(std::marker::PhantomData<E>);

impl<E> Protocol for LeaseProtocol<E> {
    type Effect<'m> = Effect<'m, E>;
    type Input = LeaseInput<E>;
}

/// The answer as the lease machines read it. An executor never builds one: an [`Answer`] is
/// made only by the [`Ask`] of the effect it answers.
#[derive(Debug)]
pub enum LeaseInput<E> {
    /// The effect was carried out; it answers nothing more.
    Done,
    /// A lease row (`None`: no row).
    Lease(Option<LeaseRecord>),
    /// The broker clock.
    Clock(Millis),
    /// The bytes of `current.json` (`None`: there is none).
    Current(Option<Vec<u8>>),
    /// The target's channel rows.
    Channels(Vec<ChannelRecord>),
    /// The target directory chain exists; whether every directory of it is already known
    /// durable.
    Dir(bool),
    /// A conditional write ran; whether it changed a row.
    Written(bool),
    /// The effect failed.
    Failed(E),
}

fn done<E>((): ()) -> LeaseInput<E> {
    LeaseInput::Done
}

effects! {
    /// An effect on the store: the serialized write transaction and the rows.
    pub enum StoreEffect<'m, E> reads LeaseInput {
        /// Read the target's lease row from the last committed state WITHOUT the write lock
        /// (SQLite: a plain read in WAL mode). `None`: no row.
        ReadCommittedLease() -> Option<LeaseRecord>
            = "read-committed-lease", LeaseInput::Lease, read_committed_lease;
        /// Open the serialized write transaction (SQLite: `BEGIN IMMEDIATE`), waiting at most
        /// what is left of the busy timeout.
        Begin() -> () = "begin", done, begin;
        /// Read the target's lease row inside the transaction. `None`: no row.
        ReadLease() -> Option<LeaseRecord> = "read-lease", LeaseInput::Lease, read_lease;
        /// Read the target's committed channel rows: inside the transaction, as it sees them;
        /// before it, the last committed state without the write lock.
        ReadChannels() -> Vec<ChannelRecord>
            = "read-channels", LeaseInput::Channels, read_channels;
        /// Write the grant: set the row to the plan's epoch and grant WHERE its epoch is still
        /// `prior_epoch`. Answer whether a row changed.
        WriteGrant(plan: &'m AcquirePlan) -> bool
            = "write-grant", LeaseInput::Written, write_grant;
        /// The conditional release: set `state = released` WHERE target, epoch AND token hash
        /// match and the row is held. Answer whether a row changed.
        WriteRelease(plan: &'m ReleasePlan) -> bool
            = "write-release", LeaseInput::Written, write_release;
        /// Open a savepoint inside the transaction, for one target of a batch (SQLite:
        /// `SAVEPOINT`). Fails, touching nothing, if the transaction is no longer open (the
        /// store rolled it back under an earlier failure).
        Savepoint() -> () = "savepoint", done, savepoint;
        /// Keep what the target wrote since its savepoint (SQLite: `RELEASE`); it commits or
        /// rolls back with the transaction.
        ReleaseSavepoint() -> () = "release-savepoint", done, release_savepoint;
        /// Undo what the target wrote since its savepoint and close it (SQLite: `ROLLBACK TO`,
        /// then `RELEASE`).
        RollbackToSavepoint() -> () = "rollback-to-savepoint", done, rollback_to_savepoint;
        /// Commit the transaction.
        Commit() -> () = "commit", done, commit;
        /// Roll the transaction back (also after a failed commit); the transaction ends either
        /// way, and a failure is the executor's to report.
        Rollback() -> () = "rollback", done, rollback;
    }
}

effects! {
    /// An effect on the files: the target's kernel lock, its directory, the temp sibling, the
    /// rename.
    pub enum FileEffect<'m, E> reads LeaseInput {
        /// Take the target's exclusive kernel lock, waiting at most the busy timeout (busy:
        /// nothing was touched).
        LockTarget() -> () = "lock-target", done, lock_target;
        /// Read the target's `current.json` inside the transaction (the target lock held, so no
        /// rename runs meanwhile). `None`: there is none.
        ReadCurrent() -> Option<Vec<u8>> = "read-current", LeaseInput::Current, read_current;
        /// Make sure the target's directory chain exists (mode 0700, no symlinks). Answer
        /// whether every directory of it is already known durable (its creation fsynced in its
        /// parent).
        PrepareDir() -> bool = "prepare-dir", LeaseInput::Dir, prepare_dir;
        /// Fsync the parent of every directory of the chain that is not yet known durable, and
        /// remember those that now are.
        SyncParents() -> () = "sync-parents", done, sync_parents;
        /// Remove every temp sibling of `current.json` but none a transaction is about to
        /// rename (the machine asks only inside its transaction, after its own rename: a temp
        /// written inside another transaction is renamed there, so what is left are drafts of
        /// publications outside their transaction — crashed, frozen, superseded, or to be
        /// written again). A failure changes nothing: the next publication sweeps again.
        RemoveOrphans() -> () = "remove-orphans", done, remove_orphans;
        /// Create a unique temp sibling (`create_new`, 0600), write these bytes, fsync it. On
        /// failure the executor keeps the temp's name, if it has one, for
        /// [`FileEffect::RemoveTemp`].
        WriteTemp(bytes: &'m [u8]) -> () = "write-temp", done, write_temp;
        /// Remove this publication's temp sibling, if it exists (a failure is ignored: the next
        /// publication removes orphans).
        RemoveTemp() -> () = "remove-temp", done, remove_temp;
        /// Atomically rename the temp sibling over `current.json`.
        Rename() -> () = "rename", done, rename;
        /// Fsync the target directory (makes the rename durable).
        SyncDir() -> () = "sync-dir", done, sync_dir;
        /// Release the target's kernel lock.
        UnlockTarget() -> () = "unlock-target", done, unlock_target;
    }
}

/// The next effect a machine needs. Borrowed data (a plan, the document) lives in the
/// machine; the executor uses it before it hands the answer back.
#[derive(Debug)]
pub enum Effect<'m, E> {
    /// An effect on the store.
    Store(StoreEffect<'m, E>),
    /// An effect on the files.
    File(FileEffect<'m, E>),
    /// Read the broker clock.
    Clock(Ask<Millis, LeaseInput<E>>),
    /// A named point of the publication was reached (for probes: pause, crash, observe).
    Reached(PublishStep, Ask<(), LeaseInput<E>>),
}

impl<'m, E> Effect<'m, E> {
    pub(crate) fn read_clock() -> Self {
        Effect::Clock(Ask::new("read-clock", LeaseInput::Clock))
    }

    pub(crate) fn reached(step: PublishStep) -> Self {
        Effect::Reached(step, Ask::new("reached", done))
    }

    /// The effect failed with `error` — for an executor that stops before carrying it out
    /// (a crash in a model, a scripted failure); the clock and a reached point cannot fail
    /// (`None`).
    pub fn fail(self, error: E) -> Option<Answer<LeaseInput<E>>> {
        match self {
            Effect::Store(effect) => Some(effect.fail(error)),
            Effect::File(effect) => Some(effect.fail(error)),
            Effect::Clock(_) | Effect::Reached(..) => None,
        }
    }

    /// The kebab-case name of the effect (for probes and reports).
    pub fn name(&self) -> &'static str {
        match self {
            Effect::Store(effect) => effect.name(),
            Effect::File(effect) => effect.name(),
            Effect::Clock(ask) => ask.name(),
            Effect::Reached(_, ask) => ask.name(),
        }
    }
}

/// The protocol of a batch of one-shot publications ([`super::publish_many`]): the lease's
/// effects, each naming the target it is for.
#[derive(Debug)]
pub struct BatchProtocol<E>(std::marker::PhantomData<E>);

impl<E> Protocol for BatchProtocol<E> {
    type Effect<'m> = Targeted<'m, E>;
    type Input = LeaseInput<E>;
}

/// An effect of a batch and the target it is for.
#[derive(Debug)]
pub struct Targeted<'m, E> {
    /// The target's place in the batch (its targets sorted by id); `None` for the shared
    /// transaction's own effects (begin, commit, rollback).
    pub target: Option<usize>,
    /// The effect, exactly as a one-target machine names it.
    pub effect: Effect<'m, E>,
}

impl<E> Stamped for Targeted<'_, E> {
    fn stamped(self, step: u64) -> Self {
        Targeted {
            target: self.target,
            effect: self.effect.stamped(step),
        }
    }
}

impl<'m, E> From<StoreEffect<'m, E>> for Effect<'m, E> {
    fn from(effect: StoreEffect<'m, E>) -> Self {
        Effect::Store(effect)
    }
}

impl<'m, E> From<FileEffect<'m, E>> for Effect<'m, E> {
    fn from(effect: FileEffect<'m, E>) -> Self {
        Effect::File(effect)
    }
}

impl<E> Stamped for Effect<'_, E> {
    fn stamped(self, step: u64) -> Self {
        match self {
            Effect::Store(effect) => Effect::Store(effect.stamped(step)),
            Effect::File(effect) => Effect::File(effect.stamped(step)),
            Effect::Clock(ask) => Effect::Clock(ask.stamped(step)),
            Effect::Reached(at, ask) => Effect::Reached(at, ask.stamped(step)),
        }
    }
}

impl<E> Answer<LeaseInput<E>> {
    /// Whether it says the effect failed.
    pub fn failed(&self) -> bool {
        matches!(self.input(), LeaseInput::Failed(_))
    }
}

impl<E> FileEffect<'_, E> {
    /// Whether it is slow work on the files outside any lock (the directory chain and its
    /// fsyncs, the temp file, the directory fsync): what an asynchronous executor moves off
    /// its event loop when no transaction is open.
    pub fn is_slow(&self) -> bool {
        matches!(
            self,
            FileEffect::PrepareDir(_)
                | FileEffect::SyncParents(_)
                | FileEffect::WriteTemp(..)
                | FileEffect::RemoveTemp(_)
                | FileEffect::SyncDir(_)
        )
    }
}
