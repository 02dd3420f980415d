'use strict';
require('./test_addon'); // chosen tokens: the test build of the addon
/**
 * The non-blocking publication (`publishAsync`, `publishNowAsync`): the same machines as the
 * synchronous calls, with the file effects outside the transaction on the libuv thread pool.
 * It publishes the same bytes and rows as the synchronous call; an event-loop turn passes
 * between the draft and the transaction, none inside the transaction; while it is paused
 * between turns (after its draft, before its transaction) it keeps the target lock, so a
 * takeover is refused and, once its grant expired meanwhile, it is fenced and renames nothing;
 * a host transaction open when it would begin makes it fail closed (IN_TRANSACTION, nothing
 * renamed, its draft removed, the host's transaction untouched).
 */

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const Database = require('better-sqlite3');
const { Grant, ProjectionStore } = require('..');
const { setup, tuple, submission } = require('./helpers');
const { chosenToken } = require('./tokens');

const TTL = 60000;
const TOKEN = '11'.repeat(32);

function targetDir(runtimeRoot, target) {
  return path.join(runtimeRoot, 'hook-projections', target);
}

function files(runtimeRoot, target) {
  const dir = targetDir(runtimeRoot, target);
  return fs.existsSync(dir) ? fs.readdirSync(dir).sort() : [];
}

function rows(db) {
  return {
    leases: db.prepare('SELECT * FROM HookProjectionLeases ORDER BY target_id').all(),
    channels: db.prepare('SELECT * FROM HookProjectionChannels ORDER BY target_id, channel').all(),
  };
}

/** A store with one admitted target and two channel rows; `probe` as given. */
function world(probe) {
  const env = setup({ ttlMs: TTL });
  const store = probe ? new ProjectionStore(env.db, { ...env.store.config, probe }) : env.store;
  const target = store.admitTarget(tuple(0));
  store.submit('router', submission(target, 0, 1, 'x'));
  store.submit('frontier', submission(target, 1, 1, 'y'));
  return { ...env, store, target };
}

/** A probe that pauses at `step` until `resume()`; `reached` resolves when it paused. */
function pauseAt(step) {
  let resume;
  let reachedStep;
  const reached = new Promise((resolve) => {
    reachedStep = resolve;
  });
  const probe = (at) => {
    if (at !== step) return undefined;
    reachedStep();
    return new Promise((resolve) => {
      resume = resolve;
    });
  };
  return { probe, reached, resume: () => resume() };
}

test('an asynchronous publication publishes the same bytes and rows as a synchronous one', async () => {
  const sync = world();
  const asynchronous = world();
  const syncGrant = sync.store.acquire(sync.target, 'holder-1', chosenToken(TOKEN)).granted;
  const asyncGrant = asynchronous.store.acquire(asynchronous.target, 'holder-1', chosenToken(TOKEN)).granted;
  const p = sync.store.publish(syncGrant);
  const q = await asynchronous.store.publishAsync(asyncGrant);
  assert.deepEqual({ ...q, path: undefined }, { ...p, path: undefined });
  const bytes = (w) => fs.readFileSync(path.join(targetDir(w.runtimeRoot, w.target), 'current.json'));
  assert.deepEqual(bytes(asynchronous), bytes(sync));
  assert.deepEqual(rows(asynchronous.db), rows(sync.db));
  // The one-shot, the same way (a grant over a released row, published in its envelope).
  for (const w of [sync, asynchronous]) w.clock.now += 1;
  const r = sync.store.publishNow(sync.target, 'holder-2', chosenToken(TOKEN));
  const s = await asynchronous.store.publishNowAsync(asynchronous.target, 'holder-2', chosenToken(TOKEN));
  assert.deepEqual({ ...s.published, path: undefined }, { ...r.published, path: undefined });
  assert.deepEqual(bytes(asynchronous), bytes(sync));
  assert.deepEqual(rows(asynchronous.db), rows(sync.db));
  assert.deepEqual(files(asynchronous.runtimeRoot, asynchronous.target), ['current.json'], 'no temp file left');
});

test('a one-shot over an expired grant takes it over and publishes in a second envelope', async () => {
  const w = world();
  w.store.acquire(w.target, 'holder-1');
  w.clock.now += TTL;
  const r = await w.store.publishNowAsync(w.target, 'holder-2');
  assert.equal(r.published.epoch, 2);
  assert.equal(w.store.readProjection(w.target).fencingEpoch, 2);
  // A live grant is `held`, and nothing is written.
  w.store.acquire(w.target, 'holder-3');
  const before = rows(w.db);
  assert.equal((await w.store.publishNowAsync(w.target, 'holder-4')).held.epoch, 3);
  assert.deepEqual(rows(w.db), before);
});

/**
 * Counts event-loop turns (one `setImmediate` per turn) until stopped — at the latest when the
 * test `t` ends, passed or failed, so a failing test never leaves the loop spinning.
 */
function turnCounter(t) {
  const clock = { turns: 0, ticking: true, stop: () => (clock.ticking = false) };
  t.after(clock.stop);
  (function tick() {
    clock.turns += 1;
    if (clock.ticking) setImmediate(tick);
  })();
  return clock;
}

test('an event-loop turn passes between the draft and the transaction and after it, none inside it', async (t) => {
  const clock = turnCounter(t);
  const seen = {};
  const w = world((step) => {
    seen[step] = clock.turns;
  });
  const grant = w.store.acquire(w.target, 'holder-1').granted;
  await w.store.publishAsync(grant);
  clock.stop();
  assert.ok(seen['transaction-open'] > seen.composed, JSON.stringify(seen));
  assert.equal(seen.released, seen['transaction-open'], `the transaction spans no turn: ${JSON.stringify(seen)}`);
  assert.equal(seen.renamed, seen['transaction-open']);
  assert.ok(seen['directory-synced'] > seen.released, `the directory fsync runs on the pool: ${JSON.stringify(seen)}`);
});

test('a submission between its turns is published: the draft is written again inside the transaction, in its one turn', async (t) => {
  const clock = turnCounter(t);
  const seen = {};
  const pause = pauseAt('temp-written');
  const w = world((step, target) => {
    seen[step] = clock.turns;
    return pause.probe(step, target);
  });
  const grant = w.store.acquire(w.target, 'holder-1').granted;
  const publishing = w.store.publishAsync(grant);
  await pause.reached;
  assert.equal(w.store.submit('router', submission(w.target, 0, 2, 'moved')), 'advanced');
  pause.resume();
  await publishing;
  clock.stop();
  assert.match(fs.readFileSync(path.join(targetDir(w.runtimeRoot, w.target), 'current.json'), 'utf8'), /moved/);
  assert.equal(seen.released, seen['transaction-open'], `the transaction spans no turn: ${JSON.stringify(seen)}`);
  assert.deepEqual(files(w.runtimeRoot, w.target), ['current.json']);
});

test('paused between its draft and its transaction, a publication holds no lock; expired meanwhile, its successor publishes at once and it is fenced', async () => {
  const pause = pauseAt('temp-written');
  const w = world(pause.probe);
  const grant = w.store.acquire(w.target, 'holder-1').granted;
  const publishing = w.store.publishAsync(grant);
  await pause.reached;
  // Between turns: the draft is written, nothing renamed.
  const draft = files(w.runtimeRoot, w.target);
  assert.equal(draft.length, 1, draft.join(', '));
  assert.notEqual(draft[0], 'current.json');
  // Its grant expires; a takeover on another connection is granted and publishes at once.
  w.clock.now += TTL;
  const other = new Database(w.dbPath, { timeout: 5000 });
  const successor = new ProjectionStore(other, { ...w.store.config, probe: undefined, busyTimeoutMs: 50 });
  const next = successor.acquire(w.target, 'holder-2').granted;
  assert.equal(next.epoch, 2);
  assert.equal((await successor.publishAsync(next)).epoch, 2);
  assert.deepEqual(files(w.runtimeRoot, w.target), ['current.json'], "the successor's sweep removed the paused draft");
  pause.resume();
  await assert.rejects(publishing, { code: 'FENCED', reason: 'superseded' });
  assert.deepEqual(files(w.runtimeRoot, w.target), ['current.json'], 'nothing renamed by the paused holder');
  assert.equal(w.store.readProjection(w.target).fencingEpoch, 2);
  other.close();
});

test('paused between turns with its grant still live, it publishes after the refused takeover', async () => {
  const pause = pauseAt('temp-written');
  const w = world(pause.probe);
  const grant = w.store.acquire(w.target, 'holder-1').granted;
  const publishing = w.store.publishAsync(grant);
  await pause.reached;
  const successor = new ProjectionStore(new Database(w.dbPath), { ...w.store.config, probe: undefined, busyTimeoutMs: 50 });
  assert.deepEqual(successor.publishNow(w.target, 'holder-2').held.epoch, 1, 'a live grant is held');
  pause.resume();
  assert.equal((await publishing).epoch, 1);
  assert.deepEqual(files(w.runtimeRoot, w.target), ['current.json']);
});

test('a host transaction open when it would begin makes it fail closed', async () => {
  const pause = pauseAt('temp-written');
  const w = world(pause.probe);
  w.db.exec('CREATE TABLE HostJobs (id INTEGER PRIMARY KEY, body TEXT NOT NULL)');
  const grant = w.store.acquire(w.target, 'holder-1').granted;
  const before = rows(w.db);
  const publishing = w.store.publishAsync(grant);
  await pause.reached;
  // The host opens its own transaction between the publication's turns.
  w.db.exec('BEGIN');
  w.db.prepare('INSERT INTO HostJobs (body) VALUES (?)').run('mine');
  pause.resume();
  await assert.rejects(publishing, { code: 'IN_TRANSACTION' });
  assert.equal(w.db.inTransaction, true, "the host's transaction is untouched");
  assert.equal(w.db.prepare('SELECT count(*) AS n FROM HostJobs').get().n, 1);
  w.db.exec('COMMIT');
  assert.deepEqual(files(w.runtimeRoot, w.target), [], 'nothing renamed, the draft removed');
  assert.deepEqual(rows(w.db), before, 'no row written');
  // Not started: the grant is untouched and publishes.
  const store = new ProjectionStore(w.db, { ...w.store.config, probe: undefined });
  assert.equal((await store.publishAsync(grant)).epoch, 1);
});

test('a publication refused IN_TRANSACTION never releases its grant in a later turn, after the host committed', async () => {
  const pause = pauseAt('temp-written');
  const w = world(pause.probe);
  const grant = w.store.acquire(w.target, 'holder-1').granted;
  const publishing = w.store.publishAsync(grant);
  await pause.reached;
  w.db.exec('BEGIN');
  pause.resume();
  // The host's transaction ends at the next turn of the event loop, while the refused
  // publication still has pool work to do (its draft's removal, its target lock).
  setImmediate(() => w.db.exec('COMMIT'));
  await assert.rejects(publishing, { code: 'IN_TRANSACTION' });
  const row = w.db.prepare('SELECT fencing_epoch, state FROM HookProjectionLeases WHERE target_id = ?').get(w.target);
  assert.deepEqual({ ...row }, { fencing_epoch: 1, state: 'held' }, 'the grant was not released behind the caller');
  const store = new ProjectionStore(w.db, { ...w.store.config, probe: undefined });
  assert.equal((await store.publishAsync(grant)).epoch, 1, 'the grant is still usable');
});

test('a call inside a transaction is refused at once, and a bad grant is refused like the synchronous call', async () => {
  const w = world();
  const grant = w.store.acquire(w.target, 'holder-1').granted;
  w.db.exec('BEGIN');
  await assert.rejects(w.store.publishAsync(grant), { code: 'IN_TRANSACTION' });
  await assert.rejects(w.store.publishNowAsync(w.target, 'holder-2'), { code: 'IN_TRANSACTION' });
  w.db.exec('ROLLBACK');
  await assert.rejects(w.store.publishAsync({ ...grant.exportSecret() }), { code: 'INVALID_INPUT' });
  assert.throws(() => Grant.fromSecret({ ...grant.exportSecret(), token: 'zz' }), { code: 'INVALID_INPUT' });
  await assert.rejects(w.store.publishAsync(Grant.fromSecret({ ...grant.exportSecret(), token: '00'.repeat(32) })), {
    code: 'FENCED',
    reason: 'token-mismatch',
  });
  assert.deepEqual(files(w.runtimeRoot, w.target), []);
  assert.equal((await w.store.publishAsync(grant)).epoch, 1);
});
