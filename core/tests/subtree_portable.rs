//! The subtree write guard's code stays portable to a heap without an operating system (a
//! browser worker, through WebAssembly): `core/src/subtree` reaches no file system, network,
//! process, environment, clock, thread or lock of `std`, and no crate that would. These
//! machines have no `wasm32` target to build it for, so this reads the sources instead: every
//! path through `std` they name must be one of the portable modules below. It checks this
//! module's own code, not the crate's dependencies (see the README, "A browser host").

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

/// The top-level names of a `use` group's body (`{fmt, collections::{HashSet, VecDeque}}` →
/// `fmt`, `collections`), across lines and nested groups.
fn group_heads(group: &str) -> Vec<String> {
    let mut heads = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                heads.push(group[start..i].to_owned());
                break;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                heads.push(group[start..i].to_owned());
                start = i + 1;
            }
            _ => {}
        }
    }
    heads
}

/// Every `std::<module>` the code names, including grouped imports over several lines
/// (`use std::{fmt, time::Instant}`).
fn std_modules(code: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (at, _) in code.match_indices("std::") {
        let rest = &code[at + "std::".len()..];
        let names = match rest.strip_prefix('{') {
            Some(group) => group_heads(group),
            None => vec![rest.to_owned()],
        };
        for name in names {
            let module: String = name
                .trim_start()
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

/// The text without its comment lines (`//`, `///`, `//!`).
fn code(text: &str) -> String {
    text.lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// What in `text` a portable core must not use.
fn violations(text: &str) -> Vec<String> {
    let code = code(text);
    let mut found: Vec<String> = std_modules(&code)
        .into_iter()
        .filter(|module| !PORTABLE.contains(&module.as_str()))
        .map(|module| format!("std::{module}"))
        .collect();
    for krate in FORBIDDEN_CRATES {
        if code.contains(&format!("{krate}::")) || code.contains(&format!("extern crate {krate}")) {
            found.push(krate.to_owned());
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
        "use std::{\n    collections::HashSet,\n    fs,\n};",
        "use std::{collections::{HashSet, VecDeque}, net::TcpStream};",
    ] {
        assert!(!violations(bad).is_empty(), "{bad}");
    }
    for fine in [
        "use std::collections::{HashSet, VecDeque};",
        "use std::fmt;",
        "use std::{collections::{HashSet, VecDeque}, fmt};",
        "// std::fs is only named in a comment",
    ] {
        assert!(violations(fine).is_empty(), "{fine}");
    }
}
