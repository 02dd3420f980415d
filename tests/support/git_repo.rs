//! A real Git repository, made and read with a hermetic environment (no global or system
//! configuration, a fixed author, committer and date, so every run makes the same commits):
//! the ledger's source in its tests (adapters, CLI) and its benchmark, each including this file
//! by path.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The environment of every `git` these runs start (and of a binary whose `git` children
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

/// Runs `git args…` in `repo`; its stdout. Panics when git fails.
pub fn git(repo: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(args)
        .envs(HERMETIC)
        .output()
        .expect("run git");
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8(out.stdout).expect("git's output is UTF-8")
}

/// A repository under `root/repo` of one commit per content of `contents`, each writing it to
/// `f.txt`, subjects `change 0`, `change 1`, ...
pub fn repo_of(root: &Path, contents: &[String]) -> PathBuf {
    let repo = root.join("repo");
    std::fs::create_dir(&repo).expect("create the repository directory");
    git(&repo, &["init", "-q", "-b", "main"]);
    for (i, content) in contents.iter().enumerate() {
        std::fs::write(repo.join("f.txt"), content).expect("write f.txt");
        git(&repo, &["add", "f.txt"]);
        git(&repo, &["commit", "-q", "-m", &format!("change {i}")]);
    }
    repo
}

/// The repository of three commits of one file (subjects [`SUBJECTS`]).
pub fn repo(root: &Path) -> PathBuf {
    let contents = ["a\nb\n", "a\nB\nc\n", "z\na\nB\nc\n"].map(str::to_owned);
    repo_of(root, &contents)
}
