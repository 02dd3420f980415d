'use strict';
/**
 * The Memory Core's switch from its own JavaScript writer to solewriter, run as a Memory Core
 * engineer would run it, on a store opened the Memory Core's way (`new Database(file)`, WAL,
 * `busy_timeout = 5000`, `foreign_keys = ON`) that also holds the host's own tables (a foreign
 * key with ON DELETE CASCADE, a trigger):
 *
 * a. the JS writer (`js_writer.js`: its statements, its composition and its transport) publishes
 *    a lifecycle-frontier and a computed-route envelope with the full consumer binding, and the
 *    hooks' reader (`clients/node/memory-core-reader.mjs`) renders it;
 * b. `targetIdFor` under the Memory Core profile is the JS writer's id, the path hooks read;
 * c. `adoptJsWriterTables` converts the writer's tables (ids kept), `initialize` then finds them;
 * d. the JS writer, if still called, changes nothing and fails closed;
 * e. solewriter publishes at the same path, a higher epoch, the same bytes the JS writer would
 *    compose from the same rows, rendered the same by the reader;
 * f. watermarks of the route producer order by instant and sequence (where upstream orders text);
 * g. a publication without a binding, an envelope without `schemaVersion` and an ISO watermark
 *    not in `toISOString()` form are refused, with nothing written.
 *
 * The steps share one database and run in order.
 */

const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { pathToFileURL } = require('node:url');
const Database = require('better-sqlite3');
const { initialize, ProjectionStore, adoptJsWriterTables, targetIdFor } = require('..');
const js = require('./js_writer');

const {
  openMemoryCoreDb,
  PROFILE,
  NOW,
  READ_AT,
  CAPTURED_AT,
  EXPIRES_AT,
  TUPLE,
  BINDING,
  CHANNELS,
  BUDGET,
  lifecycleRow,
  routeRow,
  frontier,
  route,
  rendered,
} = require('./memory_core_fixtures');

// solewriter publishes one second after the JS writer.
const SWITCHED_AT = NOW + 1_000;
const JS_TOKEN = 'a5'.repeat(32);
const LIFECYCLE_ROW = lifecycleRow();
const ROUTE_ROW = routeRow('route-v1', 'issue-15315', 'Render the bounded hook projection');

// ---------------------------------------------------------------------------------------------
// The host

/** A Memory Core store: opened as `ai/graph/storage/SQLite.mjs` opens it, with its own tables. */
function openMemoryCore(dir) {
  const db = openMemoryCoreDb(path.join(dir, 'memory-core.sqlite'));
  db.exec(`
    CREATE TABLE Nodes (id TEXT PRIMARY KEY, label TEXT NOT NULL);
    CREATE TABLE Edges (
      source TEXT NOT NULL REFERENCES Nodes (id) ON DELETE CASCADE,
      target TEXT NOT NULL REFERENCES Nodes (id) ON DELETE CASCADE,
      kind TEXT NOT NULL
    );
    CREATE TABLE EdgeLog (edge INTEGER NOT NULL, at TEXT NOT NULL);
    CREATE TRIGGER EdgesLogged AFTER INSERT ON Edges BEGIN
      INSERT INTO EdgeLog (edge, at) VALUES (NEW.rowid, 'inserted');
    END;
    INSERT INTO Nodes VALUES ('agent:neo-gpt', 'agent'), ('issue:15315', 'issue'), ('pr:16111', 'pr');
    INSERT INTO Edges VALUES ('agent:neo-gpt', 'issue:15315', 'routes'), ('agent:neo-gpt', 'pr:16111', 'owns');
  `);
  return db;
}

/** A value as text, BLOBs as hex (better-sqlite3 returns them as Buffers). */
const text = (value) => JSON.stringify(value, (_, v) => (v && v.type === 'Buffer' ? Buffer.from(v.data).toString('hex') : v));

/** Every row of `sqlite_master`, as stored. */
const schemaDump = (db) => db.prepare('SELECT * FROM sqlite_master ORDER BY rowid').raw(true).all().map(text);

/** Every row of `tables`, in rowid order. */
const rowsDump = (db, tables) =>
  tables.flatMap((t) => db.prepare(`SELECT * FROM ${t} ORDER BY rowid`).raw(true).all().map((r) => `${t} ${text(r)}`));

const HOST_TABLES = ['Nodes', 'Edges', 'EdgeLog'];
const PROJECTION_TABLES = ['HookProjectionLeases', 'HookProjectionChannels'];

/** The JS writer's channel rows of `targetId`, as its publish reads them. */
const jsRows = (db, targetId) =>
  db
    .prepare(
      `SELECT channel, source_watermark, envelope_json, captured_at, expires_at, conflict_reason
       FROM HookProjectionChannels WHERE target_id = ? ORDER BY channel`,
    )
    .all(targetId);

/** The JS writer's submission, as `writer.submitChannel` makes it (updated_at from the clock). */
const jsSubmit = (db, targetId, channel, envelope, sourceWatermark = envelope.sourceWatermark) =>
  js.submit(db, {
    targetId,
    channel,
    envelope,
    sourceWatermark,
    capturedAt: envelope.capturedAt,
    expiresAt: envelope.expiresAt,
    now: new Date(NOW).toISOString(),
  });

/** solewriter's submission of a producer's envelope (times in ms, the watermark as stamped). */
const swSubmission = (targetId, channel, envelope, sourceWatermark = envelope.sourceWatermark) => ({
  targetId,
  channel,
  sourceWatermark,
  envelopeJson: JSON.stringify(envelope),
  capturedAt: Date.parse(envelope.capturedAt),
  expiresAt: Date.parse(envelope.expiresAt),
});

/** Asserts an error of solewriter's (its `code`) or of better-sqlite3's (`SqliteError`, its `code`). */
const coded = (code) => (e) => {
  assert.equal(e.code, code, e.message);
  return true;
};

// ---------------------------------------------------------------------------------------------

describe('the Memory Core switches from its own JS writer to solewriter', () => {
  let reader;
  let dir;
  let runtimeRoot;
  let db;
  let targetId;
  let projectionPath;
  let attested;
  let renderJs;
  let jsBytes;
  let jsStoredRows;
  let hostBefore;
  let store;

  const read = () => reader.readHookProjection({ projectionPath, attestedBinding: attested, budget: BUDGET, now: READ_AT });
  const rowsOf = (result) => result.render.split('\n').slice(1);
  const tempFiles = () => fs.readdirSync(path.dirname(projectionPath)).filter((f) => f !== 'current.json');

  before(async () => {
    reader = await import(pathToFileURL(path.resolve(__dirname, '../../../clients/node/memory-core-reader.mjs')).href);
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'solewriter-mc-switch-'));
    runtimeRoot = path.join(dir, 'plane');
    fs.mkdirSync(runtimeRoot);
    db = openMemoryCore(dir);
    hostBefore = rowsDump(db, HOST_TABLES);
  });

  after(() => {
    if (db) db.close();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('a. the JS writer publishes both channels with the binding, and the hooks render it', () => {
    js.ensureSchema(db);
    const schema = schemaDump(db);
    js.ensureSchema(db); // at every boot: idempotent
    assert.deepEqual(schemaDump(db), schema);

    targetId = js.deriveTargetId(TUPLE);
    assert.equal(jsSubmit(db, targetId, 'lifecycle-frontier', frontier()), 'advanced');
    assert.equal(jsSubmit(db, targetId, 'computed-route', route({ n: 9 })), 'advanced');
    assert.equal(jsSubmit(db, targetId, 'computed-route', route({ n: 9 })), 'replayed');

    const published = js.publish(db, { runtimeRoot, tuple: TUPLE, consumerBinding: BINDING, now: NOW, leaseTtlMs: 15_000, token: JS_TOKEN });
    assert.deepEqual(published, { published: true, channels: 2, targetId, epoch: 1 });
    assert.deepEqual(
      db.prepare('SELECT * FROM HookProjectionLeases').all(),
      [{ target_id: targetId, fencing_epoch: 1, holder_token_hash: null, holder_instance_digest: 'instance-digest', acquired_at: NOW, expires_at: 0, state: 'released' }],
      'released after the publication',
    );

    projectionPath = `${runtimeRoot}/hook-projections/${targetId}/current.json`;
    jsBytes = fs.readFileSync(projectionPath);
    jsStoredRows = jsRows(db, targetId);
    assert.deepEqual(tempFiles(), []);
    const doc = JSON.parse(jsBytes);
    assert.deepEqual(doc.publication, {
      targetId,
      fencingEpoch: 1,
      generatedAt: NOW,
      producerWatermarks: { 'computed-route': `${CAPTURED_AT}:9`, 'lifecycle-frontier': CAPTURED_AT },
    });
    assert.deepEqual(doc.consumerBinding, BINDING);

    attested = { targetId, capability: 'self-awareness', agentId: '@neo-gpt', harnessType: 'codex', instanceKeyDigest: 'instance-digest', workspaceKeyDigest: 'workspace-digest' };
    renderJs = read();
    assert.deepEqual(renderJs, rendered([LIFECYCLE_ROW, ROUTE_ROW]));
  });

  it("b. targetIdFor under the Memory Core profile is the JS writer's id, the path hooks read", () => {
    const id = targetIdFor(PROFILE, TUPLE);
    assert.match(id, /^[0-9a-f]{32}$/);
    assert.equal(id, targetId);
    assert.equal(id, js.legacyTargetId(TUPLE));
    assert.ok(fs.existsSync(`${runtimeRoot}/hook-projections/${id}/current.json`));
  });

  it("c. adoption converts the writer's tables with their ids; initialize then finds them present", () => {
    // Before the adoption, initialize refuses the writer's tables and changes nothing.
    const before = [schemaDump(db), rowsDump(db, PROJECTION_TABLES)];
    assert.throws(() => initialize(db, { profile: PROFILE }), coded('FOREIGN_SCHEMA'));
    assert.deepEqual([schemaDump(db), rowsDump(db, PROJECTION_TABLES)], before);

    const adoptedFrom = Date.now();
    assert.deepEqual(adoptJsWriterTables(db, [], { profile: PROFILE, channels: CHANNELS }), { outcome: 'converted', leases: 1, channels: 2 });
    const adoptedTo = Date.now();
    assert.equal(initialize(db, { profile: PROFILE }), 'present');
    assert.deepEqual(adoptJsWriterTables(db, [], { profile: PROFILE, channels: CHANNELS }), { outcome: 'alreadyAdopted' });

    // The released lease keeps its epoch; its hash is 32 zero bytes (no one's token) and its
    // expiry the adoption's time (the system clock: no clock was given).
    const [lease] = db.prepare('SELECT * FROM HookProjectionLeases').all();
    const { expires_at: expiresAt, ...kept } = lease;
    assert.deepEqual(kept, {
      target_id: targetId,
      fencing_epoch: 1,
      holder_token_hash: Buffer.alloc(32),
      holder_instance_digest: 'instance-digest',
      acquired_at: NOW,
      state: 'released',
    });
    assert.ok(expiresAt >= adoptedFrom && expiresAt <= adoptedTo, `expires_at ${expiresAt}`);
    const channels = db
      .prepare('SELECT channel, source_watermark, captured_at, expires_at, degraded_reason FROM HookProjectionChannels WHERE target_id = ? ORDER BY channel')
      .all(targetId);
    assert.deepEqual(channels, [
      { channel: 'computed-route', source_watermark: `${CAPTURED_AT}:9`, captured_at: Date.parse(CAPTURED_AT), expires_at: Date.parse(EXPIRES_AT), degraded_reason: null },
      { channel: 'lifecycle-frontier', source_watermark: CAPTURED_AT, captured_at: Date.parse(CAPTURED_AT), expires_at: Date.parse(EXPIRES_AT), degraded_reason: null },
    ]);
    assert.deepEqual(rowsDump(db, HOST_TABLES), hostBefore, "the host's rows are untouched");
    assert.deepEqual(fs.readFileSync(projectionPath), jsBytes, 'the adoption publishes nothing');
  });

  it('d. the JS writer, if still called, changes nothing and fails closed', () => {
    const schema = schemaDump(db);
    const rows = rowsDump(db, PROJECTION_TABLES);

    js.ensureSchema(db);
    assert.deepEqual(schemaDump(db), schema, 'ensureSchema leaves sqlite_master byte-identical');

    // Every write of the writer's meets a STRICT column of another type: its ISO times in
    // solewriter's INTEGER columns, its hex token hash in the 32-byte BLOB column.
    const later = frontier({ capturedAt: new Date(NOW).toISOString() });
    assert.throws(() => jsSubmit(db, targetId, 'lifecycle-frontier', later), coded('SQLITE_CONSTRAINT_DATATYPE'));
    const conflicting = { ...route({ n: 9 }), probe: 'another payload' };
    assert.throws(() => jsSubmit(db, targetId, 'computed-route', conflicting), coded('SQLITE_CONSTRAINT_DATATYPE'));
    // Its submissions that write nothing answer as before, without failing: a byte-identical
    // replay of the adopted row, and a watermark its text order puts below the stored one.
    assert.equal(jsSubmit(db, targetId, 'computed-route', route({ n: 9 })), 'replayed');
    assert.equal(jsSubmit(db, targetId, 'computed-route', route({ n: 1 })), 'regressed-watermark');
    assert.throws(() => js.acquire(db, targetId, 'instance-digest', NOW, 15_000, 'c3'.repeat(32)), coded('SQLITE_CONSTRAINT_DATATYPE'));
    assert.equal(js.release(db, targetId, 1, JS_TOKEN), false, 'its release changes 0 rows');
    assert.throws(
      () => js.publish(db, { runtimeRoot, tuple: TUPLE, consumerBinding: BINDING, now: NOW, leaseTtlMs: 15_000, token: JS_TOKEN }),
      coded('SQLITE_CONSTRAINT_DATATYPE'),
    );

    assert.deepEqual(schemaDump(db), schema);
    assert.deepEqual(rowsDump(db, PROJECTION_TABLES), rows, 'both tables unchanged');
    assert.deepEqual(fs.readFileSync(projectionPath), jsBytes, 'current.json unchanged');
    assert.deepEqual(tempFiles(), []);
    assert.equal(db.inTransaction, false);
  });

  it('e. solewriter publishes at the same path, a higher epoch, the same document the JS writer composes', () => {
    store = new ProjectionStore(db, { runtimeRoot, channels: CHANNELS, leaseTtlMs: 5_000, busyTimeoutMs: 1_000, profile: PROFILE, clock: () => SWITCHED_AT });
    const { published } = store.publishNow(targetId, 'memory-core-1', { consumerBinding: BINDING });
    assert.match(published.targetId, /^[0-9a-f]{32}$/);
    assert.equal(published.targetId, targetId);
    assert.equal(path.resolve(published.path), path.resolve(projectionPath));
    assert.ok(published.epoch > 1, `epoch ${published.epoch} above the JS writer's 1`);
    assert.equal(published.epoch, 2);
    assert.equal(published.publishedAt, SWITCHED_AT);

    const bytes = fs.readFileSync(projectionPath);
    assert.equal(published.bytes, bytes.length);
    // The bytes the JS writer composes from its own rows at this epoch and clock.
    const composed = js.buildProjectionEnvelope({ targetId, fencingEpoch: published.epoch, generatedAt: SWITCHED_AT, consumerBinding: BINDING, rows: jsStoredRows });
    assert.equal(bytes.toString('utf8'), JSON.stringify(composed));
    assert.deepEqual(tempFiles(), []);

    assert.deepEqual(read(), renderJs, 'the hooks render the same');
    assert.deepEqual(
      store.inspect().leases.map((l) => [l.targetId, l.epoch, l.state]),
      [[targetId, 2, 'released']],
    );
    assert.deepEqual(rowsDump(db, HOST_TABLES), hostBefore, "the host's rows are untouched");
  });

  it('f. route watermarks order by instant, then sequence: `:10` advances past `:9`', async () => {
    // Here solewriter deliberately differs from the JS writer: upstream compares watermarks as
    // text, so the route producer's `${capturedAt}:10` sorts before `${capturedAt}:9` and a
    // later pass in the same millisecond is refused as regressed (its text order is wrong).
    const next = route({ n: 10, routeVersion: 'route-v2', id: 'issue-16200', title: 'Switch the hook projection writer' });

    const jsOnly = new Database(path.join(dir, 'js-only.sqlite'));
    try {
      jsOnly.pragma('journal_mode = WAL');
      js.ensureSchema(jsOnly);
      assert.equal(jsSubmit(jsOnly, targetId, 'computed-route', route({ n: 9 })), 'advanced');
      assert.equal(jsSubmit(jsOnly, targetId, 'computed-route', next), 'regressed-watermark');
      assert.deepEqual(jsRows(jsOnly, targetId).map((r) => r.source_watermark), [`${CAPTURED_AT}:9`]);
    } finally {
      jsOnly.close();
    }

    assert.equal(store.submit('router', swSubmission(targetId, 'computed-route', next)), 'advanced');
    const { published } = await store.publishNowAsync(targetId, 'memory-core-1', { consumerBinding: BINDING });
    assert.equal(published.epoch, 3);
    const doc = JSON.parse(fs.readFileSync(projectionPath));
    assert.equal(doc.publication.producerWatermarks['computed-route'], `${CAPTURED_AT}:10`);
    assert.deepEqual(read(), rendered([LIFECYCLE_ROW, routeRow('route-v2', 'issue-16200', 'Switch the hook projection writer')]));
  });

  it('g. fail closed: no binding, no schemaVersion, an instant not in toISOString form', async () => {
    const bytes = fs.readFileSync(projectionPath);
    const rows = rowsDump(db, PROJECTION_TABLES);
    const unchanged = (what) => {
      assert.deepEqual(fs.readFileSync(projectionPath), bytes, `${what}: current.json unchanged`);
      assert.deepEqual(rowsDump(db, PROJECTION_TABLES), rows, `${what}: no row written`);
      assert.deepEqual(tempFiles(), [], `${what}: no temp file`);
    };

    assert.throws(() => store.publishNow(targetId, 'memory-core-1'), coded('INVALID_INPUT'));
    unchanged('publishNow without options');
    assert.throws(() => store.publishNow(targetId, 'memory-core-1', {}), coded('INVALID_INPUT'));
    unchanged('publishNow without a binding');
    await assert.rejects(store.publishNowAsync(targetId, 'memory-core-1'), coded('INVALID_INPUT'));
    unchanged('publishNowAsync without a binding');
    await assert.rejects(store.publishNowAsync(targetId, 'memory-core-1', { consumerBinding: undefined }), coded('INVALID_INPUT'));
    unchanged('publishNowAsync with an undefined binding');
    const releasedRows = rows;

    const later = new Date(NOW).toISOString();
    const { schemaVersion, ...unversioned } = frontier({ capturedAt: later });
    const wrongField = { schema: schemaVersion, ...unversioned };
    assert.throws(() => store.submit('frontier', swSubmission(targetId, 'lifecycle-frontier', wrongField)), (e) => {
      assert.equal(e.code, 'REJECTED');
      assert.match(e.message, /missing string field `schemaVersion`/);
      return true;
    });
    assert.deepEqual(rowsDump(db, PROJECTION_TABLES), releasedRows, 'schema instead of schemaVersion: nothing written');

    for (const watermark of ['2026-07-28T18:30:00Z', '2026-07-28T18:30:00.000+00:00', '2026-07-28 18:30:00.000Z', '1785263400000']) {
      const envelope = frontier({ capturedAt: later, sourceWatermark: watermark });
      assert.throws(
        () => store.submit('frontier', swSubmission(targetId, 'lifecycle-frontier', envelope)),
        (e) => e.code === 'REJECTED' && e.message.includes('not a valid instant watermark'),
        watermark,
      );
      assert.deepEqual(rowsDump(db, PROJECTION_TABLES), releasedRows, `${watermark}: nothing written`);
    }
    assert.deepEqual(fs.readFileSync(projectionPath), bytes);

    // The same envelope with its watermark as toISOString() prints it advances.
    assert.equal(store.submit('frontier', swSubmission(targetId, 'lifecycle-frontier', frontier({ capturedAt: later }))), 'advanced');
  });

  it('h. a conflicted channel and an expired one compose as the JS writer composes them', () => {
    const other = new Database(path.join(dir, 'degraded.sqlite'));
    try {
      other.pragma('journal_mode = WAL');
      other.pragma('busy_timeout = 5000');
      other.pragma('foreign_keys = ON');
      const root = path.join(dir, 'degraded-plane');
      fs.mkdirSync(root);
      js.ensureSchema(other);
      assert.equal(jsSubmit(other, targetId, 'lifecycle-frontier', frontier()), 'advanced');
      const second = frontier();
      second.items[0].state = 'approved';
      assert.equal(jsSubmit(other, targetId, 'lifecycle-frontier', second), 'source-conflict');
      const shortLived = { ...route({ n: 3 }), expiresAt: new Date(NOW + 500).toISOString() }; // fresh at NOW, stale at SWITCHED_AT
      assert.equal(jsSubmit(other, targetId, 'computed-route', shortLived), 'advanced');
      const rows = jsRows(other, targetId);
      assert.equal(js.publish(other, { runtimeRoot: root, tuple: TUPLE, consumerBinding: BINDING, now: NOW, leaseTtlMs: 15_000 }).epoch, 1);
      const file = `${root}/hook-projections/${targetId}/current.json`;
      const readIt = () => reader.readHookProjection({ projectionPath: file, attestedBinding: attested, budget: BUDGET, now: READ_AT });
      const renderedByJs = readIt();

      assert.deepEqual(adoptJsWriterTables(other, [], { profile: PROFILE, channels: CHANNELS }), { outcome: 'converted', leases: 1, channels: 2 });
      const degradedStore = new ProjectionStore(other, { runtimeRoot: root, channels: CHANNELS, leaseTtlMs: 5_000, busyTimeoutMs: 1_000, profile: PROFILE, clock: () => SWITCHED_AT });
      const { published } = degradedStore.publishNow(targetId, 'memory-core-1', { consumerBinding: BINDING });
      assert.equal(published.epoch, 2);
      const composed = js.buildProjectionEnvelope({ targetId, fencingEpoch: 2, generatedAt: SWITCHED_AT, consumerBinding: BINDING, rows });
      assert.equal(composed.lifecycleActions.status, 'degraded');
      assert.equal(composed.computedRoute.status, 'stale');
      assert.equal(fs.readFileSync(file, 'utf8'), JSON.stringify(composed));
      const renderedBySolewriter = readIt();
      assert.deepEqual(renderedBySolewriter, renderedByJs);
      assert.deepEqual(rowsOf(renderedBySolewriter), [
        `Lifecycle degraded — two payloads claim watermark ${CAPTURED_AT}`,
        `Route stale — channel expired at ${new Date(NOW + 500).toISOString()}`,
      ]);
    } finally {
      other.close();
    }
  });

  it("the host's own tables still hold their rows and keep their foreign keys and trigger", () => {
    assert.deepEqual(rowsDump(db, HOST_TABLES), hostBefore);
    assert.equal(db.pragma('foreign_keys', { simple: true }), 1);
    assert.equal(db.pragma('journal_mode', { simple: true }), 'wal');
    assert.throws(() => db.prepare("INSERT INTO Edges VALUES ('agent:nobody', 'issue:15315', 'routes')").run(), coded('SQLITE_CONSTRAINT_FOREIGNKEY'));
    db.prepare("INSERT INTO Edges VALUES ('pr:16111', 'issue:15315', 'fixes')").run();
    assert.equal(db.prepare('SELECT count(*) AS n FROM EdgeLog').get().n, 3, 'the trigger fired');
    db.prepare("DELETE FROM Nodes WHERE id = 'pr:16111'").run();
    assert.equal(db.prepare('SELECT count(*) AS n FROM Edges').get().n, 1, 'ON DELETE CASCADE');
  });

  it(
    'the two-step form: acquire, then publish(grant, { consumerBinding }), and publish(grant) without one refused',
    () => {
      const bytes = fs.readFileSync(projectionPath);
      const { granted } = store.acquire(targetId, 'memory-core-2');
      assert.equal(granted.targetId, targetId);
      const held = rowsDump(db, PROJECTION_TABLES);
      assert.throws(() => store.publish(granted), coded('INVALID_INPUT'));
      assert.deepEqual(rowsDump(db, PROJECTION_TABLES), held);
      assert.deepEqual(fs.readFileSync(projectionPath), bytes);
      const published = store.publish(granted, { consumerBinding: BINDING });
      assert.equal(published.epoch, granted.epoch);
      // The lifecycle row is whatever the steps before left stored (the last of them submitted a
      // later frontier); the route is the one the switch's publications carry.
      const rows = rowsOf(read());
      assert.equal(rows.length, 2);
      assert.match(rows[0], /^Lifecycle lifecycle-one \[own-pr-repair\/changes-requested\]/);
      assert.equal(rows[1], routeRow('route-v2', 'issue-16200', 'Switch the hook projection writer'));
    },
  );
});
