//! Crash consistency of the atomic publisher against the reference model's file system
//! (`models/src/crash.rs`): a crash after ANY operation of the sequence, keeping any part of
//! what was not yet synced, leaves `current.json` as the old complete document or the new
//! complete one (the new one once success was reported). Dropping any one fsync from the
//! sequence is caught: some crash point then leaves a missing, empty, torn or old document.
//! Sequential and exhaustive; runs in the default `cargo test`.

use solewriter_models::crash::{check_publication, publish_ops, CrashReport, FsOp};
use solewriter_verification::report;

const OLD: &[u8] = br#"{"fencingEpoch":1,"channels":["old"]}"#;
const NEW: &[u8] = br#"{"fencingEpoch":2,"channels":["new","longer"]}"#;

/// The two scenarios: the first publication (the target directory is created) and a
/// replacement of a durably published document.
fn scenarios(
    ops: impl Fn(bool) -> Vec<FsOp>,
) -> [(&'static str, Vec<FsOp>, Option<&'static [u8]>); 2] {
    [
        ("first publication", ops(false), None),
        ("replacement", ops(true), Some(OLD)),
    ]
}

#[test]
fn the_publishers_sequence_survives_a_crash_at_every_point() {
    let mut total = CrashReport::default();
    for (name, ops, old) in scenarios(publish_ops) {
        let r = check_publication(&ops, old, NEW)
            .unwrap_or_else(|v| panic!("{name}: {v:?} with the real sequence {ops:?}"));
        // Non-vacuity: some crashes keep the old state, some the new.
        assert!(r.old > 0 && r.new > 0, "{name}: {r:?}");
        assert_eq!(r.crash_points, ops.len() + 1, "{name}");
        total.crash_points += r.crash_points;
        total.states += r.states;
        total.old += r.old;
        total.new += r.new;
    }
    report(&format!(
        "crash consistency: {} crash points, {} post-crash states, {} old, {} new, 0 torn or lost",
        total.crash_points, total.states, total.old, total.new
    ));
}

/// Removes `sync` from the real sequence and returns the first violation found.
fn without(sync: FsOp) -> Vec<String> {
    let mut caught = Vec::new();
    for (name, ops, old) in scenarios(publish_ops) {
        if !ops.contains(&sync) {
            continue;
        }
        let broken: Vec<_> = ops.into_iter().filter(|op| *op != sync).collect();
        if let Err(v) = check_publication(&broken, old, NEW) {
            let found = match &v.found {
                None => "missing".to_owned(),
                Some(b) if b.is_empty() => "empty".to_owned(),
                Some(b) if b == OLD => "the old document".to_owned(),
                Some(b) => format!("torn ({} bytes)", b.len()),
            };
            caught.push(format!(
                "{name}: after {} ops (acknowledged: {}) current.json {found}",
                v.after_ops, v.acknowledged
            ));
        }
    }
    report(&format!("crash consistency without {sync:?}: {caught:?}"));
    caught
}

#[test]
fn dropping_the_temp_file_fsync_is_caught() {
    let caught = without(FsOp::SyncTemp);
    assert_eq!(caught.len(), 2, "{caught:?}");
}

#[test]
fn dropping_the_directory_fsync_is_caught() {
    let caught = without(FsOp::SyncDir);
    assert_eq!(caught.len(), 2, "{caught:?}");
    assert!(
        caught.iter().all(|c| c.contains("acknowledged: true")),
        "{caught:?}"
    );
}

#[test]
fn dropping_the_parent_fsync_after_creating_the_target_directory_is_caught() {
    let caught = without(FsOp::SyncParent);
    assert_eq!(caught.len(), 1, "{caught:?}");
    assert!(caught[0].contains("missing"), "{caught:?}");
}

#[test]
fn every_fsync_of_the_sequence_is_checked() {
    let real: Vec<_> = publish_ops(false);
    for sync in FsOp::SYNCS {
        assert!(real.contains(&sync), "{sync:?} is part of the sequence");
    }
}
