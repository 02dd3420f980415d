//! A batch's lock-free parts run at once: each target's part before the shared transaction
//! (its directory chain, its temp sibling written and fsynced) and after it (the replaced
//! document's second name removed, the directory fsynced) on threads of their own, so that the
//! targets' fsyncs overlap instead of following one another. Every executor of a batch
//! (`solewriter_core::projection::machine::publish_many`) hands its parts here — the SQLite
//! adapter and the Node binding alike — with the target's [`FileSteps`].
//!
//! A part names only its target's file effects and reached points. The file effects run on
//! the part's thread; what the executor must see on its own thread (its probe, the host's
//! reached points) is relayed to it, the part's thread waiting until it has been seen — as
//! the [`Relay`] says. At most [`MAX_THREADS`] threads run parts; each takes the next part
//! left when it has ended one. Parts no thread could be started for run on the executor's
//! thread afterwards, and an executor's thread that unwinds (its probe panicked) stops every
//! part's thread at its next relayed effect instead of leaving it waiting.

use crate::error::FileError;
use crate::steps::FileSteps;
use solewriter_core::projection::machine::publish_many::Part;
use solewriter_core::projection::machine::{drive, Effect, ProtocolError};
use solewriter_core::projection::publication::PublishStep;
use std::sync::{mpsc, Mutex, PoisonError};

/// Which effects of a part its executor's thread sees before they are carried out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Relay {
    /// None (nothing on the executor's thread observes them).
    Nothing,
    /// The reached points only (a host that is told of each).
    Reached,
    /// Every effect (a probe that times or counts them).
    Every,
}

/// The most threads one batch's parts run on at once: enough for the fsyncs of a batch of
/// this many targets to overlap, few enough that a batch of thousands does not start as many
/// threads.
pub const MAX_THREADS: usize = 32;

/// What a part's thread tells the executor's thread before it carries out an effect: its
/// place in the batch, the effect's name, the point reached (if it is one), and the sender
/// of the answer it waits for (dropped unanswered if the executor's thread unwinds).
type Notice = (usize, &'static str, Option<PublishStep>, mpsc::Sender<()>);

/// One part still to run: its place, the part, its target's file steps.
type Job<'p, 'r, 'f, 's, E> = (usize, Part<'p, 'r, E>, &'f mut FileSteps<'s>);

/// Runs each part to its end, part `i` with `files[i]` (the file steps of the batch's `i`-th
/// target), which carries out its file effects, on up to [`MAX_THREADS`] threads. Before an
/// effect that `relay` names, the part's thread waits for this thread to have called
/// `seen(i, name, reached)`. Whether every part ended is the batch's to say
/// ([`Parts::join`](solewriter_core::projection::machine::publish_many::Parts::join) refuses to
/// go on while one has not): a part whose thread panicked, that was handed an effect that is
/// not its target's file work (answered with a protocol error), or that had no file steps,
/// has not.
pub fn run_parts<E: From<FileError> + From<ProtocolError> + Send>(
    parts: Vec<(usize, Part<'_, '_, E>)>,
    files: Vec<&mut FileSteps<'_>>,
    relay: Relay,
    mut seen: impl FnMut(usize, &'static str, Option<PublishStep>),
) {
    let mut files: Vec<Option<&mut FileSteps<'_>>> = files.into_iter().map(Some).collect();
    let jobs: Vec<Job<'_, '_, '_, '_, E>> = parts
        .into_iter()
        .filter_map(|(i, part)| Some((i, part, files.get_mut(i)?.take()?)))
        .collect();
    let threads = jobs.len().min(MAX_THREADS);
    let queue = Mutex::new(jobs);
    let next = || queue.lock().unwrap_or_else(PoisonError::into_inner).pop();
    let (notices, noticed) = mpsc::channel::<Notice>();
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map_while(|_| {
                let notices = notices.clone();
                let worker = move || {
                    while let Some((i, mut part, files)) = next() {
                        let shown = run_part(&mut part, files, relay, |name, reached| {
                            let (answer, answered) = mpsc::channel();
                            notices.send((i, name, reached, answer)).is_ok()
                                && answered.recv().is_ok()
                        });
                        if !shown {
                            // The executor's thread is gone: stop here.
                            return;
                        }
                    }
                };
                std::thread::Builder::new().spawn_scoped(s, worker).ok()
            })
            .collect();
        drop(notices);
        // Every notice, until every part's thread has ended.
        for (i, name, reached, answer) in noticed {
            seen(i, name, reached);
            let _ = answer.send(());
        }
        for worker in workers {
            // A part whose thread panicked has not ended: the batch's join says so.
            let _ = worker.join();
        }
    });
    // The parts no thread took (none could be started): here, one after the other.
    while let Some((i, mut part, files)) = next() {
        run_part(&mut part, files, relay, |name, reached| {
            seen(i, name, reached);
            true
        });
    }
}

/// Drives one part until it ends (or is refused: a protocol error) with its target's
/// `files`, calling `show` before each effect `relay` names. `false` if `show` answered
/// `false` (the executor's thread is gone) and the part was stopped there.
fn run_part<E: From<FileError> + From<ProtocolError>>(
    part: &mut Part<'_, '_, E>,
    files: &mut FileSteps<'_>,
    relay: Relay,
    mut show: impl FnMut(&'static str, Option<PublishStep>) -> bool,
) -> bool {
    let mut shown = true;
    let _ = drive(part, |effect| {
        let reached = match &effect {
            Effect::Reached(step, _) => Some(*step),
            _ => None,
        };
        let shows = match relay {
            Relay::Nothing => false,
            Relay::Reached => reached.is_some(),
            Relay::Every => true,
        };
        if shows && !show(effect.name(), reached) {
            shown = false;
            return None;
        }
        Some(match effect {
            Effect::File(effect) => files.execute(effect),
            Effect::Reached(_, ask) => ask.answer(()),
            effect => effect.fail(E::from(ProtocolError::WrongAnswer {
                machine: "batch part",
                answered: "an effect that is not lock-free file work",
            }))?,
        })
    });
    shown
}
