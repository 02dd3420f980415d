//! Lock spans checked where they happen, on the running adapter: from the opening of a
//! publication's transaction (so through its revalidation read) to its release (so through the
//! rename and the sweep), neither the target's kernel lock nor SQLite's write lock is let go;
//! and at every step outside the transaction (the draft composed, its temp file written, the
//! locks let go after the commit, the directory fsynced) NEITHER is held — so a holder frozen
//! there stops nobody. Observed at the system-call layer, not between effects. The test re-runs
//! this test binary's publishing test under the shared syscall-trace helper
//! (`scripts/syscall_trace.py`, strace) with `--hold` and `--free`: the helper follows the
//! `flock` on the target's lock file and the `fcntl` write lock on byte 120 of the `-shm` file
//! (what `BEGIN IMMEDIATE` takes in WAL mode) through every thread, and fails when either is
//! released (unlocked, or its descriptor closed) between the marks `reached transaction-open`
//! and `reached released` that the publication's probe writes, or held at a `--free` mark.
//! (The Node path has the same check: `bindings/node/test/lock_spans.test.js`.)

mod support;

use solewriter_adapters::projection::publication::{PublishProbe, PublishStep};
use solewriter_core::projection::target::TargetId;
use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::process::Command;
use support::{expect_acquired, holder, route, router, tuple, Fixture};

/// Writes `@@mark reached <step>` to /dev/null at every step: the helper reads the marks from
/// the trace.
struct Marks(File);

impl PublishProbe for Marks {
    fn reached(&self, step: PublishStep, _: &TargetId, _: u64) {
        // One write: the helper reads a mark from one `write` call.
        let mark = format!("@@mark reached {}\n", step.name());
        let _ = (&self.0).write_all(mark.as_bytes());
    }
}

/// Publishes twice, through a grant and in one shot, marking every step. Traced by the test
/// below; run alone, an ordinary publication test.
#[test]
fn marked_publications_publish() {
    let f = Fixture::new();
    let store = f.open();
    let target = store.admit_target(&tuple("a")).unwrap();
    store
        .submit(&router(), &route(&target, 1, "first"))
        .unwrap();
    let marks = Marks(File::options().write(true).open("/dev/null").unwrap());
    let lease = expect_acquired(store.acquire(&target, &holder("a")).unwrap());
    assert_eq!(lease.publish_observed(&marks).unwrap().fencing_epoch, 1);
    store
        .submit(&router(), &route(&target, 2, "second"))
        .unwrap();
    let published = store
        .publish_now_observed(&target, &holder("b"), &marks)
        .unwrap();
    assert!(matches!(
        published,
        solewriter_adapters::projection::publication::PublishedNow::Published(p) if p.fencing_epoch == 2
    ));
}

#[test]
fn from_the_transaction_to_the_release_no_lock_is_let_go_and_outside_it_none_is_held() {
    let helper = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/syscall_trace.py");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("events.json");
    let status = Command::new("python3")
        .arg(&helper)
        .arg("--out")
        .arg(&out)
        .args(["--hold", "reached transaction-open", "reached released"])
        .args([
            "--free",
            "reached composed",
            "--free",
            "reached temp-written",
        ])
        .args([
            "--free",
            "reached unlocked",
            "--free",
            "reached directory-synced",
        ])
        .arg("--")
        .arg(std::env::current_exe().unwrap())
        .args(["--exact", "marked_publications_publish", "--test-threads=1"])
        .status()
        .expect("python3 runs the syscall-trace helper");
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&out).expect("the helper wrote its report")).unwrap();
    let spans = report["spans"].as_array().expect("spans checked");
    assert_eq!(
        spans.len(),
        10,
        "both publications traced, the span and the four free marks of each: {spans:?}"
    );
    for span in spans {
        let held = span["locks"] != "none";
        assert_eq!(span["held_at_start"], held, "{span}");
        assert_eq!(span["violations"], serde_json::json!([]), "{span}");
    }
    assert!(
        status.success(),
        "the helper found a broken span or the publication failed: {status}"
    );
}
