'use strict';
/**
 * `store.endLease(targetId)`: an operator's end of the current grant, run by the core's
 * `Release::end()` machine through the addon and the JS executor. A grant ended this way
 * fences its holder (its publish is FENCED `released` and writes nothing); with nothing held
 * nothing is written; a target never admitted and a busy store are errors that write nothing.
 */

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const Database = require('better-sqlite3');
const { setup, tuple, submission, START } = require('./helpers');
const { Grant } = require('..');

const TTL = 60000;

function rows(db) {
  return {
    leases: db.prepare('SELECT * FROM HookProjectionLeases ORDER BY target_id').all(),
    channels: db.prepare('SELECT * FROM HookProjectionChannels ORDER BY target_id, channel').all(),
  };
}

function current(runtimeRoot, target) {
  return path.join(runtimeRoot, 'hook-projections', target, 'current.json');
}

test('a grant ended by endLease is fenced on publish and on release, and writes nothing', () => {
  const { db, store, runtimeRoot } = setup({ ttlMs: TTL });
  const t = store.admitTarget(tuple(0));
  store.submit('router', submission(t, 0, 1, 'x'));
  const grant = store.acquire(t, 'holder-1').granted;
  // The release below is that of a copy: the fenced publish spent the Grant object.
  const copy = Grant.fromSecret(grant.exportSecret());
  assert.deepEqual(store.endLease(t), {
    ended: { epoch: 1, holder: 'holder-1', acquiredAt: START, expiresAt: START + TTL },
  });
  const lease = db.prepare('SELECT fencing_epoch, state FROM HookProjectionLeases WHERE target_id = ?').get(t);
  assert.deepEqual({ ...lease }, { fencing_epoch: 1, state: 'released' });
  const before = rows(db);
  assert.throws(() => store.publish(grant), { code: 'FENCED', reason: 'released' });
  assert.equal(fs.existsSync(current(runtimeRoot, t)), false, 'the fenced holder published nothing');
  assert.deepEqual(store.release(copy), { notHolder: { reason: 'released' } });
  assert.deepEqual(rows(db), before, 'the fenced holder wrote no row');
  // The next grant gets a higher epoch and publishes.
  assert.equal(store.publishNow(t, 'holder-2').published.epoch, 2);
});

test('ending with nothing live answers why; an expired grant is closed so a clock set back cannot revive it', () => {
  const { db, clock, store } = setup({ ttlMs: TTL });
  const t = store.admitTarget(tuple(0));
  const quiet = (why, epoch) => {
    const before = rows(db);
    assert.deepEqual(store.endLease(t), { nothingHeld: { epoch, why } });
    assert.deepEqual(rows(db), before, `${why}: nothing written`);
  };
  quiet('unheld', 0);
  store.release(store.acquire(t, 'holder-1').granted);
  quiet('released', 1);
  const expired = store.acquire(t, 'holder-2').granted;
  const grantedAt = clock.now;
  clock.now += TTL;
  assert.deepEqual(store.endLease(t), { nothingHeld: { epoch: 2, why: 'expired', closed: true } });
  assert.equal(rows(db).leases[0].state, 'released', 'the expired grant is marked released');
  // The clock steps back before the expiry: the grant stays ended.
  clock.now = grantedAt;
  assert.throws(() => store.publish(expired), { code: 'FENCED', reason: 'released' });
  quiet('released', 2);
});

test('endLease of a target never admitted, inside a transaction, or on a busy store fails and writes nothing', () => {
  const { dbPath, db, store } = setup({ ttlMs: TTL, timeout: 50 });
  const t = store.admitTarget(tuple(0));
  const grant = store.acquire(t, 'holder-1').granted;
  const unknown = require('..').targetId(tuple(2));
  assert.throws(() => store.endLease(unknown), { code: 'NOT_ADMITTED' });
  db.exec('BEGIN');
  assert.throws(() => store.endLease(t), { code: 'IN_TRANSACTION' });
  db.exec('ROLLBACK');
  const other = new Database(dbPath);
  other.exec('BEGIN IMMEDIATE');
  const before = rows(db);
  assert.throws(() => store.endLease(t), { code: 'BUSY' });
  other.exec('ROLLBACK');
  other.close();
  assert.deepEqual(rows(db), before);
  assert.equal(store.publish(grant).epoch, 1, 'the grant was untouched and still publishes');
});
