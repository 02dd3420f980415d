'use strict';
/**
 * The JS executor's conditional writes are fenced by their own WHERE clauses, not only by the
 * machine's decision made before them: each condition, broken alone, changes no row (the
 * same pins as the Rust adapter's `rows.rs` tests). `initialize` refuses another shape, and a
 * row solewriter could not have written fails closed.
 */

const test = require('node:test');
const assert = require('node:assert/strict');
const Database = require('better-sqlite3');
const { executeSqlEffect, initialize } = require('..');
const { setup, submission, tuple } = require('./helpers');

const hash = (n) => Buffer.alloc(32, n);

function grant(targetId, epoch, token) {
  return {
    kind: 'writeGrant',
    targetId,
    epoch,
    priorEpoch: epoch - 1,
    tokenHash: hash(token),
    holder: 'h',
    acquiredAt: 10,
    expiresAt: 20,
  };
}

const release = (targetId, epoch, token) => ({ kind: 'writeRelease', targetId, epoch, tokenHash: hash(token) });

test('a grant is written only over the epoch it was decided on', () => {
  const { db, store } = setup();
  const t = store.admitTarget(tuple(0));
  assert.deepEqual(executeSqlEffect(db, grant(t, 1, 1)), { written: true });
  assert.deepEqual(executeSqlEffect(db, grant(t, 1, 2)), { written: false }, 'stale prior epoch');
  assert.deepEqual(executeSqlEffect(db, grant(t, 2, 2)), { written: true });
  assert.equal(executeSqlEffect(db, { kind: 'readLease', targetId: t }).lease.fencing_epoch, 2);
});

test('a release changes the row only with its epoch, its token and a held row', () => {
  const { db, store } = setup();
  const t = store.admitTarget(tuple(0));
  executeSqlEffect(db, grant(t, 1, 1));
  executeSqlEffect(db, grant(t, 2, 2));
  assert.deepEqual(executeSqlEffect(db, release(t, 1, 2)), { written: false }, 'wrong epoch');
  assert.deepEqual(executeSqlEffect(db, release(t, 2, 1)), { written: false }, 'wrong token');
  assert.deepEqual(executeSqlEffect(db, release(t, 2, 2)), { written: true });
  assert.deepEqual(executeSqlEffect(db, release(t, 2, 2)), { written: false }, 'already released');
});

test('a failed statement is reported, not thrown, and rollback leaves no transaction', () => {
  const { db } = setup();
  assert.deepEqual(executeSqlEffect(db, { kind: 'begin' }), {});
  // Never nested into a transaction already open (the host's, between an asynchronous
  // publication's turns): refused before any statement.
  assert.equal(executeSqlEffect(db, { kind: 'begin' }).error.code, 'IN_TRANSACTION');
  assert.deepEqual(executeSqlEffect(db, { kind: 'rollback' }), {});
  assert.equal(db.inTransaction, false);
  assert.equal(executeSqlEffect(db, { kind: 'commit' }).error.code, 'SQLITE_ERROR');
});

test('initialize is idempotent and refuses another shape or a journal that is not WAL', () => {
  const { db } = setup();
  assert.equal(initialize(db), 'present');
  db.exec('CREATE INDEX extra ON HookProjectionChannels (channel)');
  assert.throws(() => initialize(db), { code: 'FOREIGN_SCHEMA' });
  const other = new Database(':memory:');
  assert.throws(() => initialize(other), { code: 'FOREIGN_SCHEMA' });
  const shaped = setup().db;
  shaped.exec('DROP TABLE HookProjectionChannels');
  shaped.exec('CREATE TABLE HookProjectionChannels (target_id TEXT)');
  assert.throws(() => initialize(shaped), { code: 'FOREIGN_SCHEMA' });
});

test('a row solewriter could not have written fails closed', () => {
  const { db, store } = setup();
  const t = store.admitTarget(tuple(0));
  // Held, with a token hash but no holder digest: partial grant columns.
  db.prepare("UPDATE HookProjectionLeases SET fencing_epoch = 1, holder_token_hash = ?, state = 'held' WHERE target_id = ?").run(
    hash(1),
    t,
  );
  assert.throws(() => store.inspect(), { code: 'CORRUPT_ROW' });
  assert.throws(() => store.acquire(t, 'holder-1'), { code: 'CORRUPT_ROW' });
  assert.throws(() => store.publishNow(t, 'holder-1'), { code: 'CORRUPT_ROW' });
  assert.equal(db.inTransaction, false);
});

test('a watermark above 2^53-1 is refused at submission, and a stored one is a corrupt row, never published rounded', () => {
  const { db, store } = setup();
  const t = store.admitTarget(tuple(0));
  // Node refuses a number it cannot hold exactly before it reaches the core (which refuses it too).
  assert.throws(() => store.submit('router', submission(t, 0, 2 ** 53, 'a')), { code: 'INVALID_INPUT' });
  assert.equal(store.submit('router', submission(t, 0, 2 ** 53 - 1, 'a')), 'inserted');
  // Planted past the bound (better-sqlite3 would hand it over as a rounded number).
  db.prepare('UPDATE HookProjectionChannels SET source_watermark = 9007199254740993 WHERE target_id = ?').run(t);
  assert.throws(() => store.publishNow(t, 'holder-1'), { code: 'CORRUPT_ROW' });
  assert.equal(db.inTransaction, false);
});
