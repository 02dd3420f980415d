//! The reference ledger [`Source`]: a Git repository read through the `git` command line.
//!
//! Facts: `commit/<oid>` (history: id, parents, author time, subject) and `hunks/<oid>` (per
//! file, the changed line ranges against the first parent). Every command runs with
//! `--no-ext-diff --no-textconv --no-renames` and fixed `a/`/`b/` prefixes where it diffs.
//!
//! What can change Git's answers is either **neutralised** (every run sees the same thing,
//! whatever the repository or host holds) or **part of the interpretation identity** (facts
//! derived under one identity are never reused under another; see `solewriter_core::ledger`):
//!
//! | input | how |
//! |---|---|
//! | replace refs | neutralised: `GIT_NO_REPLACE_OBJECTS=1` |
//! | grafts (`info/grafts`, honoured even without replace refs) | neutralised: `GIT_GRAFT_FILE=/dev/null` |
//! | attributes of the worktree, index and committed trees (`.gitattributes`, e.g. `-diff`) | neutralised: `--attr-source=<the empty tree>` when diffing |
//! | global and system attributes | neutralised: `-c core.attributesFile=/dev/null`, `GIT_ATTR_NOSYSTEM=1` |
//! | log output encoding | neutralised: `-c i18n.logOutputEncoding=UTF-8` |
//! | `$GIT_DIR/info/attributes` (always read) | identity: SHA-256 of its bytes |
//! | shallow boundary (`$GIT_DIR/shallow`: parents hidden, root-like hunks) | identity: SHA-256 of its bytes |
//! | `git version`, object format | identity |
//! | `diff.*`, `core.quotepath`, `core.bigfilethreshold` (all configuration scopes) | identity |
//!
//! So a shallow clone that deepens, or an edited `info/attributes`, re-derives every fact;
//! a worktree `.gitattributes` or a grafts file changes nothing.
use crate::{Derive, LedgerError, Source, SourceError};
use serde::de::DeserializeOwned;
use serde_json::Value;
use sha2::{Digest, Sha256};
use solewriter_core::ledger::git_facts::{
    parse_commit, parse_hunks, CommitFact, GitFactId, HunkFact, Oid, COMMIT_FORMAT,
};
use solewriter_core::ledger::{FactId, Interpretation};
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Command;

/// Configuration every `git` run gets (see the module doc).
const NEUTRAL_CONFIG: [&str; 4] = [
    "-c",
    "core.attributesFile=/dev/null",
    "-c",
    "i18n.logOutputEncoding=UTF-8",
];

/// The empty tree of the object format of `oid` (SHA-1 or SHA-256, told by its length): the
/// attribute source that holds no attributes.
fn empty_tree(oid: &Oid) -> &'static str {
    if oid.as_str().len() == 64 {
        "6ef19b41225c5369f1c104d45d8d85efa9b057b53b14b4b9b939dd74decc5321"
    } else {
        "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
    }
}

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
            .args(NEUTRAL_CONFIG)
            .args(args)
            .env("GIT_NO_REPLACE_OBJECTS", "1")
            .env("GIT_GRAFT_FILE", "/dev/null")
            .env("GIT_ATTR_NOSYSTEM", "1")
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
                r"^(diff\..*|core\.quotepath|core\.bigfilethreshold)$",
            ],
            &[0, 1],
        )?;
        let paths = self.git(
            "locate the shallow and attributes files",
            &[
                "rev-parse",
                "--path-format=absolute",
                "--git-path",
                "shallow",
                "--git-path",
                "info/attributes",
            ],
            &[0],
        )?;
        let mut hash = Sha256::new();
        for part in [&version, &format, &config] {
            hash.update(part.as_bytes());
            hash.update([0]);
        }
        for path in paths.lines() {
            hash.update(file_digest(path)?);
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
        let bad = |e: solewriter_core::ledger::git_facts::GitParseError| SourceError {
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
                let attributes = format!("--attr-source={}", empty_tree(&oid));
                let patch = self.git(
                    "read a commit's hunks",
                    &[
                        &attributes,
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

/// The SHA-256 of the file at `path`, tagged so that an absent file differs from an empty one.
fn file_digest(path: &str) -> Result<[u8; 33], SourceError> {
    let fail = |e: std::io::Error| SourceError {
        what: format!("read {path}"),
        detail: e.to_string(),
    };
    let mut hash = Sha256::new();
    let tag = match std::fs::File::open(path) {
        Ok(mut file) => {
            std::io::copy(&mut file, &mut hash).map_err(fail)?;
            1
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
        Err(e) => return Err(fail(e)),
    };
    let mut digest = [tag; 33];
    digest[1..].copy_from_slice(&hash.finalize());
    Ok(digest)
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
