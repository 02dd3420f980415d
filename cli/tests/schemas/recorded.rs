//! Recorded outputs: one real `--json` output per command and shape, kept in
//! `schema/recorded/<VERSION>/<def>.<shape>.json`, and the comparison that makes CI fail when
//! an output changes without its schema version.
//!
//! **What is compared.** The *shape* of an output, read with the schema of its version: the
//! path of every value (`$.owner.pid`, `$.targets[].state`; the keys of a map the schema
//! declares with `additionalProperties` or `propertyNames` are one `*`; the inside of a value
//! the schema leaves open, such as a producer's `envelope`, is not looked into), each value's
//! JSON type, and the literal value of the enumeration-like fields — those whose schema has an
//! `enum` or `const` with a string in it (in `properties`, `anyOf`, `oneOf`, `allOf`, `then`
//! and `else`; never in an `if`). Every other value (pids, nonces, paths, times, hashes,
//! counts) is not compared.
//!
//! **What a recording holds.** The output as printed, normalised so that it is the same on
//! every machine and run and names none of them: every integer is 0, an RFC 3339 time is
//! `1970-01-01T00:00:00.000Z`, the test's temporary directory is `DIR`, every run of eight or
//! more hexadecimal characters (ids, nonces, hashes, boot ids) is zeros, every run of four or
//! more digits is zeros; enumeration-like values are kept. A recording still validates against
//! the schema of its version (checked for every version's directory).
//!
//! **What to do when it fails.** The message lists each difference. Keys added, nothing else:
//! compatible — re-record in place with `SOLEWRITER_RECORD=1 cargo test -p solewriter-cli
//! --test schemas` (and add the key to the schema file). Anything else — a key removed or
//! renamed, a type changed, an enumerated value changed or added — is incompatible: bump to
//! the next version (a new schema file, [`VERSION`] set to it, recorded there with the same
//! variable) and list the change under "Changed from" in docs/cli.md. The test never records on
//! its own, and even with the variable set it refuses to rewrite a recording over an
//! incompatible change.

use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The version of the CLI's `--json` outputs: the schema file `<VERSION>.schema.json` and the
/// recordings' directory `schema/recorded/<VERSION>/`.
pub const VERSION: &str = "cli.v2";

/// Set to `1` to write recordings: a missing one, or one whose output only gained keys.
pub const RECORD_ENV: &str = "SOLEWRITER_RECORD";

/// Every case of [`VERSION`], `<def>.<shape>`: the recordings its directory holds.
pub const CASES: &[&str] = &[
    "admit",
    "init",
    "inspect.expired",
    "inspect.held",
    "inspect.released",
    "inspect.unheld",
    "leaseEnd.ended",
    "leaseEnd.expired",
    "leaseEnd.unheld",
    "ledgerBuild.replaced",
    "ledgerBuild.unchanged",
    "ledgerRead.discarded",
    "ledgerRead.discarded-hunks",
    "ledgerRead.replaced",
    "ledgerRead.unchanged",
    "ledgerStatus.absent",
    "ledgerStatus.held",
    "ledgerStatus.rejected",
    "ledgerStatus.reusable",
    "lockClear.cleared",
    "lockClear.nothing",
    "lockStatus.alive",
    "lockStatus.dead",
    "lockStatus.none",
    "lockStatus.unknown",
    "publish",
    "read",
    "submit.advanced",
    "submit.degraded",
    "submit.inserted",
    "submit.replayed",
    "watch",
];

/// `schema/` at the repository root.
pub fn schema_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../schema")
}

/// The recordings of `version`.
pub fn recorded_dir(version: &str) -> PathBuf {
    schema_dir().join("recorded").join(version)
}

/// The definition a case is an output of: `lockStatus` for `lockStatus.none`.
pub fn def_of(case: &str) -> &str {
    case.split_once('.').map_or(case, |(def, _)| def)
}

/// What the schema says about the paths of one definition's outputs.
#[derive(Debug, Default)]
pub struct Facts {
    /// Paths whose value is compared literally.
    enumerated: BTreeSet<String>,
    /// Paths of objects whose keys are data (one `*`).
    maps: BTreeSet<String>,
    /// Paths of objects with declared `properties`.
    records: BTreeSet<String>,
    /// Every path the schema reaches.
    declared: BTreeSet<String>,
}

/// The schema files, loaded once each.
#[derive(Default)]
struct Files(BTreeMap<String, Value>);

impl Files {
    fn get(&mut self, file: &str) -> &Value {
        self.0.entry(file.to_owned()).or_insert_with(|| {
            let path = schema_dir().join(file);
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{file}: {e}"))
        })
    }
}

impl Facts {
    /// The facts of `$defs/<def>` in `<version>.schema.json`.
    pub fn of(version: &str, def: &str) -> Facts {
        let mut files = Files::default();
        let file = format!("{version}.schema.json");
        let node = files
            .get(&file)
            .pointer(&format!("/$defs/{def}"))
            .unwrap_or_else(|| panic!("{file} has no $defs/{def}"))
            .clone();
        let mut facts = Facts::default();
        facts.walk(&mut files, &file, &node, "$", 0);
        facts
    }

    fn walk(&mut self, files: &mut Files, file: &str, node: &Value, path: &str, depth: usize) {
        assert!(depth < 64, "schema too deep at {path} (a recursive $ref?)");
        self.declared.insert(path.to_owned());
        let Some(node) = node.as_object() else {
            return;
        };
        if let Some(reference) = node.get("$ref").and_then(Value::as_str) {
            let (target, pointer) = match reference.split_once('#') {
                Some(("", pointer)) => (file.to_owned(), pointer.to_owned()),
                Some((other, pointer)) => (other.to_owned(), pointer.to_owned()),
                None => (reference.to_owned(), String::new()),
            };
            let resolved = files
                .get(&target)
                .pointer(&pointer)
                .unwrap_or_else(|| panic!("{file}: $ref {reference} resolves to nothing"))
                .clone();
            self.walk(files, &target, &resolved, path, depth + 1);
        }
        for key in ["anyOf", "oneOf", "allOf"] {
            for sub in node
                .get(key)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                self.walk(files, file, sub, path, depth + 1);
            }
        }
        for key in ["then", "else"] {
            if let Some(sub) = node.get(key) {
                self.walk(files, file, sub, path, depth + 1);
            }
        }
        if let Some(properties) = node.get("properties").and_then(Value::as_object) {
            self.records.insert(path.to_owned());
            for (key, sub) in properties {
                self.walk(files, file, sub, &format!("{path}.{key}"), depth + 1);
            }
        }
        if let Some(sub @ Value::Object(_)) = node.get("additionalProperties") {
            self.maps.insert(path.to_owned());
            self.walk(files, file, sub, &format!("{path}.*"), depth + 1);
        }
        if node.contains_key("propertyNames") {
            self.maps.insert(path.to_owned());
        }
        if let Some(items) = node.get("items") {
            self.walk(files, file, items, &format!("{path}[]"), depth + 1);
        }
        let literals = match (node.get("enum"), node.get("const")) {
            (Some(Value::Array(values)), _) => values.clone(),
            (_, Some(value)) => vec![value.clone()],
            _ => Vec::new(),
        };
        if literals.iter().any(Value::is_string) {
            self.enumerated.insert(path.to_owned());
        }
    }

    /// A map's keys are data; a value the schema declares without properties is opaque; an
    /// object at a path the schema does not know (a key just added) is looked into.
    fn object_kind(&self, path: &str) -> ObjectKind {
        if self.maps.contains(path) {
            ObjectKind::Map
        } else if self.declared.contains(path) && !self.records.contains(path) {
            ObjectKind::Opaque
        } else {
            ObjectKind::Record
        }
    }
}

enum ObjectKind {
    Record,
    Map,
    Opaque,
}

/// Path → what was seen there: a JSON type, or a type and its literal for enumerated paths.
pub type Shape = BTreeMap<String, BTreeSet<String>>;

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The shape of `doc` under `facts`.
pub fn shape(doc: &Value, facts: &Facts) -> Shape {
    let mut out = Shape::new();
    visit(doc, "$", facts, &mut out);
    out
}

fn visit(value: &Value, path: &str, facts: &Facts, out: &mut Shape) {
    let seen = match value {
        Value::Array(_) | Value::Object(_) => kind(value).to_owned(),
        _ if facts.enumerated.contains(path) => format!("{} {value}", kind(value)),
        _ => kind(value).to_owned(),
    };
    out.entry(path.to_owned()).or_default().insert(seen);
    match value {
        Value::Array(items) => {
            for item in items {
                visit(item, &format!("{path}[]"), facts, out);
            }
        }
        Value::Object(map) => match facts.object_kind(path) {
            ObjectKind::Map => {
                for item in map.values() {
                    visit(item, &format!("{path}.*"), facts, out);
                }
            }
            ObjectKind::Opaque => {}
            ObjectKind::Record => {
                for (key, item) in map {
                    visit(item, &format!("{path}.{key}"), facts, out);
                }
            }
        },
        _ => {}
    }
}

/// One difference between a recording's shape and an output's.
#[derive(Debug, PartialEq, Eq)]
pub enum Change {
    /// A path the recording does not have.
    Added { path: String, now: String },
    /// A path the output no longer has.
    Removed { path: String, was: String },
    /// Another type, or another enumerated value, at the same path.
    Changed {
        path: String,
        was: String,
        now: String,
    },
}

impl Change {
    /// Only an added key is compatible.
    pub fn compatible(&self) -> bool {
        matches!(self, Change::Added { .. })
    }
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Change::Added { path, now } => write!(f, "  + added:   {path} ({now})"),
            Change::Removed { path, was } => write!(f, "  - removed: {path} (was {was})"),
            Change::Changed { path, was, now } => {
                write!(f, "  ~ changed: {path}: was {was}, now {now}")
            }
        }
    }
}

fn seen(kinds: &BTreeSet<String>) -> String {
    kinds.iter().cloned().collect::<Vec<_>>().join(" | ")
}

/// The differences from `recorded` to `now`, in path order.
pub fn diff(recorded: &Shape, now: &Shape) -> Vec<Change> {
    let paths: BTreeSet<&String> = recorded.keys().chain(now.keys()).collect();
    paths
        .into_iter()
        .filter_map(|path| match (recorded.get(path), now.get(path)) {
            (None, Some(now)) => Some(Change::Added {
                path: path.clone(),
                now: seen(now),
            }),
            (Some(was), None) => Some(Change::Removed {
                path: path.clone(),
                was: seen(was),
            }),
            (Some(was), Some(now)) if was != now => Some(Change::Changed {
                path: path.clone(),
                was: seen(was),
                now: seen(now),
            }),
            _ => None,
        })
        .collect()
}

/// The message of a failed comparison: what changed, and what to do.
pub fn explain(case: &str, file: &Path, changes: &[Change]) -> String {
    let listed: Vec<String> = changes.iter().map(Change::to_string).collect();
    let next = next_version();
    let what = if changes.iter().all(Change::compatible) {
        format!(
            "Compatible (keys added, nothing else): re-record in place with `{RECORD_ENV}=1 cargo test -p solewriter-cli --test schemas`, and add the key to schema/{VERSION}.schema.json (every recording must validate against it)."
        )
    } else {
        format!(
            "Incompatible (a key removed or renamed, a type changed, an enumerated value changed or added): do not re-record {VERSION}. Bump the CLI's outputs to {next}: schema/{next}.schema.json (a copy of {VERSION}'s with the change, $id and title {next}), VERSION = \"{next}\" in cli/tests/schemas/recorded.rs, record with `{RECORD_ENV}=1 cargo test -p solewriter-cli --test schemas` (it writes schema/recorded/{next}/), point docs/cli.md and cli/src at {next}, and list the change (old -> new) under \"Changed from\" in docs/cli.md."
        )
    };
    format!(
        "`{case}` --json output no longer has the shape recorded in {}:\n{}\n{what}",
        file.display(),
        listed.join("\n")
    )
}

/// `cli.v3` after `cli.v2`.
fn next_version() -> String {
    let number: u32 = VERSION
        .strip_prefix("cli.v")
        .and_then(|n| n.parse().ok())
        .expect("VERSION is cli.vN");
    format!("cli.v{}", number + 1)
}

/// Whether the test was asked to record.
pub fn recording() -> bool {
    std::env::var(RECORD_ENV).is_ok_and(|v| v == "1")
}

/// Compares the shape of `doc`, an output of `case`, with its recording; with [`RECORD_ENV`]
/// set, writes a missing recording or one whose output only gained keys. Panics with
/// [`explain`]'s message on any other difference.
#[track_caller]
pub fn compare(case: &str, doc: &Value) {
    assert!(
        CASES.contains(&case),
        "`{case}` is not in CASES (cli/tests/schemas/recorded.rs): add it there, then record it"
    );
    let facts = Facts::of(VERSION, def_of(case));
    let file = recorded_dir(VERSION).join(format!("{case}.json"));
    let shown = Path::new("schema/recorded")
        .join(VERSION)
        .join(format!("{case}.json"));
    let now = shape(doc, &facts);
    let recorded = match std::fs::read_to_string(&file) {
        Ok(text) => serde_json::from_str::<Value>(&text)
            .unwrap_or_else(|e| panic!("{}: {e}", file.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            assert!(
                recording(),
                "no recording of `{case}` at {}: record it with `{RECORD_ENV}=1 cargo test -p solewriter-cli --test schemas`",
                shown.display()
            );
            write(&file, doc, &facts);
            return;
        }
        Err(e) => panic!("{}: {e}", file.display()),
    };
    let changes = diff(&shape(&recorded, &facts), &now);
    if changes.is_empty() {
        return;
    }
    let message = explain(case, &shown, &changes);
    if recording() && changes.iter().all(Change::compatible) {
        write(&file, doc, &facts);
        return;
    }
    panic!("{message}");
}

fn write(file: &Path, doc: &Value, facts: &Facts) {
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    let text = serde_json::to_string_pretty(&normalise(doc, "$", facts)).unwrap();
    std::fs::write(file, text + "\n").unwrap();
}

/// The recorded form of an output: see the module documentation.
pub fn normalise(value: &Value, path: &str, facts: &Facts) -> Value {
    match value {
        Value::Number(_) if !facts.enumerated.contains(path) => Value::from(0),
        Value::String(text) if !facts.enumerated.contains(path) => {
            Value::String(normalise_text(text))
        }
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|item| normalise(item, &format!("{path}[]"), facts))
                .collect(),
        ),
        Value::Object(map) => {
            let child = |key: &str| match facts.object_kind(path) {
                ObjectKind::Map => format!("{path}.*"),
                _ => format!("{path}.{key}"),
            };
            let normalised: Map<String, Value> = map
                .iter()
                .map(|(key, item)| (key.clone(), normalise(item, &child(key), facts)))
                .collect();
            Value::Object(normalised)
        }
        other => other.clone(),
    }
}

fn is_rfc3339(text: &str) -> bool {
    let shape = "dddd-dd-ddTdd:dd:dd.dddZ";
    text.len() == shape.len()
        && text.chars().zip(shape.chars()).all(|(c, s)| match s {
            'd' => c.is_ascii_digit(),
            _ => c == s,
        })
}

/// A string as recorded: the temporary directory is `DIR`, hex runs of eight or more are
/// zeros, digit runs of four or more are zeros, an RFC 3339 time is the epoch.
pub fn normalise_text(text: &str) -> String {
    if is_rfc3339(text) {
        return "1970-01-01T00:00:00.000Z".to_owned();
    }
    let mut text = text.to_owned();
    let temp = std::env::temp_dir();
    let temp = temp.to_string_lossy();
    let prefix = format!("{}/", temp.trim_end_matches('/'));
    while let Some(at) = text.find(&prefix) {
        let rest = &text[at + prefix.len()..];
        let end = at + prefix.len() + rest.find('/').unwrap_or(rest.len());
        text.replace_range(at..end, "DIR");
    }
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let hexish = |c: char| c.is_ascii_digit() || ('a'..='f').contains(&c) || c == '-';
        let mut j = i;
        while j < chars.len() && hexish(chars[j]) {
            j += 1;
        }
        if j > i {
            let run = &chars[i..j];
            let hex = run.iter().filter(|c| **c != '-').count();
            if hex >= 8 {
                out.extend(run.iter().map(|&c| if c == '-' { '-' } else { '0' }));
            } else {
                zero_digit_runs(run, &mut out);
            }
            i = j;
        } else {
            out.push(chars[i]);
            i += 1;
        }
    }
    out
}

/// Copies `run`, its runs of four or more digits as zeros.
fn zero_digit_runs(run: &[char], out: &mut String) {
    let mut i = 0;
    while i < run.len() {
        let mut j = i;
        while j < run.len() && run[j].is_ascii_digit() {
            j += 1;
        }
        if j - i >= 4 {
            out.extend(std::iter::repeat_n('0', j - i));
            i = j;
        } else if j > i {
            out.extend(&run[i..j]);
            i = j;
        } else {
            out.push(run[i]);
            i += 1;
        }
    }
}
