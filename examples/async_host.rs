//! An async host shaped like the Memory Core: the two tables in the host's own database
//! (beside its `SummarizationJobs`), and many tokio tasks submitting for two producers and
//! publishing many targets.
//!
//! The pattern: every store call runs on tokio's blocking pool (`spawn_blocking`), where each
//! blocking thread keeps one `ProjectionStore` (one SQLite connection) of its own, opened on
//! first use. A grant is an owned, `Send` value (`Grant`): one blocking task acquires it,
//! the async task holds it across `.await`s, and another blocking task — on whatever thread —
//! publishes it. Dropping a `Grant` does no I/O, so it never blocks an async worker.
//!
//! Run with `cargo run --example async_host`; `tests/async_host.rs` runs it too.

use solewriter::{
    read_projection, Acquisition, ChannelName, ChannelRegistry, ChannelSpec, Clock, Error,
    InstanceDigest, ProducerId, ProjectionStore, PublishedNow, RuntimeRoot, StoreOptions,
    Submission, SystemClock, TargetId, TargetTuple, TimingConfig,
};
use std::cell::RefCell;
use std::path::Path;
use std::sync::Arc;

/// Targets the host publishes, and rounds of submissions per target.
pub const TARGETS: usize = 12;
/// Rounds: in each, both producers submit to every target, then every target is published.
pub const ROUNDS: u64 = 3;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Runs `f` with this blocking thread's store handle, on tokio's blocking pool.
async fn with_store<T, F>(options: Arc<StoreOptions>, f: F) -> Result<T, BoxError>
where
    T: Send + 'static,
    F: FnOnce(&ProjectionStore) -> Result<T, Error> + Send + 'static,
{
    thread_local! {
        static STORE: RefCell<Option<ProjectionStore>> = const { RefCell::new(None) };
    }
    let answer = tokio::task::spawn_blocking(move || {
        STORE.with(|slot| {
            let mut slot = slot.borrow_mut();
            if slot.is_none() {
                *slot = Some(ProjectionStore::open(&options)?);
            }
            match slot.as_ref() {
                Some(store) => f(store),
                None => unreachable!("opened above"),
            }
        })
    })
    .await?;
    Ok(answer?)
}

fn registry() -> Result<ChannelRegistry, BoxError> {
    let spec = |channel: &str, producer: &str| -> Result<ChannelSpec, BoxError> {
        Ok(ChannelSpec {
            name: ChannelName::parse(channel)?,
            owner: ProducerId::parse(producer)?,
            envelope_schema: format!("{channel}.v1"),
            max_envelope_bytes: 64 * 1024,
            watermark: solewriter::projection::WatermarkKind::Integer,
            envelope_json_schema: None,
        })
    };
    Ok(ChannelRegistry::new([
        spec("computed-route", "router")?,
        spec("lifecycle-frontier", "frontier")?,
    ])?)
}

/// The host's database: its own table, WAL (the host's choice), then solewriter's two tables.
fn host_database(dir: &Path) -> Result<StoreOptions, BoxError> {
    let db_path = dir.join("memory-core.sqlite");
    let host = rusqlite::Connection::open(&db_path)?;
    host.query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0))?;
    host.execute_batch("CREATE TABLE SummarizationJobs (id INTEGER PRIMARY KEY, state TEXT);")?;
    let timing = TimingConfig::from_json(r#"{"leaseTtlMs": 10000, "busyTimeoutMs": 10000}"#)?;
    ProjectionStore::initialize(&db_path, &timing)?;
    std::fs::create_dir(dir.join("runtime"))?;
    Ok(StoreOptions {
        db_path,
        runtime_root: RuntimeRoot::new(dir.join("runtime")),
        timing,
        registry: registry()?,
        clock: Arc::new(SystemClock),
    })
}

fn submission(target: &TargetId, channel: &str, watermark: u64) -> Result<Submission, BoxError> {
    let now = SystemClock.now();
    Ok(Submission {
        target_id: target.clone(),
        channel: ChannelName::parse(channel)?,
        source_watermark: watermark.into(),
        envelope_json: format!(
            r#"{{"schema":"{channel}.v1","notAuthority":true,"round":{watermark}}}"#
        ),
        captured_at: now,
        expires_at: now.plus_ms(60_000),
    })
}

/// One target's publication of a round: two-step (the grant crosses `.await`s and threads) on
/// odd rounds, one-shot on even ones. Returns the published epoch.
async fn publish(
    options: Arc<StoreOptions>,
    target: TargetId,
    round: u64,
) -> Result<u64, BoxError> {
    let holder = InstanceDigest::parse("memory-core")?;
    if round.is_multiple_of(2) {
        let t = target.clone();
        return match with_store(options, move |s| s.publish_now(&t, &holder)).await? {
            PublishedNow::Published(p) => Ok(p.fencing_epoch),
            PublishedNow::Held(held) => Err(format!("{target} held: {held:?}").into()),
        };
    }
    let t = target.clone();
    let acquired = with_store(options.clone(), move |s| {
        Ok(match s.acquire(&t, &holder)? {
            Acquisition::Acquired(lease) => Ok(lease.into_grant()),
            Acquisition::Held(held) => Err(held),
        })
    })
    .await?;
    let grant = acquired.map_err(|held| format!("{target} held: {held:?}"))?;
    // The owned grant lives across an await; the publication may run on another thread.
    tokio::task::yield_now().await;
    let published = with_store(options, move |s| s.publish_grant(grant)).await?;
    Ok(published.fencing_epoch)
}

/// The whole host, in `dir`. Returns how many publications succeeded.
pub fn run(dir: &Path) -> Result<usize, BoxError> {
    let options = Arc::new(host_database(dir)?);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(4)
        .build()?;
    runtime.block_on(async {
        let mut targets = Vec::new();
        for agent in 0..TARGETS {
            let tuple = TargetTuple::new([
                "1",
                "hook-projection",
                &format!("agent-{agent}"),
                "claude-code",
                "inst-1",
                "ws-1",
                "live-lane",
            ])?;
            targets.push(with_store(options.clone(), move |s| s.admit_target(&tuple)).await?);
        }
        let mut published = 0;
        for round in 1..=ROUNDS {
            let mut tasks = tokio::task::JoinSet::new();
            for target in &targets {
                for (producer, channel) in [
                    ("router", "computed-route"),
                    ("frontier", "lifecycle-frontier"),
                ] {
                    let (o, s) = (options.clone(), submission(target, channel, round)?);
                    let producer = ProducerId::parse(producer)?;
                    tasks.spawn(async move {
                        with_store(o, move |st| st.submit(&producer, &s))
                            .await
                            .map(|_| 0)
                    });
                }
            }
            while let Some(done) = tasks.join_next().await {
                done??;
            }
            for target in &targets {
                tasks.spawn(publish(options.clone(), target.clone(), round));
            }
            while let Some(done) = tasks.join_next().await {
                done??;
                published += 1;
            }
        }
        // Every target's document carries both producers' last round.
        for target in &targets {
            let doc = read_projection(&options.runtime_root, target)?;
            let watermarks: Vec<_> = doc
                .channels
                .iter()
                .map(|c| c.source_watermark.clone())
                .collect();
            if watermarks != [ROUNDS.into(), ROUNDS.into()] {
                return Err(format!("{target}: watermarks {watermarks:?}").into());
            }
        }
        Ok(published)
    })
}

#[allow(dead_code)] // `tests/async_host.rs` includes this file and calls `run`, not `main`.
fn main() -> Result<(), BoxError> {
    let scratch = tempfile::tempdir()?;
    let published = run(scratch.path())?;
    println!("{published} publications over {TARGETS} targets in {ROUNDS} rounds, all complete");
    Ok(())
}
