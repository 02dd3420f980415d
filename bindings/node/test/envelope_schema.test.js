'use strict';
/**
 * A channel's envelope JSON Schema (`envelopeJsonSchema`): compiled once, at construction (an
 * invalid or not self-contained schema is INVALID_CONFIG), and applied to every submission after
 * the schema id (a violation is REJECTED with the validator's reason, and nothing is written). A
 * `pattern` the regex crate will not build is INVALID_CONFIG too, never a panic of the library.
 */
const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const Database = require('better-sqlite3');
const { initialize, ProjectionStore } = require('..');
const { scratch } = require('./helpers');

const TUPLE = {
  schemaVersion: '1',
  capability: 'hook-projection',
  agentId: 'agent-7',
  harnessType: 'claude-code',
  instanceKeyDigest: 'inst-1',
  workspaceKeyDigest: 'ws-1',
  projectionKind: 'live-lane',
};

function channels(envelopeJsonSchema) {
  return [{ name: 'computed-route', owner: 'router', envelopeSchema: 'computed-route.v1', maxEnvelopeBytes: 4096, envelopeJsonSchema }];
}

test('a channel JSON Schema refuses a violating envelope with its reason and writes nothing', () => {
  const dir = scratch();
  const db = new Database(path.join(dir, 'h.sqlite'));
  db.pragma('journal_mode = WAL');
  initialize(db);
  const schema = { type: 'object', required: ['items'], properties: { items: { type: 'array', items: { type: 'string' } } } };
  const store = new ProjectionStore(db, { runtimeRoot: dir, channels: channels(schema), leaseTtlMs: 5000, busyTimeoutMs: 1000, clock: () => 1000 });
  const targetId = store.admitTarget(TUPLE);
  const submit = (watermark, envelope) =>
    store.submit('router', {
      targetId,
      channel: 'computed-route',
      sourceWatermark: watermark,
      envelopeJson: JSON.stringify({ schema: 'computed-route.v1', notAuthority: true, ...envelope }),
      capturedAt: 1000,
      expiresAt: 61000,
    });
  assert.equal(submit(1, { items: ['a'] }), 'inserted');
  const before = db.prepare('SELECT * FROM HookProjectionChannels').all();
  assert.throws(
    () => submit(2, { items: [1] }),
    (e) => e.code === 'REJECTED' && /JSON Schema refuses it/.test(e.message) && /\/items\/0/.test(e.message),
  );
  assert.throws(() => submit(3, {}), (e) => e.code === 'REJECTED' && /missing properties 'items'/.test(e.message));
  assert.deepEqual(db.prepare('SELECT * FROM HookProjectionChannels').all(), before);
  assert.equal(submit(4, { items: ['b'] }), 'advanced');
  db.close();
});

test('an invalid or not self-contained schema is INVALID_CONFIG at construction', () => {
  const dir = scratch();
  const db = new Database(path.join(dir, 'h.sqlite'));
  db.pragma('journal_mode = WAL');
  initialize(db);
  for (const schema of [{ type: 5 }, { $ref: 'https://example.com/envelope.json' }, { $ref: 'file:///etc/passwd' }]) {
    assert.throws(
      () => new ProjectionStore(db, { runtimeRoot: dir, channels: channels(schema), leaseTtlMs: 5000, busyTimeoutMs: 1000 }),
      (e) => e.code === 'INVALID_CONFIG' && /envelope JSON Schema/.test(e.message),
      JSON.stringify(schema),
    );
  }
  db.close();
});

test('a pattern beyond the regex size limit is INVALID_CONFIG naming the channel, with no panic on stderr', () => {
  // In a child process: a panic inside the schema library would print its backtrace there.
  const script = `
    const Database = require('better-sqlite3');
    const { initialize, ProjectionStore } = require(${JSON.stringify(path.join(__dirname, '..'))});
    const db = new Database(process.argv[1] + '/h.sqlite');
    db.pragma('journal_mode = WAL');
    initialize(db);
    const channel = (envelopeJsonSchema) => ({ name: 'computed-route', owner: 'router', envelopeSchema: 'computed-route.v1', maxEnvelopeBytes: 4096, envelopeJsonSchema });
    const answers = [
      { type: 'string', pattern: 'a{1000}{1000}' },
      { $defs: { big: { pattern: 'a{1000}{1000}{1000}' } }, properties: { route: { $ref: '#/$defs/big' } } },
    ].map((schema) => {
      try {
        new ProjectionStore(db, { runtimeRoot: process.argv[1], channels: [channel(schema)], leaseTtlMs: 5000, busyTimeoutMs: 1000 });
        return { code: 'none' };
      } catch (e) {
        return { code: e.code, message: e.message };
      }
    });
    process.stdout.write(JSON.stringify(answers));
  `;
  const child = spawnSync(process.execPath, ['-e', script, scratch()], { encoding: 'utf8', cwd: path.join(__dirname, '..') });
  assert.equal(child.status, 0, child.stderr);
  assert.equal(child.stderr, '', 'nothing on stderr: no panic, no backtrace');
  for (const answer of JSON.parse(child.stdout)) {
    assert.equal(answer.code, 'INVALID_CONFIG', answer.message);
    assert.match(answer.message, /channel `computed-route`.*pattern `a\{1000\}\{1000\}(\{1000\})?` cannot be built.*size limit/);
  }
});
