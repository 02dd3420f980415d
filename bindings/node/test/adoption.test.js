'use strict';
/**
 * The adoption of the Memory Core's own JavaScript writer's tables through the addon and the
 * JS executor, on a better-sqlite3 database filled by that writer's own statements
 * (`js_writer.js`): epochs continue upward, the live grant ends, channels and the conflict
 * carry over, publication and reading work, the host's `SummarizationJobs` is untouched, a
 * second adoption changes nothing, and a refusal or a failure midway changes nothing.
 */

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const Database = require('better-sqlite3');
const { adoptJsWriterTables, ProjectionStore, targetId, readProjection } = require('..');
const js = require('./js_writer');

const NOW = 1784203500000; // 2026-07-16T12:05:00.000Z
const T0 = '2026-07-16T12:00:00.000Z';
const T1 = '2026-07-16T13:00:00.000Z';
const TOKEN_A = 'aa11'.repeat(16);
const TOKEN_B = 'bb22'.repeat(16);
const CHANNELS = [
  { name: 'computed-route', owner: 'router', envelopeSchema: 'computed-route.v1', maxEnvelopeBytes: 4096 },
  { name: 'lifecycle-frontier', owner: 'frontier', envelopeSchema: 'lifecycle-frontier.v1', maxEnvelopeBytes: 4096 },
];

const agent = (name) => ({
  schemaVersion: '1',
  capability: 'hook-projection',
  agentId: name,
  harnessType: 'claude-code',
  instanceKeyDigest: 'inst-1',
  workspaceKeyDigest: 'ws-1',
  projectionKind: 'live-lane',
});
const AGENTS = ['a', 'b', 'c'].map(agent);
const clock = () => NOW;

/** The Memory Core's database: WAL, its SummarizationJobs, the writer's tables filled. */
function host() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'solewriter-adopt-'));
  fs.mkdirSync(path.join(dir, 'runtime'));
  const db = new Database(path.join(dir, 'memory-core.sqlite'), { timeout: 1000 });
  db.pragma('journal_mode = WAL');
  db.pragma('foreign_keys = ON');
  db.exec(`CREATE TABLE SummarizationJobs (id INTEGER PRIMARY KEY, session TEXT, state TEXT);
           INSERT INTO SummarizationJobs (session, state) VALUES ('s1', 'done'), ('s2', 'queued');`);
  js.createTables(db);
  const [a, b, c] = AGENTS.map(js.legacyTargetId);
  assert.equal(js.acquire(db, a, 'inst-1', NOW - 50_000, 10_000, TOKEN_A), 1);
  assert.ok(js.release(db, a, 1, TOKEN_A));
  assert.equal(js.acquire(db, a, 'inst-1', NOW - 30_000, 10_000, TOKEN_B), 2);
  assert.ok(js.release(db, a, 2, TOKEN_B));
  assert.equal(js.acquire(db, a, 'inst-1', NOW - 1_000, 60_000, TOKEN_A), 3); // live
  assert.equal(js.acquire(db, b, 'inst-2', NOW - 40_000, 5_000, TOKEN_A), 1);
  assert.equal(js.acquire(db, b, 'inst-2', NOW - 30_000, 5_000, TOKEN_B), 2); // takeover
  assert.ok(js.release(db, b, 2, TOKEN_B));
  const submit = (targetId, channel, envelope, sourceWatermark) =>
    js.submit(db, { targetId, channel, envelope, sourceWatermark, capturedAt: T0, expiresAt: T1, now: T0 });
  const route = { schemaVersion: 'computed-route.v1', notAuthority: true, items: ['r'] };
  assert.equal(submit(a, 'computed-route', route, '7'), 'advanced');
  assert.equal(submit(a, 'lifecycle-frontier', { schemaVersion: 'lifecycle-frontier.v1', items: ['f'] }, '3'), 'advanced');
  assert.equal(submit(a, 'lifecycle-frontier', { schemaVersion: 'lifecycle-frontier.v1', items: ['g'] }, '3'), 'source-conflict');
  assert.equal(submit(c, 'computed-route', route, '12'), 'advanced');
  return { dir, db };
}

/** Every schema object and row, in text. */
function dump(db) {
  const objects = db.prepare('SELECT type, name, sql FROM sqlite_master ORDER BY name').all();
  return objects.flatMap((o) => [
    JSON.stringify(o),
    ...(o.type === 'table'
      ? db.prepare(`SELECT * FROM ${o.name} ORDER BY rowid`).raw(true).all().map((r) => JSON.stringify(r, (_, v) => (v && v.type === 'Buffer' ? v.data.join(',') : v)))
      : []),
  ]);
}

test('adoption continues epochs, ends grants, carries channels and conflicts; publication and reading work', () => {
  const { dir, db } = host();
  const jobs = () => db.prepare('SELECT * FROM SummarizationJobs ORDER BY id').all();
  const jobsBefore = jobs();
  assert.deepEqual(adoptJsWriterTables(db, AGENTS, { clock, channels: CHANNELS }), { outcome: 'converted', leases: 3, channels: 3 });
  const store = new ProjectionStore(db, { runtimeRoot: path.join(dir, 'runtime'), channels: CHANNELS, leaseTtlMs: 5000, busyTimeoutMs: 1000, clock });
  const [a, b, c] = AGENTS.map(targetId);
  const seen = store.inspect();
  const lease = (t) => seen.leases.find((l) => l.targetId === t);
  assert.deepEqual([lease(a).epoch, lease(a).state, lease(a).expiresAt], [3, 'expired', NOW]);
  assert.deepEqual([lease(b).epoch, lease(b).state], [2, 'released']);
  assert.deepEqual([lease(c).epoch, lease(c).state], [0, 'unheld']);
  const degraded = seen.channels.filter((ch) => ch.degradedReason === 'source-conflict');
  assert.deepEqual(degraded.map((ch) => [ch.targetId, ch.channel, ch.sourceWatermark]), [[a, 'lifecycle-frontier', 3]]);

  const granted = store.acquire(a, 'solewriter-1').granted;
  assert.equal(granted.epoch, 4, 'the next grant continues from the stored epoch');
  assert.equal(store.publish(granted).epoch, 4);
  const doc = readProjection(path.join(dir, 'runtime'), a);
  assert.equal(doc.fencingEpoch, 4);
  assert.deepEqual(doc.channels.map((ch) => [ch.channel, ch.sourceWatermark, ch.reason]), [
    ['computed-route', 7, null],
    ['lifecycle-frontier', 3, 'source-conflict'],
  ]);
  assert.deepEqual(doc.channels[0].envelope, { schemaVersion: 'computed-route.v1', notAuthority: true, items: ['r'] });
  assert.equal(store.publishNow(b, 'solewriter-1').published.epoch, 3);
  assert.equal(store.publishNow(c, 'solewriter-1').published.epoch, 1);
  assert.deepEqual(jobs(), jobsBefore, "the host's rows are untouched");

  const before = dump(db);
  assert.deepEqual(adoptJsWriterTables(db, AGENTS, { clock, channels: CHANNELS }), { outcome: 'alreadyAdopted' });
  assert.deepEqual(dump(db), before);
});

test('a bad row late in the table refuses everything and changes nothing', () => {
  const { db } = host();
  const tuples = [...AGENTS];
  for (let i = 0; i < 40; i++) {
    const t = agent(`bulk-${i}`);
    tuples.push(t);
    js.submit(db, { targetId: js.legacyTargetId(t), channel: 'computed-route', envelope: { schemaVersion: 'computed-route.v1' }, sourceWatermark: '1', capturedAt: T0, expiresAt: T1, now: T0 });
  }
  db.prepare(`UPDATE HookProjectionChannels SET captured_at = 'c' WHERE target_id = ?`).run(js.legacyTargetId(agent('bulk-39')));
  const before = dump(db);
  assert.throws(() => adoptJsWriterTables(db, tuples, { clock }), (e) => {
    assert.equal(e.code, 'ADOPTION_REFUSED');
    assert.deepEqual([e.table, e.rowid, e.column, e.problem], ['HookProjectionChannels', 43, 'captured_at', 'unparsable time `c`']);
    return true;
  });
  assert.deepEqual(dump(db), before);
  assert.equal(db.inTransaction, false);
});

test('each refusal names what it did not understand and changes nothing', () => {
  const cases = [
    ["UPDATE HookProjectionLeases SET holder_token_hash = 'h-1a2b' WHERE state = 'held'", 'holder_token_hash'],
    ["UPDATE HookProjectionChannels SET source_watermark = 'w-1' WHERE channel = 'computed-route'", 'source_watermark'],
    ["UPDATE HookProjectionChannels SET conflict_reason = 'unreadable envelope' WHERE channel = 'computed-route'", 'conflict_reason'],
  ];
  for (const [plant, column] of cases) {
    const { db } = host();
    db.exec(plant);
    const before = dump(db);
    assert.throws(() => adoptJsWriterTables(db, AGENTS, { clock, channels: CHANNELS }), (e) => e.code === 'ADOPTION_REFUSED' && e.column === column, plant);
    assert.deepEqual(dump(db), before, plant);
  }
  const { db } = host();
  db.exec('ALTER TABLE HookProjectionChannels ADD COLUMN note TEXT');
  const before = dump(db);
  assert.throws(() => adoptJsWriterTables(db, AGENTS, { clock, channels: CHANNELS }), (e) => e.code === 'ADOPTION_REFUSED' && e.reason === 'unknown column note');
  assert.deepEqual(dump(db), before);
  const other = host().db;
  const untouched = dump(other);
  assert.throws(
    () => adoptJsWriterTables(other, AGENTS.slice(0, 2), { clock }),
    (e) => e.code === 'ADOPTION_REFUSED' && e.column === 'target_id' && e.problem.startsWith('no attested tuple'),
  );
  assert.deepEqual(dump(other), untouched);
});

test('a failure midway through the conversion rolls all of it back', () => {
  const { db } = host();
  db.exec(`CREATE TABLE HostRefs (target TEXT REFERENCES HookProjectionLeases (target_id));`);
  db.prepare('INSERT INTO HostRefs VALUES (?)').run(js.legacyTargetId(AGENTS[0]));
  const before = dump(db);
  assert.throws(() => adoptJsWriterTables(db, AGENTS, { clock, channels: CHANNELS }), { code: 'SQLITE', sqliteCode: 'SQLITE_CONSTRAINT_FOREIGNKEY' });
  assert.deepEqual(dump(db), before);
  assert.equal(db.inTransaction, false);
});
