//! An operator's clear of a project lock whose owner cannot be judged from here, as a sans-IO
//! step machine ([`Clear`]); the adapter (`ProjectLock::clear_unknown`) executes its
//! [`LockEffect`]s like those of an acquisition.
//!
//! Acquisitions refuse to guess about an owner that is *unknown* (another PID namespace or
//! boot, a hidden `/proc`): they fail loudly until an operator, who can check the owner by
//! other means, clears the record. The clear removes exactly the record the operator looked
//! at, named by its nonce, and only while its owner is still unknown:
//!
//! 1. try the kernel lock without blocking — held by another, its holder is running: refused;
//! 2. read the record — none: nothing to clear;
//! 3. judge its owner as an acquirer holding the kernel lock would — alive or dead (the next
//!    acquisition recovers it): refused, the owner is known;
//! 4. the record carries another nonce than the operator's: refused (the lock changed since
//!    it was looked at);
//! 5. remove it by the claim rule ([`Attempt::recover`]): claimed, read again and unlinked
//!    only if it still carries the nonce — so a successor's record is never removed.
//!
//! Refusals write nothing.

use crate::contract::ProtocolError;
use crate::contract::{Answer, Machine, Serial};
use crate::project_lock::machine::{
    Attempt, AttemptEnd, KernelSeen, LockEffect, LockInput, LockProtocol, Slot,
};
use crate::project_lock::ownership::{
    classify, judge_unobserved, LockNonce, LockRecord, OwnerIdentity, Ownership,
};

/// Why a clear was refused; nothing was removed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ClearRefused {
    /// The kernel lock is held by another: its holder is running. Holds the record, if any.
    #[error("its kernel lock is held, so its holder is running{}", .0.as_ref().map_or_else(String::new, |r| format!(" (the record names owner {})", r.owner)))]
    Held(Option<LockRecord>),
    /// The owner is known: alive (acquisitions wait for it) or dead (the next acquisition
    /// recovers the record).
    #[error("its owner {} is {}", .0.owner, match .1 { Ownership::Alive => "alive: acquisitions wait for it", _ => "dead: the next acquisition recovers its record" })]
    Known(LockRecord, Ownership),
    /// The record carries another nonce than the one given.
    #[error("it carries nonce {}, not the one given (the lock changed since it was looked at)", .0.nonce.to_hex())]
    NonceMismatch(LockRecord),
}

/// How a clear ended.
#[derive(Debug)]
pub enum ClearEnd<E> {
    /// This record (of an unknown owner, carrying the nonce) is gone: removed by the claim
    /// rule, or removed by another meanwhile.
    Cleared(LockRecord),
    /// There was no record: nothing to clear.
    NoLock,
    /// Refused before anything was written.
    Refused(ClearRefused),
    /// Stopped before the record was removed: an effect failed, or the claim on the record is
    /// held by another recoverer (busy, unknown or abandoned, as [`Attempt::clear`] ends).
    Stopped(AttemptEnd<E>),
}

#[derive(Debug)]
enum Stage<E> {
    Kernel,
    Read {
        kernel: KernelSeen,
    },
    Observe {
        record: LockRecord,
    },
    Remove {
        record: LockRecord,
        by: Box<Attempt<E>>,
    },
    Done,
}

/// The clear of the record carrying one nonce, by the process `me`.
#[derive(Debug)]
pub struct Clear<E> {
    me: OwnerIdentity,
    nonce: LockNonce,
    kernel_held: bool,
    stage: Stage<E>,
    end: Option<ClearEnd<E>>,
    serial: Serial,
}

impl<E> Clear<E> {
    /// The clear of the lock record carrying `nonce`, run by the process `me` (who holds the
    /// claim while removing it).
    pub fn new(me: OwnerIdentity, nonce: LockNonce) -> Self {
        Clear {
            me,
            nonce,
            kernel_held: false,
            stage: Stage::Kernel,
            end: None,
            serial: Serial::default(),
        }
    }

    fn finish(&mut self, end: ClearEnd<E>) -> Stage<E> {
        self.end = Some(end);
        Stage::Done
    }

    /// The record's owner was judged: only an unknown owner's record carrying the nonce goes.
    fn judged(&mut self, record: LockRecord, judged: Ownership) -> Stage<E> {
        match judged {
            Ownership::Unknown(_) if record.nonce == self.nonce => Stage::Remove {
                record,
                by: Box::new(Attempt::recover(
                    self.me.clone(),
                    self.kernel_held,
                    self.nonce,
                )),
            },
            Ownership::Unknown(_) => {
                self.finish(ClearEnd::Refused(ClearRefused::NonceMismatch(record)))
            }
            known => self.finish(ClearEnd::Refused(ClearRefused::Known(record, known))),
        }
    }

    /// The removal by the claim rule has ended.
    fn removed(&mut self, record: LockRecord, by: Attempt<E>) -> Result<Stage<E>, ProtocolError> {
        Ok(match by.output()? {
            AttemptEnd::Cleared => self.finish(ClearEnd::Cleared(record)),
            other => self.finish(ClearEnd::Stopped(other)),
        })
    }
}

impl<E> Machine for Clear<E> {
    type Protocol = LockProtocol<E>;
    type Output = ClearEnd<E>;

    fn poll(&self) -> Option<LockEffect<E>> {
        self.serial.stamp(match &self.stage {
            Stage::Kernel => Some(LockEffect::try_kernel()),
            Stage::Read { .. } => Some(LockEffect::read(Slot::lock())),
            Stage::Observe { record } => Some(LockEffect::observe(record.owner.pid)),
            // The removal's steps are this clear's: its serial stamps them.
            Stage::Remove { by, .. } => by.next(),
            Stage::Done => None,
        })
    }

    fn handle(&mut self, answer: Answer<LockInput<E>>) -> Result<(), ProtocolError> {
        let mut serial = self.serial;
        let result = serial.take("project lock clear", answer, |answer| {
            self.step(answer.into_parts().1)
        });
        self.serial = serial;
        result
    }

    fn output(self) -> Result<ClearEnd<E>, ProtocolError> {
        self.end.ok_or(ProtocolError::Unfinished {
            machine: "project lock clear",
        })
    }
}

impl<E> Clear<E> {
    fn step(&mut self, input: LockInput<E>) -> Result<(), ProtocolError> {
        let answered = input.name();
        if self.end.is_some() {
            return Err(ProtocolError::wrong("ended project lock clear", answered));
        }
        let stage = std::mem::replace(&mut self.stage, Stage::Done);
        self.stage = match (stage, input) {
            (Stage::Remove { record, mut by }, input) => match by.step(input) {
                Err(e) => {
                    self.stage = Stage::Remove { record, by };
                    return Err(e);
                }
                Ok(()) if by.next().is_some() => Stage::Remove { record, by },
                Ok(()) => self.removed(record, *by)?,
            },
            (_, LockInput::Failed(error)) => {
                self.finish(ClearEnd::Stopped(AttemptEnd::Failed(error)))
            }
            (Stage::Kernel, LockInput::Kernel(kernel)) => {
                self.kernel_held = kernel == KernelSeen::Taken;
                Stage::Read { kernel }
            }
            (
                Stage::Read {
                    kernel: KernelSeen::Busy,
                },
                LockInput::Record(record),
            ) => self.finish(ClearEnd::Refused(ClearRefused::Held(record))),
            (Stage::Read { .. }, LockInput::Record(None)) => self.finish(ClearEnd::NoLock),
            (Stage::Read { .. }, LockInput::Record(Some(record))) => {
                match judge_unobserved(record.guard, self.kernel_held) {
                    Some(judged) => self.judged(record, judged),
                    None => Stage::Observe { record },
                }
            }
            (Stage::Observe { record }, LockInput::Observed(report)) => {
                let judged = classify(&record.owner, &report);
                self.judged(record, judged)
            }
            (stage, _) => {
                self.stage = stage;
                return Err(ProtocolError::wrong("project lock clear", answered));
            }
        };
        Ok(())
    }
}

#[cfg(test)]
mod tests;
