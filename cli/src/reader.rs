//! The hidden `reader` subcommand: a hook-like reader process that reads `current.json`
//! over and over until its stdin closes, checking every document it sees.
//!
//! ```text
//! solewriter reader --config FILE --target HEX
//! ```
//!
//! It reads at least once. Each read must give a complete, valid document of the right target (never a torn or
//! foreign one) whose fencing epoch never goes down. "Not published yet" is allowed until the
//! first document appears. Output, one line each, flushed:
//! `saw <epoch> <published_at_ms>` for every new document, then at the end
//! `checked <reads> <invalid> <regressions>`. Exits 8 if `invalid` or `regressions` is not 0.

use crate::config::Settings;
use crate::error::{Class, CliError, CliResult};
use crate::parse_target;
use solewriter::{read_projection, Error, FileError, Millis};
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Pause between two reads, so the reader leaves the (two) cores to the writers.
const READ_PAUSE: Duration = Duration::from_millis(1);

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}").and_then(|()| out.flush());
}

/// What the reader saw.
#[derive(Default)]
struct Tally {
    reads: u64,
    invalid: u64,
    regressions: u64,
    last: Option<(u64, Millis)>,
}

/// Reads until stdin closes; see the module documentation.
pub fn run(settings: &Settings, target: &str) -> CliResult<()> {
    let target = parse_target(target)?;
    let root = settings.runtime_root()?;
    let stop = Arc::new(AtomicBool::new(false));
    let stop_on_eof = Arc::clone(&stop);
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
        stop_on_eof.store(true, Ordering::SeqCst);
    });
    let mut tally = Tally::default();
    // At least one read, however early stdin closes.
    loop {
        tally.reads += 1;
        match read_projection(&root, &target) {
            Ok(doc) => {
                let seen = (doc.fencing_epoch, doc.published_at);
                match tally.last {
                    Some((epoch, _)) if seen.0 < epoch => tally.regressions += 1,
                    Some(last) if last == seen => {}
                    _ => {
                        say(&format!("saw {} {}", seen.0, seen.1 .0));
                        tally.last = Some(seen);
                    }
                }
            }
            Err(Error::File(FileError::NotPublished { .. })) if tally.last.is_none() => {}
            Err(_) => tally.invalid += 1,
        }
        if stop.load(Ordering::SeqCst) {
            break;
        }
        std::thread::sleep(READ_PAUSE);
    }
    say(&format!(
        "checked {} {} {}",
        tally.reads, tally.invalid, tally.regressions
    ));
    if tally.invalid + tally.regressions > 0 {
        return Err(CliError::new(
            Class::Invariant,
            format!(
                "reader saw {} invalid document(s) and {} epoch regression(s)",
                tally.invalid, tally.regressions
            ),
        ));
    }
    Ok(())
}
