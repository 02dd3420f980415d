'use strict';
/**
 * The writer surface against a host that gets its configuration or its connection wrong:
 *
 * 1. `makeHookProjectionWriter` checks the whole configuration when it is made: a value the
 *    store would refuse is INVALID_CONFIG there, before anything touches the database (the
 *    JavaScript writer's tables are not converted by an `ensureSchema` whose writer could never
 *    submit).
 * 2. A relative runtime root is resolved once, when the writer or the store is made: a later
 *    `process.chdir` moves nothing.
 * 3. A TEMP table of solewriter's name on the host's connection shadows nothing: every
 *    statement solewriter runs names `main`, so a grant lands in the store's table and a
 *    second connection sees it held.
 * 4. The types say what the calls take and answer: `readProjection` its profile, `inspect()`
 *    a text watermark as a string (`test/package/memory_core.ts`, compiled with `tsc --strict`).
 */

const { describe, it } = require('node:test');
const { spawnSync } = require('node:child_process');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const Database = require('better-sqlite3');
const { ProjectionStore, initialize, readProjection } = require('..');
const { makeHookProjectionWriter } = require('solewriter/memory-core');
const js = require('./js_writer');
const { setup, scratch, tuple, submission, CHANNELS, TTL_MS } = require('./helpers');
const mc = require('./memory_core_fixtures');

const coded = (code) => (e) => {
  assert.equal(e.code, code, e.message);
  return true;
};

/** Every schema object of the database and every row of its tables: what "untouched" compares. */
function everything(db) {
  const objects = db.prepare('SELECT type, name, tbl_name, sql FROM main.sqlite_master ORDER BY name').all();
  const rows = {};
  for (const { type, name } of objects) {
    if (type === 'table') rows[name] = db.prepare(`SELECT * FROM main."${name}" ORDER BY rowid`).raw(true).all();
  }
  return { objects, rows };
}

describe('makeHookProjectionWriter checks the whole configuration before anything touches the store', () => {
  const runtimeRoot = scratch();
  const good = {
    hookProjectionRoot: path.join(runtimeRoot, 'hook-projections'),
    hookProjectionLeaseTtlMs: 15_000,
    hookProjectionBusyTimeoutMs: 1_000,
    hookProjectionChannels: mc.CHANNELS,
  };
  const [frontier, route] = mc.CHANNELS;
  const { envelopeSchema: _, ...withoutSchema } = frontier;
  const BAD = {
    'a lease TTL of 1.5 ms': { hookProjectionLeaseTtlMs: 1.5 },
    'a lease TTL of 2^53 ms': { hookProjectionLeaseTtlMs: 2 ** 53 },
    'a busy timeout of 0.5 ms': { hookProjectionBusyTimeoutMs: 0.5 },
    'a root below a file': { hookProjectionRoot: path.join(__filename, 'hook-projections') },
    'a channel without envelopeSchema': { hookProjectionChannels: [withoutSchema, route] },
    'an unknown watermark kind': { hookProjectionChannels: [{ ...frontier, watermark: 'lamport' }, route] },
    'a channel named twice': { hookProjectionChannels: [frontier, route, { ...frontier, owner: 'router' }] },
  };

  for (const [what, more] of Object.entries(BAD)) {
    it(`${what}: INVALID_CONFIG from the factory; the JS writer's tables untouched`, () => {
      const db = mc.openMemoryCoreDb(path.join(scratch(), 'mc.sqlite'));
      js.createTables(db);
      const before = everything(db);
      let resolved = 0;
      const getDb = () => {
        resolved += 1;
        return db;
      };
      let writer;
      assert.throws(() => {
        writer = makeHookProjectionWriter({ getDb, config: { ...good, ...more }, fs });
      }, coded('INVALID_CONFIG'));
      assert.equal(writer, undefined);
      assert.equal(resolved, 0);
      assert.deepEqual(everything(db), before);
      db.close();
    });
  }

  it('a root not there yet: its ancestors made (mode 0700) once the rest passed; a refused configuration makes none', () => {
    const absent = path.join(scratch(), 'not', 'yet');
    const config = { ...good, hookProjectionRoot: path.join(absent, 'hook-projections') };
    assert.throws(() => makeHookProjectionWriter({ getDb: () => null, config: { ...config, hookProjectionLeaseTtlMs: 1.5 } }), coded('INVALID_CONFIG'));
    assert.equal(fs.existsSync(path.dirname(absent)), false);
    makeHookProjectionWriter({ getDb: () => null, config });
    for (const made of [path.dirname(absent), absent]) assert.equal(fs.statSync(made).mode & 0o777, 0o700, made);
    assert.equal(fs.existsSync(config.hookProjectionRoot), false, 'the root itself is made by the first publication');
  });

  it('a missing leaf is still the writer\'s own TypeError; the good configuration makes a writer', () => {
    const { hookProjectionLeaseTtlMs: _ttl, ...rest } = good;
    assert.throws(
      () => makeHookProjectionWriter({ getDb: () => null, config: rest }),
      (e) => e instanceof TypeError && e.message === '[hookProjectionWriter] hookProjectionLeaseTtlMs is required from config — no local default',
    );
    assert.equal(typeof makeHookProjectionWriter({ getDb: () => null, config: good }).ensureSchema, 'function');
  });
});

describe('a relative runtime root is resolved when the writer or the store is made', () => {
  /** Runs `body` with the working directory `dir`, then goes back. */
  const inDir = (dir, body) => {
    const was = process.cwd();
    process.chdir(dir);
    try {
      return body();
    } finally {
      process.chdir(was);
    }
  };

  it('makeHookProjectionWriter: published under the directory the root named at construction', () => {
    const home = scratch();
    const elsewhere = scratch();
    fs.mkdirSync(path.join(home, 'runtime'));
    fs.mkdirSync(path.join(elsewhere, 'runtime'));
    const db = mc.openMemoryCoreDb(path.join(home, 'mc.sqlite'));
    const writer = inDir(home, () =>
      makeHookProjectionWriter({
        getDb: () => db,
        config: {
          hookProjectionRoot: path.join('runtime', 'hook-projections'),
          hookProjectionLeaseTtlMs: 15_000,
          hookProjectionBusyTimeoutMs: 1_000,
          hookProjectionChannels: mc.CHANNELS,
        },
        fs,
        clock: () => mc.NOW,
      }),
    );
    const published = inDir(elsewhere, () => {
      writer.ensureSchema();
      const envelope = mc.frontier();
      const submitted = writer.submitChannel(mc.writerSubmission('lifecycle-frontier', envelope));
      assert.equal(submitted.accepted, true);
      return writer.publish({ tuple: mc.TUPLE, consumerBinding: mc.BINDING });
    });
    assert.equal(published.published, true);
    const id = published.targetId;
    assert.ok(fs.existsSync(path.join(home, 'runtime', 'hook-projections', id, 'current.json')));
    assert.equal(fs.existsSync(path.join(elsewhere, 'runtime', 'hook-projections')), false);
    db.close();
  });

  it('new ProjectionStore(...): published, and read back, under the directory the root named at construction', () => {
    const home = scratch();
    const elsewhere = scratch();
    fs.mkdirSync(path.join(home, 'runtime'));
    fs.mkdirSync(path.join(elsewhere, 'runtime'));
    const db = new Database(path.join(home, 'host.sqlite'));
    db.pragma('journal_mode = WAL');
    initialize(db);
    const store = inDir(home, () =>
      new ProjectionStore(db, { runtimeRoot: 'runtime', channels: CHANNELS, leaseTtlMs: TTL_MS, busyTimeoutMs: 1_000, clock: () => 1_000 }),
    );
    assert.ok(path.isAbsolute(store.config.runtimeRoot));
    assert.equal(fs.realpathSync(store.config.runtimeRoot), fs.realpathSync(path.join(home, 'runtime')));
    const answer = inDir(elsewhere, () => {
      const id = store.admitTarget(tuple(0));
      store.submit('router', submission(id, 0, 1, 'one'));
      return { id, published: store.publishNow(id, 'holder').published, read: store.readProjection(id) };
    });
    assert.equal(answer.published.epoch, 1);
    assert.equal(answer.read.fencingEpoch, 1);
    assert.ok(fs.existsSync(path.join(home, 'runtime', 'hook-projections', answer.id, 'current.json')));
    assert.equal(fs.existsSync(path.join(elsewhere, 'runtime', 'hook-projections')), false);
    assert.equal(readProjection(path.join(home, 'runtime'), answer.id).fencingEpoch, 1);
    db.close();
  });
});

describe('a TEMP table of solewriter\'s name on the host\'s connection shadows nothing', () => {
  it('the grant lands in main\'s HookProjectionLeases; a second connection sees it held', () => {
    const { db, dbPath, store, runtimeRoot } = setup();
    const id = store.admitTarget(tuple(0));
    store.submit('router', submission(id, 0, 1, 'one'));
    // A copy of both tables, of the same shape and rows, in the connection's temp schema.
    db.exec('CREATE TEMP TABLE HookProjectionLeases AS SELECT * FROM main.HookProjectionLeases');
    db.exec('CREATE TEMP TABLE HookProjectionChannels AS SELECT * FROM main.HookProjectionChannels');
    const { granted } = store.acquire(id, 'first');
    assert.ok(granted);
    assert.equal(db.prepare('SELECT state FROM main.HookProjectionLeases WHERE target_id = ?').get(id).state, 'held');
    assert.equal(db.prepare('SELECT state FROM temp.HookProjectionLeases WHERE target_id = ?').get(id).state, 'unheld');

    const other = new Database(dbPath, { timeout: 5_000 });
    const second = new ProjectionStore(other, { runtimeRoot, channels: CHANNELS, leaseTtlMs: TTL_MS, busyTimeoutMs: 1_000, clock: () => 1_000 });
    const answer = second.acquire(id, 'second');
    assert.equal(answer.granted, undefined);
    assert.equal(answer.held.holder, 'first');

    // The publication reads main's channels and releases main's grant.
    assert.equal(store.publish(granted).epoch, 1);
    assert.equal(db.prepare('SELECT state FROM main.HookProjectionLeases WHERE target_id = ?').get(id).state, 'released');
    assert.deepEqual(second.inspect().leases.map((l) => [l.targetId, l.state]), [[id, 'released']]);
    other.close();
    db.close();
  });

  it('ensureSchema converts main\'s JavaScript writer tables; the TEMP copies stay as they were', () => {
    const dir = scratch();
    const db = mc.openMemoryCoreDb(path.join(dir, 'mc.sqlite'));
    js.createTables(db);
    const targetId = js.deriveTargetId(mc.TUPLE);
    const envelope = mc.frontier();
    js.submit(db, {
      targetId,
      channel: 'lifecycle-frontier',
      envelope,
      sourceWatermark: envelope.sourceWatermark,
      capturedAt: envelope.capturedAt,
      expiresAt: envelope.expiresAt,
      now: new Date(mc.NOW).toISOString(),
    });
    db.exec('CREATE TEMP TABLE HookProjectionLeases AS SELECT * FROM main.HookProjectionLeases');
    db.exec('CREATE TEMP TABLE HookProjectionChannels AS SELECT * FROM main.HookProjectionChannels');
    const temp = () => ({
      objects: db.prepare('SELECT type, name, sql FROM temp.sqlite_master ORDER BY name').all(),
      leases: db.prepare('SELECT * FROM temp.HookProjectionLeases').all(),
      channels: db.prepare('SELECT * FROM temp.HookProjectionChannels').all(),
    });
    const before = temp();
    const writer = makeHookProjectionWriter({
      getDb: () => db,
      config: {
        hookProjectionRoot: path.join(dir, 'hook-projections'),
        hookProjectionLeaseTtlMs: 15_000,
        hookProjectionBusyTimeoutMs: 1_000,
        hookProjectionChannels: mc.CHANNELS,
      },
      fs,
      clock: () => mc.NOW,
    });
    assert.deepEqual(writer.ensureSchema(), { schema: 'present', adoption: 'converted' });
    assert.deepEqual(temp(), before);
    assert.equal(db.prepare('SELECT count(*) AS n FROM main.HookProjectionChannels').get().n, 1);
    db.close();
  });

  it('the Memory Core writer: ensureSchema, submitChannel and publish write main\'s tables', () => {
    const dir = scratch();
    const db = mc.openMemoryCoreDb(path.join(dir, 'mc.sqlite'));
    const writer = makeHookProjectionWriter({
      getDb: () => db,
      config: {
        hookProjectionRoot: path.join(dir, 'hook-projections'),
        hookProjectionLeaseTtlMs: 15_000,
        hookProjectionBusyTimeoutMs: 1_000,
        hookProjectionChannels: mc.CHANNELS,
      },
      fs,
      clock: () => mc.NOW,
    });
    writer.ensureSchema();
    db.exec('CREATE TEMP TABLE HookProjectionLeases AS SELECT * FROM main.HookProjectionLeases');
    db.exec('CREATE TEMP TABLE HookProjectionChannels AS SELECT * FROM main.HookProjectionChannels');
    const envelope = mc.frontier();
    const submitted = writer.submitChannel(mc.writerSubmission('lifecycle-frontier', envelope));
    assert.deepEqual(submitted, { accepted: true, outcome: 'advanced' });
    const published = writer.publish({ tuple: mc.TUPLE, consumerBinding: mc.BINDING });
    assert.equal(published.published, true);
    assert.equal(published.channels, 1);
    const main = db.prepare('SELECT fencing_epoch AS epoch, state FROM main.HookProjectionLeases').all();
    assert.deepEqual(main, [{ epoch: 1, state: 'released' }]);
    assert.equal(db.prepare('SELECT count(*) AS n FROM main.HookProjectionChannels').get().n, 1);
    assert.equal(db.prepare('SELECT count(*) AS n FROM temp.HookProjectionLeases').get().n, 0);
    assert.equal(db.prepare('SELECT count(*) AS n FROM temp.HookProjectionChannels').get().n, 0);
    db.close();
  });
});

describe('the types', () => {
  const tsc = path.join(__dirname, '..', 'node_modules', '.bin', 'tsc');
  it('test/package compiles with tsc --strict: readProjection takes a profile, inspect() a text watermark', { skip: !fs.existsSync(tsc) && 'typescript is not installed' }, () => {
    const run = spawnSync(tsc, ['-p', path.join(__dirname, 'package'), '--noEmit'], { encoding: 'utf8' });
    assert.equal(run.status, 0, `${run.stdout}${run.stderr}`);
  });
});
