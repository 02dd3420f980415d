//! One acquisition attempt (recovery included) and the release of the project lock, as sans-IO
//! step machines. The executor (`project_lock/src/`) executes them against the file
//! system, the kernel lock and `/proc`; the model (`models/src/project_lock.rs`) executes the
//! same machines under shuttle, with processes crashing at every step. The rule they implement
//! is the adapter's module documentation ("The rule", "Race-free recovery"); every decision in
//! it is made here.
//!
//! The machines speak the one contract of [`crate::contract`], in the project lock's protocol
//! ([`LockProtocol`]): a machine names the next [`LockEffect`] ([`Machine::poll`]), whose typed
//! ask makes the answer ([`Machine::handle`]; an answer to another effect or an earlier step is
//! refused with a [`ProtocolError`], never a panic). Waiting between attempts (the caller's
//! bound, the backoff), sweeping stale temp files and the kernel lock's release stay with the
//! executor: they decide nothing about who holds the lock.

use crate::contract::{effects, Answer, Machine, Protocol, ProtocolError, Serial};
use crate::project_lock::ownership::{
    classify, judge_unobserved, Guard, LockNonce, LockRecord, OwnerIdentity, Ownership,
    ProbeReport, UnknownReason,
};
use crate::time::Millis;

/// The protocol of the project lock's machines (attempt, clear, release), whose executors fail
/// with `E`.
#[derive(Debug)]
pub struct LockProtocol<E>(std::marker::PhantomData<E>);

impl<E> Protocol for LockProtocol<E> {
    type Effect<'m> = LockEffect<E>;
    type Input = LockInput<E>;
}

/// File name of the lock record inside the project directory.
pub const LOCK_FILE: &str = "project.lock";
/// How many levels of crashed recoverers are recovered before giving up loudly.
pub const MAX_RECOVERY_DEPTH: usize = 3;
/// How many times one attempt creates the lock again after clearing it; past that the attempt
/// ends busy, and the executor waits (with its backoff) before the next one — so a lock that
/// keeps reappearing (another record-only process) cannot spin an attempt forever.
pub const MAX_CREATE_RETRIES: usize = 8;

/// A lock file: the lock itself, or a recovery claim on a record's nonce, one level deeper per
/// claim (`project.lock.recover-<N>.recover-<M>`; each level names the first 128 bits of the
/// nonce it claims, in hex).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Slot {
    name: String,
    depth: usize,
}

impl Slot {
    /// The lock itself.
    pub fn lock() -> Self {
        Slot {
            name: LOCK_FILE.to_owned(),
            depth: 0,
        }
    }

    /// The claim on removing the record carrying `nonce` at this slot.
    pub fn claim(&self, nonce: &LockNonce) -> Self {
        Slot {
            name: format!("{}.recover-{}", self.name, &nonce.to_hex()[..32]),
            depth: self.depth + 1,
        }
    }

    /// The slot of a file name in the project directory, if it is the lock or a claim (a
    /// claim's temp, `.project.lock.recover-….tmp-…`, is not).
    pub fn of_name(name: &str) -> Option<Self> {
        let rest = name.strip_prefix(LOCK_FILE)?;
        let claims = rest.split(".recover-").skip(1);
        let well_formed = rest.is_empty()
            || (rest.starts_with(".recover-")
                && claims
                    .clone()
                    .all(|hex| hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_hexdigit())));
        well_formed.then(|| Slot {
            name: name.to_owned(),
            depth: claims.count(),
        })
    }

    /// Its file name in the project directory.
    pub fn file_name(&self) -> &str {
        &self.name
    }

    /// How many claim levels deep it is (0: the lock itself).
    pub fn depth(&self) -> usize {
        self.depth
    }
}

/// What the kernel lock attempt found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelSeen {
    /// Taken by this attempt (held until the executor lets it go).
    Taken,
    /// Held by another open file description: busy, nothing written.
    Busy,
    /// Record-only mode: no kernel lock is used.
    NotUsed,
}

effects! {
    /// The next effect a lock machine needs.
    #[cfg_attr(test, derive(PartialEq))]
    pub enum LockEffect<E> reads LockInput {
        /// Try the kernel lock without blocking, before anything is written.
        TryKernel() -> KernelSeen = "try-kernel", LockInput::Kernel, try_kernel;
        /// Read the record at this slot (`None`: no such file).
        Read(slot: Slot) -> Option<LockRecord> = "read", LockInput::Record, read;
        /// A fresh nonce (256 random bits) and the wall clock (diagnostic only), for a new
        /// record.
        Fresh() -> (LockNonce, Millis)
            = "fresh", |(nonce, now)| LockInput::Fresh { nonce, now }, fresh;
        /// Create the slot holding this record, complete or not at all (a temp file written and
        /// fsynced, then linked to the slot's name, which fails if the name exists). Answer
        /// whether it was created (`false`: the name exists; nothing was written there).
        Create(slot: Slot, record: LockRecord) -> bool = "create", LockInput::Created, create;
        /// Observe the process with this pid (for [`classify`]).
        Observe(pid: u32) -> ProbeReport = "observe", LockInput::Observed, observe;
        /// Unlink the slot (its record carried the expected nonce when last read). Answer
        /// whether it was removed (`false`: it was already gone).
        Unlink(slot: Slot) -> bool = "unlink", LockInput::Unlinked, unlink;
    }
}

/// The answer to a [`LockEffect`] as the lock machines read it (made only by the effect's ask).
#[derive(Debug)]
pub enum LockInput<E> {
    /// Answer to [`LockEffect::try_kernel`].
    Kernel(KernelSeen),
    /// Answer to [`LockEffect::read`].
    Record(Option<LockRecord>),
    /// Answer to [`LockEffect::fresh`].
    Fresh {
        /// 256 random bits.
        nonce: LockNonce,
        /// The wall clock (diagnostic only).
        now: Millis,
    },
    /// Answer to [`LockEffect::create`].
    Created(bool),
    /// Answer to [`LockEffect::observe`].
    Observed(ProbeReport),
    /// Answer to [`LockEffect::unlink`].
    Unlinked(bool),
    /// The effect failed.
    Failed(E),
}

/// How an acquisition attempt ended.
#[derive(Debug)]
pub enum AttemptEnd<E> {
    /// The lock is taken: this record is at [`Slot::lock`] (and the kernel lock is held, unless
    /// in record-only mode).
    Acquired(LockRecord),
    /// Another holder holds the lock (or a live recoverer a claim on it): this slot, naming its
    /// recorded owner if there is a record. If the attempt took the kernel lock, the executor
    /// lets it go.
    Busy(Slot, Option<OwnerIdentity>),
    /// The owner of this slot's record cannot be classified from here: nothing was removed.
    Unknown(Slot, OwnerIdentity, UnknownReason),
    /// Recoverers kept dying: the claim at this slot is [`MAX_RECOVERY_DEPTH`] levels deep.
    Abandoned(Slot),
    /// A clear-only run ([`Attempt::clear`], [`Attempt::recover`]) found its slot gone, or
    /// removed it.
    Cleared,
    /// An effect failed; no other owner's record was removed after it.
    Failed(E),
}

/// What a release found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReleaseEnd {
    /// The lock carried this acquisition's nonce and was removed.
    Removed,
    /// It did not (recovered from this owner, or gone): nothing was removed. Holds what was
    /// found there.
    NotHolder(Option<LockRecord>),
}

/// One level of the recovery in progress.
#[derive(Debug)]
enum Frame {
    /// Clearing `slot`: read it, judge its record, recover it if stale.
    Clear(Slot),
    /// Judging `record` read at `slot`, once its owner is observed.
    Judge(Slot, LockRecord),
    /// Removing the stale record carrying `nonce` at `slot` under `claim` (at `slot.claim`).
    Recover {
        slot: Slot,
        nonce: LockNonce,
        claim: Option<LockRecord>,
        stage: Recover,
    },
}

/// Where a [`Frame::Recover`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Recover {
    /// Waiting for the claim's fresh nonce.
    Fresh,
    /// Creating the claim.
    Create,
    /// Holding the claim: reading the stale record again.
    ReadStale,
    /// Holding the claim: unlinking the stale record.
    UnlinkStale,
    /// Reading the own claim before removing it.
    ReadClaim,
    /// Unlinking the own claim.
    UnlinkClaim,
}

/// Where the attempt itself is (below every frame).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    Kernel,
    Diagnose,
    Fresh,
    Create,
    Recovering,
}

/// What a finished frame reports to the one below it.
enum Cleared {
    Gone,
    Live(Slot, OwnerIdentity),
}

/// One acquisition attempt: the kernel lock, then the record, recovering stale records
/// race-free (the claim rule). The executor loops over attempts while its bound allows.
#[derive(Debug)]
pub struct Attempt<E> {
    me: OwnerIdentity,
    /// Clear-only (a sweep of a claim): end when the bottom frame is cleared.
    clear_only: bool,
    kernel_held: bool,
    stage: Stage,
    mine: Option<LockRecord>,
    /// How many times the lock was cleared and creation tried again.
    retries: usize,
    frames: Vec<Frame>,
    /// The first failure of a removal; the own claim is still removed before it is reported.
    deferred: Option<E>,
    end: Option<AttemptEnd<E>>,
    serial: Serial,
}

impl<E> Attempt<E> {
    /// An attempt by the process `me`.
    pub fn new(me: OwnerIdentity) -> Self {
        Attempt {
            me,
            clear_only: false,
            kernel_held: false,
            stage: Stage::Kernel,
            mine: None,
            retries: 0,
            frames: Vec::new(),
            deferred: None,
            end: None,
            serial: Serial::default(),
        }
    }

    /// Clears `slot` only — judges its record and removes it if stale, by the claim rule — as
    /// a sweep does for claims left by crashed recoverers. Ends [`AttemptEnd::Cleared`],
    /// [`AttemptEnd::Busy`] (a live owner or recoverer), or like an attempt does otherwise.
    pub fn clear(me: OwnerIdentity, kernel_held: bool, slot: Slot) -> Self {
        Self::clear_only(me, kernel_held, Frame::Clear(slot))
    }

    /// Removes the lock record carrying `nonce` by the claim rule — claim it, re-read it,
    /// unlink it only if it still carries `nonce`, remove the claim — without judging its
    /// owner: the caller has decided it may go (an operator's clear of an unknown owner,
    /// `crate::project_lock::clear`). Ends [`AttemptEnd::Cleared`] (removed, or gone
    /// meanwhile; nothing else is ever removed), or like [`Self::clear`] when the claim is
    /// held by another.
    pub fn recover(me: OwnerIdentity, kernel_held: bool, nonce: LockNonce) -> Self {
        Self::clear_only(
            me,
            kernel_held,
            Frame::Recover {
                slot: Slot::lock(),
                nonce,
                claim: None,
                stage: Recover::Fresh,
            },
        )
    }

    fn clear_only(me: OwnerIdentity, kernel_held: bool, frame: Frame) -> Self {
        Attempt {
            me,
            clear_only: true,
            kernel_held,
            stage: Stage::Recovering,
            mine: None,
            retries: 0,
            frames: vec![frame],
            deferred: None,
            end: None,
            serial: Serial::default(),
        }
    }

    fn handle_attempt(&mut self, input: LockInput<E>) -> Result<(), ProtocolError> {
        match (self.stage, input) {
            (Stage::Kernel, LockInput::Kernel(KernelSeen::Busy)) => self.stage = Stage::Diagnose,
            (Stage::Kernel, LockInput::Kernel(seen)) => {
                self.kernel_held = seen == KernelSeen::Taken;
                self.stage = Stage::Fresh;
            }
            // The kernel lock already answered; the record only names the holder.
            (Stage::Diagnose, LockInput::Record(record)) => {
                self.end = Some(AttemptEnd::Busy(Slot::lock(), record.map(|r| r.owner)))
            }
            (Stage::Fresh, LockInput::Fresh { nonce, now }) => {
                self.mine = Some(self.record(nonce, now));
                self.stage = Stage::Create;
            }
            (Stage::Create | Stage::Recovering, LockInput::Created(true)) => {
                self.end = self.mine.take().map(AttemptEnd::Acquired)
            }
            (Stage::Create | Stage::Recovering, LockInput::Created(false)) => {
                self.stage = Stage::Recovering;
                self.frames.push(Frame::Clear(Slot::lock()));
            }
            (_, other) => return Err(ProtocolError::wrong("project lock attempt", other.name())),
        }
        Ok(())
    }

    fn handle_recover(
        &mut self,
        slot: Slot,
        nonce: LockNonce,
        claim: Option<LockRecord>,
        stage: Recover,
        input: LockInput<E>,
    ) -> Result<(), ProtocolError> {
        let next = |stage| Frame::Recover {
            slot: slot.clone(),
            nonce,
            claim: claim.clone(),
            stage,
        };
        match (stage, input) {
            (Recover::Fresh, LockInput::Fresh { nonce: fresh, now }) => {
                self.frames.push(Frame::Recover {
                    slot: slot.clone(),
                    nonce,
                    claim: Some(self.record(fresh, now)),
                    stage: Recover::Create,
                });
            }
            (Recover::Create, LockInput::Created(true)) => {
                self.frames.push(next(Recover::ReadStale))
            }
            (Recover::Create, LockInput::Created(false)) => {
                // Someone else holds the claim: clear it one level up, then try again.
                let claim_slot = slot.claim(&nonce);
                self.frames.push(next(Recover::Create));
                self.frames.push(Frame::Clear(claim_slot));
            }
            (Recover::ReadStale, LockInput::Record(Some(found))) if found.nonce == nonce => {
                self.frames.push(next(Recover::UnlinkStale))
            }
            // Gone, or another record: nothing of that nonce is left to remove.
            (Recover::ReadStale, LockInput::Record(_))
            | (Recover::UnlinkStale, LockInput::Unlinked(_)) => {
                self.frames.push(next(Recover::ReadClaim))
            }
            (Recover::ReadClaim, LockInput::Record(Some(found)))
                if Some(found.nonce) == claim.as_ref().map(|c| c.nonce) =>
            {
                self.frames.push(next(Recover::UnlinkClaim))
            }
            (Recover::ReadClaim, LockInput::Record(_))
            | (Recover::UnlinkClaim, LockInput::Unlinked(_)) => match self.deferred.take() {
                Some(error) => self.end = Some(AttemptEnd::Failed(error)),
                None => self.cleared(Cleared::Gone),
            },
            (stage, other) => {
                self.frames.push(next(stage));
                return Err(ProtocolError::wrong("project lock recovery", other.name()));
            }
        }
        Ok(())
    }

    /// A record at `slot` was judged.
    fn judged(&mut self, slot: Slot, seen: LockRecord, judged: Ownership) {
        match judged {
            Ownership::Alive => self.cleared(Cleared::Live(slot, seen.owner)),
            Ownership::Unknown(reason) => {
                self.end = Some(AttemptEnd::Unknown(slot, seen.owner, reason))
            }
            Ownership::Dead(_) if slot.depth() >= MAX_RECOVERY_DEPTH => {
                self.end = Some(AttemptEnd::Abandoned(slot))
            }
            Ownership::Dead(_) => self.frames.push(Frame::Recover {
                slot,
                nonce: seen.nonce,
                claim: None,
                stage: Recover::Fresh,
            }),
        }
    }

    /// A [`Frame::Clear`] (with everything above it) finished: report to the frame below.
    fn cleared(&mut self, cleared: Cleared) {
        match (cleared, self.frames.last()) {
            (Cleared::Gone, None) if self.clear_only => self.end = Some(AttemptEnd::Cleared),
            // The lock itself is clear: create it again, a bounded number of times.
            (Cleared::Gone, None) => {
                self.retries += 1;
                if self.retries > MAX_CREATE_RETRIES {
                    self.end = Some(AttemptEnd::Busy(Slot::lock(), None));
                }
            }
            // A claim above a recovery is clear: the recovery tries its claim again.
            (Cleared::Gone, Some(_)) => {}
            (Cleared::Live(slot, owner), None) => {
                self.end = Some(AttemptEnd::Busy(slot, Some(owner)))
            }
            // A live recoverer holds the claim: the recovery below is its business.
            (Cleared::Live(slot, owner), Some(_)) => {
                self.frames.pop();
                self.cleared(Cleared::Live(slot, owner))
            }
        }
    }

    /// An effect failed. While the own claim is held, it is still removed first.
    fn fail(&mut self, error: E) {
        let holding_claim = matches!(
            self.frames.last(),
            Some(Frame::Recover {
                stage: Recover::ReadStale | Recover::UnlinkStale,
                ..
            })
        );
        if holding_claim && self.deferred.is_none() {
            self.deferred = Some(error);
            if let Some(Frame::Recover { stage, .. }) = self.frames.last_mut() {
                *stage = Recover::ReadClaim;
            }
        } else {
            self.end = Some(AttemptEnd::Failed(self.deferred.take().unwrap_or(error)));
        }
    }

    fn record(&self, nonce: LockNonce, now: Millis) -> LockRecord {
        LockRecord {
            owner: self.me.clone(),
            guard: if self.kernel_held {
                Guard::Kernel
            } else {
                Guard::RecordOnly
            },
            nonce,
            acquired_at: now,
        }
    }

    /// A result that does not fit `frame`'s effect: refused, the frame put back.
    fn violation(&mut self, frame: Frame, input: &LockInput<E>) -> Result<(), ProtocolError> {
        self.frames.push(frame);
        Err(ProtocolError::wrong("project lock recovery", input.name()))
    }
}

impl<E> Machine for Attempt<E> {
    type Protocol = LockProtocol<E>;
    type Output = AttemptEnd<E>;

    fn poll(&self) -> Option<LockEffect<E>> {
        self.serial.stamp(self.next())
    }

    fn handle(&mut self, answer: Answer<LockInput<E>>) -> Result<(), ProtocolError> {
        let mut serial = self.serial;
        let result = serial.take("project lock attempt", answer, |answer| {
            self.step(answer.into_parts().1)
        });
        self.serial = serial;
        result
    }

    fn output(self) -> Result<AttemptEnd<E>, ProtocolError> {
        self.end.ok_or(ProtocolError::Unfinished {
            machine: "project lock attempt",
        })
    }
}

impl<E> Attempt<E> {
    /// The next effect, not yet stamped (a clear runs an attempt inside its own steps).
    pub(crate) fn next(&self) -> Option<LockEffect<E>> {
        if self.end.is_some() {
            return None;
        }
        Some(match self.frames.last() {
            None => match self.stage {
                Stage::Kernel => LockEffect::try_kernel(),
                Stage::Diagnose => LockEffect::read(Slot::lock()),
                Stage::Fresh => LockEffect::fresh(),
                Stage::Create | Stage::Recovering => {
                    LockEffect::create(Slot::lock(), self.mine.clone()?)
                }
            },
            Some(Frame::Clear(slot)) => LockEffect::read(slot.clone()),
            Some(Frame::Judge(_, record)) => LockEffect::observe(record.owner.pid),
            Some(Frame::Recover {
                slot,
                nonce,
                claim,
                stage,
            }) => match stage {
                Recover::Fresh => LockEffect::fresh(),
                Recover::Create => LockEffect::create(slot.claim(nonce), claim.clone()?),
                Recover::ReadStale => LockEffect::read(slot.clone()),
                Recover::UnlinkStale => LockEffect::unlink(slot.clone()),
                Recover::ReadClaim => LockEffect::read(slot.claim(nonce)),
                Recover::UnlinkClaim => LockEffect::unlink(slot.claim(nonce)),
            },
        })
    }

    /// The answer to the effect [`Attempt::next`] named, whoever stamped it.
    pub(crate) fn step(&mut self, input: LockInput<E>) -> Result<(), ProtocolError> {
        if self.end.is_some() {
            return Err(ProtocolError::wrong(
                "ended project lock attempt",
                input.name(),
            ));
        }
        let input = match input {
            LockInput::Failed(error) => {
                self.fail(error);
                return Ok(());
            }
            input => input,
        };
        match self.frames.pop() {
            None => return self.handle_attempt(input),
            Some(Frame::Clear(slot)) => match input {
                LockInput::Record(None) => self.cleared(Cleared::Gone),
                LockInput::Record(Some(seen)) => {
                    match judge_unobserved(seen.guard, self.kernel_held) {
                        Some(judged) => self.judged(slot, seen, judged),
                        None => self.frames.push(Frame::Judge(slot, seen)),
                    }
                }
                other => return self.violation(Frame::Clear(slot), &other),
            },
            Some(Frame::Judge(slot, seen)) => match input {
                LockInput::Observed(report) => {
                    let judged = classify(&seen.owner, &report);
                    self.judged(slot, seen, judged)
                }
                other => return self.violation(Frame::Judge(slot, seen), &other),
            },
            Some(Frame::Recover {
                slot,
                nonce,
                claim,
                stage,
            }) => return self.handle_recover(slot, nonce, claim, stage, input),
        }
        Ok(())
    }
}

impl<E> LockInput<E> {
    /// The answer's kind, for an executor bug's report.
    pub fn name(&self) -> &'static str {
        match self {
            LockInput::Kernel(_) => "kernel",
            LockInput::Record(_) => "record",
            LockInput::Fresh { .. } => "fresh",
            LockInput::Created(_) => "created",
            LockInput::Observed(_) => "observed",
            LockInput::Unlinked(_) => "unlinked",
            LockInput::Failed(_) => "failed",
        }
    }
}

/// The release: removes the lock only if it still carries this acquisition's nonce.
#[derive(Debug)]
pub struct LockRelease<E> {
    nonce: LockNonce,
    found: Option<Option<LockRecord>>,
    end: Option<Result<ReleaseEnd, E>>,
    serial: Serial,
}

impl<E> LockRelease<E> {
    /// The release of the acquisition whose record carries `nonce`.
    pub fn new(nonce: LockNonce) -> Self {
        LockRelease {
            nonce,
            found: None,
            end: None,
            serial: Serial::default(),
        }
    }
}

impl<E> Machine for LockRelease<E> {
    type Protocol = LockProtocol<E>;
    type Output = Result<ReleaseEnd, E>;

    fn poll(&self) -> Option<LockEffect<E>> {
        self.serial.stamp(match (&self.end, &self.found) {
            (Some(_), _) => None,
            (None, None) => Some(LockEffect::read(Slot::lock())),
            (None, Some(_)) => Some(LockEffect::unlink(Slot::lock())),
        })
    }

    fn handle(&mut self, answer: Answer<LockInput<E>>) -> Result<(), ProtocolError> {
        let mut serial = self.serial;
        let result = serial.take("project lock release", answer, |answer| {
            self.step(answer.into_parts().1)
        });
        self.serial = serial;
        result
    }

    fn output(self) -> Result<Result<ReleaseEnd, E>, ProtocolError> {
        self.end.ok_or(ProtocolError::Unfinished {
            machine: "project lock release",
        })
    }
}

impl<E> LockRelease<E> {
    fn step(&mut self, input: LockInput<E>) -> Result<(), ProtocolError> {
        let answered = input.name();
        self.end = match (self.end.is_some(), &self.found, input) {
            (true, ..) => return Err(ProtocolError::wrong("ended project lock release", answered)),
            (_, _, LockInput::Failed(error)) => Some(Err(error)),
            (_, None, LockInput::Record(Some(found))) if found.nonce == self.nonce => {
                self.found = Some(Some(found));
                None
            }
            (_, None, LockInput::Record(found)) => Some(Ok(ReleaseEnd::NotHolder(found))),
            (_, Some(_), LockInput::Unlinked(true)) => Some(Ok(ReleaseEnd::Removed)),
            (_, Some(_), LockInput::Unlinked(false)) => Some(Ok(ReleaseEnd::NotHolder(None))),
            _ => return Err(ProtocolError::wrong("project lock release", answered)),
        };
        Ok(())
    }
}

/// Hands `machine` `input` as the answer to the effect it names now — bypassing the ask's type,
/// so the tests can hand wrong answers too (once it has ended: as an answer to a first effect).
#[cfg(test)]
pub(crate) fn give<E, M: Machine<Protocol = LockProtocol<E>>>(
    machine: &mut M,
    input: LockInput<E>,
) -> Result<(), ProtocolError> {
    let effect = machine.poll().unwrap_or_else(LockEffect::try_kernel);
    machine.handle(effect.answer_input(input))
}

#[cfg(test)]
mod tests;
