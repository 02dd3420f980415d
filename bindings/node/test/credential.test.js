'use strict';
/**
 * The raw token is the credential; its stored hash is not. `acquire` draws 256 bits from the
 * OS and hands them only to the Grant (a private field); the store keeps their SHA-256. A
 * reader of `HookProjectionLeases` (here a read-only second connection) who builds a grant
 * from the row is refused — as a plain object, and as a Grant carrying the hash as its token —
 * with nothing written, while the real holder publishes. The secret never leaves the grant by
 * accident (JSON, inspection, spreading), only by `exportSecret()`. (`processes.test.js`
 * forges a Rust holder's grant the same way.)
 */

const test = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');
const util = require('node:util');
const Database = require('better-sqlite3');
const { Grant } = require('..');
const { setup, tuple, submission } = require('./helpers');

const TTL = 60000;

function dump(db) {
  return {
    leases: db.prepare('SELECT * FROM HookProjectionLeases ORDER BY target_id').all(),
    channels: db.prepare('SELECT * FROM HookProjectionChannels ORDER BY target_id, channel').all(),
  };
}

/** What a reader of the lease table can build: the row's fields, the stored hash as the token. */
function forged(dbPath, target) {
  const reader = new Database(dbPath, { readonly: true });
  const row = reader.prepare('SELECT * FROM HookProjectionLeases WHERE target_id = ?').get(target);
  reader.close();
  const hash = Buffer.from(row.holder_token_hash).toString('hex');
  return {
    plain: { targetId: target, epoch: row.fencing_epoch, tokenHash: hash },
    // A fresh Grant object each time: a Grant is spent by its first use (the forger rebuilds one
    // from what it read, as it can).
    grant: () => Grant.fromSecret({
      targetId: target,
      epoch: row.fencing_epoch,
      holder: row.holder_instance_digest,
      acquiredAt: row.acquired_at,
      expiresAt: row.expires_at,
      token: hash,
    }),
  };
}

test('a credential forged from the lease row is refused with nothing written; the holder publishes', async () => {
  const { db, dbPath, runtimeRoot, store } = setup({ ttlMs: TTL });
  const target = store.admitTarget(tuple(0));
  store.submit('router', submission(target, 0, 1, 'x'));
  const grant = store.acquire(target, 'holder-1').granted;
  const before = dump(db);
  const forger = forged(dbPath, target);
  const current = path.join(runtimeRoot, 'hook-projections', target, 'current.json');

  for (const attempt of [() => store.publish(forger.plain), () => store.release(forger.plain)]) {
    assert.throws(attempt, { code: 'INVALID_INPUT' }, 'a plain object is no credential');
  }
  await assert.rejects(store.publishAsync(forger.plain), { code: 'INVALID_INPUT' });
  assert.throws(() => store.publish(forger.grant()), { code: 'FENCED', reason: 'token-mismatch' });
  await assert.rejects(store.publishAsync(forger.grant()), { code: 'FENCED', reason: 'token-mismatch' });
  assert.deepEqual(store.release(forger.grant()), { notHolder: { reason: 'token-mismatch' } });
  assert.deepEqual(dump(db), before, 'nothing written');
  assert.equal(fs.existsSync(current), false, 'nothing published');

  assert.equal(store.publish(grant).epoch, 1, 'the real holder publishes');
  assert.equal(store.readProjection(target).fencingEpoch, 1);
});

test('the store keeps only the hash of the raw token the grant holds; fresh tokens differ', () => {
  const { db, store } = setup({ ttlMs: TTL });
  const [a, b] = [0, 1].map((n) => store.admitTarget(tuple(n)));
  const grants = [a, b].map((t) => store.acquire(t, 'holder-1').granted);
  const tokens = grants.map((g) => g.exportSecret().token);
  assert.notEqual(tokens[0], tokens[1]);
  grants.forEach((g, i) => {
    assert.match(tokens[i], /^[0-9a-f]{64}$/);
    const row = db.prepare('SELECT holder_token_hash FROM HookProjectionLeases WHERE target_id = ?').get(g.targetId);
    const stored = Buffer.from(row.holder_token_hash).toString('hex');
    assert.equal(stored, crypto.createHash('sha256').update(Buffer.from(tokens[i], 'hex')).digest('hex'));
    assert.notEqual(stored, tokens[i]);
  });
});

test('the secret leaves a grant only through exportSecret, and comes back through Grant.fromSecret', () => {
  const { store } = setup({ ttlMs: TTL });
  const target = store.admitTarget(tuple(0));
  const grant = store.acquire(target, 'holder-1').granted;
  const { token } = grant.exportSecret();
  for (const shown of [JSON.stringify(grant), util.inspect(grant), util.format('%o', grant), JSON.stringify({ ...grant })]) {
    assert.ok(!shown.includes(token), `the token shows in ${shown}`);
  }
  assert.match(util.inspect(grant), /redacted/);
  assert.deepEqual(Object.keys(grant), ['targetId', 'epoch', 'holder', 'acquiredAt', 'expiresAt']);
  assert.deepEqual(JSON.parse(JSON.stringify(grant)), { ...grant });
  assert.ok(Object.isFrozen(grant));
  // Exported (e.g. to another process) and rebuilt, it is the same credential.
  const again = Grant.fromSecret(JSON.parse(JSON.stringify(grant.exportSecret())));
  assert.equal(store.publish(again).epoch, 1);
  // Malformed exports are refused before anything runs.
  for (const bad of [null, 'x', { ...grant.exportSecret(), token: 'AB'.repeat(32) }, { ...grant.exportSecret(), epoch: -1 }, { ...grant.exportSecret(), targetId: '../x' }]) {
    assert.throws(() => Grant.fromSecret(bad), { code: 'INVALID_INPUT' });
  }
});

test('acquire and publishNow take no options: the first release\'s tokenHex is refused', () => {
  const { store } = setup({ ttlMs: TTL });
  const target = store.admitTarget(tuple(0));
  assert.throws(() => store.acquire(target, 'holder-1', { tokenHex: '11'.repeat(32) }), { code: 'INVALID_INPUT' });
  assert.throws(() => store.publishNow(target, 'holder-1', { tokenHex: '11'.repeat(32) }), { code: 'INVALID_INPUT' });
});
