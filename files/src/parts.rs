//! A batch's lock-free parts run at once: each target's part before the shared transaction
//! (its directory chain, its temp sibling written and fsynced) and after it (the replaced
//! document's second name removed, the directory fsynced) on a thread of its own, so that the
//! targets' fsyncs overlap instead of following one another. Every executor of a batch
//! (`solewriter_core::projection::machine::publish_many`) hands its parts here — the SQLite
//! adapter and the Node binding alike — with the target's [`FileSteps`].
//!
//! A part names only its target's file effects and reached points. The file effects run on
//! the part's thread; what the executor must see on its own thread (its probe, the host's
//! reached points) is relayed to it, the part's thread waiting until it has been seen — as
//! the [`Relay`] says.

use crate::error::FileError;
use crate::steps::FileSteps;
use solewriter_core::projection::machine::publish_many::Part;
use solewriter_core::projection::machine::{drive, Effect, ProtocolError};
use solewriter_core::projection::publication::PublishStep;
use std::sync::mpsc;

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

/// What a part's thread tells the executor's thread before it carries out an effect: its
/// place in the batch, the effect's name, the point reached (if it is one), and where to say
/// that it has been seen.
type Notice = (usize, &'static str, Option<PublishStep>, mpsc::Sender<()>);

/// Runs each part to its end, part `i` on a thread of its own with `files[i]` (the file steps
/// of the batch's `i`-th target), which carries out its file effects. Before an effect that `relay` names, the part's thread waits for this
/// thread to have called `seen(i, name, reached)`. `true` if every part ran to its end; `false`
/// if one did not (a thread panicked, or a part was handed an effect that is not its target's
/// file work, which it is answered with a protocol error).
pub fn run_parts<E: From<FileError> + From<ProtocolError> + Send>(
    parts: Vec<(usize, Part<'_, '_, E>)>,
    files: Vec<&mut FileSteps<'_>>,
    relay: Relay,
    mut seen: impl FnMut(usize, &'static str, Option<PublishStep>),
) -> bool {
    let mut files: Vec<Option<&mut FileSteps<'_>>> = files.into_iter().map(Some).collect();
    let (notices, noticed) = mpsc::channel::<Notice>();
    std::thread::scope(|s| {
        let workers: Vec<_> = parts
            .into_iter()
            .map(|(i, mut part)| {
                let files = files.get_mut(i).and_then(Option::take);
                let notices = notices.clone();
                s.spawn(move || {
                    let files = files?;
                    let (shown, wait) = mpsc::channel();
                    drive(&mut part, |effect| {
                        let reached = match &effect {
                            Effect::Reached(step, _) => Some(*step),
                            _ => None,
                        };
                        let shows = match relay {
                            Relay::Nothing => false,
                            Relay::Reached => reached.is_some(),
                            Relay::Every => true,
                        };
                        if shows {
                            notices
                                .send((i, effect.name(), reached, shown.clone()))
                                .ok()?;
                            wait.recv().ok()?;
                        }
                        Some(match effect {
                            Effect::File(effect) => files.execute(effect),
                            Effect::Reached(_, ask) => ask.answer(()),
                            effect => effect.fail(E::from(ProtocolError::WrongAnswer {
                                machine: "batch part",
                                answered: "an effect that is not lock-free file work",
                            }))?,
                        })
                    })
                    .ok()
                })
            })
            .collect();
        drop(notices);
        // Every notice, until every part's thread has ended.
        for (i, name, reached, shown) in noticed {
            seen(i, name, reached);
            let _ = shown.send(());
        }
        workers
            .into_iter()
            .all(|worker| matches!(worker.join(), Ok(Some(true))))
    })
}
