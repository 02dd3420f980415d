//! The batch machine driven by a scripted executor of several targets: one [`Script`] per
//! target answers that target's effects, and the shared transaction (begin, commit, rollback)
//! snapshots and restores every target's row, so a test reads what committed.

use super::*;
use crate::projection::machine::publish_many::{BatchRefused, PublishMany, TargetEnd};
use crate::projection::machine::Targeted;

fn target_n(n: u8) -> TargetId {
    TargetId::parse(&format!("{n:02x}").repeat(32)).unwrap()
}

/// `row(..)` of target `t`.
fn row_of(t: u8, epoch: u64, holder: u8, acquired_at: u64, released: bool) -> LeaseRecord {
    LeaseRecord {
        target_id: target_n(t),
        ..row(epoch, holder, acquired_at, released)
    }
}

/// The scripted executor of a batch.
struct Batch {
    scripts: Vec<Script>,
    /// Every effect, and the target it was for.
    log: Vec<(Option<usize>, &'static str)>,
    /// The rows when the transaction began (restored by a rollback).
    begun: Option<Vec<Option<LeaseRecord>>>,
    /// The shared effect that fails (its first occurrence).
    fail_shared: Option<&'static str>,
    /// The failable effect (over the whole batch) that fails, counted from 0.
    fail_nth: Option<usize>,
    failable: usize,
    /// The serial of every effect answered, in the order answered.
    serials: Vec<u64>,
}

impl Batch {
    fn new(scripts: Vec<Script>) -> Self {
        Batch {
            scripts,
            log: Vec::new(),
            begun: None,
            fail_shared: None,
            fail_nth: None,
            failable: 0,
            serials: Vec::new(),
        }
    }

    fn answer(&mut self, targeted: Targeted<'_, &'static str>) -> Answer<LeaseInput<&'static str>> {
        let Targeted { target, effect } = targeted;
        let name = effect.name();
        self.log.push((target, name));
        self.serials.push(serial_of(&effect));
        let failable = !matches!(
            effect,
            Effect::Clock(_)
                | Effect::Reached(..)
                | Effect::Store(StoreEffect::Rollback(_))
                | Effect::File(FileEffect::UnlockTarget(_))
        );
        let nth = failable && self.fail_nth == Some(self.failable);
        self.failable += usize::from(failable);
        let Some(i) = target else {
            if nth || self.fail_shared == Some(name) {
                self.fail_shared = None;
                return effect.fail(name).expect("a store effect");
            }
            return self.shared(effect);
        };
        if nth {
            if let Effect::File(FileEffect::WriteTemp(..)) = &effect {
                self.scripts[i].temp = true;
            }
            return effect.fail(name).expect("a store or file effect");
        }
        self.scripts[i].answer(effect)
    }

    fn shared(&mut self, effect: Effect<'_, &'static str>) -> Answer<LeaseInput<&'static str>> {
        let Effect::Store(effect) = effect else {
            panic!("a shared effect is the store's: {effect:?}")
        };
        let open = matches!(effect, StoreEffect::Begin(_));
        match (&effect, self.begun.take()) {
            (StoreEffect::Begin(_), _) => {
                self.begun = Some(self.scripts.iter().map(|s| s.row.clone()).collect())
            }
            (StoreEffect::Commit(_), Some(_)) => {}
            (StoreEffect::Rollback(_), Some(rows)) => {
                for (s, row) in self.scripts.iter_mut().zip(rows) {
                    s.row = row;
                }
            }
            (StoreEffect::Rollback(_), None) => {}
            other => panic!("not a shared effect: {other:?}"),
        }
        for s in &mut self.scripts {
            s.in_tx = open;
        }
        match effect {
            StoreEffect::Begin(ask) | StoreEffect::Commit(ask) | StoreEffect::Rollback(ask) => {
                ask.answer(Ok(()))
            }
            _ => unreachable!("matched above"),
        }
    }

    fn run(&mut self, machine: &mut PublishMany<'_, &'static str>) {
        assert_eq!(
            drive(machine, |effect| Some(self.answer(effect))),
            Ok(true),
            "{:?}",
            self.log
        );
    }

    /// Runs `machine` as a concurrent executor would: its lock-free parts as separate
    /// machines, one effect of each in turn, the last target's first.
    fn run_in_parts(&mut self, machine: &mut PublishMany<'_, &'static str>) -> usize {
        let mut rounds = 0;
        loop {
            if let Some(mut parts) = machine.parts() {
                rounds += 1;
                let mut each = parts.each();
                assert!(!each.is_empty());
                let mut stepped = true;
                while stepped {
                    stepped = false;
                    for (i, part) in each.iter_mut().rev() {
                        if let Some(effect) = part.poll() {
                            let answer = self.answer(Targeted {
                                target: Some(*i),
                                effect,
                            });
                            part.handle(answer).unwrap();
                            stepped = true;
                        }
                    }
                }
                drop(each);
                parts.join().unwrap();
                continue;
            }
            let Some(effect) = machine.poll() else {
                return rounds;
            };
            let answer = self.answer(effect);
            machine.handle(answer).unwrap();
        }
    }

    fn names(&self) -> Vec<&'static str> {
        self.log.iter().map(|(_, name)| *name).collect()
    }

    fn at(&self, target: Option<usize>, name: &str) -> Vec<usize> {
        self.log
            .iter()
            .enumerate()
            .filter(|(_, (t, n))| *t == target && *n == name)
            .map(|(i, _)| i)
            .collect()
    }
}

/// The serial of the step that asks `effect` (as its `Debug` shows it: `#serial`).
fn serial_of(effect: &Effect<'_, &'static str>) -> u64 {
    let shown = format!("{effect:?}");
    shown
        .split('#')
        .nth(1)
        .and_then(|rest| {
            rest.chars()
                .take_while(char::is_ascii_digit)
                .collect::<String>()
                .parse::<u64>()
                .ok()
        })
        .expect("an ask shows its step")
}

/// A batch of targets `1..=n`, each released at epoch 1 (the clock at 10), whose `i`-th target
/// fails `effect`.
fn released_failing(n: u8, i: usize, effect: &'static str) -> Batch {
    let mut scripts: Vec<Script> = (1..=n)
        .map(|t| Script::new(Some(row_of(t, 1, 1, 0, true)), &[10]))
        .collect();
    scripts[i].fail = Some(effect);
    Batch::new(scripts)
}

/// The target renamed, but its grant and release were lost with the transaction: a lost
/// commit, never plain success.
fn renamed_but_lost(script: &Script, end: &TargetEnd<&'static str>) {
    assert!(script.renamed, "{end:?}");
    assert!(
        matches!(&end.end, Err(Unpublished::NotReleased { .. })),
        "{end:?}"
    );
}

fn again(e: &&'static str) -> &'static str {
    e
}

fn batch<'r>(targets: &[u8], registry: &'r ChannelRegistry) -> PublishMany<'r, &'static str> {
    let targets = targets
        .iter()
        .map(|&t| (target_n(t), applicant(t + 100)))
        .collect();
    PublishMany::new(targets, registry, again).unwrap()
}

fn published(end: &TargetEnd<&'static str>) -> Option<u64> {
    match &end.end {
        Ok(PublishNowReport::Published { published, .. }) => Some(published.fencing_epoch),
        _ => None,
    }
}

fn released_at(s: &Script, epoch: u64) -> bool {
    matches!(
        &s.row,
        Some(LeaseRecord { fencing_epoch, state: LeaseState::Released(_), .. }) if *fencing_epoch == epoch
    )
}

#[test]
fn a_batch_publishes_every_target_under_its_savepoint_in_one_transaction_with_one_commit() {
    let registry = registry();
    // Given out of order: the batch runs them in the order of their ids.
    let mut m = batch(&[3, 1, 2], &registry);
    assert_eq!(m.targets(), [target_n(1), target_n(2), target_n(3)]);
    let mut b = Batch::new(
        (1..=3)
            .map(|t| Script::new(Some(row_of(t, 1, 1, 0, true)), &[10]))
            .collect(),
    );
    b.run(&mut m);
    let ends = m.output().unwrap();
    for (i, end) in ends.iter().enumerate() {
        assert_eq!(end.target_id, target_n(i as u8 + 1));
        assert_eq!(published(end), Some(2), "{end:?}");
        assert!(released_at(&b.scripts[i], 2), "{:?}", b.scripts[i].row);
        assert!(b.scripts[i].renamed && !b.scripts[i].temp && !b.scripts[i].locked);
    }
    let names = b.names();
    for once in ["begin", "commit"] {
        assert_eq!(names.iter().filter(|n| **n == once).count(), 1, "{names:?}");
    }
    let begin = b.at(None, "begin")[0];
    let commit = b.at(None, "commit")[0];
    for i in 0..3 {
        let t = Some(i);
        // Every target lock is taken before the transaction and let go after it; each
        // target's grant, revalidation, rename and release run under its savepoint.
        assert!(b.at(t, "lock-target")[0] < begin);
        assert!(b.at(t, "unlock-target")[0] > commit);
        let (open, keep) = (b.at(t, "savepoint")[0], b.at(t, "release-savepoint")[0]);
        for step in ["write-grant", "read-lease", "rename", "write-release"] {
            assert!(
                b.at(t, step).iter().all(|&p| open < p && p < keep),
                "{step}"
            );
        }
        // Its draft before the transaction, its directory fsync after it.
        assert!(b.at(t, "write-temp")[0] < begin);
        assert!(b.at(t, "sync-dir")[0] > commit);
    }
    // The locks in the order of the targets' ids; one target's body after the other's.
    let locks: Vec<usize> = (0..3).map(|i| b.at(Some(i), "lock-target")[0]).collect();
    assert!(locks.windows(2).all(|w| w[0] < w[1]), "{locks:?}");
    assert!(b.at(Some(0), "release-savepoint")[0] < b.at(Some(1), "savepoint")[0]);
}

#[test]
fn a_target_refused_inside_the_transaction_rolls_back_to_its_savepoint_and_the_others_publish() {
    let registry = registry();
    let mut m = batch(&[1, 2, 3], &registry);
    let mut scripts: Vec<Script> = (1..=3)
        .map(|t| Script::new(Some(row_of(t, 1, 1, 0, true)), &[10]))
        .collect();
    // Target 2's row moved after the prelude read it: another holder's live grant.
    scripts[1].inside = Some(row_of(2, 2, 7, 5, false));
    let mut b = Batch::new(scripts);
    b.run(&mut m);
    let ends = m.output().unwrap();
    assert_eq!(published(&ends[0]), Some(2));
    assert_eq!(published(&ends[2]), Some(2));
    assert!(
        matches!(&ends[1].end, Ok(PublishNowReport::Held(_))),
        "{:?}",
        ends[1]
    );
    // Nothing of target 2 committed or stayed behind; the others committed.
    assert_eq!(
        format!("{:?}", b.scripts[1].row),
        format!("{:?}", Some(row_of(2, 1, 1, 0, true)))
    );
    assert!(!b.scripts[1].renamed && !b.scripts[1].temp);
    assert!(b.at(Some(1), "release-savepoint").is_empty());
    assert_eq!(b.at(Some(1), "rollback-to-savepoint").len(), 1);
    assert!(released_at(&b.scripts[0], 2) && released_at(&b.scripts[2], 2));
    assert_eq!(b.at(None, "commit").len(), 1);
}

#[test]
fn a_live_grant_answers_held_before_the_transaction_and_its_target_takes_no_lock() {
    let registry = registry();
    let mut m = batch(&[1, 2], &registry);
    let mut b = Batch::new(vec![
        Script::new(Some(row_of(1, 3, 9, 5, false)), &[10]),
        Script::new(Some(row_of(2, 1, 1, 0, true)), &[10]),
    ]);
    b.run(&mut m);
    let ends = m.output().unwrap();
    assert!(matches!(&ends[0].end, Ok(PublishNowReport::Held(_))));
    assert_eq!(published(&ends[1]), Some(2));
    assert_eq!(
        b.log.iter().filter(|(t, _)| *t == Some(0)).count(),
        2,
        "{:?}",
        b.log
    );
    // Every target live: no lock, no transaction, nothing written.
    let mut m = batch(&[1], &registry);
    let mut b = Batch::new(vec![Script::new(Some(row_of(1, 3, 9, 5, false)), &[10])]);
    b.run(&mut m);
    assert_eq!(b.names(), ["read-committed-lease", "read-clock"]);
}

#[test]
fn a_takeover_in_a_batch_commits_with_it_then_publishes_in_an_envelope_of_its_own() {
    let registry = registry();
    let mut m = batch(&[1, 2], &registry);
    let mut b = Batch::new(vec![
        // Target 1's grant expired: a takeover.
        Script::new(Some(row_of(1, 4, 1, 0, false)), &[TTL + 5]),
        Script::new(Some(row_of(2, 1, 1, 0, true)), &[TTL + 5]),
    ]);
    b.run(&mut m);
    let ends = m.output().unwrap();
    assert!(
        matches!(
            &ends[0].end,
            Ok(PublishNowReport::Published {
                takeover: true,
                published
            }) if published.fencing_epoch == 5
        ),
        "{:?}",
        ends[0]
    );
    assert_eq!(published(&ends[1]), Some(2));
    let batch_commit = b.at(None, "commit")[0];
    // The takeover renamed only after the batch committed its grant, in a second envelope.
    assert_eq!(b.at(Some(0), "rename").len(), 1);
    assert!(b.at(Some(0), "rename")[0] > batch_commit);
    assert_eq!(b.at(Some(0), "begin").len(), 1);
    assert!(released_at(&b.scripts[0], 5) && released_at(&b.scripts[1], 2));
}

#[test]
fn a_failed_store_effect_ends_the_shared_transaction_for_every_target() {
    let registry = registry();
    let mut m = batch(&[1, 2, 3], &registry);
    // Target 2's row read inside the transaction fails (a store that rolls the transaction
    // back under an I/O error).
    let mut b = released_failing(3, 1, "read-lease");
    b.run(&mut m);
    let ends = m.output().unwrap();
    // Target 1 renamed, but its grant and release were rolled back with the transaction: a
    // lost commit, never plain success.
    renamed_but_lost(&b.scripts[0], &ends[0]);
    assert!(matches!(&ends[1].end, Err(Unpublished::Failed { .. })));
    // Target 3 never began: not started, its draft removed, nothing renamed.
    assert!(b.at(Some(2), "savepoint").is_empty());
    assert!(matches!(
        &ends[2].end,
        Err(Unpublished::Failed {
            failure: LeaseFailure::Effect("read-lease"),
            ..
        })
    ));
    assert!(!b.scripts[2].renamed && !b.scripts[2].temp);
    // The transaction rolled back whole: every row as it was.
    assert!(b.at(None, "commit").is_empty());
    for (t, s) in b.scripts.iter().enumerate() {
        assert_eq!(
            format!("{:?}", s.row),
            format!("{:?}", Some(row_of(t as u8 + 1, 1, 1, 0, true)))
        );
        assert!(!s.locked);
    }
}

#[test]
fn any_effect_of_a_batch_may_fail_and_each_end_says_what_happened() {
    // A batch of three (released, expired — a takeover —, released) fails each failable
    // effect of its run in turn. Whatever fails: no protocol error, no lock or transaction
    // left open, no temp sibling left (but where its removal failed); each target's end says
    // it renamed exactly when it did; and a target reported published committed its grant
    // and release (its row released at the published epoch).
    let registry = registry();
    let setup = || {
        Batch::new(vec![
            Script::new(Some(row_of(1, 1, 1, 0, true)), &[TTL + 5]),
            Script::new(Some(row_of(2, 4, 1, 0, false)), &[TTL + 5]),
            Script::new(Some(row_of(3, 1, 1, 0, true)), &[TTL + 5]),
        ])
    };
    let mut clean = setup();
    let mut m = batch(&[1, 2, 3], &registry);
    clean.run(&mut m);
    assert!(m.output().unwrap().iter().all(|e| published(e).is_some()));
    let mut runs = 0;
    for (nth, in_parts) in (0..clean.failable).flat_map(|nth| [(nth, false), (nth, true)]) {
        let mut b = setup();
        b.fail_nth = Some(nth);
        let mut m = batch(&[1, 2, 3], &registry);
        if in_parts {
            b.run_in_parts(&mut m);
        } else {
            b.run(&mut m);
        }
        let ends = m.output().expect("no protocol error");
        let failed = b
            .log
            .iter()
            .copied()
            .filter(|(_, n)| !matches!(*n, "read-clock" | "reached" | "rollback" | "unlock-target"))
            .nth(nth)
            .unwrap();
        let context = format!(
            "{failed:?} (failable effect {nth}, in parts: {in_parts}) failed: {:?}",
            b.log
        );
        assert!(b.begun.is_none(), "{context}: the transaction left open");
        for (i, (s, end)) in b.scripts.iter().zip(&ends).enumerate() {
            let context = format!("{context}, target {i}: {end:?}");
            assert!(!s.locked, "{context}: a lock left held");
            assert!(
                !s.temp || failed == (Some(i), "remove-temp"),
                "{context}: a temp left behind"
            );
            let renamed = matches!(
                &end.end,
                Ok(PublishNowReport::Published { .. })
                    | Err(Unpublished::NotReleased { .. })
                    | Err(Unpublished::Failed {
                        failure: LeaseFailure::NotDurable(_),
                        ..
                    })
            );
            assert_eq!(renamed, s.renamed, "{context}");
            if let Some(epoch) = published(end) {
                assert!(released_at(s, epoch), "{context}: published, not committed");
            }
        }
        runs += 1;
    }
    assert!(runs > 80, "{runs}");
}

#[test]
fn the_lock_free_parts_may_run_concurrently_and_the_batch_ends_the_same() {
    // Released, expired (a takeover), released: run one step after the other, and with the
    // lock-free parts interleaved, the last target's first.
    let registry = registry();
    let setup = || {
        Batch::new(vec![
            Script::new(Some(row_of(1, 1, 1, 0, true)), &[TTL + 5]),
            Script::new(Some(row_of(2, 4, 1, 0, false)), &[TTL + 5]),
            Script::new(Some(row_of(3, 1, 1, 0, true)), &[TTL + 5]),
        ])
    };
    let (mut one, mut parts) = (setup(), setup());
    let (mut m1, mut m2) = (batch(&[1, 2, 3], &registry), batch(&[1, 2, 3], &registry));
    one.run(&mut m1);
    // The drafts of targets 1 and 3, then their directory fsyncs.
    assert_eq!(parts.run_in_parts(&mut m2), 2);
    assert_eq!(
        format!("{:?}", m1.output().unwrap()),
        format!("{:?}", m2.output().unwrap())
    );
    // Each target ran the same steps in the same order; only targets interleave.
    for t in 0..3 {
        let of = |b: &Batch| -> Vec<&str> {
            b.log
                .iter()
                .filter(|(at, _)| *at == Some(t))
                .map(|(_, n)| *n)
                .collect()
        };
        assert_eq!(of(&one), of(&parts), "target {t}");
    }
    assert_ne!(one.log, parts.log, "the parts interleaved");
    // The drafts all before the first lock, the directory fsyncs all after the commit (the
    // takeover, target 1, drafts in its own envelope after the batch).
    let first_lock = parts
        .names()
        .iter()
        .position(|n| *n == "lock-target")
        .unwrap();
    let commit = parts.at(None, "commit")[0];
    for t in [0, 2] {
        assert!(parts.at(Some(t), "write-temp")[0] < first_lock);
        assert!(parts.at(Some(t), "sync-dir")[0] > commit);
    }
}

#[test]
fn an_answer_made_for_one_part_is_refused_by_another_and_by_the_batch() {
    let registry = registry();
    let mut m = batch(&[1, 2], &registry);
    let mut b = Batch::new(vec![
        Script::new(Some(row_of(1, 1, 1, 0, true)), &[10]),
        Script::new(Some(row_of(2, 1, 1, 0, true)), &[10]),
    ]);
    // The reads run one after the other; the file work is then the lock-free parts'.
    let expected = [
        "read-committed-lease",
        "read-clock",
        "read-clock",
        "read-channels",
    ];
    for (t, name) in [0, 1].into_iter().flat_map(|t| expected.map(|n| (t, n))) {
        assert!(m.parts().is_none());
        let effect = m.poll().unwrap();
        assert_eq!((effect.target, effect.effect.name()), (Some(t), name));
        let answer = b.answer(effect);
        m.handle(answer).unwrap();
    }
    let mut parts = m.parts().expect("the drafts are lock-free parts");
    let mut each = parts.each();
    assert_eq!(each.len(), 2);
    let first = each[0].1.poll().unwrap();
    assert!(matches!(first, Effect::Reached(..)));
    let for_first = b.answer(Targeted {
        target: Some(0),
        effect: first,
    });
    // Both parts ask `reached` first: target 0's answer is not target 1's.
    assert!(matches!(
        each[1].1.handle(for_first),
        Err(ProtocolError::KeptAnswer { .. })
    ));
    let first = each[0].1.poll().unwrap();
    let for_first = b.answer(Targeted {
        target: Some(0),
        effect: first,
    });
    each[0].1.handle(for_first).unwrap();
    drop(each);
    // Unfinished parts are not joined; the batch refuses a part's answer.
    assert!(matches!(
        parts.join(),
        Err(ProtocolError::Unfinished { .. })
    ));
    let mut parts = m.parts().unwrap();
    let each = parts.each();
    let effect = each[0].1.poll().unwrap();
    let answer = b.answer(Targeted {
        target: Some(0),
        effect,
    });
    drop(each);
    assert!(m.handle(answer).is_err());
}

#[test]
fn an_empty_batch_or_a_target_given_twice_is_refused() {
    let registry = registry();
    let none: Vec<(TargetId, Applicant)> = Vec::new();
    assert_eq!(
        PublishMany::<&'static str>::new(none, &registry, again).err(),
        Some(BatchRefused::Empty)
    );
    let twice = vec![
        (target_n(2), applicant(1)),
        (target_n(1), applicant(2)),
        (target_n(2), applicant(3)),
    ];
    assert_eq!(
        PublishMany::<&'static str>::new(twice, &registry, again).err(),
        Some(BatchRefused::Duplicate(target_n(2)))
    );
}

#[test]
fn a_batch_refuses_an_answer_kept_from_an_earlier_step() {
    let registry = registry();
    let mut m = batch(&[1, 2], &registry);
    let mut b = Batch::new(vec![
        Script::new(Some(row_of(1, 1, 1, 0, true)), &[10]),
        Script::new(Some(row_of(2, 1, 1, 0, true)), &[10]),
    ]);
    // Target 1's prelude read, kept and handed to target 2's prelude read (same effect).
    let first = m.poll().unwrap();
    let kept = b.answer(first);
    let kept_again = {
        let first = m.poll().unwrap();
        b.answer(first)
    };
    m.handle(kept).unwrap();
    loop {
        let effect = m.poll().unwrap();
        if effect.target == Some(1) {
            assert!(matches!(
                m.handle(kept_again),
                Err(ProtocolError::KeptAnswer { .. })
            ));
            break;
        }
        let answer = b.answer(effect);
        m.handle(answer).unwrap();
    }
}

#[test]
fn every_step_of_a_batch_has_a_serial_of_its_own_second_envelopes_included() {
    // Two takeovers: both publish after the batch, one envelope after the other; every effect
    // the run names, the batch's and both publications', is asked by a step of its own.
    let registry = registry();
    let mut m = batch(&[1, 2, 3], &registry);
    let mut b = Batch::new(vec![
        Script::new(Some(row_of(1, 4, 1, 0, false)), &[TTL + 5]),
        Script::new(Some(row_of(2, 1, 1, 0, true)), &[TTL + 5]),
        Script::new(Some(row_of(3, 6, 1, 0, false)), &[TTL + 5]),
    ]);
    let mut serials = Vec::new();
    while let Some(effect) = m.poll() {
        serials.push(serial_of(&effect.effect));
        let answer = b.answer(effect);
        m.handle(answer).unwrap();
    }
    let ends = m.output().unwrap();
    assert!(ends.iter().all(|end| published(end).is_some()), "{ends:?}");
    assert!(serials.windows(2).all(|w| w[0] < w[1]), "{serials:?}");
}

#[test]
fn the_parts_and_the_batch_never_ask_under_one_serial() {
    // Each part counts in a range of its own, far from the batch's own steps and from every
    // other part's (before and after the transaction): no two asks of a run share a serial, so
    // an answer made for one is taken by no other.
    let registry = registry();
    let mut m = batch(&[1, 2, 3], &registry);
    let mut b = Batch::new(
        (1..=3)
            .map(|t| Script::new(Some(row_of(t, 1, 1, 0, true)), &[10]))
            .collect(),
    );
    assert_eq!(b.run_in_parts(&mut m), 2);
    assert!(m
        .output()
        .unwrap()
        .iter()
        .all(|end| published(end).is_some()));
    let mut serials = b.serials.clone();
    serials.sort_unstable();
    serials.dedup();
    assert_eq!(serials.len(), b.serials.len(), "{:?}", b.serials);
}

#[test]
fn a_file_effect_failing_for_one_target_leaves_the_others_publishing() {
    let registry = registry();
    let mut m = batch(&[1, 2, 3], &registry);
    let mut scripts: Vec<Script> = (1..=3)
        .map(|t| Script::new(Some(row_of(t, 1, 1, 0, true)), &[10]))
        .collect();
    // Both tries (a rename that finds its temp gone writes it again once).
    scripts[1].fail_times = Some(("rename", 2));
    let mut b = Batch::new(scripts);
    b.run(&mut m);
    let ends = m.output().unwrap();
    assert_eq!(published(&ends[0]), Some(2));
    assert_eq!(published(&ends[2]), Some(2));
    assert!(
        matches!(
            &ends[1].end,
            Err(Unpublished::Failed {
                failure: LeaseFailure::Effect("rename"),
                release: None,
                ..
            })
        ),
        "{:?}",
        ends[1]
    );
    // Its release committed with the others: the batch's one commit.
    assert!(released_at(&b.scripts[1], 2) && !b.scripts[1].renamed);
    assert_eq!(b.at(None, "commit").len(), 1);
}

#[test]
fn a_failed_savepoint_ends_the_shared_transaction_and_its_target_never_begins() {
    let registry = registry();
    let mut m = batch(&[1, 2], &registry);
    let mut b = released_failing(2, 1, "savepoint");
    b.run(&mut m);
    let ends = m.output().unwrap();
    // Target 1 renamed under its own savepoint, but the transaction is lost: a lost commit.
    renamed_but_lost(&b.scripts[0], &ends[0]);
    // Target 2's savepoint failed: nothing of its body ran, nothing renamed.
    assert!(!b.scripts[1].renamed && !b.scripts[1].temp, "{:?}", b.log);
    assert!(b.at(Some(1), "write-grant").is_empty(), "{:?}", b.log);
    assert!(matches!(
        &ends[1].end,
        Err(Unpublished::Failed {
            failure: LeaseFailure::Effect("savepoint"),
            ..
        })
    ));
    assert!(b.at(None, "commit").is_empty());
    assert_eq!(b.at(None, "rollback").len(), 1);
}

#[test]
fn a_failed_savepoint_release_ends_the_shared_transaction_too() {
    let registry = registry();
    let mut m = batch(&[1, 2], &registry);
    let mut b = released_failing(2, 1, "release-savepoint");
    b.run(&mut m);
    let ends = m.output().unwrap();
    // Both renamed; neither's grant and release committed: each reports a lost commit.
    for (end, s) in ends.iter().zip(&b.scripts) {
        renamed_but_lost(s, end);
    }
    assert!(b.at(None, "commit").is_empty());
    assert_eq!(b.at(None, "rollback").len(), 1);
}

#[test]
fn a_batch_that_kept_nothing_rolls_back_instead_of_committing() {
    let registry = registry();
    let mut m = batch(&[1], &registry);
    let mut s = Script::new(Some(row_of(1, 1, 1, 0, true)), &[10]);
    s.inside = Some(row_of(1, 2, 7, 5, false));
    let mut b = Batch::new(vec![s]);
    b.run(&mut m);
    assert!(matches!(
        &m.output().unwrap()[0].end,
        Ok(PublishNowReport::Held(_))
    ));
    assert!(b.at(None, "commit").is_empty(), "{:?}", b.log);
    assert_eq!(b.at(None, "rollback").len(), 1);
}

#[test]
fn a_part_takes_no_answer_made_for_the_batch_or_for_its_other_part_and_ends_only_when_done() {
    let registry = registry();
    let mut m = batch(&[1], &registry);
    let mut b = Batch::new(vec![Script::new(Some(row_of(1, 1, 1, 0, true)), &[10])]);
    // The batch's own first answers (the reads), one of them kept.
    let mut kept = None;
    while m.parts().is_none() {
        let effect = m.poll().unwrap();
        let name = effect.effect.name();
        let answer = b.answer(effect);
        if name == "read-clock" && kept.is_none() {
            // Kept, and the step answered again as an executor that retried would.
            kept = Some(answer);
            let effect = m.poll().unwrap();
            let answer = b.answer(effect);
            m.handle(answer).unwrap();
        } else {
            m.handle(answer).unwrap();
        }
    }
    let mut parts = m.parts().unwrap();
    let mut each = parts.each();
    let part = &mut each[0].1;
    // The part's first effect is a reached point: the batch's kept `read-clock` is refused
    // by name, and the part's own first answer, kept, is refused by its after-part below.
    let first = part.poll().unwrap();
    assert_eq!(first.name(), "reached");
    let reached = b.answer(Targeted {
        target: Some(0),
        effect: first,
    });
    assert!(part.handle(kept.take().unwrap()).is_err());
    part.handle(reached).unwrap();
    let before_first = {
        let effect = part.poll().unwrap();
        b.answer(Targeted {
            target: Some(0),
            effect,
        })
    };
    let mut outputs = Vec::new();
    drop(each);
    // Unfinished: its result is not taken.
    let mut each = parts.each();
    let (_, part) = each.pop().unwrap();
    assert!(matches!(
        part.output(),
        Err(ProtocolError::Unfinished { .. })
    ));
    drop(each);
    let mut each = parts.each();
    let part = &mut each[0].1;
    part.handle(before_first).unwrap();
    while let Some(effect) = part.poll() {
        let answer = b.answer(Targeted {
            target: Some(0),
            effect,
        });
        part.handle(answer).unwrap();
    }
    let (_, part) = each.pop().unwrap();
    outputs.push(part.output());
    assert_eq!(outputs, [Ok(())]);
    parts.join().unwrap();
    // Through the transaction to the part after it.
    while m.parts().is_none() {
        let effect = m.poll().unwrap();
        let answer = b.answer(effect);
        m.handle(answer).unwrap();
    }
    // An answer made for the part before the transaction (the same effect: a reached point)
    // is refused by the part after it.
    let earlier = {
        let mut b2 = Batch::new(vec![Script::new(Some(row_of(1, 1, 1, 0, true)), &[10])]);
        let mut m2 = batch(&[1], &registry);
        while m2.parts().is_none() {
            let effect = m2.poll().unwrap();
            let answer = b2.answer(effect);
            m2.handle(answer).unwrap();
        }
        let mut parts2 = m2.parts().unwrap();
        let each2 = parts2.each();
        let effect = each2[0].1.poll().unwrap();
        b2.answer(Targeted {
            target: Some(0),
            effect,
        })
    };
    let mut parts = m.parts().unwrap();
    let mut each = parts.each();
    let part = &mut each[0].1;
    assert_eq!(part.poll().unwrap().name(), "reached");
    assert!(matches!(
        part.handle(earlier),
        Err(ProtocolError::KeptAnswer { .. })
    ));
    let effect = part.poll().unwrap();
    let answer = b.answer(Targeted {
        target: Some(0),
        effect,
    });
    part.handle(answer).unwrap();
}
