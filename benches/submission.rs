//! Producer submission vs a plain SQLite upsert of the same row.
//!
//! `solewriter_submit` advances the watermark on every iteration (the `Advance` plan: one
//! serialized transaction reading the lease and channel rows, deciding, upserting,
//! committing). `plain_upsert_full` writes the same row into the same schema with one
//! `INSERT OR REPLACE` in its own `BEGIN IMMEDIATE` transaction, with the store's
//! `synchronous = FULL`; `plain_upsert_normal` does the same under `synchronous = NORMAL`,
//! showing what the store's durability choice costs (its default is not changed).

mod support;

use criterion::{criterion_group, criterion_main, Criterion};
use rusqlite::{params, Connection};
use solewriter::ProjectionStore;
use std::cell::Cell;
use support::{envelope, producer, submission, Bench};

const ENVELOPE_BYTES: usize = 1024;

fn plain_connection(bench: &Bench, synchronous: &str) -> Connection {
    let path = bench.dir.path().join(format!("plain-{synchronous}.sqlite"));
    ProjectionStore::initialize(&path, &bench.options.timing).expect("initialize");
    let conn = Connection::open(&path).expect("open");
    conn.execute_batch(&format!("PRAGMA synchronous = {synchronous};"))
        .expect("pragma");
    conn.execute(
        "INSERT INTO HookProjectionLeases (target_id, fencing_epoch, state) VALUES (?1, 0, 'unheld')",
        [bench.targets[0].as_str()],
    )
    .expect("admit");
    conn
}

fn plain_upsert(conn: &Connection, target: &str, watermark: u64, envelope_json: &str) {
    conn.execute_batch("BEGIN IMMEDIATE").expect("begin");
    conn.prepare_cached(
        "INSERT OR REPLACE INTO HookProjectionChannels (target_id, channel, source_watermark, \
         envelope_json, captured_at, expires_at, updated_at, degraded_reason) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, NULL)",
    )
    .and_then(|mut s| {
        s.execute(params![
            target,
            support::CHANNEL,
            watermark as i64,
            envelope_json,
            1_i64,
            i64::MAX >> 2,
            watermark as i64
        ])
    })
    .expect("upsert");
    conn.execute_batch("COMMIT").expect("commit");
}

fn bench(c: &mut Criterion) {
    let bench = Bench::new(1, ENVELOPE_BYTES);
    let target = bench.targets[0].clone();
    let store = bench.open();
    let body = envelope(ENVELOPE_BYTES);
    let mut group = c.benchmark_group("submission");
    let watermark = Cell::new(1_u64);
    group.bench_function("solewriter_submit", |b| {
        b.iter(|| {
            watermark.set(watermark.get() + 1);
            store
                .submit(
                    &producer(),
                    &submission(&target, watermark.get(), body.clone()),
                )
                .expect("submit")
        })
    });
    for synchronous in ["FULL", "NORMAL"] {
        let conn = plain_connection(&bench, synchronous);
        let watermark = Cell::new(1_u64);
        let name = format!("plain_upsert_{}", synchronous.to_lowercase());
        group.bench_function(name, |b| {
            b.iter(|| {
                watermark.set(watermark.get() + 1);
                plain_upsert(&conn, target.as_str(), watermark.get(), &body)
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = support::criterion();
    targets = bench
}
criterion_main!(benches);
