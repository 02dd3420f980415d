//! Scenario fixtures shared by the model checks and the conformance test: one target (a second
//! for the batches), two registered channels owned by two producers, deterministic tokens, a
//! fixed TTL.

use solewriter_core::config::LeaseTtl;
use solewriter_core::names::InstanceDigest;
use solewriter_core::projection::channel::{
    ChannelName, ChannelRegistry, ChannelSpec, ProducerId, Submission,
};
use solewriter_core::projection::target::{TargetId, TargetTuple};
use solewriter_core::time::Millis;
use solewriter_core::token::HolderToken;

/// Lease TTL of every scenario, in ms.
pub const TTL_MS: u64 = 100;
/// Clock reading at the start of every scenario.
pub const START: Millis = Millis(1_000);
/// The two channels: (channel, owning producer, envelope schema).
pub const CHANNELS: [(&str, &str, &str); 2] = [
    ("computed-route", "router", "computed-route.v1"),
    ("lifecycle-frontier", "frontier", "lifecycle-frontier.v1"),
];

/// The second target of the batch scenarios: `tuple(BATCH_PARTNER)`, on another of the model's
/// target-lock stripes than `tuple(0)` (a batch of two targets on one stripe would wait for its
/// own lock; the model refuses it).
pub const BATCH_PARTNER: usize = 1;

/// The lease TTL.
pub fn ttl() -> LeaseTtl {
    LeaseTtl::from_millis(Some(TTL_MS)).expect("non-zero")
}

/// The registry of the two channels, 4 KiB each.
pub fn registry() -> ChannelRegistry {
    ChannelRegistry::new(CHANNELS.map(|(name, owner, schema)| ChannelSpec {
        name: ChannelName::parse(name).expect("valid"),
        owner: ProducerId::parse(owner).expect("valid"),
        envelope_schema: schema.into(),
        max_envelope_bytes: 4096,
        watermark: solewriter_core::projection::watermark::WatermarkKind::Integer,
        envelope_json_schema: None,
    }))
    .expect("valid registry")
}

/// The `n`-th attested tuple.
pub fn tuple(n: usize) -> TargetTuple {
    let agent = format!("agent-{n}");
    TargetTuple::new([
        "1",
        "hook-projection",
        &agent,
        "claude-code",
        "inst",
        "ws",
        "live-lane",
    ])
    .expect("valid tuple")
}

/// A holder instance digest.
pub fn holder(n: usize) -> InstanceDigest {
    InstanceDigest::parse(&format!("holder-{n}")).expect("valid")
}

/// A deterministic token.
pub fn token(n: u8) -> HolderToken {
    HolderToken::from_bytes([n; 32])
}

/// The producer owning channel `c` (0 or 1).
pub fn producer(c: usize) -> ProducerId {
    ProducerId::parse(CHANNELS[c].1).expect("valid")
}

/// A submission on channel `c` of `target` at `watermark`, with `body` in the envelope.
pub fn submission(
    target: &TargetId,
    c: usize,
    watermark: u64,
    body: &str,
    captured_at: Millis,
) -> Submission {
    let (channel, _, schema) = CHANNELS[c];
    Submission {
        target_id: target.clone(),
        channel: ChannelName::parse(channel).expect("valid"),
        source_watermark: watermark.into(),
        envelope_json: format!(r#"{{"schema":"{schema}","notAuthority":true,"body":"{body}"}}"#),
        captured_at,
        expires_at: captured_at.plus_ms(10 * TTL_MS),
    }
}

/// The lease of a setup grant (a live grant there is a broken setup).
pub fn acquired(
    outcome: solewriter_models::runs::ModelAcquire,
) -> solewriter_models::runs::ModelLease {
    match outcome {
        solewriter_models::runs::ModelAcquire::Acquired(lease) => lease,
        solewriter_models::runs::ModelAcquire::Held(h) => panic!("setup grant refused: {h:?}"),
    }
}

/// The start of every takeover scenario: `tuple(0)` admitted in `world`, producer 0's first
/// envelope submitted, and holder 9's grant published at epoch 1. Its target, and that lease.
pub fn published_once<S: solewriter_models::shim::Shim>(
    world: &solewriter_models::World<S>,
) -> (TargetId, solewriter_models::runs::ModelLease) {
    published(world, 0)
}

/// [`published_once`] for `tuple(n)`.
pub fn published<S: solewriter_models::shim::Shim>(
    world: &solewriter_models::World<S>,
    n: usize,
) -> (TargetId, solewriter_models::runs::ModelLease) {
    let target = world.admit(&tuple(n));
    world
        .submit(&producer(0), &submission(&target, 0, 1, "one", START))
        .expect("admitted");
    let z = acquired(
        world
            .acquire(&target, &holder(9), token(9))
            .expect("admitted"),
    );
    assert!(matches!(
        world.publish(&z, None),
        solewriter_models::runs::PublishOutcome::Published { epoch: 1, .. }
    ));
    (target, z)
}
