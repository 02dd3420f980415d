//! Quickstart: initialize a store in a temp directory, admit a target, submit two channels,
//! acquire the lease, publish `current.json` and print the document.
//!
//! Run with `cargo run --example quickstart`.

use solewriter::{
    read_projection, Acquisition, ChannelName, ChannelRegistry, ChannelSpec, Clock, InstanceDigest,
    ProducerId, ProjectionStore, RuntimeRoot, StoreOptions, Submission, SystemClock, TargetTuple,
    TimingConfig,
};
use std::sync::Arc;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let scratch = tempfile::tempdir()?; // removed when it goes out of scope, also on error
    let dir = scratch.path();
    std::fs::create_dir(dir.join("runtime"))?;

    // Timing comes from the host's configuration: there are no defaults.
    let timing = TimingConfig::from_json(r#"{"leaseTtlMs": 5000, "busyTimeoutMs": 1000}"#)?;
    let registry = ChannelRegistry::new([
        ChannelSpec {
            name: ChannelName::parse("computed-route")?,
            owner: ProducerId::parse("router")?,
            envelope_schema: "computed-route.v1".into(),
            max_envelope_bytes: 64 * 1024,
            watermark: solewriter::projection::WatermarkKind::Integer,
            envelope_json_schema: None,
        },
        ChannelSpec {
            name: ChannelName::parse("lifecycle-frontier")?,
            owner: ProducerId::parse("frontier")?,
            envelope_schema: "lifecycle-frontier.v1".into(),
            max_envelope_bytes: 64 * 1024,
            watermark: solewriter::projection::WatermarkKind::Integer,
            envelope_json_schema: None,
        },
    ])?;
    let db_path = dir.join("store.sqlite");
    ProjectionStore::initialize(&db_path, &timing)?;
    let options = StoreOptions {
        db_path,
        runtime_root: RuntimeRoot::new(dir.join("runtime")),
        timing,
        registry,
        clock: Arc::new(SystemClock),
    };
    let store = ProjectionStore::open(&options)?;

    // The target id is derived from the attested tuple; nobody chooses a path.
    let tuple = TargetTuple::from_json(
        r#"{"schemaVersion":"1","capability":"hook-projection","agentId":"agent-7","harnessType":"claude-code","instanceKeyDigest":"inst-1","workspaceKeyDigest":"ws-1","projectionKind":"live-lane"}"#,
    )?;
    let target = store.admit_target(&tuple)?;

    let now = SystemClock.now();
    for (producer, channel, schema) in [
        ("router", "computed-route", "computed-route.v1"),
        ("frontier", "lifecycle-frontier", "lifecycle-frontier.v1"),
    ] {
        let outcome = store.submit(
            &ProducerId::parse(producer)?,
            &Submission {
                target_id: target.clone(),
                channel: ChannelName::parse(channel)?,
                source_watermark: 1.into(),
                envelope_json: format!(r#"{{"schema":"{schema}","notAuthority":true,"items":[]}}"#),
                captured_at: now,
                expires_at: now.plus_ms(60_000),
            },
        )?;
        println!("submitted {channel}: {outcome:?}");
    }

    match store.acquire(&target, &InstanceDigest::parse("quickstart")?)? {
        Acquisition::Acquired(lease) => {
            println!("acquired epoch {}", lease.epoch());
            let published = lease.publish()?;
            println!(
                "published {} bytes to {}",
                published.bytes,
                published.path.display()
            );
        }
        Acquisition::Held(held) => println!("held by another instance: {held:?}"),
    }

    let doc = read_projection(&options.runtime_root, &target)?;
    println!("{}", serde_json::to_string_pretty(&doc)?);
    Ok(())
}
