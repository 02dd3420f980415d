//! The machines driven by a scripted executor: the exact effects each path names, in order,
//! and what each ends with. A script answers every effect from a tiny in-memory store (one
//! lease row; channel rows only inside a transaction, when a test plants them) and can make
//! one named effect fail.

use super::acquire::{Acquire, AcquireReport, Applicant};
use super::outcome::{LeaseFailure, PublishReport, Unpublished};
use super::publish::Publish;
use super::publish_now::{PublishNow, PublishNowReport};
use super::release::{EndOutcome, Release, ReleaseOutcome};
use super::{
    drive, Answer, Effect, FileEffect, LeaseInput, LeaseProtocol, Machine, ProtocolError,
    StoreEffect,
};
use crate::config::LeaseTtl;
use crate::names::InstanceDigest;
use crate::projection::channel::{ChannelName, ChannelRecord, ChannelRegistry};
use crate::projection::lease::{
    Credential, Fenced, LeaseRecord, LeaseState, NothingHeld, RecordedGrant,
};
use crate::projection::target::TargetId;
use crate::time::Millis;
use crate::token::{HolderToken, TokenHash};

mod batch;

const TTL: u64 = 100;

fn target() -> TargetId {
    TargetId::parse(&"cd".repeat(32)).unwrap()
}

fn hash(n: u8) -> TokenHash {
    HolderToken::from_bytes([n; 32]).hash()
}

fn row(epoch: u64, holder: u8, acquired_at: u64, released: bool) -> LeaseRecord {
    let grant = RecordedGrant {
        holder_token_hash: hash(holder),
        holder_instance_digest: InstanceDigest::parse("h").unwrap(),
        acquired_at: Millis(acquired_at),
        expires_at: Millis(acquired_at + TTL),
    };
    LeaseRecord {
        target_id: target(),
        fencing_epoch: epoch,
        state: if released {
            LeaseState::Released(grant)
        } else {
            LeaseState::Held(grant)
        },
    }
}

fn applicant(n: u8) -> Applicant {
    Applicant {
        token_hash: hash(n),
        holder_instance_digest: InstanceDigest::parse("a").unwrap(),
        ttl: LeaseTtl::from_millis(Some(TTL)).unwrap(),
    }
}

fn credential(epoch: u64, n: u8) -> Credential {
    Credential {
        target_id: target(),
        epoch,
        token_hash: hash(n),
    }
}

/// The scripted executor.
struct Script {
    row: Option<LeaseRecord>,
    /// Clock readings, in order (the last one repeats).
    clocks: Vec<u64>,
    /// The effect that fails (its first occurrence).
    fail: Option<&'static str>,
    /// The effect that fails, and how many of its occurrences (the first ones) do.
    fail_times: Option<(&'static str, usize)>,
    dir_verified: bool,
    /// Whether conditional writes find their row.
    writes_match: bool,
    /// The row as a transaction reads it, when another grant committed after the snapshot.
    inside: Option<LeaseRecord>,
    /// The channel rows as a transaction reads them, when a submission committed after the
    /// draft read them (none otherwise).
    channels_inside: Vec<ChannelRecord>,
    /// The bytes of `current.json` as a grant reads them.
    current: Option<Vec<u8>>,
    in_tx: bool,
    log: Vec<&'static str>,
    /// The failable effect (a store or file effect but the unlock and the rollback, which no
    /// executor fails) that fails, counted from 0 over the run; and how many ran so far.
    fail_nth: Option<usize>,
    failable: usize,
    /// The target lock is held; a rename succeeded; a temp sibling of the run may exist.
    locked: bool,
    renamed: bool,
    temp: bool,
    /// The row as a savepoint saw it (a batch's target).
    saved: Option<Option<LeaseRecord>>,
}

impl Script {
    fn new(row: Option<LeaseRecord>, clocks: &[u64]) -> Self {
        Script {
            row,
            clocks: clocks.to_vec(),
            fail: None,
            fail_times: None,
            dir_verified: true,
            writes_match: true,
            inside: None,
            channels_inside: Vec::new(),
            current: None,
            in_tx: false,
            log: Vec::new(),
            fail_nth: None,
            failable: 0,
            locked: false,
            renamed: false,
            temp: false,
            saved: None,
        }
    }

    fn failing(mut self, effect: &'static str) -> Self {
        self.fail = Some(effect);
        self
    }

    fn answer(&mut self, effect: Effect<'_, &'static str>) -> Answer<LeaseInput<&'static str>> {
        let name = effect.name();
        self.log.push(name);
        let failable = !matches!(
            effect,
            Effect::Clock(_)
                | Effect::Reached(..)
                | Effect::Store(StoreEffect::Rollback(_))
                | Effect::File(FileEffect::UnlockTarget(_))
        );
        let nth = failable && self.fail_nth == Some(self.failable);
        self.failable += usize::from(failable);
        if let Effect::File(FileEffect::WriteTemp(..)) = &effect {
            // A write that fails may leave its temp sibling behind.
            self.temp = true;
        }
        let fails = if nth {
            true
        } else if self.fail == Some(name) {
            self.fail = None;
            true
        } else if let Some((effect, times)) = self.fail_times.filter(|(e, t)| *e == name && *t > 0)
        {
            self.fail_times = Some((effect, times - 1));
            true
        } else {
            false
        };
        if fails {
            return effect
                .fail(name)
                .expect("only a store or file effect fails");
        }
        match effect {
            Effect::Store(StoreEffect::ReadCommittedLease(ask)) => ask.answer(Ok(self.row.clone())),
            Effect::Store(StoreEffect::ReadLease(ask)) => {
                ask.answer(Ok(self.inside.take().or_else(|| self.row.clone())))
            }
            Effect::File(FileEffect::ReadCurrent(ask)) => ask.answer(Ok(self.current.clone())),
            Effect::Clock(ask) => {
                let now = if self.clocks.len() > 1 {
                    self.clocks.remove(0)
                } else {
                    self.clocks[0]
                };
                ask.answer(Millis(now))
            }
            Effect::Store(StoreEffect::Begin(ask)) => {
                self.in_tx = true;
                ask.answer(Ok(()))
            }
            Effect::Store(StoreEffect::Commit(ask) | StoreEffect::Rollback(ask)) => {
                self.in_tx = false;
                ask.answer(Ok(()))
            }
            Effect::Store(StoreEffect::Savepoint(ask)) => {
                self.saved = Some(self.row.clone());
                ask.answer(Ok(()))
            }
            Effect::Store(StoreEffect::ReleaseSavepoint(ask)) => {
                self.saved = None;
                ask.answer(Ok(()))
            }
            Effect::Store(StoreEffect::RollbackToSavepoint(ask)) => {
                self.row = self.saved.take().expect("a savepoint to roll back to");
                ask.answer(Ok(()))
            }
            Effect::Store(StoreEffect::ReadChannels(ask)) if self.in_tx => {
                ask.answer(Ok(self.channels_inside.clone()))
            }
            Effect::Store(StoreEffect::ReadChannels(ask)) => ask.answer(Ok(Vec::new())),
            Effect::Store(StoreEffect::WriteGrant(plan, ask)) => {
                if self.writes_match {
                    self.row = Some(plan.record());
                }
                ask.answer(Ok(self.writes_match))
            }
            Effect::Store(StoreEffect::WriteRelease(plan, ask)) => {
                if self.writes_match {
                    if let Some(LeaseRecord {
                        state: LeaseState::Held(g),
                        ..
                    }) = &self.row
                    {
                        let released = LeaseState::Released(g.clone());
                        self.row = Some(LeaseRecord {
                            target_id: plan.target_id.clone(),
                            fencing_epoch: plan.epoch,
                            state: released,
                        });
                    }
                }
                ask.answer(Ok(self.writes_match))
            }
            Effect::File(FileEffect::PrepareDir(ask)) => ask.answer(Ok(self.dir_verified)),
            Effect::File(FileEffect::LockTarget(ask)) => {
                self.locked = true;
                ask.answer(Ok(()))
            }
            Effect::File(FileEffect::UnlockTarget(ask)) => {
                self.locked = false;
                ask.answer(Ok(()))
            }
            Effect::File(FileEffect::Rename(ask)) => {
                // Every machine renames only under both locks.
                assert!(self.locked && self.in_tx, "a rename outside the locks");
                self.renamed = true;
                self.temp = false;
                ask.answer(Ok(()))
            }
            Effect::File(FileEffect::RemoveTemp(ask)) => {
                self.temp = false;
                ask.answer(Ok(()))
            }
            Effect::File(
                FileEffect::SyncParents(ask)
                | FileEffect::RemoveOrphans(ask)
                | FileEffect::WriteTemp(_, ask)
                | FileEffect::SyncDir(ask),
            ) => ask.answer(Ok(())),
            Effect::Reached(_, ask) => ask.answer(()),
        }
    }

    fn run<M: Machine<Protocol = LeaseProtocol<&'static str>>>(&mut self, machine: &mut M) {
        assert_eq!(drive(machine, |effect| Some(self.answer(effect))), Ok(true));
    }
}

/// A publication's end as the tests read it: the publication's result, and why its release
/// did not commit.
type Ran = (
    Result<PublishReport, LeaseFailure<&'static str>>,
    Option<LeaseFailure<&'static str>>,
);

fn ran(end: Result<PublishReport, Unpublished<&'static str>>) -> Ran {
    match end {
        Ok(published) => (Ok(published), None),
        Err(Unpublished::NotReleased { published, release }) => (Ok(published), Some(release)),
        Err(Unpublished::Failed {
            failure, release, ..
        }) => (Err(failure), release),
        Err(Unpublished::NotStarted { error, .. }) => panic!("not started: {error}"),
    }
}

/// A one-shot's end as the tests read it, once it was granted.
fn ran_now(end: Result<PublishNowReport, Unpublished<&'static str>>) -> Ran {
    ran(end.map(|now| match now {
        PublishNowReport::Published { published, .. } => published,
        PublishNowReport::Held(held) => panic!("held: {held:?}"),
    }))
}

/// The release ran, committed, and released the grant.
#[track_caller]
fn assert_released(s: &Script, release: Option<LeaseFailure<&'static str>>, context: &str) {
    assert!(release.is_none(), "{context}: {release:?}");
    assert!(
        matches!(
            &s.row,
            Some(LeaseRecord {
                state: LeaseState::Released(_),
                ..
            })
        ),
        "{context}: {:?}",
        s.row
    );
    assert!(s.log.contains(&"write-release"), "{context}");
}

/// The bytes of a document of `epoch` on the test target.
fn document(epoch: u64) -> Vec<u8> {
    crate::projection::draft::Draft::compose(&target(), epoch, &registry(), Vec::new(), Millis(1))
        .unwrap()
        .bytes()
        .to_vec()
}

fn registry() -> ChannelRegistry {
    ChannelRegistry::new([]).unwrap()
}

const GRANT: [&str; 8] = [
    "lock-target",
    "begin",
    "read-lease",
    "read-current",
    "read-clock",
    "write-grant",
    "commit",
    "unlock-target",
];

#[test]
fn acquire_over_a_released_row_grants_the_next_epoch_under_both_locks() {
    let mut s = Script::new(Some(row(3, 1, 0, true)), &[10]);
    let mut m = Acquire::new(applicant(2));
    s.run(&mut m);
    let Ok(AcquireReport::Granted(plan)) = m.output().unwrap() else {
        panic!()
    };
    assert_eq!((plan.prior_epoch, plan.epoch), (3, 4));
    let mut expected = vec!["read-committed-lease", "read-clock"];
    expected.extend(GRANT);
    assert_eq!(s.log, expected);
}

#[test]
fn acquire_answers_a_live_grant_and_an_absent_row_without_any_lock() {
    let mut s = Script::new(Some(row(1, 1, 0, false)), &[50]);
    let mut m = Acquire::<&str>::new(applicant(2));
    s.run(&mut m);
    let Ok(AcquireReport::Held(held)) = m.output().unwrap() else {
        panic!()
    };
    assert_eq!((held.fencing_epoch, held.retry_after_ms), (1, 50));
    assert_eq!(s.log, ["read-committed-lease", "read-clock"]);

    let mut s = Script::new(None, &[50]);
    let mut m = Acquire::<&str>::new(applicant(2));
    s.run(&mut m);
    assert!(matches!(
        m.output().unwrap(),
        Err(LeaseFailure::NotAdmitted)
    ));
    assert_eq!(s.log, ["read-committed-lease"]);
}

#[test]
fn acquire_refused_inside_the_locks_rolls_back() {
    // The snapshot saw an expired grant; by the time the locks are held another grant has
    // committed: `Held`, rolled back, nothing written.
    let mut s = Script::new(Some(row(1, 1, 0, false)), &[200]);
    s.inside = Some(row(2, 3, 199, false));
    let mut m = Acquire::<&str>::new(applicant(2));
    s.run(&mut m);
    assert!(matches!(m.output().unwrap(), Ok(AcquireReport::Held(h)) if h.fencing_epoch == 2));
    assert_eq!(
        s.log,
        [
            "read-committed-lease",
            "read-clock",
            "lock-target",
            "begin",
            "read-lease",
            "read-current",
            "read-clock",
            "rollback",
            "unlock-target"
        ]
    );
}

#[test]
fn acquire_failures_end_the_envelope_in_order() {
    // The target lock cannot be had: nothing else happens.
    let mut s = Script::new(Some(row(1, 1, 0, true)), &[10]).failing("lock-target");
    let mut m = Acquire::new(applicant(2));
    s.run(&mut m);
    assert!(matches!(
        m.output().unwrap(),
        Err(LeaseFailure::Effect("lock-target"))
    ));
    assert_eq!(s.log, ["read-committed-lease", "read-clock", "lock-target"]);
    // The transaction cannot begin: the target lock is let go.
    let mut s = Script::new(Some(row(1, 1, 0, true)), &[10]).failing("begin");
    let mut m = Acquire::new(applicant(2));
    s.run(&mut m);
    assert!(matches!(
        m.output().unwrap(),
        Err(LeaseFailure::Effect("begin"))
    ));
    assert_eq!(&s.log[2..], ["lock-target", "begin", "unlock-target"]);
    // The grant's write finds no row: rolled back.
    let mut s = Script::new(Some(row(1, 1, 0, true)), &[10]);
    s.writes_match = false;
    let mut m = Acquire::new(applicant(2));
    s.run(&mut m);
    assert!(matches!(m.output().unwrap(), Err(LeaseFailure::RowChanged)));
    assert_eq!(&s.log[7..], ["write-grant", "rollback", "unlock-target"]);
    // The commit fails: rolled back, the lock let go, no grant.
    let mut s = Script::new(Some(row(1, 1, 0, true)), &[10]).failing("commit");
    let mut m = Acquire::new(applicant(2));
    s.run(&mut m);
    assert!(matches!(
        m.output().unwrap(),
        Err(LeaseFailure::Effect("commit"))
    ));
    assert_eq!(
        &s.log[7..],
        ["write-grant", "commit", "rollback", "unlock-target"]
    );
}

/// The effects of a publication that succeeds, with the directory chain already durable: the
/// draft and its temp file with no lock held, then the target lock and the transaction (the
/// sweep right after the rename), the target lock let go, then the directory fsync with no
/// lock held.
const PUBLISHED: [&str; 28] = [
    "read-clock",
    "read-channels",
    "reached",
    "prepare-dir",
    "write-temp",
    "reached",
    "lock-target",
    "begin",
    "reached",
    "read-lease",
    "read-clock",
    "reached",
    "read-current",
    "read-channels",
    "read-clock",
    "reached",
    "rename",
    "reached",
    "remove-orphans",
    "read-lease",
    "read-clock",
    "write-release",
    "reached",
    "commit",
    "unlock-target",
    "reached",
    "sync-dir",
    "reached",
];

fn publish_end(
    s: &mut Script,
    epoch: u64,
    n: u8,
) -> Result<PublishReport, Unpublished<&'static str>> {
    let registry = registry();
    let mut m = Publish::new(credential(epoch, n), &registry);
    s.run(&mut m);
    m.output().unwrap()
}

fn publish(s: &mut Script, epoch: u64, n: u8) -> Ran {
    ran(publish_end(s, epoch, n))
}

#[test]
fn a_publication_runs_every_step_inside_both_locks_and_releases() {
    let mut s = Script::new(Some(row(2, 1, 0, false)), &[10, 20, 30]);
    let (result, release) = publish(&mut s, 2, 1);
    let published = result.unwrap();
    assert_eq!(
        (published.fencing_epoch, published.published_at),
        (2, Millis(10)),
        "published as drafted, at the draft's clock"
    );
    assert!(published.bytes > 0);
    assert_released(&s, release, "");
    assert_eq!(s.log, PUBLISHED);
    // A directory chain not yet known durable has its parents fsynced first.
    let mut s = Script::new(Some(row(2, 1, 0, false)), &[10]);
    s.dir_verified = false;
    let _ = publish(&mut s, 2, 1);
    assert_eq!(&s.log[3..6], ["prepare-dir", "sync-parents", "write-temp"]);
}

#[test]
fn a_fenced_publication_never_renames_removes_its_draft_and_does_not_release_a_successor() {
    let mut s = Script::new(Some(row(3, 2, 0, false)), &[10]);
    let (result, release) = publish(&mut s, 2, 1);
    assert!(matches!(
        result,
        Err(LeaseFailure::Fenced(Fenced::Superseded {
            current_epoch: 3
        }))
    ));
    // The release found the successor's grant, not the presenter's: nothing to report,
    // nothing written, the successor still holds.
    assert!(release.is_none());
    assert!(matches!(
        &s.row,
        Some(LeaseRecord { fencing_epoch: 3, state: LeaseState::Held(g), .. })
            if g.holder_token_hash.ct_eq(&hash(2))
    ));
    for effect in ["rename", "sync-dir", "write-release"] {
        assert!(!s.log.contains(&effect), "{effect} in {:?}", s.log);
    }
    assert_eq!(
        &s.log[s.log.len() - 3..],
        ["commit", "unlock-target", "remove-temp"],
        "the draft's temp is removed after the locks are let go"
    );
    // Expired at revalidation: fenced too.
    let mut s = Script::new(Some(row(2, 1, 0, false)), &[TTL]);
    let (result, _) = publish(&mut s, 2, 1);
    assert!(matches!(result, Err(LeaseFailure::Fenced(Fenced::Expired))));
    assert!(!s.log.contains(&"rename"));
    assert!(s.log.contains(&"remove-temp"));
}

#[test]
fn a_publication_past_its_deadline_removes_its_temp_and_never_renames() {
    let mut s = Script::new(Some(row(2, 1, 0, false)), &[10, 20, TTL]);
    let (result, release) = publish(&mut s, 2, 1);
    assert!(matches!(result, Err(LeaseFailure::Expired(_))));
    assert_released(&s, release, "");
    assert!(!s.log.contains(&"rename"));
    let at = s.log.iter().position(|e| *e == "read-channels").unwrap() + 1;
    let at = at
        + s.log[at..]
            .iter()
            .position(|e| *e == "read-channels")
            .unwrap();
    assert_eq!(
        &s.log[at..at + 3],
        ["read-channels", "read-clock", "read-lease"],
        "the deadline check is the last step before the rename, and fails into the release"
    );
    assert_eq!(
        &s.log[s.log.len() - 3..],
        ["commit", "unlock-target", "remove-temp"]
    );
}

#[test]
fn a_failing_file_step_removes_the_temp_when_one_may_exist_and_always_releases() {
    for (fails, temp_removed) in [("prepare-dir", false), ("write-temp", true)] {
        let mut s = Script::new(Some(row(2, 1, 0, false)), &[10]).failing(fails);
        let (result, release) = publish(&mut s, 2, 1);
        assert!(
            matches!(result, Err(LeaseFailure::Effect(e)) if e == fails),
            "{fails}"
        );
        assert_released(&s, release, fails);
        assert_eq!(
            s.log.contains(&"remove-temp"),
            temp_removed,
            "{fails}: {:?}",
            s.log
        );
        assert!(!s.log.contains(&"sync-dir"), "{fails}");
        assert_eq!(
            s.log.last(),
            Some(if temp_removed {
                &"remove-temp"
            } else {
                &"unlock-target"
            })
        );
    }
    // A failed sweep is not the publication's: the document is in place.
    let mut s = Script::new(Some(row(2, 1, 0, false)), &[10]).failing("remove-orphans");
    let (result, release) = publish(&mut s, 2, 1);
    assert!(result.is_ok());
    assert_released(&s, release, "");
    // The directory fsync fails after the rename: published, not durable, released.
    let mut s = Script::new(Some(row(2, 1, 0, false)), &[10]).failing("sync-dir");
    let (result, release) = publish(&mut s, 2, 1);
    assert!(matches!(result, Err(LeaseFailure::NotDurable("sync-dir"))));
    assert_released(&s, release, "");
    // A parent fsync fails: nothing is written.
    let mut s = Script::new(Some(row(2, 1, 0, false)), &[10]).failing("sync-parents");
    s.dir_verified = false;
    let (result, _) = publish(&mut s, 2, 1);
    assert!(matches!(result, Err(LeaseFailure::Effect("sync-parents"))));
    assert!(!s.log.contains(&"write-temp"));
}

#[test]
fn a_publication_that_cannot_start_or_commit_says_so() {
    let mut s = Script::new(Some(row(2, 1, 0, false)), &[10]).failing("lock-target");
    assert!(matches!(
        publish_end(&mut s, 2, 1),
        Err(Unpublished::NotStarted {
            error: "lock-target",
            ..
        })
    ));
    assert_eq!(
        s.log,
        [
            "read-clock",
            "read-channels",
            "reached",
            "prepare-dir",
            "write-temp",
            "reached",
            "lock-target",
            "remove-temp"
        ],
        "a busy target lock: the draft's temp is removed, nothing else happened"
    );
    let mut s = Script::new(Some(row(2, 1, 0, false)), &[10]).failing("begin");
    assert!(matches!(
        publish_end(&mut s, 2, 1),
        Err(Unpublished::NotStarted { error: "begin", .. })
    ));
    assert_eq!(
        s.log,
        [
            "read-clock",
            "read-channels",
            "reached",
            "prepare-dir",
            "write-temp",
            "reached",
            "lock-target",
            "begin",
            "unlock-target",
            "remove-temp"
        ],
        "a busy store: the draft's temp is removed, nothing else happened"
    );
    let mut s = Script::new(Some(row(2, 1, 0, false)), &[10]).failing("commit");
    let (result, release) = publish(&mut s, 2, 1);
    assert!(result.is_ok(), "the rename happened");
    assert!(matches!(release, Some(LeaseFailure::Effect("commit"))));
    assert_eq!(
        &s.log[s.log.len() - 6..],
        [
            "commit",
            "rollback",
            "unlock-target",
            "reached",
            "sync-dir",
            "reached"
        ],
        "the renamed document is made durable all the same"
    );
    // A row missing or broken at revalidation.
    let mut s = Script::new(None, &[10]);
    let (result, release) = publish(&mut s, 2, 1);
    assert!(matches!(result, Err(LeaseFailure::NotAdmitted)));
    assert!(matches!(release, Some(LeaseFailure::NotAdmitted)));
}

#[test]
fn one_shot_publishes_over_a_released_row_in_one_envelope() {
    let registry = registry();
    let mut s = Script::new(Some(row(1, 1, 0, true)), &[10]);
    let mut m = PublishNow::new(applicant(2), &registry);
    s.run(&mut m);
    let (result, release) = ran_now(m.output().unwrap());
    assert_eq!(result.unwrap().fencing_epoch, 2);
    assert_released(&s, release, "");
    assert_eq!(s.log.iter().filter(|e| **e == "commit").count(), 1);
    assert_eq!(s.log.iter().filter(|e| **e == "lock-target").count(), 1);
    // The document in place is read once, by the grant: the publication's fence does not
    // read it again under the same locks.
    assert_eq!(positions(&s.log, "read-current").len(), 1, "{:?}", s.log);
    assert!(s.log.contains(&"rename"));
    // Drafted for the epoch it was granted: one temp file, written before the transaction.
    let writes: Vec<usize> = positions(&s.log, "write-temp");
    assert_eq!(writes.len(), 1, "{:?}", s.log);
    assert!(writes[0] < positions(&s.log, "begin")[0]);
}

fn positions(log: &[&str], effect: &str) -> Vec<usize> {
    log.iter()
        .enumerate()
        .filter(|(_, e)| **e == effect)
        .map(|(i, _)| i)
        .collect()
}

fn channel_row(watermark: u64) -> ChannelRecord {
    ChannelRecord {
        target_id: target(),
        channel: ChannelName::parse("c").unwrap(),
        source_watermark: watermark.into(),
        envelope_json: r#"{"schema":"s"}"#.into(),
        captured_at: Millis(1),
        expires_at: Millis(TTL * 10),
        updated_at: Millis(2),
        degraded_reason: None,
    }
}

#[test]
fn a_draft_whose_rows_moved_is_composed_and_written_again_inside_the_transaction() {
    let mut s = Script::new(Some(row(2, 1, 0, false)), &[10, 20, 30]);
    s.channels_inside = vec![channel_row(7)];
    let (result, release) = publish(&mut s, 2, 1);
    let published = result.unwrap();
    assert_eq!(
        published.published_at,
        Millis(20),
        "composed again at the revalidation's clock"
    );
    assert_released(&s, release, "");
    let begin = positions(&s.log, "begin")[0];
    let writes = positions(&s.log, "write-temp");
    assert_eq!(writes.len(), 2, "{:?}", s.log);
    assert!(writes[0] < begin && begin < writes[1]);
    // Inside: the new temp (replacing the draft's), the deadline, the rename.
    assert_eq!(
        &s.log[writes[1] - 1..writes[1] + 3],
        ["prepare-dir", "write-temp", "read-clock", "reached"]
    );
    let empty = Script::new(Some(row(2, 1, 0, false)), &[10, 20, 30]);
    let mut unmoved = empty;
    let (result, _) = publish(&mut unmoved, 2, 1);
    assert!(
        published.bytes > result.unwrap().bytes,
        "the renamed document holds the row committed after the draft"
    );
}

#[test]
fn a_one_shot_granted_another_epoch_than_it_drafted_for_composes_again() {
    let registry = registry();
    // The snapshot shows epoch 1 released; by the time the transaction reads the row, epoch 3
    // was granted and released.
    let mut s = Script::new(Some(row(1, 1, 0, true)), &[10, 20]);
    s.inside = Some(row(3, 1, 0, true));
    let mut m = PublishNow::new(applicant(2), &registry);
    s.run(&mut m);
    let (result, _) = ran_now(m.output().unwrap());
    assert_eq!(result.unwrap().fencing_epoch, 4);
    assert_eq!(positions(&s.log, "write-temp").len(), 2, "{:?}", s.log);
}

#[test]
fn one_shot_that_cannot_begin_removes_its_draft() {
    let registry = registry();
    let mut s = Script::new(Some(row(1, 1, 0, true)), &[10]).failing("begin");
    let mut m = PublishNow::new(applicant(2), &registry);
    s.run(&mut m);
    assert!(matches!(
        m.output().unwrap(),
        Err(Unpublished::Failed {
            failure: LeaseFailure::Effect("begin"),
            epoch: None,
            release: None
        })
    ));
    assert_eq!(
        &s.log[s.log.len() - 3..],
        ["begin", "unlock-target", "remove-temp"]
    );
}

#[test]
fn one_shot_refused_inside_its_locks_removes_its_draft() {
    let registry = registry();
    let mut s = Script::new(Some(row(1, 1, 0, true)), &[10]);
    s.inside = Some(row(2, 3, 5, false)); // granted to another after the snapshot
    let mut m = PublishNow::new(applicant(2), &registry);
    s.run(&mut m);
    assert!(matches!(m.output().unwrap(), Ok(PublishNowReport::Held(_))));
    assert_eq!(
        &s.log[s.log.len() - 3..],
        ["rollback", "unlock-target", "remove-temp"]
    );
    assert!(!s.log.contains(&"rename"));
}

#[test]
fn one_shot_over_an_expired_grant_commits_the_takeover_alone_then_publishes_with_it() {
    let registry = registry();
    let mut s = Script::new(Some(row(1, 1, 0, false)), &[TTL + 5]);
    let mut m = PublishNow::new(applicant(2), &registry);
    s.run(&mut m);
    let end = m.output().unwrap();
    assert!(
        matches!(&end, Ok(PublishNowReport::Published { takeover: true, .. })),
        "{end:?}"
    );
    let (result, release) = ran_now(end);
    assert_eq!(result.unwrap().fencing_epoch, 2);
    assert_released(&s, release, "the takeover's publication releases");
    let mut expected = vec!["read-committed-lease", "read-clock"];
    expected.extend(GRANT);
    assert_eq!(
        s.log[..expected.len()],
        expected,
        "the grant commits on its own, nothing renamed in its envelope"
    );
    assert_eq!(
        s.log[expected.len()..],
        PUBLISHED,
        "then a two-step publication with the grant, in an envelope of its own"
    );
    // A live grant: held, no lock.
    let mut s = Script::new(Some(row(1, 1, 0, false)), &[5]);
    let mut m = PublishNow::<&str>::new(applicant(2), &registry);
    s.run(&mut m);
    assert!(matches!(m.output().unwrap(), Ok(PublishNowReport::Held(_))));
    assert_eq!(s.log, ["read-committed-lease", "read-clock"]);
}

#[test]
fn release_needs_the_epoch_and_the_token_and_rolls_back_a_failed_write() {
    let run = |s: &mut Script, epoch, n| {
        let mut m = Release::new(credential(epoch, n));
        s.run(&mut m);
        m.output().unwrap()
    };
    let mut s = Script::new(Some(row(2, 1, 0, false)), &[10]);
    assert_eq!(run(&mut s, 2, 1).unwrap(), ReleaseOutcome::Released);
    assert_eq!(
        s.log,
        [
            "lock-target",
            "begin",
            "read-lease",
            "read-clock",
            "write-release",
            "commit",
            "unlock-target"
        ]
    );
    let mut s = Script::new(Some(row(2, 1, 0, false)), &[10]);
    assert_eq!(
        run(&mut s, 2, 9).unwrap(),
        ReleaseOutcome::NotHolder(Fenced::TokenMismatch)
    );
    assert!(!s.log.contains(&"write-release"));
    let mut s = Script::new(Some(row(2, 1, 0, false)), &[10]);
    s.writes_match = false;
    assert!(matches!(run(&mut s, 2, 1), Err(LeaseFailure::RowChanged)));
    assert_eq!(&s.log[4..], ["write-release", "rollback", "unlock-target"]);
    let mut s = Script::new(Some(row(2, 1, 0, false)), &[10]).failing("lock-target");
    assert!(matches!(
        run(&mut s, 2, 1),
        Err(LeaseFailure::Effect("lock-target"))
    ));
    let mut s = Script::new(Some(row(2, 1, 0, false)), &[10]).failing("commit");
    assert!(matches!(
        run(&mut s, 2, 1),
        Err(LeaseFailure::Effect("commit"))
    ));
}

#[test]
fn an_operator_end_releases_exactly_the_live_grant_and_fences_its_holder() {
    let run = |s: &mut Script| {
        let mut m = Release::<&str, _>::end();
        s.run(&mut m);
        m.output().unwrap()
    };
    let mut s = Script::new(Some(row(2, 1, 0, false)), &[10]);
    match run(&mut s).unwrap() {
        EndOutcome::Ended(plan) => {
            assert_eq!(
                (plan.release.epoch, plan.grant.expires_at),
                (2, Millis(TTL))
            );
            assert!(plan.release.token_hash.ct_eq(&hash(1)));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        s.log,
        [
            "lock-target",
            "begin",
            "read-lease",
            "read-clock",
            "write-release",
            "commit",
            "unlock-target"
        ]
    );
    // The holder of the ended grant is fenced; the epoch is kept for the next grant to raise.
    let row_after = s.row.clone().unwrap();
    assert_eq!(row_after.fencing_epoch, 2);
    assert!(matches!(row_after.state, LeaseState::Released(_)));
    let mut holder = Release::<&str>::new(credential(2, 1));
    s.run(&mut holder);
    assert_eq!(
        holder.output().unwrap().unwrap(),
        ReleaseOutcome::NotHolder(Fenced::Released)
    );
    // An expired grant is ended as well: released, so a clock set back cannot revive it.
    let mut s = Script::new(Some(row(2, 1, 0, false)), &[TTL]);
    match run(&mut s).unwrap() {
        EndOutcome::Closed(plan) => assert_eq!(plan.release.epoch, 2),
        other => panic!("{other:?}"),
    }
    assert!(s.log.contains(&"write-release"), "{:?}", s.log);
    assert!(matches!(
        s.row.clone().unwrap().state,
        LeaseState::Released(_)
    ));
    // Nothing held to end: nothing written, the transaction committed empty.
    for (row, now, why) in [
        (row(2, 1, 0, true), 10, NothingHeld::Released),
        (
            LeaseRecord::admitted(target()),
            10,
            NothingHeld::NeverGranted,
        ),
    ] {
        let epoch = row.fencing_epoch;
        let mut s = Script::new(Some(row), &[now]);
        match run(&mut s).unwrap() {
            EndOutcome::NothingHeld { epoch: e, why: w } => assert_eq!((e, w), (epoch, why)),
            other => panic!("{other:?}"),
        }
        assert!(!s.log.contains(&"write-release"), "{why:?}: {:?}", s.log);
    }
    let mut s = Script::new(None, &[10]);
    assert!(matches!(run(&mut s), Err(LeaseFailure::NotAdmitted)));
    let mut s = Script::new(Some(row(2, 1, 0, false)), &[10]);
    s.writes_match = false;
    assert!(matches!(run(&mut s), Err(LeaseFailure::RowChanged)));
    assert_eq!(&s.log[4..], ["write-release", "rollback", "unlock-target"]);
}

/// Drives `machine` through its first `effects` effects only, and stops.
fn stop_after<M: Machine<Protocol = LeaseProtocol<&'static str>>>(
    s: &mut Script,
    machine: &mut M,
    effects: usize,
) {
    let mut left = effects;
    let ended = drive(machine, |effect| {
        left = left.checked_sub(1)?;
        Some(s.answer(effect))
    });
    assert_eq!(ended, Ok(false));
}

#[test]
fn an_answer_the_machine_did_not_ask_for_is_refused_and_changes_nothing() {
    // An answer made for another machine's effect (a release's target lock) handed to an
    // acquisition, which asked for the committed row.
    let release = Release::<&str>::new(credential(1, 1));
    let Some(Effect::File(FileEffect::LockTarget(ask))) = release.poll() else {
        panic!("a release takes the target lock first")
    };
    let mut m = Acquire::<&str>::new(applicant(1));
    assert_eq!(
        m.handle(ask.answer(Ok(()))),
        Err(ProtocolError::WrongAnswer {
            machine: "acquire prelude",
            answered: "lock-target"
        })
    );
    assert_eq!(
        m.poll().map(|e| e.name()),
        Some("read-committed-lease"),
        "unchanged"
    );
    // An answer kept from an earlier poll: the clock's question, answered after the machine
    // moved on (the row was read, the clock answered, the target lock is asked now).
    let mut s = Script::new(Some(row(1, 1, 0, true)), &[10]);
    let mut m = Acquire::<&str>::new(applicant(2));
    stop_after(&mut s, &mut m, 1);
    let Some(Effect::Clock(stale)) = m.poll() else {
        panic!("the clock is asked after the row")
    };
    let stale = stale.answer(Millis(10));
    stop_after(&mut s, &mut m, 1);
    assert_eq!(m.poll().map(|e| e.name()), Some("lock-target"));
    assert!(matches!(
        m.handle(stale),
        Err(ProtocolError::KeptAnswer {
            answered: "read-clock",
            asked: 1,
            current: 2,
            ..
        })
    ));
    assert_eq!(m.poll().map(|e| e.name()), Some("lock-target"), "unchanged");
    // The machine still runs to its end.
    s.run(&mut m);
    assert!(matches!(m.output(), Ok(Ok(AcquireReport::Granted(_)))));
    // An ended machine takes no answer.
    let release = Release::<&str>::new(credential(1, 1));
    let Some(Effect::File(FileEffect::LockTarget(ask))) = release.poll() else {
        panic!()
    };
    let mut s = Script::new(None, &[10]);
    let mut m = Acquire::<&str>::new(applicant(1));
    s.run(&mut m);
    assert!(m.handle(ask.answer(Ok(()))).is_err());
    assert!(matches!(m.output(), Ok(Err(LeaseFailure::NotAdmitted))));
}

#[test]
fn an_answer_kept_from_another_effect_of_the_same_kind_is_refused() {
    // A successful `sync-parents` answer (the same kind of answer as a rename's) kept, then
    // handed to the publication when it asks for the rename: refused, nothing renamed.
    let registry = registry();
    let mut s = Script::new(Some(row(2, 1, 0, false)), &[10, 20, 30]);
    s.dir_verified = false;
    let mut m = Publish::new(credential(2, 1), &registry);
    while m.poll().map(|e| e.name()) != Some("sync-parents") {
        stop_after(&mut s, &mut m, 1);
    }
    let Some(Effect::File(FileEffect::SyncParents(kept))) = m.poll() else {
        panic!("the parents are synced")
    };
    let kept = kept.answer(Ok(()));
    while m.poll().map(|e| e.name()) != Some("rename") {
        stop_after(&mut s, &mut m, 1);
    }
    assert!(matches!(
        m.handle(kept),
        Err(ProtocolError::KeptAnswer {
            answered: "sync-parents",
            ..
        })
    ));
    assert_eq!(m.poll().map(|e| e.name()), Some("rename"), "unchanged");
    // A committed-row read kept from the prelude, handed to the clock's question.
    let mut s = Script::new(Some(row(1, 1, 0, true)), &[10]);
    let mut m = Acquire::<&str>::new(applicant(2));
    let Some(Effect::Store(StoreEffect::ReadCommittedLease(kept))) = m.poll() else {
        panic!("the prelude reads the committed row")
    };
    let kept = kept.answer(Ok(None));
    stop_after(&mut s, &mut m, 1);
    assert!(m.handle(kept).is_err());
    assert_eq!(m.poll().map(|e| e.name()), Some("read-clock"), "unchanged");
    s.run(&mut m);
    assert!(matches!(m.output(), Ok(Ok(AcquireReport::Granted(_)))));
    // A failure made for another effect (a release's target lock, busy) is not taken for the
    // committed-row read's failure.
    let release = Release::<&str>::new(credential(1, 1));
    let Some(Effect::File(FileEffect::LockTarget(ask))) = release.poll() else {
        panic!()
    };
    let mut m = Acquire::<&str>::new(applicant(2));
    assert!(m.handle(ask.fail("busy")).is_err());
    assert_eq!(
        m.poll().map(|e| e.name()),
        Some("read-committed-lease"),
        "unchanged"
    );
}

#[test]
fn a_result_is_only_taken_from_a_finished_machine() {
    let unfinished = |e| matches!(e, Err(ProtocolError::Unfinished { .. }));
    assert!(unfinished(
        Acquire::<&str>::new(applicant(1)).output().map(drop)
    ));
    // Inside the locks: the row and the clock read, the target lock taken.
    let mut s = Script::new(Some(row(1, 1, 0, true)), &[10]);
    let mut m = Acquire::<&str>::new(applicant(2));
    stop_after(&mut s, &mut m, 4);
    assert!(unfinished(m.output().map(drop)));
    // The grant written but not yet committed: no grant to report.
    let mut s = Script::new(Some(row(1, 1, 0, true)), &[10]);
    let mut m = Acquire::<&str>::new(applicant(2));
    stop_after(&mut s, &mut m, 8);
    assert_eq!(m.poll().map(|e| e.name()), Some("commit"));
    assert!(unfinished(m.output().map(drop)));
    // A one-shot drafting before its transaction.
    let registry = registry();
    let mut s = Script::new(Some(row(1, 1, 0, true)), &[10]);
    let mut m = PublishNow::<&str>::new(applicant(2), &registry);
    stop_after(&mut s, &mut m, 3);
    assert!(unfinished(m.output().map(drop)));
    // A release holding the target lock; a publication inside its transaction.
    let mut s = Script::new(Some(row(1, 1, 0, true)), &[10]);
    let mut m = Release::<&str>::new(credential(1, 1));
    stop_after(&mut s, &mut m, 1);
    assert!(unfinished(m.output().map(drop)));
    let mut s = Script::new(Some(row(2, 1, 0, false)), &[10]);
    let mut m = Publish::<&str>::new(credential(2, 1), &registry);
    stop_after(&mut s, &mut m, 9);
    assert!(unfinished(m.output().map(drop)));
}

#[test]
fn a_draft_swept_before_the_transaction_is_written_again_inside_it_once() {
    // The first rename finds the draft's temp gone (a successor's sweep removed it while this
    // publication held no lock): the draft is written again inside the transaction, the
    // deadline checked again, and renamed.
    let mut s = Script::new(Some(row(2, 1, 0, false)), &[10]).failing("rename");
    let (result, release) = publish(&mut s, 2, 1);
    assert!(result.is_ok(), "{:?}", s.log);
    assert_released(&s, release, "");
    let renames = positions(&s.log, "rename");
    assert_eq!(renames.len(), 2, "{:?}", s.log);
    assert_eq!(
        &s.log[renames[0]..renames[1] + 1],
        ["rename", "write-temp", "read-clock", "reached", "rename"]
    );
    // A temp written inside the transaction is not written a third time: a rename that fails
    // again fails the publication (and the release still runs).
    let mut s = Script::new(Some(row(2, 1, 0, false)), &[10]);
    s.fail_times = Some(("rename", 2));
    let (result, release) = publish(&mut s, 2, 1);
    assert!(matches!(result, Err(LeaseFailure::Effect("rename"))));
    assert_released(&s, release, "");
    assert_eq!(positions(&s.log, "write-temp").len(), 2, "{:?}", s.log);
    // A draft composed inside the transaction was never outside it: no second write.
    let mut s = Script::new(Some(row(2, 1, 0, false)), &[10, 20, 30]);
    s.channels_inside = vec![channel_row(7)];
    s.fail_times = Some(("rename", 2));
    let (result, _) = publish(&mut s, 2, 1);
    assert!(matches!(result, Err(LeaseFailure::Effect("rename"))));
    assert_eq!(positions(&s.log, "rename").len(), 1, "{:?}", s.log);
}

#[test]
fn a_grant_numbers_past_the_epoch_of_the_document_in_place() {
    // A one-shot's rename survived a crash that rolled its grant back: the row says 3, the
    // document 4. The next grant is 5, so no two documents carry one epoch.
    for (current, expected) in [
        (Some(document(4)), 5),
        (Some(document(2)), 4),
        (Some(document(3)), 4),
        (None, 4),
        (Some(b"{\"fencingEpoch\": 99}".to_vec()), 4),
        (Some(b"not json".to_vec()), 4),
    ] {
        let mut s = Script::new(Some(row(3, 1, 0, true)), &[10]);
        s.current = current;
        let mut m = Acquire::new(applicant(2));
        s.run(&mut m);
        let Ok(AcquireReport::Granted(plan)) = m.output().unwrap() else {
            panic!()
        };
        assert_eq!((plan.prior_epoch, plan.epoch), (3, expected));
    }
    // The one-shot over a document one ahead of the row commits its grant (5) before it
    // renames anything, then publishes with it in an envelope of its own: were that commit
    // lost, the document would be two ahead of the row.
    let mut s = Script::new(Some(row(3, 1, 0, true)), &[10]);
    s.current = Some(document(4));
    let registry = registry();
    let mut m = PublishNow::new(applicant(2), &registry);
    s.run(&mut m);
    let end = m.output().unwrap();
    assert!(
        matches!(
            &end,
            Ok(PublishNowReport::Published {
                takeover: false,
                ..
            })
        ),
        "{end:?}"
    );
    let (result, _) = ran_now(end);
    assert_eq!(result.unwrap().fencing_epoch, 5);
    let commit = positions(&s.log, "commit")[0];
    assert!(commit < positions(&s.log, "rename")[0], "{:?}", s.log);
    assert_eq!(
        &s.log[commit - 2..=commit],
        ["read-clock", "write-grant", "commit"]
    );
    // A document of the row's own epoch is not ahead of it: one envelope, one commit.
    let mut s = Script::new(Some(row(3, 1, 0, true)), &[10]);
    s.current = Some(document(3));
    let mut m = PublishNow::new(applicant(2), &registry);
    s.run(&mut m);
    let (result, _) = ran_now(m.output().unwrap());
    assert_eq!(result.unwrap().fencing_epoch, 4);
    assert_eq!(positions(&s.log, "commit").len(), 1, "{:?}", s.log);
}

#[test]
fn a_document_epoch_no_grant_can_have_produced_is_refused_and_moves_nothing() {
    // A planted `current.json` of epoch 2^63 - 2 (or any epoch above the row's + 1): the
    // grant is refused, nothing is written, the row stays at 3 — and once the file is gone
    // the target is granted 4, not exhausted.
    let registry = registry();
    for planted in [
        5,
        crate::STORAGE_INTEGER_MAX - 1,
        crate::STORAGE_INTEGER_MAX,
    ] {
        let mut s = Script::new(Some(row(3, 1, 0, true)), &[10]);
        s.current = Some(document(planted));
        let mut m = Acquire::new(applicant(2));
        s.run(&mut m);
        let Ok(Err(LeaseFailure::ForeignEpoch(foreign))) = m.output() else {
            panic!("{:?}", s.log)
        };
        assert_eq!((foreign.document_epoch, foreign.row_epoch), (planted, 3));
        assert!(foreign.to_string().contains("current.json"), "{foreign}");
        assert!(!s.log.contains(&"write-grant"), "{:?}", s.log);
        assert!(s.log.contains(&"rollback"), "{:?}", s.log);
        let mut m = PublishNow::new(applicant(2), &registry);
        s.log.clear();
        s.run(&mut m);
        let (result, _) = ran_now(m.output().unwrap());
        assert!(
            matches!(result, Err(LeaseFailure::ForeignEpoch(_))),
            "{:?}",
            s.log
        );
        assert!(!s.log.contains(&"rename"), "{:?}", s.log);
        assert!(!s.log.contains(&"write-grant"), "{:?}", s.log);
        s.current = None;
        let mut m = Acquire::new(applicant(2));
        s.run(&mut m);
        let Ok(AcquireReport::Granted(plan)) = m.output().unwrap() else {
            panic!()
        };
        assert_eq!(plan.epoch, 4);
    }
}

#[test]
fn a_grant_renames_at_most_one_document_even_when_its_release_did_not_commit() {
    // The grant of epoch 2 renamed its document; its release's commit failed, so the row
    // still says held at 2. The same credential (a copy of the grant) publishes again: the
    // document in place is of its epoch, so nothing is renamed.
    let registry = registry();
    for in_place in [2, 3] {
        let mut s = Script::new(Some(row(2, 1, 0, false)), &[10]);
        s.current = Some(document(in_place));
        let mut m = Publish::new(credential(2, 1), &registry);
        s.run(&mut m);
        let Err(Unpublished::Failed {
            failure,
            epoch,
            release,
        }) = m.output().unwrap()
        else {
            panic!("{:?}", s.log)
        };
        assert_eq!(epoch, Some(2), "the refusal names the grant's epoch");
        assert!(
            matches!(
                failure,
                LeaseFailure::Fenced(Fenced::DocumentAhead { document_epoch }) if document_epoch == in_place
            ),
            "{failure:?}"
        );
        assert!(release.is_none(), "the grant is released all the same");
        assert!(!s.log.contains(&"rename"), "{:?}", s.log);
        assert!(s.log.contains(&"remove-temp"), "{:?}", s.log);
    }
    // Below the grant's epoch (or foreign): published.
    let mut s = Script::new(Some(row(2, 1, 0, false)), &[10]);
    s.current = Some(document(1));
    let (result, _) = publish(&mut s, 2, 1);
    assert_eq!(result.unwrap().fencing_epoch, 2);
}

#[test]
fn a_one_shot_whose_prelude_saw_past_the_grants_expiry_never_renames() {
    // The prelude reads 1000; the clock then steps back by more than the TTL, so the grant is
    // written at 899 and expires at 999 — before a reading the holder already made. Whatever
    // the later readings say, nothing is renamed (the rule: no rename once any clock reading
    // of the run is at or past the grant's expiry).
    let registry = registry();
    let mut s = Script::new(Some(row(1, 1, 0, true)), &[1000, 1000 - TTL - 1]);
    let mut m = PublishNow::new(applicant(2), &registry);
    s.run(&mut m);
    let (result, release) = ran_now(m.output().unwrap());
    assert!(
        matches!(
            result,
            Err(LeaseFailure::Expired(passed)) if passed.now == Millis(1000) && passed.expires_at == Millis(999)
        ),
        "{:?}",
        s.log
    );
    assert_released(&s, release, "");
    assert!(!s.log.contains(&"rename"), "{:?}", s.log);
}

#[test]
fn an_answer_to_an_earlier_ask_of_the_same_effect_is_refused() {
    // The prelude's `read-clock` answer, kept and handed to the grant's `read-clock` inside
    // the transaction (the same effect, asked again): refused, the machine unchanged.
    let mut s = Script::new(Some(row(1, 1, 0, true)), &[10]);
    let mut m = Acquire::<&str>::new(applicant(2));
    stop_after(&mut s, &mut m, 1);
    let Some(Effect::Clock(prelude)) = m.poll() else {
        panic!("the prelude reads the clock")
    };
    let kept = prelude.answer(Millis(10));
    stop_after(&mut s, &mut m, 1);
    while m.poll().map(|e| e.name()) != Some("read-clock") {
        stop_after(&mut s, &mut m, 1);
    }
    assert_eq!(s.log.last(), Some(&"read-current"), "the grant's own clock");
    assert!(matches!(
        m.handle(kept),
        Err(ProtocolError::KeptAnswer {
            answered: "read-clock",
            asked: 1,
            ..
        })
    ));
    assert_eq!(m.poll().map(|e| e.name()), Some("read-clock"), "unchanged");
    s.run(&mut m);
    assert!(matches!(m.output(), Ok(Ok(AcquireReport::Granted(_)))));
}

#[test]
fn a_holder_whose_draft_saw_its_expiry_never_renames_even_after_the_clock_stepped_back() {
    // The draft's clock reads the grant's expiry (TTL): the holder has observed it. The clock
    // then steps back, so the revalidation (at 10) passes; the publication aborts as expired
    // all the same (no draft of it, and no document composed again, is renamed).
    let mut s = Script::new(Some(row(2, 1, 0, false)), &[TTL, 10, 10]);
    let (result, release) = publish(&mut s, 2, 1);
    assert!(
        matches!(result, Err(LeaseFailure::Expired(d)) if d.expires_at == Millis(TTL)),
        "{result:?}"
    );
    assert_released(&s, release, "");
    assert!(!s.log.contains(&"rename"), "{:?}", s.log);
    assert!(s.log.contains(&"remove-temp"), "{:?}", s.log);
}

#[test]
fn an_answer_says_whether_it_failed_and_a_file_effect_whether_it_is_slow_work() {
    // What an asynchronous executor reads off the contract: whether the transaction's edge
    // succeeded, and which file effects leave its event loop.
    let Some(Effect::Store(StoreEffect::ReadCommittedLease(ask))) =
        Acquire::<&str>::new(applicant(1)).poll()
    else {
        panic!("the prelude reads the committed row")
    };
    assert_eq!(format!("{ask:?}"), "Ask(read-committed-lease #0)");
    assert!(ask.fail("busy").failed());
    let Some(Effect::Store(StoreEffect::ReadCommittedLease(ask))) =
        Acquire::<&str>::new(applicant(1)).poll()
    else {
        panic!()
    };
    assert!(!ask.answer(Ok(None)).failed());
    // Every file effect of a publication, by name: the slow ones outside the locks.
    let registry = registry();
    let mut s = Script::new(Some(row(2, 1, 0, false)), &[10, 20, 30]);
    s.dir_verified = false;
    let mut m = Publish::new(credential(2, 1), &registry);
    let mut slow = Vec::new();
    let mut fast = Vec::new();
    assert_eq!(
        drive(&mut m, |effect| {
            if let Effect::File(file) = &effect {
                if file.is_slow() {
                    slow.push(file.name());
                } else {
                    fast.push(file.name());
                }
            }
            Some(s.answer(effect))
        }),
        Ok(true)
    );
    assert_eq!(
        slow,
        ["prepare-dir", "sync-parents", "write-temp", "sync-dir"]
    );
    assert_eq!(
        fast,
        [
            "lock-target",
            "read-current",
            "rename",
            "remove-orphans",
            "unlock-target"
        ]
    );
}

#[test]
fn any_effect_of_a_publication_may_fail_and_its_end_says_what_happened() {
    // The scripted executor fails each failable effect of a run in turn (every store and file
    // effect but the unlock and the rollback): a two-step publication, a one-shot over a
    // released row, over an expired one (a takeover), and over a document one ahead of its
    // row (its grant commits first). Whatever fails, the machine runs to its end without a
    // protocol error, lets both locks go, leaves no temp sibling (but where the removal itself
    // failed), and its end says whether it renamed: published (or published and not released,
    // or not durable) exactly when a rename happened.
    let registry = registry();
    type Setup = fn() -> Script;
    let cases: [(&str, Setup, bool); 4] = [
        (
            "two-step",
            || Script::new(Some(row(2, 1, 0, false)), &[10, 20, 30]),
            false,
        ),
        (
            "one-shot",
            || Script::new(Some(row(1, 1, 0, true)), &[10]),
            true,
        ),
        (
            "takeover",
            || Script::new(Some(row(1, 1, 0, false)), &[TTL + 5]),
            true,
        ),
        (
            "document ahead",
            || {
                let mut s = Script::new(Some(row(1, 1, 0, true)), &[10]);
                s.current = Some(document(2));
                s
            },
            true,
        ),
    ];
    let mut runs = 0;
    for (name, setup, one_shot) in cases {
        let run = |s: &mut Script| {
            if one_shot {
                let mut m = PublishNow::new(applicant(2), &registry);
                s.run(&mut m);
                match m.output().expect("no protocol error") {
                    Ok(PublishNowReport::Published { published, .. }) => Ok(published),
                    Ok(PublishNowReport::Held(held)) => panic!("{name}: held {held:?}"),
                    Err(unpublished) => Err(unpublished),
                }
            } else {
                let mut m = Publish::new(credential(2, 1), &registry);
                s.run(&mut m);
                m.output().expect("no protocol error")
            }
        };
        let mut clean = setup();
        run(&mut clean).expect("published without faults");
        for nth in 0..clean.failable {
            let mut s = setup();
            s.fail_nth = Some(nth);
            let end = run(&mut s);
            let failed = s.log[..]
                .iter()
                .copied()
                .filter(|e| !matches!(*e, "read-clock" | "reached" | "rollback" | "unlock-target"))
                .nth(nth)
                .unwrap();
            let context = format!(
                "{name}, {failed} (failable effect {nth}) failed: {:?}",
                s.log
            );
            assert!(!s.locked && !s.in_tx, "{context}: a lock left held");
            assert!(
                !s.temp || failed == "remove-temp",
                "{context}: a temp left behind"
            );
            let renamed = match &end {
                Ok(_) | Err(Unpublished::NotReleased { .. }) => true,
                Err(Unpublished::Failed {
                    failure: LeaseFailure::NotDurable(_),
                    ..
                }) => true,
                Err(_) => false,
            };
            assert_eq!(
                renamed, s.renamed,
                "{context}: the end says otherwise: {end:?}"
            );
            // A rename whose directory fsync failed is not durable; one whose commit failed
            // is published but not released — never plain success.
            match failed {
                "sync-dir" => assert!(
                    matches!(
                        &end,
                        Err(Unpublished::Failed {
                            failure: LeaseFailure::NotDurable(_),
                            ..
                        })
                    ),
                    "{context}: {end:?}"
                ),
                "commit" | "write-release" if s.renamed => assert!(
                    matches!(&end, Err(Unpublished::NotReleased { .. })),
                    "{context}: {end:?}"
                ),
                _ => {}
            }
            runs += 1;
        }
    }
    assert!(runs > 60, "{runs}");
}
