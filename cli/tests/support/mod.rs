//! Shared fixtures of the root integration tests: a temp directory with a `solewriter.toml`,
//! the `solewriter` binary run as a command, the scripted `holder` process, the hidden
//! `lock-holder` holding a project lock, and (in [`git`]) a Git repository for the ledger.
//!
//! Two binaries: [`EXE`], the shipped `solewriter`, and [`TESTKIT`], `solewriter-testkit`, the
//! same commands with the test seams (`src/bin/solewriter-testkit.rs`). A test runs the
//! shipped one unless it needs a seam.
//!
//! A clocked [`Env`] gives every command it runs one shared broker clock, a file named by the
//! test binary's `SOLEWRITER_TEST_CLOCK_FILE` seam, so it runs [`TESTKIT`]. Its leases are ten
//! minutes long — far longer than any step of a test, however loaded the machine — and a test
//! makes a lease expire by moving that clock ([`Env::expire`]), never by waiting for a real
//! deadline.
#![allow(dead_code)]

pub mod git;

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Output, Stdio};

/// The shipped binary.
pub const EXE: &str = env!("CARGO_BIN_EXE_solewriter");
/// The test binary: the same commands with the test seams.
pub const TESTKIT: &str = env!("CARGO_BIN_EXE_solewriter-testkit");
pub const TUPLE: &str = r#"{"schemaVersion":"1","capability":"hook-projection","agentId":"agent-7","harnessType":"claude-code","instanceKeyDigest":"inst-1","workspaceKeyDigest":"ws-1","projectionKind":"live-lane"}"#;
pub const TARGET: &str = "29a47a1e0854db43f7fb283e889c03c45ccfaf73f15385d8c69120edad6cb06a";

pub const CHANNELS: &str = r#"
[[channels]]
name = "computed-route"
owner = "router"
envelope_schema = "computed-route.v1"
max_envelope_bytes = 4096

[[channels]]
name = "lifecycle-frontier"
owner = "frontier"
envelope_schema = "lifecycle-frontier.v1"
max_envelope_bytes = 4096
"#;

/// The clock seam of the test binary (`cli/src/bin/solewriter-testkit.rs`).
pub const CLOCK_ENV: &str = "SOLEWRITER_TEST_CLOCK_FILE";
/// Where a clocked [`Env`]'s broker clock starts (ms).
pub const CLOCK_START: u64 = 1_700_000_000_000;
/// The timing of a clocked [`Env`]: a lease far longer than any step.
pub const LONG_LEASE: &str = "lease_ttl_ms = 600000\nbusy_timeout_ms = 2000";

/// A temp directory with a config file, and perhaps a shared broker clock.
pub struct Env {
    pub dir: tempfile::TempDir,
    pub config: PathBuf,
    /// The clock file every command of this env reads, when clocked.
    pub clock: Option<PathBuf>,
}

impl Env {
    /// A config with `timing` lines (e.g. `lease_ttl_ms = 5000`) and the two channels.
    pub fn with(timing: &str) -> Env {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("solewriter.toml");
        let text =
            format!("store = \"store.sqlite\"\nruntime_root = \"runtime\"\n{timing}\n{CHANNELS}");
        std::fs::write(&config, text).unwrap();
        Env {
            dir,
            config,
            clock: None,
        }
    }

    /// An initialized store with the target admitted, whose commands all read one broker
    /// clock (starting at [`CLOCK_START`]) that only the test moves.
    pub fn clocked(timing: &str) -> Env {
        let mut env = Env::with(timing);
        let clock = env.dir.path().join("broker-clock");
        std::fs::write(&clock, CLOCK_START.to_string()).unwrap();
        env.clock = Some(clock);
        env.ok(&["init"]);
        assert_eq!(env.ok(&["admit", TUPLE]).trim(), TARGET);
        env
    }

    /// The shared broker clock's reading.
    pub fn now(&self) -> u64 {
        let clock = self.clock.as_ref().expect("a clocked env");
        std::fs::read_to_string(clock)
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }

    /// Moves the shared broker clock to `ms` (atomically: a sibling renamed over it).
    pub fn set_clock(&self, ms: u64) {
        let clock = self.clock.as_ref().expect("a clocked env");
        let tmp = clock.with_extension("tmp");
        std::fs::write(&tmp, ms.to_string()).unwrap();
        std::fs::rename(&tmp, clock).unwrap();
    }

    /// Moves the shared broker clock to `expires_at_ms` (as printed by `acquired`): the
    /// lease it ends has expired for every process of this env.
    pub fn expire(&self, expires_at_ms: &str) {
        let expires: u64 = expires_at_ms
            .parse()
            .unwrap_or_else(|e| panic!("expiry {expires_at_ms:?}: {e}"));
        assert!(expires > self.now(), "the clock only moves forward here");
        self.set_clock(expires);
    }

    /// A command of the binary: the test binary with this env's clock when clocked, the
    /// shipped one otherwise.
    pub fn command(&self) -> Command {
        match &self.clock {
            Some(_) => self.testkit(),
            None => Command::new(EXE),
        }
    }

    /// A command of the test binary, with this env's clock (if any).
    pub fn testkit(&self) -> Command {
        let mut command = Command::new(TESTKIT);
        if let Some(clock) = &self.clock {
            command.env(CLOCK_ENV, clock);
        }
        command
    }

    pub fn new() -> Env {
        Env::with("lease_ttl_ms = 5000\nbusy_timeout_ms = 2000")
    }

    /// An initialized store with the target admitted.
    pub fn admitted(timing: &str) -> Env {
        let env = Env::with(timing);
        env.ok(&["init"]);
        assert_eq!(env.ok(&["admit", TUPLE]).trim(), TARGET);
        env
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.command()
            .arg("--config")
            .arg(&self.config)
            .args(args)
            .current_dir(self.dir.path())
            .output()
            .unwrap()
    }

    /// Runs and expects success; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Runs and expects exit `code` with one stderr line containing `needle`.
    pub fn fails(&self, args: &[&str], code: i32, needle: &str) {
        expect_failure(&self.run(args), code, needle, &args);
    }

    pub fn submit(&self, producer: &str, channel: &str, watermark: &str, body: &str) -> Output {
        self.run(
            &submit_args(producer, channel, watermark, body)
                .each_ref()
                .map(String::as_str),
        )
    }

    /// A `submit` that stalls before its commit (the test binary's `--stall-before-commit`),
    /// driven like a holder: it prints `stalled row-written` and waits for one stdin line.
    pub fn stalled_submit(
        &self,
        producer: &str,
        channel: &str,
        watermark: &str,
        body: &str,
    ) -> Holder {
        let mut args = vec!["--config".to_owned(), self.config.display().to_string()];
        args.extend(submit_args(producer, channel, watermark, body));
        args.push("--stall-before-commit".to_owned());
        Holder::command(
            self.testkit(),
            &args.iter().map(String::as_str).collect::<Vec<_>>(),
        )
    }

    pub fn current(&self) -> PathBuf {
        self.dir
            .path()
            .join("runtime/hook-projections")
            .join(TARGET)
            .join("current.json")
    }

    /// A `holder` process; with `extra` flags (the test binary's `--stall-at STEP`), or in a
    /// clocked env, the test binary's.
    pub fn holder(&self, instance: &str, extra: &[&str]) -> Holder {
        let config = self.config.display().to_string();
        let mut args = vec!["holder", "--config", &config, "--target", TARGET];
        args.extend(["--instance", instance]);
        args.extend(extra);
        let command = if extra.is_empty() {
            self.command()
        } else {
            self.testkit()
        };
        Holder::command(command, &args)
    }
}

/// The arguments of a `submit` of an envelope of `channel`'s schema holding `body`.
pub fn submit_args(producer: &str, channel: &str, watermark: &str, body: &str) -> [String; 15] {
    let envelope = format!(r#"{{"schema":"{channel}.v1","notAuthority":true,"body":"{body}"}}"#);
    [
        "submit",
        "--producer",
        producer,
        "--target",
        TARGET,
        "--channel",
        channel,
        "--watermark",
        watermark,
        "--envelope",
        &envelope,
        "--captured-at",
        "1000",
        "--expires-in-ms",
        "4102444800000",
    ]
    .map(str::to_owned)
}

pub fn expect_failure(out: &Output, code: i32, needle: &str, what: &dyn std::fmt::Debug) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{what:?}: {stderr}");
    assert!(
        stderr.contains(needle),
        "{what:?}: `{needle}` not in {stderr}"
    );
    assert_eq!(stderr.trim_end().lines().count(), 1, "one line: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// A `holder` process (of either binary).
pub struct Holder {
    pub child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Holder {
    /// `command` (the binary, perhaps with a clock) with `args`, driven line by line on
    /// stdin/stdout.
    pub fn command(mut command: Command, args: &[&str]) -> Holder {
        let mut child = command
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Holder {
            child,
            stdin,
            stdout,
        }
    }

    pub fn send(&mut self, line: &str) {
        writeln!(self.stdin, "{line}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// The next answer line; a holder that exits without answering fails the test.
    pub fn recv(&mut self) -> String {
        let mut line = String::new();
        let read = self.stdout.read_line(&mut line).unwrap();
        assert_ne!(read, 0, "the holder exited without answering");
        line.trim_end().to_owned()
    }

    pub fn ask(&mut self, line: &str) -> String {
        self.send(line);
        self.recv()
    }

    pub fn quit(mut self) {
        assert_eq!(self.ask("quit"), "bye");
        assert!(self.child.wait().unwrap().success());
    }
}

/// A holder left behind by a failing test (perhaps stopped by SIGSTOP) is killed, so no
/// orphan outlives the test run holding its output pipes open.
impl Drop for Holder {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A `solewriter lock-holder DIR` process holding the project lock of `dir`, and the nonce
/// of its record. It holds until one stdin line ([`release_lock`]) or until it is dropped.
pub fn lock_holder(dir: &std::path::Path) -> (Holder, String) {
    let mut holder = Holder::command(
        Command::new(EXE),
        &["lock-holder", dir.to_str().expect("a UTF-8 temp path")],
    );
    let answer = holder.recv();
    expect_answer(&answer, "acquired", &"lock-holder");
    let nonce = word(&answer, 1).to_owned();
    (holder, nonce)
}

/// Makes a [`lock_holder`] release its lock and exit.
pub fn release_lock(mut holder: Holder) {
    assert_eq!(holder.ask(""), "released");
    assert!(holder.child.wait().unwrap().success());
}

pub fn words(answer: &str) -> Vec<&str> {
    answer.split_whitespace().collect()
}

/// Asserts that `answer` begins with the words of `expected` (`"held 1"` matches
/// `held 1 5000`); a failure shows the whole answer, however short or malformed.
#[track_caller]
pub fn expect_answer(answer: &str, expected: &str, context: &dyn std::fmt::Debug) {
    let want = words(expected);
    assert!(
        words(answer).starts_with(&want),
        "{context:?}: expected `{expected} …`, got {answer:?}"
    );
}

/// The `n`th word of `answer`; a failure shows the whole answer.
#[track_caller]
pub fn word(answer: &str, n: usize) -> &str {
    words(answer)
        .get(n)
        .copied()
        .unwrap_or_else(|| panic!("no word {n} in the answer {answer:?}"))
}
