//! The reference ledger [`Source`]: a Git repository read through the `git` command line.
//!
//! Facts: `commit/<oid>` (history: id, parents, author time, subject) and `hunks/<oid>` (per
//! file, the changed line ranges against the first parent). Every command runs with
//! `GIT_NO_REPLACE_OBJECTS=1`, `--no-ext-diff --no-textconv --no-renames` and fixed `a/`/`b/`
//! prefixes. The interpretation identity is the SHA-256 of what can still change Git's
//! answers: `git version`, the repository's object format, and every `diff.*` and
//! `core.quotepath` configuration value (from all configuration scopes).

use crate::ledger::{Derive, LedgerError, Source, SourceError};
use serde::de::DeserializeOwned;
use serde_json::Value;
use sha2::{Digest, Sha256};
use solewriter_core::git_facts::{
    parse_commit, parse_hunks, CommitFact, GitFactId, HunkFact, Oid, COMMIT_FORMAT,
};
use solewriter_core::ledger::{FactId, Interpretation};
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Command;

/// A Git repository as a ledger source.
#[derive(Clone, Debug)]
pub struct GitSource {
    repo: PathBuf,
    env: Vec<(OsString, OsString)>,
}

impl GitSource {
    /// The repository at (or containing) `repo`, read with the `git` found on `PATH`.
    pub fn new(repo: impl Into<PathBuf>) -> Self {
        GitSource {
            repo: repo.into(),
            env: Vec::new(),
        }
    }

    /// Adds an environment variable to every `git` run (e.g. `GIT_CONFIG_GLOBAL`).
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Runs `git args…` in the repository; `ok_codes` lists the accepted exit codes.
    fn git(&self, what: &str, args: &[&str], ok_codes: &[i32]) -> Result<String, SourceError> {
        let fail = |detail: String| SourceError {
            what: what.to_owned(),
            detail,
        };
        let output = Command::new("git")
            .arg("-C")
            .arg(&self.repo)
            .args(args)
            .env("GIT_NO_REPLACE_OBJECTS", "1")
            .env("GIT_OPTIONAL_LOCKS", "0")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .output()
            .map_err(|e| fail(format!("cannot run git: {e}")))?;
        match output.status.code() {
            Some(code) if ok_codes.contains(&code) => String::from_utf8(output.stdout)
                .map_err(|_| fail("git printed non-UTF-8 output".into())),
            _ => Err(fail(format!(
                "git {} exited with {}: {}",
                args.join(" "),
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            ))),
        }
    }

    /// Resolves a revision (e.g. `HEAD`) to a commit id. Not a fact: refs move.
    pub fn resolve(&self, rev: &str) -> Result<Oid, SourceError> {
        let spec = format!("{rev}^{{commit}}");
        let text = self.git(
            "resolve a revision",
            &["rev-parse", "--verify", "--end-of-options", &spec],
            &[0],
        )?;
        Oid::parse(&text).map_err(|e| SourceError {
            what: "resolve a revision".into(),
            detail: e.to_string(),
        })
    }
}

impl Source for GitSource {
    fn interpretation(&self) -> Result<Interpretation, SourceError> {
        let version = self.git("read the git version", &["version"], &[0])?;
        let format = self.git(
            "read the object format",
            &["rev-parse", "--show-object-format"],
            &[0],
        )?;
        // Exit code 1: no such setting.
        let config = self.git(
            "read diff settings",
            &[
                "config",
                "--includes",
                "--get-regexp",
                r"^(diff\..*|core\.quotepath)$",
            ],
            &[0, 1],
        )?;
        let mut hash = Sha256::new();
        for part in [&version, &format, &config] {
            hash.update(part.as_bytes());
            hash.update([0]);
        }
        let hex = solewriter_core::hex::encode(&hash.finalize());
        Interpretation::parse(&format!("git-{hex}")).map_err(|e| SourceError {
            what: "build the interpretation identity".into(),
            detail: e.to_string(),
        })
    }

    fn derive(&self, id: &FactId) -> Result<Value, SourceError> {
        let unknown = || SourceError {
            what: format!("derive {id}"),
            detail: "not a git fact id (commit/<oid> or hunks/<oid>)".into(),
        };
        let bad = |e: solewriter_core::git_facts::GitParseError| SourceError {
            what: format!("derive {id}"),
            detail: e.to_string(),
        };
        let encode = |v: Result<Value, serde_json::Error>| {
            v.map_err(|e| SourceError {
                what: format!("derive {id}"),
                detail: e.to_string(),
            })
        };
        match GitFactId::parse(id).ok_or_else(unknown)? {
            GitFactId::Commit(oid) => {
                let format = format!("--format={COMMIT_FORMAT}");
                let spec = format!("{}^{{commit}}", oid.as_str());
                let text = self.git(
                    "read a commit",
                    &["show", "-s", "--no-show-signature", &format, &spec],
                    &[0],
                )?;
                let fact = parse_commit(&text).map_err(bad)?;
                encode(serde_json::to_value(fact))
            }
            GitFactId::Hunks(oid) => {
                let patch = self.git(
                    "read a commit's hunks",
                    &[
                        "diff-tree",
                        "-r",
                        "-p",
                        "-U0",
                        "--no-commit-id",
                        "--root",
                        "-m",
                        "--first-parent",
                        "--no-color",
                        "--no-ext-diff",
                        "--no-textconv",
                        "--no-renames",
                        "--src-prefix=a/",
                        "--dst-prefix=b/",
                        oid.as_str(),
                    ],
                    &[0],
                )?;
                let fact = parse_hunks(oid, &patch).map_err(bad)?;
                encode(serde_json::to_value(fact))
            }
        }
    }
}

fn typed<T: DeserializeOwned>(d: &mut Derive<'_>, id: GitFactId) -> Result<T, LedgerError> {
    let id = id.fact_id();
    let value = d.fact(&id)?;
    serde_json::from_value(value)
        .map_err(|e| LedgerError::Consumer(format!("fact {id} is not of its kind: {e}")))
}

/// The history consumer's seam: the history fact of `oid`, from the ledger or derived.
pub fn commit_fact(d: &mut Derive<'_>, oid: &Oid) -> Result<CommitFact, LedgerError> {
    typed(d, GitFactId::Commit(oid.clone()))
}

/// The hunk consumer's seam: the hunk facts of `oid`, from the ledger or derived.
pub fn hunk_fact(d: &mut Derive<'_>, oid: &Oid) -> Result<HunkFact, LedgerError> {
    typed(d, GitFactId::Hunks(oid.clone()))
}
