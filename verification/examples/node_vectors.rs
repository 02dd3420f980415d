//! Conformance vectors for the Node binding: seeded random sequences of admit / submit /
//! acquire / publish / publishNow / release / clock moves (the vocabulary of
//! `tests/conformance.rs`), run on the reference model, printed as JSON with the expected
//! outcome, lease rows, channel rows and `current.json` text after every step. The Node test
//! (`bindings/node/test/conformance.test.js`) replays each sequence through the JS executor on
//! better-sqlite3 and compares everything. (The model agrees with the SQLite adapter on the
//! same vocabulary: `tests/conformance.rs`.)
//!
//! ```text
//! cargo run -p solewriter-verification --example node_vectors -- SEED CASES
//! ```

use serde_json::{json, Value};
use solewriter_core::projection::lease::{Fenced, LeaseRecord};
use solewriter_core::projection::target::TargetId;
use solewriter_core::time::Millis;
use solewriter_core::token::HolderToken;
use solewriter_models::runs::{ModelAcquire, ModelLease, PublishOutcome, ReleaseKind};
use solewriter_models::{Design, StdShim, World};
use solewriter_verification::fixtures::*;

const TARGETS: usize = 3;
const SLOTS: usize = 3;

/// splitmix64: a small seeded generator, so a seed names the same sequences everywhere.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn index(&mut self, n: usize) -> usize {
        usize::try_from(self.below(n as u64)).unwrap_or(0)
    }
}

/// One operation, weighted like `tests/conformance.rs`.
fn op(rng: &mut Rng, step: usize) -> Value {
    let token = 1 + (step % 250) as u64;
    match rng.below(20) {
        0 => json!({"op": "admit", "target": rng.index(TARGETS)}),
        1..=4 => json!({
            "op": "submit",
            "target": rng.index(TARGETS),
            "channel": rng.index(2),
            "producer": rng.index(2),
            "watermark": rng.below(4),
            "body": rng.below(3),
            "validSchema": rng.below(10) != 0,
        }),
        5..=8 => {
            json!({"op": "acquire", "slot": rng.index(SLOTS), "target": rng.index(TARGETS), "token": token})
        }
        9..=11 => json!({"op": "publish", "slot": rng.index(SLOTS)}),
        12 | 13 => {
            json!({"op": "publishNow", "target": rng.index(TARGETS), "token": 0xa0 + rng.below(4)})
        }
        14 | 15 => json!({"op": "release", "slot": rng.index(SLOTS)}),
        16..=18 => json!({"op": "advance", "ms": rng.below(2 * TTL_MS)}),
        _ => json!({"op": "clockBack", "ms": rng.below(TTL_MS)}),
    }
}

fn fenced(f: Fenced) -> String {
    match f {
        Fenced::Superseded { current_epoch } => format!("superseded {current_epoch}"),
        Fenced::TokenMismatch => "token-mismatch".into(),
        Fenced::Expired => "expired".into(),
        Fenced::Released => "released".into(),
        Fenced::NeverGranted => "never-granted".into(),
        other => format!("other {other}"),
    }
}

fn published(outcome: PublishOutcome) -> String {
    match outcome {
        PublishOutcome::Published { epoch, bytes } => format!("published {epoch} {}", bytes.len()),
        PublishOutcome::Held(h) => format!("held {} {}", h.fencing_epoch, h.retry_after_ms),
        PublishOutcome::Fenced(f) => format!("fenced {}", fenced(f)),
        PublishOutcome::Expired(_) => "expired".into(),
        PublishOutcome::NotAdmitted => "not-admitted".into(),
        other => panic!("unexpected model outcome {other:?}"),
    }
}

fn lease_row(r: &LeaseRecord) -> String {
    let grant = match r.state.grant() {
        None => "-/-/-/-".to_owned(),
        Some(g) => format!(
            "{}/{}/{}/{}",
            solewriter_core::hex::encode(g.holder_token_hash.as_bytes()),
            g.holder_instance_digest,
            g.acquired_at.0,
            g.expires_at.0
        ),
    };
    format!(
        "{} e{} {} {grant}",
        r.target_id,
        r.fencing_epoch,
        r.state.name()
    )
}

fn token(n: u64) -> HolderToken {
    HolderToken::from_bytes([u8::try_from(n).expect("a token byte"); 32])
}

fn run(ops: &[Value]) -> Vec<Value> {
    let model = World::<StdShim>::new(Design::Real, registry(), ttl(), START);
    let targets: Vec<TargetId> = (0..TARGETS).map(|i| tuple(i).target_id()).collect();
    let mut slots: Vec<Option<ModelLease>> = (0..SLOTS).map(|_| None).collect();
    let mut now = START.0;
    let n = |v: &Value, k: &str| usize::try_from(v[k].as_u64().expect("a number")).expect("small");
    ops.iter()
        .map(|op| {
            let outcome = match op["op"].as_str().expect("an op") {
                "admit" => format!("admitted {}", model.admit(&tuple(n(op, "target")))),
                "submit" => {
                    let mut s = submission(
                        &targets[n(op, "target")],
                        n(op, "channel"),
                        op["watermark"].as_u64().expect("a number"),
                        &format!("b{}", op["body"]),
                        START,
                    );
                    if op["validSchema"] == json!(false) {
                        s.envelope_json = s
                            .envelope_json
                            .replace("notAuthority\":true", "notAuthority\":false");
                    }
                    match model.submit(&producer(n(op, "producer")), &s) {
                        Ok(kind) => format!("submitted {kind:?}").to_lowercase(),
                        Err(_) => "rejected".into(),
                    }
                }
                "acquire" => {
                    let slot = n(op, "slot");
                    // A grant left in the slot is released first (the adapter's Drop does it).
                    if let Some(old) = slots[slot].take() {
                        model.release(&old);
                    }
                    let t = &targets[n(op, "target")];
                    match model.acquire(t, &holder(slot), token(op["token"].as_u64().expect("a number"))) {
                        Ok(ModelAcquire::Acquired(lease)) => {
                            let line = format!("acquired {} {}", lease.epoch, lease.expires_at.0);
                            slots[slot] = Some(lease);
                            line
                        }
                        Ok(ModelAcquire::Held(h)) => {
                            format!("held {} {}", h.fencing_epoch, h.retry_after_ms)
                        }
                        Err(_) => "not-admitted".into(),
                    }
                }
                "publish" => match slots[n(op, "slot")].take() {
                    None => "no-lease".into(),
                    Some(lease) => published(model.publish(&lease, None)),
                },
                "publishNow" => {
                    let t = &targets[n(op, "target")];
                    let token = token(op["token"].as_u64().expect("a number"));
                    published(model.publish_now(t, &holder(9), token, None))
                }
                "release" => match slots[n(op, "slot")].take() {
                    None => "no-lease".into(),
                    Some(lease) => match model.release(&lease) {
                        ReleaseKind::Released => "released".into(),
                        ReleaseKind::NotHolder(f) => format!("not-holder {}", fenced(f)),
                    },
                },
                "advance" => {
                    let ms = op["ms"].as_u64().expect("a number");
                    now += ms;
                    model.advance(ms);
                    "clock-moved".into()
                }
                "clockBack" => {
                    now = now.saturating_sub(op["ms"].as_u64().expect("a number")).max(START.0);
                    model.set_clock(Millis(now));
                    "clock-moved".into()
                }
                other => panic!("unknown op {other}"),
            };
            let store = model.store();
            let channels: Vec<String> = store
                .channels
                .values()
                .map(|c| {
                    format!(
                        "{} {} {} {} {} {} {} {}",
                        c.target_id,
                        c.channel,
                        c.source_watermark,
                        c.envelope_json,
                        c.captured_at.0,
                        c.expires_at.0,
                        c.updated_at.0,
                        c.degraded_reason.map_or("-", |d| d.as_str())
                    )
                })
                .collect();
            json!({
                "outcome": outcome,
                "clock": now,
                "leases": store.leases.values().map(lease_row).collect::<Vec<_>>(),
                "channels": channels,
                "current": targets.iter().map(|t| model.current(t).map(|b| String::from_utf8(b).expect("utf-8"))).collect::<Vec<_>>(),
            })
        })
        .collect()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let seed: u64 = args
        .next()
        .map_or(0x5015_c0f0, |s| s.parse().expect("SEED is a u64"));
    let cases: usize = args
        .next()
        .map_or(40, |s| s.parse().expect("CASES is a number"));
    let mut rng = Rng(seed);
    let cases: Vec<Value> = (0..cases)
        .map(|_| {
            let len = 1 + rng.index(39);
            let ops: Vec<Value> = (0..len).map(|step| op(&mut rng, step)).collect();
            let steps = run(&ops);
            json!({"ops": ops, "steps": steps})
        })
        .collect();
    let registry: Vec<Value> = CHANNELS
        .iter()
        .map(|(name, owner, schema)| json!({"name": name, "owner": owner, "envelopeSchema": schema, "maxEnvelopeBytes": 4096}))
        .collect();
    let tuples: Vec<Value> = (0..TARGETS)
        .map(|i| serde_json::to_value(tuple(i)).expect("a tuple serializes"))
        .collect();
    let producers: Vec<&str> = CHANNELS.iter().map(|c| c.1).collect();
    println!(
        "{}",
        json!({"seed": seed, "ttlMs": TTL_MS, "start": START.0, "channels": registry, "tuples": tuples,
               "producers": producers, "cases": cases})
    );
}
