//! Group commit: one-shot publications of many threads, combined into batches.
//!
//! A [`PublicationGroup`] owns one [`ProjectionStore`]. Each caller of
//! [`PublicationGroup::publish_now`] queues its request and waits; whichever waiting caller
//! finds no batch running becomes the batch's leader: it takes the oldest waiting requests of
//! one holder with distinct targets (at most `max_batch`), runs them as ONE
//! [`ProjectionStore::publish_many`] (one write transaction, one WAL commit), hands every
//! caller its own target's answer and wakes them. The fencing is `publish_many`'s, target by
//! target; the group only decides which requests share a transaction.

use super::publication::PublishedNow;
use super::store::ProjectionStore;
use crate::error::Result;
use solewriter_core::names::InstanceDigest;
use solewriter_core::projection::machine::ProtocolError;
use solewriter_core::projection::target::TargetId;
use std::collections::{HashMap, VecDeque};
use std::num::NonZeroUsize;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

/// One-shot publications of many threads through one store, combined into batches: several
/// waiting publications share one write transaction and one WAL commit. `Sync`: share it
/// (by reference or in an `Arc`) between the threads that publish.
pub struct PublicationGroup {
    store: Mutex<ProjectionStore>,
    queue: Mutex<Queue>,
    answered: Condvar,
    max_batch: usize,
}

/// The waiting requests, the answers not yet taken, and whether a batch is running.
#[derive(Default)]
struct Queue {
    next_ticket: u64,
    waiting: VecDeque<Request>,
    answers: HashMap<u64, Result<PublishedNow>>,
    running: bool,
    batches: u64,
}

/// One caller's publication, waiting for a batch.
struct Request {
    ticket: u64,
    target: TargetId,
    holder: InstanceDigest,
}

impl Queue {
    /// Takes the batch a leader runs: the oldest request, then every later one of the same
    /// holder whose target is not yet in the batch, up to `max` (the rest keep their places).
    fn take_batch(&mut self, max: usize) -> Vec<Request> {
        let mut batch: Vec<Request> = Vec::new();
        let mut kept = VecDeque::with_capacity(self.waiting.len());
        for request in self.waiting.drain(..) {
            let fits = batch.len() < max
                && batch
                    .first()
                    .is_none_or(|first| first.holder == request.holder)
                && batch.iter().all(|taken| taken.target != request.target);
            if fits {
                batch.push(request);
            } else {
                kept.push_back(request);
            }
        }
        self.waiting = kept;
        batch
    }
}

/// Ends a leader's batch even if the batch panicked: every ticket of the batch not yet
/// answered gets an error, the queue is free for the next leader, and the waiters wake. The
/// leader's own request, whose call the panic unwinds, is withdrawn (whether or not it was
/// in the batch): nobody would take its answer.
struct Running<'a> {
    group: &'a PublicationGroup,
    tickets: Vec<u64>,
    leader: u64,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        let mut queue = self.group.queue();
        if std::thread::panicking() {
            queue
                .waiting
                .retain(|request| request.ticket != self.leader);
            self.tickets.retain(|ticket| *ticket != self.leader);
        }
        for ticket in &self.tickets {
            queue.answers.entry(*ticket).or_insert_with(|| {
                Err(ProtocolError::Unfinished {
                    machine: "publication group",
                }
                .into())
            });
        }
        queue.running = false;
        queue.batches += 1;
        drop(queue);
        self.group.answered.notify_all();
    }
}

impl PublicationGroup {
    /// A group publishing through `store`, at most `max_batch` publications per transaction.
    pub fn new(store: ProjectionStore, max_batch: NonZeroUsize) -> Self {
        PublicationGroup {
            store: Mutex::new(store),
            queue: Mutex::new(Queue::default()),
            answered: Condvar::new(),
            max_batch: max_batch.get(),
        }
    }

    /// Publishes `target` for `holder` as [`ProjectionStore::publish_now`] does (the same
    /// answers, the same fencing), in a transaction it may share with other callers'
    /// publications of other targets for the same holder. Blocks until its batch has
    /// committed or failed. The answer is what `publish_many` answered for the target (a
    /// failure of the shared transaction is every target's there); a batch that could not
    /// start at all (`publish_many`'s own `Err`: the profile, the random source) is every
    /// request's answer, each a copy of the same kind.
    pub fn publish_now(&self, target: &TargetId, holder: &InstanceDigest) -> Result<PublishedNow> {
        let mut queue = self.queue();
        let ticket = queue.next_ticket;
        queue.next_ticket += 1;
        queue.waiting.push_back(Request {
            ticket,
            target: target.clone(),
            holder: holder.clone(),
        });
        loop {
            if let Some(answer) = queue.answers.remove(&ticket) {
                return answer;
            }
            if queue.running {
                queue = self
                    .answered
                    .wait(queue)
                    .unwrap_or_else(PoisonError::into_inner);
                continue;
            }
            queue.running = true;
            let batch = queue.take_batch(self.max_batch);
            drop(queue);
            self.lead(ticket, batch);
            queue = self.queue();
        }
    }

    /// How many batches (transactions) the group has run so far.
    pub fn batches(&self) -> u64 {
        self.queue().batches
    }

    /// Whether a batch is running now.
    pub fn running(&self) -> bool {
        self.queue().running
    }

    /// How many publications are waiting for a batch (not counting a running one's).
    pub fn waiting(&self) -> usize {
        self.queue().waiting.len()
    }

    /// The store, for anything else than publishing (the group's batches wait for it). A
    /// thread holding it must not publish through the group: its batch would wait for the
    /// store that thread holds.
    pub fn store(&self) -> MutexGuard<'_, ProjectionStore> {
        self.store.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs one batch as the leader whose own request is `leader`, and answers every request
    /// of the batch.
    fn lead(&self, leader: u64, batch: Vec<Request>) {
        let running = Running {
            group: self,
            tickets: batch.iter().map(|request| request.ticket).collect(),
            leader,
        };
        let Some(holder) = batch.first().map(|request| request.holder.clone()) else {
            return;
        };
        let targets: Vec<TargetId> = batch.iter().map(|request| request.target.clone()).collect();
        let result = self.store().publish_many(&targets, &holder);
        let mut queue = self.queue();
        match result {
            Ok(answers) => {
                for (request, (_, answer)) in batch.iter().zip(answers) {
                    queue.answers.insert(request.ticket, answer);
                }
            }
            Err(error) => {
                for request in &batch {
                    queue.answers.insert(request.ticket, Err(error.again()));
                }
            }
        }
        drop(queue);
        drop(running);
    }

    fn queue(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
