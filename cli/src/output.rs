//! Standard output of every command. A reader that closes the pipe early (`| head`, `| true`)
//! ends the output, not the command: what the command did stays done, the rest of its output
//! is dropped, and its exit code is the command's own. Any other write failure (a full disk,
//! a revoked terminal) is recorded and turns the command's success into an `io` failure
//! ([`finish`]); the command still completes, since its effect may already have happened.

use crate::error::{Class, CliError, CliResult};
use std::io::Write;
use std::sync::Mutex;

/// The first write failure other than a closed pipe.
static FAILED: Mutex<Option<String>> = Mutex::new(None);

/// Prints one line on stdout (`say!` is the formatting shorthand).
pub fn line(args: std::fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{args}").and_then(|()| out.flush()) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        Err(e) => {
            let mut failed = FAILED.lock().unwrap_or_else(|p| p.into_inner());
            failed.get_or_insert_with(|| e.to_string());
        }
    }
}

/// The outcome of a command whose output may have failed: a recorded write failure (not a
/// closed pipe) fails a command that otherwise succeeded.
pub fn finish(result: CliResult<()>) -> CliResult<()> {
    let failed = FAILED.lock().unwrap_or_else(|p| p.into_inner()).take();
    match (result, failed) {
        (Ok(()), Some(e)) => Err(CliError::new(
            Class::Io,
            format!("writing to stdout failed ({e}); the command itself completed"),
        )),
        (result, _) => result,
    }
}

/// Prints one formatted line on stdout; see [`line`].
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::output::line(format_args!($($arg)*))
    };
}
