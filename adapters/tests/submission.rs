//! Producer submissions against the real store: every admission outcome, every rejection,
//! and "a rejected submission writes nothing".

mod support;

use solewriter_adapters::projection::submission::SubmitOutcome;
use solewriter_adapters::Error;
use solewriter_core::projection::channel::{
    ChannelName, ChannelRecord, DegradedReason, ProducerId, Submission,
};
use solewriter_core::projection::target::TargetId;
use solewriter_core::projection::watermark::SubmissionRejected;
use solewriter_core::projection::StatusReason;
use support::*;

fn rows(
    store: &solewriter_adapters::projection::store::ProjectionStore,
    target: &TargetId,
) -> Vec<ChannelRecord> {
    store.channel_rows(target).unwrap()
}

#[test]
fn admission_outcomes() {
    let f = Fixture::new();
    let store = f.open();
    let target = store.admit_target(&tuple("a")).unwrap();
    assert_eq!(
        store.submit(&router(), &route(&target, 5, "a")).unwrap(),
        SubmitOutcome::Inserted
    );
    f.clock.advance(10);
    let after_insert = rows(&store, &target);
    assert_eq!(
        store.submit(&router(), &route(&target, 5, "a")).unwrap(),
        SubmitOutcome::Replayed
    );
    assert_eq!(
        rows(&store, &target),
        after_insert,
        "replay writes nothing, not even updated_at"
    );
    f.clock.advance(10);
    assert_eq!(
        store
            .submit(&router(), &route(&target, 5, "different"))
            .unwrap(),
        SubmitOutcome::Degraded
    );
    let degraded = rows(&store, &target);
    assert_eq!(
        degraded[0].envelope_json, after_insert[0].envelope_json,
        "stored envelope kept"
    );
    assert_eq!(
        degraded[0].degraded_reason,
        Some(DegradedReason::SourceConflict)
    );
    assert_eq!(degraded[0].updated_at.0, START.0 + 20);
    f.clock.advance(10);
    assert_eq!(
        store.submit(&router(), &route(&target, 6, "b")).unwrap(),
        SubmitOutcome::Advanced
    );
    let advanced = rows(&store, &target);
    assert_eq!(
        (
            advanced[0].source_watermark.clone(),
            advanced[0].degraded_reason
        ),
        (6.into(), None)
    );
    assert_eq!(
        advanced[0].envelope_json,
        route(&target, 6, "b").envelope_json
    );
    // The degradation is published.
    store
        .submit(&router(), &route(&target, 6, "conflict"))
        .unwrap();
    let lease = expect_acquired(store.acquire(&target, &holder("p")).unwrap());
    lease.publish().unwrap();
    let doc =
        solewriter_adapters::projection::runtime::read_projection(&f.options.runtime_root, &target)
            .unwrap();
    assert_eq!(doc.channels[0].reason, Some(StatusReason::SourceConflict));
}

fn assert_rejected_without_write(
    f: &Fixture,
    target: &TargetId,
    producer: &ProducerId,
    submission: &Submission,
    expected: fn(&SubmissionRejected) -> bool,
) {
    let store = f.open();
    let before = rows(&store, target);
    f.clock.advance(7);
    match store.submit(producer, submission) {
        Err(Error::Rejected(r)) => assert!(expected(&r), "unexpected rejection {r}"),
        other => panic!("expected a rejection, got {other:?}"),
    }
    assert_eq!(
        rows(&store, target),
        before,
        "a rejected submission wrote something"
    );
}

#[test]
fn rejections_are_typed_and_write_nothing() {
    let f = Fixture::new();
    let store = f.open();
    let target = store.admit_target(&tuple("a")).unwrap();
    store.submit(&router(), &route(&target, 5, "a")).unwrap();

    let mut unknown = route(&target, 6, "x");
    unknown.channel = ChannelName::parse("not-registered").unwrap();
    assert_rejected_without_write(&f, &target, &router(), &unknown, |r| {
        matches!(r, SubmissionRejected::UnknownChannel(_))
    });

    let frontier = ProducerId::parse("frontier").unwrap();
    assert_rejected_without_write(&f, &target, &frontier, &route(&target, 6, "x"), |r| {
        matches!(r, SubmissionRejected::NotChannelOwner { .. })
    });

    let unadmitted = tuple("never-admitted").target_id();
    assert_rejected_without_write(
        &f,
        &unadmitted,
        &router(),
        &route(&unadmitted, 1, "x"),
        |r| matches!(r, SubmissionRejected::TargetNotAdmitted(_)),
    );

    let mut bad_schema = route(&target, 6, "x");
    bad_schema.envelope_json = r#"{"schema":"lifecycle-frontier.v1","notAuthority":true}"#.into();
    assert_rejected_without_write(&f, &target, &router(), &bad_schema, |r| {
        matches!(r, SubmissionRejected::SchemaInvalid(_))
    });

    let oversized = route(&target, 6, &"x".repeat(64 * 1024));
    assert_rejected_without_write(&f, &target, &router(), &oversized, |r| {
        matches!(r, SubmissionRejected::Oversized { .. })
    });

    assert_rejected_without_write(&f, &target, &router(), &route(&target, 4, "a"), |r| {
        matches!(
            r,
            SubmissionRejected::Regressed { submitted, stored }
                if *submitted == 4.into() && *stored == 5.into()
        )
    });
    assert_eq!(
        rows(&store, &target)[0].updated_at,
        START,
        "updated_at unchanged by every rejection"
    );
}

/// A producer names a channel and a target id; nothing it submits can choose a path. Even an
/// envelope full of path syntax is published only at the derived path.
#[test]
fn submissions_cannot_steer_the_output_path() {
    let f = Fixture::new();
    let store = f.open();
    let target = store.admit_target(&tuple("a")).unwrap();
    let mut hostile = route(&target, 1, "../../../../etc/passwd");
    hostile.envelope_json = format!(
        r#"{{"schema":"computed-route.v1","notAuthority":true,"path":"../../escape.json","targetId":"../x","outputPath":"{}"}}"#,
        f.dir.path().join("escape.json").display()
    );
    store.submit(&router(), &hostile).unwrap();
    expect_acquired(store.acquire(&target, &holder("p")).unwrap())
        .publish()
        .unwrap();
    let mut written: Vec<String> = walk(f.options.runtime_root.path());
    written.sort();
    // The document and the target's lock file (beside its directory) are all.
    assert_eq!(
        written,
        [
            format!("hook-projections/{target}.lock"),
            format!("hook-projections/{target}/current.json")
        ]
    );
    assert!(!f.dir.path().join("escape.json").exists());
}

fn walk(root: &std::path::Path) -> Vec<String> {
    let mut out = vec![];
    let mut stack = vec![root.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.push(path.strip_prefix(root).unwrap().display().to_string());
            }
        }
    }
    out
}
