//! The operator CLI: argument definitions and dispatch; a failure becomes one line on stderr
//! and the exit code of its class (see [`error`]). Its own package, so that linking the
//! library pulls none of the CLI's dependencies.
//!
//! Two binaries run it. `solewriter` (`src/main.rs`) is the one shipped: it runs every
//! command with no [`Seams`]. `solewriter-testkit` (`src/bin/solewriter-testkit.rs`) is for
//! tests only: the same commands, plus the flags and the clock file that fill [`Seams`]
//! (`--stall-at`, `--stall-before-commit`, `SOLEWRITER_TEST_CLOCK_FILE`).
//!
//! - [`config`]: the TOML file and flags every command reads its settings from.
//! - [`error`]: one-line errors and exit codes.
//! - [`output`]: stdout, where a reader closing the pipe early ends the output, not the command.
//! - [`store_cmds`]: `init`, `admit`, `submit`, `publish` — scripting a store by hand.
//! - [`inspect`]: `inspect` and `read` — what an operator looks at.
//! - [`lease`]: `lease end` — an operator ends a target's current grant.
//! - [`lock`]: `lock status` — who owns a project lock, and whether it is alive; `lock clear`
//!   — an operator removes an unknown owner's record, named by its nonce.
//! - [`ledger`]: `ledger build`, `ledger read` and `ledger status` — the event ledger of a
//!   project directory over a Git repository: the sole-writer build, the demand read that
//!   never waits for a live writer, and the stored snapshot beside the project lock.
//! - [`holder`]: the hidden `holder` subcommand, a scripted lease holder on stdin/stdout.
//! - [`reader`]: the hidden `reader` subcommand, a process that checks every document it sees.
//! - [`demo`]: `demo`, the end-to-end demonstration on a fresh embedded store.
//! - [`time`]: RFC 3339 times and readable durations of the text output.
//! - [`process`]: the demo's child processes (this binary re-executed), driven over pipes.
#![forbid(unsafe_code)]

pub mod config;
pub mod demo;
pub mod error;
pub mod holder;
pub mod inspect;
pub mod lease;
pub mod ledger;
pub mod lock;
pub mod output;
pub mod process;
pub mod reader;
pub mod store_cmds;
pub mod time;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use config::{ConfigArgs, Settings};
use error::{Class, CliError, CliResult};
use solewriter::projection::PublishProbe;
use solewriter::{ChannelName, Clock, InstanceDigest, ProducerId, TargetId};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

/// What a test may change in one run of the commands, passed to [`run`] as a value. The
/// shipped `solewriter` passes [`Seams::default`] — none — so nothing on its command line or
/// in its environment can replace its clock or park its transactions. Only the test binary
/// `solewriter-testkit` fills them.
#[derive(Clone, Default)]
pub struct Seams {
    /// The broker clock of every command but `demo` (the system clock when `None`).
    pub clock: Option<Arc<dyn Clock>>,
    /// Observes every step of the publications of `publish` and of `holder`.
    pub publish_probe: Option<Arc<dyn PublishProbe>>,
    /// Runs once a `submit`'s row is written, before its commit.
    pub before_commit: Option<Arc<dyn Fn()>>,
}

/// Fenced single-writer publication of hook projections, on an embedded SQLite store.
#[derive(Parser, Debug)]
#[command(name = "solewriter", version, about, propagate_version = true)]
pub struct Cli {
    #[command(flatten)]
    config: ConfigArgs,
    /// Print the result as one JSON object on one line (every command but `demo`).
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Show solewriter doing its job: producers, contending publisher processes, a frozen
    /// holder fenced after takeover, and a reader checking every document.
    Demo {
        /// Directory for the store and runtime root (must be absent or empty; default: a
        /// temporary directory, removed afterwards).
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Create a new store and its runtime root (never overwrites a store).
    Init,
    /// Admit a target from its attested tuple (a JSON object, or `-` for stdin); prints the
    /// derived target id.
    Admit {
        /// The attested tuple as JSON, or `-` to read it from stdin.
        #[arg(value_name = "TUPLE_JSON")]
        tuple: String,
    },
    /// Submit a producer's envelope for one channel of an admitted target.
    Submit(store_cmds::SubmitArgs),
    /// Acquire the target's lease and publish its `current.json` once.
    Publish(store_cmds::PublishArgs),
    /// Show every target (or one): holder, epoch, lease state, expiry, and its channels.
    Inspect {
        /// Only this target (64 lowercase hex); it must be admitted.
        target: Option<String>,
    },
    /// Validate and print a target's published `current.json`.
    Read {
        /// Target id (64 lowercase hex).
        target: String,
    },
    /// Wait until a target's `current.json` is newer than `--after-epoch` (any document
    /// without it), then print it as `read` does; exit 6 when `--timeout-ms` passes first.
    Watch {
        /// Target id (64 lowercase hex).
        target: String,
        /// Wait for an epoch greater than this one.
        #[arg(long)]
        after_epoch: Option<u64>,
        /// How long to wait, in milliseconds (required: there is no default).
        #[arg(long)]
        timeout_ms: u64,
    },
    /// Operator actions on a target's lease.
    #[command(subcommand)]
    Lease(LeaseCommand),
    /// Project lock diagnostics.
    #[command(subcommand)]
    Lock(LockCommand),
    /// The event ledger of a project directory over a Git repository: the first-parent
    /// history, built by the sole writer or read on demand, and the stored snapshot.
    #[command(subcommand)]
    Ledger(LedgerCommand),
    /// Scripted lease holder (one command per stdin line); see `holder` module docs.
    #[command(hide = true)]
    Holder(holder::HolderArgs),
    /// Holds the project lock of DIR until one stdin line; see [`lock::hold`].
    #[command(hide = true)]
    LockHolder {
        /// The project directory.
        dir: PathBuf,
    },
    /// Reads `current.json` until stdin closes, checking every document.
    #[command(hide = true)]
    Reader {
        /// Target id (64 lowercase hex).
        #[arg(long)]
        target: String,
    },
}

/// `solewriter lease …`.
#[derive(Subcommand, Debug)]
enum LeaseCommand {
    /// End the target's current grant, whoever holds it: the holder is fenced (its next
    /// publish or release is refused and writes nothing); the next grant gets a higher epoch.
    /// An unheld, released or expired lease has nothing to end (exit 0, nothing written).
    End {
        /// Target id (64 lowercase hex).
        target: String,
    },
}

/// `solewriter lock …`.
#[derive(Subcommand, Debug)]
enum LockCommand {
    /// Show the owner of the project lock in DIR, its nonce, and whether it is alive, dead or
    /// unknown.
    Status {
        /// The project directory holding `project.lock`.
        dir: PathBuf,
    },
    /// Remove the record of an owner that is unknown from here (check it by other means
    /// first), only if it carries the nonce given; refused (exit 14) when the kernel lock is
    /// held, the owner is alive or dead, or the nonce differs.
    Clear {
        /// The project directory holding `project.lock`.
        dir: PathBuf,
        /// The record's nonce, as `lock status` prints it (64 lowercase hex).
        #[arg(long, value_name = "HEX")]
        nonce: String,
    },
}

/// `solewriter ledger …`.
#[derive(Subcommand, Debug)]
enum LedgerCommand {
    /// The sole-writer build: take the project lock of DIR (waiting as told: `--wait-ms MS`
    /// or `--no-wait`, one of them required), derive the history's facts from the
    /// repository, replace the snapshot at most once, release. Busy after the wait: exit 6.
    Build(ledger::BuildArgs),
    /// The demand read: the history from the snapshot, missing facts derived from the
    /// repository and persisted when the project lock is free; never waits for a live
    /// writer (its additions are then discarded).
    Read(ledger::QueryArgs),
    /// The stored snapshot of DIR (absent, reusable or rejected) and its project lock as
    /// `lock status` shows it; runs no git, takes no lock, writes nothing.
    Status {
        /// The project directory holding `ledger.snapshot` and `project.lock`.
        dir: PathBuf,
    },
}

/// Parses a target id given on the command line.
pub fn parse_target(text: &str) -> CliResult<TargetId> {
    TargetId::parse(text).map_err(|_| {
        CliError::new(
            Class::Rejected,
            format!("target id `{}` refused: it must be 64 lowercase hex characters; nothing was read or written", text.chars().take(80).collect::<String>()),
        )
    })
}

fn refused_name(what: &str, e: impl std::fmt::Display) -> CliError {
    CliError::new(
        Class::Rejected,
        format!("{what} refused: {e}; nothing was read or written"),
    )
}

/// Parses an instance name given on the command line.
pub fn parse_instance(text: &str) -> CliResult<InstanceDigest> {
    InstanceDigest::parse(text).map_err(|e| refused_name("instance name", e))
}

/// Parses a producer name given on the command line.
pub fn parse_producer(text: &str) -> CliResult<ProducerId> {
    ProducerId::parse(text).map_err(|e| refused_name("producer name", e))
}

/// Parses a channel name given on the command line.
pub fn parse_channel(text: &str) -> CliResult<ChannelName> {
    ChannelName::parse(text).map_err(|e| refused_name("channel name", e))
}

/// Runs the parsed command line with `seams` (none in the shipped binary).
pub fn run(cli: Cli, seams: &Seams) -> CliResult<()> {
    let settings = || {
        let settings = Settings::load(&cli.config)?;
        Ok::<_, CliError>(match &seams.clock {
            Some(clock) => settings.with_clock(Arc::clone(clock)),
            None => settings,
        })
    };
    let probe = seams.publish_probe.as_deref();
    let json = cli.json;
    match cli.command {
        Command::Demo { .. } if json => Err(CliError::usage(
            "`demo` has no JSON output; nothing was read or written",
        )),
        Command::Demo { dir } => demo::run(dir),
        Command::Init => store_cmds::init(&settings()?, json),
        Command::Admit { tuple } => store_cmds::admit(&settings()?, &tuple, json),
        Command::Submit(args) => {
            store_cmds::submit(&settings()?, &args, json, seams.before_commit.as_deref())
        }
        Command::Publish(args) => store_cmds::publish(&settings()?, &args, json, probe),
        Command::Inspect { target } => inspect::inspect(&settings()?, target.as_deref(), json),
        Command::Read { target } => inspect::read(&settings()?, &target, json),
        Command::Watch {
            target,
            after_epoch,
            timeout_ms,
        } => inspect::watch(&settings()?, &target, after_epoch, timeout_ms, json),
        Command::Lease(LeaseCommand::End { target }) => lease::end(&settings()?, &target, json),
        Command::Lock(LockCommand::Status { dir }) => lock::status(&dir, json),
        Command::Lock(LockCommand::Clear { dir, nonce }) => lock::clear(&dir, &nonce, json),
        Command::Ledger(LedgerCommand::Build(args)) => ledger::build(&args, json),
        Command::Ledger(LedgerCommand::Read(args)) => ledger::read(&args, json),
        Command::Ledger(LedgerCommand::Status { dir }) => ledger::status(&dir, json),
        Command::Holder(args) => holder::run(&settings()?, &args, probe),
        Command::LockHolder { dir } => lock::hold(&dir),
        Command::Reader { target } => reader::run(&settings()?, &target),
    }
}

/// One line for a command line clap refused: the first paragraph of its message (the error
/// and, for missing arguments, their list), without clap's `error:` prefix and usage text.
fn usage_line(error: &clap::Error) -> String {
    let rendered = error.render().to_string();
    let paragraph: Vec<&str> = rendered
        .lines()
        .take_while(|line| !line.trim().is_empty())
        .map(str::trim)
        .collect();
    let text = paragraph.join(" ");
    let text = text.strip_prefix("error: ").unwrap_or(&text);
    format!("{text}; nothing was read or written (see `solewriter --help`)")
}

/// The command line of `solewriter`, with the exit-code table in its help. The test binary
/// adds its flags to it before [`parse`].
pub fn command() -> clap::Command {
    Cli::command().after_help(error::exit_code_table())
}

/// Parses the process's arguments with `command`. Help and version are printed on stdout
/// (exit 0); anything else clap refuses — no subcommand included — is a one-line usage error.
/// The matches are returned beside the parsed command line, for the flags `command` has
/// beyond [`Cli`]'s.
pub fn parse(command: clap::Command) -> Result<(Cli, clap::ArgMatches), CliError> {
    let refused = |e: clap::Error| match e.kind() {
        clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => {
            say!("{}", e.render().to_string().trim_end());
            std::process::exit(0)
        }
        clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
        | clap::error::ErrorKind::MissingSubcommand => CliError::usage(
            "no subcommand given; nothing was read or written (see `solewriter --help`)",
        ),
        _ => CliError::usage(usage_line(&e)),
    };
    let matches = command.try_get_matches().map_err(refused)?;
    let cli = Cli::from_arg_matches(&matches).map_err(refused)?;
    Ok((cli, matches))
}

/// The end of a run: a failure becomes one line on stderr and the exit code of its class.
pub fn exit(result: CliResult<()>) -> ExitCode {
    match output::finish(result) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            // A closed stderr leaves only the exit code to tell.
            let _ = writeln!(std::io::stderr(), "solewriter: error: {error}");
            ExitCode::from(error.class.exit_code())
        }
    }
}
