//! The CLI as a script drives it, with real processes: a reader closing stdout early ends the
//! output, not the command; each class of failure a script must tell apart exits with its own
//! code (the table of `cli/src/error.rs`, printed by `--help`); a retried `submit` is an
//! identical replay.

mod support;

use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Output, Stdio};
use support::*;

/// Runs `command` with its stdout a pipe whose read end is already closed: its first write
/// fails with EPIPE, deterministically.
fn with_closed_stdout(mut command: Command) -> Output {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    command
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .unwrap()
}

fn env_command(env: &Env, args: &[&str]) -> Command {
    let mut command = env.command();
    command
        .arg("--config")
        .arg(&env.config)
        .args(args)
        .current_dir(env.dir.path());
    command
}

#[track_caller]
fn succeeded_silently(out: &Output, what: &str) {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stderr.is_empty(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn epoch_of(env: &Env) -> Value {
    let doc: Value = serde_json::from_slice(&std::fs::read(env.current()).unwrap()).unwrap();
    doc["fencingEpoch"].clone()
}

/// `publish … | true` and `inspect | head`: the reader is gone before the command prints. The
/// command does its work, prints nothing, says nothing on stderr and exits 0 (never 101, the
/// panic). Any other stdout failure (`/dev/full`) is exit 7, after the work was done.
#[test]
fn a_closed_stdout_ends_the_output_not_the_command() {
    let env = Env::admitted("lease_ttl_ms = 5000\nbusy_timeout_ms = 2000");
    assert!(env
        .submit("router", "computed-route", "1", "a")
        .status
        .success());
    let out = with_closed_stdout(env_command(&env, &["publish", TARGET, "--instance", "op"]));
    succeeded_silently(&out, "publish | true");
    assert_eq!(epoch_of(&env), 1, "the publication happened");
    for args in [
        &["inspect"][..],
        &["inspect", "--json"],
        &["read", TARGET],
        &["read", TARGET, "--json"],
        &["lock", "status", "."],
    ] {
        succeeded_silently(
            &with_closed_stdout(env_command(&env, args)),
            &format!("{args:?} | head"),
        );
    }
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let out = env_command(&env, &["publish", TARGET, "--instance", "op"])
        .stdout(full)
        .output()
        .unwrap();
    expect_failure(&out, 7, "writing to stdout failed", &"publish > /dev/full");
    assert_eq!(epoch_of(&env), 2, "the publication happened");
}

/// A `publish` stalled inside its transaction (the test binary's `--stall-at`) whose lease
/// expires meanwhile (the shared clock moved past it) aborts before the rename: lost
/// authority, exit 9, `current.json` untouched.
#[test]
fn an_expired_lease_is_lost_authority_exit_9() {
    let env = Env::clocked(LONG_LEASE);
    let mut child = env_command(
        &env,
        &[
            "publish",
            TARGET,
            "--instance",
            "op",
            "--stall-at",
            "revalidated",
        ],
    )
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "stalled revalidated");
    env.set_clock(CLOCK_START + 600_000);
    writeln!(child.stdin.take().unwrap(), "go on").unwrap();
    let status = child.wait().unwrap();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert_eq!(status.code(), Some(9), "{stderr}");
    assert!(stderr.contains("current.json was not touched"), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(!env.current().exists());
}

/// Held by a live holder: retry later, exit 6. Not published yet: exit 10. A torn document:
/// exit 11, naming its path. The hidden reader seeing it: exit 8.
#[test]
fn held_not_published_and_corrupt_have_their_own_codes() {
    let env = Env::clocked(LONG_LEASE);
    env.fails(&["read", TARGET], 10, "no projection published");
    let mut holder = env.holder("a", &[]);
    expect_answer(&holder.ask("acquire"), "acquired 1", &"a");
    env.fails(&["publish", TARGET, "--instance", "b"], 6, "is held by a");
    expect_answer(&holder.ask("publish"), "published 1", &"a");
    holder.quit();
    std::fs::write(env.current(), b"{\"format\":").unwrap();
    let path = env.current().display().to_string();
    env.fails(&["read", TARGET], 11, &format!("{path} refused"));
    let out = env_command(&env, &["reader", "--target", TARGET])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(8), "{out:?}");
}

/// A document that disappears after the hidden reader has seen one is a failure it counts
/// (exit 8); before the first publication, an absent document is only "not yet".
#[test]
fn the_reader_counts_a_document_that_disappears() {
    let env = Env::clocked(LONG_LEASE);
    let mut reader = env_command(&env, &["reader", "--target", TARGET])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut holder = env.holder("a", &[]);
    expect_answer(&holder.ask("publish-now"), "published 1", &"a");
    holder.quit();
    let mut lines = BufReader::new(reader.stdout.take().unwrap()).lines();
    let saw = lines.next().unwrap().unwrap();
    assert!(saw.starts_with("saw 1 "), "{saw}");
    std::fs::remove_file(env.current()).unwrap();
    // The reader reads every millisecond: give it a few reads of the absent document.
    std::thread::sleep(std::time::Duration::from_millis(50));
    drop(reader.stdin.take());
    let status = reader.wait().unwrap();
    let checked = lines.next().unwrap().unwrap();
    let invalid: u64 = checked.split(' ').nth(2).unwrap().parse().unwrap();
    assert!(invalid > 0, "{checked}");
    assert_eq!(status.code(), Some(8), "{checked}");
}

/// The same `submit` command run twice — a producer's retry — is an identical replay: the
/// second says `replayed`, exits 0, and the channel is not degraded. A submit without
/// `--captured-at` (the time that makes the retry identical) is a usage error.
#[test]
fn a_retried_submit_is_an_identical_replay() {
    let env = Env::admitted("lease_ttl_ms = 5000\nbusy_timeout_ms = 2000");
    let args = submit_args("router", "computed-route", "1", "a");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    assert!(env.ok(&args).starts_with("inserted:"));
    let again = env.ok(&args);
    assert!(
        again.starts_with("replayed (identical; nothing written):"),
        "{again}"
    );
    let json: Value = serde_json::from_str(&env.ok(&["inspect", "--json"])).unwrap();
    assert_eq!(json["targets"][0]["channels"][0]["degraded"], Value::Null);
    let without: Vec<&str> = args
        .iter()
        .copied()
        .filter(|a| *a != "--captured-at" && *a != "1000")
        .collect();
    env.fails(&without, 2, "--captured-at <MS>");
}

/// Stdout of `args` with `--json`: exactly one line, one JSON object.
#[track_caller]
fn one_object(out: &Output) -> serde_json::Map<String, Value> {
    let stdout = String::from_utf8(out.stdout.clone()).unwrap();
    assert_eq!(stdout.lines().count(), 1, "one line: {stdout}");
    match serde_json::from_str(&stdout).unwrap() {
        Value::Object(object) => object,
        other => panic!("not an object: {other}"),
    }
}

#[track_caller]
fn keys(object: &serde_json::Map<String, Value>) -> Vec<&str> {
    let mut keys: Vec<&str> = object.keys().map(String::as_str).collect();
    keys.sort_unstable();
    keys
}

/// `--json` gives every command (but `demo`, refused) one JSON object with the documented
/// field names; a conflicting submission prints its object and still exits 12.
#[test]
fn every_command_answers_one_json_object() {
    let env = Env::with(LONG_LEASE);
    let ok = |args: &[&str]| {
        let out = env.run(&[args, &["--json"]].concat());
        assert!(out.status.success(), "{args:?}: {out:?}");
        one_object(&out)
    };
    let init = ok(&["init"]);
    assert_eq!(keys(&init), ["created", "runtimeRoot", "store"]);
    assert_eq!(init["created"], true);
    assert_eq!(ok(&["init"])["created"], false);
    assert_eq!(ok(&["admit", TUPLE])["targetId"], TARGET);
    let submit = submit_args("router", "computed-route", "1", "a");
    let submit: Vec<&str> = submit.iter().map(String::as_str).collect();
    let inserted = ok(&submit);
    assert_eq!(
        keys(&inserted),
        [
            "capturedAt",
            "channel",
            "expiresAt",
            "outcome",
            "sourceWatermark",
            "targetId"
        ]
    );
    assert_eq!(inserted["outcome"], "inserted");
    assert_eq!(ok(&submit)["outcome"], "replayed");
    let conflict = env.run(
        &[
            &submit_args("router", "computed-route", "1", "b")
                .each_ref()
                .map(String::as_str)[..],
            &["--json"],
        ]
        .concat(),
    );
    assert_eq!(conflict.status.code(), Some(12));
    assert_eq!(one_object(&conflict)["outcome"], "degraded");
    let published = ok(&["publish", TARGET, "--instance", "op"]);
    assert_eq!(keys(&published), ["bytes", "fencingEpoch", "path"]);
    assert_eq!(published["fencingEpoch"], 1);
    assert_eq!(ok(&["read", TARGET])["fencingEpoch"], 1);
    assert_eq!(ok(&["inspect", TARGET])["targets"][0]["targetId"], TARGET);
    assert_eq!(ok(&["lock", "status", "."])["state"], "none");
    let out = env.run(&["demo", "--json"]);
    expect_failure(&out, 2, "`demo` has no JSON output", &"demo --json");
}

/// `inspect TARGET` shows that target only, and refuses one never admitted (exit 5); text
/// output gives times in RFC 3339 and durations in units, on the shared broker clock.
#[test]
fn inspect_takes_a_target_and_shows_readable_times() {
    let env = Env::clocked(LONG_LEASE);
    let other = TUPLE.replace("agent-7", "agent-8");
    let second = env.ok(&["admit", &other]).trim().to_owned();
    let json: Value = serde_json::from_str(&env.ok(&["inspect", "--json"])).unwrap();
    assert_eq!(json["targets"].as_array().unwrap().len(), 2, "{json}");
    let json: Value = serde_json::from_str(&env.ok(&["inspect", &second, "--json"])).unwrap();
    let targets = json["targets"].as_array().unwrap();
    assert_eq!(targets.len(), 1, "{json}");
    assert_eq!(targets[0]["targetId"], second.as_str());
    assert_eq!(json["nowRfc3339"], "2023-11-14T22:13:20.000Z");
    env.fails(
        &["inspect", &TARGET.replace('2', "3")],
        5,
        "is not admitted",
    );
    let mut holder = env.holder("a", &[]);
    expect_answer(&holder.ask("acquire"), "acquired 1", &"a");
    env.set_clock(CLOCK_START + 1_500);
    let text = env.ok(&["inspect", TARGET]);
    assert!(
        text.contains("broker clock 2023-11-14T22:13:21.500Z"),
        "{text}"
    );
    assert!(
        text.contains("held by a, epoch 1, expires in 9m 58.500s (2023-11-14T22:23:20.000Z)"),
        "{text}"
    );
    assert!(!text.contains(&second), "{text}");
    env.fails(
        &["publish", TARGET, "--instance", "b"],
        6,
        "(retry after 9m 58.500s)",
    );
    holder.quit();
}

/// `init` refuses a channel registry every later command would refuse (an uppercase or a
/// duplicate channel name: exit 3) and creates nothing; a store whose directory does not
/// exist is exit 4 saying so (not "unreadable").
#[test]
fn init_checks_the_whole_config_before_creating_anything() {
    let channel = |name: &str| {
        format!("[[channels]]\nname = \"{name}\"\nowner = \"p\"\nenvelope_schema = \"x\"\nmax_envelope_bytes = 5\n")
    };
    for (channels, needle) in [
        (
            channel("Upper"),
            "channel name refused: invalid name `Upper`",
        ),
        (
            format!("{}{}", channel("twice"), channel("twice")),
            "channel `twice` is registered twice",
        ),
    ] {
        let env = Env::with(&format!("{LONG_LEASE}\n{channels}"));
        env.fails(&["init"], 3, needle);
        assert!(!env.dir.path().join("store.sqlite").exists(), "{needle}");
        assert!(!env.dir.path().join("runtime").exists(), "{needle}");
    }
    let env = Env::new();
    for command in ["init", "inspect"] {
        let out = env.run(&["--store", "nowhere/store.sqlite", command]);
        expect_failure(
            &out,
            4,
            "the directory nowhere of store nowhere/store.sqlite does not exist",
            &command,
        );
    }
    assert!(!env.dir.path().join("nowhere").exists());
}

/// The TOML file takes camelCase keys (the library's JSON spelling) as well as snake_case,
/// refuses one key in both spellings, and is found through SOLEWRITER_CONFIG when `--config`
/// is not given (`--config` wins).
#[test]
fn config_takes_both_spellings_and_an_environment_variable() {
    let camel = "store = \"store.sqlite\"\nruntimeRoot = \"runtime\"\nleaseTtlMs = 600000\nbusyTimeoutMs = 2000\n\n[[channels]]\nname = \"computed-route\"\nowner = \"router\"\nenvelopeSchema = \"computed-route.v1\"\nmaxEnvelopeBytes = 4096\n";
    let env = Env::new();
    std::fs::write(&env.config, camel).unwrap();
    let from_env = |args: &[&str]| {
        Command::new(EXE)
            .env("SOLEWRITER_CONFIG", &env.config)
            .args(args)
            .current_dir(env.dir.path())
            .output()
            .unwrap()
    };
    let out = from_env(&["init"]);
    assert!(out.status.success(), "{out:?}");
    assert!(env.dir.path().join("runtime").is_dir());
    let out = from_env(&["admit", TUPLE]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), TARGET);
    let submit = submit_args("router", "computed-route", "1", "a");
    let out = from_env(&submit.each_ref().map(String::as_str));
    assert!(out.status.success(), "{out:?}");
    // `--config` wins over the variable.
    let other = Env::new();
    let out = Command::new(EXE)
        .env("SOLEWRITER_CONFIG", &env.config)
        .arg("--config")
        .arg(&other.config)
        .arg("inspect")
        .output()
        .unwrap();
    expect_failure(&out, 4, "no store at", &"--config over the variable");
    let out = Command::new(EXE)
        .env("SOLEWRITER_CONFIG", env.dir.path().join("absent.toml"))
        .arg("inspect")
        .output()
        .unwrap();
    expect_failure(&out, 3, "(named by SOLEWRITER_CONFIG)", &"a missing file");
    std::fs::write(&env.config, format!("lease_ttl_ms = 5\n{camel}")).unwrap();
    env.fails(&["inspect"], 3, "duplicate field");
}
