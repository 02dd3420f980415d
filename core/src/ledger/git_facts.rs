//! The Git facts of the event ledger and the pure parsers of Git's answers: history facts
//! (commit id, parents, author time, subject) and hunk facts (per commit and file, the changed
//! line ranges against the first parent). The adapter runs `git`; this module reads its text.

use crate::ledger::FactId;
use serde::{Deserialize, Serialize};

/// A Git object id: 40 (SHA-1) or 64 (SHA-256) lowercase hex characters.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Oid(String);

impl Oid {
    /// Parses an object id (surrounding whitespace ignored).
    pub fn parse(text: &str) -> Result<Self, GitParseError> {
        let t = text.trim();
        let hex = t.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        if (t.len() == 40 || t.len() == 64) && hex {
            Ok(Oid(t.to_owned()))
        } else {
            Err(GitParseError(format!("not an object id: {t:?}")))
        }
    }

    /// The hex text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for Oid {
    type Error = GitParseError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Oid::parse(&value)
    }
}

impl From<Oid> for String {
    fn from(value: Oid) -> String {
        value.0
    }
}

/// Git output that does not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unexpected git output: {0}")]
pub struct GitParseError(pub String);

/// Which Git fact a fact id names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GitFactId {
    /// The history fact of a commit: `commit/<oid>`.
    Commit(Oid),
    /// The hunk facts of a commit: `hunks/<oid>`.
    Hunks(Oid),
}

impl GitFactId {
    /// The ledger key.
    pub fn fact_id(&self) -> FactId {
        let text = match self {
            GitFactId::Commit(oid) => format!("commit/{}", oid.as_str()),
            GitFactId::Hunks(oid) => format!("hunks/{}", oid.as_str()),
        };
        // `commit/` or `hunks/` plus at most 64 hex characters.
        FactId::from_bounded(text)
    }

    /// Reads a ledger key; `None` if it names no Git fact.
    pub fn parse(id: &FactId) -> Option<Self> {
        let (kind, oid) = id.as_str().split_once('/')?;
        let oid = Oid::parse(oid).ok().filter(|o| o.as_str() == oid)?;
        match kind {
            "commit" => Some(GitFactId::Commit(oid)),
            "hunks" => Some(GitFactId::Hunks(oid)),
            _ => None,
        }
    }
}

/// The history fact of one commit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommitFact {
    /// The commit.
    pub commit: Oid,
    /// Its parents, first parent first.
    pub parents: Vec<Oid>,
    /// Author time, seconds since the Unix epoch.
    pub author_time: i64,
    /// The subject line.
    pub subject: String,
}

/// The `--format` that [`parse_commit`] reads: NUL-separated id, parents, author time,
/// subject.
pub const COMMIT_FORMAT: &str = "%H%x00%P%x00%at%x00%s";

/// Parses `git show -s --format=COMMIT_FORMAT <oid>`.
pub fn parse_commit(text: &str) -> Result<CommitFact, GitParseError> {
    let text = text.strip_suffix('\n').unwrap_or(text);
    let bad = || GitParseError(format!("commit record {text:?}"));
    let mut fields = text.split('\0');
    let (Some(commit), Some(parents), Some(time), Some(subject), None) = (
        fields.next(),
        fields.next(),
        fields.next(),
        fields.next(),
        fields.next(),
    ) else {
        return Err(bad());
    };
    Ok(CommitFact {
        commit: Oid::parse(commit)?,
        parents: parents
            .split_ascii_whitespace()
            .map(Oid::parse)
            .collect::<Result<_, _>>()?,
        author_time: time.parse().map_err(|_| bad())?,
        subject: subject.to_owned(),
    })
}

/// One changed line range (unified-diff hunk header numbers).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hunk {
    /// First line in the old file.
    pub old_start: u32,
    /// Lines removed.
    pub old_lines: u32,
    /// First line in the new file.
    pub new_start: u32,
    /// Lines added.
    pub new_lines: u32,
}

/// The hunks of one file of a commit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileHunks {
    /// The path (the new path; the old one for a deletion), as Git prints it.
    pub path: String,
    /// The changed ranges, in order (none for a binary change).
    pub hunks: Vec<Hunk>,
}

/// The hunk facts of one commit, against its first parent (or the empty tree for a root).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HunkFact {
    /// The commit.
    pub commit: Oid,
    /// The changed files, in Git's order.
    pub files: Vec<FileHunks>,
}

fn range(text: &str) -> Option<(u32, u32)> {
    match text.split_once(',') {
        Some((start, len)) => Some((start.parse().ok()?, len.parse().ok()?)),
        None => Some((text.parse().ok()?, 1)),
    }
}

/// Parses a hunk header `@@ -a[,b] +c[,d] @@…`.
fn parse_hunk_header(line: &str) -> Option<Hunk> {
    let mut parts = line.strip_prefix("@@ ")?.split(' ');
    let (old_start, old_lines) = range(parts.next()?.strip_prefix('-')?)?;
    let (new_start, new_lines) = range(parts.next()?.strip_prefix('+')?)?;
    (parts.next()? == "@@").then_some(Hunk {
        old_start,
        old_lines,
        new_start,
        new_lines,
    })
}

/// Parses the patch of `git diff-tree -p -U0 --no-commit-id --src-prefix=a/ --dst-prefix=b/`.
/// Hunk bodies are skipped by their line counts, so a changed line that looks like a header
/// (`--- x`) is never misread.
pub fn parse_hunks(commit: Oid, patch: &str) -> Result<HunkFact, GitParseError> {
    let mut files: Vec<FileHunks> = Vec::new();
    let mut lines = patch.lines();
    while let Some(line) = lines.next() {
        let bad = || GitParseError(format!("patch line {line:?}"));
        if let Some(names) = line.strip_prefix("diff --git ") {
            // The `b/` name; refined by a `+++`/`---` line when the file has text hunks.
            let path = names.rsplit_once(" b/").map_or(names, |(_, b)| b);
            files.push(FileHunks {
                path: path.to_owned(),
                hunks: Vec::new(),
            });
        } else if let Some(old) = line.strip_prefix("--- ") {
            let file = files.last_mut().ok_or_else(bad)?;
            if let Some(path) = old.strip_prefix("a/") {
                file.path = path.to_owned();
            }
        } else if let Some(new) = line.strip_prefix("+++ ") {
            let file = files.last_mut().ok_or_else(bad)?;
            if let Some(path) = new.strip_prefix("b/") {
                file.path = path.to_owned();
            }
        } else if line.starts_with("@@ ") {
            let hunk = parse_hunk_header(line).ok_or_else(bad)?;
            files.last_mut().ok_or_else(bad)?.hunks.push(hunk);
            let body = u64::from(hunk.old_lines) + u64::from(hunk.new_lines);
            let mut seen = 0;
            while seen < body {
                let l = lines.next().ok_or_else(bad)?;
                // "\ No newline at end of file" is not a counted line.
                if !l.starts_with('\\') {
                    seen += 1;
                }
            }
        }
    }
    Ok(HunkFact { commit, files })
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "4c776f4d903dec0bb020a5807aebf94ab4e075b8";
    const B: &str = "2cba440f903dec0bb020a5807aebf94ab4e075b8";

    fn oid(s: &str) -> Oid {
        Oid::parse(s).unwrap()
    }

    #[test]
    fn commit_records_parse_strictly() {
        let fact = parse_commit(&format!("{A}\0{B} {A}\x001700000000\0fix: a (b) c\n")).unwrap();
        assert_eq!(fact.parents, vec![oid(B), oid(A)]);
        assert_eq!(
            (fact.author_time, fact.subject.as_str()),
            (1700000000, "fix: a (b) c")
        );
        assert!(parse_commit(&format!("{A}\0\x001\0root"))
            .unwrap()
            .parents
            .is_empty());
        for bad in [
            format!("{A}\0\0x\0s"),
            format!("{A}\0\x001"),
            "zz\0\x001\0s".to_owned(),
        ] {
            assert!(parse_commit(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn fact_ids_round_trip() {
        for id in [GitFactId::Commit(oid(A)), GitFactId::Hunks(oid(B))] {
            assert_eq!(GitFactId::parse(&id.fact_id()), Some(id));
        }
        for other in [
            "commit/x".to_owned(),
            format!("tree/{A}"),
            format!("commit/ {A}"),
        ] {
            assert_eq!(GitFactId::parse(&FactId::parse(&other).unwrap()), None);
        }
    }

    #[test]
    fn hunks_are_read_by_count_so_header_like_lines_are_content() {
        let patch = "diff --git a/s b/s\nnew file mode 100644\nindex 0..b\n--- /dev/null\n+++ b/s\n@@ -0,0 +1 @@\n+s\n\
diff --git a/f b/f\nindex 4..7 100644\n--- a/f\n+++ b/f\n@@ -2 +2,2 @@ a\n--- b\n++++ c\n+d\n\\ No newline at end of file\n\
@@ -9,0 +10 @@\n+@@ -1 +1 @@\n\
diff --git a/gone b/gone\ndeleted file mode 100644\n--- a/gone\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n\
diff --git a/bin b/bin\nBinary files a/bin and b/bin differ\n";
        let fact = parse_hunks(oid(A), patch).unwrap();
        let h = |a, b, c, d| Hunk {
            old_start: a,
            old_lines: b,
            new_start: c,
            new_lines: d,
        };
        let files: Vec<_> = fact
            .files
            .iter()
            .map(|f| (f.path.as_str(), f.hunks.clone()))
            .collect();
        assert_eq!(
            files,
            vec![
                ("s", vec![h(0, 0, 1, 1)]),
                ("f", vec![h(2, 1, 2, 2), h(9, 0, 10, 1)]),
                ("gone", vec![h(1, 1, 0, 0)]),
                ("bin", vec![]),
            ]
        );
        assert!(
            parse_hunks(oid(A), "@@ -1 +1 @@\n-a\n+b\n").is_err(),
            "hunk before a file"
        );
        assert!(
            parse_hunks(oid(A), "diff --git a/f b/f\n@@ -1 +1 @@\n-a\n").is_err(),
            "short"
        );
        assert!(parse_hunks(oid(A), "diff --git a/f b/f\n@@ -x +1 @@\n").is_err());
    }
}
