'use strict';
/**
 * What the host hands in, and when solewriter looks at the connection:
 *
 * 1. A `Grant` object is spent by its first publish, publishAsync or release that reaches the
 *    store, whatever its outcome; a second use throws GRANT_SPENT and touches nothing. A
 *    publication that did not use the grant (refused before the store, or not started: its error
 *    carries `grantUnused: true`) hands it back.
 * 2. Host objects are read once: a getter that answers differently on each read cannot make a
 *    submission look up one row and decide on another (the stored watermark never goes back),
 *    and no entry point reads a property of what it is handed twice.
 * 3. The connection's transaction state is looked at after the last callback of the host's: a
 *    `toJSON` that opens a transaction makes the call fail IN_TRANSACTION, the host's
 *    transaction still open, nothing written.
 */

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const Database = require('better-sqlite3');
const solewriter = require('..');
const { Grant, ProjectionStore, initialize, adoptJsWriterTables, WriteGuard, admitWrite, ProjectLock, Ledger } = solewriter;
const { makeHookProjectionWriter } = require('../lib/memory-core-writer');
const { setup, faulty, scratch, tuple, submission, CHANNELS, TTL_MS, START } = require('./helpers');
const memoryCore = require('./memory_core_fixtures');

/** Every row of the two tables, and every file under the runtime root (name and bytes). */
function snapshot(db, runtimeRoot) {
  const files = {};
  const walk = (dir) => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      const file = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(file);
      else files[path.relative(runtimeRoot, file)] = fs.readFileSync(file).toString('hex');
    }
  };
  walk(runtimeRoot);
  const rows = (table) => db.prepare(`SELECT * FROM ${table} ORDER BY 1, 2`).all().map((r) => JSON.stringify(r, (k, v) => (v && v.type === 'Buffer' ? v.data.join(',') : v)));
  return { leases: rows('HookProjectionLeases'), channels: rows('HookProjectionChannels'), files };
}

/** A store with one admitted target holding one channel row. */
function withTarget(options) {
  const s = setup(options);
  const target = s.store.admitTarget(tuple(0));
  s.store.submit('router', submission(target, 0, 10, 'ten'));
  return { ...s, target };
}

/** The stored watermark of `target`'s channel `channel`. */
function watermark(db, target, channel) {
  return db.prepare('SELECT source_watermark FROM HookProjectionChannels WHERE target_id = ? AND channel = ?').get(target, channel)?.source_watermark;
}

/**
 * `value` behind a Proxy that counts the reads of each property (`reads`): what an entry point
 * reads of the host's object.
 */
function counted(value) {
  const reads = new Map();
  const proxy = new Proxy(value, {
    get(target, key, receiver) {
      reads.set(key, (reads.get(key) ?? 0) + 1);
      return Reflect.get(target, key, receiver);
    },
  });
  return { proxy, reads };
}

/** Asserts that no property of a `counted` object was read more than once. */
function readOnce(reads, what) {
  const twice = [...reads].filter(([, n]) => n > 1).map(([key, n]) => `${String(key)} ×${n}`);
  assert.deepEqual(twice, [], `${what}: each property read once`);
}

// ---------------------------------------------------------------------------------------------
// 1. A Grant object is used once

test('publish twice with one Grant: the second throws GRANT_SPENT and touches nothing', async () => {
  const { db, store, target, runtimeRoot } = withTarget();
  const { granted } = store.acquire(target, 'holder-1');
  assert.equal(store.publish(granted).epoch, 1);
  // A later grant is live: a second publication of the first object would have been fenced by
  // the store; it never reaches it.
  const next = store.acquire(target, 'holder-2').granted;
  const before = snapshot(db, runtimeRoot);
  for (const again of [() => store.publish(granted), () => store.release(granted), () => granted.exportSecret()]) {
    assert.throws(again, (e) => e.code === 'GRANT_SPENT' && /already used by a publish, publishAsync or release/.test(e.message));
  }
  await assert.rejects(store.publishAsync(granted), { code: 'GRANT_SPENT' });
  assert.deepEqual(snapshot(db, runtimeRoot), before, 'nothing read back into a write, nothing renamed');
  assert.equal(store.publish(next).epoch, 2);
});

test('every outcome that reaches the store spends the Grant: fenced, released, notHolder, published not released', () => {
  const { db, store, target, runtimeRoot, clock } = withTarget();
  // Fenced (expired).
  const expired = store.acquire(target, 'holder-1').granted;
  clock.now += TTL_MS;
  assert.throws(() => store.publish(expired), { code: 'FENCED', reason: 'expired' });
  assert.throws(() => store.publish(expired), { code: 'GRANT_SPENT' });
  // Released, and a release answering notHolder.
  const released = store.acquire(target, 'holder-1').granted;
  const copy = Grant.fromSecret(released.exportSecret());
  assert.deepEqual(store.release(released), { released: true });
  assert.throws(() => store.release(released), { code: 'GRANT_SPENT' });
  assert.deepEqual(store.release(copy), { notHolder: { reason: 'released' } });
  assert.throws(() => store.publish(copy), { code: 'GRANT_SPENT' });
  // Published, not released: the COMMIT after the rename fails (SQLITE_FULL); the row stays held.
  const grant = store.acquire(target, 'holder-1').granted;
  const exported = grant.exportSecret();
  const exec = (sql, real) => {
    if (sql === 'COMMIT') throw Object.assign(new Error('database or disk is full'), { code: 'SQLITE_FULL' });
    return real();
  };
  const full = new ProjectionStore(faulty(db, { exec }), store.config);
  assert.throws(() => full.publish(grant), { code: 'PUBLISHED_NOT_RELEASED' });
  assert.equal(db.inTransaction, false);
  assert.equal(db.prepare('SELECT state FROM HookProjectionLeases WHERE target_id = ?').get(target).state, 'held');
  store.submit('router', submission(target, 0, 11, 'eleven'));
  const before = snapshot(db, runtimeRoot);
  assert.throws(() => store.publish(grant), { code: 'GRANT_SPENT' }, 'no second rename under the same epoch');
  assert.throws(() => store.release(grant), { code: 'GRANT_SPENT' });
  assert.deepEqual(snapshot(db, runtimeRoot), before);
  // A copy of the grant, rebuilt from its export: the store's own fence refuses it — the
  // document in place already carries its epoch (a grant renames at most one document).
  assert.throws(() => store.publish(Grant.fromSecret(exported)), (e) =>
    e.code === 'FENCED' && e.reason === 'document-ahead' && e.documentEpoch === grant.epoch);
  assert.deepEqual(snapshot(db, runtimeRoot).files, before.files, 'no second document of the epoch');
  // Its failure path released the grant the failed COMMIT had left held.
  assert.equal(db.prepare('SELECT state FROM HookProjectionLeases WHERE target_id = ?').get(target).state, 'released');
});

test('a publication that did not use its Grant hands it back: refused before the store, or not started (grantUnused)', async () => {
  const { db, dbPath, store, target, runtimeRoot } = withTarget({ timeout: 50 });
  const { granted } = store.acquire(target, 'holder-1');
  // Refused before the store: inside the host's transaction, and a malformed option.
  db.exec('BEGIN');
  assert.throws(() => store.publish(granted), { code: 'IN_TRANSACTION' });
  await assert.rejects(store.publishAsync(granted), { code: 'IN_TRANSACTION' });
  db.exec('ROLLBACK');
  assert.throws(() => store.publish(granted, 'not options'), { code: 'INVALID_INPUT' });
  // Not started: another connection holds SQLite's write lock (BUSY, grantUnused); the release
  // of the unused grant could not commit either (the lock is still held). The object is usable:
  // its release reaches the store and releases it.
  const other = new Database(dbPath, { timeout: 50 });
  other.exec('BEGIN IMMEDIATE');
  assert.throws(() => store.publish(granted), (e) => e.code === 'BUSY' && e.grantUnused === true && /did not commit either/.test(e.message));
  other.exec('ROLLBACK');
  other.close();
  assert.deepEqual(store.release(granted), { released: true });
  assert.throws(() => store.release(granted), { code: 'GRANT_SPENT' });
  const fresh = store.acquire(target, 'holder-1').granted;
  // A publication not started because a callback of the host's opened a transaction before its
  // BEGIN (here the probe, at `composed`): IN_TRANSACTION, grantUnused, the grant still usable.
  const probing = new ProjectionStore(db, { ...store.config, channels: CHANNELS, probe: (step) => step === 'composed' && db.exec('BEGIN') });
  assert.throws(() => probing.publish(fresh), (e) => e.code === 'IN_TRANSACTION' && e.grantUnused === true);
  assert.equal(db.inTransaction, true, 'the transaction the probe opened is the host\'s: not rolled back');
  db.exec('ROLLBACK');
  assert.equal(store.publish(fresh).epoch, fresh.epoch);
});

test('publishAsync spends its Grant at once: a use between its turns is refused', async () => {
  const { store, target } = withTarget();
  const { granted } = store.acquire(target, 'holder-1');
  const running = store.publishAsync(granted);
  assert.throws(() => store.publish(granted), { code: 'GRANT_SPENT' });
  assert.throws(() => store.release(granted), { code: 'GRANT_SPENT' });
  assert.equal((await running).epoch, 1);
});

test('the rule is per object: an export taken before the first use rebuilds another object, which the store answers', () => {
  const { store, target } = withTarget();
  const { granted } = store.acquire(target, 'holder-1');
  const copy = Grant.fromSecret(granted.exportSecret());
  assert.equal(store.publish(granted).epoch, 1);
  // The copy is not spent by the original's use; the store fences it (its grant was released).
  assert.throws(() => store.publish(copy), { code: 'FENCED', reason: 'released' });
  assert.throws(() => store.publish(copy), { code: 'GRANT_SPENT' });
});

// ---------------------------------------------------------------------------------------------
// 2. Host objects are read once

test('submit reads targetId and channel once: a getter answering differently cannot move the watermark back', () => {
  const { db, store, target } = withTarget();
  const elsewhere = store.admitTarget(tuple(1));
  assert.equal(watermark(db, target, 'computed-route'), 10);
  // targetId: the target at the first read, another (no row) at the second, the target after.
  let reads = 0;
  const byTarget = { ...submission(target, 0, 5, 'five') };
  Object.defineProperty(byTarget, 'targetId', { enumerable: true, get: () => (++reads === 2 ? elsewhere : target) });
  assert.throws(() => store.submit('router', byTarget), { code: 'REJECTED', rejection: 'regressed', submitted: '5', stored: '10' });
  assert.equal(reads, 1, 'targetId read once');
  // channel: a channel with no row at the first read, the stored one after.
  reads = 0;
  const byChannel = { ...submission(target, 0, 5, 'five') };
  Object.defineProperty(byChannel, 'channel', { enumerable: true, get: () => (++reads === 1 ? 'no-such-channel' : 'computed-route') });
  assert.throws(() => store.submit('router', byChannel), { code: 'REJECTED', rejection: 'unknown-channel' });
  assert.equal(reads, 1, 'channel read once');
  assert.equal(watermark(db, target, 'computed-route'), 10, 'the stored watermark never went back');
  assert.equal(watermark(db, elsewhere, 'computed-route'), undefined);
  // Every field of a submission is read once.
  const { proxy, reads: counts } = counted(submission(target, 0, 12, 'twelve'));
  assert.equal(store.submit('router', proxy), 'advanced');
  readOnce(counts, 'submit');
});

test('the store\'s configuration is read once: a runtimeRoot answering another directory later is not used', () => {
  const { db, runtimeRoot } = setup();
  const elsewhere = path.join(scratch(), 'elsewhere');
  let reads = 0;
  const config = { channels: CHANNELS, leaseTtlMs: TTL_MS, busyTimeoutMs: 1000, clock: () => START };
  Object.defineProperty(config, 'runtimeRoot', { enumerable: true, get: () => (++reads === 1 ? runtimeRoot : elsewhere) });
  const store = new ProjectionStore(db, config);
  assert.equal(reads, 1);
  assert.equal(store.config.runtimeRoot, runtimeRoot);
  const target = store.admitTarget(tuple(0));
  store.submit('router', submission(target, 0, 1, 'one'));
  assert.equal(store.publishNow(target, 'holder-1').published.path, path.join(runtimeRoot, 'hook-projections', target, 'current.json'));
  assert.equal(fs.existsSync(elsewhere), false);
  const { proxy, reads: counts } = counted({ runtimeRoot, channels: CHANNELS, leaseTtlMs: TTL_MS, busyTimeoutMs: 1000 });
  new ProjectionStore(db, proxy);
  readOnce(counts, 'new ProjectionStore');
});

test('every entry point reads each property of what it is handed once', async () => {
  const { db, store, target, runtimeRoot } = withTarget();
  const check = (what, value, call) => {
    const { proxy, reads } = counted(value);
    call(proxy);
    readOnce(reads, what);
  };
  check('initialize options', {}, (o) => initialize(db, o));
  check('acquire options', {}, (o) => store.release(store.acquire(target, 'holder-1', o).granted));
  check('publish options', {}, (o) => store.publish(store.acquire(target, 'holder-1').granted, o));
  check('publishNow options', {}, (o) => store.publishNow(target, 'holder-1', o));
  check('publishManyNow options', {}, (o) => store.publishManyNow([target], 'holder-1', o));
  check('publishManyNow target ids', [target], (ids) => store.publishManyNow(ids, 'holder-1'));
  check('admitTarget tuple', tuple(2), (t) => store.admitTarget(t));
  check('adoptJsWriterTables options', { channels: [] }, (o) => adoptJsWriterTables(db, [], o));
  const asyncReads = counted({});
  await store.publishNowAsync(target, 'holder-1', asyncReads.proxy);
  readOnce(asyncReads.reads, 'publishNowAsync options');
  const batchReads = counted([target]);
  await store.publishManyNowAsync(batchReads.proxy, 'holder-1');
  readOnce(batchReads.reads, 'publishManyNowAsync target ids');
  const publishAsyncReads = counted({});
  await store.publishAsync(store.acquire(target, 'holder-1').granted, publishAsyncReads.proxy);
  readOnce(publishAsyncReads.reads, 'publishAsync options');
  assert.ok(fs.existsSync(path.join(runtimeRoot, 'hook-projections', target, 'current.json')));
  // The write guard, the project lock and the ledger.
  const guard = new WriteGuard();
  const context = counted({ agentId: 'agent-1', sessionId: 'session-1' });
  check('WriteGuard.admitWrite request', { context: context.proxy, componentId: 'leaf', parentOf: (id) => (id === 'leaf' ? 'root' : null) }, (r) =>
    assert.equal(guard.admitWrite(r).admitted, true),
  );
  readOnce(context.reads, 'admitWrite context');
  check('admitWrite request', { context: null, componentId: 'leaf', parentOf: () => null, writeGuard: guard }, (r) => assert.equal(admitWrite(r).reason, 'legacy'));
  check('admitMove request', { context: { agentId: 'agent-1', sessionId: 'session-1' }, nodeId: 'leaf', newParentId: 'root', parentOf: (id) => (id === 'leaf' ? 'root' : null) }, (r) =>
    guard.admitMove(r),
  );
  const lockDir = scratch();
  let lock;
  check('ProjectLock options', {}, (o) => {
    lock = new ProjectLock(lockDir, o);
  });
  check('ProjectLock.acquire options', { wait: 'noWait' }, (o) => lock.acquire(o).release());
  check('Ledger options', { dir: scratch(), repo: scratch() }, (o) => new Ledger(o));
});

test('the Memory Core writer reads its configuration, tuples, envelopes and bindings once', () => {
  const dir = scratch();
  const db = memoryCore.openMemoryCoreDb(path.join(dir, 'memory-core.sqlite'));
  const root = path.join(dir, 'runtime', 'hook-projections');
  fs.mkdirSync(root, { recursive: true });
  const config = counted({
    hookProjectionRoot: root,
    hookProjectionLeaseTtlMs: 15_000,
    hookProjectionBusyTimeoutMs: 1_000,
    hookProjectionChannels: memoryCore.CHANNELS.map((c) => ({ ...c })),
  });
  const writer = makeHookProjectionWriter({ getDb: () => db, config: config.proxy, clock: () => memoryCore.NOW });
  readOnce(config.reads, 'makeHookProjectionWriter config');
  writer.ensureSchema();
  const frontier = memoryCore.frontier();
  const tupleReads = counted({ ...memoryCore.TUPLE });
  const envelopeReads = counted({ ...frontier });
  const answer = writer.submitChannel({
    channel: 'lifecycle-frontier',
    sourceWatermark: frontier.sourceWatermark,
    capturedAt: frontier.capturedAt,
    expiresAt: frontier.expiresAt,
    tuple: tupleReads.proxy,
    envelope: envelopeReads.proxy,
    isTargetAdmitted: () => true,
    mayProduceChannel: () => true,
  });
  assert.equal(answer.accepted, true, JSON.stringify(answer));
  readOnce(tupleReads.reads, 'submitChannel tuple');
  readOnce(envelopeReads.reads, 'submitChannel envelope');
  const publishTuple = counted({ ...memoryCore.TUPLE });
  const binding = counted({ ...memoryCore.BINDING });
  assert.equal(writer.publish({ tuple: publishTuple.proxy, consumerBinding: binding.proxy }).published, true);
  readOnce(publishTuple.reads, 'publish tuple');
  readOnce(binding.reads, 'publish consumerBinding');
});

// ---------------------------------------------------------------------------------------------
// 3. The transaction state is looked at after the host's last callback

/** A Memory Core store with an admitted target and one channel row. */
function memoryCoreStore() {
  const dir = scratch();
  const db = memoryCore.openMemoryCoreDb(path.join(dir, 'memory-core.sqlite'));
  initialize(db, { profile: memoryCore.PROFILE });
  const runtimeRoot = path.join(dir, 'runtime');
  fs.mkdirSync(runtimeRoot);
  const store = new ProjectionStore(db, {
    runtimeRoot,
    channels: memoryCore.CHANNELS,
    leaseTtlMs: 15_000,
    busyTimeoutMs: 1_000,
    profile: memoryCore.PROFILE,
    clock: () => memoryCore.NOW,
  });
  const target = store.admitTarget(memoryCore.TUPLE);
  return { db, store, target, runtimeRoot };
}

test('a consumerBinding whose toJSON opens a transaction: IN_TRANSACTION, the host\'s transaction still open, nothing written', async () => {
  const { db, store, target, runtimeRoot } = memoryCoreStore();
  const { granted } = store.acquire(target, 'memory-core-1');
  const opening = { toJSON: () => (db.exec('BEGIN'), memoryCore.BINDING) };
  const before = snapshot(db, runtimeRoot);
  const calls = [
    () => store.publish(granted, { consumerBinding: opening }),
    () => store.publishNow(target, 'memory-core-2', { consumerBinding: opening }),
    () => store.publishAsync(granted, { consumerBinding: opening }),
    () => store.publishNowAsync(target, 'memory-core-2', { consumerBinding: opening }),
  ];
  for (const call of calls) {
    // Refused before the store is touched (the JS layer's refusal, not the executor's at BEGIN).
    await assert.rejects(async () => call(), (e) => e.code === 'IN_TRANSACTION' && /inside a transaction; solewriter opens its own, so nothing was done/.test(e.message));
    assert.equal(db.inTransaction, true, 'the host\'s transaction is still open');
    db.exec('ROLLBACK');
    assert.deepEqual(snapshot(db, runtimeRoot), before, 'nothing written');
  }
  // The grant was not used: it publishes.
  assert.equal(store.publish(granted, { consumerBinding: memoryCore.BINDING }).epoch, granted.epoch);
});

test('a getter of a submission that opens a transaction: IN_TRANSACTION; a clock that does: HOST, the run stopped; neither rolled back by solewriter', () => {
  const { db, store, target, runtimeRoot } = withTarget();
  const before = snapshot(db, runtimeRoot);
  const opening = { ...submission(target, 0, 11, 'eleven') };
  Object.defineProperty(opening, 'envelopeJson', {
    enumerable: true,
    get: () => {
      db.exec('BEGIN');
      return submission(target, 0, 11, 'eleven').envelopeJson;
    },
  });
  assert.throws(() => store.submit('router', opening), { code: 'IN_TRANSACTION' });
  assert.equal(db.inTransaction, true);
  db.exec('ROLLBACK');
  let open = true;
  const clocked = new ProjectionStore(db, {
    ...store.config,
    channels: CHANNELS,
    clock: () => {
      if (open) db.exec('BEGIN');
      return START;
    },
  });
  assert.throws(() => clocked.acquire(target, 'holder-1'), (e) => e.code === 'HOST' && /the clock began a transaction/.test(e.message));
  assert.equal(db.inTransaction, true);
  db.exec('ROLLBACK');
  assert.deepEqual(snapshot(db, runtimeRoot), before, 'nothing written');
  // Inside the machine's own transaction, a clock that commits it stops the run: no grant.
  let reads = 0;
  const committing = new ProjectionStore(db, {
    ...store.config,
    channels: CHANNELS,
    clock: () => {
      if (++reads === 2) db.exec('COMMIT');
      return START;
    },
  });
  assert.throws(() => committing.acquire(target, 'holder-1'), (e) => e.code === 'HOST' && /the clock ended a transaction/.test(e.message));
  assert.equal(db.inTransaction, false);
  assert.deepEqual(snapshot(db, runtimeRoot).leases, before.leases, 'no grant written');
});

test('what cannot be copied is refused with a code, nothing done', () => {
  const { db, store, target, runtimeRoot } = withTarget();
  const before = snapshot(db, runtimeRoot);
  for (const bad of [null, 'a submission', 7]) {
    assert.throws(() => store.submit('router', bad), { code: 'INVALID_INPUT', message: 'submit: the submission must be an object' });
  }
  const cyclic = [{ ...CHANNELS[0] }];
  cyclic[0].self = cyclic;
  assert.throws(
    () => new ProjectionStore(db, { runtimeRoot, channels: cyclic, leaseTtlMs: TTL_MS, busyTimeoutMs: 1000 }),
    (e) => e.code === 'INVALID_CONFIG' && /^configuration: `channels` is not JSON \(.*\); nothing was done$/s.test(e.message),
  );
  const loop = { ...memoryCore.TUPLE };
  loop.self = loop;
  assert.throws(() => solewriter.targetIdFor(memoryCore.PROFILE, loop), { code: 'INVALID_INPUT' });
  const { deriveTargetId } = require('../lib/memory-core-writer');
  assert.throws(() => deriveTargetId(loop), (e) => e.code === 'INVALID_INPUT' && /^tuple is not JSON/.test(e.message));
  // A tuple whose toJSON answers nothing is a tuple with no fields: the writer's TypeError.
  assert.throws(() => deriveTargetId({ ...memoryCore.TUPLE, toJSON: () => undefined }), (e) => e instanceof TypeError && /is missing: schemaVersion/.test(e.message));
  assert.deepEqual(snapshot(db, runtimeRoot), before);
  assert.equal(store.submit('router', submission(target, 0, 10, 'ten')), 'replayed');
});

test('the Memory Core writer checks the envelope it stores: one whose toJSON answers no plain object is the writer\'s TypeError', () => {
  const dir = scratch();
  const db = memoryCore.openMemoryCoreDb(path.join(dir, 'memory-core.sqlite'));
  const root = path.join(dir, 'runtime', 'hook-projections');
  fs.mkdirSync(root, { recursive: true });
  const config = { hookProjectionRoot: root, hookProjectionLeaseTtlMs: 15_000, hookProjectionBusyTimeoutMs: 1_000, hookProjectionChannels: memoryCore.CHANNELS };
  const writer = makeHookProjectionWriter({ getDb: () => db, config, clock: () => memoryCore.NOW });
  writer.ensureSchema();
  const frontier = memoryCore.frontier();
  const args = (envelope) => ({
    tuple: memoryCore.TUPLE,
    channel: 'lifecycle-frontier',
    envelope,
    sourceWatermark: frontier.sourceWatermark,
    capturedAt: frontier.capturedAt,
    expiresAt: frontier.expiresAt,
    isTargetAdmitted: () => true,
    mayProduceChannel: () => true,
  });
  for (const answer of [[], null, undefined, 'text', 7]) {
    assert.throws(
      () => writer.submitChannel(args({ ...frontier, toJSON: () => answer })),
      (e) => e instanceof TypeError && e.message === '[hookProjectionSubmission] an envelope must be a plain object',
      `toJSON answering ${JSON.stringify(answer)}`,
    );
  }
  // What toJSON answers is what is checked and stored: a schemaVersion it drops is missing.
  assert.throws(() => writer.submitChannel(args({ ...frontier, toJSON: () => ({ ...frontier, schemaVersion: undefined }) })), /must carry a schemaVersion/);
  assert.equal(db.prepare('SELECT count(*) AS n FROM HookProjectionChannels').get().n, 0);
  assert.equal(writer.submitChannel(args({ ...frontier, toJSON: () => frontier })).outcome, 'advanced');
});
