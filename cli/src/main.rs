//! `solewriter`, the operator binary that ships: every command of [`solewriter_cli`], with no
//! test seams (its clock is the system clock; no flag parks a transaction).
#![forbid(unsafe_code)]

use solewriter_cli::{command, exit, parse, run, Seams};
use std::process::ExitCode;

fn main() -> ExitCode {
    exit(parse(command()).and_then(|(cli, _)| run(cli, &Seams::default())))
}
