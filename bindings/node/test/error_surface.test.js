'use strict';
/**
 * The codes of the errors a caller sees: only the package's own errors pass as they are — a
 * host's error that looks like one (a solewriter code, even the package's old global mark) is
 * the host's, `HOST`; and an argument object that cannot be read (a throwing getter, a Proxy
 * whose traps throw, a `BigInt` where it is serialized) is `INVALID_INPUT` — `INVALID_CONFIG`
 * for a store's configuration — from every entry point, never an error without a documented
 * code.
 */

const test = require('node:test');
const assert = require('node:assert/strict');
const solewriter = require('..');
const { ERROR_CODES, Grant, ProjectionStore, ProjectLock, WriteGuard, Ledger } = solewriter;
const { setup, scratch, tuple } = require('./helpers');

/** A host's error dressed as solewriter's: its code, and the mark the package once used. */
function forged() {
  return Object.assign(new Error('forged by the host'), { code: 'BUSY', [Symbol.for('solewriter.error')]: 'BUSY' });
}

test("a host callback's error dressed as the package's is the host's: HOST, never BUSY", async () => {
  const { db, store } = setup();
  const t = store.admitTarget(tuple(0));
  const host = (e) => e.code === 'HOST' && /forged by the host/.test(e.message);
  const clocked = new ProjectionStore(db, { ...store.config, clock: () => { throw forged(); } });
  assert.throws(() => clocked.acquire(t, 'holder-1'), host);
  assert.throws(() => clocked.publishNow(t, 'holder-1'), host);
  await assert.rejects(clocked.publishNowAsync(t, 'holder-1'), host);
  assert.throws(() => solewriter.adoptJsWriterTables(db, [], { clock: () => { throw forged(); } }), host);
  const context = { agentId: 'a', sessionId: 's' };
  const parentOf = () => {
    throw forged();
  };
  assert.throws(() => new WriteGuard().admitWrite({ context, componentId: 'x', parentOf }), host);
  assert.equal(db.inTransaction, false);
});

/** An object every read of which throws (a getter of each field). */
function throwingGetters() {
  return new Proxy({}, { get: () => { throw new Error('a getter of the host threw'); } });
}

/** An object every look at which throws: its keys, its fields, its prototype. */
function throwingTraps() {
  const fail = () => {
    throw new Error('a trap of the host threw');
  };
  return new Proxy({}, { get: fail, has: fail, ownKeys: fail, getOwnPropertyDescriptor: fail, getPrototypeOf: fail });
}

test('an argument object that cannot be read is INVALID_INPUT (a configuration: INVALID_CONFIG), from every entry point', async () => {
  const { db, store, runtimeRoot } = setup();
  const t = store.admitTarget(tuple(0));
  const grant = store.acquire(t, 'holder-1').granted;
  const guard = new WriteGuard();
  const lock = new ProjectLock(scratch());
  const ledger = new Ledger({ dir: scratch(), repo: scratch() });
  const config = { runtimeRoot, channels: [], leaseTtlMs: 100, busyTimeoutMs: 100 };
  const context = { agentId: 'a', sessionId: 's' };
  const parentOf = () => null;
  // Each entry point, each object argument of it as `x`, and the code it must throw.
  const table = [
    ['initialize: db', (x) => solewriter.initialize(x)],
    ['initialize: options', (x) => solewriter.initialize(db, x)],
    ['adoptJsWriterTables: db', (x) => solewriter.adoptJsWriterTables(x, [])],
    ['adoptJsWriterTables: tuples', (x) => solewriter.adoptJsWriterTables(db, x)],
    ['adoptJsWriterTables: a tuple', (x) => solewriter.adoptJsWriterTables(db, [x])],
    ['adoptJsWriterTables: options', (x) => solewriter.adoptJsWriterTables(db, [], x)],
    ['adoptJsWriterTables: a channel', (x) => solewriter.adoptJsWriterTables(db, [], { channels: [x] })],
    ['new ProjectionStore: db', (x) => new ProjectionStore(x, config), 'INVALID_CONFIG'],
    ['new ProjectionStore: config', (x) => new ProjectionStore(db, x), 'INVALID_CONFIG'],
    ['new ProjectionStore: a channel', (x) => new ProjectionStore(db, { ...config, channels: [x] }), 'INVALID_CONFIG'],
    ['admitTarget: tuple', (x) => store.admitTarget(x)],
    ['submit: submission', (x) => store.submit('router', x)],
    ['acquire: options', (x) => store.acquire(t, 'holder-2', x)],
    ['publish: options', (x) => store.publish(grant, x)],
    ['publish: consumer binding', (x) => store.publish(grant, { consumerBinding: x })],
    ['publishNow: options', (x) => store.publishNow(t, 'holder-2', x)],
    ['publishNow: consumer binding', (x) => store.publishNow(t, 'holder-2', { consumerBinding: x })],
    ['publishAsync: options', (x) => store.publishAsync(grant, x)],
    ['publishAsync: consumer binding', (x) => store.publishAsync(grant, { consumerBinding: x })],
    ['publishNowAsync: options', (x) => store.publishNowAsync(t, 'holder-2', x)],
    ['publishNowAsync: consumer binding', (x) => store.publishNowAsync(t, 'holder-2', { consumerBinding: x })],
    ['publishManyNow: target ids', (x) => store.publishManyNow(x, 'holder-2')],
    ['publishManyNow: options', (x) => store.publishManyNow([t], 'holder-2', x)],
    ['publishManyNow: consumer binding', (x) => store.publishManyNow([t], 'holder-2', { consumerBinding: x })],
    ['publishManyNowAsync: target ids', (x) => store.publishManyNowAsync(x, 'holder-2')],
    ['publishManyNowAsync: options', (x) => store.publishManyNowAsync([t], 'holder-2', x)],
    ['publishManyNowAsync: consumer binding', (x) => store.publishManyNowAsync([t], 'holder-2', { consumerBinding: x })],
    ['targetId: tuple', (x) => solewriter.targetId(x)],
    ['targetIdFor: tuple', (x) => solewriter.targetIdFor('live-lane-awareness-projection.v1', x)],
    ['Grant.fromSecret: export', (x) => Grant.fromSecret(x)],
    ['parseBridgeFrame: frame', (x) => solewriter.parseBridgeFrame(x)],
    ['parseAgentEnvelope: frame', (x) => solewriter.parseAgentEnvelope(x)],
    ['admitWrite: request', (x) => solewriter.admitWrite(x)],
    ['admitWrite: context', (x) => solewriter.admitWrite({ context: x, componentId: 'c', parentOf, writeGuard: guard })],
    ['admitWrite: context, unguarded', (x) => solewriter.admitWrite({ context: x, componentId: 'c', parentOf })],
    ['WriteGuard#admitWrite: request', (x) => guard.admitWrite(x)],
    ['WriteGuard#admitWrite: context', (x) => guard.admitWrite({ context: x, componentId: 'c', parentOf })],
    ['WriteGuard#admitMove: request', (x) => guard.admitMove(x)],
    ['WriteGuard#admitMove: context', (x) => guard.admitMove({ context: x, nodeId: 'n', newParentId: 'p', parentOf })],
    ['WriteGuard#releaseWrite: lock', (x) => guard.releaseWrite(x)],
    ['WriteGuard#releaseAgent: writer', (x) => guard.releaseAgent(x)],
    ['new ProjectLock: options', (x) => new ProjectLock(scratch(), x)],
    ['ProjectLock#acquire: options', (x) => lock.acquire(x)],
    ['new Ledger: options', (x) => new Ledger(x)],
    ['new Ledger: gitEnv', (x) => new Ledger({ dir: scratch(), repo: scratch(), gitEnv: x })],
    ['Ledger#demand: query', (x) => ledger.demand(x)],
    ['Ledger#build: query', (x) => ledger.build(x)],
    ['Ledger#demandAsync: query', (x) => ledger.demandAsync(x)],
    ['Ledger#buildAsync: query', (x) => ledger.buildAsync(x)],
  ];
  for (const [what, call, expected = 'INVALID_INPUT'] of table) {
    for (const [kind, hostile] of [['getters', throwingGetters], ['traps', throwingTraps]]) {
      await assert.rejects(
        async () => call(hostile()),
        (e) => {
          assert.ok(e instanceof Error, `${what} (${kind}): threw a non-Error`);
          assert.ok(ERROR_CODES.includes(e.code), `${what} (${kind}): an undocumented code ${e.code}: ${e.message}`);
          assert.equal(e.code, expected, `${what} (${kind}): ${e.message}`);
          return true;
        },
        `${what} (${kind})`,
      );
    }
  }
  // A BigInt where a host value is serialized (JSON.stringify throws a TypeError on it).
  const bigints = [
    ['publish: consumer binding', () => store.publish(grant, { consumerBinding: { n: 1n } })],
    ['publishNow: consumer binding', () => store.publishNow(t, 'holder-2', { consumerBinding: { n: 1n } })],
    ['publishNowAsync: consumer binding', () => store.publishNowAsync(t, 'holder-2', { consumerBinding: { n: 1n } })],
    ['publishManyNow: consumer binding', () => store.publishManyNow([t], 'holder-2', { consumerBinding: { n: 1n } })],
    ['publishManyNowAsync: consumer binding', () => store.publishManyNowAsync([t], 'holder-2', { consumerBinding: { n: 1n } })],
    ['adoptJsWriterTables: a tuple', () => solewriter.adoptJsWriterTables(db, [{ ...tuple(1), agentId: 1n }])],
    ['adoptJsWriterTables: a channel', () => solewriter.adoptJsWriterTables(db, [], { channels: [{ name: 'c', maxEnvelopeBytes: 1n }] })],
  ];
  for (const [what, call] of bigints) {
    await assert.rejects(async () => call(), (e) => e.code === 'INVALID_INPUT' && /BigInt/.test(e.message), `${what} (BigInt)`);
  }
  // Nothing was done: the grant was never spent, the connection is clean.
  assert.equal(db.inTransaction, false);
  assert.equal(store.publish(grant).epoch, 1);
});
