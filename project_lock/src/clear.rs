//! An operator's clear of a project lock whose owner is unknown from here: the executing side
//! of the core's [`Clear`] machine (`solewriter_core::project_lock::clear`, where every
//! decision is made), whose effects — the kernel lock, reads, `/proc` observations, the claim
//! and the unlinks — are executed exactly as an acquisition's are.

use crate::{LockError, ProjectLock, RunEnd};
use solewriter_core::contract::ProtocolError;
use solewriter_core::project_lock::clear::{Clear, ClearEnd};
use solewriter_core::project_lock::ownership::{LockNonce, LockRecord};

/// What an operator's clear did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cleared {
    /// This record — its owner unknown from here, carrying the nonce given — is gone:
    /// removed by the claim rule (or by another recoverer meanwhile).
    Removed(LockRecord),
    /// There was no lock record: nothing to clear.
    NoLock,
}

impl ProjectLock {
    /// Clears the lock record carrying `nonce` if its owner is unknown from here (another PID
    /// namespace or boot, a hidden `/proc`: what makes acquisitions fail loudly), after an
    /// operator has checked that owner by other means. The kernel lock is taken for the
    /// moment of the clear; the record is removed by the claim rule, so a successor's record
    /// is never removed.
    ///
    /// Refused, with nothing removed ([`LockError::ClearRefused`]): the kernel lock is held
    /// by another (its holder is running), the owner is known — alive, or dead (the next
    /// acquisition recovers it) —, or the record carries another nonce. A missing directory
    /// is [`LockError::NoDirectory`] (nothing is created); a malformed record is
    /// [`LockError::Malformed`] and is left untouched; a claim on the record held by a live
    /// recoverer is [`LockError::Busy`].
    pub fn clear_unknown(&self, nonce: &LockNonce) -> Result<Cleared, LockError> {
        self.existing_dir()?;
        let me = self.probe.current().map_err(LockError::OwnIdentity)?;
        let mut kernel = None;
        let end = self.run(Clear::new(me, *nonce), &mut kernel)?;
        let lock = self.path();
        let cleared = match end {
            ClearEnd::Cleared(record) => Cleared::Removed(record),
            ClearEnd::NoLock => Cleared::NoLock,
            ClearEnd::Refused(refused) => {
                return Err(LockError::ClearRefused {
                    lock,
                    refused: Box::new(refused),
                })
            }
            ClearEnd::Stopped(end) => {
                return Err(match self.ended(end) {
                    Err(error) => error,
                    Ok(RunEnd::Busy(owner)) => LockError::Busy { lock, owner },
                    Ok(RunEnd::Acquired(_) | RunEnd::Cleared) => ProtocolError::ImpossibleEnd {
                        machine: "project lock clear",
                        end: "acquired or cleared, as a stop",
                    }
                    .into(),
                })
            }
        };
        tracing::info!(lock = %lock.display(), nonce = %nonce.to_hex(), ?cleared, "project lock cleared by an operator");
        Ok(cleared)
    }
}
