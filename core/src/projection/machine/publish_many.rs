//! A batch of one-shot publications: several targets granted, published and released inside
//! ONE serialized write transaction, so the whole batch pays one durable commit.
//!
//! Each target runs exactly the one-shot's steps ([`super::publish_now`]: its prelude, its
//! draft and temp sibling before the transaction, its grant, revalidation, rename and
//! conditional release inside it, its directory fsync after), so each is fenced exactly as one
//! one-shot is. What the batch adds is the envelope around them, in one fixed order:
//!
//! 1. each target in turn, holding no lock: its prelude (a live grant answers `Held` and the
//!    target takes no further part) and its draft's reads; then each target's directory and
//!    temp sibling (file work only, which an executor may run for all targets at once:
//!    [`PublishMany::parts`]);
//! 2. the kernel locks of the targets still in the batch, in the order of their ids (the batch
//!    is sorted on entry, so two batches — or a batch and a one-target machine, which takes one
//!    target lock — never wait for each other in a cycle); a target whose lock is busy drops
//!    out (its temp sibling is removed), the others go on;
//! 3. the store's write transaction (`BEGIN IMMEDIATE`), once, with every target lock held;
//! 4. each locked target in turn under a savepoint of its own: its one-shot body, then the
//!    savepoint released (the body commits) or rolled back to (the body rolls back: a refused
//!    target leaves no row behind, the others go on);
//! 5. one commit (or one rollback, if no target kept anything); every target lock let go;
//! 6. each target's part after the transaction (its directory fsync, or the removal of its
//!    temp sibling; again file work an executor may run for all targets at once);
//! 7. a target whose grant commits on its own (a takeover of an expired grant, or a row the
//!    document in place is ahead of — see [`super::publish_now`]) publishes afterwards in an
//!    envelope of its own, one target after the other.
//!
//! **A failed store effect ends the shared transaction.** A store may roll the whole
//! transaction back under a failure (SQLite does on a full disk or an I/O error), so once a
//! store effect inside it fails (a target's row read or write, a savepoint), no further target
//! begins and the transaction rolls back: every target that had kept its writes reports the
//! failure as a lost commit, exactly as a one-shot whose commit failed after its rename (which
//! is safe: only grants over unheld or released rows rename inside the envelope). A failed
//! begin or commit is the shared transaction's failure too. An executor's error need not be
//! `Clone`: the batch is given how to report one error again for each target it failed.

use super::acquire::{Applicant, Prelude, PreludeNext};
use super::publish::Publish;
use super::publish_now::{answered, BodyEnd, OneShotBody, PublishNowReport};
use super::serialized::{Body, End};
use super::{
    Answer, BatchProtocol, Effect, FileEffect, LeaseInput, LeaseProtocol, Machine, ProtocolError,
    StoreEffect, Targeted,
};
use crate::contract::Serial;
use crate::error_kind::{Classified, ErrorKind};
use crate::projection::composition::Composition;
use crate::projection::machine::outcome::Unpublished;
use crate::projection::target::TargetId;

/// A batch the core refuses to start.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BatchRefused {
    /// No target was given.
    #[error("a batch of publications needs at least one target; nothing was written")]
    Empty,
    /// A target was given twice (it would wait for its own lock).
    #[error("target {0} is given twice in one batch; nothing was written")]
    Duplicate(TargetId),
}

impl Classified for BatchRefused {
    fn kind(&self) -> ErrorKind {
        ErrorKind::Input
    }
}

/// How one target of a batch ended: exactly as a one-shot publication of it would.
#[derive(Debug)]
pub struct TargetEnd<E> {
    /// The target.
    pub target_id: TargetId,
    /// Its end.
    pub end: Result<PublishNowReport, Unpublished<E>>,
}

/// A target's part in the shared transaction.
#[derive(Debug)]
struct Run<'r, E> {
    body: Box<OneShotBody<'r, E>>,
    /// Its target lock is held.
    locked: bool,
    /// Its body ran inside the transaction (its savepoint opened).
    began: bool,
    /// It kept its writes (its savepoint released): they commit or roll back with the batch.
    kept: bool,
    /// Why its body never ran inside the transaction.
    not_started: Option<E>,
    /// Why its kept writes did not commit.
    commit_failed: Option<E>,
    /// The serial of its lock-free part's next step ([`Part`]): a range of its own for the
    /// part before the transaction and another for the part after it, so an answer made for
    /// one part (or for the batch) is refused by every other.
    part: Serial,
}

/// Where the serials of target `i`'s part before (or after) the transaction start: far above
/// any batch's own steps, and apart for every target and both parts.
fn part_serial(i: usize, after: bool) -> Serial {
    Serial::starting_at(((i as u64 + 1) << 40) | (u64::from(after) << 39))
}

/// Where one target of the batch is.
#[derive(Debug)]
enum Slot<'r, E> {
    /// Its lock-free prelude (reading the committed row and the clock).
    Prelude(Prelude, Applicant),
    /// In the batch's transaction (or on its way to it).
    Running(Run<'r, E>),
    /// Its grant committed with the batch; its publication runs in an envelope of its own.
    Second(Box<Publish<'r, E>>, bool),
    /// Ended.
    Done(Result<PublishNowReport, Unpublished<E>>),
    /// Only while a step moves the slot from one state to the next.
    Moving,
}

/// Where the batch is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    /// Target `i`'s reads before the transaction (no lock): its prelude, its draft's clock
    /// and rows.
    Reads(usize),
    /// Target `i`'s file work before the transaction (no lock): its directory, its temp file.
    Drafts(usize),
    /// Taking target `i`'s lock.
    Lock(usize),
    Begin,
    Savepoint(usize),
    /// Target `i`'s one-shot body, inside the transaction.
    Body(usize),
    /// Ending target `i`'s savepoint as its body ended.
    EndSavepoint(usize),
    Commit,
    Rollback,
    RollbackAfterFailedCommit,
    Unlock(usize),
    /// Target `i`'s part after the transaction (no lock).
    After(usize),
    /// Target `i`'s publication in an envelope of its own.
    Second(usize),
    Done,
}

/// The batch publication machine.
#[derive(Debug)]
pub struct PublishMany<'r, E> {
    composition: Composition<'r>,
    targets: Vec<TargetId>,
    slots: Vec<Slot<'r, E>>,
    stage: Stage,
    serial: Serial,
    /// The executor's error, reported again for another target it failed.
    again: fn(&E) -> E,
    /// The shared transaction failed inside (a store effect, a savepoint): no target begins
    /// any more, and it rolls back.
    lost: Option<E>,
}

impl<'r, E> PublishMany<'r, E> {
    /// A batch of one-shot publications, one per `(target, applicant)`, composed with
    /// `composition`; `again` reports an executor error once more, for each further target a
    /// failure of the shared transaction (its begin or commit) failed. The batch runs its
    /// targets in the order of their ids ([`Targeted::target`] is a place in that order).
    pub fn new(
        mut targets: Vec<(TargetId, Applicant)>,
        composition: impl Into<Composition<'r>>,
        again: fn(&E) -> E,
    ) -> Result<Self, BatchRefused> {
        targets.sort_by(|a, b| a.0.cmp(&b.0));
        if targets.is_empty() {
            return Err(BatchRefused::Empty);
        }
        if let Some(pair) = targets.windows(2).find(|pair| pair[0].0 == pair[1].0) {
            return Err(BatchRefused::Duplicate(pair[0].0.clone()));
        }
        let (targets, slots) = targets
            .into_iter()
            .map(|(target, applicant)| (target, Slot::Prelude(Prelude::Snapshot, applicant)))
            .unzip();
        Ok(PublishMany {
            composition: composition.into(),
            targets,
            slots,
            stage: Stage::Reads(0),
            serial: Serial::default(),
            again,
            lost: None,
        })
    }

    /// The targets, in the batch's order (the place of each is [`Targeted::target`]).
    pub fn targets(&self) -> &[TargetId] {
        &self.targets
    }

    fn run(&self, i: usize) -> Option<&Run<'r, E>> {
        match self.slots.get(i) {
            Some(Slot::Running(run)) => Some(run),
            _ => None,
        }
    }

    fn run_mut(&mut self, i: usize) -> Result<&mut Run<'r, E>, ProtocolError> {
        match self.slots.get_mut(i) {
            Some(Slot::Running(run)) => Ok(run),
            _ => Err(ProtocolError::Unfinished { machine: "batch" }),
        }
    }

    /// The first target at or after `from` for which `pick` holds.
    fn next(&self, from: usize, pick: impl Fn(&Run<'r, E>) -> bool) -> Option<usize> {
        (from..self.slots.len()).find(|&i| self.run(i).is_some_and(&pick))
    }

    /// The next target to lock, or the transaction (or, with nothing locked, the part after
    /// it).
    fn lock_from(&self, from: usize) -> Stage {
        match self.next(from, |_| true) {
            Some(i) => Stage::Lock(i),
            None if self.next(0, |run| run.locked).is_some() => Stage::Begin,
            None => self.after_from(0),
        }
    }

    /// The next locked target to open a savepoint for, or the transaction's end (its
    /// rollback, once it is lost).
    fn savepoint_from(&mut self, from: usize) -> Stage {
        if self.lost.is_some() {
            return self.abandon();
        }
        match self.next(from, |run| run.locked) {
            Some(i) => Stage::Savepoint(i),
            None if self.next(0, |run| run.kept).is_some() => Stage::Commit,
            None => Stage::Rollback,
        }
    }

    /// The transaction is lost: every locked target that has not begun never will (it
    /// reports the loss), and the transaction rolls back.
    fn abandon(&mut self) -> Stage {
        let again = self.again;
        let lost = self.lost.as_ref().map(again);
        for slot in &mut self.slots {
            if let Slot::Running(run) = slot {
                if run.locked && !run.began {
                    run.not_started = lost.as_ref().map(again);
                    run.body.begun(false);
                }
            }
        }
        Stage::Rollback
    }

    /// The transaction ended (`failed`: why what the targets kept did not commit).
    fn ended(&mut self, failed: Option<E>) -> Stage {
        let again = self.again;
        for (i, slot) in self.slots.iter_mut().enumerate() {
            let Slot::Running(run) = slot else { continue };
            run.part = part_serial(i, true);
            if run.began {
                // A target whose body meant to commit lost its writes with the transaction.
                let lost = run.kept || run.body.end() == Some(End::Commit);
                if lost {
                    run.commit_failed = failed.as_ref().map(again);
                }
                run.body.ended();
            }
        }
        self.unlock_from(0)
    }

    fn unlock_from(&self, from: usize) -> Stage {
        match self.next(from, |run| run.locked) {
            Some(i) => Stage::Unlock(i),
            None => self.after_from(0),
        }
    }

    fn after_from(&self, from: usize) -> Stage {
        match self.next(from, |run| run.body.poll_after().is_some()) {
            Some(i) => Stage::After(i),
            None => Stage::Done,
        }
    }

    /// Every target's end once the part after the transaction has run; a grant that committed
    /// on its own leads to its publication (`serial`: the serial its first step will have).
    fn finish(&mut self, serial: Serial) -> Result<Stage, ProtocolError> {
        for slot in &mut self.slots {
            *slot = match std::mem::replace(slot, Slot::Moving) {
                Slot::Running(run) => match run.body.finish(run.not_started, run.commit_failed)? {
                    BodyEnd::Done(end) => Slot::Done(end),
                    BodyEnd::TakeOver(second) => {
                        let takeover = second.takeover;
                        Slot::Second(Box::new(second.publish(self.composition, serial)), takeover)
                    }
                },
                other => other,
            };
        }
        Ok(self.second_from(0))
    }

    fn second_from(&self, from: usize) -> Stage {
        (from..self.slots.len())
            .find(|&i| matches!(self.slots[i], Slot::Second(..)))
            .map_or(Stage::Done, Stage::Second)
    }
}

impl<E> Machine for PublishMany<'_, E> {
    type Protocol = BatchProtocol<E>;
    type Output = Vec<TargetEnd<E>>;

    fn poll(&self) -> Option<Targeted<'_, E>> {
        if let Stage::Second(i) = self.stage {
            // Stamped by the publication itself, which counts on.
            return match &self.slots[i] {
                Slot::Second(publish, _) => publish.poll().map(|effect| Targeted {
                    target: Some(i),
                    effect,
                }),
                _ => None,
            };
        }
        self.serial.stamp(self.poll_own())
    }

    fn handle(&mut self, answer: Answer<LeaseInput<E>>) -> Result<(), ProtocolError> {
        if let Stage::Second(i) = self.stage {
            return self.second(i, answer);
        }
        let mut serial = self.serial;
        let now = serial;
        let result = serial.take("batch", answer, |answer| self.step(answer, now));
        self.serial = serial;
        result
    }

    fn output(self) -> Result<Self::Output, ProtocolError> {
        if self.stage != Stage::Done {
            return Err(ProtocolError::Unfinished { machine: "batch" });
        }
        self.targets
            .into_iter()
            .zip(self.slots)
            .map(|(target_id, slot)| match slot {
                Slot::Done(end) => Ok(TargetEnd { target_id, end }),
                _ => Err(ProtocolError::Unfinished { machine: "batch" }),
            })
            .collect()
    }
}

impl<'r, E> PublishMany<'r, E> {
    /// Target `i`'s publication in an envelope of its own, answered; once it has ended, the
    /// next one counts on from its serial.
    fn second(&mut self, i: usize, answer: Answer<LeaseInput<E>>) -> Result<(), ProtocolError> {
        let Slot::Second(publish, takeover) = &mut self.slots[i] else {
            return Err(ProtocolError::wrong("batch", answer.effect()));
        };
        publish.handle(answer)?;
        if publish.poll().is_some() {
            return Ok(());
        }
        let takeover = *takeover;
        self.serial = publish.serial();
        if let Slot::Second(publish, _) = std::mem::replace(&mut self.slots[i], Slot::Moving) {
            self.slots[i] =
                Slot::Done(
                    publish
                        .output()?
                        .map(|published| PublishNowReport::Published {
                            published,
                            takeover,
                        }),
                );
        }
        self.stage = self.second_from(i + 1);
        if let Stage::Second(next) = self.stage {
            let serial = self.serial;
            if let Slot::Second(publish, _) = &mut self.slots[next] {
                publish.count_from(serial);
            }
        }
        Ok(())
    }

    /// The next effect of the batch's own stages (stamped by [`Machine::poll`]).
    fn poll_own(&self) -> Option<Targeted<'_, E>> {
        fn at<E>(i: usize, effect: Effect<'_, E>) -> Targeted<'_, E> {
            Targeted {
                target: Some(i),
                effect,
            }
        }
        fn shared<E>(effect: StoreEffect<'_, E>) -> Targeted<'_, E> {
            Targeted {
                target: None,
                effect: effect.into(),
            }
        }
        Some(match self.current() {
            Stage::Reads(i) | Stage::Drafts(i) => match &self.slots[i] {
                Slot::Prelude(prelude, _) => at(i, prelude.poll()),
                Slot::Running(run) => at(i, run.body.poll_before()?),
                _ => return None,
            },
            Stage::Lock(i) => at(i, FileEffect::lock_target().into()),
            Stage::Begin => shared(StoreEffect::begin()),
            Stage::Savepoint(i) => at(i, StoreEffect::savepoint().into()),
            Stage::Body(i) => at(i, self.run(i)?.body.poll()?),
            Stage::EndSavepoint(i) => at(
                i,
                match self.run(i)?.body.end()? {
                    End::Commit => StoreEffect::release_savepoint().into(),
                    End::Rollback => StoreEffect::rollback_to_savepoint().into(),
                },
            ),
            Stage::Commit => shared(StoreEffect::commit()),
            Stage::Rollback | Stage::RollbackAfterFailedCommit => shared(StoreEffect::rollback()),
            Stage::Unlock(i) => at(i, FileEffect::unlock_target().into()),
            Stage::After(i) => at(i, self.run(i)?.body.poll_after()?),
            Stage::Second(_) | Stage::Done => return None,
        })
    }

    /// One step of the batch's own stages: the answer to the effect last polled (`serial`:
    /// this step's).
    fn step(&mut self, answer: Answer<LeaseInput<E>>, serial: Serial) -> Result<(), ProtocolError> {
        let polled = self.poll_own();
        let store = matches!(
            polled,
            Some(Targeted {
                effect: Effect::Store(_),
                ..
            })
        );
        if polled.map(|polled| polled.effect.name()) != Some(answer.effect()) {
            return Err(ProtocolError::wrong("batch", answer.effect()));
        }
        let failed = answer.failed();
        let again = self.again;
        self.stage = match self.current() {
            stage @ (Stage::Reads(i) | Stage::Drafts(i)) => {
                slot_step(i, &mut self.slots[i], self.composition, answer)?;
                stage
            }
            Stage::Lock(i) => {
                let run = self.run_mut(i)?;
                match answer.into_parts().1 {
                    LeaseInput::Failed(e) => {
                        run.not_started = Some(e);
                        run.body.begun(false);
                    }
                    _ => run.locked = true,
                }
                self.lock_from(i + 1)
            }
            Stage::Begin => match answer.into_parts().1 {
                LeaseInput::Failed(e) => {
                    for slot in &mut self.slots {
                        if let Slot::Running(run) = slot {
                            if run.locked {
                                run.not_started = Some(again(&e));
                                run.body.begun(false);
                            }
                        }
                    }
                    self.unlock_from(0)
                }
                _ => self.savepoint_from(0),
            },
            Stage::Savepoint(_) if failed => {
                if let LeaseInput::Failed(e) = answer.into_parts().1 {
                    self.lost = Some(e);
                }
                self.abandon()
            }
            Stage::Savepoint(i) => {
                let run = self.run_mut(i)?;
                run.began = true;
                run.body.begun(true);
                match run.body.end() {
                    None => Stage::Body(i),
                    Some(_) => Stage::EndSavepoint(i),
                }
            }
            Stage::Body(i) => {
                // A store effect that failed inside the transaction ends it: the failure is
                // kept for the batch, and the body reads it too (reported again).
                let mut lost = None;
                let answer = if store && failed {
                    answer.map_input(|input| match input {
                        LeaseInput::Failed(e) => {
                            let copy = again(&e);
                            lost = Some(e);
                            LeaseInput::Failed(copy)
                        }
                        input => input,
                    })
                } else {
                    answer
                };
                let run = self.run_mut(i)?;
                run.body.handle(answer)?;
                let body_ended = run.body.end().is_some();
                if self.lost.is_none() {
                    self.lost = lost;
                }
                match (body_ended, self.lost.is_some()) {
                    (false, _) => Stage::Body(i),
                    // The transaction is lost: it rolls back whole, no savepoint to end.
                    (true, true) => self.abandon(),
                    (true, false) => Stage::EndSavepoint(i),
                }
            }
            Stage::EndSavepoint(i) => {
                let kept = self.run(i).and_then(|run| run.body.end()) == Some(End::Commit);
                match answer.into_parts().1 {
                    LeaseInput::Failed(e) => {
                        self.lost = Some(e);
                        self.abandon()
                    }
                    _ => {
                        self.run_mut(i)?.kept = kept;
                        self.savepoint_from(i + 1)
                    }
                }
            }
            Stage::Commit => match answer.into_parts().1 {
                LeaseInput::Failed(e) => {
                    self.lost = Some(e);
                    Stage::RollbackAfterFailedCommit
                }
                _ => self.ended(None),
            },
            Stage::Rollback | Stage::RollbackAfterFailedCommit => {
                // A failed rollback is the executor's to report; the transaction ends either
                // way.
                let lost = self.lost.take();
                self.ended(lost)
            }
            Stage::Unlock(i) => {
                // Target `i` is let go: the next locked one is after it.
                self.run_mut(i)?.locked = false;
                self.unlock_from(i)
            }
            Stage::After(i) => {
                let run = self.run_mut(i)?;
                run.body.handle(answer)?;
                // Once target `i` is done, the next with work after the transaction is after it.
                self.after_from(i)
            }
            Stage::Second(_) | Stage::Done => {
                return Err(ProtocolError::wrong("ended batch", answer.effect()))
            }
        };
        self.stage = self.current();
        if self.stage == Stage::Done {
            // This step's answer is taken once this returns: a second envelope counts on
            // from the step after it.
            let mut next = serial;
            next.advanced();
            self.stage = self.finish(next)?;
        }
        Ok(())
    }

    /// Where the batch is, past every part before or after the transaction already done (by
    /// [`Parts`], or by the batch's own steps).
    fn current(&self) -> Stage {
        let pending = |from: usize, pick: fn(&Slot<'r, E>) -> bool| {
            (from..self.slots.len()).find(|&i| pick(&self.slots[i]))
        };
        match self.stage {
            Stage::Reads(i) => match pending(i, reading) {
                Some(i) => Stage::Reads(i),
                None => match pending(0, drafting) {
                    Some(i) => Stage::Drafts(i),
                    None => self.lock_from(0),
                },
            },
            Stage::Drafts(i) => match pending(i, drafting) {
                Some(i) => Stage::Drafts(i),
                None => self.lock_from(0),
            },
            Stage::After(i) => self.after_from(i),
            stage => stage,
        }
    }

    /// The lock-free file work of the batch that is still to run, if it is at it: each
    /// target's directory and temp file before the transaction (once every target's reads
    /// are done), or each target's directory fsync (or temp removal) after it. Nothing orders
    /// one target's part against another's (no lock is held, each touches only its own
    /// target's files), so an executor may run them concurrently — one [`Part`] per target,
    /// naming file effects and reached points only — and then [`Parts::join`] them; an
    /// executor that never asks runs them one after the other through [`Machine::poll`].
    pub fn parts(&mut self) -> Option<Parts<'_, 'r, E>> {
        let after = match self.current() {
            Stage::Drafts(_) => false,
            Stage::After(_) => true,
            _ => return None,
        };
        Some(Parts { batch: self, after })
    }
}

/// Whether a target's next step before the transaction is a read (the store's, the
/// clock's): its prelude, or its draft's reads.
fn reading<E>(slot: &Slot<'_, E>) -> bool {
    match slot {
        Slot::Prelude(..) => true,
        Slot::Running(run) => matches!(
            run.body.poll_before(),
            Some(Effect::Store(_) | Effect::Clock(_))
        ),
        _ => false,
    }
}

/// Whether a target has file work (or a reached point) left before the transaction, its
/// reads done.
fn drafting<E>(slot: &Slot<'_, E>) -> bool {
    match slot {
        Slot::Running(run) => run.body.poll_before().is_some() && !reading(slot),
        _ => false,
    }
}

/// Target `i`'s step before the transaction (its prelude, its draft), answered.
fn slot_step<'r, E>(
    i: usize,
    slot: &mut Slot<'r, E>,
    composition: Composition<'r>,
    answer: Answer<LeaseInput<E>>,
) -> Result<(), ProtocolError> {
    let (next, result) = match std::mem::replace(slot, Slot::Moving) {
        Slot::Prelude(prelude, applicant) => match prelude.step(answer) {
            PreludeNext::Refused(prelude, e) => (Slot::Prelude(prelude, applicant), Err(e)),
            PreludeNext::Continue(prelude) => (Slot::Prelude(prelude, applicant), Ok(())),
            PreludeNext::Answered(answer) => (Slot::Done(answered(answer)), Ok(())),
            PreludeNext::Serialize(seen, now) => (
                Slot::Running(Run {
                    body: Box::new(OneShotBody::new(applicant, seen, composition, now)),
                    locked: false,
                    began: false,
                    kept: false,
                    not_started: None,
                    commit_failed: None,
                    part: part_serial(i, false),
                }),
                Ok(()),
            ),
        },
        Slot::Running(mut run) => {
            let result = run.body.handle(answer);
            (Slot::Running(run), result)
        }
        other => (other, Err(ProtocolError::Unfinished { machine: "batch" })),
    };
    *slot = next;
    result
}

/// The lock-free parts of a batch still to run ([`PublishMany::parts`]).
#[derive(Debug)]
pub struct Parts<'b, 'r, E> {
    batch: &'b mut PublishMany<'r, E>,
    /// After the transaction (else before it).
    after: bool,
}

impl<'b, 'r, E> Parts<'b, 'r, E> {
    /// One machine per target with a part still to run, and the target's place in the batch.
    /// Each speaks the one-target protocol (its effects are its target's).
    pub fn each(&mut self) -> Vec<(usize, Part<'_, 'r, E>)> {
        let after = self.after;
        self.batch
            .slots
            .iter_mut()
            .enumerate()
            .filter(|(_, slot)| match (after, &**slot) {
                (false, slot) => drafting(slot),
                (true, Slot::Running(run)) => run.body.poll_after().is_some(),
                (true, _) => false,
            })
            .filter_map(|(i, slot)| match slot {
                Slot::Running(run) => Some((i, Part { run, after })),
                _ => None,
            })
            .collect()
    }

    /// Every part has ended: the batch goes on (refused, the batch unchanged, while a part has
    /// not).
    pub fn join(self) -> Result<(), ProtocolError> {
        let batch = self.batch;
        let stage = batch.current();
        if matches!(stage, Stage::Reads(_) | Stage::Drafts(_))
            || (self.after && stage != Stage::Done)
        {
            return Err(ProtocolError::Unfinished {
                machine: "batch part",
            });
        }
        batch.stage = match stage {
            Stage::Done => batch.finish(batch.serial)?,
            stage => stage,
        };
        Ok(())
    }
}

/// One target's lock-free part of a batch ([`Parts::each`]).
#[derive(Debug)]
pub struct Part<'p, 'r, E> {
    run: &'p mut Run<'r, E>,
    after: bool,
}

impl<E> Machine for Part<'_, '_, E> {
    type Protocol = LeaseProtocol<E>;
    type Output = ();

    fn poll(&self) -> Option<Effect<'_, E>> {
        let body = &self.run.body;
        self.run.part.stamp(match self.after {
            false => body.poll_before(),
            true => body.poll_after(),
        })
    }

    fn handle(&mut self, answer: Answer<LeaseInput<E>>) -> Result<(), ProtocolError> {
        if self.poll().map(|effect| effect.name()) != Some(answer.effect()) {
            return Err(ProtocolError::wrong("batch part", answer.effect()));
        }
        let mut serial = self.run.part;
        let body = &mut self.run.body;
        let result = serial.take("batch part", answer, |answer| body.handle(answer));
        self.run.part = serial;
        result
    }

    fn output(self) -> Result<(), ProtocolError> {
        match self.poll() {
            None => Ok(()),
            Some(_) => Err(ProtocolError::Unfinished {
                machine: "batch part",
            }),
        }
    }
}
