//! Conformance (ShardStore-style): random sequences of admit / submit / acquire / publish /
//! release / clock moves, applied single-threaded to the SQLite adapter and to the reference
//! model, must give identical outcomes, identical rows and identical `current.json` bytes
//! after every step.
//!
//! (A publication whose deadline passes between revalidation and rename needs the clock to
//! move inside the transaction, which a single thread cannot do; the fencing tests and the
//! model checkers cover it.)
//!
//! 1,000 cases by default; `SOLEWRITER_CONFORMANCE_CASES` raises it. The store and runtime
//! root live on a RAM-backed directory when the system has one (`/dev/shm`): this test is
//! about logic, not durability, and fsync cost would only slow it down.

use proptest::prelude::*;
use solewriter_adapters::clock::ManualClock;
use solewriter_adapters::projection::lease::{Acquisition, HeldLease, ReleaseOutcome};
use solewriter_adapters::projection::publication::{NoProbe, PublishedNow};
use solewriter_adapters::projection::runtime::RuntimeRoot;
use solewriter_adapters::projection::store::{ProjectionStore, StoreOptions};
use solewriter_adapters::projection::submission::SubmitOutcome;
use solewriter_adapters::Error;
use solewriter_core::config::TimingConfig;
use solewriter_core::projection::lease::{DeadlinePassed, Fenced, LeaseRecord};
use solewriter_core::projection::target::TargetId;
use solewriter_core::projection::watermark::SubmissionRejected;
use solewriter_core::time::Millis;
use solewriter_core::token::HolderToken;
use solewriter_models::runs::{ModelAcquire, ModelLease, PublishOutcome, ReleaseKind};
use solewriter_models::world::{ModelError, SubmitKind};
use solewriter_models::{Design, StdShim, World};
use solewriter_verification::fixtures::*;
use std::sync::Arc;

const TARGETS: usize = 3; // target 2 is never admitted unless an Admit op names it
const SLOTS: usize = 3;

#[derive(Clone, Debug)]
enum Op {
    Admit(usize),
    Submit {
        target: usize,
        channel: usize,
        producer: usize,
        watermark: u64,
        body: u8,
        valid_schema: bool,
    },
    Acquire {
        slot: usize,
        target: usize,
    },
    Publish {
        slot: usize,
    },
    PublishNow {
        target: usize,
        token: u8,
    },
    Release {
        slot: usize,
    },
    Advance(u64),
    ClockBack(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        1 => (0..TARGETS).prop_map(Op::Admit),
        4 => (0..TARGETS, 0..2usize, 0..2usize, 0..4u64, 0..3u8, prop::bool::weighted(0.9)).prop_map(
            |(target, channel, producer, watermark, body, valid_schema)| Op::Submit { target, channel, producer, watermark, body, valid_schema }
        ),
        4 => (0..SLOTS, 0..TARGETS).prop_map(|(slot, target)| Op::Acquire { slot, target }),
        3 => (0..SLOTS).prop_map(|slot| Op::Publish { slot }),
        2 => (0..TARGETS, 0..4u8).prop_map(|(target, token)| Op::PublishNow { target, token }),
        2 => (0..SLOTS).prop_map(|slot| Op::Release { slot }),
        3 => (0..(2 * TTL_MS)).prop_map(Op::Advance),
        1 => (0..TTL_MS).prop_map(Op::ClockBack),
    ]
}

/// An outcome in a form both implementations can be mapped to.
#[derive(Debug, PartialEq)]
enum Out {
    Admitted(TargetId),
    Submitted(SubmitKind),
    Rejected(SubmissionRejected),
    Acquired { epoch: u64, expires_at: Millis },
    Held { epoch: u64, retry_after_ms: u64 },
    NotAdmitted,
    Published { epoch: u64, bytes: usize },
    Fenced(Fenced),
    Expired(DeadlinePassed),
    Released,
    NotHolder(Fenced),
    NoLease,
    ClockMoved,
}

fn adapter_error(e: Error) -> Out {
    match e {
        Error::Rejected(r) => Out::Rejected(r),
        Error::NotAdmitted(_) => Out::NotAdmitted,
        Error::Fenced(f) => Out::Fenced(f),
        Error::LeaseExpired(d) => Out::Expired(d),
        other => panic!("unexpected adapter error: {other}"),
    }
}

fn model_error(e: ModelError) -> Out {
    match e {
        ModelError::Rejected(r) => Out::Rejected(r),
        ModelError::NotAdmitted => Out::NotAdmitted,
        ModelError::EpochExhausted => panic!("epoch exhausted in a short sequence"),
        ModelError::Busy => panic!("busy in a sequence without concurrency"),
        ModelError::Failed(effect) => panic!("{effect} failed in a sequence without faults"),
        ModelError::Other(kind) => panic!("a {kind:?} failure in a sequence without faults"),
    }
}

fn row_key(r: &LeaseRecord) -> String {
    let grant = r.state.grant().map(|g| {
        let hash: String = g
            .holder_token_hash
            .as_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        format!(
            "{hash}/{}/{}/{}",
            g.holder_instance_digest, g.acquired_at.0, g.expires_at.0
        )
    });
    format!(
        "{} e{} {} {:?}",
        r.target_id,
        r.fencing_epoch,
        r.state.name(),
        grant
    )
}

fn scratch_dir() -> tempfile::TempDir {
    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir() {
        if let Ok(dir) = tempfile::tempdir_in(shm) {
            return dir;
        }
    }
    tempfile::tempdir().expect("temp dir")
}

fn run(ops: &[Op]) -> Result<(), TestCaseError> {
    let dir = scratch_dir();
    let timing = TimingConfig::from_values(Some(TTL_MS), Some(1_000)).expect("valid");
    let db_path = dir.path().join("store.sqlite");
    ProjectionStore::initialize(&db_path, &timing).expect("initialize");
    std::fs::create_dir(dir.path().join("runtime")).expect("runtime dir");
    let clock = ManualClock::new(START);
    let options = StoreOptions {
        db_path,
        runtime_root: RuntimeRoot::new(dir.path().join("runtime")),
        timing,
        registry: registry(),
        clock: Arc::new(clock.clone()),
    };
    let store = ProjectionStore::open(&options).expect("open");
    let model = World::<StdShim>::new(Design::Real, registry(), ttl(), START);
    let targets: Vec<TargetId> = (0..TARGETS).map(|i| tuple(i).target_id()).collect();
    let mut slots: Vec<Option<(HeldLease<'_>, ModelLease)>> = (0..SLOTS).map(|_| None).collect();

    for (step, op) in ops.iter().enumerate() {
        let (a, m) = match op {
            Op::Admit(t) => {
                let a = Out::Admitted(store.admit_target(&tuple(*t)).expect("admit"));
                (a, Out::Admitted(model.admit(&tuple(*t))))
            }
            Op::Submit {
                target,
                channel,
                producer: p,
                watermark,
                body,
                valid_schema,
            } => {
                let mut s = submission(
                    &targets[*target],
                    *channel,
                    *watermark,
                    &format!("b{body}"),
                    START,
                );
                if !valid_schema {
                    s.envelope_json = s
                        .envelope_json
                        .replace("notAuthority\":true", "notAuthority\":false");
                }
                let a = match store.submit(&producer(*p), &s) {
                    Ok(o) => Out::Submitted(match o {
                        SubmitOutcome::Inserted => SubmitKind::Inserted,
                        SubmitOutcome::Advanced => SubmitKind::Advanced,
                        SubmitOutcome::Replayed => SubmitKind::Replayed,
                        SubmitOutcome::Degraded => SubmitKind::Degraded,
                    }),
                    Err(e) => adapter_error(e),
                };
                (
                    a,
                    model
                        .submit(&producer(*p), &s)
                        .map_or_else(model_error, Out::Submitted),
                )
            }
            Op::Acquire { slot, target } => {
                // An unused lease in the slot is dropped first: the adapter's Drop releases it
                // conditionally, and so does the model.
                if let Some((lease, model_lease)) = slots[*slot].take() {
                    drop(lease);
                    model.release(&model_lease);
                }
                let digest = holder(*slot);
                match store.acquire(&targets[*target], &digest) {
                    Ok(Acquisition::Acquired(lease)) => {
                        let a = Out::Acquired {
                            epoch: lease.epoch(),
                            expires_at: lease.expires_at(),
                        };
                        let token = lease.token().clone();
                        let m = match model.acquire(&targets[*target], &digest, token) {
                            Ok(ModelAcquire::Acquired(ml)) => {
                                let m = Out::Acquired {
                                    epoch: ml.epoch,
                                    expires_at: ml.expires_at,
                                };
                                slots[*slot] = Some((lease, ml));
                                m
                            }
                            Ok(ModelAcquire::Held(h)) => Out::Held {
                                epoch: h.fencing_epoch,
                                retry_after_ms: h.retry_after_ms,
                            },
                            Err(e) => model_error(e),
                        };
                        (a, m)
                    }
                    other => {
                        let a = match other {
                            Ok(Acquisition::Held(h)) => Out::Held {
                                epoch: h.fencing_epoch,
                                retry_after_ms: h.retry_after_ms,
                            },
                            Ok(Acquisition::Acquired(_)) => unreachable!(),
                            Err(e) => adapter_error(e),
                        };
                        let m = match model.acquire(
                            &targets[*target],
                            &digest,
                            HolderToken::from_bytes([0xee; 32]),
                        ) {
                            Ok(ModelAcquire::Held(h)) => Out::Held {
                                epoch: h.fencing_epoch,
                                retry_after_ms: h.retry_after_ms,
                            },
                            Ok(ModelAcquire::Acquired(ml)) => Out::Acquired {
                                epoch: ml.epoch,
                                expires_at: ml.expires_at,
                            },
                            Err(e) => model_error(e),
                        };
                        (a, m)
                    }
                }
            }
            Op::Publish { slot } => match slots[*slot].take() {
                None => (Out::NoLease, Out::NoLease),
                Some((lease, ml)) => {
                    let a = match lease.publish() {
                        Ok(p) => Out::Published {
                            epoch: p.fencing_epoch,
                            bytes: p.bytes,
                        },
                        Err(e) => adapter_error(e),
                    };
                    let m = match model.publish(&ml, None) {
                        PublishOutcome::Published { epoch, bytes } => Out::Published {
                            epoch,
                            bytes: bytes.len(),
                        },
                        PublishOutcome::Fenced(f) => Out::Fenced(f),
                        PublishOutcome::Expired(d) => Out::Expired(d),
                        PublishOutcome::NotAdmitted => Out::NotAdmitted,
                        other => panic!("unexpected model outcome {other:?}"),
                    };
                    (a, m)
                }
            },
            Op::PublishNow { target, token } => {
                let (t, digest) = (&targets[*target], holder(9));
                let token = HolderToken::from_bytes([0xa0 + *token; 32]);
                let a = match store.publish_now_with_token(t, &digest, token.clone(), &NoProbe) {
                    Ok(PublishedNow::Published(p)) => Out::Published {
                        epoch: p.fencing_epoch,
                        bytes: p.bytes,
                    },
                    Ok(PublishedNow::Held(h)) => Out::Held {
                        epoch: h.fencing_epoch,
                        retry_after_ms: h.retry_after_ms,
                    },
                    Err(e) => adapter_error(e),
                };
                let m = match model.publish_now(t, &digest, token, None) {
                    PublishOutcome::Published { epoch, bytes } => Out::Published {
                        epoch,
                        bytes: bytes.len(),
                    },
                    PublishOutcome::Held(h) => Out::Held {
                        epoch: h.fencing_epoch,
                        retry_after_ms: h.retry_after_ms,
                    },
                    PublishOutcome::Fenced(f) => Out::Fenced(f),
                    PublishOutcome::Expired(d) => Out::Expired(d),
                    PublishOutcome::NotAdmitted => Out::NotAdmitted,
                    other => panic!("unexpected model outcome {other:?}"),
                };
                (a, m)
            }
            Op::Release { slot } => match slots[*slot].take() {
                None => (Out::NoLease, Out::NoLease),
                Some((lease, ml)) => {
                    let a = match lease.release().expect("release") {
                        ReleaseOutcome::Released => Out::Released,
                        ReleaseOutcome::NotHolder(f) => Out::NotHolder(f),
                    };
                    let m = match model.release(&ml) {
                        ReleaseKind::Released => Out::Released,
                        ReleaseKind::NotHolder(f) => Out::NotHolder(f),
                    };
                    (a, m)
                }
            },
            Op::Advance(ms) => {
                clock.advance(*ms);
                model.advance(*ms);
                (Out::ClockMoved, Out::ClockMoved)
            }
            Op::ClockBack(ms) => {
                let to = Millis(clock_now(&clock).0.saturating_sub(*ms).max(START.0));
                clock.set(to);
                model.set_clock(to);
                (Out::ClockMoved, Out::ClockMoved)
            }
        };
        prop_assert_eq!(&a, &m, "outcome differs at step {} ({:?})", step, op);
        SEEN.lock().expect("stats").push(kind(&a));
        let adapter_rows: Vec<String> = store
            .lease_rows()
            .expect("rows")
            .iter()
            .map(row_key)
            .collect();
        let model_rows: Vec<String> = model.store().leases.values().map(row_key).collect();
        prop_assert_eq!(
            adapter_rows,
            model_rows,
            "lease rows differ after step {} ({:?})",
            step,
            op
        );
        for t in &targets {
            prop_assert_eq!(
                store.channel_rows(t).expect("rows"),
                model.store().channel_rows(t),
                "channel rows differ after step {}",
                step
            );
            let file = std::fs::read(options.runtime_root.current_path(t)).ok();
            prop_assert_eq!(
                file,
                model.current(t),
                "current.json differs after step {} ({:?})",
                step,
                op
            );
        }
    }
    Ok(())
}

fn clock_now(clock: &ManualClock) -> Millis {
    use solewriter_adapters::clock::Clock;
    clock.now()
}

fn cases() -> u32 {
    std::env::var("SOLEWRITER_CONFORMANCE_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000)
}

/// Outcomes seen across all cases, so the test fails if the generator stops reaching them.
static SEEN: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// The outcome's variant name, with the inner variant for fences and submissions.
fn kind(out: &Out) -> String {
    let name = |d: String| {
        d.split(['(', ' ', '{'])
            .next()
            .unwrap_or_default()
            .to_string()
    };
    match out {
        Out::Fenced(f) => format!("Fenced({})", name(format!("{f:?}"))),
        Out::NotHolder(f) => format!("NotHolder({})", name(format!("{f:?}"))),
        Out::Submitted(k) => format!("Submitted({k:?})"),
        other => name(format!("{other:?}")),
    }
}

/// The seed of the generated sequences: `PROPTEST_RNG_SEED` if set, otherwise a fixed one, so
/// a run (and its coverage of outcome kinds) is replayable; a failure names the seed.
fn seed() -> u64 {
    match std::env::var("PROPTEST_RNG_SEED") {
        Ok(text) => text
            .parse()
            .unwrap_or_else(|_| panic!("PROPTEST_RNG_SEED={text:?} is not a u64")),
        Err(_) => 0x5015_c0f0,
    }
}

#[test]
fn sqlite_adapter_and_reference_model_agree() {
    let seed = seed();
    let config = ProptestConfig {
        cases: cases(),
        failure_persistence: None,
        rng_algorithm: proptest::test_runner::RngAlgorithm::ChaCha,
        rng_seed: proptest::test_runner::RngSeed::Fixed(seed),
        ..ProptestConfig::default()
    };
    let mut runner = proptest::test_runner::TestRunner::new(config);
    let result = runner.run(&prop::collection::vec(op(), 1..40), |ops| run(&ops));
    if let Err(e) = result {
        panic!("{e}\nreplay with PROPTEST_RNG_SEED={seed}");
    }
    let mut seen = SEEN.lock().expect("stats").clone();
    seen.sort();
    seen.dedup();
    solewriter_verification::report(&format!(
        "conformance: {} cases agreed (PROPTEST_RNG_SEED={seed}); outcome kinds reached: {seen:?}",
        cases()
    ));
    for required in [
        "Published",
        "Fenced(Superseded)",
        "Fenced(Expired)",
        "Held",
        "NotAdmitted",
        "Rejected",
        "Released",
        "NotHolder(Superseded)",
        "Submitted(Degraded)",
        "Submitted(Replayed)",
        "Submitted(Advanced)",
    ] {
        assert!(
            seen.iter().any(|k| k == required),
            "non-vacuity: no case reached {required}"
        );
    }
}
