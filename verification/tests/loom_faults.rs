#![cfg(feature = "model-check")]
//! loom with faults: every interleaving of a publication whose effect fails, whose holder then
//! presents the same grant again, against a successor taking over.
//!
//! Setup: holder Z publishes epoch 1 (a document exists), then holder A acquires epoch 2. For
//! each fault (the failable effects of a two-step publication, counted as
//! `models::executor::Fault` counts them: 8 the rename, 12 the commit of the release after the
//! rename — failing, or failing yet taking effect —, 13 the directory fsync, 4 the `BEGIN`),
//! threads:
//! - **A** publishes with the fault injected, then presents the same grant again (a copy of a
//!   Node `Grant` can, whatever the first outcome was);
//! - **B** acquires once the clock passed A's expiry and, granted, publishes;
//! - **the clock** moves past A's expiry;
//! - **the reader** (main thread) reads `current.json` twice.
//!
//! The ghost's invariants hold in every interleaving of every fault: one epoch names one
//! document, a document is never two ahead of its row, no rename after the renamer saw its
//! expiry, nothing acknowledged lost, complete reads. Preemption bound 2
//! (`SOLEWRITER_LOOM_BOUND` raises it).

use loom::sync::Arc;
use solewriter_core::projection::lease::Fenced;
use solewriter_models::executor::Fault;
use solewriter_models::ghost::ReaderCheck;
use solewriter_models::runs::{ModelAcquire, PublishOutcome};
use solewriter_models::{Design, World};
use solewriter_verification::fixtures::*;
use solewriter_verification::shims::{loom_spawn, LoomShim};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

#[derive(Default)]
struct Stats {
    executions: AtomicUsize,
    reuse_refused_by_the_document: AtomicUsize,
    reuse_published: AtomicUsize,
    b_published: AtomicUsize,
}

fn bound() -> usize {
    solewriter_verification::env_or("SOLEWRITER_LOOM_BOUND", 2)
}

fn check(fault: Fault, stats: &'static Stats) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(bound());
    builder.check(move || {
        stats.executions.fetch_add(1, SeqCst);
        let (world, target, a_lease) = loom_spawn(move || {
            let world = Arc::new(
                World::<LoomShim>::new(Design::Real, registry(), ttl(), START)
                    .checking_acknowledged(),
            );
            let (target, _) = published_once(&world);
            let a = acquired(
                world
                    .acquire(&target, &holder(1), token(1))
                    .expect("admitted"),
            );
            (world, target, a)
        })
        .join()
        .expect("setup");

        let w = world.clone();
        let a = loom_spawn(move || {
            let first = w.publish_with(&a_lease, None, Some(fault));
            let again = w.publish_with(&a_lease, None, None);
            (first, again)
        });
        let (w, t) = (world.clone(), target.clone());
        let b = loom_spawn(move || match w.acquire(&t, &holder(2), token(2)) {
            Ok(ModelAcquire::Acquired(lease)) => Some(w.publish(&lease, None)),
            Ok(ModelAcquire::Held(_)) => None,
            Err(e) => panic!("B: {e:?}"),
        });
        let w = world.clone();
        let clock = loom_spawn(move || w.advance(TTL_MS));
        let mut reader = ReaderCheck::default();
        world.read(&target, &mut reader);
        world.read(&target, &mut reader);

        let (_, again) = a.join().expect("A");
        let b_outcome = b.join().expect("B");
        clock.join().expect("clock");
        match again {
            PublishOutcome::Fenced(Fenced::DocumentAhead { .. }) => {
                stats.reuse_refused_by_the_document.fetch_add(1, SeqCst);
            }
            PublishOutcome::Published { .. } => {
                stats.reuse_published.fetch_add(1, SeqCst);
            }
            _ => {}
        }
        if matches!(b_outcome, Some(PublishOutcome::Published { .. })) {
            stats.b_published.fetch_add(1, SeqCst);
        }
    });
}

#[test]
fn every_interleaving_of_a_failed_effect_and_a_grant_presented_again_is_safe() {
    let mut total = 0;
    for (name, fault, reuse_refused) in [
        (
            "rename",
            Fault {
                at: 8,
                applied: false,
                ends_transaction: false,
            },
            false,
        ),
        (
            "commit after the rename",
            Fault {
                at: 12,
                applied: false,
                ends_transaction: false,
            },
            true,
        ),
        (
            "commit after the rename, taken effect",
            Fault {
                at: 12,
                applied: true,
                ends_transaction: false,
            },
            false,
        ),
        (
            "directory fsync",
            Fault {
                at: 13,
                applied: false,
                ends_transaction: false,
            },
            false,
        ),
        (
            "begin",
            Fault {
                at: 4,
                applied: false,
                ends_transaction: false,
            },
            false,
        ),
    ] {
        let stats: &'static Stats = Box::leak(Box::default());
        check(fault, stats);
        let get = |a: &AtomicUsize| a.load(SeqCst);
        solewriter_verification::report(&format!(
            "loom with a fault at the {name} (bound {}): {} interleavings; the grant presented again refused by the document in place in {}, published in {}; the successor published in {}",
            bound(),
            get(&stats.executions),
            get(&stats.reuse_refused_by_the_document),
            get(&stats.reuse_published),
            get(&stats.b_published),
        ));
        // Non-vacuity: the successor published in some interleavings; where the first
        // publication renamed and its release did not commit (or its directory fsync failed),
        // the grant presented again was refused by the document in some of them.
        assert!(get(&stats.b_published) > 0, "{name}: B never published");
        if reuse_refused {
            assert!(
                get(&stats.reuse_refused_by_the_document) > 0,
                "{name}: the grant presented again was never refused by the document"
            );
        }
        total += get(&stats.executions);
    }
    assert!(total > 0);
}
