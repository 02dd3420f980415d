//! The contract between a machine and its executor: the effects a machine names, in three
//! families (store, files, clock), the typed [`Ask`] each carries, the [`Answer`] it makes,
//! and the [`ProtocolError`] that refuses an answer the machine did not ask for.

use crate::projection::channel::ChannelRecord;
use crate::projection::lease::{AcquirePlan, LeaseRecord, ReleasePlan};
use crate::projection::publication::PublishStep;
pub use crate::protocol::ProtocolError;
use crate::time::Millis;

/// What a machine asked, answered by a `T`. Only a machine makes one; an executor turns it
/// into the machine's [`Answer`] with [`Ask::answer`], so the answer's type is the question's.
pub struct Ask<T, E> {
    effect: &'static str,
    /// The serial of the step that asked ([`Serial`]): its answer is taken by that step only.
    step: u64,
    wrap: fn(T) -> Input<E>,
}

/// An [`Ask`] answered by the effect's value or the executor's error `E`.
pub type Reply<T, E> = Ask<Result<T, E>, E>;

impl<T, E> Ask<T, E> {
    fn new(effect: &'static str, wrap: fn(T) -> Input<E>) -> Self {
        Ask {
            effect,
            step: 0,
            wrap,
        }
    }

    /// The answer `value`, for the machine that asked (and the step of it that asked).
    pub fn answer(self, value: T) -> Answer<E> {
        Answer {
            effect: self.effect,
            step: self.step,
            input: (self.wrap)(value),
        }
    }
}

impl<T, E> Reply<T, E> {
    /// The effect failed with `error`.
    pub fn fail(self, error: E) -> Answer<E> {
        self.answer(Err(error))
    }
}

impl<T, E> std::fmt::Debug for Ask<T, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Ask({} #{})", self.effect, self.step)
    }
}

/// The answer to one effect, made by its [`Ask`].
#[derive(Debug)]
pub struct Answer<E> {
    effect: &'static str,
    step: u64,
    input: Input<E>,
}

impl<E> Answer<E> {
    /// The name of the effect it answers.
    pub fn effect(&self) -> &'static str {
        self.effect
    }

    /// Whether it says the effect failed.
    pub fn failed(&self) -> bool {
        matches!(self.input, Input::Failed(_))
    }

    /// The answer, taken apart (the name is kept for a [`ProtocolError`]).
    pub(crate) fn into_parts(self) -> (&'static str, Input<E>) {
        (self.effect, self.input)
    }
}

/// The answer as the machines read it (made only by an [`Ask`]).
#[derive(Debug)]
pub(crate) enum Input<E> {
    Done,
    Lease(Option<LeaseRecord>),
    Clock(Millis),
    Current(Option<Vec<u8>>),
    Channels(Vec<ChannelRecord>),
    /// The target directory chain exists; whether every directory of it is already known
    /// durable.
    Dir(bool),
    /// A conditional write ran; whether it changed a row.
    Written(bool),
    Failed(E),
}

fn failed<T, E>(result: Result<T, E>, ok: fn(T) -> Input<E>) -> Input<E> {
    match result {
        Ok(value) => ok(value),
        Err(e) => Input::Failed(e),
    }
}

fn done<E>(result: Result<(), E>) -> Input<E> {
    failed(result, |()| Input::Done)
}

fn lease<E>(result: Result<Option<LeaseRecord>, E>) -> Input<E> {
    failed(result, Input::Lease)
}

fn written<E>(result: Result<bool, E>) -> Input<E> {
    failed(result, Input::Written)
}

/// An effect on the store: the serialized write transaction and the rows.
#[derive(Debug)]
pub enum StoreEffect<'m, E> {
    /// Read the target's lease row from the last committed state WITHOUT the write lock
    /// (SQLite: a plain read in WAL mode). `None`: no row.
    ReadCommittedLease(Reply<Option<LeaseRecord>, E>),
    /// Open the serialized write transaction (SQLite: `BEGIN IMMEDIATE`), waiting at most
    /// what is left of the busy timeout.
    Begin(Reply<(), E>),
    /// Read the target's lease row inside the transaction. `None`: no row.
    ReadLease(Reply<Option<LeaseRecord>, E>),
    /// Read the target's committed channel rows: inside the transaction, as it sees them;
    /// before it, the last committed state without the write lock.
    ReadChannels(Reply<Vec<ChannelRecord>, E>),
    /// Write the grant: set the row to the plan's epoch and grant WHERE its epoch is still
    /// `prior_epoch`. Answer whether a row changed.
    WriteGrant(&'m AcquirePlan, Reply<bool, E>),
    /// The conditional release: set `state = released` WHERE target, epoch AND token hash
    /// match and the row is held. Answer whether a row changed.
    WriteRelease(&'m ReleasePlan, Reply<bool, E>),
    /// Commit the transaction.
    Commit(Reply<(), E>),
    /// Roll the transaction back (also after a failed commit); the transaction ends either
    /// way, and a failure is the executor's to report.
    Rollback(Reply<(), E>),
}

/// An effect on the files: the target's kernel lock, its directory, the temp sibling, the
/// rename.
#[derive(Debug)]
pub enum FileEffect<'m, E> {
    /// Take the target's exclusive kernel lock, waiting at most the busy timeout (busy:
    /// nothing was touched).
    LockTarget(Reply<(), E>),
    /// Read the target's `current.json` inside the transaction (the target lock held, so no
    /// rename runs meanwhile). `None`: there is none.
    ReadCurrent(Reply<Option<Vec<u8>>, E>),
    /// Make sure the target's directory chain exists (mode 0700, no symlinks). Answer whether
    /// every directory of it is already known durable (its creation fsynced in its parent).
    PrepareDir(Reply<bool, E>),
    /// Fsync the parent of every directory of the chain that is not yet known durable, and
    /// remember those that now are.
    SyncParents(Reply<(), E>),
    /// Remove every temp sibling of `current.json` but none a transaction is about to rename
    /// (the machine asks only inside its transaction, after its own rename: a temp written
    /// inside another transaction is renamed there, so what is left are drafts of
    /// publications outside their transaction — crashed, frozen, superseded, or to be written
    /// again). A failure changes nothing: the next publication sweeps again.
    RemoveOrphans(Reply<(), E>),
    /// Create a unique temp sibling (`create_new`, 0600), write these bytes, fsync it. On
    /// failure the executor keeps the temp's name, if it has one, for
    /// [`FileEffect::RemoveTemp`].
    WriteTemp(&'m [u8], Reply<(), E>),
    /// Remove this publication's temp sibling, if it exists (a failure is ignored: the next
    /// publication removes orphans).
    RemoveTemp(Reply<(), E>),
    /// Atomically rename the temp sibling over `current.json`.
    Rename(Reply<(), E>),
    /// Fsync the target directory (makes the rename durable).
    SyncDir(Reply<(), E>),
    /// Release the target's kernel lock.
    UnlockTarget(Reply<(), E>),
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
    Clock(Ask<Millis, E>),
    /// A named point of the publication was reached (for probes: pause, crash, observe).
    Reached(PublishStep, Ask<(), E>),
}

impl<'m, E> Effect<'m, E> {
    pub(crate) fn read_committed_lease() -> Self {
        Effect::Store(StoreEffect::ReadCommittedLease(Ask::new(
            "read-committed-lease",
            lease,
        )))
    }
    pub(crate) fn begin() -> Self {
        Effect::Store(StoreEffect::Begin(Ask::new("begin", done)))
    }
    pub(crate) fn read_lease() -> Self {
        Effect::Store(StoreEffect::ReadLease(Ask::new("read-lease", lease)))
    }
    pub(crate) fn read_channels() -> Self {
        Effect::Store(StoreEffect::ReadChannels(Ask::new("read-channels", |r| {
            failed(r, Input::Channels)
        })))
    }
    pub(crate) fn write_grant(plan: &'m AcquirePlan) -> Self {
        Effect::Store(StoreEffect::WriteGrant(
            plan,
            Ask::new("write-grant", written),
        ))
    }
    pub(crate) fn write_release(plan: &'m ReleasePlan) -> Self {
        Effect::Store(StoreEffect::WriteRelease(
            plan,
            Ask::new("write-release", written),
        ))
    }
    pub(crate) fn commit() -> Self {
        Effect::Store(StoreEffect::Commit(Ask::new("commit", done)))
    }
    pub(crate) fn rollback() -> Self {
        Effect::Store(StoreEffect::Rollback(Ask::new("rollback", done)))
    }
    pub(crate) fn lock_target() -> Self {
        Effect::File(FileEffect::LockTarget(Ask::new("lock-target", done)))
    }
    pub(crate) fn read_current() -> Self {
        Effect::File(FileEffect::ReadCurrent(Ask::new("read-current", |r| {
            failed(r, Input::Current)
        })))
    }
    pub(crate) fn prepare_dir() -> Self {
        Effect::File(FileEffect::PrepareDir(Ask::new("prepare-dir", |r| {
            failed(r, Input::Dir)
        })))
    }
    pub(crate) fn sync_parents() -> Self {
        Effect::File(FileEffect::SyncParents(Ask::new("sync-parents", done)))
    }
    pub(crate) fn remove_orphans() -> Self {
        Effect::File(FileEffect::RemoveOrphans(Ask::new("remove-orphans", done)))
    }
    pub(crate) fn write_temp(bytes: &'m [u8]) -> Self {
        Effect::File(FileEffect::WriteTemp(bytes, Ask::new("write-temp", done)))
    }
    pub(crate) fn remove_temp() -> Self {
        Effect::File(FileEffect::RemoveTemp(Ask::new("remove-temp", done)))
    }
    pub(crate) fn rename() -> Self {
        Effect::File(FileEffect::Rename(Ask::new("rename", done)))
    }
    pub(crate) fn sync_dir() -> Self {
        Effect::File(FileEffect::SyncDir(Ask::new("sync-dir", done)))
    }
    pub(crate) fn unlock_target() -> Self {
        Effect::File(FileEffect::UnlockTarget(Ask::new("unlock-target", done)))
    }
    pub(crate) fn read_clock() -> Self {
        Effect::Clock(Ask::new("read-clock", Input::Clock))
    }
    pub(crate) fn reached(step: PublishStep) -> Self {
        Effect::Reached(step, Ask::new("reached", |()| Input::Done))
    }

    /// The effect, asked by the step of serial `step` (only that step takes its answer).
    pub(crate) fn stamped(mut self, step: u64) -> Self {
        match &mut self {
            Effect::Store(effect) => effect.stamp(step),
            Effect::File(effect) => effect.stamp(step),
            Effect::Clock(ask) => ask.step = step,
            Effect::Reached(_, ask) => ask.step = step,
        }
        self
    }

    /// The kebab-case name of the effect (for probes and reports).
    pub fn name(&self) -> &'static str {
        match self {
            Effect::Store(effect) => effect.name(),
            Effect::File(effect) => effect.name(),
            Effect::Clock(ask) => ask.effect,
            Effect::Reached(_, ask) => ask.effect,
        }
    }

    /// The effect failed with `error` — for an executor that stops before carrying it out
    /// (a crash in a model, a scripted failure); the clock and a reached point cannot fail
    /// (`None`).
    pub fn fail(self, error: E) -> Option<Answer<E>> {
        match self {
            Effect::Store(effect) => Some(effect.fail(error)),
            Effect::File(effect) => Some(effect.fail(error)),
            Effect::Clock(_) | Effect::Reached(..) => None,
        }
    }
}

impl<E> StoreEffect<'_, E> {
    fn stamp(&mut self, step: u64) {
        match self {
            StoreEffect::ReadCommittedLease(a) | StoreEffect::ReadLease(a) => a.step = step,
            StoreEffect::Begin(a) | StoreEffect::Commit(a) | StoreEffect::Rollback(a) => {
                a.step = step
            }
            StoreEffect::ReadChannels(a) => a.step = step,
            StoreEffect::WriteGrant(_, a) | StoreEffect::WriteRelease(_, a) => a.step = step,
        }
    }

    /// The kebab-case name of the effect.
    pub fn name(&self) -> &'static str {
        match self {
            StoreEffect::ReadCommittedLease(a) | StoreEffect::ReadLease(a) => a.effect,
            StoreEffect::Begin(a) | StoreEffect::Commit(a) | StoreEffect::Rollback(a) => a.effect,
            StoreEffect::ReadChannels(a) => a.effect,
            StoreEffect::WriteGrant(_, a) | StoreEffect::WriteRelease(_, a) => a.effect,
        }
    }

    /// The effect failed with `error`.
    pub fn fail(self, error: E) -> Answer<E> {
        match self {
            StoreEffect::ReadCommittedLease(a) | StoreEffect::ReadLease(a) => a.fail(error),
            StoreEffect::Begin(a) | StoreEffect::Commit(a) | StoreEffect::Rollback(a) => {
                a.fail(error)
            }
            StoreEffect::ReadChannels(a) => a.fail(error),
            StoreEffect::WriteGrant(_, a) | StoreEffect::WriteRelease(_, a) => a.fail(error),
        }
    }
}

impl<E> FileEffect<'_, E> {
    fn stamp(&mut self, step: u64) {
        match self {
            FileEffect::ReadCurrent(a) => a.step = step,
            FileEffect::PrepareDir(a) => a.step = step,
            FileEffect::WriteTemp(_, a) => a.step = step,
            FileEffect::LockTarget(a)
            | FileEffect::SyncParents(a)
            | FileEffect::RemoveOrphans(a)
            | FileEffect::RemoveTemp(a)
            | FileEffect::Rename(a)
            | FileEffect::SyncDir(a)
            | FileEffect::UnlockTarget(a) => a.step = step,
        }
    }

    /// The kebab-case name of the effect.
    pub fn name(&self) -> &'static str {
        match self {
            FileEffect::ReadCurrent(a) => a.effect,
            FileEffect::PrepareDir(a) => a.effect,
            FileEffect::WriteTemp(_, a) => a.effect,
            FileEffect::LockTarget(a)
            | FileEffect::SyncParents(a)
            | FileEffect::RemoveOrphans(a)
            | FileEffect::RemoveTemp(a)
            | FileEffect::Rename(a)
            | FileEffect::SyncDir(a)
            | FileEffect::UnlockTarget(a) => a.effect,
        }
    }

    /// The effect failed with `error`.
    pub fn fail(self, error: E) -> Answer<E> {
        match self {
            FileEffect::ReadCurrent(a) => a.fail(error),
            FileEffect::PrepareDir(a) => a.fail(error),
            FileEffect::WriteTemp(_, a) => a.fail(error),
            FileEffect::LockTarget(a)
            | FileEffect::SyncParents(a)
            | FileEffect::RemoveOrphans(a)
            | FileEffect::RemoveTemp(a)
            | FileEffect::Rename(a)
            | FileEffect::SyncDir(a)
            | FileEffect::UnlockTarget(a) => a.fail(error),
        }
    }

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

/// The serial number of a machine run's steps. Every effect a machine polls is stamped with
/// the serial of the step that asks it, and the machine takes an answer only if it carries
/// that serial: an answer kept from an earlier poll is refused ([`ProtocolError::KeptAnswer`])
/// even when it answers an effect of the same name (a `read-clock` of the acquisition's
/// prelude handed to the grant's `read-clock`). The serial moves on with every answer taken.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Serial(u64);

impl Serial {
    /// `effect`, stamped with this step's serial.
    pub(crate) fn stamp<'m, E>(self, effect: Option<Effect<'m, E>>) -> Option<Effect<'m, E>> {
        effect.map(|effect| effect.stamped(self.0))
    }

    /// Refuses an answer made for another step than this one.
    pub(crate) fn check<E>(
        self,
        machine: &'static str,
        answer: &Answer<E>,
    ) -> Result<(), ProtocolError> {
        if answer.step == self.0 {
            Ok(())
        } else {
            Err(ProtocolError::KeptAnswer {
                machine,
                answered: answer.effect,
                asked: answer.step,
                current: self.0,
            })
        }
    }

    /// The serial of the next step.
    pub(crate) fn advanced(&mut self) {
        self.0 += 1;
    }

    /// `handle` of the step this serial names, then the serial of the next step (unchanged
    /// when the answer was refused: the machine is unchanged too).
    pub(crate) fn take<E>(
        &mut self,
        machine: &'static str,
        answer: Answer<E>,
        handle: impl FnOnce(Answer<E>) -> Result<(), ProtocolError>,
    ) -> Result<(), ProtocolError> {
        self.check(machine, &answer)?;
        handle(answer)?;
        self.advanced();
        Ok(())
    }
}
