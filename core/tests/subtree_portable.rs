//! The subtree write guard's core stays buildable for a heap without an operating system (a
//! browser worker, through WebAssembly): `core/src/subtree` reaches no file system, network,
//! process, environment, clock, thread or lock of `std`, and no crate that would. These
//! machines have no `wasm32` target to build it for, so this reads the sources instead: every
//! path through `std` they name must be one of the portable modules below.

use std::path::Path;

/// The `std` modules the guard's core may use: data structures and formatting only.
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

/// Crates whose use would tie the core to an operating system.
const FORBIDDEN_CRATES: [&str; 6] = ["libc", "rustix", "getrandom", "tokio", "tracing", "rand"];

/// Every `std::<module>` a line of code (not a comment) names, including grouped imports
/// (`use std::{fmt, collections::HashSet}`).
fn std_modules(code: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (at, _) in code.match_indices("std::") {
        let rest = &code[at + "std::".len()..];
        let names: Vec<&str> = match rest.strip_prefix('{') {
            Some(group) => group[..group.find('}').unwrap_or(group.len())]
                .split(',')
                .map(str::trim)
                .collect(),
            None => vec![rest],
        };
        for name in names {
            let module: String = name
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !module.is_empty() {
                found.push(module);
            }
        }
    }
    found
}

fn code_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim_start().starts_with("//"))
        .map(|(n, line)| (n + 1, line))
}

/// What in `text` a portable core must not use.
fn violations(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (n, line) in code_lines(text) {
        for module in std_modules(line) {
            if !PORTABLE.contains(&module.as_str()) {
                found.push(format!("line {n}: std::{module}"));
            }
        }
        for krate in FORBIDDEN_CRATES {
            if line.contains(&format!("{krate}::"))
                || line.contains(&format!("extern crate {krate}"))
            {
                found.push(format!("line {n}: {krate}"));
            }
        }
    }
    found
}

#[test]
fn the_subtree_core_uses_no_file_system_clock_or_threads() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/subtree");
    let mut files = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "rs") {
            files += 1;
            let found = violations(&std::fs::read_to_string(&path).unwrap());
            assert!(found.is_empty(), "{}: {found:?}", path.display());
        }
    }
    assert!(files >= 6, "read {files} files of {}", dir.display());
}

#[test]
fn the_check_sees_what_it_forbids() {
    for bad in [
        "use std::fs::File;",
        "use std::{collections::HashSet, time::Instant};",
        "let now = std::time::SystemTime::now();",
        "std::thread::spawn(|| ());",
        "use std::sync::Mutex;",
        "let t = libc::time(None);",
    ] {
        assert!(!violations(bad).is_empty(), "{bad}");
    }
    for fine in [
        "use std::collections::{HashSet, VecDeque};",
        "use std::fmt;",
        "// std::fs is only named in a comment",
    ] {
        assert!(violations(fine).is_empty(), "{fine}");
    }
}
