//! The liveness scenario: a stale holder frozen before one effect of its publication, its
//! lease expired, and a successor that must be granted and publish at once — unless the holder
//! froze inside its transaction, or at one of its two edges holding the target lock alone (the
//! bound FENCING.md states). Generic over the shim, so the
//! same scenario runs on std mutexes (every freeze point, in the plain test suite) and under
//! loom and shuttle (with a reader interleaved).
//!
//! A frozen holder keeps exactly the locks it held at that point (the model's [`Frozen`]);
//! the world's contenders give up at once on a held lock ([`World::contenders_give_up`]), as
//! the busy timeout would while the holder stays frozen. Every rename, commit and release is
//! checked by the model's ghost as in every other check, so the resumed holder is shown never
//! to write over its successor.
//!
//! [`Frozen`]: solewriter_models::runs::Frozen

use crate::fixtures::*;
use solewriter_core::projection::lease::Fenced;
use solewriter_models::runs::{ModelAcquire, ModelLease, PublishOutcome};
use solewriter_models::world::ModelError;
use solewriter_models::{Shim, World};

/// What a successor met, the stale holder frozen before one effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seen {
    /// The publication has no effect at that index: every point was tried.
    Beyond,
    /// Frozen inside its transaction (before `effect`): the successor was refused (`Busy`).
    Inside(&'static str),
    /// Frozen outside its transaction (before `effect`): the successor was granted and
    /// published on its first attempt.
    Outside(&'static str),
    /// Frozen at an edge of its transaction (before `effect`: `begin`, the target lock taken
    /// right before it, or `unlock-target`, right after the commit): it holds the target lock
    /// alone, and the successor of this target was refused (`Busy`) — the stated bound.
    Edge(&'static str),
    /// Frozen outside its transaction (before `effect`), yet the successor could not go on:
    /// liveness broken.
    Stopped(&'static str),
}

/// The effects a publication freezes before while holding the target lock alone: between
/// `lock-target` and `begin`, and between the commit and `unlock-target`.
pub const EDGES: [&str; 2] = ["begin", "unlock-target"];

fn granted(outcome: Result<ModelAcquire, ModelError>) -> ModelLease {
    match outcome {
        Ok(ModelAcquire::Acquired(lease)) => lease,
        other => panic!("setup grant refused: {other:?}"),
    }
}

/// Runs the scenario on a fresh `world` (target `tuple(0)`): holder Z publishes epoch 1; the
/// stale holder A (a grant of epoch 2, or with `one_shot` a one-shot publication) starts
/// publishing and freezes before its `freeze_at`-th effect; the clock passes A's expiry; the
/// successor B acquires and publishes; A resumes.
pub fn frozen_holder<S: Shim>(world: &World<S>, one_shot: bool, freeze_at: usize) -> Seen {
    let target = world.admit(&tuple(0));
    world
        .submit(&producer(0), &submission(&target, 0, 1, "one", START))
        .expect("admitted");
    let z = granted(world.acquire(&target, &holder(9), token(9)));
    assert!(matches!(
        world.publish(&z, None),
        PublishOutcome::Published { epoch: 1, .. }
    ));
    let frozen = if one_shot {
        world.publish_now_frozen(&target, &holder(1), token(1), freeze_at)
    } else {
        let a = granted(world.acquire(&target, &holder(1), token(1)));
        world.publish_frozen(&a, freeze_at)
    };
    let Some(frozen) = frozen else {
        return Seen::Beyond;
    };
    let (effect, inside) = (frozen.effect(), frozen.in_transaction());
    world.advance(TTL_MS);
    world.contenders_give_up();
    let successor = match world.acquire(&target, &holder(2), token(2)) {
        Ok(ModelAcquire::Acquired(b)) => match world.publish(&b, None) {
            PublishOutcome::Published { .. } => true,
            other => panic!("the successor, granted, did not publish: {other:?}"),
        },
        Err(ModelError::Busy) => false,
        other => panic!("the successor's acquisition: {other:?}"),
    };
    let resumed = frozen.resume();
    match (inside, successor) {
        (true, false) => Seen::Inside(effect),
        (true, true) => panic!("granted while the holder was inside its transaction"),
        (false, true) => {
            // The resumed holder is fenced, or had already published (frozen after its commit),
            // or (a one-shot frozen before its grant) is granted after the successor and
            // publishes a higher epoch. The ghost checked every rename.
            assert!(
                matches!(
                    resumed,
                    PublishOutcome::Fenced(Fenced::Superseded { .. })
                        | PublishOutcome::Published { .. }
                ),
                "resumed at {effect}: {resumed:?}"
            );
            Seen::Outside(effect)
        }
        (false, false) if EDGES.contains(&effect) => Seen::Edge(effect),
        (false, false) => Seen::Stopped(effect),
    }
}
