#![cfg(feature = "model-check")]
//! loom: exhaustive interleavings of the stale-holder takeover path.
//!
//! Setup (before the threads start): holder Z publishes epoch 1 (so a document exists), then
//! holder A acquires epoch 2. Threads:
//! - **A** publishes (it may be preempted anywhere: before, inside, or after its transaction);
//! - **B** tries to acquire — granted only once the clock passed A's expiry and A's
//!   transaction is not running — and, if granted, publishes;
//! - **the clock** moves past A's expiry, then jumps backwards;
//! - **the reader** (main thread) reads `current.json` twice.
//!
//! The model's ghost checker asserts at every rename, release and commit: no rename by a
//! holder after a successor's acquisition committed; no rename by a released or fenced lease
//! or after the renamer saw its expiry; published epochs never decrease; every read is a
//! complete document and a reader's epochs never decrease; no renewal; unique grants.
//!
//! Preemption bound: 3. Every interleaving of the takeover race needs at most two
//! preemptions (A preempted inside its transaction, and once more between B's acquisition
//! and A's resumption); the third lets the clock thread and the reader interleave inside
//! that window too. Bound 3 covers every trap below and finishes in well under a minute;
//! `SOLEWRITER_LOOM_BOUND` raises it.

use loom::sync::Arc;
use solewriter_core::projection::lease::Fenced;
use solewriter_models::ghost::ReaderCheck;
use solewriter_models::runs::{ModelAcquire, PublishOutcome};
use solewriter_models::world::ModelError;
use solewriter_models::{Design, World};
use solewriter_verification::fixtures::*;
use solewriter_verification::shims::{loom_spawn, LoomShim};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

#[derive(Default)]
struct Stats {
    executions: AtomicUsize,
    takeover_while_publishing: AtomicUsize,
    reader_saw_old_and_new: AtomicUsize,
    b_published: AtomicUsize,
    contended_in_span: AtomicUsize,
}

fn bound() -> usize {
    solewriter_verification::env_or("SOLEWRITER_LOOM_BOUND", 3)
}

fn check(design: Design, one_shot: bool, stats: &'static Stats) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(bound());
    builder.check(move || {
        stats.executions.fetch_add(1, SeqCst);
        // The setup runs on a model thread of its own, which has the stack a publication
        // needs (the model's main thread has loom's small default stack); nothing else runs
        // meanwhile.
        let (world, target, a_lease) = loom_spawn(move || {
            let world = Arc::new(World::<LoomShim>::new(design, registry(), ttl(), START));
            let (target, z) = published_once(&world);
            // Two-step: A holds epoch 2 and is taken over after its expiry. One-shot: A is Z
            // again, whose grant was released by its publication; B then grants, publishes and
            // releases in one envelope while A retries with its released grant.
            let a_lease = if one_shot {
                z
            } else {
                acquired(
                    world
                        .acquire(&target, &holder(1), token(1))
                        .expect("admitted"),
                )
            };
            (world, target, a_lease)
        })
        .join()
        .expect("setup");

        let (w, t) = (world.clone(), target.clone());
        let a = loom_spawn(move || w.publish(&a_lease, None));
        let (w, t2) = (world.clone(), target.clone());
        let b = loom_spawn(move || {
            if one_shot {
                return match w.publish_now(&t2, &holder(2), token(2), None) {
                    PublishOutcome::Held(_) => None,
                    outcome => Some(outcome),
                };
            }
            // Busy: the target lock was held (only where the store's lock was lost).
            match w.acquire(&t2, &holder(2), token(2)) {
                Ok(ModelAcquire::Acquired(lease)) => Some(w.publish(&lease, None)),
                Ok(ModelAcquire::Held(_)) | Err(ModelError::Busy) => None,
                Err(e) => panic!("B: {e:?}"),
            }
        });
        let w = world.clone();
        let clock = loom_spawn(move || {
            w.advance(TTL_MS);
            w.set_clock(START.plus_ms(1));
        });
        let mut reader = ReaderCheck::default();
        world.read(&t, &mut reader);
        world.read(&t, &mut reader);

        let a_outcome = a.join().expect("A");
        let b_outcome = b.join().expect("B");
        clock.join().expect("clock");
        stats
            .contended_in_span
            .fetch_add(world.contended_in_span(), SeqCst);
        if b_outcome.is_some()
            && matches!(
                a_outcome,
                PublishOutcome::Fenced(Fenced::Superseded { .. } | Fenced::Released)
            )
        {
            stats.takeover_while_publishing.fetch_add(1, SeqCst);
        }
        if matches!(b_outcome, Some(PublishOutcome::Published { .. })) {
            stats.b_published.fetch_add(1, SeqCst);
        }
        if reader.epochs.len() >= 2 {
            stats.reader_saw_old_and_new.fetch_add(1, SeqCst);
        }
    });
}

fn leak(stats: Stats) -> &'static Stats {
    Box::leak(Box::new(stats))
}

/// The figures FENCING.md quotes for each design at the default bound: (interleavings,
/// takeovers while the old holder still tried to publish, successor published, reader saw old
/// and new). loom's exploration is deterministic, so a change to the machine, the executor or
/// the scenario that changes what is explored shows here first.
fn quoted(design: Design, one_shot: bool) -> Option<(usize, usize, usize, usize)> {
    match (design, one_shot) {
        (Design::Real, false) => Some((20_286, 1_691, 10_861, 2_102)),
        (Design::StoreLockLost, false) => Some((22_785, 1_849, 11_921, 2_345)),
        (Design::TargetLockSkipped, false) => Some((19_110, 1_559, 10_270, 2_052)),
        (Design::Real, true) => Some((50_076, 50_076, 49_779, 3_555)),
        _ => None,
    }
}

/// Runs `design` under loom, asserts it survives and that the dangerous interleavings were
/// reached, and reports the figures.
fn survives(design: Design, one_shot: bool) {
    let stats = leak(Stats::default());
    check(design, one_shot, stats);
    let (n, takeover, both, b) = (
        stats.executions.load(SeqCst),
        stats.takeover_while_publishing.load(SeqCst),
        stats.reader_saw_old_and_new.load(SeqCst),
        stats.b_published.load(SeqCst),
    );
    solewriter_verification::report(&format!(
        "loom {design:?}{} (preemption bound {}): {n} interleavings explored; {takeover} with a takeover while the old holder still tried to publish; {b} where the successor published; {both} where the reader saw the old and a new document",
        if one_shot { ", successor publishing in one shot" } else { "" },
        bound()
    ));
    // Non-vacuity: the dangerous interleavings were reached.
    assert!(
        takeover > 0,
        "no interleaving fenced the old holder after a takeover"
    );
    assert!(
        both > 0,
        "no interleaving let the reader see both documents"
    );
    assert!(b > 0, "the successor never published");
    let contended = stats.contended_in_span.load(SeqCst);
    solewriter_verification::report(&format!(
        "loom {design:?}{}: {contended} lock attempts while a publication was between its revalidation and its rename",
        if one_shot { ", one-shot successor" } else { "" }
    ));
    assert!(
        contended > 0,
        "no contender ever met a publication between its revalidation and its rename"
    );
    if bound() == 3 {
        assert_eq!(
            Some((n, takeover, b, both)),
            quoted(design, one_shot),
            "{design:?}: the figures FENCING.md quotes (update both together)"
        );
    }
}

#[test]
fn real_design_survives_every_interleaving_of_the_takeover() {
    survives(Design::Real, false);
}

/// The successor grants, publishes and releases in one envelope (`publish_now`) over a
/// released grant, while that grant's holder tries to publish again: the one-shot machine in
/// every interleaving. (A one-shot over an *expired* grant commits its grant first and
/// publishes in two steps — the takeover path above.)
#[test]
fn a_one_shot_successor_survives_every_interleaving_of_the_takeover() {
    survives(Design::Real, true);
}

/// Defence in depth: with the store's write lock lost right after the revalidation (a
/// descriptor of the database closed by the host), the target lock alone still fences the
/// takeover; with the target lock never taken, the store's lock alone does.
#[test]
fn each_lock_alone_fences_every_interleaving_of_the_takeover_store_lock_lost() {
    survives(Design::StoreLockLost, false);
}

/// The other half of defence in depth: the target lock never taken.
#[test]
fn each_lock_alone_fences_every_interleaving_of_the_takeover_target_lock_skipped() {
    survives(Design::TargetLockSkipped, false);
}

/// Runs trap `design` under loom and asserts that loom found a violation whose message
/// contains `expected` (the invariant the trap breaks).
fn assert_caught(design: Design, expected: &[&str]) {
    let stats = leak(Stats::default());
    let result = catch_unwind(AssertUnwindSafe(|| check(design, false, stats)));
    let message = match result {
        Ok(()) => panic!("loom did not find the violation of trap {design:?}"),
        Err(payload) => solewriter_verification::panic_message(payload.as_ref()),
    };
    assert!(
        message.contains("VIOLATION") && expected.iter().any(|e| message.contains(e)),
        "trap {design:?} failed for another reason: {message}"
    );
    solewriter_verification::report(&format!(
        "loom caught trap {design:?} after {} interleavings: {message}",
        stats.executions.load(SeqCst)
    ));
}

#[test]
fn loom_catches_rename_without_single_writer_check() {
    assert_caught(Design::RenameWithoutCheck, &["mutated current.json"]);
}

#[test]
fn loom_catches_json_epoch_used_as_guard() {
    assert_caught(Design::JsonEpochGuard, &["mutated current.json"]);
}

#[test]
fn loom_catches_commit_then_rename_outside_the_transaction() {
    assert_caught(Design::CommitThenRename, &["mutated current.json"]);
}

#[test]
fn loom_catches_revalidation_that_ignores_expiry() {
    assert_caught(Design::IgnoreExpiry, &["after its lease expired"]);
}

#[test]
fn loom_catches_renewal() {
    assert_caught(Design::Renewal, &["past acquired_at + ttl"]);
}

#[test]
fn loom_catches_in_place_write() {
    // A write in place is a torn read, or (whichever the schedule reaches first) the
    // overwrite of an acknowledged document by a half-written older one.
    assert_caught(
        Design::InPlaceWrite,
        &["torn", "acknowledged publication was lost"],
    );
}
