//! Liveness on the reference model, every freeze point: a stale holder frozen before each
//! effect of its publication (a grant's two-step publication, and a one-shot), its lease
//! expired. Outside its transaction it holds no lock, so the successor is granted and publishes
//! on its first attempt; inside it, and at its two edges (the target lock taken right before
//! `BEGIN`, let go right after `COMMIT`), the successor is refused (`Busy`) — the bound
//! FENCING.md states. The liveness trap (`Design::LockAcrossDraft`: the target lock kept from the draft to
//! the directory fsync, the design before liveness was proven) is caught at the points where
//! it holds a lock outside its transaction. The same scenario runs under loom and shuttle in
//! `liveness_models.rs`.

use solewriter_models::{Design, StdShim, World};
use solewriter_verification::fixtures::*;
use solewriter_verification::liveness::{frozen_holder, Seen, EDGES};

/// Every freeze point of one publication kind under `design`.
fn every_point(design: Design, one_shot: bool) -> Vec<Seen> {
    (0..)
        .map(|k| {
            let world = World::<StdShim>::new(design, registry(), ttl(), START);
            frozen_holder(&world, one_shot, k)
        })
        .take_while(|seen| *seen != Seen::Beyond)
        .collect()
}

fn figures(seen: &[Seen]) -> (usize, usize, Vec<&'static str>) {
    let inside = seen
        .iter()
        .filter(|s| matches!(s, Seen::Inside(_) | Seen::Edge(_)))
        .count();
    let outside = seen
        .iter()
        .filter(|s| matches!(s, Seen::Outside(_)))
        .count();
    let stopped = seen
        .iter()
        .filter_map(|s| match s {
            Seen::Stopped(effect) => Some(*effect),
            _ => None,
        })
        .collect();
    (inside, outside, stopped)
}

#[test]
fn a_holder_frozen_outside_its_transaction_never_stops_its_successor() {
    for one_shot in [false, true] {
        let seen = every_point(Design::Real, one_shot);
        let (inside, outside, stopped) = figures(&seen);
        solewriter_verification::report(&format!(
            "liveness ({}): {} freeze points; {outside} outside the transaction and its two edges, each followed by the successor's grant and publication at once; {inside} inside it or at an edge (the target lock alone), the successor refused",
            if one_shot { "one-shot holder" } else { "two-step holder" },
            seen.len()
        ));
        assert_eq!(
            stopped,
            Vec::<&str>::new(),
            "liveness broken at these effects"
        );
        let edges: Vec<&str> = seen
            .iter()
            .filter_map(|s| match s {
                Seen::Edge(effect) => Some(*effect),
                _ => None,
            })
            .collect();
        assert_eq!(
            edges, EDGES,
            "the target lock alone is held at exactly the two edges"
        );
        // Both sides were reached; the figures FENCING.md quotes.
        assert_eq!(
            (seen.len(), outside, inside),
            if one_shot { (33, 12, 21) } else { (28, 10, 18) },
            "the figures FENCING.md quotes (update both together)"
        );
    }
}

#[test]
fn the_liveness_check_catches_a_target_lock_kept_across_the_draft() {
    for design in Design::LIVENESS_TRAPS {
        for one_shot in [false, true] {
            let (_, _, stopped) = figures(&every_point(design, one_shot));
            solewriter_verification::report(&format!(
                "liveness trap {design:?} ({}): the successor stopped at {stopped:?}",
                if one_shot { "one-shot" } else { "two-step" }
            ));
            assert!(
                !stopped.is_empty(),
                "trap {design:?} was not caught (one-shot: {one_shot})"
            );
        }
    }
}
