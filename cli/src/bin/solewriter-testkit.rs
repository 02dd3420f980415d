//! `solewriter-testkit`: the commands of `solewriter` with its test seams, for the tests of
//! this repository only (never shipped: a release installs `solewriter` alone, e.g.
//! `cargo install --path cli --bin solewriter`). It parses what `solewriter` parses plus:
//!
//! - `SOLEWRITER_TEST_CLOCK_FILE=FILE` in the environment: every command but `demo` reads
//!   broker time from FILE (`FileClock`: decimal milliseconds, replaced atomically) instead of
//!   the system clock. The process tests make a lease expire by moving one clock that all
//!   their child processes share, so no test waits for a real deadline.
//! - `holder --stall-at STEP` and `publish --stall-at STEP`: a publication that reaches STEP
//!   (a publication step in kebab-case, see `holder`) prints `stalled <step>` on stdout and
//!   blocks until one stdin line (or its end) arrives, then goes on.
//! - `submit --stall-before-commit`: once the row is written, prints `stalled row-written` and
//!   waits for one stdin line (or its end) before committing.
//!
//! The seams reach the commands as a [`Seams`] value given to [`solewriter_cli::run`]; the
//! shipped binary gives none.
#![forbid(unsafe_code)]

use clap::{Arg, ArgAction, ArgMatches};
use solewriter::projection::FileClock;
use solewriter::projection::{PublishProbe, PublishStep};
use solewriter::TargetId;
use solewriter_cli::holder::{answer, next_line};
use solewriter_cli::{command, exit, parse, run, Seams};
use std::process::ExitCode;
use std::sync::Arc;

/// The environment variable naming the clock file.
const CLOCK_ENV: &str = "SOLEWRITER_TEST_CLOCK_FILE";

/// Stalls a publication at one step until the driver sends a line.
struct StallAt(PublishStep);

impl PublishProbe for StallAt {
    fn reached(&self, step: PublishStep, _: &TargetId, _: u64) {
        if step == self.0 {
            answer(&format!("stalled {}", step.name()));
            let _ = next_line();
        }
    }
}

/// Parses a publication step in kebab-case.
fn parse_step(text: &str) -> Result<PublishStep, String> {
    PublishStep::parse(text).ok_or_else(|| {
        let names: Vec<_> = PublishStep::ALL
            .into_iter()
            .map(PublishStep::name)
            .collect();
        format!("expected one of {}", names.join(", "))
    })
}

fn stall_at() -> Arg {
    Arg::new("stall_at")
        .long("stall-at")
        .value_name("STEP")
        .value_parser(parse_step)
        .help("Stall the publication at this step until one stdin line (or its end) arrives")
}

/// The seams the command line and the environment ask for.
fn seams(matches: &ArgMatches) -> Seams {
    let clock = std::env::var_os(CLOCK_ENV)
        .filter(|path| !path.is_empty())
        .map(|path| Arc::new(FileClock::new(path)) as Arc<dyn solewriter::Clock>);
    let (stall, before_commit) = match matches.subcommand() {
        Some(("holder" | "publish", sub)) => (sub.get_one::<PublishStep>("stall_at"), false),
        Some(("submit", sub)) => (None, sub.get_flag("stall_before_commit")),
        _ => (None, false),
    };
    Seams {
        clock,
        publish_probe: stall.map(|step| Arc::new(StallAt(*step)) as Arc<dyn PublishProbe>),
        before_commit: before_commit.then(|| {
            Arc::new(|| {
                answer("stalled row-written");
                let _ = next_line();
            }) as Arc<dyn Fn()>
        }),
    }
}

fn main() -> ExitCode {
    let command = command()
        .mut_subcommand("holder", |c| c.arg(stall_at()))
        .mut_subcommand("publish", |c| c.arg(stall_at()))
        .mut_subcommand("submit", |c| {
            c.arg(
                Arg::new("stall_before_commit")
                    .long("stall-before-commit")
                    .action(ArgAction::SetTrue)
                    .help("Once the row is written, print `stalled row-written` and wait for one stdin line before committing"),
            )
        });
    exit(parse(command).and_then(|(cli, matches)| run(cli, &seams(&matches))))
}
