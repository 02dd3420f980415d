//! Child processes for the multi-process tests: the test binary re-executes itself with
//! `--exact <test name>` and an environment variable naming the child's role, so a child runs
//! exactly the code under test (no extra binary to build or locate). The test function checks
//! [`role`] first and, in a child, plays that role instead of the test.
//!
//! Children talk over pipes: they print lines to stdout and read commands from stdin, so the
//! parent controls every step without sleeping.
#![allow(dead_code)] // each test binary uses its own subset

use solewriter_core::project_lock::ownership::{OwnerIdentity, ProcessSeen};
use solewriter_project_lock::process::{ProcessProbe, SystemProbe};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

const ROLE: &str = "SOLEWRITER_TEST_CHILD_ROLE";
const DIR: &str = "SOLEWRITER_TEST_CHILD_DIR";

/// In a child: its role and working directory.
pub fn role() -> Option<(String, PathBuf)> {
    Some((std::env::var(ROLE).ok()?, std::env::var(DIR).ok()?.into()))
}

/// A running child.
pub struct ChildProc {
    pub child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl ChildProc {
    /// Starts the test `test_name` of this binary as a child playing `role` in `dir`.
    pub fn spawn(test_name: &str, role: &str, dir: &Path) -> Self {
        Self::spawn_wrapped(&[], test_name, role, dir)
    }

    /// Like [`Self::spawn`], run through the command `wrapper` (such as `unshare --pid ...`),
    /// which ends by executing its arguments. `child` is then the wrapper.
    pub fn spawn_wrapped(wrapper: &[&str], test_name: &str, role: &str, dir: &Path) -> Self {
        let exe = std::env::current_exe().unwrap();
        let mut command = match wrapper.split_first() {
            Some((program, args)) => {
                let mut command = Command::new(program);
                command.args(args).arg(exe);
                command
            }
            None => Command::new(exe),
        };
        let mut child = command
            .args(["--exact", test_name, "--nocapture", "--test-threads=1"])
            .env(ROLE, role)
            .env(DIR, dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        ChildProc {
            stdin: child.stdin.take(),
            stdout: BufReader::new(child.stdout.take().unwrap()),
            child,
        }
    }

    /// What the child said next: the rest of the next line holding `@` (the harness's own
    /// lines are skipped; its `test <name> ... ` may precede the first `@` on a line).
    /// Panics if the child exits first.
    pub fn line(&mut self) -> String {
        loop {
            let mut line = String::new();
            assert_ne!(self.stdout.read_line(&mut line).unwrap(), 0, "child exited");
            if let Some((_, said)) = line.trim_end().split_once('@') {
                return said.to_owned();
            }
        }
    }

    /// Sends one command line.
    pub fn send(&mut self, command: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{command}").unwrap();
        stdin.flush().unwrap();
    }

    /// Closes stdin (the child's end-of-commands) and waits for a successful exit.
    pub fn finish(mut self) {
        drop(self.stdin.take());
        while self.stdout.read_line(&mut String::new()).unwrap() > 0 {}
        assert!(self.child.wait().unwrap().success());
    }
}

/// A child left behind by a failing test is killed, so no orphan outlives the test run
/// (looping, or holding its output pipes open).
impl Drop for ChildProc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// In a child: says `what` to the parent.
pub fn say(what: &str) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "@{what}").unwrap();
    out.flush().unwrap();
}

/// In a child: the parent's commands, one per line, until stdin closes.
pub fn commands() -> impl Iterator<Item = String> {
    std::io::stdin().lines().map_while(Result::ok)
}

/// The identity of a process that ran and was reaped: dead authority.
pub fn dead_owner() -> OwnerIdentity {
    let mut child = Command::new("cat").stdin(Stdio::piped()).spawn().unwrap();
    let ProcessSeen::Present { start_token, .. } = SystemProbe.observe(child.id()).process else {
        panic!("a running child is visible");
    };
    let owner = OwnerIdentity {
        pid: child.id(),
        start_token,
        ..SystemProbe.current().unwrap()
    };
    drop(child.stdin.take());
    child.wait().unwrap();
    owner
}
