//! Child processes of the demo: this same binary re-executed (`std::env::current_exe()`) with
//! a hidden subcommand, driven one line at a time over pipes, frozen and resumed with
//! `kill -STOP` / `kill -CONT`.
//!
//! Each child's stdout is read by a thread into a channel, so a child that stops answering
//! turns into an error after [`REPLY_TIMEOUT`] instead of hanging the demo. A child still
//! running when its handle is dropped is killed (SIGKILL also ends a stopped process).

use crate::error::{Class, CliError, CliResult};
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::process::{ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::Duration;

/// How long the demo waits for one answer line of a child.
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(20);

/// A running child and its pipes.
pub struct Child {
    name: String,
    process: std::process::Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
}

fn io_error(what: String, e: &std::io::Error) -> CliError {
    CliError::new(Class::Io, format!("{what}: {e}"))
}

impl Child {
    /// Starts this binary with `args`, calling the child `name` in messages.
    pub fn spawn(name: &str, args: &[OsString]) -> CliResult<Child> {
        let exe = std::env::current_exe()
            .map_err(|e| io_error("locating the solewriter executable failed".into(), &e))?;
        let mut process = Command::new(exe)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| io_error(format!("starting {name} failed"), &e))?;
        let stdin = process.stdin.take();
        let stdout = process.stdout.take();
        let (tx, lines) = mpsc::channel();
        if let Some(stdout) = stdout {
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
        }
        Ok(Child {
            name: name.to_owned(),
            process,
            stdin,
            lines,
        })
    }

    /// The child's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The child's process id.
    pub fn pid(&self) -> u32 {
        self.process.id()
    }

    /// Sends one line.
    pub fn send(&mut self, line: &str) -> CliResult<()> {
        let name = &self.name;
        let stdin = self.stdin.as_mut().ok_or_else(|| {
            CliError::new(
                Class::Io,
                format!("{name} has no stdin to send `{line}` to"),
            )
        })?;
        writeln!(stdin, "{line}")
            .and_then(|()| stdin.flush())
            .map_err(|e| io_error(format!("sending `{line}` to {name} failed"), &e))
    }

    /// Receives one line, waiting at most [`REPLY_TIMEOUT`].
    pub fn recv(&mut self) -> CliResult<String> {
        self.lines.recv_timeout(REPLY_TIMEOUT).map_err(|_| {
            CliError::new(
                Class::Io,
                format!(
                    "{} gave no answer within {} s",
                    self.name,
                    REPLY_TIMEOUT.as_secs()
                ),
            )
        })
    }

    /// Sends `command` and receives its one-line answer.
    pub fn ask(&mut self, command: &str) -> CliResult<String> {
        self.send(command)?;
        self.recv()
    }

    /// Sends a signal by name (`STOP`, `CONT`) with `kill(1)`.
    pub fn signal(&self, signal: &str) -> CliResult<()> {
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.pid().to_string())
            .status()
            .map_err(|e| io_error(format!("running kill -{signal}"), &e))?;
        if status.success() {
            Ok(())
        } else {
            Err(CliError::new(
                Class::Io,
                format!("kill -{signal} {} failed ({status})", self.pid()),
            ))
        }
    }

    /// Closes the child's stdin (end of input).
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Closes stdin and waits for the child to exit.
    pub fn wait(mut self) -> CliResult<ExitStatus> {
        self.close_stdin();
        self.process
            .wait()
            .map_err(|e| io_error(format!("waiting for {} failed", self.name), &e))
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if let Ok(None) = self.process.try_wait() {
            let _ = self.process.kill();
            let _ = self.process.wait();
        }
    }
}
