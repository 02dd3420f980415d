'use strict';
/**
 * The machine's transaction is a real write transaction on the host's connection: while
 * another connection holds SQLite's write lock, a publication cannot start — it answers BUSY
 * and touches nothing (no grant, no file). Its grant is then released conditionally (the Rust
 * adapter's rule); when that release is busy too, the grant stays and publishes later.
 */

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const Database = require('better-sqlite3');
const { setup, tuple, busyAtBegin } = require('./helpers');

test('a publication while another connection holds the write lock is BUSY and touches nothing', () => {
  const { dbPath, db, store, runtimeRoot } = setup({ timeout: 50 });
  const t = store.admitTarget(tuple(0));
  const free = store.admitTarget(tuple(1));
  const grant = store.acquire(t, 'holder-1').granted;
  const other = new Database(dbPath);
  other.exec('BEGIN IMMEDIATE');
  assert.throws(() => store.publish(grant), { code: 'BUSY' });
  assert.throws(() => store.publishNow(free, 'holder-2'), { code: 'BUSY' });
  for (const target of [t, free]) {
    const current = path.join(runtimeRoot, 'hook-projections', target, 'current.json');
    assert.equal(fs.existsSync(current), false, 'nothing was published');
  }
  assert.equal(db.prepare('SELECT fencing_epoch FROM HookProjectionLeases WHERE target_id = ?').get(free).fencing_epoch, 0);
  assert.equal(db.inTransaction, false);
  other.exec('ROLLBACK');
  other.close();
  assert.equal(store.publish(grant).epoch, 1, 'its release was busy too: the grant was untouched and still publishes');
  assert.equal(store.readProjection(t).fencingEpoch, 1);
});

for (const form of ['publish', 'publishAsync']) {
  test(`a ${form} that could not start releases its grant, as the Rust adapter does`, async () => {
    const { dbPath, db, store, runtimeRoot } = setup({ timeout: 50 });
    const t = store.admitTarget(tuple(0));
    const grant = store.acquire(t, 'holder-1').granted;
    const blocker = new Database(dbPath);
    const busy = busyAtBegin(db, store.config, blocker, 1);
    await assert.rejects(async () => busy.store[form](grant), (e) => e.code === 'BUSY' && /unused grant was released/.test(e.message));
    assert.equal(busy.begins(), 2, 'the publication began once, its release once');
    const row = db.prepare('SELECT fencing_epoch, state FROM HookProjectionLeases WHERE target_id = ?').get(t);
    assert.deepEqual({ ...row }, { fencing_epoch: 1, state: 'released' });
    assert.equal(fs.existsSync(path.join(runtimeRoot, 'hook-projections', t, 'current.json')), false, 'nothing published');
    assert.throws(() => store.publish(grant), { code: 'FENCED', reason: 'released' });
    blocker.close();
  });
}

for (const form of ['publishNow', 'publishNowAsync']) {
  test(`a ${form} whose takeover's publication could not start releases the grant it took`, async () => {
    const { dbPath, db, store, runtimeRoot, clock } = setup({ timeout: 50 });
    const t = store.admitTarget(tuple(0));
    store.acquire(t, 'holder-1'); // never released
    clock.now += 101; // ... and now expired
    const blocker = new Database(dbPath);
    // The takeover's grant commits in its own transaction; the publication with it is BUSY.
    const busy = busyAtBegin(db, store.config, blocker, 2);
    await assert.rejects(async () => busy.store[form](t, 'holder-2'), (e) => e.code === 'BUSY' && /unused grant was released/.test(e.message));
    assert.equal(busy.begins(), 3, "the takeover's grant, its publication, the grant's release");
    const row = db.prepare('SELECT fencing_epoch, state FROM HookProjectionLeases WHERE target_id = ?').get(t);
    assert.deepEqual({ ...row }, { fencing_epoch: 2, state: 'released' }, 'the grant it took is released, not left to expire');
    assert.equal(fs.existsSync(path.join(runtimeRoot, 'hook-projections', t, 'current.json')), false, 'nothing published');
    assert.equal(db.inTransaction, false);
    blocker.close();
  });
}
