//! The lock machines against scripted executors: each test names the exact effects a case
//! needs, in order, and the end it reaches.

use super::*;
use crate::project_lock::ownership::{BootId, BootSeen, NamespaceSeen, ProcessSeen};

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

fn seen(alive: bool) -> ProbeReport {
    ProbeReport {
        boot: BootSeen::Known(BootId::parse("b00f").unwrap()),
        pid_ns: NamespaceSeen::Known(4),
        process: if alive {
            ProcessSeen::Present {
                start_token: 7,
                exited: false,
            }
        } else {
            ProcessSeen::Absent
        },
    }
}

/// Effects a machine must name, in order, each with the answer it gets.
type Script = Vec<(LockEffect, LockInput<&'static str>)>;

fn fresh(n: u8) -> LockInput<&'static str> {
    LockInput::Fresh {
        nonce: nonce(n),
        now: Millis(9),
    }
}

/// Runs `machine`, answering each effect with the next scripted answer after checking the
/// effect is the one expected.
fn run(machine: &mut Attempt<&'static str>, script: Vec<(LockEffect, LockInput<&'static str>)>) {
    for (step, (expected, answer)) in script.into_iter().enumerate() {
        assert_eq!(machine.poll(), Some(expected), "step {step}");
        machine.handle(answer).unwrap();
    }
    assert_eq!(
        machine.poll(),
        None,
        "the machine wants more than the script"
    );
}

fn lock() -> Slot {
    Slot::lock()
}

#[test]
fn an_uncontended_attempt_takes_the_kernel_lock_then_creates_the_record() {
    let mut m = Attempt::new(owner(1));
    run(
        &mut m,
        vec![
            (LockEffect::TryKernel, LockInput::Kernel(KernelSeen::Taken)),
            (LockEffect::Fresh, fresh(1)),
            (
                LockEffect::Create(lock(), record(1, Guard::Kernel, 1).with_time(9)),
                LockInput::Created(true),
            ),
        ],
    );
    match m.into_end().ok() {
        Some(AttemptEnd::Acquired(r)) => assert_eq!(r, record(1, Guard::Kernel, 1).with_time(9)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_busy_kernel_lock_writes_nothing_and_names_the_recorded_owner() {
    let mut m = Attempt::new(owner(1));
    run(
        &mut m,
        vec![
            (LockEffect::TryKernel, LockInput::Kernel(KernelSeen::Busy)),
            (
                LockEffect::Read(lock()),
                LockInput::Record(Some(record(2, Guard::Kernel, 2))),
            ),
        ],
    );
    match m.into_end().ok() {
        Some(AttemptEnd::Busy(slot, Some(o))) => assert_eq!((slot, o), (lock(), owner(2))),
        other => panic!("{other:?}"),
    }
}

/// Under the kernel lock, a kernel-guarded record is stale whatever `/proc` says (it is never
/// observed): removed under its claim, then the lock is created.
#[test]
fn a_kernel_guarded_record_found_under_the_kernel_lock_is_recovered_without_observing() {
    let stale = record(2, Guard::Kernel, 2);
    let claim = lock().claim(&stale.nonce);
    let mine = record(1, Guard::Kernel, 1).with_time(9);
    let claim_record = record(1, Guard::Kernel, 3).with_time(9);
    let mut m = Attempt::new(owner(1));
    run(
        &mut m,
        vec![
            (LockEffect::TryKernel, LockInput::Kernel(KernelSeen::Taken)),
            (LockEffect::Fresh, fresh(1)),
            (
                LockEffect::Create(lock(), mine.clone()),
                LockInput::Created(false),
            ),
            (
                LockEffect::Read(lock()),
                LockInput::Record(Some(stale.clone())),
            ),
            (LockEffect::Fresh, fresh(3)),
            (
                LockEffect::Create(claim.clone(), claim_record.clone()),
                LockInput::Created(true),
            ),
            (LockEffect::Read(lock()), LockInput::Record(Some(stale))),
            (LockEffect::Unlink(lock()), LockInput::Unlinked(true)),
            (
                LockEffect::Read(claim.clone()),
                LockInput::Record(Some(claim_record)),
            ),
            (LockEffect::Unlink(claim), LockInput::Unlinked(true)),
            (
                LockEffect::Create(lock(), mine.clone()),
                LockInput::Created(true),
            ),
        ],
    );
    assert!(matches!(m.into_end().ok(), Some(AttemptEnd::Acquired(r)) if r == mine));
}

/// In record-only mode every record is classified: a live owner is busy, an unknown one fails
/// loudly, and neither is touched.
#[test]
fn record_only_owners_are_observed_and_a_live_or_unknown_one_is_left_alone() {
    for (report, expect_busy) in [
        (seen(true), true),
        (
            ProbeReport {
                process: ProcessSeen::Hidden,
                ..seen(true)
            },
            false,
        ),
    ] {
        let mut m = Attempt::new(owner(1));
        run(
            &mut m,
            vec![
                (
                    LockEffect::TryKernel,
                    LockInput::Kernel(KernelSeen::NotUsed),
                ),
                (LockEffect::Fresh, fresh(1)),
                (
                    LockEffect::Create(lock(), record(1, Guard::RecordOnly, 1).with_time(9)),
                    LockInput::Created(false),
                ),
                (
                    LockEffect::Read(lock()),
                    LockInput::Record(Some(record(2, Guard::RecordOnly, 2))),
                ),
                (LockEffect::Observe(2), LockInput::Observed(report)),
            ],
        );
        match m.into_end().ok() {
            Some(AttemptEnd::Busy(slot, Some(o))) if expect_busy => {
                assert_eq!((slot, o), (lock(), owner(2)))
            }
            Some(AttemptEnd::Unknown(slot, o, UnknownReason::Hidden)) if !expect_busy => {
                assert_eq!((slot, o), (lock(), owner(2)))
            }
            other => panic!("{other:?}"),
        }
    }
}

/// A claim held by a live recoverer means the recovery is that recoverer's: busy, on the claim.
#[test]
fn a_live_recoverers_claim_is_busy_and_left_alone() {
    let stale = record(2, Guard::RecordOnly, 2);
    let claim = lock().claim(&stale.nonce);
    let mut m = Attempt::new(owner(1));
    run(
        &mut m,
        vec![
            (
                LockEffect::TryKernel,
                LockInput::Kernel(KernelSeen::NotUsed),
            ),
            (LockEffect::Fresh, fresh(1)),
            (
                LockEffect::Create(lock(), record(1, Guard::RecordOnly, 1).with_time(9)),
                LockInput::Created(false),
            ),
            (LockEffect::Read(lock()), LockInput::Record(Some(stale))),
            (LockEffect::Observe(2), LockInput::Observed(seen(false))),
            (LockEffect::Fresh, fresh(3)),
            (
                LockEffect::Create(claim.clone(), record(1, Guard::RecordOnly, 3).with_time(9)),
                LockInput::Created(false),
            ),
            (
                LockEffect::Read(claim.clone()),
                LockInput::Record(Some(record(5, Guard::RecordOnly, 5))),
            ),
            (LockEffect::Observe(5), LockInput::Observed(seen(true))),
        ],
    );
    match m.into_end().ok() {
        Some(AttemptEnd::Busy(slot, Some(o))) => assert_eq!((slot, o), (claim, owner(5))),
        other => panic!("{other:?}"),
    }
}

/// The claim holder removes the stale record only if it still carries the stale nonce: a
/// successor's record found there instead is left alone, and the claim is removed.
#[test]
fn a_successors_record_found_under_the_claim_is_left_alone() {
    let stale = record(2, Guard::RecordOnly, 2);
    let claim = lock().claim(&stale.nonce);
    let claim_record = record(1, Guard::RecordOnly, 3).with_time(9);
    let mut m = Attempt::new(owner(1));
    run(
        &mut m,
        vec![
            (
                LockEffect::TryKernel,
                LockInput::Kernel(KernelSeen::NotUsed),
            ),
            (LockEffect::Fresh, fresh(1)),
            (
                LockEffect::Create(lock(), record(1, Guard::RecordOnly, 1).with_time(9)),
                LockInput::Created(false),
            ),
            (LockEffect::Read(lock()), LockInput::Record(Some(stale))),
            (LockEffect::Observe(2), LockInput::Observed(seen(false))),
            (LockEffect::Fresh, fresh(3)),
            (
                LockEffect::Create(claim.clone(), claim_record.clone()),
                LockInput::Created(true),
            ),
            (
                LockEffect::Read(lock()),
                LockInput::Record(Some(record(6, Guard::RecordOnly, 6))),
            ),
            (
                LockEffect::Read(claim.clone()),
                LockInput::Record(Some(claim_record)),
            ),
            (LockEffect::Unlink(claim), LockInput::Unlinked(true)),
            (
                LockEffect::Create(lock(), record(1, Guard::RecordOnly, 1).with_time(9)),
                LockInput::Created(false),
            ),
            (
                LockEffect::Read(lock()),
                LockInput::Record(Some(record(6, Guard::RecordOnly, 6))),
            ),
            (LockEffect::Observe(6), LockInput::Observed(seen(true))),
        ],
    );
    assert!(matches!(m.into_end().ok(), Some(AttemptEnd::Busy(_, Some(o))) if o == owner(6)));
}

/// A failure while holding the claim still removes the claim, then reports the first failure.
#[test]
fn a_failed_removal_still_gives_up_the_claim() {
    let stale = record(2, Guard::Kernel, 2);
    let claim = lock().claim(&stale.nonce);
    let claim_record = record(1, Guard::Kernel, 3).with_time(9);
    let mut m = Attempt::new(owner(1));
    run(
        &mut m,
        vec![
            (LockEffect::TryKernel, LockInput::Kernel(KernelSeen::Taken)),
            (LockEffect::Fresh, fresh(1)),
            (
                LockEffect::Create(lock(), record(1, Guard::Kernel, 1).with_time(9)),
                LockInput::Created(false),
            ),
            (
                LockEffect::Read(lock()),
                LockInput::Record(Some(stale.clone())),
            ),
            (LockEffect::Fresh, fresh(3)),
            (
                LockEffect::Create(claim.clone(), claim_record.clone()),
                LockInput::Created(true),
            ),
            (LockEffect::Read(lock()), LockInput::Record(Some(stale))),
            (
                LockEffect::Unlink(lock()),
                LockInput::Failed("unlink failed"),
            ),
            (
                LockEffect::Read(claim.clone()),
                LockInput::Record(Some(claim_record)),
            ),
            (LockEffect::Unlink(claim), LockInput::Unlinked(true)),
        ],
    );
    assert!(matches!(
        m.into_end().ok(),
        Some(AttemptEnd::Failed("unlink failed"))
    ));
}

/// Crashed recoverers are recovered one level up, at most [`MAX_RECOVERY_DEPTH`] levels.
#[test]
fn recovery_is_abandoned_at_the_depth_bound() {
    let mut m = Attempt::new(owner(1));
    let mut script = vec![
        (LockEffect::TryKernel, LockInput::Kernel(KernelSeen::Taken)),
        (LockEffect::Fresh, fresh(1)),
        (
            LockEffect::Create(lock(), record(1, Guard::Kernel, 1).with_time(9)),
            LockInput::Created(false),
        ),
    ];
    let mut slot = lock();
    for level in 0..MAX_RECOVERY_DEPTH as u8 {
        let stale = record(2, Guard::Kernel, 20 + level);
        let claim = slot.claim(&stale.nonce);
        script.push((
            LockEffect::Read(slot.clone()),
            LockInput::Record(Some(stale)),
        ));
        script.push((LockEffect::Fresh, fresh(30 + level)));
        script.push((
            LockEffect::Create(
                claim.clone(),
                record(1, Guard::Kernel, 30 + level).with_time(9),
            ),
            LockInput::Created(false),
        ));
        slot = claim;
    }
    script.push((
        LockEffect::Read(slot.clone()),
        LockInput::Record(Some(record(2, Guard::Kernel, 99))),
    ));
    run(&mut m, script);
    match m.into_end().ok() {
        Some(AttemptEnd::Abandoned(at)) => {
            assert_eq!((at.depth(), at), (MAX_RECOVERY_DEPTH, slot))
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn release_removes_only_its_own_record() {
    let mine = record(1, Guard::Kernel, 1);
    let cases: [(Script, ReleaseEnd); 4] = [
        (
            vec![
                (
                    LockEffect::Read(lock()),
                    LockInput::Record(Some(mine.clone())),
                ),
                (LockEffect::Unlink(lock()), LockInput::Unlinked(true)),
            ],
            ReleaseEnd::Removed,
        ),
        // Its own record, gone by the time it is unlinked (recovered meanwhile).
        (
            vec![
                (
                    LockEffect::Read(lock()),
                    LockInput::Record(Some(mine.clone())),
                ),
                (LockEffect::Unlink(lock()), LockInput::Unlinked(false)),
            ],
            ReleaseEnd::NotHolder(None),
        ),
        (
            vec![(
                LockEffect::Read(lock()),
                LockInput::Record(Some(record(2, Guard::Kernel, 2))),
            )],
            ReleaseEnd::NotHolder(Some(record(2, Guard::Kernel, 2))),
        ),
        (
            vec![(LockEffect::Read(lock()), LockInput::Record(None))],
            ReleaseEnd::NotHolder(None),
        ),
    ];
    for (script, expected) in cases {
        let mut release = LockRelease::new(mine.nonce);
        for (effect, answer) in script {
            assert_eq!(release.poll(), Some(effect));
            release.handle(answer).unwrap();
        }
        assert_eq!(release.poll(), None);
        assert_eq!(release.into_end().unwrap().unwrap(), expected);
    }
    // A step that fails ends the release with that failure.
    for fails_at in 0..2 {
        let mut release = LockRelease::new(mine.nonce);
        release
            .handle(match fails_at {
                0 => LockInput::Failed("read"),
                _ => LockInput::Record(Some(mine.clone())),
            })
            .unwrap();
        if fails_at == 1 {
            release.handle(LockInput::Failed("unlink")).unwrap();
        }
        assert_eq!(release.poll(), None);
        let expected = ["read", "unlink"][fails_at];
        assert_eq!(release.into_end().unwrap(), Err(expected));
    }
}

#[test]
fn slots_round_trip_through_their_file_names() {
    let claim = lock().claim(&nonce(0xab)).claim(&nonce(0xcd));
    assert_eq!(Slot::of_name(claim.file_name()), Some(claim.clone()));
    assert_eq!(claim.depth(), 2);
    assert_eq!(Slot::of_name("project.lock"), Some(lock()));
    for other in [
        "project.lock.kernel",
        ".project.lock.recover-abcd.tmp-00",
        "project.lock.recover-xyz",
        "ledger.snapshot",
    ] {
        assert_eq!(Slot::of_name(other), None, "{other}");
    }
}

impl LockRecord {
    fn with_time(mut self, ms: u64) -> Self {
        self.acquired_at = Millis(ms);
        self
    }
}

/// A sweep clears a claim left by a dead recoverer by the same rule, and ends there.
#[test]
fn a_clear_only_run_removes_a_stale_claim_and_ends() {
    let claim = lock().claim(&nonce(2));
    let stale = record(3, Guard::Kernel, 3);
    let upper = claim.claim(&stale.nonce);
    let upper_record = record(1, Guard::Kernel, 4).with_time(9);
    let mut m = Attempt::clear(owner(1), true, claim.clone());
    run(
        &mut m,
        vec![
            (
                LockEffect::Read(claim.clone()),
                LockInput::Record(Some(stale.clone())),
            ),
            (LockEffect::Fresh, fresh(4)),
            (
                LockEffect::Create(upper.clone(), upper_record.clone()),
                LockInput::Created(true),
            ),
            (
                LockEffect::Read(claim.clone()),
                LockInput::Record(Some(stale)),
            ),
            (LockEffect::Unlink(claim), LockInput::Unlinked(true)),
            (
                LockEffect::Read(upper.clone()),
                LockInput::Record(Some(upper_record)),
            ),
            (LockEffect::Unlink(upper), LockInput::Unlinked(true)),
        ],
    );
    assert!(matches!(m.into_end().ok(), Some(AttemptEnd::Cleared)));
}

/// A lock that keeps reappearing after it was found gone ends the attempt busy after
/// [`MAX_CREATE_RETRIES`] creations, instead of spinning; the executor's wait takes over.
#[test]
fn a_lock_that_keeps_reappearing_ends_the_attempt_busy() {
    let mine = record(1, Guard::Kernel, 1).with_time(9);
    let mut script = vec![
        (LockEffect::TryKernel, LockInput::Kernel(KernelSeen::Taken)),
        (LockEffect::Fresh, fresh(1)),
    ];
    for _ in 0..=MAX_CREATE_RETRIES {
        script.push((
            LockEffect::Create(lock(), mine.clone()),
            LockInput::Created(false),
        ));
        script.push((LockEffect::Read(lock()), LockInput::Record(None)));
    }
    let mut m = Attempt::new(owner(1));
    run(&mut m, script);
    match m.into_end().ok() {
        Some(AttemptEnd::Busy(slot, None)) => assert_eq!(slot, lock()),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_result_that_does_not_fit_the_effect_is_refused_and_changes_nothing() {
    let mut m = Attempt::<&str>::new(owner(1));
    assert_eq!(m.poll(), Some(LockEffect::TryKernel));
    assert_eq!(
        m.handle(LockInput::Unlinked(true)),
        Err(ProtocolError::WrongAnswer {
            machine: "project lock attempt",
            answered: "unlinked"
        })
    );
    assert_eq!(m.poll(), Some(LockEffect::TryKernel), "unchanged");
    m.handle(LockInput::Kernel(KernelSeen::Taken)).unwrap();
    assert_eq!(m.poll(), Some(LockEffect::Fresh));
    // The release: a result of another kind, then one after its end.
    let mut release = LockRelease::<&str>::new(record(1, Guard::Kernel, 1).nonce);
    assert!(release.handle(LockInput::Created(true)).is_err());
    assert_eq!(release.poll(), Some(LockEffect::Read(lock())), "unchanged");
    release.handle(LockInput::Record(None)).unwrap();
    assert!(release.handle(LockInput::Unlinked(true)).is_err());
    assert!(release.handle(LockInput::Failed("late")).is_err());
    assert!(matches!(
        release.into_end(),
        Ok(Ok(ReleaseEnd::NotHolder(None)))
    ));
    // Inside a recovery: the lock exists, so its record is read at the lock's slot; a result
    // of another kind leaves that frame in place.
    let mut m = Attempt::<&str>::new(owner(1));
    m.handle(LockInput::Kernel(KernelSeen::Taken)).unwrap();
    m.handle(LockInput::Fresh {
        nonce: record(1, Guard::Kernel, 1).nonce,
        now: Millis(9),
    })
    .unwrap();
    m.handle(LockInput::Created(false)).unwrap();
    assert_eq!(m.poll(), Some(LockEffect::Read(lock())));
    assert!(m.handle(LockInput::Unlinked(true)).is_err());
    assert_eq!(m.poll(), Some(LockEffect::Read(lock())), "unchanged");
    // An attempt's end is only taken once it has ended.
    assert!(matches!(
        Attempt::<&str>::new(owner(1)).into_end(),
        Err(ProtocolError::Unfinished { .. })
    ));
}
