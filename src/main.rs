//! The `solewriter` binary: parses the command line, runs the command, and turns a failure
//! into one line on stderr and the exit code of its class (see `cli::error`).
#![forbid(unsafe_code)]

mod cli;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let parsed = match cli::Cli::try_parse() {
        Ok(parsed) => parsed,
        // Help and version go to stdout with code 0; a bad command line exits 2 (usage).
        Err(e) => e.exit(),
    };
    match cli::run(parsed) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("solewriter: error: {error}");
            ExitCode::from(error.class.exit_code())
        }
    }
}
