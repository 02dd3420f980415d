//! Scripting a store by hand: `init`, `admit`, `submit` and `publish`.

use crate::config::Settings;
use crate::error::{Class, CliError, CliResult};
use crate::say;
use crate::time::duration;
use crate::{parse_channel, parse_instance, parse_producer, parse_target};
use serde_json::json;
use solewriter::files::read_capped;
use solewriter::projection::Initialized;
use solewriter::projection::PublishProbe;
use solewriter::projection::MAX_TUPLE_JSON_BYTES;
use solewriter::projection::{ConsumerBinding, MAX_BINDING_BYTES};
use solewriter::projection::{SubmissionRejected, Watermark, WatermarkKind};
use solewriter::{Millis, ProjectionStore, PublishedNow, Submission, SubmitOutcome, TargetTuple};
use std::io::Read;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

/// Arguments of `submit`.
#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("envelope_source").required(true).args(["envelope", "envelope_file"])))]
pub struct SubmitArgs {
    /// The submitting producer (must own the channel).
    #[arg(long, value_name = "NAME")]
    producer: String,
    /// Target id (64 lowercase hex).
    #[arg(long, value_name = "HEX")]
    target: String,
    /// The producer's channel.
    #[arg(long, value_name = "NAME")]
    channel: String,
    /// Monotonic source watermark, of the kind the channel declares: a decimal integer for an
    /// `integer` channel (the default kind), the text itself for the other kinds.
    #[arg(long, value_name = "W", allow_negative_numbers = true)]
    watermark: String,
    /// The envelope, as JSON text.
    #[arg(long, value_name = "JSON")]
    envelope: Option<String>,
    /// A file holding the envelope.
    #[arg(long, value_name = "FILE")]
    envelope_file: Option<PathBuf>,
    /// Capture time in Unix milliseconds (required: the producer's, never the clock's, so a
    /// retry of the same command is an identical replay).
    #[arg(long, value_name = "MS", allow_negative_numbers = true)]
    captured_at: u64,
    /// How long after capture the envelope stays fresh (required; no default).
    #[arg(long, value_name = "MS", allow_negative_numbers = true)]
    expires_in_ms: u64,
}

/// `init`: adds the two tables to the store's database (creating the file if absent; a
/// database that already holds them is left as it is) and creates the runtime root (0700).
pub fn init(settings: &Settings, json: bool) -> CliResult<()> {
    let path = settings.store_path()?;
    let root = settings.runtime_root()?;
    let timing = settings.timing()?;
    // A registry every later command would refuse is refused now, before anything exists.
    let profile = settings.profile()?;
    settings.registry()?.check_profile(profile).map_err(|e| {
        CliError::config(format!(
            "channel registry refused: {e}; nothing was read or written"
        ))
    })?;
    let initialized = ProjectionStore::initialize_profile(path, &timing, profile)?;
    let created = initialized == Initialized::Created;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(root.path())
        .map_err(|e| {
            CliError::new(
                Class::Io,
                format!(
                    "store {} is initialized but runtime root {} could not be created: {e}",
                    path.display(),
                    root.path().display()
                ),
            )
        })?;
    if json {
        say!(
            "{}",
            json!({"store": path, "runtimeRoot": root.path(), "created": created})
        );
    } else {
        say!(
            "{} store {} and runtime root {}",
            match initialized {
                Initialized::Created => "initialized",
                Initialized::Upgraded => "upgraded to schema 2:",
                _ => "already initialized:",
            },
            path.display(),
            root.path().display()
        );
    }
    Ok(())
}

/// Reads `what` from `source` (named `from` in errors), at most `limit` bytes: one byte more
/// is refused without reading the rest, so an endless or huge input costs nothing.
fn read_bounded(source: impl Read, from: &str, what: &str, limit: usize) -> CliResult<String> {
    let bytes = read_capped(source, limit).map_err(|e| {
        CliError::new(
            Class::Io,
            format!("reading {what} from {from} failed: {e}; nothing was written"),
        )
    })?;
    if bytes.len() > limit {
        return Err(CliError::new(
            Class::Rejected,
            format!("{what} from {from} is over its bound of {limit} bytes; nothing was written"),
        ));
    }
    String::from_utf8(bytes).map_err(|_| {
        CliError::new(
            Class::Rejected,
            format!("{what} from {from} is not UTF-8; nothing was written"),
        )
    })
}

/// `admit`: admits the target of an attested tuple and prints its id.
pub fn admit(settings: &Settings, tuple: &str, json: bool) -> CliResult<()> {
    let text = if tuple == "-" {
        // Room for whitespace around the tuple (e.g. `echo`'s newline): the core checks the
        // exact bound after trimming.
        read_bounded(
            std::io::stdin().lock(),
            "stdin",
            "the attested tuple",
            2 * MAX_TUPLE_JSON_BYTES,
        )?
    } else {
        tuple.to_owned()
    };
    let tuple = TargetTuple::from_json(text.trim())
        .map_err(|e| CliError::new(Class::Rejected, format!("{e}; nothing was read or written")))?;
    let store = ProjectionStore::open(&settings.store_options()?)?;
    let target = store.admit_target(&tuple)?;
    if json {
        say!("{}", json!({ "targetId": target }));
    } else {
        say!("{target}");
    }
    Ok(())
}

/// `submit`: one producer submission; prints what it did. `before_commit` (the test binary's
/// `--stall-before-commit`, never given by `solewriter`) runs once the row is written, before
/// the commit.
pub fn submit(
    settings: &Settings,
    args: &SubmitArgs,
    json: bool,
    before_commit: Option<&dyn Fn()>,
) -> CliResult<()> {
    let producer = parse_producer(&args.producer)?;
    let target = parse_target(&args.target)?;
    let channel = parse_channel(&args.channel)?;
    let options = settings.store_options()?;
    // Read no more than the channel admits (the core checks the exact bound again). An
    // unregistered channel is refused before anything is read.
    let limit = options
        .registry
        .get(&channel)
        .map(|spec| spec.max_envelope_bytes)
        .ok_or_else(|| {
            CliError::new(
                Class::Rejected,
                format!(
                    "{}; nothing was read or written",
                    SubmissionRejected::UnknownChannel(channel.to_string())
                ),
            )
        })?;
    let envelope_json = match (&args.envelope, &args.envelope_file) {
        (Some(text), _) if text == "-" => {
            read_bounded(std::io::stdin().lock(), "stdin", "the envelope", limit)?
        }
        (Some(text), _) => text.clone(),
        (None, Some(path)) => {
            let from = format!("file {}", path.display());
            let file = std::fs::File::open(path).map_err(|e| {
                CliError::new(
                    Class::Io,
                    format!("reading the envelope from {from} failed: {e}; nothing was written"),
                )
            })?;
            read_bounded(file, &from, "the envelope", limit)?
        }
        (None, None) => return Err(CliError::usage("give --envelope or --envelope-file")),
    };
    let store = ProjectionStore::open(&options)?;
    let captured_at = Millis(args.captured_at);
    let kind = options.registry.get(&channel).map(|spec| spec.watermark);
    let source_watermark = match kind {
        // An unregistered channel is refused by admission, whatever its watermark.
        Some(WatermarkKind::Integer) | None => match args.watermark.parse::<u64>() {
            Ok(n) => Watermark::Integer(n),
            Err(_) => Watermark::Text(args.watermark.clone()),
        },
        Some(_) => Watermark::Text(args.watermark.clone()),
    };
    let submission = Submission {
        target_id: target,
        channel,
        source_watermark,
        envelope_json,
        captured_at,
        expires_at: captured_at.plus_ms(args.expires_in_ms),
    };
    let stall = |_| {
        if let Some(before_commit) = before_commit {
            before_commit();
        }
    };
    let outcome = store.submit_observed(&producer, &submission, &stall)?;
    let (name, what) = match outcome {
        SubmitOutcome::Inserted => ("inserted", "inserted"),
        SubmitOutcome::Advanced => ("advanced", "advanced"),
        SubmitOutcome::Replayed => ("replayed", "replayed (identical; nothing written)"),
        SubmitOutcome::Degraded => (
            "degraded",
            "degraded (source-conflict: same watermark, different content; stored envelope kept)",
        ),
    };
    if json {
        say!(
            "{}",
            json!({
                "outcome": name,
                "targetId": submission.target_id,
                "channel": submission.channel,
                "sourceWatermark": submission.source_watermark,
                "capturedAt": submission.captured_at,
                "expiresAt": submission.expires_at,
            })
        );
    } else {
        say!(
            "{what}: channel {} of target {} at watermark {}",
            submission.channel,
            submission.target_id,
            submission.source_watermark
        );
    }
    if outcome == SubmitOutcome::Degraded {
        return Err(CliError::new(
            Class::Conflict,
            format!(
                "source conflict: channel {} of target {} already holds other content at watermark {}; the channel is marked degraded, the stored envelope kept and this one discarded",
                submission.channel, submission.target_id, submission.source_watermark
            ),
        ));
    }
    Ok(())
}

/// Arguments of `publish`.
#[derive(clap::Args, Debug)]
pub struct PublishArgs {
    /// Target id (64 lowercase hex; 32 in a store of the Memory Core profile).
    target: String,
    /// Name of this holder instance (shown to contenders).
    #[arg(long, value_name = "NAME")]
    instance: String,
    /// A file holding the hooks' consumer binding (a JSON object), which a store of the Memory
    /// Core profile publishes with every document (refused by a generic store).
    #[arg(long, value_name = "FILE")]
    consumer_binding_file: Option<PathBuf>,
}

/// The consumer binding in the file at `path` (a JSON object of at most
/// [`MAX_BINDING_BYTES`]), or none without a file.
pub fn read_consumer_binding(path: Option<&Path>) -> CliResult<Option<ConsumerBinding>> {
    let Some(path) = path else {
        return Ok(None);
    };
    let from = path.display().to_string();
    let file = std::fs::File::open(path).map_err(|e| {
        CliError::new(
            Class::Io,
            format!("reading the consumer binding from {from} failed: {e}; nothing was written"),
        )
    })?;
    let text = read_bounded(file, &from, "the consumer binding", MAX_BINDING_BYTES)?;
    let binding = ConsumerBinding::from_json(&text)
        .map_err(|e| CliError::new(Class::Rejected, format!("{e}; nothing was written")))?;
    Ok(Some(binding))
}

/// `publish`: grants, publishes and releases in one transaction (one-shot); a live holder
/// is a retry-later failure. `probe` (the test binary's `--stall-at`, never given by
/// `solewriter`) observes the publication's steps.
pub fn publish(
    settings: &Settings,
    args: &PublishArgs,
    json: bool,
    probe: Option<&dyn PublishProbe>,
) -> CliResult<()> {
    let target = parse_target(&args.target)?;
    let instance = parse_instance(&args.instance)?;
    let binding = read_consumer_binding(args.consumer_binding_file.as_deref())?;
    let mut store = ProjectionStore::open(&settings.store_options()?)?;
    store.set_consumer_binding(binding);
    let published = match probe {
        Some(probe) => store.publish_now_observed(&target, &instance, probe),
        None => store.publish_now(&target, &instance),
    }?;
    match published {
        PublishedNow::Held(held) => Err(CliError::new(
            Class::Retry,
            format!(
                "target {target} is held by {} at epoch {} (retry after {}); nothing was written",
                held.holder_instance_digest,
                held.fencing_epoch,
                duration(held.retry_after_ms)
            ),
        )),
        PublishedNow::Published(published) if json => {
            say!(
                "{}",
                json!({
                    "fencingEpoch": published.fencing_epoch,
                    "bytes": published.bytes,
                    "path": published.path,
                })
            );
            Ok(())
        }
        PublishedNow::Published(published) => {
            say!(
                "published epoch {}: {} bytes to {}",
                published.fencing_epoch,
                published.bytes,
                published.path.display()
            );
            Ok(())
        }
    }
}
