'use strict';
/**
 * The Memory Core's own test suites, switched: our copy of the expectations of the public
 * neomjs/neo specs that import its JavaScript writer (`hookProjectionWriter.spec.mjs`, its nine
 * tests, and the real-writer acceptance test of `hookProjectionReader.spec.mjs`), run against
 * `solewriter/memory-core` with the import changed and the two documented configuration
 * leaves added (`hookProjectionBusyTimeoutMs`, `hookProjectionChannels`).
 *
 * What a Memory Core test changes besides the import, each on purpose (docs/memory-core.md,
 * "Where the writer differs on purpose"):
 * - its store and root: `testStore(Database)` of `solewriter/testing` (a WAL file and a real
 *   directory) where it had `new Database(':memory:')`, a fake `fs` and `/runtime/mc/...`:
 *   solewriter refuses a non-WAL database and a substitute `fs` (the last test here);
 * - its channels are declared: the specs' watermarks (`w-1`, `lifecycle-watermark-1`) are
 *   text, so their channels are of the `text` kind (the JavaScript writer's own ordering);
 * - a live holder is made by solewriter's own `acquire` (the JavaScript writer's lease module
 *   writes tables solewriter's replaced), and the orphans a sweep would remove carry
 *   solewriter's temp names (the spec's `current.json.a.tmp` is not one: no sweep of
 *   solewriter's would ever take it, so planting it would prove nothing);
 * - a stall after the grant counts solewriter's clock reads: a one-shot reads the clock three
 *   times up to its grant (the snapshot of the lease, the draft's `generatedAt`, both before
 *   its transaction, then the grant inside it), where the JavaScript writer read it once.
 */

const { describe, it, before, beforeEach, afterEach } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { pathToFileURL } = require('node:url');
const Database = require('better-sqlite3');
const { makeHookProjectionWriter, deriveTargetId, TARGET_TUPLE_FIELDS } = require('solewriter/memory-core');
const { testStore } = require('solewriter/testing');
const { ProjectionStore } = require('solewriter');
const mc = require('./memory_core_fixtures');

const TTL = 15_000;

/** The two documented leaves, the specs' channels declared with the kind of their watermarks. */
const LEAVES = {
  hookProjectionBusyTimeoutMs: 1_000,
  hookProjectionChannels: [
    { name: 'lifecycle-frontier', owner: 'lifecycle', envelopeSchema: 'lifecycle-frontier.v1', maxEnvelopeBytes: 262144, watermark: 'text' },
    { name: 'computed-route', owner: 'golden-path', envelopeSchema: 'computed-route.v1', maxEnvelopeBytes: 262144, watermark: 'text' },
  ],
};

/** The writer spec's attested tuple and binding. */
const TUPLE = Object.freeze({
  schemaVersion: 'live-lane-awareness-projection.v1',
  capability: 'self-awareness',
  agentId: '@neo-opus-ada',
  harnessType: 'claude-code',
  instanceKeyDigest: 'inst-abc',
  workspaceKeyDigest: 'ws-def',
  projectionKind: 'hook',
});
const BINDING = Object.freeze({ agentId: '@neo-opus-ada', harnessType: 'claude-code' });
const ENVELOPE = Object.freeze({ schemaVersion: 'lifecycle-frontier.v1', items: [], notAuthority: true });

/** The writer spec's one lifecycle submission. */
const lifecycleSubmission = (tuple = TUPLE) => ({
  tuple,
  channel: 'lifecycle-frontier',
  envelope: ENVELOPE,
  sourceWatermark: 'w-1',
  capturedAt: '2026-07-16T12:00:00.000Z',
  expiresAt: '2026-07-16T12:05:00.000Z',
  isTargetAdmitted: () => true,
  mayProduceChannel: () => true,
});

/** The names a sweep of solewriter's removes: its temp siblings of `current.json`. */
const ORPHANS = ['.current.json.tmp-a', '.current.json.tmp-b'];

describe('hookProjectionWriter.spec.mjs, switched to solewriter/memory-core', () => {
  let bed;
  let now;
  let config;
  const writer = (more = {}) => makeHookProjectionWriter({ getDb: () => bed.db, config, clock: () => now, ...more });
  const documentOf = (targetId) => JSON.parse(fs.readFileSync(path.join(config.hookProjectionRoot, targetId, 'current.json'), 'utf8'));
  /** Plants `names` in the target's directory (made as the first publication makes it). */
  const plant = (targetId, names) => {
    const dir = path.join(config.hookProjectionRoot, targetId);
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    for (const name of names) fs.writeFileSync(path.join(dir, name), 'an orphan');
    return () => names.filter((name) => fs.existsSync(path.join(dir, name)));
  };

  beforeEach(() => {
    bed = testStore(Database);
    now = 1_800_000_000_000;
    config = { hookProjectionRoot: bed.hookProjectionRoot, hookProjectionLeaseTtlMs: TTL, ...LEAVES };
  });

  afterEach(() => bed.close());

  it('the whole publication is one call: schema, derivation, token, clock and files all bound', () => {
    const wr = writer();
    wr.ensureSchema();
    assert.deepEqual(wr.submitChannel(lifecycleSubmission()), { accepted: true, outcome: 'advanced' });
    const result = wr.publish({ tuple: TUPLE, consumerBinding: BINDING });
    assert.equal(result.published, true);
    // The caller named an attested target; the path was derived from it.
    const payload = documentOf(result.targetId);
    assert.equal(payload.schemaVersion, 'live-lane-awareness-projection.v1');
    assert.equal(payload.publication.targetId, result.targetId);
    assert.deepEqual(payload.consumerBinding, BINDING);
    assert.deepEqual(payload.lifecycleActions.envelope, ENVELOPE);
    // A slot nobody published is honestly missing, not absent.
    assert.equal(payload.computedRoute.status, 'missing');
  });

  it('the target id is derived, stable across sessions, and distinct per agent', () => {
    assert.equal(deriveTargetId(TUPLE), deriveTargetId({ ...TUPLE }));
    assert.notEqual(deriveTargetId(TUPLE), deriveTargetId({ ...TUPLE, agentId: '@neo-gpt' }));
    assert.notEqual(deriveTargetId(TUPLE), deriveTargetId({ ...TUPLE, instanceKeyDigest: 'other' }));
    assert.match(deriveTargetId(TUPLE), /^[0-9a-f]{32}$/);
  });

  it('field separation keeps apart what plain concatenation would join', () => {
    assert.notEqual(
      deriveTargetId({ ...TUPLE, agentId: 'a', harnessType: 'bc' }),
      deriveTargetId({ ...TUPLE, agentId: 'ab', harnessType: 'c' }),
    );
  });

  it('a tuple with any hole is refused', () => {
    for (const field of TARGET_TUPLE_FIELDS) {
      assert.throws(() => deriveTargetId({ ...TUPLE, [field]: undefined }), new RegExp(`missing: .*${field}`));
    }
  });

  it('contention is a normal outcome: a publication released its lease, so the next one publishes', () => {
    const wr = writer();
    wr.ensureSchema();
    assert.equal(wr.publish({ tuple: TUPLE, consumerBinding: BINDING }).published, true);
    assert.equal(wr.publish({ tuple: TUPLE, consumerBinding: BINDING }).published, true);
  });

  it('a losing contender deletes nothing: the sweep is a right the grant confers', () => {
    const wr = writer();
    wr.ensureSchema();
    const targetId = deriveTargetId(TUPLE);
    // A live holder on the target, through solewriter's own acquire on the same store.
    const holder = new ProjectionStore(bed.db, {
      hookProjectionRoot: config.hookProjectionRoot,
      channels: LEAVES.hookProjectionChannels,
      leaseTtlMs: TTL,
      busyTimeoutMs: 1_000,
      profile: mc.PROFILE,
      clock: () => now,
    });
    holder.admitTarget(TUPLE);
    const { granted } = holder.acquire(targetId, 'the-holder');
    assert.ok(granted);
    const left = plant(targetId, ORPHANS);
    const loser = wr.publish({ tuple: TUPLE, consumerBinding: BINDING });
    assert.equal(loser.published, false);
    assert.equal(loser.reason, 'held');
    assert.deepEqual(left(), ORPHANS, 'the loser swept nothing');
    // The holder's own publication sweeps them: the planted names are ones a sweep removes.
    assert.equal(holder.publish(granted, { consumerBinding: BINDING }).epoch, granted.epoch);
    assert.deepEqual(left(), []);
  });

  it('a rejected publish never sweeps: a lease expired after its grant is refused before the sweep', () => {
    const wr = writer();
    wr.ensureSchema();
    assert.equal(wr.submitChannel(lifecycleSubmission()).accepted, true);
    const targetId = deriveTargetId(TUPLE);
    const left = plant(targetId, ORPHANS);
    // The grant is won at `now` (solewriter's third reading: the lease's snapshot and the draft's
    // generatedAt come first); every later reading is past the TTL.
    let reads = 0;
    const stalled = writer({ clock: () => (++reads <= 3 ? now : now + TTL + 1) });
    const result = stalled.publish({ tuple: TUPLE, consumerBinding: BINDING });
    assert.equal(result.published, false);
    assert.equal(result.reason, 'lease-expired');
    assert.equal(result.epoch, 1, 'the refusal names the grant\'s epoch, as the writer answers it');
    assert.ok(reads > 3, 'the clock was read again after the grant');
    assert.equal(bed.db.prepare('SELECT expires_at FROM HookProjectionLeases WHERE target_id = ?').get(targetId).expires_at, now + TTL);
    assert.deepEqual(left(), ORPHANS, 'nothing swept');
    assert.equal(fs.existsSync(path.join(config.hookProjectionRoot, targetId, 'current.json')), false);
  });

  it('an unavailable store fails closed: a missing store is not an empty projection', () => {
    const wr = makeHookProjectionWriter({ getDb: () => null, config, clock: () => now });
    assert.throws(() => wr.ensureSchema(), /SQLite store is unavailable/);
    assert.throws(() => wr.publish({ tuple: TUPLE, consumerBinding: BINDING }), /SQLite store is unavailable/);
  });

  it('fails loud on a missing config leaf: never a guessed root or an unbounded lease', () => {
    assert.throws(
      () => makeHookProjectionWriter({ getDb: () => bed.db, config: { ...config, hookProjectionRoot: undefined } }),
      /hookProjectionRoot is required from config/,
    );
    assert.throws(
      () => makeHookProjectionWriter({ getDb: () => bed.db, config: { ...config, hookProjectionLeaseTtlMs: undefined } }),
      /hookProjectionLeaseTtlMs is required from config/,
    );
    assert.throws(() => makeHookProjectionWriter({ getDb: undefined, config }), /injected getDb resolver is required/);
  });

  it('(differs on purpose) an in-memory database is refused, nothing made in it', () => {
    const memory = new Database(':memory:');
    try {
      const wr = makeHookProjectionWriter({ getDb: () => memory, config, clock: () => now });
      assert.throws(() => wr.ensureSchema(), (e) => e.code === 'FOREIGN_SCHEMA' && /journal_mode memory; solewriter needs WAL/.test(e.message));
      assert.deepEqual(memory.prepare('SELECT name FROM sqlite_master').all(), []);
    } finally {
      memory.close();
    }
  });

  it('(differs on purpose) a substitute fs is refused, saying why; Node\'s own is taken', async () => {
    const fake = { mkdirSync() {}, writeFileSync() {}, renameSync() {}, openSync: () => 1, fsyncSync() {}, closeSync() {}, unlinkSync() {}, readdirSync: () => [] };
    assert.throws(
      () => writer({ fs: fake }),
      (e) => e.code === 'INVALID_CONFIG' && /fs must be Node's own node:fs/.test(e.message) && /testStore of solewriter\/testing/.test(e.message),
    );
    for (const real of [fs, await import('node:fs')]) {
      assert.equal(typeof writer({ fs: real }).publish, 'function');
    }
  });
});

describe('hookProjectionReader.spec.mjs, its real-writer acceptance, switched to solewriter/memory-core', () => {
  let reader;
  before(async () => {
    reader = await import(pathToFileURL(path.resolve(__dirname, '../../../clients/node/memory-core-reader.mjs')).href);
  });

  it('the real writer, a real current.json, the hooks\' reader: no stub on either side', () => {
    const bed = testStore(Database);
    // Any directory is a root: the spec's is a fresh temporary one.
    const root = fs.mkdtempSync(path.join(bed.dir, 'hook-projection-composed-'));
    const tuple = { ...mc.TUPLE, schemaVersion: 'hook-projection-target.v1', projectionKind: 'hook' };
    const wr = makeHookProjectionWriter({
      getDb: () => bed.db,
      config: { hookProjectionRoot: root, hookProjectionLeaseTtlMs: TTL, ...LEAVES },
      fs,
      clock: () => mc.NOW - 1_000,
    });
    try {
      wr.ensureSchema();
      const lifecycle = mc.frontier({ sourceWatermark: 'lifecycle-watermark-1' });
      const route = { ...mc.route({ n: 1 }), sourceWatermark: 'route-watermark-1' };
      for (const [channel, envelope] of [['lifecycle-frontier', lifecycle], ['computed-route', route]]) {
        const submitted = wr.submitChannel(mc.writerSubmission(channel, envelope, { tuple }));
        assert.deepEqual(submitted, { accepted: true, outcome: 'advanced' });
      }
      const published = wr.publish({ tuple, consumerBinding: mc.BINDING });
      const file = path.join(root, published.targetId, 'current.json');
      const result = reader.readHookProjection({
        projectionPath: file,
        attestedBinding: {
          targetId: published.targetId,
          capability: 'self-awareness',
          agentId: '@neo-gpt',
          harnessType: 'codex',
          instanceKeyDigest: 'instance-digest',
          workspaceKeyDigest: 'workspace-digest',
        },
        budget: mc.BUDGET,
        now: mc.NOW,
      });
      assert.equal(published.published, true);
      assert.equal(fs.existsSync(file), true);
      assert.equal(result.status, 'rendered', JSON.stringify(result.diagnostics));
      for (const text of ['Lifecycle', 'lifecycle-one', 'actionable since 2026-07-28T17:00:00.000Z', 'Route route-v1', 'issue-15315', 'as of 2026-07-28T18:29:00.000Z']) {
        assert.ok(result.render.includes(text), text);
      }
      assert.ok(result.render.indexOf('Lifecycle') < result.render.indexOf('Route route-v1'));
      assert.deepEqual(result.policy, { admissionEffect: 'none', fallback: 'existing-bare-policy' });
    } finally {
      bed.close();
    }
  });
});
