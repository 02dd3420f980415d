#![cfg(feature = "model-check")]
//! Liveness under loom and shuttle: the scenario of `solewriter_verification::liveness` (a
//! stale holder frozen before each effect of its publication, its lease expired, a successor
//! that must be granted and publish at once unless the holder froze inside its transaction),
//! run at every freeze point with a reader thread reading `current.json` concurrently — loom
//! explores every interleaving of the reader with the holder, the successor and the resumed
//! holder (preemption bound 2); shuttle samples random schedules of the same. The ghost checks
//! every rename and every read throughout.

use solewriter_models::ghost::ReaderCheck;
use solewriter_models::{Design, Shim, World};
use solewriter_verification::fixtures::*;
use solewriter_verification::liveness::{frozen_holder, Seen};
use solewriter_verification::shims::{loom_spawn, LoomShim, ShuttleShim};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Mutex;

/// A fresh model world running `design`, with the fixtures' registry, TTL and start.
fn world<S: Shim>(design: Design) -> World<S> {
    World::new(design, registry(), ttl(), START)
}

/// A reader reading the scenario target's `current.json` `n` times, each read checked.
fn reads<S: Shim>(world: &World<S>, n: usize) {
    let (target, mut check) = (tuple(0).target_id(), ReaderCheck::default());
    for _ in 0..n {
        world.read(&target, &mut check);
    }
}

/// The freeze points of one publication kind (from the std run of the same scenario).
fn points(one_shot: bool) -> usize {
    (0..)
        .take_while(|&k| {
            let world = world::<solewriter_models::StdShim>(Design::Real);
            frozen_holder(&world, one_shot, k) != Seen::Beyond
        })
        .count()
}

#[test]
fn loom_a_frozen_holder_never_stops_its_successor() {
    let executions = AtomicUsize::new(0);
    let mut total_points = 0;
    for one_shot in [false, true] {
        for k in 0..points(one_shot) {
            total_points += 1;
            let mut builder = loom::model::Builder::new();
            builder.preemption_bound = Some(2);
            // loom's model is 'static: what it reports goes through leaked cells.
            let seen: &'static Mutex<Vec<Seen>> = Box::leak(Box::new(Mutex::new(Vec::new())));
            let counter: &'static AtomicUsize = Box::leak(Box::new(AtomicUsize::new(0)));
            builder.check(move || {
                counter.fetch_add(1, SeqCst);
                let world = loom::sync::Arc::new(world::<LoomShim>(Design::Real));
                let w = world.clone();
                let reader = loom_spawn(move || reads(&w, 2));
                // The whole scenario (three publications, one frozen) needs a deeper stack than
                // loom's default.
                let w = world.clone();
                let scenario = loom::thread::Builder::new()
                    .stack_size(1 << 24)
                    .spawn(move || frozen_holder(&w, one_shot, k))
                    .expect("spawned");
                reader.join().expect("reader");
                let outcome = scenario.join().expect("scenario");
                seen.lock().unwrap().push(outcome);
            });
            executions.fetch_add(counter.load(SeqCst), SeqCst);
            let seen = seen.lock().unwrap();
            assert!(
                seen.iter()
                    .all(|s| matches!(s, Seen::Inside(_) | Seen::Edge(_) | Seen::Outside(_))),
                "point {k} (one-shot {one_shot}): {:?}",
                seen.iter()
                    .find(|s| !matches!(s, Seen::Inside(_) | Seen::Edge(_) | Seen::Outside(_)))
            );
        }
    }
    solewriter_verification::report(&format!(
        "loom liveness: {total_points} freeze points, {} interleavings with a reader; at every point outside the transaction the successor published at once",
        executions.load(SeqCst)
    ));
}

#[test]
fn shuttle_a_frozen_holder_never_stops_its_successor() {
    let iterations = 20;
    let mut runs = 0;
    for one_shot in [false, true] {
        for k in 0..points(one_shot) {
            runs += iterations;
            shuttle::check_random(
                move || {
                    let world = shuttle::sync::Arc::new(world::<ShuttleShim>(Design::Real));
                    let w = world.clone();
                    let reader = shuttle::thread::spawn(move || reads(&w, 3));
                    let seen = frozen_holder(&world, one_shot, k);
                    assert!(
                        matches!(seen, Seen::Inside(_) | Seen::Edge(_) | Seen::Outside(_)),
                        "point {k} (one-shot {one_shot}): {seen:?}"
                    );
                    reader.join().expect("reader");
                },
                iterations,
            );
        }
    }
    solewriter_verification::report(&format!(
        "shuttle liveness: {runs} random schedules over every freeze point; the successor published at once at every point outside the transaction"
    ));
}

#[test]
fn shuttle_catches_a_target_lock_kept_across_the_draft() {
    for design in Design::LIVENESS_TRAPS {
        let stopped: &'static AtomicUsize = Box::leak(Box::new(AtomicUsize::new(0)));
        for k in 0..points(false) {
            shuttle::check_random(
                move || {
                    let world = world::<ShuttleShim>(design);
                    if let Seen::Stopped(_) = frozen_holder(&world, false, k) {
                        stopped.fetch_add(1, SeqCst);
                    }
                },
                5,
            );
        }
        solewriter_verification::report(&format!(
            "shuttle liveness trap {design:?}: the successor stopped in {} runs",
            stopped.load(SeqCst)
        ));
        assert!(stopped.load(SeqCst) > 0, "trap {design:?} was not caught");
    }
}
