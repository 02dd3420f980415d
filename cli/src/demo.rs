//! `solewriter demo`: solewriter doing its job on a real embedded store, step by step.
//!
//! In a temporary directory (or `--dir`), the demo writes a configuration file, initializes
//! the SQLite store and admits one target. Two producers submit their channels, including an
//! identical replay, a source conflict and two rejections. Then three publisher processes
//! (this binary re-executed as `holder`) contend for the target while a `reader` process
//! checks every document it sees. In the third round the winner is frozen with SIGSTOP past
//! its lease's expiry, another holder takes over and publishes, and the frozen holder, resumed
//! with SIGCONT, is shown fenced: its publication and its release change nothing.
//!
//! Two short sections follow for the other products: the subtree write guard ([`guard`]: two
//! agents, an overlap denied with a copy of the conflict, the disconnect sweep) and the
//! project lock ([`lock`]: a holder process, a read and a contender beside it, the holder
//! killed and its lock recovered).
//!
//! Every claim the demo prints is checked; a broken one is reported and makes the demo exit
//! with code 8. The timing values are written into the demo's configuration file and printed.

mod guard;
mod lock;

use crate::config::{ConfigArgs, Settings};
use crate::error::{Class, CliError, CliResult};
use crate::inspect::{print_document, print_target};
use crate::process::Child;
use crate::say;
use solewriter::projection::LeaseState;
use solewriter::projection::StatusReason;
use solewriter::{
    read_projection, ChannelName, Clock, Error, ProducerId, ProjectionStore, StoreOptions,
    Submission, SubmitOutcome, SystemClock, TargetId, TargetTuple,
};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Lease TTL of the demo: long enough for a publication on a loaded machine, short enough
/// to wait out while a holder is frozen.
const LEASE_TTL_MS: u64 = 2_000;
/// SQLite busy timeout of the demo.
const BUSY_TIMEOUT_MS: u64 = 5_000;
/// How long the producers' envelopes stay fresh.
const ENVELOPE_FRESH_MS: u64 = 60_000;
/// Extra wait past a frozen holder's expiry before the takeover.
const EXPIRY_MARGIN_MS: u64 = 100;
/// Names of the publisher processes.
const HOLDERS: [&str; 3] = ["holder-a", "holder-b", "holder-c"];

const CONFIG: &str = r#"# Written by `solewriter demo`.
store = "store.sqlite"
runtime_root = "runtime"
lease_ttl_ms = LEASE_TTL_MS
busy_timeout_ms = BUSY_TIMEOUT_MS

[[channels]]
name = "computed-route"
owner = "router"
envelope_schema = "computed-route.v1"
max_envelope_bytes = 65536

[[channels]]
name = "lifecycle-frontier"
owner = "frontier"
envelope_schema = "lifecycle-frontier.v1"
max_envelope_bytes = 65536
"#;

/// Counters and the list of broken invariants.
#[derive(Default)]
struct Tally {
    checks: usize,
    broken: Vec<String>,
    grants: Vec<u64>,
    denials: usize,
    fences: usize,
    publications: Vec<u64>,
    /// Writes the subtree write guard admitted, and denied.
    admitted: usize,
    denied: usize,
    /// Dead project lock owners recovered.
    recovered: usize,
}

impl Tally {
    /// Records and prints one checked claim.
    fn check(&mut self, holds: bool, claim: &str) {
        self.checks += 1;
        if holds {
            say!("   [ok] {claim}");
        } else {
            say!("   [BROKEN] {claim}");
            self.broken.push(claim.to_owned());
        }
    }
}

/// The demo's directory: a temporary one (removed at the end) or the given, empty one.
fn prepare_dir(dir: Option<PathBuf>) -> CliResult<(Option<tempfile::TempDir>, PathBuf)> {
    let Some(dir) = dir else {
        let temp = tempfile::Builder::new()
            .prefix("solewriter-demo-")
            .tempdir()
            .map_err(|e| {
                CliError::new(
                    Class::Io,
                    format!("creating a temporary directory failed: {e}"),
                )
            })?;
        let path = temp.path().to_owned();
        return Ok((Some(temp), path));
    };
    if let Ok(mut entries) = std::fs::read_dir(&dir) {
        if entries.next().is_some() {
            return Err(CliError::usage(format!(
                "demo directory {} is not empty; nothing was written (give an absent or empty directory)",
                dir.display()
            )));
        }
    }
    std::fs::create_dir_all(&dir).map_err(|e| CliError::io("creating directory", &dir, &e))?;
    Ok((None, dir))
}

fn tuple() -> CliResult<TargetTuple> {
    TargetTuple::new([
        "1",
        "hook-projection",
        "agent-7",
        "claude-code",
        "inst-1",
        "ws-1",
        "live-lane",
    ])
    .map_err(|e| CliError::new(Class::Rejected, e.to_string()))
}

fn name<T>(
    parse: fn(&str) -> Result<T, solewriter::projection::NameError>,
    text: &str,
) -> CliResult<T> {
    parse(text).map_err(|e| CliError::new(Class::Rejected, e.to_string()))
}

fn submission(
    target: &TargetId,
    channel: &str,
    watermark: u64,
    body: &str,
) -> CliResult<Submission> {
    let schema = format!("{channel}.v1");
    let captured_at = SystemClock.now();
    Ok(Submission {
        target_id: target.clone(),
        channel: name(ChannelName::parse, channel)?,
        source_watermark: watermark.into(),
        envelope_json: format!(r#"{{"schema":"{schema}","notAuthority":true,"body":"{body}"}}"#),
        captured_at,
        expires_at: captured_at.plus_ms(ENVELOPE_FRESH_MS),
    })
}

/// One producer submission, printed; returns its outcome or the rejection's text.
fn submit(
    store: &ProjectionStore,
    producer: &str,
    s: &Submission,
) -> CliResult<Result<SubmitOutcome, String>> {
    let outcome = match store.submit(&name(ProducerId::parse, producer)?, s) {
        Ok(outcome) => Ok(outcome),
        Err(Error::Rejected(why)) => Err(why.to_string()),
        Err(other) => return Err(other.into()),
    };
    let what = match &outcome {
        Ok(SubmitOutcome::Inserted) => "inserted".to_owned(),
        Ok(SubmitOutcome::Advanced) => "advanced".to_owned(),
        Ok(SubmitOutcome::Replayed) => "replayed: byte-identical, nothing written".to_owned(),
        Ok(SubmitOutcome::Degraded) => {
            "DEGRADED: same watermark, different content (source-conflict); stored envelope kept"
                .to_owned()
        }
        Err(why) => format!("rejected: {why}"),
    };
    say!(
        "   {producer:<8} -> {:<18} watermark {}  {what}",
        s.channel.as_str(),
        s.source_watermark
    );
    Ok(outcome)
}

fn producers(options: &StoreOptions, target: &TargetId, t: &mut Tally) -> CliResult<()> {
    // One connection per producer, as separate services would have.
    let router = ProjectionStore::open(options)?;
    let frontier = ProjectionStore::open(options)?;
    let route1 = submission(target, "computed-route", 1, "plan")?;
    let frontier1 = submission(target, "lifecycle-frontier", 1, "2 open obligations")?;
    let route2 = submission(target, "computed-route", 2, "plan, build")?;
    let ok = |r: Result<SubmitOutcome, String>, want: SubmitOutcome| r == Ok(want);
    let inserted = ok(submit(&router, "router", &route1)?, SubmitOutcome::Inserted)
        & ok(
            submit(&frontier, "frontier", &frontier1)?,
            SubmitOutcome::Inserted,
        );
    t.check(inserted, "first submissions of both channels are inserted");
    let advanced = ok(submit(&router, "router", &route2)?, SubmitOutcome::Advanced);
    t.check(advanced, "a higher watermark advances the channel");
    let replayed = ok(submit(&router, "router", &route2)?, SubmitOutcome::Replayed);
    t.check(replayed, "an identical replay is idempotent");
    let conflict = submission(target, "lifecycle-frontier", 1, "3 open obligations")?;
    let degraded = ok(
        submit(&frontier, "frontier", &conflict)?,
        SubmitOutcome::Degraded,
    );
    t.check(
        degraded,
        "a different envelope at the same watermark degrades the channel",
    );
    let stale = submission(target, "computed-route", 1, "plan")?;
    let regressed = submit(&router, "router", &stale)?.is_err();
    t.check(regressed, "a regressed watermark is rejected");
    let foreign = submission(target, "computed-route", 9, "hijack")?;
    let not_owner = submit(&frontier, "frontier", &foreign)?.is_err();
    t.check(
        not_owner,
        "a producer cannot submit to a channel it does not own",
    );
    Ok(())
}

/// Parses an answer `<word> <n> ...`: the first number after `word`.
fn number_after(answer: &str, word: &str) -> Option<u64> {
    let mut parts = answer.split_whitespace();
    (parts.next() == Some(word)).then_some(())?;
    parts.next()?.parse().ok()
}

/// All holders ask for the lease at once; returns the index of the single winner.
/// The asking order rotates with `round`, so that the winner is not always the same process.
fn race(holders: &mut [Child], round: usize, t: &mut Tally) -> CliResult<Option<usize>> {
    let n = holders.len();
    for i in 0..n {
        holders[(round + i) % n].send("acquire")?;
    }
    let mut winners = Vec::new();
    for (i, h) in holders.iter_mut().enumerate() {
        let answer = h.recv()?;
        if let Some(epoch) = number_after(&answer, "acquired") {
            say!("   {}: acquired epoch {epoch}", h.name());
            t.grants.push(epoch);
            winners.push(i);
        } else if answer.starts_with("held ") {
            let mut parts = answer.split_whitespace().skip(1);
            let (epoch, retry) = (parts.next().unwrap_or("?"), parts.next().unwrap_or("?"));
            say!(
                "   {}: held (epoch {epoch}, retry after {retry} ms), nothing written",
                h.name()
            );
            t.denials += 1;
        } else {
            say!("   {}: {answer}", h.name());
        }
    }
    t.check(
        winners.len() == 1,
        "exactly one of the three contenders is granted the lease",
    );
    Ok(winners.first().copied())
}

fn publish(holder: &mut Child, t: &mut Tally) -> CliResult<bool> {
    let answer = holder.ask("publish")?;
    let published = number_after(&answer, "published");
    match published {
        Some(epoch) => {
            let bytes = answer.split_whitespace().nth(2).unwrap_or("?");
            say!(
                "   {}: published epoch {epoch} ({bytes} bytes)",
                holder.name()
            );
            t.publications.push(epoch);
        }
        None => say!("   {}: {answer}", holder.name()),
    }
    Ok(published.is_some())
}

fn holder_args(config: &Path, target: &TargetId, instance: &str) -> Vec<OsString> {
    vec![
        "holder".into(),
        "--config".into(),
        config.into(),
        "--target".into(),
        target.as_str().into(),
        "--instance".into(),
        instance.into(),
    ]
}

/// Rounds 1 and 2: a race, the winner publishes.
fn rounds(holders: &mut [Child], t: &mut Tally) -> CliResult<()> {
    for round in 1..=2 {
        say!(
            "\n{}. Round {round}: three publisher processes ask for the lease at once",
            round + 3
        );
        if let Some(w) = race(holders, round - 1, t)? {
            let ok = publish(&mut holders[w], t)?;
            t.check(
                ok,
                "the holder publishes current.json inside its fenced transaction",
            );
        }
    }
    Ok(())
}

/// Round 3: freeze the winner past its expiry, take over, resume it, show it fenced.
/// Returns the index of the frozen (then fenced) holder.
fn takeover(
    holders: &mut [Child],
    options: &StoreOptions,
    target: &TargetId,
    t: &mut Tally,
) -> CliResult<Option<usize>> {
    say!("\n6. Round 3: the winner is frozen (SIGSTOP) before it publishes");
    let Some(frozen) = race(holders, 2, t)? else {
        return Ok(None);
    };
    holders[frozen].signal("STOP")?;
    say!(
        "   {} frozen (kill -STOP {}), still believing it holds the lease",
        holders[frozen].name(),
        holders[frozen].pid()
    );
    let other = (frozen + 1) % holders.len();
    let answer = holders[other].ask("acquire")?;
    let retry = match answer.split_whitespace().collect::<Vec<_>>()[..] {
        ["held", epoch, retry] => {
            say!(
                "   {}: held (epoch {epoch}, retry after {retry} ms), nothing written",
                holders[other].name()
            );
            t.denials += 1;
            retry.parse::<u64>().ok()
        }
        _ => {
            say!("   {}: {answer}", holders[other].name());
            None
        }
    };
    t.check(
        retry.is_some(),
        "while the grant is live, a contender is refused with retry metadata",
    );
    let wait = retry.unwrap_or(LEASE_TTL_MS) + EXPIRY_MARGIN_MS;
    say!("   waiting {wait} ms: the frozen holder's lease expires");
    std::thread::sleep(Duration::from_millis(wait));
    let answer = holders[other].ask("acquire")?;
    match number_after(&answer, "acquired") {
        Some(epoch) => {
            say!(
                "   {}: acquired epoch {epoch} (takeover)",
                holders[other].name()
            );
            t.grants.push(epoch);
        }
        None => say!("   {}: {answer}", holders[other].name()),
    }
    let ok = publish(&mut holders[other], t)?;
    t.check(ok, "the successor publishes");
    let path = options.runtime_root.current_path(target);
    let before = std::fs::read(&path).map_err(|e| CliError::io("reading", &path, &e))?;
    holders[frozen].signal("CONT")?;
    say!(
        "   {} resumed (kill -CONT {}); it now tries to publish with its old grant",
        holders[frozen].name(),
        holders[frozen].pid()
    );
    let answer = holders[frozen].ask("publish")?;
    say!("   {}: {answer}", holders[frozen].name());
    let successor = t.grants.last().copied().unwrap_or(0);
    let fenced = answer == format!("fenced superseded {successor}");
    if fenced {
        t.fences += 1;
    }
    t.check(
        fenced,
        "the stale holder is fenced: superseded by the successor's epoch",
    );
    let after = std::fs::read(&path).map_err(|e| CliError::io("reading", &path, &e))?;
    t.check(
        before == after,
        "current.json is byte-for-byte the successor's document",
    );
    Ok(Some(frozen))
}

/// Step 7: producers move on; the fenced holder acquires a fresh grant legitimately.
fn recovery(
    holders: &mut [Child],
    fenced: usize,
    options: &StoreOptions,
    target: &TargetId,
    t: &mut Tally,
) -> CliResult<()> {
    say!("\n7. The producers move on; the fenced holder re-acquires like anyone else");
    let router = ProjectionStore::open(options)?;
    let route3 = submission(target, "computed-route", 3, "plan, build, ship")?;
    let advanced = submit(&router, "router", &route3)? == Ok(SubmitOutcome::Advanced);
    t.check(advanced, "the router advances to watermark 3");
    let h = &mut holders[fenced];
    let answer = h.ask("acquire")?;
    match number_after(&answer, "acquired") {
        Some(epoch) => {
            say!("   {}: acquired epoch {epoch}", h.name());
            t.grants.push(epoch);
            let ok = publish(h, t)?;
            t.check(ok, "a fresh grant publishes the new watermark");
        }
        None => {
            say!("   {}: {answer}", h.name());
            t.check(false, "the fenced holder can acquire a fresh grant");
        }
    }
    Ok(())
}

/// Step 8: stop the reader and collect what it checked. Returns the number of reads.
fn finish_reader(mut reader: Child, t: &mut Tally) -> CliResult<u64> {
    say!("\n8. The reader process stops and reports");
    reader.close_stdin();
    let mut seen = Vec::new();
    let mut summary = None;
    while summary.is_none() {
        let line = reader.recv()?;
        if let Some(epoch) = number_after(&line, "saw") {
            seen.push(epoch);
        } else if line.starts_with("checked ") {
            summary = Some(line);
        }
    }
    let numbers: Vec<u64> = summary
        .iter()
        .flat_map(|s| s.split_whitespace().skip(1))
        .filter_map(|n| n.parse().ok())
        .collect();
    let [reads, invalid, regressions] = numbers[..] else {
        return Err(CliError::new(Class::Io, "the reader's report is malformed"));
    };
    let status = reader.wait()?;
    let shown: Vec<String> = seen.iter().map(u64::to_string).collect();
    say!(
        "   reader: {reads} reads, documents of epochs {} seen, {invalid} torn or invalid, {regressions} epoch regressions",
        shown.join(", ")
    );
    t.check(
        invalid == 0,
        "every read gave a complete, valid document (old-complete or new-complete)",
    );
    t.check(
        regressions == 0 && seen.windows(2).all(|w| w[0] < w[1]),
        "the published epoch never went backwards",
    );
    t.check(
        seen.last() == t.publications.last() && seen.iter().all(|e| t.publications.contains(e)),
        "the reader saw only published documents, ending with the last one",
    );
    t.check(status.success(), "the reader process exited cleanly");
    Ok(reads)
}

/// Step 9: the final state, as an operator would see it.
fn final_state(options: &StoreOptions, target: &TargetId, t: &mut Tally) -> CliResult<u64> {
    say!("\n9. Final state (what `solewriter inspect` and `solewriter read` show)");
    let store = ProjectionStore::open(options)?;
    let now = SystemClock.now();
    let record = store
        .lease_row(target)?
        .ok_or_else(|| CliError::new(Class::Store, "the demo target's lease row vanished"))?;
    print_target(&record, &store.channel_rows(target)?, now, "   ");
    let doc = read_projection(&options.runtime_root, target)?;
    print_document(&doc, now, "   ");
    let degraded = doc.coverage.degraded;
    let last_grant = t.grants.last().copied();
    t.check(
        matches!(record.state, LeaseState::Released(_)) && Some(record.fencing_epoch) == last_grant,
        "the lease is released at the last granted epoch",
    );
    t.check(
        Some(doc.fencing_epoch) == last_grant,
        "current.json was written by the last grant",
    );
    let frontier = doc
        .channels
        .iter()
        .find(|c| c.channel.as_str() == "lifecycle-frontier");
    t.check(
        frontier.and_then(|c| c.reason) == Some(StatusReason::SourceConflict),
        "the source conflict is published as a degraded channel",
    );
    let dir = options.runtime_root.target_dir(target);
    let leftovers = std::fs::read_dir(&dir)
        .map_err(|e| CliError::io("listing", &dir, &e))?
        .filter_map(Result::ok)
        .filter(|e| e.file_name() != "current.json")
        .count();
    t.check(leftovers == 0, "no temp file is left beside current.json");
    Ok(degraded)
}

/// Runs the demo; see the module documentation.
pub fn run(dir: Option<PathBuf>) -> CliResult<()> {
    let started = Instant::now();
    let kept = dir.is_some();
    let (_temp, dir) = prepare_dir(dir)?;
    let config = dir.join("solewriter.toml");
    let text = CONFIG
        .replace("LEASE_TTL_MS", &LEASE_TTL_MS.to_string())
        .replace("BUSY_TIMEOUT_MS", &BUSY_TIMEOUT_MS.to_string());
    std::fs::write(&config, text).map_err(|e| CliError::io("writing", &config, &e))?;
    let settings = Settings::load(&ConfigArgs {
        config: Some(config.clone()),
        ..ConfigArgs::default()
    })?;
    let options = settings.store_options()?;
    let mut t = Tally::default();

    say!("solewriter demo: fenced single-writer publication on an embedded SQLite store");
    say!("   directory  {}", dir.display());
    say!("   config     lease_ttl_ms = {LEASE_TTL_MS}, busy_timeout_ms = {BUSY_TIMEOUT_MS}, 2 channels");

    say!("\n1. Initialize the store and admit a target");
    ProjectionStore::initialize(&options.db_path, &options.timing)?;
    std::fs::create_dir(options.runtime_root.path())
        .map_err(|e| CliError::io("creating", options.runtime_root.path(), &e))?;
    let target = ProjectionStore::open(&options)?.admit_target(&tuple()?)?;
    say!(
        "   store      {} (WAL, synchronous = FULL)",
        options.db_path.display()
    );
    say!("   target     {target}");
    say!("              (SHA-256 of the attested tuple; no session id, no path)");

    say!("\n2. Two producers submit their channels");
    producers(&options, &target, &mut t)?;

    say!("\n3. Start a reader process and three publisher processes");
    let reader_args: Vec<OsString> = vec![
        "reader".into(),
        "--config".into(),
        config.clone().into(),
        "--target".into(),
        target.as_str().into(),
    ];
    let reader = Child::spawn("reader", &reader_args)?;
    let mut holders = HOLDERS
        .iter()
        .map(|n| Child::spawn(n, &holder_args(&config, &target, n)))
        .collect::<CliResult<Vec<_>>>()?;
    let pids: Vec<String> = holders
        .iter()
        .map(|h| format!("{} pid {}", h.name(), h.pid()))
        .collect();
    say!("   reader pid {}; {}", reader.pid(), pids.join(", "));

    rounds(&mut holders, &mut t)?;
    if let Some(fenced) = takeover(&mut holders, &options, &target, &mut t)? {
        recovery(&mut holders, fenced, &options, &target, &mut t)?;
    }
    for h in &mut holders {
        let bye = h.ask("quit")?;
        t.check(bye == "bye", &format!("{} quits cleanly", h.name()));
    }
    for h in holders {
        h.wait()?;
    }
    let reads = finish_reader(reader, &mut t)?;
    let degraded = final_state(&options, &target, &mut t)?;

    let epochs_in_order = t.grants.iter().enumerate().all(|(i, e)| *e == i as u64 + 1);
    t.check(
        epochs_in_order,
        "every grant raised the fencing epoch by exactly one",
    );
    guard::run(&mut t)?;
    lock::run(&dir, &mut t)?;
    let shown: Vec<String> = t.grants.iter().map(u64::to_string).collect();
    say!("\nSummary");
    say!(
        "   grants        {} (epochs {})",
        t.grants.len(),
        shown.join(", ")
    );
    say!("   denials       {} (held: nothing written)", t.denials);
    say!(
        "   fences        {} (stale holder refused after takeover)",
        t.fences
    );
    say!("   publications  {}", t.publications.len());
    say!("   degraded      {degraded} channel(s)");
    say!("   reads checked {reads}");
    say!(
        "   write guard   {} writes admitted, {} denied",
        t.admitted,
        t.denied
    );
    say!("   project lock  {} dead owner(s) recovered", t.recovered);
    if kept {
        say!(
            "   inspect it:   solewriter --config {} inspect",
            config.display()
        );
    }
    let elapsed = started.elapsed().as_secs_f64();
    if t.broken.is_empty() {
        say!("   all {} checks held ({elapsed:.1} s)", t.checks);
        Ok(())
    } else {
        Err(CliError::new(
            Class::Invariant,
            format!(
                "{} of {} checks broke: {}",
                t.broken.len(),
                t.checks,
                t.broken.join("; ")
            ),
        ))
    }
}
