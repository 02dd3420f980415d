//! Checks that read the workspace's sources rather than run them:
//! - the subtree write guard's code stays portable to a heap without an operating system (a
//!   browser worker, through WebAssembly): `core/src/subtree` reaches no file system, network,
//!   process, environment, clock, thread or lock of `std`, and no crate that would. These
//!   machines have no `wasm32` target to build it for, so its sources are read instead. It
//!   checks that module's own code, not the crate's dependencies (docs/write-guard.md, "A browser host");
//! - no crate's modules import each other in a circle (a module and its own ancestors aside):
//!   each module can be read, and replaced, knowing only what it depends on;
//! - inside core's projection every import points down its list of layers
//!   ([`PROJECTION_LAYERS`]; docs/layout.md);
//! - the facade (`src/`) re-exports named items, never a glob, and no name in its surface (its
//!   modules, the prelude, the root) stands for two items ([`FACADE_CLASHES`] aside);
//! - no two public types of one name are declared across the workspace's crates
//!   ([`NAMED_CRATES`]): one name, one meaning;
//! - no code outside `core` decides who must act on an error (writes a variant of
//!   `ErrorKind`) but the `kind()` of each executor's own error type and the CLI's exit-code
//!   table, listed with their counts: the kind of a machine's outcome is decided in the core,
//!   beside the outcome, and an executor only wraps its own error around it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The workspace root (this package's manifest directory).
fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The text without its comment lines (`//`, `///`, `//!`).
fn code(text: &str) -> String {
    text.lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The top-level entries of a `use` group's body (`{fmt, collections::{HashSet, VecDeque}}` →
/// `fmt`, `collections::{HashSet, VecDeque}`), across lines and nested groups.
fn group_entries(group: &str) -> Vec<String> {
    let mut entries = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                entries.push(group[start..i].trim().to_owned());
                break;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                entries.push(group[start..i].trim().to_owned());
                start = i + 1;
            }
            _ => {}
        }
    }
    entries.retain(|e| !e.is_empty());
    entries
}

/// The path segments following each `prefix` (e.g. `std::`, `crate::`) in `code`, groups
/// expanded at their first level: `crate::{a::X, b}` gives `[a, X]` and `[b]`.
fn paths_after(code: &str, prefix: &str) -> Vec<Vec<String>> {
    let mut paths = Vec::new();
    for (at, _) in code.match_indices(prefix) {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // `mycrate::`, not `crate::`
        }
        let rest = &code[at + prefix.len()..];
        let entries = match rest.strip_prefix('{') {
            Some(group) => group_entries(group),
            None => vec![rest.to_owned()],
        };
        for entry in entries {
            let segments: Vec<String> = entry
                .split("::")
                .map(|s| {
                    s.trim()
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect::<String>()
                })
                .take_while(|s| !s.is_empty())
                .collect();
            if !segments.is_empty() {
                paths.push(segments);
            }
        }
    }
    paths
}

/// The `std` modules the guard's code may use: data structures and formatting only.
const PORTABLE: [&str; 8] = [
    "collections",
    "fmt",
    "cmp",
    "iter",
    "mem",
    "ops",
    "slice",
    "borrow",
];

/// Crates whose use would tie the guard's code to an operating system.
const FORBIDDEN_CRATES: [&str; 6] = ["libc", "rustix", "getrandom", "tokio", "tracing", "rand"];

/// What in `text` portable code must not use.
fn unportable(text: &str) -> Vec<String> {
    let code = code(text);
    let mut found: Vec<String> = paths_after(&code, "std::")
        .into_iter()
        .map(|path| path[0].clone())
        .filter(|module| !PORTABLE.contains(&module.as_str()))
        .map(|module| format!("std::{module}"))
        .collect();
    for krate in FORBIDDEN_CRATES {
        if !paths_after(&code, &format!("{krate}::")).is_empty()
            || code.contains(&format!("extern crate {krate}"))
        {
            found.push(krate.to_owned());
        }
    }
    found
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn the_subtree_core_uses_no_file_system_clock_or_threads() {
    let mut files = Vec::new();
    rust_files(&root().join("core/src/subtree"), &mut files);
    assert!(files.len() >= 6, "read {} files", files.len());
    for path in files {
        let found = unportable(&std::fs::read_to_string(&path).unwrap());
        assert!(found.is_empty(), "{}: {found:?}", path.display());
    }
}

#[test]
fn the_portability_check_sees_what_it_forbids() {
    for bad in [
        "use std::fs::File;",
        "use std::{collections::HashSet, time::Instant};",
        "use std::{\n    collections::HashSet,\n    fs,\n};",
        "use std::{collections::{HashSet, VecDeque}, net::TcpStream};",
        "let now = std::time::SystemTime::now();",
        "std::thread::spawn(|| ());",
        "use std::sync::Mutex;",
        "let t = libc::time(None);",
    ] {
        assert!(!unportable(bad).is_empty(), "{bad}");
    }
    for fine in [
        "use std::collections::{HashSet, VecDeque};",
        "use std::{collections::{HashSet, VecDeque}, fmt};",
        "use std::fmt;",
        "// std::fs is only named in a comment",
    ] {
        assert!(unportable(fine).is_empty(), "{fine}");
    }
}

/// A crate's modules (`a::b` as `["a", "b"]`; the crate root is `[]`) and the modules each
/// names through `crate::` or `super::`.
type Graph = BTreeMap<Vec<String>, BTreeSet<Vec<String>>>;

/// The module of `file` in the crate whose sources are at `src`.
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let relative = file.strip_prefix(src).unwrap().with_extension("");
    let mut segments: Vec<String> = relative
        .iter()
        .map(|s| s.to_string_lossy().into_owned())
        .collect();
    if matches!(
        segments.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        segments.pop();
    }
    segments
}

/// The import graph of the crate at `src` (a binary's own roots under `src/bin/` are other
/// crates and are left out).
fn graph(src: &Path) -> Graph {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.retain(|f| !f.starts_with(src.join("bin")));
    let modules: BTreeSet<Vec<String>> = files.iter().map(|f| module_of(src, f)).collect();
    // The longest module that `path` names (a path into an item names its module).
    let resolve = |path: Vec<String>| -> Option<Vec<String>> {
        (0..=path.len())
            .rev()
            .map(|n| path[..n].to_vec())
            .find(|prefix| modules.contains(prefix))
    };
    let mut graph = Graph::new();
    for file in &files {
        let module = module_of(src, file);
        // `super::` of a `mod.rs` (or of a file) is the parent of its module.
        let parent: Vec<String> = module[..module.len().saturating_sub(1)].to_vec();
        let code = code(&std::fs::read_to_string(file).unwrap());
        let named = paths_after(&code, "crate::")
            .into_iter()
            .chain(paths_after(&code, "super::").into_iter().map(|p| {
                let mut full = parent.clone();
                full.extend(p);
                full
            }))
            .filter_map(resolve);
        let edges = graph.entry(module.clone()).or_default();
        for target in named {
            let related = target.starts_with(&module) || module.starts_with(&target);
            if !related {
                edges.insert(target);
            }
        }
    }
    graph
}

/// A circle of `graph`, if it has one.
fn circle(graph: &Graph) -> Option<Vec<Vec<String>>> {
    fn visit(
        graph: &Graph,
        node: &Vec<String>,
        path: &mut Vec<Vec<String>>,
        done: &mut BTreeSet<Vec<String>>,
    ) -> Option<Vec<Vec<String>>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut found = path[at..].to_vec();
            found.push(node.clone());
            return Some(found);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.clone());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(found) = visit(graph, next, path, done) {
                return Some(found);
            }
        }
        path.pop();
        done.insert(node.clone());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(graph, node, &mut Vec::new(), &mut done))
}

#[test]
fn no_crate_imports_its_own_modules_in_a_circle() {
    for krate in NAMED_CRATES {
        let graph = graph(&root().join(krate));
        assert!(
            graph.len() > 1 || krate == "src",
            "{krate}: no modules read"
        );
        if let Some(found) = circle(&graph) {
            let names: Vec<String> = found.iter().map(|m| m.join("::")).collect();
            panic!(
                "{krate}: modules import each other in a circle: {}",
                names.join(" -> ")
            );
        }
    }
}

#[test]
fn the_circle_check_sees_a_circle() {
    let module = |s: &str| s.split("::").map(str::to_owned).collect::<Vec<_>>();
    let mut graph = Graph::new();
    graph
        .entry(module("p::executor"))
        .or_default()
        .insert(module("p::publication"));
    graph
        .entry(module("p::publication"))
        .or_default()
        .insert(module("p::lease"));
    assert_eq!(circle(&graph), None);
    graph
        .entry(module("p::lease"))
        .or_default()
        .insert(module("p::executor"));
    assert!(circle(&graph).is_some());
    assert_eq!(
        paths_after(
            "use crate::{a::X, b::{c, d}};\nlet y = crate::e::f();",
            "crate::"
        ),
        vec![
            vec!["a".to_owned(), "X".to_owned()],
            vec!["b".to_owned()],
            vec!["e".to_owned(), "f".to_owned()],
        ]
    );
}

/// The layers of `core/src/projection`, lowest first (modules by their path below
/// `projection`; a module's submodules are of its layer unless listed themselves). A module
/// names modules of its own layer and of the layers below it, never one above, and names every
/// item by its own module, not through the projection root's re-exports.
const PROJECTION_LAYERS: [(&str, &[&str]); 8] = [
    ("values", &["target", "watermark::value"]),
    (
        "channels and envelope schemas",
        &["channel", "envelope_schema"],
    ),
    ("document formats", &["document", "memory_core"]),
    // The table that picks a format, and a publication's profile with what its document needs.
    ("the profile", &["profile", "composition"]),
    // `watermark`'s own module is the admission of a submission; its values are `value`.
    (
        "lease, publication, admission",
        &["lease", "publication", "watermark"],
    ),
    ("draft, epoch", &["draft", "epoch"]),
    ("machines", &["machine"]),
    (
        "adoption, schema, stored columns",
        &["adoption", "schema", "columns"],
    ),
];

/// The layer (index in `layers`) of the projection module `module` (its path below
/// `projection`): of the longest listed module it is in.
fn layer_of(layers: &[(&str, &[&str])], module: &[String]) -> Option<usize> {
    layers
        .iter()
        .enumerate()
        .flat_map(|(i, (_, members))| {
            members
                .iter()
                .map(move |m| (i, m.split("::").collect::<Vec<_>>()))
        })
        .filter(|(_, path)| {
            path.len() <= module.len() && path.iter().zip(module).all(|(a, b)| a == b)
        })
        .max_by_key(|(_, path)| path.len())
        .map(|(i, _)| i)
}

/// Every import in `graph` (core's) against `layers`, inside `projection`: an import of a
/// higher layer, or a module in no layer.
fn arrows_up(graph: &Graph, layers: &[(&str, &[&str])]) -> Vec<String> {
    let below = |module: &[String]| -> Option<Vec<String>> {
        (module.first().map(String::as_str) == Some("projection")).then(|| module[1..].to_vec())
    };
    let mut found = Vec::new();
    for (module, named) in graph {
        let Some(from) = below(module).filter(|m| !m.is_empty()) else {
            continue;
        };
        let Some(from_layer) = layer_of(layers, &from) else {
            found.push(format!("projection::{} is in no layer", from.join("::")));
            continue;
        };
        for target in named.iter().filter_map(|t| below(t)) {
            match layer_of(layers, &target) {
                Some(to_layer) if to_layer <= from_layer => {}
                to_layer => found.push(format!(
                    "projection::{} ({}) imports projection::{} ({}), a higher layer",
                    from.join("::"),
                    layers[from_layer].0,
                    target.join("::"),
                    to_layer.map_or("no layer", |l| layers[l].0)
                )),
            }
        }
    }
    found
}

/// The items `code` names through the projection root's re-exports (`crate::projection::Draft`)
/// rather than through their own module, which the layers would not see (`modules`: the
/// projection's own modules).
fn through_the_root(code: &str, modules: &BTreeSet<String>) -> Vec<String> {
    paths_after(code, "crate::projection::")
        .into_iter()
        .map(|path| path[0].clone())
        .filter(|item| !modules.contains(item))
        .collect()
}

#[test]
fn every_import_inside_the_projection_points_down() {
    let graph = graph(&root().join("core/src"));
    let modules: BTreeSet<String> = graph
        .keys()
        .filter(|m| m.len() > 1 && m[0] == "projection")
        .map(|m| m[1].clone())
        .collect();
    assert!(modules.len() > 10, "read too few projection modules");
    let mut found = arrows_up(&graph, &PROJECTION_LAYERS);
    let mut files = Vec::new();
    rust_files(&root().join("core/src/projection"), &mut files);
    for file in files {
        let items = through_the_root(&code(&std::fs::read_to_string(&file).unwrap()), &modules);
        if !items.is_empty() {
            found.push(format!(
                "{} names {items:?} through the projection root, not their own modules",
                file.strip_prefix(root()).unwrap().display()
            ));
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn the_layer_check_sees_an_arrow_up() {
    let graph = |imports: &[(&str, &str)]| {
        let module = |s: &str| s.split("::").map(str::to_owned).collect::<Vec<_>>();
        let mut graph = Graph::new();
        for (from, to) in imports {
            graph.entry(module(from)).or_default().insert(module(to));
        }
        graph
    };
    let down = [
        ("projection::machine::publish", "projection::draft"),
        ("projection::document", "projection::watermark::value"),
        ("projection::draft", "projection::lease"),
        ("projection::draft", "time"),
    ];
    assert_eq!(
        arrows_up(&graph(&down), &PROJECTION_LAYERS),
        Vec::<String>::new()
    );
    for up in [
        ("projection::document", "projection::watermark"),
        ("projection::elsewhere", "projection::target"),
        ("projection::target", "projection::elsewhere"),
    ] {
        let mut imports = down.to_vec();
        imports.push(up);
        assert_eq!(
            arrows_up(&graph(&imports), &PROJECTION_LAYERS).len(),
            1,
            "{up:?}"
        );
    }
    let modules = BTreeSet::from(["draft".to_owned(), "document".to_owned()]);
    assert_eq!(
        through_the_root(
            "use crate::projection::{document::FORMAT, Draft};",
            &modules
        ),
        ["Draft"]
    );
}

/// Every `pub use` of `code`, each entry as its full path and the name it is exported under
/// (`pub use a::{b::C, d as E, f::{self, G}};` gives `a::b::C` as `C`, `a::d` as `E`, `a::f`
/// as `f`, `a::f::G` as `G`); a glob is exported under `*`.
fn reexports(code: &str) -> Vec<(String, String)> {
    fn expand(prefix: &str, tree: &str, out: &mut Vec<(String, String)>) {
        let tree = tree.trim();
        let (path, group) = match tree.find('{') {
            Some(at) => (&tree[..at], Some(&tree[at + 1..])),
            None => (tree, None),
        };
        let words: Vec<&str> = path.split_whitespace().collect();
        let (path, name) = match words[..] {
            [path, "as", name] => (format!("{prefix}{path}"), Some(name.to_owned())),
            _ => (format!("{prefix}{}", words.concat()), None),
        };
        match group {
            Some(group) => {
                for entry in group_entries(group) {
                    expand(&path, &entry, out);
                }
            }
            None => match path.strip_suffix("::self") {
                Some(module) => {
                    let name = module.rsplit("::").next().unwrap_or_default().to_owned();
                    out.push((module.to_owned(), name));
                }
                None => {
                    let name = name
                        .unwrap_or_else(|| path.rsplit("::").next().unwrap_or_default().to_owned());
                    out.push((path, name));
                }
            },
        }
    }
    let mut out = Vec::new();
    for (at, _) in code.match_indices("pub use ") {
        let rest = &code[at + "pub use ".len()..];
        let statement = &rest[..rest.find(';').unwrap_or(rest.len())];
        expand("", statement, &mut out);
    }
    out
}

/// Names of the facade's surface that stand for two items today, to be emptied by renames
/// (issue 38: one name, one meaning). The items of one name that the facade re-exports from
/// the workspace's crates are all one item each: none.
const FACADE_CLASHES: [&str; 0] = [];

/// What is wrong with the facade whose sources are `files` (path, text): a glob re-export, or
/// a name re-exported from two paths (two items, or one item by two paths — name it by one)
/// unless `allowed`; and an allowed name that no longer clashes.
fn facade_problems(files: &[(String, String)], allowed: &[&str]) -> Vec<String> {
    let mut problems = Vec::new();
    // Each name and the paths it is re-exported from, outside the facade itself (`crate::`
    // names an item the facade already re-exports from elsewhere).
    let mut sources: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (file, text) in files {
        for (path, name) in reexports(&code(text)) {
            if name == "*" {
                problems.push(format!(
                    "{file}: a glob re-export, `{path}`: name its items"
                ));
            } else if !path.starts_with("crate::") && !path.starts_with("self::") {
                sources.entry(name).or_default().insert(path);
            }
        }
    }
    for (name, paths) in &sources {
        let clash = paths.len() > 1;
        if clash && !allowed.contains(&name.as_str()) {
            problems.push(format!("`{name}` names two items in the facade: {paths:?}"));
        }
    }
    for name in allowed {
        if sources.get(*name).is_none_or(|paths| paths.len() < 2) {
            problems.push(format!(
                "`{name}` no longer clashes: remove it from the allow-list"
            ));
        }
    }
    problems
}

#[test]
fn the_facade_names_its_items_one_name_one_item() {
    let mut paths = Vec::new();
    rust_files(&root().join("src"), &mut paths);
    let files: Vec<(String, String)> = paths
        .iter()
        .map(|p| {
            let name = p.strip_prefix(root()).unwrap().display().to_string();
            (name, std::fs::read_to_string(p).unwrap())
        })
        .collect();
    let named = files
        .iter()
        .map(|(_, t)| reexports(&code(t)).len())
        .sum::<usize>();
    assert!(named > 100, "read only {named} re-exports");
    let problems = facade_problems(&files, &FACADE_CLASHES);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_facade_check_sees_a_glob_and_a_clash() {
    let file = |text: &str| vec![("lib.rs".to_owned(), text.to_owned())];
    assert_eq!(
        reexports("pub use a::{b::C, d as E, f::{self, G}};\npub use h::*;"),
        [
            ("a::b::C", "C"),
            ("a::d", "E"),
            ("a::f", "f"),
            ("a::f::G", "G"),
            ("h::*", "*"),
        ]
        .map(|(p, n)| (p.to_owned(), n.to_owned()))
    );
    let fine = "pub mod a { pub use x::lease::{Grant, Lease}; }\npub use crate::a::Grant;";
    assert!(facade_problems(&file(fine), &[]).is_empty());
    assert_eq!(facade_problems(&file("pub use x::lease::*;"), &[]).len(), 1);
    let clash = format!("{fine}\npub mod b {{ pub use y::Grant; }}");
    assert_eq!(facade_problems(&file(&clash), &[]).len(), 1);
    assert!(facade_problems(&file(&clash), &["Grant"]).is_empty());
    assert_eq!(facade_problems(&file(fine), &["Grant"]).len(), 1);
}

/// The workspace's crates (their sources): none imports its own modules in a circle, and one
/// public type name is one type across them.
const NAMED_CRATES: [&str; 10] = [
    "core/src",
    "files/src",
    "project_lock/src",
    "ledger/src",
    "adapters/src",
    "models/src",
    "verification/src",
    "cli/src",
    "bindings/node/src",
    "src",
];

/// Every public type declared in `code` (`pub struct|enum|trait|type Name`, not `pub(crate)`),
/// outside macro bodies' placeholders.
fn public_types(code: &str) -> Vec<String> {
    code.lines()
        .filter_map(|line| {
            let rest = line.trim_start().strip_prefix("pub ")?;
            let rest = ["struct ", "enum ", "trait ", "type "]
                .iter()
                .find_map(|kind| rest.strip_prefix(kind))?;
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            (!name.is_empty()).then_some(name)
        })
        .collect()
}

/// The names declared as public types in more than one place, with where.
fn public_type_clashes(files: &[(String, String)]) -> Vec<String> {
    let mut places: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (file, text) in files {
        for name in public_types(&code(text)) {
            places.entry(name).or_default().push(file.clone());
        }
    }
    places
        .into_iter()
        .filter(|(_, files)| files.len() > 1)
        .map(|(name, files)| format!("`{name}` is declared in {}", files.join(", ")))
        .collect()
}

#[test]
fn one_public_type_name_is_one_type_across_the_workspace() {
    let mut files = Vec::new();
    for dir in NAMED_CRATES {
        let mut paths = Vec::new();
        rust_files(&root().join(dir), &mut paths);
        for p in paths {
            let name = p.strip_prefix(root()).unwrap().display().to_string();
            files.push((name, std::fs::read_to_string(&p).unwrap()));
        }
    }
    let declared: usize = files
        .iter()
        .map(|(_, t)| public_types(&code(t)).len())
        .sum();
    assert!(declared > 200, "read only {declared} public types");
    let clashes = public_type_clashes(&files);
    assert!(clashes.is_empty(), "{}", clashes.join("\n"));
}

#[test]
fn the_name_check_sees_two_types_of_one_name() {
    let files = [
        (
            "a.rs",
            "pub struct Grant {\n}\npub(crate) enum Stage {}\npub type Result<T> = T;",
        ),
        (
            "b.rs",
            "pub enum Grant {}\n    pub trait Stage {}\n/// pub struct Result",
        ),
    ]
    .map(|(f, t)| (f.to_owned(), t.to_owned()));
    assert_eq!(
        public_type_clashes(&files),
        ["`Grant` is declared in a.rs, b.rs"]
    );
}

/// The variants of `solewriter_core::ErrorKind` (no other `ErrorKind` of the workspace's
/// dependencies, `std::io`'s or clap's, has a variant of these names).
const KINDS: [&str; 5] = [
    "Input",
    "Contention",
    "LostAuthority",
    "Environment",
    "PartialSuccess",
];

/// The places outside `core` that write a kind, each with how many times it does: the kind
/// of an executor's own error type (its own failures, and what the core's outcomes become
/// there — which the executors' tests hold to the core's kind) and the CLI's exit-code table,
/// which reads kinds. A new place, or a new kind written in one of these, fails the check:
/// decide it in the core, beside the outcome, or list it here with its reason. (The Node
/// addon's codes table declares each code's kind without the `ErrorKind::` prefix, in
/// `bindings/node/src/failure.rs`: its own codes, held to the core's kinds by its tests.)
const KIND_WRITERS: [(&str, usize); 7] = [
    // The file effects' error (`FileError`): busy, not durable, the file system.
    ("files/src/error.rs", 3),
    // The project lock's error (`LockError`).
    ("project_lock/src/lib.rs", 3),
    // The ledger's error (`LedgerError`).
    ("ledger/src/lib.rs", 5),
    // The store's error (`solewriter::Error`): SQLite, the store's rows, the adapter's own.
    ("adapters/src/error.rs", 4),
    // The write guard's error (`GuardError`).
    ("adapters/src/subtree/write_guard.rs", 3),
    // The model's own fault (`ModelFault`).
    ("models/src/executor.rs", 3),
    // The CLI's exit codes, one table keyed by the kind (`class_of_kind`).
    ("cli/src/error.rs", 4),
];

/// How many times `text` (its code before its test module) writes a variant of `ErrorKind`,
/// and whether it brings the variants into scope unprefixed (`ErrorKind::*`, `ErrorKind::{`).
fn kinds_written(text: &str) -> (usize, bool) {
    let production = text.split("#[cfg(test)]").next().unwrap_or_default();
    let code = code(production);
    let written = code
        .match_indices("ErrorKind::")
        .filter(|(at, _)| {
            let rest = &code[at + "ErrorKind::".len()..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            KINDS.contains(&name.as_str())
        })
        .count();
    let unprefixed = code.contains("ErrorKind::*") || code.contains("ErrorKind::{");
    (written, unprefixed)
}

#[test]
fn no_code_outside_core_decides_a_kind_but_the_listed_places() {
    let mut found = Vec::new();
    for krate in NAMED_CRATES.iter().filter(|krate| **krate != "core/src") {
        let mut files = Vec::new();
        rust_files(&root().join(krate), &mut files);
        for path in files {
            let (written, unprefixed) = kinds_written(&std::fs::read_to_string(&path).unwrap());
            let name = path
                .strip_prefix(root())
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            assert!(
                !unprefixed,
                "{name}: brings the kinds into scope unprefixed"
            );
            if written > 0 {
                found.push((name, written));
            }
        }
    }
    found.sort();
    let mut listed: Vec<(String, usize)> = KIND_WRITERS
        .iter()
        .map(|(name, n)| ((*name).to_owned(), *n))
        .collect();
    listed.sort();
    assert_eq!(
        found, listed,
        "the places outside core that write an ErrorKind (file, count) are not the listed ones: \
         decide an outcome's kind in core, beside the outcome"
    );
}

#[test]
fn the_kind_check_sees_a_kind_decided() {
    let planted = "match failure {\n    Failure::RowChanged => ErrorKind::Environment,\n    \
                   // ErrorKind::Input in a comment\n    _ => e.kind(),\n}";
    assert_eq!(kinds_written(planted), (1, false));
    assert_eq!(kinds_written("use solewriter::ErrorKind::*;"), (0, true));
    assert_eq!(
        kinds_written("Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}"),
        (0, false)
    );
    assert_eq!(
        kinds_written(
            "fn f() {}\n#[cfg(test)]\nmod tests { const K: ErrorKind = ErrorKind::Input; }"
        ),
        (0, false)
    );
}
