'use strict';
/**
 * The JS layer's own promises, in process (so mutation testing sees them): the error codes are
 * one list, the same in the code, the types and the manual; every error of the binding layer
 * becomes one of them; refusals name what they refuse; solewriter's transactions run at FULL
 * and leave the host's level as it was, whatever it was; grants are checked by their brand.
 */

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const Database = require('better-sqlite3');
const solewriter = require('..');
const { ERROR_CODES, Grant, ProjectionStore, ProjectLock, initialize, adoptJsWriterTables, executeSqlEffect, SQL } = solewriter;
const { setup, faulty, scratch, tuple, submission, CHANNELS } = require('./helpers');

const FULL = 2;

test('ERROR_CODES is one list: the same codes in index.d.ts and in the manual, each once', () => {
  assert.equal(new Set(ERROR_CODES).size, ERROR_CODES.length, 'no code twice');
  assert.ok(Object.isFrozen(ERROR_CODES));
  const types = fs.readFileSync(path.join(__dirname, '..', 'index.d.ts'), 'utf8');
  const union = types.slice(types.indexOf('export type ErrorCode ='), types.indexOf(';', types.indexOf('export type ErrorCode =')));
  const typed = [...union.matchAll(/'([A-Z_]+)'/g)].map((m) => m[1]);
  assert.deepEqual([...typed].sort(), [...ERROR_CODES].sort());
  const manual = fs.readFileSync(path.join(__dirname, '..', '..', '..', 'docs', 'node.md'), 'utf8');
  const table = manual.slice(manual.indexOf('## When a call fails'), manual.indexOf('**The host never dies'));
  const documented = new Set([...table.matchAll(/^\| ([^|]+) \|/gm)].flatMap((m) => [...m[1].matchAll(/`([A-Z_]+)`/g)].map((c) => c[1])));
  assert.deepEqual([...documented].sort(), [...ERROR_CODES].sort());
});

test('the binding layer\'s errors become documented codes', () => {
  const { db, store } = setup();
  const t = store.admitTarget(tuple(0));
  // A value of the wrong type reaching the addon: napi-rs's status, as INVALID_INPUT.
  assert.throws(() => store.acquire(5, 'holder-1'), (e) => e.code === 'INVALID_INPUT' && /StringExpected/.test(e.message));
  // An answer of the host's connection the binding cannot read (a lease row of null): HOST.
  const statement = (sql, method, args, real) => (sql === SQL.readLease ? null : real());
  const odd = new ProjectionStore(faulty(db, { statement }), store.config);
  assert.throws(() => odd.acquire(t, 'holder-1'), (e) => e.code === 'HOST' && /callback of the host/.test(e.message));
  assert.equal(db.inTransaction, false);
  // A documented error passes unchanged.
  assert.throws(() => store.acquire('0'.repeat(64), 'holder-1'), { code: 'NOT_ADMITTED' });
  // A host callback that throws an error with a code of its own is still the host's: HOST.
  const eio = new ProjectionStore(db, { ...store.config, clock: () => { throw Object.assign(new Error('clock device'), { code: 'EIO' }); } });
  assert.throws(() => eio.acquire(t, 'holder-1'), { code: 'HOST' });
  // Only napi-rs's own statuses are argument errors, and only the package's own errors (marked)
  // pass as they are: a look-alike code from the host, one of ours included, is HOST.
  for (const code of ['1StringExpected', 'StringExpected1', 'Stringexpected', 'EIO', 'BUSY', 'FENCED']) {
    const odd = new ProjectionStore(db, { ...store.config, clock: () => { throw Object.assign(new Error('odd'), { code }); } });
    assert.throws(() => odd.acquire(t, 'holder-1'), { code: 'HOST' }, code);
  }
  // Arguments that are not what the calls take: INVALID_INPUT, never an uncoded TypeError.
  const invalid = (call, pattern) => assert.throws(call, (e) => e.code === 'INVALID_INPUT' && pattern.test(e.message));
  invalid(() => store.admitTarget({ ...tuple(1), agentId: 1n }), /^tuple is not JSON \(/);
  invalid(() => initialize({}), /^initialize takes the host's better-sqlite3 Database$/);
  invalid(() => adoptJsWriterTables(undefined, []), /^adoptJsWriterTables takes the host's better-sqlite3 Database$/);
  for (const options of [null, 'x']) {
    invalid(() => adoptJsWriterTables(db, [], options), /^adoptJsWriterTables: options must be an object$/);
    invalid(() => new ProjectLock(scratch(), options), /^ProjectLock: options must be an object$/);
  }
  const closed = new Database(path.join(scratch(), 'closed.sqlite'));
  closed.close();
  invalid(() => initialize(closed), /^initialize: the database connection is closed$/);
  // The project lock's calls too.
  assert.throws(() => new ProjectLock(1), { code: 'INVALID_INPUT' });
  assert.throws(() => new ProjectLock(scratch()).acquire({ wait: 1n }), (e) => e.code === 'INVALID_INPUT' && /not JSON/.test(e.message));
  assert.throws(() => new ProjectLock(scratch()).clear(undefined), { code: 'INVALID_INPUT' });
});

test('SQLite errors of the JS-side transactions: BUSY, SQLITE with sqliteCode, or the caller\'s INVALID_INPUT', () => {
  const { db, dbPath, store } = setup({ timeout: 20 });
  const t = store.admitTarget(tuple(0));
  const other = new Database(dbPath);
  other.exec('BEGIN IMMEDIATE');
  const busy = (e) => e.code === 'BUSY' && /store is busy .*nothing was written/.test(e.message);
  assert.throws(() => store.submit('router', submission(t, 0, 1, 'x')), busy);
  assert.throws(() => store.admitTarget(tuple(1)), busy);
  assert.throws(() => initialize(db), busy);
  other.exec('ROLLBACK');
  other.close();
  assert.throws(() => store.submit('router', null), { code: 'INVALID_INPUT' });
  assert.throws(() => store.submit('router', { ...submission(t, 0, 1, 'x'), targetId: {} }), (e) => e.code === 'INVALID_INPUT' && /nothing was written/.test(e.message));
  db.exec('DROP TABLE HookProjectionChannels');
  assert.throws(() => store.inspect(), (e) => e.code === 'SQLITE' && e.sqliteCode === 'SQLITE_ERROR' && /SQLITE_ERROR: no such table/.test(e.message));
  assert.equal(db.inTransaction, false);
});

test('initialize answers created, then present, and names what it refuses', () => {
  const dir = scratch();
  const db = new Database(path.join(dir, 'h.sqlite'));
  assert.throws(() => initialize(db), (e) => e.code === 'FOREIGN_SCHEMA' && /journal_mode delete; solewriter needs WAL/.test(e.message));
  db.pragma('journal_mode = WAL');
  assert.equal(initialize(db), 'created');
  assert.equal(initialize(db), 'present');
  db.exec('BEGIN');
  assert.throws(() => initialize(db), (e) => e.code === 'IN_TRANSACTION' && /initialize opens its own/.test(e.message));
  assert.throws(() => adoptJsWriterTables(db, []), (e) => e.code === 'IN_TRANSACTION' && /the adoption opens its own/.test(e.message));
  db.exec('ROLLBACK');
  db.exec('CREATE INDEX extra ON HookProjectionChannels (channel)');
  assert.throws(() => initialize(db), (e) => e.code === 'FOREIGN_SCHEMA' && /table HookProjectionChannels must stand alone, found table HookProjectionChannels, index extra/.test(e.message));
  db.exec('DROP INDEX extra');
  db.exec('DROP TABLE HookProjectionChannels');
  assert.throws(() => initialize(db), (e) => e.code === 'FOREIGN_SCHEMA' && /table HookProjectionChannels is missing/.test(e.message));
  db.exec('CREATE TABLE HookProjectionChannels (target_id TEXT)');
  assert.throws(() => initialize(db), (e) => e.code === 'FOREIGN_SCHEMA' && /table HookProjectionChannels has another shape: CREATE TABLE HookProjectionChannels \(target_id TEXT\)/.test(e.message));
  // A lone object of the table's name that is not the table: a view, or a table spelt otherwise.
  db.exec('DROP TABLE HookProjectionChannels');
  db.exec('CREATE VIEW HookProjectionChannels AS SELECT 1 AS target_id');
  assert.throws(() => initialize(db), (e) => e.code === 'FOREIGN_SCHEMA' && /must stand alone, found view HookProjectionChannels/.test(e.message));
  db.exec('DROP VIEW HookProjectionChannels');
  db.exec('CREATE TABLE hookprojectionchannels (target_id TEXT)');
  assert.throws(() => initialize(db), (e) => e.code === 'FOREIGN_SCHEMA' && /must stand alone, found table hookprojectionchannels/.test(e.message));
  db.close();
});

test('configuration refusals say what is wrong', () => {
  const { db, runtimeRoot } = setup();
  const config = { runtimeRoot, channels: CHANNELS, leaseTtlMs: 100, busyTimeoutMs: 100 };
  const refused = (make, pattern) => assert.throws(make, (e) => e.code === 'INVALID_CONFIG' && pattern.test(e.message));
  refused(() => new ProjectionStore(null, config), /better-sqlite3 Database/);
  refused(() => new ProjectionStore({ prepare() {} }, config), /better-sqlite3 Database/);
  refused(() => new ProjectionStore({ pragma() {} }, config), /better-sqlite3 Database/);
  refused(() => new ProjectionStore(Object.assign(() => {}, { prepare() {}, pragma() {} }), config), /better-sqlite3 Database/);
  refused(() => new ProjectionStore(db, null), /a configuration object is required/);
  refused(() => new ProjectionStore(db, 'x'), /a configuration object is required/);
  refused(() => new ProjectionStore(db, { ...config, lease: 1 }), /unknown field `lease` \(known: runtimeRoot, hookProjectionRoot, channels/);
  refused(() => new ProjectionStore(db, { ...config, runtimeRoot: path.join(runtimeRoot, 'absent') }), /cannot be read \(ENOENT\)/);
  const file = path.join(runtimeRoot, 'file');
  fs.writeFileSync(file, '');
  refused(() => new ProjectionStore(db, { ...config, runtimeRoot: file }), /is not a directory/);
  refused(() => new ProjectionStore(db, { ...config, channels: [{ ...CHANNELS[0], maxEnvelopeBytes: 1n }] }), /`channels` is not JSON/);
  refused(() => new ProjectionStore(db, { ...config, leaseTtlMs: 2 ** 52 + 1 }), /leaseTtlMs.*at most 2\^52/);
  assert.equal(new ProjectionStore(db, { ...config, leaseTtlMs: 2 ** 52 }).config.leaseTtlMs, 2 ** 52);
});

test('a call inside one of the host\'s transactions is refused, saying solewriter opens its own', () => {
  const { db, store } = setup();
  const t = store.admitTarget(tuple(0));
  db.exec('BEGIN');
  for (const call of [() => store.acquire(t, 'holder-1'), () => store.submit('router', submission(t, 0, 1, 'x')), () => store.endLease(t)]) {
    assert.throws(call, (e) => e.code === 'IN_TRANSACTION' && /solewriter opens its own, so nothing was done/.test(e.message));
  }
  db.exec('ROLLBACK');
});

test('acquire and publishNow take no options, and the shipped addon refuses a chosen token', () => {
  const { store } = setup();
  const t = store.admitTarget(tuple(0));
  for (const options of [null, 'x', 5, { tokenHex: 'ab'.repeat(32) }]) {
    assert.throws(() => store.acquire(t, 'holder-1', options), (e) => e.code === 'INVALID_INPUT' && /take no options/.test(e.message));
  }
  assert.ok(store.acquire(t, 'holder-1', {}).granted, 'an empty options object is no option');
  const chosen = { [Symbol.for('solewriter.test.token')]: 'ab'.repeat(32) };
  assert.throws(() => store.publishNow(t, 'holder-2', chosen), (e) => e.code === 'INVALID_INPUT' && /test seam/.test(e.message));
});

/**
 * Records the connection's `synchronous` level inside every transaction solewriter runs on it:
 * the machines' (`BEGIN IMMEDIATE` through `db.exec`) and the JS-side ones (`db.transaction`).
 */
function observeLevels(db) {
  const seen = [];
  const level = () => db.pragma('synchronous', { simple: true });
  const exec = db.exec.bind(db);
  db.exec = (sql) => {
    const r = exec(sql);
    if (sql === 'BEGIN IMMEDIATE') seen.push(level());
    return r;
  };
  const transaction = db.transaction.bind(db);
  db.transaction = (fn) => transaction((...args) => {
    seen.push(level());
    return fn(...args);
  });
  return seen;
}

for (const [name, host] of [['OFF', 0], ['NORMAL', 1], ['FULL', 2], ['EXTRA', 3]]) {
  test(`a host at ${name}: every solewriter transaction runs at FULL or above, and the host's level is back after each call`, async () => {
    const { db, store } = setup({ ttlMs: 60000 });
    db.pragma(`synchronous = ${host}`);
    const seen = observeLevels(db);
    const t = store.admitTarget(tuple(0));
    const calls = {
      submit: () => store.submit('router', submission(t, 0, 1, 'x')),
      acquire: () => store.acquire(t, 'holder-1'),
      publish: (g) => store.publish(g.granted),
      publishNow: () => store.publishNow(t, 'holder-1'),
      acquireAgain: () => store.acquire(t, 'holder-1'),
      release: (g) => store.release(g.granted),
      acquireThird: () => store.acquire(t, 'holder-1'),
      endLease: () => store.endLease(t),
      acquireFourth: () => store.acquire(t, 'holder-1'),
      publishAsync: (g) => store.publishAsync(g.granted),
      publishNowAsync: () => store.publishNowAsync(t, 'holder-1'),
      publishManyNow: () => store.publishManyNow([t], 'holder-1'),
      publishManyNowAsync: () => store.publishManyNowAsync([t], 'holder-1'),
      initialize: () => initialize(db),
      adopt: () => adoptJsWriterTables(db, []),
    };
    let last;
    for (const [call, run] of Object.entries(calls)) {
      seen.length = 0;
      last = await run(last);
      assert.equal(db.pragma('synchronous', { simple: true }), host, `${call}: the host's level after the call`);
      assert.ok(seen.every((l) => l === Math.max(host, FULL)), `${call}: levels inside its transactions ${seen}`);
      assert.ok(seen.length > 0, `${call}: ran a transaction`);
    }
  });
}

test('a level the host set after a call that could not restore is the host\'s choice: it stays', () => {
  const { db, store } = setup();
  const t = store.admitTarget(tuple(0));
  executeSqlEffect(db, { kind: 'begin' });
  db.exec('ROLLBACK');
  db.pragma('synchronous = OFF'); // the host's own choice, made since
  store.acquire(t, 'holder-1');
  assert.equal(db.pragma('synchronous', { simple: true }), 0);
});

test('a level left raised by a call that could not restore it is put back by the next call', () => {
  const { db, store } = setup();
  const t = store.admitTarget(tuple(0));
  // As a call that failed between its raise and its restore would leave it.
  executeSqlEffect(db, { kind: 'begin' });
  db.exec('ROLLBACK');
  assert.equal(db.pragma('synchronous', { simple: true }), FULL, 'left raised');
  store.acquire(t, 'holder-1');
  assert.equal(db.pragma('synchronous', { simple: true }), 1, 'the host\'s level is back');
});

test('the executor: rollback without a transaction is no error; an unknown effect is reported', () => {
  const { db } = setup();
  assert.deepEqual(executeSqlEffect(db, { kind: 'rollback' }), {});
  assert.deepEqual(executeSqlEffect(db, { kind: 'nope' }), { error: { code: 'UNKNOWN_EFFECT', message: 'unknown SQL effect nope' } });
  db.exec('BEGIN');
  assert.match(executeSqlEffect(db, { kind: 'begin' }).error.message, /inside a transaction of the host/);
  db.exec('ROLLBACK');
  const failed = executeSqlEffect(db, { kind: 'writeGrant', targetId: {}, epoch: 1 });
  assert.equal(typeof failed.error.code, 'string');
  assert.notEqual(failed.error.code, 'ERROR');
});

test('a grant is known by its brand: malformed exports and look-alikes are refused', () => {
  const { store } = setup();
  const t = store.admitTarget(tuple(0));
  const grant = store.acquire(t, 'holder-1').granted;
  const exported = grant.exportSecret();
  const refused = (fields, pattern) =>
    assert.throws(() => Grant.fromSecret({ ...exported, ...fields }), (e) => e.code === 'INVALID_INPUT' && pattern.test(e.message));
  // Not strings, even when they print as one.
  const disguised = (text) => ({ toString: () => text });
  for (const token of [`${exported.token}0`, `0${exported.token}`, exported.token.toUpperCase(), 5, disguised(exported.token)]) {
    refused({ token }, /grant: token must be 64 lowercase hex/);
  }
  for (const targetId of [`${t}0`, `0${t}`, 5, disguised(t)]) refused({ targetId }, /grant: targetId must be 32 or 64 lowercase hex/);
  for (const epoch of [-1, 1.5, 2 ** 53]) refused({ epoch }, /grant: epoch must be a non-negative safe integer/);
  refused({ holder: 5 }, /grant: holder must be a string/);
  assert.equal(Grant.fromSecret({ ...exported, epoch: 0 }).epoch, 0, 'epoch 0 is an epoch');
  for (const bad of [null, 'x', 5, undefined]) {
    assert.throws(() => Grant.fromSecret(bad), (e) => e.code === 'INVALID_INPUT' && /takes what exportSecret\(\) returned/.test(e.message));
  }
  const lookAlikes = [new Proxy(grant, {}), Object.create(Grant.prototype), { ...grant }, null, undefined];
  for (const fake of lookAlikes) {
    assert.throws(() => store.publish(fake), (e) => e.code === 'INVALID_INPUT' && /a plain object is not a credential/.test(e.message));
  }
  assert.equal(store.publish(grant).epoch, 1);
});

test('a probe\'s promise pauses only an asynchronous publication, and holds it for as long as it is pending', async () => {
  const { db, store } = setup({ ttlMs: 60000 });
  const t = store.admitTarget(tuple(0));
  store.submit('router', submission(t, 0, 1, 'x'));
  // Synchronous: a promise returned by the probe pauses nothing.
  const eager = new ProjectionStore(db, { ...store.config, probe: () => new Promise(() => {}) });
  assert.equal(eager.publish(eager.acquire(t, 'holder-1').granted).epoch, 1);
  // Asynchronous: a value that is no promise pauses nothing either.
  const plain = new ProjectionStore(db, { ...store.config, probe: () => 5 });
  assert.equal((await plain.publishNowAsync(t, 'holder-1')).published.epoch, 2);
  // A pending promise holds the publication (but no lock: the operator's end is not busy) until
  // it settles.
  let resume;
  const paused = new ProjectionStore(db, {
    ...store.config,
    probe: (step) => (step === 'temp-written' ? new Promise((r) => (resume = r)) : undefined),
  });
  const publishing = paused.publishNowAsync(t, 'holder-1');
  while (!resume) await new Promise((r) => setImmediate(r));
  await new Promise((r) => setTimeout(r, 50));
  const other = new ProjectionStore(new Database(db.name), { ...store.config, busyTimeoutMs: 20 });
  assert.deepEqual(other.endLease(t), { nothingHeld: { epoch: 2, why: 'released' } }, 'no lock is held meanwhile');
  assert.equal(store.readProjection(t).fencingEpoch, 2, 'not published while paused');
  resume();
  assert.equal((await publishing).published.epoch, 3);
});

test('a missing addon is ADDON_MISSING, naming the file', () => {
  // The package's modules are loaded afresh (the addon is loaded once, by `lib/addon.js`), then
  // the ones of this process put back.
  const root = path.dirname(require.resolve('..'));
  const own = (file) => file.startsWith(root) && !file.startsWith(path.join(root, 'test')) && !file.includes('node_modules');
  const saved = process.env.SOLEWRITER_NODE_ADDON;
  const cached = Object.fromEntries(Object.entries(require.cache).filter(([file]) => own(file)));
  process.env.SOLEWRITER_NODE_ADDON = path.join(scratch(), 'absent.node');
  for (const file of Object.keys(cached)) delete require.cache[file];
  try {
    assert.throws(() => require('..'), (e) => e.code === 'ADDON_MISSING' && /cannot load the solewriter addon at .*absent\.node \(build it: npm run build\)/.test(e.message));
  } finally {
    if (saved === undefined) delete process.env.SOLEWRITER_NODE_ADDON;
    else process.env.SOLEWRITER_NODE_ADDON = saved;
    for (const file of Object.keys(require.cache)) if (own(file)) delete require.cache[file];
    Object.assign(require.cache, cached);
  }
});

test('an asynchronous publication whose driver fails between turns lets its target lock go at once', async () => {
  const { db, store, clock } = setup({ ttlMs: 60000 });
  const t = store.admitTarget(tuple(0));
  store.submit('router', submission(t, 0, 1, 'x'));
  const grant = store.acquire(t, 'holder-1').granted;
  // A test clock that fails at the publication's second turn: after its pool turn took the
  // target lock.
  let reads = 0;
  const failing = new ProjectionStore(db, {
    ...store.config,
    clock: () => {
      reads += 1;
      if (reads === 2) throw new Error('the clock failed');
      return clock.now;
    },
  });
  await assert.rejects(failing.publishAsync(grant), (e) => e.code === 'HOST' && /the clock failed/.test(e.message));
  const other = new ProjectionStore(new Database(db.name), { ...store.config, busyTimeoutMs: 20 });
  assert.equal(other.endLease(t).ended.epoch, 1, 'the target lock is free: the abandoned run let it go');
});

test('an executor answer without the rows asked for is HOST, never an empty document', () => {
  const { db, store, runtimeRoot } = setup({ ttlMs: 60000 });
  const t = store.admitTarget(tuple(0));
  store.submit('router', submission(t, 0, 1, 'x'));
  const statement = (sql, method, args, real) => (sql === SQL.readChannels ? undefined : real());
  const odd = new ProjectionStore(faulty(db, { statement }), store.config);
  assert.throws(() => odd.publishNow(t, 'holder-1'), (e) => e.code === 'HOST' && /answered without `channels`/.test(e.message));
  assert.equal(fs.existsSync(path.join(runtimeRoot, 'hook-projections', t, 'current.json')), false, 'nothing published');
});

test('the addon itself refuses a configuration without its timing: no default below the JS layer either', () => {
  const module = { exports: {} };
  process.dlopen(module, process.env.SOLEWRITER_NODE_ADDON || path.join(__dirname, '..', 'solewriter.node'));
  const { runtimeRoot } = setup();
  const full = { channelsJson: JSON.stringify(CHANNELS), leaseTtlMs: 100, busyTimeoutMs: 100, runtimeRoot };
  assert.ok(new module.exports.NativeStore(full) instanceof module.exports.NativeStore);
  for (const field of ['channelsJson', 'leaseTtlMs', 'busyTimeoutMs', 'runtimeRoot']) {
    const { [field]: _, ...missing } = full;
    // The addon's class throws its own coded error: no JSON text, no JS layer needed to read it.
    assert.throws(() => new module.exports.NativeStore(missing), (e) => e instanceof Error && e.code === 'INVALID_CONFIG' && /missing/.test(e.message), field);
  }
});

test('what a probe throws is ignored: the publication goes on', () => {
  const { db, store } = setup({ ttlMs: 60000 });
  const t = store.admitTarget(tuple(0));
  store.submit('router', submission(t, 0, 1, 'x'));
  const throwing = new ProjectionStore(db, {
    ...store.config,
    probe: () => {
      throw new Error('the probe failed');
    },
  });
  assert.equal(throwing.publishNow(t, 'holder-1').published.epoch, 1);
  assert.equal(db.inTransaction, false);
});
