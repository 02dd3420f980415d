'use strict';
/**
 * The configuration is checked once, at construction, with no default for any timing value:
 * a field missing, unknown, of another type or out of range is INVALID_CONFIG naming it, and
 * no store exists. A configuration accepted there is never refused by a later call.
 */

const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const Database = require('better-sqlite3');
const { ProjectionStore, ERROR_CODES, initialize } = require('..');
const { setup, CHANNELS, scratch } = require('./helpers');

function valid() {
  const { db, runtimeRoot } = setup();
  return { db, config: { runtimeRoot, channels: CHANNELS.map((c) => ({ ...c })), leaseTtlMs: 5000, busyTimeoutMs: 1000 } };
}

const REFUSED = [
  ['leaseTtlMs missing', (c) => delete c.leaseTtlMs, /leaseTtlMs.*missing/],
  ['busyTimeoutMs missing', (c) => delete c.busyTimeoutMs, /busyTimeoutMs.*missing/],
  ['channels missing', (c) => delete c.channels, /channels.*missing/],
  ['runtimeRoot missing', (c) => delete c.runtimeRoot, /runtimeRoot.*missing/],
  ['busyTimeoutMs zero', (c) => (c.busyTimeoutMs = 0), /busyTimeoutMs/],
  ['leaseTtlMs zero', (c) => (c.leaseTtlMs = 0), /leaseTtlMs/],
  ['leaseTtlMs negative', (c) => (c.leaseTtlMs = -1), /leaseTtlMs/],
  ['leaseTtlMs fractional', (c) => (c.leaseTtlMs = 1.5), /leaseTtlMs/],
  ['leaseTtlMs NaN', (c) => (c.leaseTtlMs = NaN), /leaseTtlMs/],
  ['leaseTtlMs beyond 2^53', (c) => (c.leaseTtlMs = 2 ** 60), /leaseTtlMs/],
  ['leaseTtlMs a string', (c) => (c.leaseTtlMs = '5000'), /leaseTtlMs.*number/],
  ['busyTimeoutMs null', (c) => (c.busyTimeoutMs = null), /busyTimeoutMs.*number/],
  ['channels not an array', (c) => (c.channels = {}), /channels.*array/],
  ['a channel without an owner', (c) => (c.channels = [{ ...CHANNELS[0], owner: undefined }]), /channels/],
  ['two channels of one name', (c) => (c.channels = [CHANNELS[0], CHANNELS[0]]), /channels/],
  ['runtimeRoot not a directory', (c) => (c.runtimeRoot = path.join(c.runtimeRoot, 'absent')), /runtimeRoot/],
  ['an unknown field (a typo)', (c) => (c.leaseTTLms = 5000), /unknown field `leaseTTLms`/],
  ['clock not a function', (c) => (c.clock = 5), /clock.*function/],
  ['probe not a function', (c) => (c.probe = 'x'), /probe.*function/],
];

for (const [name, change, message] of REFUSED) {
  test(`refused at construction: ${name}`, () => {
    const { db, config } = valid();
    change(config);
    assert.throws(() => new ProjectionStore(db, config), (e) => e.code === 'INVALID_CONFIG' && message.test(e.message));
  });
}

test('refused at construction: no configuration, or no database', () => {
  const { db, config } = valid();
  assert.throws(() => new ProjectionStore(db), { code: 'INVALID_CONFIG' });
  assert.throws(() => new ProjectionStore(undefined, config), { code: 'INVALID_CONFIG' });
  assert.throws(() => new ProjectionStore({}, config), { code: 'INVALID_CONFIG' });
});

test('a valid configuration is copied: changing the caller\'s object later changes nothing', () => {
  const { db, config } = valid();
  const store = new ProjectionStore(db, config);
  config.leaseTtlMs = 0;
  config.channels.length = 0;
  assert.equal(store.config.leaseTtlMs, 5000);
  assert.equal(store.config.channels.length, CHANNELS.length);
  assert.ok(ERROR_CODES.includes('INVALID_CONFIG'));
  db.close();
});

test('an empty channel registry is a choice, not a default', () => {
  const dir = scratch();
  const db = new Database(path.join(dir, 'h.sqlite'));
  db.pragma('journal_mode = WAL');
  // A store is made explicitly: the constructor refuses missing tables, naming what to run.
  assert.throws(
    () => new ProjectionStore(db, { runtimeRoot: dir, channels: [], leaseTtlMs: 1, busyTimeoutMs: 1 }),
    (e) => e.code === 'FOREIGN_SCHEMA' && /the two tables are missing \(initialize makes them\)/.test(e.message),
  );
  initialize(db);
  // Tables of the generic profile are not a Memory Core store.
  assert.throws(
    () => new ProjectionStore(db, { runtimeRoot: dir, channels: [], leaseTtlMs: 1, busyTimeoutMs: 1, profile: 'live-lane-awareness-projection.v1' }),
    (e) => e.code === 'FOREIGN_SCHEMA' && /of profile solewriter\.hook-projection\.v2, not live-lane-awareness-projection\.v1/.test(e.message),
  );
  const store = new ProjectionStore(db, { runtimeRoot: dir, channels: [], leaseTtlMs: 1, busyTimeoutMs: 1 });
  assert.deepEqual(store.config.channels, []);
  db.close();
});
