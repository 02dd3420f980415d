//! A real Git repository for the `ledger` commands, made and read with a hermetic
//! environment: no global or system configuration, a fixed author, committer and date, so
//! every run makes the same commits.
#![allow(dead_code)]

use super::EXE;
use std::path::Path;
use std::process::Command;

#[path = "../../../tests/support/git_repo.rs"]
mod git_repo;

#[allow(unused_imports)] // each test binary uses its own subset
pub use git_repo::{git, repo, HERMETIC, SUBJECTS};

/// The commit id `rev` names in `repo`.
pub fn oid(repo: &Path, rev: &str) -> String {
    git(repo, &["rev-parse", rev]).trim().to_owned()
}

/// The binary, run in `root` with the hermetic environment.
pub fn command(root: &Path) -> Command {
    let mut command = Command::new(EXE);
    command.envs(HERMETIC).current_dir(root);
    command
}
