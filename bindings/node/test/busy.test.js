'use strict';
/**
 * The machine's transaction is a real write transaction on the host's connection: while
 * another connection holds SQLite's write lock, a publication cannot start — it answers BUSY
 * and touches nothing (no grant, no file), and the grant it was given still publishes later.
 */

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const Database = require('better-sqlite3');
const { setup, tuple } = require('./helpers');

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
  assert.equal(store.publish(grant).epoch, 1, 'the grant was untouched and still publishes');
  assert.equal(store.readProjection(t).fencingEpoch, 1);
});
