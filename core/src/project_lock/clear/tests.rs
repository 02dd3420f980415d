//! The clear machine against scripted executors: the exact effects each case names, in
//! order, and the end it reaches.

use super::*;
use crate::project_lock::machine::give;
use crate::project_lock::ownership::{
    BootId, BootSeen, DeadReason, Guard, NamespaceSeen, ProbeReport, ProcessSeen,
};
use crate::time::Millis;

type Step = (LockEffect<&'static str>, LockInput<&'static str>);

fn owner(pid: u32) -> OwnerIdentity {
    OwnerIdentity {
        pid,
        start_token: 7,
        boot_id: BootId::parse("b00f").unwrap(),
        pid_ns: 4,
    }
}

fn nonce(byte: u8) -> LockNonce {
    LockNonce::from_bytes([byte; 32])
}

fn record(pid: u32, guard: Guard, n: u8) -> LockRecord {
    LockRecord {
        owner: owner(pid),
        guard,
        nonce: nonce(n),
        acquired_at: Millis(5),
    }
}

/// What the probe reports of the owner: in namespace `ns` (the owner recorded 4), alive or not.
fn seen(ns: u64, alive: bool) -> LockInput<&'static str> {
    LockInput::Observed(ProbeReport {
        boot: BootSeen::Known(BootId::parse("b00f").unwrap()),
        pid_ns: NamespaceSeen::Known(ns),
        process: if alive {
            ProcessSeen::Present {
                start_token: 7,
                exited: false,
            }
        } else {
            ProcessSeen::Absent
        },
    })
}

const OTHER_NS: u64 = 9;

/// Runs a clear of nonce `n` by process 1 through `script` (each effect checked) to its end.
fn run(n: u8, script: Vec<Step>) -> ClearEnd<&'static str> {
    let mut machine = Clear::new(owner(1), nonce(n));
    for (step, (expected, answer)) in script.into_iter().enumerate() {
        assert_eq!(machine.poll(), Some(expected), "step {step}");
        give(&mut machine, answer).unwrap();
    }
    assert_eq!(
        machine.poll(),
        None,
        "the machine wants more than the script"
    );
    machine.output().expect("ended")
}

fn kernel(seen: KernelSeen) -> Step {
    (LockEffect::try_kernel(), LockInput::Kernel(seen))
}

fn read(slot: Slot, found: Option<LockRecord>) -> Step {
    (LockEffect::read(slot), LockInput::Record(found))
}

/// The claim process 1 writes on nonce 2, holding the kernel lock.
fn claim() -> LockRecord {
    LockRecord {
        owner: owner(1),
        guard: Guard::Kernel,
        nonce: nonce(8),
        acquired_at: Millis(9),
    }
}

#[test]
fn an_unknown_owners_record_carrying_the_nonce_is_removed_by_the_claim_rule() {
    let stale = record(42, Guard::RecordOnly, 2);
    let claim_slot = Slot::lock().claim(&nonce(2));
    let end = run(
        2,
        vec![
            kernel(KernelSeen::Taken),
            read(Slot::lock(), Some(stale.clone())),
            (LockEffect::observe(42), seen(OTHER_NS, true)),
            (
                LockEffect::fresh(),
                LockInput::Fresh {
                    nonce: nonce(8),
                    now: Millis(9),
                },
            ),
            (
                LockEffect::create(claim_slot.clone(), claim()),
                LockInput::Created(true),
            ),
            read(Slot::lock(), Some(stale.clone())),
            (LockEffect::unlink(Slot::lock()), LockInput::Unlinked(true)),
            read(claim_slot.clone(), Some(claim())),
            (LockEffect::unlink(claim_slot), LockInput::Unlinked(true)),
        ],
    );
    assert!(matches!(end, ClearEnd::Cleared(r) if r == stale));
}

#[test]
fn a_record_replaced_while_claiming_is_left_alone() {
    let stale = record(42, Guard::RecordOnly, 2);
    let successor = record(43, Guard::Kernel, 3);
    let claim_slot = Slot::lock().claim(&nonce(2));
    let end = run(
        2,
        vec![
            kernel(KernelSeen::Taken),
            read(Slot::lock(), Some(stale.clone())),
            (LockEffect::observe(42), seen(OTHER_NS, false)),
            (
                LockEffect::fresh(),
                LockInput::Fresh {
                    nonce: nonce(8),
                    now: Millis(9),
                },
            ),
            (
                LockEffect::create(claim_slot.clone(), claim()),
                LockInput::Created(true),
            ),
            // Another nonce now: no unlink of the lock, only of the own claim.
            read(Slot::lock(), Some(successor)),
            read(claim_slot.clone(), Some(claim())),
            (LockEffect::unlink(claim_slot), LockInput::Unlinked(true)),
        ],
    );
    assert!(matches!(end, ClearEnd::Cleared(r) if r == stale));
}

#[test]
fn another_nonce_is_refused_after_the_owner_was_found_unknown() {
    let found = record(42, Guard::RecordOnly, 3);
    let end = run(
        2,
        vec![
            kernel(KernelSeen::Taken),
            read(Slot::lock(), Some(found.clone())),
            (LockEffect::observe(42), seen(OTHER_NS, true)),
        ],
    );
    let ClearEnd::Refused(refused) = end else {
        panic!("{end:?}")
    };
    assert_eq!(refused, ClearRefused::NonceMismatch(found));
    assert!(
        refused.to_string().contains(&nonce(3).to_hex()),
        "{refused}"
    );
}

#[test]
fn a_known_owner_is_refused_whatever_the_nonce() {
    let refused = |kernel_seen, guard, observed: Option<LockInput<&'static str>>| {
        let found = record(42, guard, 2);
        let mut script = vec![kernel(kernel_seen), read(Slot::lock(), Some(found))];
        script.extend(observed.map(|o| (LockEffect::observe(42), o)));
        match run(2, script) {
            ClearEnd::Refused(ClearRefused::Known(_, ownership)) => ownership,
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(
        refused(KernelSeen::Taken, Guard::RecordOnly, Some(seen(4, true))),
        Ownership::Alive
    );
    assert_eq!(
        refused(KernelSeen::Taken, Guard::RecordOnly, Some(seen(4, false))),
        Ownership::Dead(DeadReason::NoSuchProcess)
    );
    // Written under the kernel lock the clear now holds: stale without looking at /proc.
    assert_eq!(
        refused(KernelSeen::Taken, Guard::Kernel, None),
        Ownership::Dead(DeadReason::KernelLockFree)
    );
    // Without a kernel lock (record-only), the same record is classified.
    assert_eq!(
        refused(KernelSeen::NotUsed, Guard::Kernel, Some(seen(4, true))),
        Ownership::Alive
    );
    let alive = ClearRefused::Known(record(42, Guard::Kernel, 2), Ownership::Alive);
    assert!(alive.to_string().contains("is alive"), "{alive}");
    let dead = ClearRefused::Known(
        record(42, Guard::Kernel, 2),
        Ownership::Dead(DeadReason::PidReused),
    );
    assert!(dead.to_string().contains("next acquisition"), "{dead}");
}

#[test]
fn a_held_kernel_lock_is_refused_and_no_record_is_nothing_to_clear() {
    let found = record(42, Guard::Kernel, 2);
    let end = run(
        2,
        vec![
            kernel(KernelSeen::Busy),
            read(Slot::lock(), Some(found.clone())),
        ],
    );
    let ClearEnd::Refused(refused) = end else {
        panic!("{end:?}")
    };
    assert_eq!(refused, ClearRefused::Held(Some(found)));
    assert!(refused.to_string().contains("names owner"), "{refused}");
    let end = run(2, vec![kernel(KernelSeen::Busy), read(Slot::lock(), None)]);
    assert!(matches!(end, ClearEnd::Refused(ClearRefused::Held(None))));
    let end = run(2, vec![kernel(KernelSeen::Taken), read(Slot::lock(), None)]);
    assert!(matches!(end, ClearEnd::NoLock));
}

#[test]
fn a_claim_held_by_a_live_recoverer_or_a_failed_effect_stops_the_clear() {
    let stale = record(42, Guard::RecordOnly, 2);
    let claim_slot = Slot::lock().claim(&nonce(2));
    let theirs = record(50, Guard::RecordOnly, 6);
    let end = run(
        2,
        vec![
            kernel(KernelSeen::Taken),
            read(Slot::lock(), Some(stale.clone())),
            (
                LockEffect::observe(42),
                LockInput::Observed(ProbeReport {
                    boot: BootSeen::Known(BootId::parse("b00f").unwrap()),
                    pid_ns: NamespaceSeen::Known(4),
                    process: ProcessSeen::Hidden,
                }),
            ),
            (
                LockEffect::fresh(),
                LockInput::Fresh {
                    nonce: nonce(8),
                    now: Millis(9),
                },
            ),
            (
                LockEffect::create(claim_slot.clone(), claim()),
                LockInput::Created(false),
            ),
            read(claim_slot.clone(), Some(theirs)),
            (LockEffect::observe(50), seen(4, true)),
        ],
    );
    assert!(
        matches!(&end, ClearEnd::Stopped(AttemptEnd::Busy(slot, Some(o))) if *slot == claim_slot && o.pid == 50),
        "{end:?}"
    );
    let end = run(
        2,
        vec![
            kernel(KernelSeen::Taken),
            (LockEffect::read(Slot::lock()), LockInput::Failed("read")),
        ],
    );
    assert!(matches!(end, ClearEnd::Stopped(AttemptEnd::Failed("read"))));
}

#[test]
fn an_ended_clear_refuses_further_answers() {
    let mut machine = Clear::new(owner(1), nonce(2));
    give(&mut machine, LockInput::Kernel(KernelSeen::Taken)).unwrap();
    give(&mut machine, LockInput::Record(None)).unwrap();
    assert_eq!(machine.poll(), None);
    assert!(give(&mut machine, LockInput::Failed("late")).is_err());
    assert!(matches!(machine.output(), Ok(ClearEnd::NoLock)));
}

#[test]
fn an_answer_that_does_not_fit_is_refused_and_changes_nothing() {
    let mut machine = Clear::<&str>::new(owner(1), nonce(2));
    assert_eq!(
        give(&mut machine, LockInput::Unlinked(true)),
        Err(ProtocolError::WrongAnswer {
            machine: "project lock clear",
            answered: "unlinked"
        })
    );
    assert_eq!(machine.poll(), Some(LockEffect::try_kernel()), "unchanged");
    assert!(matches!(
        machine.output(),
        Err(ProtocolError::Unfinished { .. })
    ));
}
