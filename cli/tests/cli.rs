//! The `solewriter` binary end to end, in temp directories: every error class and its exit
//! code, scripting a store by hand, `inspect` and `read`, the hidden `holder` protocol across
//! real processes (held, fenced after takeover, stalled inside its transaction), and the demo.

mod support;

use serde_json::Value;
use std::process::{Command, Output};
use support::*;

/// Every refused command line is one line on stderr and exit 2 — an unknown subcommand, none
/// at all, a missing argument — while `--help`
/// prints help (with the exit-code table, and no hidden command) on stdout with exit 0.
#[test]
fn usage_errors_are_one_line_and_exit_2() {
    let run = |args: &[&str]| Command::new(EXE).args(args).output().unwrap();
    let cases: [(Vec<&str>, &str); 4] = [
        (vec!["frobnicate"], "unrecognized subcommand 'frobnicate'"),
        (vec![], "no subcommand given"),
        (vec!["lock"], "no subcommand given"),
        (vec!["submit", "--producer", "p"], "--target <HEX>"),
    ];
    for (args, needle) in cases {
        let out = run(&args);
        expect_failure(&out, 2, needle, &args);
        assert!(out.stdout.is_empty(), "{args:?}: nothing on stdout");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.starts_with("solewriter: error: "), "{stderr}");
    }
    let out = run(&["--help"]);
    assert!(out.status.success());
    assert!(out.stderr.is_empty());
    let help = String::from_utf8(out.stdout).unwrap();
    for command in [
        "demo", "init", "admit", "submit", "publish", "inspect", "read", "watch", "lease", "lock",
        "ledger",
    ] {
        assert!(help.contains(command), "{command} in {help}");
    }
    assert!(
        !help.contains("  holder ") && !help.contains("  reader "),
        "{help}"
    );
    for row in [
        "Exit codes:",
        "   0  success",
        "   6  retry later",
        "   9  lost authority",
        "  12  conflict",
        "  14  refused: lock clear",
    ] {
        assert!(help.contains(row), "`{row}` in {help}");
    }
    let env = Env::new();
    std::fs::write(env.dir.path().join("x"), "").unwrap();
    let out = Command::new(EXE)
        .args(["demo", "--dir"])
        .arg(env.dir.path())
        .output()
        .unwrap();
    expect_failure(&out, 2, "is not empty", &"demo --dir non-empty");
}

#[test]
fn config_errors_name_the_key_and_exit_3() {
    Env::with("busy_timeout_ms = 50").fails(&["init"], 3, "`lease_ttl_ms`");
    Env::with("lease_ttl_ms = 50").fails(&["init"], 3, "`busy_timeout_ms`");
    Env::with("lease_ttl_ms = 0\nbusy_timeout_ms = 5").fails(&["init"], 3, "greater than zero");
    Env::with("lease_ttl_ms = 5\nbusy_timeout_ms = 5\nttl = 3").fails(&["init"], 3, "line 5");
    Env::with("lease_ttl_ms = = 5").fails(&["init"], 3, "malformed at line 3");
    Env::with("lease_ttl_ms = 5\nbusy_timeout_ms = 5\n[[channels]]\nname = \"Bad/Name\"\nowner = \"p\"\nenvelope_schema = \"x\"\nmax_envelope_bytes = 5")
        .fails(&["inspect"], 3, "channel name refused");
    // A flag fills in the missing key; a missing file is a config error too.
    let env = Env::with("busy_timeout_ms = 50");
    env.ok(&["--lease-ttl-ms", "100", "init"]);
    let out = Command::new(EXE)
        .args(["--config", "/nonexistent/solewriter.toml", "inspect"])
        .output()
        .unwrap();
    expect_failure(&out, 3, "reading config file", &"missing config");
    let out = Command::new(EXE).arg("inspect").output().unwrap();
    expect_failure(&out, 3, "`store`", &"no config at all");
}

#[test]
fn store_errors_exit_4_and_create_nothing() {
    let env = Env::new();
    env.fails(&["inspect"], 4, "no store at");
    assert!(!env.dir.path().join("store.sqlite").exists());
    assert!(env.ok(&["init"]).starts_with("initialized store "));
    assert!(env.ok(&["init"]).starts_with("already initialized: store "));
    let foreign = Env::new();
    std::fs::write(foreign.dir.path().join("store.sqlite"), "not sqlite at all").unwrap();
    foreign.fails(&["inspect"], 4, "nothing was changed");
    foreign.fails(&["init"], 4, "nothing was changed");
    assert_eq!(
        std::fs::read(foreign.dir.path().join("store.sqlite")).unwrap(),
        b"not sqlite at all"
    );
}

/// `init` adds the two tables to a host's existing WAL database and leaves its own alone; a
/// database not in WAL mode is refused (exit 4) and left unchanged.
#[test]
fn init_adds_the_tables_to_a_host_database() {
    let env = Env::new();
    let path = env.dir.path().join("store.sqlite");
    let host = rusqlite::Connection::open(&path).unwrap();
    host.execute_batch("CREATE TABLE SummarizationJobs (id INTEGER PRIMARY KEY); INSERT INTO SummarizationJobs VALUES (7);")
        .unwrap();
    env.fails(&["init"], 4, "solewriter needs WAL");
    host.query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0))
        .unwrap();
    assert!(env.ok(&["init"]).starts_with("initialized store "));
    let jobs: i64 = host
        .query_row("SELECT id FROM SummarizationJobs", [], |r| r.get(0))
        .unwrap();
    assert_eq!(jobs, 7);
    let (rows, _) = everything_written(&env);
    assert_eq!(
        rows,
        ["SummarizationJobs: Integer(7)"],
        "the host's row; none of ours yet"
    );
}

/// Every row of every table of the store, and every file under the env's directory but the
/// store's own (path and contents): what a refused command must leave exactly as it was.
fn everything_written(env: &Env) -> (Vec<String>, Vec<(String, String)>) {
    let db = rusqlite::Connection::open_with_flags(
        env.dir.path().join("store.sqlite"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let tables: Vec<String> = db
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(tables.len() >= 2, "{tables:?}");
    let mut rows = Vec::new();
    for table in tables {
        let mut stmt = db.prepare(&format!("SELECT * FROM \"{table}\"")).unwrap();
        let columns = stmt.column_count();
        let mut cursor = stmt.query([]).unwrap();
        while let Some(row) = cursor.next().unwrap() {
            let values: Vec<String> = (0..columns)
                .map(|i| match row.get_ref(i).unwrap() {
                    rusqlite::types::ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned(),
                    other => format!("{other:?}"),
                })
                .collect();
            rows.push(format!("{table}: {}", values.join(", ")));
        }
    }
    let mut files = Vec::new();
    let mut dirs = vec![env.dir.path().to_owned()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path
                .strip_prefix(env.dir.path())
                .unwrap()
                .display()
                .to_string();
            if path.is_dir() {
                files.push((format!("{name}/"), String::new()));
                dirs.push(path);
            } else if !name.starts_with("store.sqlite") {
                let bytes = std::fs::read(&path).unwrap();
                files.push((name, String::from_utf8_lossy(&bytes).into_owned()));
            }
        }
    }
    files.sort();
    (rows, files)
}

#[test]
fn rejected_input_exits_5_and_writes_nothing() {
    let env = Env::admitted("lease_ttl_ms = 5000\nbusy_timeout_ms = 2000");
    assert!(env
        .submit("router", "computed-route", "2", "x")
        .status
        .success());
    let published = env.ok(&["publish", TARGET, "--instance", "op"]);
    assert!(published.starts_with("published epoch 1:"), "{published}");
    let before = everything_written(&env);
    assert!(
        before.0.len() >= 2,
        "a lease row and a channel row: {before:?}"
    );
    assert!(
        before
            .1
            .iter()
            .any(|(name, _)| name.ends_with("current.json")),
        "{:?}",
        before.1
    );
    let unchanged = |what: &str| {
        assert_eq!(
            everything_written(&env),
            before,
            "{what}: a refused command wrote something"
        );
    };
    let with_session = TUPLE.replace('}', r#","sessionId":"s"}"#);
    env.fails(&["admit", &with_session], 5, "unknown field `sessionId`");
    unchanged("admit with an unknown field");
    env.fails(&["read", "../etc"], 5, "64 lowercase hex");
    unchanged("read of a bad target id");
    env.fails(
        &["publish", TARGET, "--instance", "Bad Name"],
        5,
        "instance name refused",
    );
    unchanged("publish by a bad instance name");
    let out = env.submit("frontier", "computed-route", "3", "x");
    expect_failure(&out, 5, "does not own channel", &"foreign channel");
    unchanged("submit to a foreign channel");
    let out = env.submit("router", "computed-route", "1", "x");
    expect_failure(&out, 5, "regressed", &"regressed watermark");
    unchanged("submit of a regressed watermark");
    let other = TARGET.replace('2', "3");
    env.fails(&["publish", &other, "--instance", "a"], 5, "not admitted");
    // Not even the target's lock file: an unadmitted target is answered from the committed
    // snapshot, before any lock is taken.
    unchanged("publish of a target never admitted");
}

/// Input from stdin or a file is read up to its bound and no further: an oversized or endless
/// input costs at most the bound (plus one buffer), is refused with exit 5 and writes nothing;
/// input at the bound is accepted. The channel's bound (1000 here) and the tuple's (4096, with
/// room for surrounding whitespace) are told apart.
#[test]
fn outside_input_is_read_up_to_its_bound_and_no_further() {
    use std::io::{Seek, Write};
    let env = Env::new();
    let config = std::fs::read_to_string(&env.config).unwrap();
    std::fs::write(
        &env.config,
        config.replacen("max_envelope_bytes = 4096", "max_envelope_bytes = 1000", 1),
    )
    .unwrap();
    env.ok(&["init"]);
    let file_of = |name: &str, bytes: &[u8]| {
        let path = env.dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    };
    // The child shares the open file description of its stdin, so its offset afterwards is
    // how much the child read.
    let with_stdin = |path: &std::path::Path, args: &[&str]| {
        let mut file = std::fs::File::open(path).unwrap();
        let out = Command::new(EXE)
            .arg("--config")
            .arg(&env.config)
            .args(args)
            .current_dir(env.dir.path())
            .stdin(file.try_clone().unwrap())
            .output()
            .unwrap();
        (out, file.stream_position().unwrap())
    };
    let big = file_of("big", &vec![b' '; 1 << 20]);

    // The attested tuple: 1 MiB refused after one buffer; the largest tuple the core takes,
    // with `echo`'s newline, accepted.
    let (out, read) = with_stdin(&big, &["admit", "-"]);
    expect_failure(&out, 5, "over its bound of 8192 bytes", &"1 MiB tuple");
    assert!(read < 64 * 1024, "the child read {read} bytes of the tuple");
    let padded = format!("{{{}{}\n", " ".repeat(4096 - TUPLE.len()), &TUPLE[1..]);
    assert_eq!(padded.trim().len(), 4096);
    let (out, _) = with_stdin(&file_of("tuple", padded.as_bytes()), &["admit", "-"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The envelope on stdin: exactly the channel's bound is accepted, one byte more refused.
    let mut submit = submit_args("router", "computed-route", "1", "x").to_vec();
    let at = submit.iter().position(|a| a == "--envelope").unwrap();
    let fitting = submit[at + 1].replace(
        "\"x\"",
        &format!("\"{}\"", "x".repeat(1001 - submit[at + 1].len())),
    );
    assert_eq!(fitting.len(), 1000);
    submit[at + 1] = "-".to_owned();
    let args: Vec<&str> = submit.iter().map(String::as_str).collect();
    let (out, read) = with_stdin(&big, &args);
    expect_failure(&out, 5, "over its bound of 1000 bytes", &"1 MiB envelope");
    assert!(
        read < 64 * 1024,
        "the child read {read} bytes of the envelope"
    );
    let over = file_of("over", format!("{fitting} ").as_bytes());
    expect_failure(
        &with_stdin(&over, &args).0,
        5,
        "over its bound of 1000 bytes",
        &"bound + 1",
    );
    let (out, _) = with_stdin(&file_of("fits", fitting.as_bytes()), &args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // An envelope file that never ends (a FIFO whose writer stays open): a reader waiting for
    // its end would never exit; the bounded one stops after the bound.
    let fifo = env.dir.path().join("endless");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let mut writer = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&fifo)
        .unwrap();
    writer.write_all(&[b' '; 4096]).unwrap();
    submit[at] = "--envelope-file".to_owned();
    submit[at + 1] = fifo.display().to_string();
    submit[at - 1] = "2".to_owned(); // a fresh watermark
    let mut child = Command::new(EXE)
        .arg("--config")
        .arg(&env.config)
        .args(&submit)
        .current_dir(env.dir.path())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // A hang guard, not a timing assertion: the bounded reader exits at once. The exit is an
    // event (a thread's `wait` returns); only a child still running after a minute — one
    // waiting for the endless file's end — is killed and fails the test.
    let pid = child.id();
    let stderr_pipe = child.stderr.take().unwrap();
    let (exited, exit) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = exited.send(child.wait());
    });
    let status = match exit.recv_timeout(std::time::Duration::from_secs(60)) {
        Ok(status) => status.unwrap(),
        Err(_) => {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            panic!("the CLI kept reading an envelope file past its bound");
        }
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut { stderr_pipe }, &mut stderr).unwrap();
    assert_eq!(status.code(), Some(5), "{stderr}");
    assert!(stderr.contains("over its bound of 1000 bytes"), "{stderr}");

    // An unregistered channel is refused before anything is read.
    submit[at - 3] = "no-such-channel".to_owned();
    let (out, read) = with_stdin(&big, &submit.iter().map(String::as_str).collect::<Vec<_>>());
    expect_failure(
        &out,
        5,
        "channel `no-such-channel` is not registered",
        &"unknown channel",
    );
    assert_eq!(read, 0);

    // Only the fitting envelope was written.
    let json: Value = serde_json::from_str(&env.ok(&["inspect", "--json"])).unwrap();
    let channels = json["targets"][0]["channels"].as_array().unwrap();
    assert_eq!(channels.len(), 1, "{json}");
    assert_eq!(channels[0]["sourceWatermark"], 1, "{json}");
}

#[test]
fn scripting_by_hand_submit_publish_inspect_read() {
    let env = Env::admitted("lease_ttl_ms = 5000\nbusy_timeout_ms = 2000");
    env.fails(&["read", TARGET], 10, "no projection published");
    let said = |out: Output| String::from_utf8(out.stdout).unwrap();
    assert!(said(env.submit("router", "computed-route", "1", "a")).starts_with("inserted"));
    assert!(said(env.submit("router", "computed-route", "1", "a")).starts_with("replayed"));
    let conflict = env.submit("router", "computed-route", "1", "b");
    expect_failure(&conflict, 12, "source conflict", &"conflicting submission");
    assert!(said(conflict).starts_with("degraded"));
    let published = env.ok(&["publish", TARGET, "--instance", "op"]);
    assert!(published.starts_with("published epoch 1:"), "{published}");
    let text = env.ok(&["inspect"]);
    assert!(text.contains("released by op, epoch 1"), "{text}");
    assert!(text.contains("DEGRADED (source-conflict)"), "{text}");
    let json: Value = serde_json::from_str(&env.ok(&["inspect", "--json"])).unwrap();
    let target = &json["targets"][0];
    assert_eq!(target["targetId"], TARGET);
    assert_eq!(target["state"], "released");
    assert_eq!(target["holder"], "op");
    assert_eq!(target["fencingEpoch"], 1);
    assert_eq!(target["channels"][0]["degraded"], "source-conflict");
    assert_eq!(target["channels"][0]["freshness"], "fresh");
    assert_eq!(target["channels"][0]["status"], "degraded");
    assert_eq!(target["channels"][0]["reason"], "source-conflict");
    assert_eq!(target["missing"][0], "lifecycle-frontier");
    let doc: Value = serde_json::from_str(&env.ok(&["read", TARGET, "--json"])).unwrap();
    assert_eq!(doc["fencingEpoch"], 1);
    assert_eq!(doc["channels"][0]["envelope"]["body"], "a");
    assert!(env
        .ok(&["read", TARGET])
        .contains("DEGRADED (source-conflict)"));
    // A torn document is refused, never printed in part.
    let bytes = std::fs::read(env.current()).unwrap();
    std::fs::write(env.current(), &bytes[..bytes.len() / 2]).unwrap();
    env.fails(&["read", TARGET], 11, "malformed");
    env.fails(&["read", TARGET], 11, &env.current().display().to_string());
}

#[test]
fn holder_protocol_held_then_fenced_after_takeover() {
    // Every process reads one broker clock that only this test moves: the lease is ten
    // minutes long and expires when the clock is moved past it, not after a real wait.
    let env = Env::clocked(LONG_LEASE);
    let mut a = env.holder("a", &[]);
    let mut b = env.holder("b", &[]);
    assert_eq!(a.ask("publish"), "error no lease held (acquire first)");
    assert_eq!(a.ask("dance"), "error unknown command `dance`");
    let granted = a.ask("acquire");
    let [word, epoch, expires_at] = words(&granted)[..] else {
        panic!("{granted}")
    };
    assert_eq!((word, epoch), ("acquired", "1"), "{granted}");
    assert_eq!(
        expires_at.parse::<u64>().ok(),
        Some(CLOCK_START + 600_000),
        "the grant runs on the shared clock: {granted}"
    );
    let again = a.ask("acquire");
    assert!(
        again.starts_with("error already holding epoch 1"),
        "{again}"
    );
    expect_answer(&b.ask("acquire"), "held 1", &"B while A's grant is live");
    // A live holder refuses the one-shot `publish` command too: exit 6, nothing written.
    env.fails(&["publish", TARGET, "--instance", "c"], 6, "is held by a");
    // A's grant expires without A doing anything, then B takes over and publishes.
    env.expire(expires_at);
    expect_answer(&b.ask("acquire"), "acquired 2", &"B after A's expiry");
    expect_answer(&b.ask("publish"), "published 2", &"B");
    let bytes = std::fs::read(env.current()).unwrap();
    assert_eq!(a.ask("publish"), "fenced superseded 2");
    assert_eq!(std::fs::read(env.current()).unwrap(), bytes, "untouched");
    // B's publication released its grant, so A may take a fresh one.
    expect_answer(&a.ask("acquire"), "acquired 3", &"A after B published");
    assert_eq!(a.ask("release"), "released");
    assert_eq!(a.ask("release"), "error no lease held (acquire first)");
    a.quit();
    b.quit();
}

#[test]
fn holder_stalled_inside_its_transaction_blocks_every_other_writer() {
    // The lease outlives every step (the shared clock never moves here), so A is still the
    // holder when it goes on, however slow the machine.
    let env = Env::clocked("lease_ttl_ms = 600000\nbusy_timeout_ms = 150");
    assert!(env
        .submit("router", "computed-route", "1", "a")
        .status
        .success());
    let mut a = env.holder("a", &["--stall-at", "revalidated"]);
    expect_answer(&a.ask("acquire"), "acquired 1", &"A");
    assert_eq!(a.ask("publish"), "stalled revalidated");
    // A contender for the live lease is answered `held` from the committed snapshot, without
    // queueing for the write lock; but A holds SQLite's write lock, so any other writer —
    // here a producer's submission — waits out the busy timeout and exits 4.
    let mut b = env.holder("b", &[]);
    expect_answer(
        &b.ask("acquire"),
        "held 1",
        &"B while A is inside its transaction",
    );
    env.fails(&["publish", TARGET, "--instance", "c"], 6, "is held by a");
    let out = env.submit("router", "computed-route", "2", "b");
    expect_failure(&out, 6, "busy", &"submit while A is inside its transaction");
    assert!(!env.current().exists(), "not renamed yet");
    a.send("go on");
    expect_answer(&a.recv(), "published 1", &"A going on");
    assert!(env.current().exists());
    // A published and released; B is granted without any clock moving.
    expect_answer(&b.ask("acquire"), "acquired 2", &"B after A released");
    a.quit();
    b.quit();
    let out = Command::new(TESTKIT)
        .args(["holder", "--target", TARGET, "--instance", "a"])
        .args(["--stall-at", "nowhere"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "an unknown step is a usage error"
    );
}

#[test]
fn demo_runs_end_to_end_and_every_check_holds() {
    let out = Command::new(EXE).arg("demo").output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("fenced superseded"), "{stdout}");
    for shown in [
        "denied conflict",
        "denied writer-disconnected",
        "write guard   3 writes admitted, 2 denied",
        "lock status, from another process: held true",
        "project lock  1 dead owner(s) recovered",
    ] {
        assert!(stdout.contains(shown), "`{shown}` in {stdout}");
    }
    assert!(stdout.contains("\nSummary\n"), "{stdout}");
    assert!(stdout.contains("checks held"), "{stdout}");
    assert!(!stdout.contains("[BROKEN]"), "{stdout}");
}

#[test]
fn lock_status_shows_free_alive_and_refuses_a_malformed_lock() {
    use solewriter::{ProjectLock, SystemProbe, Wait};
    let dir = tempfile::tempdir().unwrap();
    let status = |json: bool| {
        let mut cmd = Command::new(EXE);
        cmd.args(["lock", "status"]).arg(dir.path());
        if json {
            cmd.arg("--json");
        }
        cmd.output().unwrap()
    };
    let out = status(false);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("free"));
    // This test process holds the lock: its owner is alive.
    let lock = ProjectLock::new(dir.path(), std::sync::Arc::new(SystemProbe));
    let guard = lock.acquire(Wait::NoWait).unwrap();
    let out = status(true);
    assert!(out.status.success());
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["state"], "alive");
    assert_eq!(doc["held"], true);
    assert_eq!(doc["owner"]["pid"], std::process::id());
    guard.release().unwrap();
    let out = status(true);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (doc["held"].clone(), doc["kernelLock"].clone()),
        (Value::Bool(false), "free".into())
    );
    // A directory that does not exist is an error (exit 7), not "free".
    let missing = dir.path().join("nowhere");
    let out = Command::new(EXE)
        .args(["lock", "status"])
        .arg(&missing)
        .output()
        .unwrap();
    expect_failure(
        &out,
        7,
        "does not exist",
        &"lock status on a missing directory",
    );
    std::fs::write(lock.path(), b"garbage").unwrap();
    expect_failure(
        &status(false),
        7,
        "malformed",
        &"lock status on a garbage lock",
    );
    assert_eq!(
        std::fs::read(lock.path()).unwrap(),
        b"garbage",
        "left untouched"
    );
}
