//! The fsyncs of each store operation on the Rust path, pinned at the system-call layer: the
//! test re-runs this test binary's `marked_operations` under the shared syscall-trace helper
//! (`scripts/syscall_trace.py --count-syncs`, strace), which counts every fsync, fdatasync,
//! sync_file_range, syncfs and sync between the marks `NAME:begin` and `NAME:end` that
//! `marked_operations` writes around each operation, per file kind (the store's WAL, its main
//! database file, a temp sibling of `current.json`, a target directory, ...). The counts are
//! asserted exactly, so a change that adds (or drops) a durability call fails here and has to
//! update the table in BENCHMARKS.md with it. The Node path has the same check:
//! `bindings/node/test/fsync_counts.test.js`.

mod support;

use serde_json::{json, Value};
use solewriter_adapters::projection::lease::ReleaseOutcome;
use solewriter_adapters::projection::publication::PublishedNow;
use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::process::Command;
use support::{expect_acquired, holder, route, router, tuple, Fixture};

/// How the helper names the files the operations sync (first match wins). A sync of any
/// other file is reported as `other:PATH` and fails the comparison.
const KINDS: [&str; 7] = [
    "wal=\\.sqlite-wal$",
    "journal=\\.sqlite-journal$",
    "database=\\.sqlite$",
    "temp=/\\.current\\.json\\.tmp-[0-9a-f]+$",
    "target-dir=/hook-projections/[0-9a-f]{64}$",
    "projections-dir=/hook-projections$",
    "runtime-root=/runtime$",
];

/// Rounds of the steady-state operations: each round must cost the same.
const ROUNDS: u64 = 2;

/// Writes `@@mark NAME:begin` / `@@mark NAME:end` around `op`, each in one write (the helper
/// reads a mark from one `write` call).
fn marked<T>(marks: &File, name: &str, op: impl FnOnce() -> T) -> T {
    let mut w = marks;
    w.write_all(format!("@@mark {name}:begin\n").as_bytes())
        .unwrap();
    let value = op();
    w.write_all(format!("@@mark {name}:end\n").as_bytes())
        .unwrap();
    value
}

/// The operations, each between its marks: the store's first publication (which also makes
/// the directory chain durable) and the first of a second target, then `ROUNDS` rounds of
/// submission, a grant (`acquire`), its publication (`publish`, which ends with the
/// conditional release), a grant released unpublished (`release`), a one-shot publication
/// (`publish_now`) and a batch of both targets (`publish_many`). Traced by the test below; run alone, an ordinary test of these operations.
#[test]
fn marked_operations() {
    let f = Fixture::new();
    let store = f.open();
    let target = store.admit_target(&tuple("a")).unwrap();
    store.submit(&router(), &route(&target, 1, "0")).unwrap();
    let marks = File::options().write(true).open("/dev/null").unwrap();
    let who = holder("a");
    let published = |now: PublishedNow| assert!(matches!(now, PublishedNow::Published(_)));
    published(marked(&marks, "first-publish_now", || {
        store.publish_now(&target, &who).unwrap()
    }));
    let other = store.admit_target(&tuple("b")).unwrap();
    store.submit(&router(), &route(&other, 1, "0")).unwrap();
    published(marked(&marks, "new-target-publish_now", || {
        store.publish_now(&other, &who).unwrap()
    }));
    for round in 0..ROUNDS {
        let watermark = 2 + round;
        marked(&marks, "submit", || {
            store
                .submit(
                    &router(),
                    &route(&target, watermark, &watermark.to_string()),
                )
                .unwrap()
        });
        let lease = marked(&marks, "acquire", || {
            expect_acquired(store.acquire(&target, &who).unwrap())
        });
        marked(&marks, "publish", || lease.publish().unwrap());
        let lease = expect_acquired(store.acquire(&target, &who).unwrap());
        let released = marked(&marks, "release", || lease.release().unwrap());
        assert!(matches!(released, ReleaseOutcome::Released));
        published(marked(&marks, "publish_now", || {
            store.publish_now(&target, &who).unwrap()
        }));
        let both = [target.clone(), other.clone()];
        let answers = marked(&marks, "publish_many", || {
            store.publish_many(&both, &who).unwrap()
        });
        for (_, answer) in answers {
            published(answer.unwrap());
        }
    }
    let doc = std::fs::read_to_string(f.current_path(&target)).unwrap();
    assert!(doc.contains(&format!("\"{}\"", ROUNDS + 1)), "{doc}");
}

/// The expected number of durability calls per file kind, per region name (fsync and
/// fdatasync alike: which one SQLite uses for its WAL depends on how it was built).
fn expected(name: &str) -> Value {
    match name {
        // The commit of a submission, of a grant, of a release: the WAL, once.
        "submit" | "acquire" | "release" => json!({"wal": 1}),
        // The temp file, the one commit (grant, publication and release in one transaction for
        // `publish_now`; the publication with its conditional release for `publish`), then the
        // target directory.
        "publish" | "publish_now" => json!({"temp": 1, "wal": 1, "target-dir": 1}),
        // A batch of two targets: each its temp file and its directory, ONE commit.
        "publish_many" => json!({"temp": 2, "wal": 1, "target-dir": 2}),
        // The store's first publication also creates `hook-projections/` and the target
        // directory, and fsyncs the parent of each (the runtime root, `hook-projections/`).
        "first-publish_now" => json!({
            "temp": 1,
            "wal": 1,
            "target-dir": 1,
            "projections-dir": 1,
            "runtime-root": 1,
        }),
        // The first publication of another target: its directory is new, `hook-projections/`
        // (its parent) is fsynced; the rest of the chain is known durable.
        "new-target-publish_now" => json!({
            "temp": 1,
            "wal": 1,
            "target-dir": 1,
            "projections-dir": 1,
        }),
        other => panic!("no expectation for region {other}"),
    }
}

/// A region's calls per kind, whatever the call: `{kind: count}`.
fn per_kind(syncs: &Value) -> Value {
    let kinds = syncs.as_object().expect("calls per kind");
    Value::Object(
        kinds
            .iter()
            .map(|(kind, calls)| {
                let total: u64 = calls
                    .as_object()
                    .expect("counts per call")
                    .values()
                    .map(|n| n.as_u64().expect("a count"))
                    .sum();
                (kind.clone(), json!(total))
            })
            .collect(),
    )
}

#[test]
fn every_operation_syncs_exactly_the_pinned_files() {
    let helper = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/syscall_trace.py");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("events.json");
    let mut command = Command::new("python3");
    command
        .arg(&helper)
        .arg("--out")
        .arg(&out)
        .arg("--count-syncs");
    for kind in KINDS {
        command.arg("--kind").arg(kind);
    }
    let status = command
        .arg("--")
        .arg(std::env::current_exe().unwrap())
        .args(["--exact", "marked_operations", "--test-threads=1"])
        .status()
        .expect("python3 runs the syscall-trace helper");
    assert!(
        status.success(),
        "the helper could not trace (strace missing or ptrace refused: exit 2), a region was \
         never closed (3), or the operations failed: {status}"
    );
    let report: Value =
        serde_json::from_slice(&std::fs::read(&out).expect("the helper wrote its report")).unwrap();
    let regions = report["regions"].as_array().expect("regions counted");
    let names: Vec<&str> = regions
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    let mut wanted = vec!["first-publish_now", "new-target-publish_now"];
    for _ in 0..ROUNDS {
        wanted.extend([
            "submit",
            "acquire",
            "publish",
            "release",
            "publish_now",
            "publish_many",
        ]);
    }
    assert_eq!(names, wanted, "every operation traced, in order");
    for region in regions {
        let name = region["name"].as_str().unwrap();
        assert_eq!(
            per_kind(&region["syncs"]),
            expected(name),
            "durability calls of {name} per file kind (the calls: {})",
            region["syncs"]
        );
    }
    // The table of BENCHMARKS.md (`-- --nocapture` shows it).
    for region in regions {
        println!("{}: {}", region["name"], region["syncs"]);
    }
}
