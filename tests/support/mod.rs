//! Shared fixtures of the root integration tests: a temp directory with a `solewriter.toml`,
//! the `solewriter` binary run as a command, and the scripted `holder` process.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Output, Stdio};

pub const EXE: &str = env!("CARGO_BIN_EXE_solewriter");
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

/// A temp directory with a config file.
pub struct Env {
    pub dir: tempfile::TempDir,
    pub config: PathBuf,
}

impl Env {
    /// A config with `timing` lines (e.g. `lease_ttl_ms = 5000`) and the two channels.
    pub fn with(timing: &str) -> Env {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("solewriter.toml");
        let text =
            format!("store = \"store.sqlite\"\nruntime_root = \"runtime\"\n{timing}\n{CHANNELS}");
        std::fs::write(&config, text).unwrap();
        Env { dir, config }
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
        Command::new(EXE)
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

    /// A `submit` that stalls before its commit (`--stall-before-commit`), driven like a
    /// holder: it prints `stalled row-written` and waits for one stdin line.
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
        Holder::command(&args.iter().map(String::as_str).collect::<Vec<_>>())
    }

    pub fn current(&self) -> PathBuf {
        self.dir
            .path()
            .join("runtime/hook-projections")
            .join(TARGET)
            .join("current.json")
    }

    pub fn holder(&self, instance: &str, extra: &[&str]) -> Holder {
        Holder::spawn(&self.config, instance, extra)
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

/// A `solewriter holder` process.
pub struct Holder {
    pub child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Holder {
    pub fn spawn(config: &Path, instance: &str, extra: &[&str]) -> Holder {
        let config = config.display().to_string();
        let mut args = vec!["holder", "--config", &config, "--target", TARGET];
        args.extend(["--instance", instance]);
        args.extend(extra);
        Holder::command(&args)
    }

    /// Any `solewriter` command driven line by line on stdin/stdout.
    pub fn command(args: &[&str]) -> Holder {
        let mut child = Command::new(EXE)
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

    pub fn recv(&mut self) -> String {
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
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

pub fn words(answer: &str) -> Vec<&str> {
    answer.split_whitespace().collect()
}
