//! A real Git repository for the `ledger` commands, made and read with a hermetic
//! environment: no global or system configuration, a fixed author, committer and date, so
//! every run makes the same commits.
#![allow(dead_code)]

use super::EXE;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The environment of every `git` the tests run, and of the binary (its `git` children
/// inherit it).
pub const HERMETIC: [(&str, &str); 8] = [
    ("GIT_CONFIG_GLOBAL", "/dev/null"),
    ("GIT_CONFIG_NOSYSTEM", "1"),
    ("GIT_AUTHOR_NAME", "A"),
    ("GIT_AUTHOR_EMAIL", "a@example.invalid"),
    ("GIT_COMMITTER_NAME", "A"),
    ("GIT_COMMITTER_EMAIL", "a@example.invalid"),
    ("GIT_AUTHOR_DATE", "1700000000 +0000"),
    ("GIT_COMMITTER_DATE", "1700000000 +0000"),
];

/// The subjects of [`repo`]'s commits, newest first.
pub const SUBJECTS: [&str; 3] = ["change 2", "change 1", "change 0"];

/// Runs `git args…` in `repo`; returns its stdout.
pub fn git(repo: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(args)
        .envs(HERMETIC)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// A repository of three commits of one file under `root/repo` (subjects [`SUBJECTS`]).
pub fn repo(root: &Path) -> PathBuf {
    let repo = root.join("repo");
    std::fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    for (i, content) in ["a\nb\n", "a\nB\nc\n", "z\na\nB\nc\n"].iter().enumerate() {
        std::fs::write(repo.join("f.txt"), content).unwrap();
        git(&repo, &["add", "f.txt"]);
        git(&repo, &["commit", "-q", "-m", &format!("change {i}")]);
    }
    repo
}

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
