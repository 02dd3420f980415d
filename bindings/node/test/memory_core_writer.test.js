'use strict';
/**
 * `solewriter/memory-core`: the Memory Core's writer surface (`makeHookProjectionWriter` of its
 * `hookProjectionWriter.mjs`) on solewriter, driven by the calls the Memory Core makes —
 * `ensureSchema()`, `submitChannel({...})`, `publish({tuple, consumerBinding})` — against
 * (a) a fresh database and (b) a database holding the JavaScript writer's tables, filled by
 * `js_writer.js` (ensureSchema adopts them). Every outcome the writer answers, the factory's
 * TypeErrors, and the published document as the hooks' reader renders it.
 */

const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { pathToFileURL } = require('node:url');
const { ProjectionStore } = require('..');
const { makeHookProjectionWriter } = require('solewriter/memory-core');
const js = require('./js_writer');

const { PROFILE, NOW, READ_AT, CAPTURED_AT, EXPIRES_AT, TUPLE, BINDING, BUDGET, lifecycleRow, routeRow, frontier, route, rendered } =
  require('./memory_core_fixtures');

const LATER = new Date(NOW - 30_000).toISOString();
const TTL = 15_000;

const CHANNELS = [
  ...require('./memory_core_fixtures').CHANNELS,
  { name: 'tiny', owner: 'router', envelopeSchema: 'tiny.v1', maxEnvelopeBytes: 64, watermark: 'text' },
];

const openDb = require('./memory_core_fixtures').openMemoryCoreDb;

/** The writer's config for `runtimeRoot`. */
const configFor = (runtimeRoot, more = {}) => ({
  hookProjectionRoot: path.join(runtimeRoot, 'hook-projections'),
  hookProjectionLeaseTtlMs: TTL,
  hookProjectionBusyTimeoutMs: 1_000,
  hookProjectionChannels: CHANNELS,
  ...more,
});

/** The Memory Core's submission of a producer's envelope, both gates open. */
const submission = require('./memory_core_fixtures').writerSubmission;

const coded = (code) => (e) => {
  assert.equal(e.code, code, e.message);
  return true;
};

let reader;
let dir;

before(async () => {
  reader = await import(pathToFileURL(path.resolve(__dirname, '../../../clients/node/memory-core-reader.mjs')).href);
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'solewriter-mc-writer-'));
});

after(() => {
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

/** A fresh runtime root and database under the test directory. */
function fresh(name) {
  const runtimeRoot = path.join(dir, name);
  fs.mkdirSync(runtimeRoot);
  return { runtimeRoot, db: openDb(path.join(dir, `${name}.sqlite`)) };
}

/** The hooks' reading of the target's current.json at READ_AT. */
function render(runtimeRoot, targetId) {
  return reader.readHookProjection({
    projectionPath: path.join(runtimeRoot, 'hook-projections', targetId, 'current.json'),
    attestedBinding: {
      targetId,
      capability: 'self-awareness',
      agentId: '@neo-gpt',
      harnessType: 'codex',
      instanceKeyDigest: 'instance-digest',
      workspaceKeyDigest: 'workspace-digest',
    },
    budget: BUDGET,
    now: READ_AT,
  });
}


describe('the factory refuses a wiring bug with the writer\'s TypeErrors', () => {
  const root = path.join(os.tmpdir(), 'hook-projections');
  const good = () => ({ getDb: () => null, config: configFor(os.tmpdir()), fs });
  const refused = (params, message) => assert.throws(() => makeHookProjectionWriter(params), (e) => e instanceof TypeError && e.message === message);
  const leaf = (name) => `[hookProjectionWriter] ${name} is required from config — no local default`;

  it('getDb', () => {
    refused({ ...good(), getDb: undefined }, '[hookProjectionWriter] an injected getDb resolver is required');
    refused(undefined, '[hookProjectionWriter] an injected getDb resolver is required');
  });

  it('each of the four leaves, missing or malformed: no local default', () => {
    for (const name of ['hookProjectionRoot', 'hookProjectionLeaseTtlMs', 'hookProjectionBusyTimeoutMs', 'hookProjectionChannels']) {
      const { [name]: _, ...rest } = configFor(os.tmpdir());
      refused({ ...good(), config: rest }, leaf(name));
    }
    refused({ ...good(), config: undefined }, leaf('hookProjectionRoot'));
    refused({ ...good(), config: configFor(os.tmpdir(), { hookProjectionRoot: '' }) }, leaf('hookProjectionRoot'));
    refused({ ...good(), config: configFor(os.tmpdir(), { hookProjectionLeaseTtlMs: 0 }) }, leaf('hookProjectionLeaseTtlMs'));
    refused({ ...good(), config: configFor(os.tmpdir(), { hookProjectionBusyTimeoutMs: '1000' }) }, leaf('hookProjectionBusyTimeoutMs'));
    refused({ ...good(), config: configFor(os.tmpdir(), { hookProjectionChannels: {} }) }, leaf('hookProjectionChannels'));
    refused({ ...good(), config: configFor(os.tmpdir(), { hookProjectionChannels: [{ name: 'x' }] }) }, leaf('hookProjectionChannels'));
  });

  it('a root of any name is taken; one below a file is INVALID_CONFIG', () => {
    for (const any of [path.join(os.tmpdir(), 'projections'), os.tmpdir(), path.join(root, 'x'), `${root}/`]) {
      assert.equal(typeof makeHookProjectionWriter({ ...good(), config: configFor(os.tmpdir(), { hookProjectionRoot: any }) }).publish, 'function');
    }
    const file = path.join(dir, 'a-file');
    fs.writeFileSync(file, '');
    assert.throws(
      () => makeHookProjectionWriter({ ...good(), config: configFor(os.tmpdir(), { hookProjectionRoot: path.join(file, 'hook-projections') }) }),
      (e) => e.code === 'INVALID_CONFIG' && /its directory .*a-file cannot be made \(EEXIST\)/.test(e.message),
    );
  });

  it('a store that is not there: the writer\'s Error, on every call', () => {
    const writer = makeHookProjectionWriter(good());
    const unavailable = (e) => e instanceof Error && e.message === '[hookProjectionWriter] the Memory Core SQLite store is unavailable';
    assert.throws(() => writer.ensureSchema(), unavailable);
    assert.throws(() => writer.submitChannel(submission('lifecycle-frontier', frontier())), unavailable);
    assert.throws(() => writer.publish({ tuple: TUPLE, consumerBinding: BINDING }), unavailable);
  });
});

describe('(a) a fresh database: the calls the Memory Core makes', () => {
  let db;
  let runtimeRoot;
  let writer;
  let targetId;
  let current;

  before(() => {
    ({ db, runtimeRoot } = fresh('fresh'));
    current = db;
    writer = makeHookProjectionWriter({ getDb: () => current, config: configFor(runtimeRoot), fs, clock: () => NOW });
  });
  after(() => current.close());

  it('ensureSchema creates the Memory Core profile\'s tables; idempotent', () => {
    assert.deepEqual(writer.ensureSchema(), { schema: 'created', adoption: 'nothingToAdopt' });
    assert.deepEqual(writer.ensureSchema(), { schema: 'present', adoption: 'alreadyAdopted' });
  });

  it('deriveTargetId is the JS writer\'s id; a tuple with a hole is its TypeError', () => {
    targetId = writer.deriveTargetId(TUPLE);
    assert.equal(targetId, js.deriveTargetId(TUPLE));
    assert.match(targetId, /^[0-9a-f]{32}$/);
    const { agentId, ...holed } = TUPLE;
    assert.throws(
      () => writer.deriveTargetId({ ...holed, capability: '' }),
      (e) => e instanceof TypeError && e.message === '[hookProjectionWriter] the attested target tuple is missing: capability, agentId',
    );
  });

  it('malformed submissions throw the writer\'s TypeErrors, nothing written', () => {
    const typeError = (more, message) =>
      assert.throws(
        () => writer.submitChannel(submission('lifecycle-frontier', frontier(), more)),
        (e) => e instanceof TypeError && e.message === `[hookProjectionSubmission] ${message}`,
      );
    typeError({ channel: '' }, 'a server-derived targetId and a channel are required');
    typeError({ sourceWatermark: 7 }, 'a sourceWatermark is required — an unwatermarked channel cannot be ordered');
    typeError({ isTargetAdmitted: undefined }, 'isTargetAdmitted and mayProduceChannel must be injected');
    typeError({ envelope: [] }, 'an envelope must be a plain object');
    typeError({ envelope: { ...frontier(), schemaVersion: '' } }, 'an envelope must carry a schemaVersion — a reader binds to it');
    typeError({ capturedAt: 'yesterday' }, 'capturedAt must be a parseable timestamp; got "yesterday"');
    typeError({ expiresAt: undefined }, 'expiresAt must be a parseable timestamp; got undefined');
    typeError({ expiresAt: CAPTURED_AT }, `expiresAt ${CAPTURED_AT} is not after capturedAt ${CAPTURED_AT}`);
    assert.equal(db.prepare('SELECT count(*) AS n FROM HookProjectionLeases').get().n, 0);
  });

  it('the gates and the registry: target-not-admitted, foreign-producer, unknown-channel, schema-mismatch', () => {
    const asked = [];
    assert.deepEqual(
      writer.submitChannel(submission('lifecycle-frontier', frontier(), { isTargetAdmitted: (id) => (asked.push(id), false) })),
      { accepted: false, outcome: 'target-not-admitted', reason: `target ${targetId} is not admitted` },
    );
    assert.deepEqual(asked, [targetId]);
    assert.deepEqual(
      writer.submitChannel(submission('lifecycle-frontier', frontier(), { mayProduceChannel: (who) => (asked.push(who), false) })),
      { accepted: false, outcome: 'foreign-producer', reason: 'this producer may not write channel lifecycle-frontier' },
    );
    assert.deepEqual(asked[1], { targetId, channel: 'lifecycle-frontier' });
    const unknown = writer.submitChannel(submission('context-view:x', { ...frontier(), schemaVersion: 'x.v1' }));
    assert.equal(unknown.accepted, false);
    assert.equal(unknown.outcome, 'unknown-channel');
    assert.match(unknown.reason, /^channel context-view:x has no pinned schema contract/);
    assert.deepEqual(writer.submitChannel(submission('computed-route', { ...route({ n: 1 }), schemaVersion: 'computed-route.v2' })), {
      accepted: false,
      outcome: 'schema-mismatch',
      reason: 'channel computed-route requires computed-route.v1; envelope carries computed-route.v2',
    });
    assert.equal(db.prepare('SELECT count(*) AS n FROM HookProjectionLeases').get().n, 0, 'refused before admission: nothing written');
  });

  it('advanced (first and newer), replayed, source-conflict, regressed-watermark', () => {
    assert.deepEqual(writer.submitChannel(submission('lifecycle-frontier', frontier())), { accepted: true, outcome: 'advanced' });
    assert.equal(db.prepare('SELECT count(*) AS n FROM HookProjectionLeases WHERE target_id = ?').get(targetId).n, 1, 'admitted');
    assert.deepEqual(writer.submitChannel(submission('lifecycle-frontier', frontier())), { accepted: true, outcome: 'replayed' });
    assert.deepEqual(writer.submitChannel(submission('computed-route', route({ n: 9 }))), { accepted: true, outcome: 'advanced' });
    // Where the JS writer would call `:10` older than `:9`, the channel's kind orders it after.
    const next = route({ n: 10, routeVersion: 'route-v2', id: 'issue-16200', title: 'Switch the hook projection writer' });
    assert.deepEqual(writer.submitChannel(submission('computed-route', next)), { accepted: true, outcome: 'advanced' });
    assert.deepEqual(writer.submitChannel(submission('computed-route', route({ n: 9 }))), {
      accepted: false,
      outcome: 'regressed-watermark',
      reason: `watermark ${CAPTURED_AT}:9 is older than the stored ${CAPTURED_AT}:10`,
    });
    assert.deepEqual(writer.submitChannel(submission('lifecycle-frontier', frontier({ state: 'approved' }))), {
      accepted: false,
      outcome: 'source-conflict',
      reason: `two payloads claim watermark ${CAPTURED_AT}`,
    });
    assert.deepEqual(writer.submitChannel(submission('lifecycle-frontier', frontier({ capturedAt: LATER }))), { accepted: true, outcome: 'advanced' });
  });

  it('an envelope whose own watermark is not the submitted one: schema-mismatch (the store\'s reason)', () => {
    const envelope = frontier({ capturedAt: NOW_ISO() });
    const result = writer.submitChannel(submission('lifecycle-frontier', envelope, { sourceWatermark: new Date(NOW + 1).toISOString() }));
    assert.equal(result.accepted, false);
    assert.equal(result.outcome, 'schema-mismatch');
    assert.match(result.reason, /sourceWatermark/);
  });

  it('what the writer would throw on is solewriter\'s REJECTED, with the rejection named', () => {
    const tiny = { schemaVersion: 'tiny.v1', sourceWatermark: 'a', capturedAt: CAPTURED_AT, expiresAt: EXPIRES_AT, pad: 'x'.repeat(64) };
    assert.throws(() => writer.submitChannel(submission('tiny', tiny)), (e) => e.code === 'REJECTED' && e.rejection === 'oversized');
    const notAnInstant = { ...frontier(), sourceWatermark: '2026-07-28T18:29:00Z' };
    assert.throws(
      () => writer.submitChannel(submission('lifecycle-frontier', notAnInstant)),
      (e) => e.code === 'REJECTED' && e.rejection === 'invalid-watermark',
    );
  });

  it('publish: fenced, durable, both channels; the hooks render the document', () => {
    assert.deepEqual(writer.publish({ tuple: TUPLE, consumerBinding: BINDING }), { published: true, channels: 2, targetId, epoch: 1 });
    const doc = JSON.parse(fs.readFileSync(path.join(runtimeRoot, 'hook-projections', targetId, 'current.json'), 'utf8'));
    assert.deepEqual(doc.publication, {
      targetId,
      fencingEpoch: 1,
      generatedAt: NOW,
      producerWatermarks: { 'computed-route': `${CAPTURED_AT}:10`, 'lifecycle-frontier': LATER },
    });
    assert.deepEqual(doc.consumerBinding, BINDING);
    assert.deepEqual(render(runtimeRoot, targetId), rendered([lifecycleRow(LATER), routeRow('route-v2', 'issue-16200', 'Switch the hook projection writer')]));
    const [lease] = db.prepare('SELECT fencing_epoch, holder_instance_digest, state FROM HookProjectionLeases').all();
    assert.deepEqual(lease, { fencing_epoch: 1, holder_instance_digest: 'instance-digest', state: 'released' });
    assert.deepEqual(writer.publish({ tuple: TUPLE, consumerBinding: BINDING }), { published: true, channels: 2, targetId, epoch: 2 });
  });

  it('publish while another holder has the grant: held, retry after', () => {
    const other = new ProjectionStore(db, { runtimeRoot, channels: CHANNELS, leaseTtlMs: TTL, busyTimeoutMs: 1_000, profile: PROFILE, clock: () => NOW });
    const { granted } = other.acquire(targetId, 'other-broker');
    assert.deepEqual(writer.publish({ tuple: TUPLE, consumerBinding: BINDING }), { published: false, reason: 'held', retryAfterMs: TTL, targetId });
    assert.deepEqual(other.release(granted), { released: true });
  });

  it('a holder name solewriter cannot take is recorded as memory-core', () => {
    const tuple = { ...TUPLE, instanceKeyDigest: 'Instance Digest/1' };
    const id = writer.deriveTargetId(tuple);
    assert.deepEqual(writer.submitChannel(submission('lifecycle-frontier', frontier(), { tuple })), { accepted: true, outcome: 'advanced' });
    assert.deepEqual(writer.publish({ tuple, consumerBinding: BINDING }), { published: true, channels: 1, targetId: id, epoch: 1 });
    assert.equal(db.prepare('SELECT holder_instance_digest AS h FROM HookProjectionLeases WHERE target_id = ?').get(id).h, 'memory-core');
  });

  it('a write that fails is write-failed, as the writer names it; nothing published', () => {
    const tuple = { ...TUPLE, agentId: '@neo-opus' };
    const id = writer.deriveTargetId(tuple);
    assert.deepEqual(writer.submitChannel(submission('lifecycle-frontier', frontier(), { tuple })), { accepted: true, outcome: 'advanced' });
    fs.writeFileSync(path.join(runtimeRoot, 'hook-projections', id), 'not a directory');
    const result = writer.publish({ tuple, consumerBinding: BINDING });
    assert.equal(result.published, false);
    assert.match(result.reason, /^write-failed: /);
    assert.equal(result.targetId, id);
    // The target's directory is prepared before any grant: none was taken, nothing renamed.
    assert.equal(db.prepare('SELECT state FROM HookProjectionLeases WHERE target_id = ?').get(id).state, 'unheld');
    assert.equal(fs.readFileSync(path.join(runtimeRoot, 'hook-projections', id), 'utf8'), 'not a directory');
  });

  it('a target no submission admitted: admitted by the publication, its slots missing, as the writer publishes it', () => {
    const tuple = { ...TUPLE, agentId: '@nobody' };
    const id = writer.deriveTargetId(tuple);
    assert.deepEqual(writer.publish({ tuple, consumerBinding: BINDING }), { published: true, channels: 0, targetId: id, epoch: 1 });
    const doc = JSON.parse(fs.readFileSync(path.join(runtimeRoot, 'hook-projections', id, 'current.json'), 'utf8'));
    assert.equal(doc.publication.targetId, id);
    assert.equal(doc.lifecycleActions.status, 'missing');
    assert.equal(doc.computedRoute.status, 'missing');
    assert.deepEqual(doc.consumerBinding, BINDING);
  });

  it('a refusal of the store maps to the writer\'s reason, or is thrown when the writer names none', () => {
    const original = ProjectionStore.prototype.publishNow;
    const refusal = (fields) => {
      ProjectionStore.prototype.publishNow = () => {
        throw Object.assign(new Error('refused'), fields);
      };
      try {
        return writer.publish({ tuple: TUPLE, consumerBinding: BINDING });
      } finally {
        ProjectionStore.prototype.publishNow = original;
      }
    };
    const reasons = {
      superseded: 'superseded-epoch',
      'token-mismatch': 'foreign-token',
      expired: 'lease-expired',
      released: 'not-held',
      'never-granted': 'not-held',
    };
    for (const [ours, theirs] of Object.entries(reasons)) {
      assert.deepEqual(refusal({ code: 'FENCED', reason: ours, currentEpoch: 9 }), { published: false, reason: theirs, targetId });
    }
    assert.deepEqual(refusal({ code: 'LEASE_EXPIRED' }), { published: false, reason: 'lease-expired-at-write', targetId });
    assert.throws(() => refusal({ code: 'FENCED', reason: 'other' }), coded('FENCED'));
    assert.throws(() => refusal({ code: 'NOT_DURABLE' }), coded('NOT_DURABLE'));
    assert.throws(() => refusal({ code: 'BUSY' }), coded('BUSY'));
  });

  it('getDb is resolved on every call: a re-opened store is written through its new handle', () => {
    const file = current.name;
    current.close();
    current = openDb(file);
    assert.deepEqual(writer.ensureSchema(), { schema: 'present', adoption: 'alreadyAdopted' });
    const newest = route({ n: 11 });
    assert.deepEqual(writer.submitChannel(submission('computed-route', newest)), { accepted: true, outcome: 'advanced' });
    assert.deepEqual(writer.publish({ tuple: TUPLE, consumerBinding: BINDING }), { published: true, channels: 2, targetId, epoch: 4 }, 'epoch 3 was the other holder\'s');
    assert.deepEqual(render(runtimeRoot, targetId), rendered([lifecycleRow(LATER), routeRow('route-v1', 'issue-15315', 'Render the bounded hook projection')]));
  });
});

function NOW_ISO() {
  return new Date(NOW).toISOString();
}

describe('(b) a database holding the JavaScript writer\'s tables: ensureSchema adopts them', () => {
  let db;
  let runtimeRoot;
  let writer;
  let targetId;

  before(() => {
    ({ db, runtimeRoot } = fresh('adopted'));
    js.ensureSchema(db);
    targetId = js.deriveTargetId(TUPLE);
    const jsSubmit = (channel, envelope) =>
      js.submit(db, { targetId, channel, envelope, sourceWatermark: envelope.sourceWatermark, capturedAt: envelope.capturedAt, expiresAt: envelope.expiresAt, now: NOW_ISO() });
    assert.equal(jsSubmit('lifecycle-frontier', frontier()), 'advanced');
    assert.equal(jsSubmit('computed-route', route({ n: 9 })), 'advanced');
    assert.deepEqual(
      js.publish(db, { runtimeRoot, tuple: TUPLE, consumerBinding: BINDING, now: NOW - 1_000, leaseTtlMs: TTL }),
      { published: true, channels: 2, targetId, epoch: 1 },
    );
    writer = makeHookProjectionWriter({ getDb: () => db, config: configFor(runtimeRoot), fs, clock: () => NOW });
  });
  after(() => db.close());

  it('the first boot after the switch converts the tables; the next finds them', () => {
    assert.deepEqual(writer.ensureSchema(), { schema: 'present', adoption: 'converted' });
    assert.deepEqual(writer.ensureSchema(), { schema: 'present', adoption: 'alreadyAdopted' });
  });

  it('the stored rows carry on: replayed, regressed, advanced past the text order', () => {
    assert.deepEqual(writer.submitChannel(submission('lifecycle-frontier', frontier())), { accepted: true, outcome: 'replayed' });
    assert.deepEqual(writer.submitChannel(submission('computed-route', route({ n: 8 }))), {
      accepted: false,
      outcome: 'regressed-watermark',
      reason: `watermark ${CAPTURED_AT}:8 is older than the stored ${CAPTURED_AT}:9`,
    });
    const next = route({ n: 10, routeVersion: 'route-v2', id: 'issue-16200', title: 'Switch the hook projection writer' });
    assert.deepEqual(writer.submitChannel(submission('computed-route', next)), { accepted: true, outcome: 'advanced' });
  });

  it('publish replaces the JS writer\'s document at the same path, a higher epoch; the hooks render it', () => {
    assert.deepEqual(writer.publish({ tuple: TUPLE, consumerBinding: BINDING }), { published: true, channels: 2, targetId, epoch: 2 });
    const doc = JSON.parse(fs.readFileSync(path.join(runtimeRoot, 'hook-projections', targetId, 'current.json'), 'utf8'));
    assert.equal(doc.publication.fencingEpoch, 2);
    assert.equal(doc.publication.producerWatermarks['computed-route'], `${CAPTURED_AT}:10`);
    assert.deepEqual(render(runtimeRoot, targetId), rendered([lifecycleRow(CAPTURED_AT), routeRow('route-v2', 'issue-16200', 'Switch the hook projection writer')]));
  });
});
