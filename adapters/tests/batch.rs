//! `publish_many` on a real store and real files: several targets granted, published and
//! released in one transaction, each fenced as one one-shot publication is — a stale holder
//! of one target fenced after the batch took it over, a live grant answered `Held`, a target
//! whose lock is busy dropped out alone, a batch refused before anything is touched — and the
//! answers in the caller's order.

mod support;

use solewriter_adapters::projection::probe::PublishProbe;
use solewriter_adapters::projection::publication::PublishedNow;
use solewriter_adapters::projection::target_lock::lock_path;
use solewriter_adapters::{Error, FileError};
use solewriter_core::error_kind::ErrorKind;
use solewriter_core::projection::lease::{Fenced, LeaseState};
use solewriter_core::projection::machine::publish_many::BatchRefused;
use solewriter_core::projection::publication::PublishStep;
use solewriter_core::projection::target::TargetId;
use std::fs::File;
use std::sync::Mutex;
use support::*;

/// A store with `n` targets admitted, each with one submission.
fn admitted(n: usize) -> (Fixture, Vec<TargetId>) {
    let f = Fixture::new();
    let store = f.open();
    let targets = (0..n)
        .map(|i| {
            let target = store.admit_target(&tuple(&format!("agent-{i}"))).unwrap();
            store.submit(&router(), &route(&target, 1, "0")).unwrap();
            target
        })
        .collect();
    (f, targets)
}

fn epoch_of(result: &Result<PublishedNow, Error>) -> u64 {
    match result {
        Ok(PublishedNow::Published(published)) => published.fencing_epoch,
        other => panic!("not published: {other:?}"),
    }
}

/// The target's row is released at `epoch` and its document is of `epoch`.
fn released_and_published(f: &Fixture, target: &TargetId, epoch: u64) {
    let row = f.open().lease_row(target).unwrap().unwrap();
    assert_eq!(row.fencing_epoch, epoch);
    assert!(matches!(row.state, LeaseState::Released(_)), "{row:?}");
    let doc = String::from_utf8(f.current_bytes(target).unwrap()).unwrap();
    assert!(doc.contains(&format!("\"fencingEpoch\":{epoch}")), "{doc}");
    assert!(f.leftovers(target).is_empty(), "{:?}", f.leftovers(target));
}

#[test]
fn a_batch_publishes_every_target_and_answers_in_the_callers_order() {
    let (f, mut targets) = admitted(4);
    let store = f.open();
    targets.reverse();
    let answers = store.publish_many(&targets, &holder("h")).unwrap();
    let answered: Vec<&TargetId> = answers.iter().map(|(t, _)| t).collect();
    assert_eq!(answered, targets.iter().collect::<Vec<_>>());
    for (target, result) in &answers {
        assert_eq!(epoch_of(result), 1);
        released_and_published(&f, target, 1);
        // The answer names where the document was renamed to.
        let Ok(PublishedNow::Published(published)) = result else {
            unreachable!("checked above")
        };
        assert_eq!(published.path, f.current_path(target));
    }
    // Again: every target one epoch on.
    for (target, result) in store.publish_many(&targets, &holder("h")).unwrap() {
        assert_eq!(epoch_of(&result), 2);
        released_and_published(&f, &target, 2);
    }
}

#[test]
fn a_stale_holder_of_one_target_is_fenced_after_the_batch_took_it_over() {
    let (f, targets) = admitted(2);
    let store = f.open();
    let stale = expect_acquired(store.acquire(&targets[0], &holder("old")).unwrap());
    // The old holder's lease expires; the batch takes the target over (its grant commits
    // with the batch, its publication runs in an envelope of its own).
    f.clock.advance(TTL_MS);
    let answers = store.publish_many(&targets, &holder("h")).unwrap();
    assert_eq!(epoch_of(&answers[0].1), 2);
    assert_eq!(epoch_of(&answers[1].1), 1);
    // Even with the broker clock set back, the stale holder never overwrites its successor.
    f.clock.set(START);
    let err = stale.publish().unwrap_err();
    assert!(
        matches!(err, Error::Fenced(Fenced::Superseded { current_epoch: 2 })),
        "{err}"
    );
    released_and_published(&f, &targets[0], 2);
    released_and_published(&f, &targets[1], 1);
}

#[test]
fn a_live_grant_is_answered_held_and_the_other_targets_publish() {
    let (f, targets) = admitted(3);
    let store = f.open();
    let live = expect_acquired(store.acquire(&targets[1], &holder("other")).unwrap());
    let before = f.current_bytes(&targets[1]);
    let answers = store.publish_many(&targets, &holder("h")).unwrap();
    assert!(
        matches!(answers[1].1, Ok(PublishedNow::Held(_))),
        "{:?}",
        answers[1]
    );
    assert_eq!(f.current_bytes(&targets[1]), before);
    assert_eq!(epoch_of(&answers[0].1), 1);
    assert_eq!(epoch_of(&answers[2].1), 1);
    // The live holder still publishes: the batch wrote nothing of its target.
    live.publish().unwrap();
    released_and_published(&f, &targets[1], 1);
}

#[test]
fn a_target_whose_lock_is_busy_drops_out_alone() {
    let (f, targets) = admitted(3);
    let store = f.open();
    // Publish once so every lock file exists, then hold target 1's kernel lock elsewhere.
    store.publish_many(&targets, &holder("h")).unwrap();
    let held = File::open(lock_path(&f.options.runtime_root, &targets[1])).unwrap();
    held.lock().unwrap();
    let answers = store.publish_many(&targets, &holder("h")).unwrap();
    match &answers[1].1 {
        Err(e @ Error::File(FileError::Busy { .. })) => assert_eq!(e.kind(), ErrorKind::Contention),
        other => panic!("{other:?}"),
    }
    assert_eq!(epoch_of(&answers[0].1), 2);
    assert_eq!(epoch_of(&answers[2].1), 2);
    // Nothing of target 1 moved: its row and document are the first batch's.
    released_and_published(&f, &targets[1], 1);
    held.unlock().unwrap();
}

#[test]
fn an_empty_batch_or_a_target_given_twice_is_refused_and_nothing_is_written() {
    let (f, targets) = admitted(2);
    let store = f.open();
    let err = store.publish_many(&[], &holder("h")).unwrap_err();
    assert!(matches!(err, Error::Batch(BatchRefused::Empty)), "{err}");
    assert_eq!(err.kind(), ErrorKind::Input);
    let twice = [targets[0].clone(), targets[1].clone(), targets[0].clone()];
    let err = store.publish_many(&twice, &holder("h")).unwrap_err();
    assert!(
        matches!(&err, Error::Batch(BatchRefused::Duplicate(t)) if *t == targets[0]),
        "{err}"
    );
    for target in &targets {
        assert!(f.current_bytes(target).is_none());
        assert_eq!(store.lease_row(target).unwrap().unwrap().fencing_epoch, 0);
    }
}

/// Every step a probe is shown, with its target.
#[derive(Default)]
struct Steps(Mutex<Vec<(PublishStep, TargetId)>>);

impl PublishProbe for Steps {
    fn reached(&self, step: PublishStep, target: &TargetId, _: u64) {
        self.0.lock().unwrap().push((step, target.clone()));
    }
}

/// `n` admitted targets published by one batch under a [`Steps`] probe, each at epoch 1: the
/// fixture, the targets, and each step the probe was shown.
fn observed_batch(n: usize) -> (Fixture, Vec<TargetId>, Vec<(PublishStep, TargetId)>) {
    let (f, targets) = admitted(n);
    let steps = Steps::default();
    let answers = f
        .open()
        .publish_many_observed(&targets, &holder("h"), &steps)
        .unwrap();
    assert!(answers.iter().all(|(_, answer)| epoch_of(answer) == 1));
    (f, targets, steps.0.into_inner().unwrap())
}

/// A batch of more targets than its parts run threads for (`MAX_THREADS`): each thread takes
/// the next part left, and every target is published, its directory fsynced, no temp left.
#[test]
fn a_batch_of_more_targets_than_part_threads_publishes_every_one() {
    let (f, targets, steps) = observed_batch(solewriter_files::parts::MAX_THREADS + 8);
    for target in &targets {
        let synced = steps
            .iter()
            .filter(|(step, t)| t == target && *step == PublishStep::DirectorySynced)
            .count();
        assert_eq!(synced, 1, "{target}");
        assert!(f.leftovers(target).is_empty(), "{target}");
    }
}

/// A probe that panics when a part's thread shows it the write of its temp file.
struct PanicsAtADraft;

impl PublishProbe for PanicsAtADraft {
    fn reached(&self, _: PublishStep, _: &TargetId, _: u64) {}

    fn before(&self, effect: &'static str, _: &TargetId, _: u64) {
        assert_ne!(effect, "write-temp", "the probe panics at a draft");
    }
}

/// The batch's thread unwinding while its parts' threads wait for it (its probe panicked at
/// an effect a part showed it) stops those threads instead of leaving them — and the batch
/// call, which waits for them — waiting for ever; nothing was written, and the next batch
/// publishes every target.
#[test]
fn a_probe_panicking_at_a_part_unwinds_the_batch_instead_of_leaving_it_waiting() {
    let (ended, end) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let (f, targets) = admitted(4);
        let store = f.open();
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            store.publish_many_observed(&targets, &holder("h"), &PanicsAtADraft)
        }))
        .is_err();
        let left: Vec<Vec<String>> = targets.iter().map(|t| f.leftovers(t)).collect();
        let again = store.publish_many(&targets, &holder("h")).unwrap();
        let epochs: Vec<u64> = again.iter().map(|(_, answer)| epoch_of(answer)).collect();
        ended.send((panicked, left, epochs)).unwrap();
    });
    let (panicked, left, epochs) = end
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the batch unwound within a minute instead of waiting for ever");
    assert!(panicked, "the probe's panic reached the caller");
    assert!(
        left.iter().all(Vec::is_empty),
        "no temp file left: {left:?}"
    );
    assert_eq!(epochs, [1, 1, 1, 1]);
}

#[test]
fn the_probe_sees_every_step_of_every_target_those_of_the_parts_threads_included() {
    let (_f, targets, steps) = observed_batch(3);
    for target in &targets {
        let seen: Vec<PublishStep> = steps
            .iter()
            .filter(|(_, t)| t == target)
            .map(|(step, _)| *step)
            .collect();
        // The draft's steps come from the part's thread before the transaction, the
        // directory's fsync from its thread after it.
        assert_eq!(seen, PublishStep::ALL.to_vec(), "{target}");
    }
}
