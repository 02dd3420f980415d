//! The lease's multi-step sequences as sans-IO step machines: acquisition, publication and
//! release.
//!
//! Every machine speaks the one contract of [`crate::contract`], in the lease's protocol
//! ([`LeaseProtocol`]). A machine never performs an effect. It names the next one
//! ([`Machine::poll`] returns an [`Effect`]) and consumes its answer ([`Machine::handle`] takes
//! an [`Answer`]). Every
//! decision between two effects is made here, by the core's pure functions (`observe`,
//! `decide_acquire`, `authorize_publish`, `check_deadline`, `decide_release`, `compose`), and
//! so is the mapping of a machine's end to its result ([`Machine::output`], [`outcome`]).
//!
//! # The contract
//! Effects come in three families, each executed by one part of an executor: the store's
//! ([`StoreEffect`]: the serialized transaction and its rows), the files' ([`FileEffect`]:
//! the target lock, the target directory, the temp sibling, the rename) and the clock's
//! ([`Effect::Clock`]); [`Effect::Reached`] names a point of the publication for probes.
//! Every effect carries an [`Ask`] whose type says what answers it: an executor answers with
//! `ask.answer(value)`, so a wrong answer does not compile. An answer handed to a machine that
//! did not ask for it (kept from an earlier poll) is refused with a [`ProtocolError`], the
//! machine unchanged — never a panic.
//!
//! Three executors run these machines: the SQLite adapter (`solewriter-adapters`), the Node
//! binding (on the host's connection), and the reference model (`solewriter-models`) under
//! loom and shuttle. So the sequence the model checkers explore is the sequence that runs: it
//! exists once, here.
//!
//! Lock discipline, the same in every machine: the body's part before the transaction (no
//! lock) → [`FileEffect::LockTarget`] (the target's kernel lock) → [`StoreEffect::Begin`]
//! (the store's write lock) → body → [`StoreEffect::Commit`] or [`StoreEffect::Rollback`] →
//! [`FileEffect::UnlockTarget`] → the body's part after the transaction (no lock). Both locks
//! are held for the whole transaction's body and neither outside it (only a publication has
//! work outside: its draft and temp file before, its directory fsync after), so a holder
//! frozen anywhere outside its transaction holds no exclusion past its lease; [`serialized`]
//! orders them for one target and [`publish_many`] for a batch (every target lock, in the
//! order of the targets' ids, then the store's), the only two places that do.
//!
//! - [`acquire`]: the grant (a `Held` answer from the committed snapshot needs no lock).
//! - [`release`]: the conditional release, alone or as the end of a publication, and an
//!   operator's end of the current grant (the same write, decided without a credential).
//! - [`publish`]: the fenced publication of `current.json`.
//! - [`publish_now`]: grant, publish and release in one envelope (one commit).
//! - [`publish_many`]: one-shot publications of several targets in one transaction (one
//!   commit for all), each under a savepoint of its own.

pub mod acquire;
mod effects;
pub mod outcome;
pub mod publish;
pub mod publish_many;
pub mod publish_now;
pub mod release;
mod serialized;
#[cfg(test)]
mod tests;

pub use crate::contract::{drive, run, Answer, Ask, Machine, ProtocolError, Reply, Stamped};
pub use effects::{
    BatchProtocol, Effect, FileEffect, LeaseInput, LeaseProtocol, StoreEffect, Targeted,
};
