'use strict';
require('./test_addon'); // chosen tokens: the test build of the addon
/**
 * A deterministic sequence through the JS executor on better-sqlite3, with an injected clock:
 * admit, submit, publishNow, acquire → publish, a stale holder fenced after expiry, the
 * release of a superseded grant — every outcome and the final rows asserted exactly.
 */

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const crypto = require('node:crypto');
const { setup, tuple, submission, TTL_MS, START } = require('./helpers');
const { chosenToken } = require('./tokens');
const { Grant } = require('..');

const sha256 = (bytes) => crypto.createHash('sha256').update(bytes).digest('hex');
const TOKEN = (n) => n.toString(16).padStart(2, '0').repeat(32);

test('admit, submit, publishNow, acquire/publish, stale holder fenced, superseded release', () => {
  const { db, store, clock, runtimeRoot } = setup();
  const t = store.admitTarget(tuple(0));
  assert.equal(t, store.admitTarget(tuple(0)), 'admission is idempotent');
  assert.equal(store.submit('router', submission(t, 0, 1, 'a')), 'inserted');
  assert.equal(store.submit('router', submission(t, 0, 1, 'a')), 'replayed');
  assert.equal(store.submit('router', submission(t, 0, 2, 'b')), 'advanced');
  assert.equal(store.submit('router', submission(t, 0, 2, 'c')), 'degraded');
  assert.throws(() => store.submit('frontier', submission(t, 0, 3, 'd')), { code: 'REJECTED' });

  const now = store.publishNow(t, 'holder-9', chosenToken(TOKEN(0xa0)));
  assert.deepEqual({ epoch: now.published.epoch, publishedAt: now.published.publishedAt }, { epoch: 1, publishedAt: START });

  const first = store.acquire(t, 'holder-1', chosenToken(TOKEN(1))).granted;
  assert.deepEqual([first.epoch, first.acquiredAt, first.expiresAt], [2, START, START + TTL_MS]);
  assert.deepEqual(store.acquire(t, 'holder-2').held, {
    epoch: 2,
    holder: 'holder-1',
    expiresAt: START + TTL_MS,
    retryAfterMs: TTL_MS,
  });
  assert.equal(store.publish(first).epoch, 2);
  const doc = store.readProjection(t);
  assert.equal(doc.fencingEpoch, 2);

  // A stale holder: its grant expires, a successor takes over, the stale one is fenced.
  const stale = store.acquire(t, 'holder-1', chosenToken(TOKEN(2))).granted;
  clock.now += TTL_MS;
  const successor = store.acquire(t, 'holder-2', chosenToken(TOKEN(3))).granted;
  // A Grant object is spent by its first use: the second use of each grant below is that of a
  // copy rebuilt from its export (the store's answer to it is what is checked).
  const [staleCopy, successorCopy] = [stale, successor].map((g) => Grant.fromSecret(g.exportSecret()));
  assert.equal(successor.epoch, 4);
  const before = fs.readFileSync(`${runtimeRoot}/hook-projections/${t}/current.json`);
  assert.throws(() => store.publish(stale), { code: 'FENCED', reason: 'superseded', currentEpoch: 4 });
  assert.deepEqual(fs.readFileSync(`${runtimeRoot}/hook-projections/${t}/current.json`), before, 'fenced: untouched');
  assert.throws(() => store.release(stale), { code: 'GRANT_SPENT' });
  assert.deepEqual(store.release(staleCopy), { notHolder: { reason: 'superseded', currentEpoch: 4 } });
  assert.equal(store.publish(successor).epoch, 4);
  assert.equal(store.readProjection(t).fencingEpoch, 4);
  assert.deepEqual(store.release(successorCopy), { notHolder: { reason: 'released' } });

  // An expired holder with no successor is fenced too (expired), and nothing is published.
  const late = store.acquire(t, 'holder-1', chosenToken(TOKEN(4))).granted;
  clock.now += TTL_MS;
  assert.throws(() => store.publish(late), { code: 'FENCED', reason: 'expired' });

  const unknown = '0'.repeat(64);
  assert.throws(() => store.acquire(unknown, 'holder-1'), { code: 'NOT_ADMITTED' });
  assert.throws(() => store.publishNow(unknown, 'holder-1'), { code: 'NOT_ADMITTED' });

  const row = db.prepare('SELECT * FROM HookProjectionLeases').get();
  assert.deepEqual(
    { ...row, holder_token_hash: row.holder_token_hash.toString('hex') },
    {
      target_id: t,
      fencing_epoch: 5,
      holder_token_hash: sha256(Buffer.from(TOKEN(4), 'hex')),
      holder_instance_digest: 'holder-1',
      acquired_at: START + TTL_MS,
      expires_at: START + 2 * TTL_MS,
      state: 'released',
    },
  );
  const channels = db.prepare('SELECT channel, source_watermark, degraded_reason FROM HookProjectionChannels').all();
  assert.deepEqual(channels, [{ channel: 'computed-route', source_watermark: 2, degraded_reason: 'source-conflict' }]);
  assert.deepEqual(store.inspect(), {
    leases: [
      { targetId: t, epoch: 5, state: 'released', holder: 'holder-1', acquiredAt: START + TTL_MS, expiresAt: START + 2 * TTL_MS },
    ],
    channels: [
      { targetId: t, channel: 'computed-route', sourceWatermark: 2, updatedAt: START, degradedReason: 'source-conflict' },
    ],
  });
  assert.equal(db.inTransaction, false);
});
