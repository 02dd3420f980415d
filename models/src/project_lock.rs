//! The model of the project lock: a project directory (lock and claim records, each complete
//! or absent), the kernel lock, and a process table, behind one [`Shim`] mutex; and the model
//! executor of the core's project-lock machines (`solewriter_core::project_lock::machine`:
//! [`Attempt`] and [`LockRelease`]) — the same machines the adapter executes. Each effect is one
//! critical section, so a checker may switch processes between any two effects.
//!
//! A process may crash before any effect (the caller's `crash` decides): it is then dead for
//! every later observation, and its kernel lock is dropped, as the kernel drops an `flock`
//! when its owner dies. A ghost set of holders — a process holds the lock from the creation
//! of its lock record until its release unlinks it (or it dies), both updated inside the
//! effect's own critical section — checks at every grant that no other live process holds it.
//!
//! What the model takes as given: a record is created complete or not at all (the adapter's
//! temp + fsync + link, pinned by its kill -9 tests), and the kernel lock excludes every other
//! process while its holder lives (pinned by the adapter's namespace tests). The traps
//! ([`LockDesign`]) break exactly these two assumptions or the claim's exclusivity.

use crate::shim::Shim;
use solewriter_core::project_lock::machine::{
    Attempt, AttemptEnd, KernelSeen, LockEffect, LockInput, LockMachine, LockRelease, ReleaseEnd,
};
use solewriter_core::project_lock::ownership::{
    BootId, BootSeen, Guard, LockNonce, LockRecord, NamespaceSeen, OwnerIdentity, ProbeReport,
    ProcessSeen,
};
use solewriter_core::time::Millis;
use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};

/// The design under check: the real executor, or a deliberately broken one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockDesign {
    /// The adapter's behaviour.
    Real,
    /// A kernel lock that excludes nobody (an `flock` on a file unlinked and recreated under
    /// its holder): every attempt "takes" it.
    KernelLockNoOp,
    /// Claims that exclude nobody: creating a recovery claim always succeeds, so two
    /// recoverers of one stale record both proceed.
    ClaimNotExclusive,
}

/// How a process's run ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProcessEnd {
    /// It acquired, held and released the lock.
    Released(ReleaseEnd),
    /// The lock was busy (a live holder or recoverer).
    Busy,
    /// It crashed (before the effect it was about to execute).
    Crashed,
    /// Any other end of an attempt (unknown owner, abandoned recovery): a finding.
    Refused(String),
}

/// What the ghost saw over a run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Findings {
    /// Every violation of "at most one live holder" (empty if none).
    pub violations: Vec<String>,
    /// Grants made.
    pub grants: usize,
    /// Removals of the lock record by a process that did not hold it (recoveries).
    pub recoveries: usize,
    /// Claim creations that found the claim taken (two recoverers of one record met).
    pub claims_contended: usize,
}

#[derive(Debug, Default)]
struct Dir {
    files: BTreeMap<String, LockRecord>,
    kernel: Option<u32>,
    alive: BTreeSet<u32>,
    holders: BTreeSet<u32>,
    next_nonce: u64,
    violations: Vec<String>,
    grants: usize,
    recoveries: usize,
    claims_contended: usize,
}

/// The shared project directory, kernel lock and process table.
pub struct LockWorld<S: Shim> {
    design: LockDesign,
    dir: S::Mutex<Dir>,
}

/// The identity of model process `pid` (one boot, one PID namespace).
pub fn identity(pid: u32) -> OwnerIdentity {
    OwnerIdentity {
        pid,
        start_token: 1,
        boot_id: boot(),
        pid_ns: 1,
    }
}

fn boot() -> BootId {
    BootId::parse("b00f").unwrap_or_else(|_| unreachable!("a valid boot id"))
}

impl<S: Shim> LockWorld<S> {
    /// An empty directory, no process alive yet.
    pub fn new(design: LockDesign) -> Self {
        LockWorld {
            design,
            dir: S::mutex(Dir::default()),
        }
    }

    /// Plants the record a dead process `pid` left at the lock (`guard`: how it was written).
    pub fn plant_stale(&self, pid: u32, guard: Guard) {
        S::with(&self.dir, |d| {
            let nonce = d.fresh_nonce();
            d.files.insert(
                "project.lock".to_owned(),
                LockRecord {
                    owner: identity(pid),
                    guard,
                    nonce,
                    acquired_at: Millis(0),
                },
            );
        })
    }

    /// Runs process `pid` once: an attempt (kernel lock unless `record_only`), and on a grant
    /// `hold` (scheduling points while holding) then the release. Before each effect,
    /// `crash()` may end the process.
    pub fn run_process(
        &self,
        pid: u32,
        record_only: bool,
        crash: &mut dyn FnMut() -> bool,
        hold: &mut dyn FnMut(),
    ) -> ProcessEnd {
        S::with(&self.dir, |d| d.alive.insert(pid));
        let mut machine = Attempt::<()>::new(identity(pid));
        while let Some(effect) = machine.poll() {
            if crash() {
                return self.crash(pid);
            }
            let input = S::with(&self.dir, |d| self.execute(d, pid, record_only, effect));
            if let Err(bug) = machine.handle(input) {
                crate::ghost::violation(format!("the lock model's executor: {bug}"));
            }
        }
        let record = match machine.into_end() {
            Ok(AttemptEnd::Acquired(record)) => record,
            Ok(AttemptEnd::Busy(..)) => {
                S::with(&self.dir, |d| self.let_go_kernel(d, pid));
                return ProcessEnd::Busy;
            }
            other => {
                S::with(&self.dir, |d| self.let_go_kernel(d, pid));
                return ProcessEnd::Refused(format!("{other:?}"));
            }
        };
        hold();
        let mut release = LockRelease::<()>::new(record.nonce);
        while let Some(effect) = release.poll() {
            if crash() {
                return self.crash(pid);
            }
            let input = S::with(&self.dir, |d| self.execute(d, pid, record_only, effect));
            if let Err(bug) = release.handle(input) {
                crate::ghost::violation(format!("the lock model's executor: {bug}"));
            }
        }
        S::with(&self.dir, |d| {
            d.holders.remove(&pid);
            self.let_go_kernel(d, pid);
        });
        match release.into_end() {
            Ok(Ok(end)) => ProcessEnd::Released(end),
            other => ProcessEnd::Refused(format!("release: {other:?}")),
        }
    }

    /// Process `pid` dies: it holds nothing from now on, and its kernel lock is dropped.
    fn crash(&self, pid: u32) -> ProcessEnd {
        S::with(&self.dir, |d| {
            d.alive.remove(&pid);
            d.holders.remove(&pid);
            self.let_go_kernel(d, pid);
        });
        ProcessEnd::Crashed
    }

    fn let_go_kernel(&self, d: &mut Dir, pid: u32) {
        if d.kernel == Some(pid) {
            d.kernel = None;
        }
    }

    /// One effect, in one critical section.
    fn execute(
        &self,
        d: &mut Dir,
        pid: u32,
        record_only: bool,
        effect: LockEffect,
    ) -> LockInput<()> {
        match effect {
            LockEffect::TryKernel if record_only => LockInput::Kernel(KernelSeen::NotUsed),
            LockEffect::TryKernel => match (self.design, d.kernel) {
                (LockDesign::KernelLockNoOp, _) => LockInput::Kernel(KernelSeen::Taken),
                (_, None) => {
                    d.kernel = Some(pid);
                    LockInput::Kernel(KernelSeen::Taken)
                }
                (_, Some(_)) => LockInput::Kernel(KernelSeen::Busy),
            },
            LockEffect::Read(slot) => LockInput::Record(d.files.get(slot.file_name()).cloned()),
            LockEffect::Fresh => LockInput::Fresh {
                nonce: d.fresh_nonce(),
                now: Millis(0),
            },
            LockEffect::Create(slot, record) => {
                let name = slot.file_name().to_owned();
                if slot.depth() > 0 && self.design == LockDesign::ClaimNotExclusive {
                    d.files.insert(name, record);
                    return LockInput::Created(true);
                }
                match d.files.entry(name) {
                    Entry::Occupied(_) => {
                        d.claims_contended += usize::from(slot.depth() > 0);
                        LockInput::Created(false)
                    }
                    Entry::Vacant(vacant) => {
                        vacant.insert(record);
                        if slot.depth() == 0 {
                            d.granted(pid);
                        }
                        LockInput::Created(true)
                    }
                }
            }
            LockEffect::Observe(observed) => LockInput::Observed(ProbeReport {
                boot: BootSeen::Known(boot()),
                pid_ns: NamespaceSeen::Known(1),
                process: if d.alive.contains(&observed) {
                    ProcessSeen::Present {
                        start_token: 1,
                        exited: false,
                    }
                } else {
                    ProcessSeen::Absent
                },
            }),
            LockEffect::Unlink(slot) => {
                let removed = d.files.remove(slot.file_name()).is_some();
                if removed && slot.depth() == 0 && !d.holders.remove(&pid) {
                    d.recoveries += 1;
                }
                LockInput::Unlinked(removed)
            }
        }
    }

    /// What the ghost found.
    pub fn findings(&self) -> Findings {
        S::with(&self.dir, |d| Findings {
            violations: d.violations.clone(),
            grants: d.grants,
            recoveries: d.recoveries,
            claims_contended: d.claims_contended,
        })
    }

    /// The files left in the directory (lock and claims), by name.
    pub fn files(&self) -> Vec<String> {
        S::with(&self.dir, |d| d.files.keys().cloned().collect())
    }
}

impl Dir {
    /// The lock record of `pid` was just created: the moment it holds the lock. No other live
    /// process may hold it then.
    fn granted(&mut self, pid: u32) {
        let others: Vec<u32> = self
            .holders
            .iter()
            .filter(|h| self.alive.contains(h))
            .copied()
            .collect();
        if !others.is_empty() {
            self.violations.push(format!(
                "process {pid} acquired while {others:?} held the lock"
            ));
        }
        self.holders.insert(pid);
        self.grants += 1;
    }

    fn fresh_nonce(&mut self) -> LockNonce {
        self.next_nonce += 1;
        let mut bytes = [0u8; 32];
        bytes[..8].copy_from_slice(&self.next_nonce.to_be_bytes());
        // Claim names carry the first 128 bits: make those differ too.
        bytes[8..16].copy_from_slice(&self.next_nonce.to_le_bytes());
        LockNonce::from_bytes(bytes)
    }
}
