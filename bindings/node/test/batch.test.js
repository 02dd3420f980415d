'use strict';
/**
 * The batch of one-shot publications on the Node path (`publishManyNow`, `publishManyNowAsync`:
 * the core's `PublishMany` on the host's better-sqlite3 connection), on real files, in both
 * forms: every target granted, published and released in ONE transaction (each under a
 * savepoint of its own), the answers in the caller's order; a live grant answered `held` while
 * the others publish; a stale holder of one target fenced after the batch took it over; a
 * target whose kernel lock another process holds dropped out alone; a failure of the shared
 * transaction every target's; a transaction the store ended under the batch never continued
 * by a savepoint; a takeover whose own envelope could not start releasing the grant it took;
 * a batch refused before anything is touched; the host's probe shown every step of every
 * target, those of the lock-free parts (run on a thread per target) too. The Rust path has the same checks:
 * `adapters/tests/batch.rs`.
 */

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const readline = require('node:readline');
const { spawn } = require('node:child_process');
const { once } = require('node:events');
const Database = require('better-sqlite3');
const { ProjectionStore, executeSqlEffect, initialize } = require('..');
const { setup, faulty, busyAtBegin, tuple, submission, START } = require('./helpers');
const { openMemoryCoreDb, PROFILE, CHANNELS: MEMORY_CORE_CHANNELS, BINDING, TUPLE } = require('./memory_core_fixtures');

const TTL = 60000;
const FORMS = ['publishManyNow', 'publishManyNowAsync'];

/** A store (`setup`'s, with `options`) with `n` targets admitted, each with one submission. */
function world(n, options = {}) {
  const env = setup({ ttlMs: TTL, ...options });
  const targets = Array.from({ length: n }, (_, i) => {
    const target = env.store.admitTarget(tuple(i));
    env.store.submit('router', submission(target, 0, 1, `x${i}`));
    return target;
  });
  return { ...env, targets };
}

/** `store[form](...args)`, awaited: the synchronous call's value or the asynchronous one's. */
async function batch(store, form, ...args) {
  return store[form](...args);
}

function row(db, target) {
  return { ...db.prepare('SELECT fencing_epoch, state FROM HookProjectionLeases WHERE target_id = ?').get(target) };
}

function targetDir(runtimeRoot, target) {
  return path.join(runtimeRoot, 'hook-projections', target);
}

function files(runtimeRoot, target) {
  const dir = targetDir(runtimeRoot, target);
  return fs.existsSync(dir) ? fs.readdirSync(dir).sort() : [];
}

/** The target's row is released at `epoch`, its document is of `epoch`, no temp file is left. */
function releasedAndPublished(w, target, epoch) {
  assert.deepEqual(row(w.db, target), { fencing_epoch: epoch, state: 'released' });
  assert.equal(w.store.readProjection(target).fencingEpoch, epoch);
  assert.deepEqual(files(w.runtimeRoot, target), ['current.json'], 'no temp file left');
}

/** The epochs a batch published, in its answer's order (`held`, or the error's code). */
function epochs(results) {
  return results.map((r) => (r.published ? r.published.epoch : r.held ? 'held' : r.error.code));
}

/**
 * Another process holding the kernel lock (`flock`) of `file` until `release()`, as another
 * writer holds a target's lock from the opening of its transaction to its release.
 */
async function flockHeld(file) {
  const program = 'import fcntl, sys\nf = open(sys.argv[1], "a")\nfcntl.flock(f, fcntl.LOCK_EX)\nprint("locked", flush=True)\nsys.stdin.read()';
  const child = spawn('python3', ['-c', program, file], { stdio: ['pipe', 'pipe', 'inherit'] });
  const [line] = await once(readline.createInterface({ input: child.stdout }), 'line');
  assert.equal(line, 'locked');
  return {
    release: async () => {
      const exited = once(child, 'exit');
      child.stdin.end();
      await exited;
    },
  };
}

for (const form of FORMS) {
  test(`${form}: every target published and released in ONE transaction, answered in the caller's order`, async () => {
    const w = world(4);
    // The connection's statements, as the executor runs them through `exec`.
    const execs = [];
    const exec = (sql, real) => {
      execs.push(sql);
      return real();
    };
    const store = new ProjectionStore(faulty(w.db, { exec }), w.store.config);
    const targets = [...w.targets].reverse();
    const results = await batch(store, form, targets, 'holder-1');
    assert.deepEqual(
      results.map((r) => r.published.targetId),
      targets,
      'the caller\'s order',
    );
    assert.deepEqual(epochs(results), [1, 1, 1, 1]);
    for (const target of targets) releasedAndPublished(w, target, 1);
    const savepoints = ['SAVEPOINT solewriter_target', 'RELEASE solewriter_target'];
    assert.deepEqual(execs, ['BEGIN IMMEDIATE', ...targets.flatMap(() => savepoints), 'COMMIT'], 'one transaction, one savepoint per target');
    // Again: every target one epoch on.
    assert.deepEqual(epochs(await batch(store, form, targets, 'holder-1')), [2, 2, 2, 2]);
    for (const target of targets) releasedAndPublished(w, target, 2);
    assert.equal(w.db.inTransaction, false);
  });

  test(`${form}: the probe sees every step of every target, its lock-free parts' too`, async () => {
    const w = world(3);
    const seen = new Map(w.targets.map((target) => [target, []]));
    const probe = (step, target) => {
      seen.get(target).push(step);
    };
    const store = new ProjectionStore(w.db, { ...w.store.config, probe });
    // What a one-shot of a target shows the probe: every step, in order.
    const [single] = w.targets;
    assert.equal(store.publishNow(single, 'holder-1').published.epoch, 1);
    const oneShot = seen.get(single).splice(0);
    for (const step of ['composed', 'temp-written', 'renamed', 'unlocked', 'directory-synced']) {
      assert.ok(oneShot.includes(step), `${step} in ${oneShot}`);
    }
    assert.deepEqual(epochs(await batch(store, form, w.targets, 'holder-1')), [2, 1, 1]);
    for (const target of w.targets) {
      // The same steps for each target of the batch — its draft's before the transaction and
      // its directory fsync after it coming from its part's thread.
      assert.deepEqual(seen.get(target), oneShot, target);
      releasedAndPublished(w, target, target === single ? 2 : 1);
    }
  });

  test(`${form}: a live grant is answered held, and the other targets publish`, async () => {
    const w = world(3);
    const live = w.store.acquire(w.targets[1], 'other').granted;
    const results = await batch(w.store, form, w.targets, 'holder-1');
    assert.deepEqual(epochs(results), [1, 'held', 1]);
    assert.equal(results[1].held.holder, 'other');
    assert.equal(results[1].held.epoch, 1);
    assert.deepEqual(files(w.runtimeRoot, w.targets[1]), [], 'nothing of the held target written');
    assert.deepEqual(row(w.db, w.targets[1]), { fencing_epoch: 1, state: 'held' });
    // The live holder still publishes: the batch wrote nothing of its target.
    assert.equal(w.store.publish(live).epoch, 1);
    for (const target of w.targets) releasedAndPublished(w, target, 1);
  });

  test(`${form}: a stale holder of one target is fenced after the batch took it over`, async () => {
    const w = world(2);
    const stale = w.store.acquire(w.targets[0], 'old').granted;
    // The old holder's lease expires; the batch takes the target over (its grant commits with
    // the batch, its publication runs in an envelope of its own).
    w.clock.now += TTL;
    assert.deepEqual(epochs(await batch(w.store, form, w.targets, 'holder-1')), [2, 1]);
    // Even with the broker clock set back, the stale holder never overwrites its successor.
    w.clock.now = START;
    assert.throws(() => w.store.publish(stale), { code: 'FENCED', reason: 'superseded', currentEpoch: 2 });
    releasedAndPublished(w, w.targets[0], 2);
    releasedAndPublished(w, w.targets[1], 1);
  });

  test(`${form}: a target whose lock another process holds drops out alone (BUSY)`, async () => {
    const w = world(3);
    const store = new ProjectionStore(w.db, { ...w.store.config, busyTimeoutMs: 100 });
    // Published once, so that every lock file exists; then target 1's lock is held elsewhere.
    await batch(store, form, w.targets, 'holder-1');
    const held = await flockHeld(path.join(w.runtimeRoot, 'hook-projections', `${w.targets[1]}.lock`));
    let ticks = 0;
    const ticking = setInterval(() => {
      ticks += 1;
    }, 1);
    try {
      const results = await batch(store, form, w.targets, 'holder-1');
      clearInterval(ticking);
      // The asynchronous batch waits for the lock on timers: the event loop turns meanwhile.
      if (form === 'publishManyNowAsync') assert.ok(ticks >= 10, `the event loop turned ${ticks} times`);
      else assert.equal(ticks, 0, 'the synchronous batch blocks while it waits');
      assert.deepEqual(epochs(results), [2, 'BUSY', 2]);
      assert.match(results[1].error.message, /target lock/);
      assert.ok(results[1].error instanceof Error);
    } finally {
      clearInterval(ticking);
      await held.release();
    }
    // Nothing of target 1 moved: its row and document are the first batch's.
    releasedAndPublished(w, w.targets[1], 1);
    for (const target of [w.targets[0], w.targets[2]]) releasedAndPublished(w, target, 2);
  });

  test(`${form}: a failure of the shared transaction (the store busy at its begin) is every target's`, async () => {
    const w = world(2, { timeout: 50 });
    const other = new Database(w.dbPath);
    other.exec('BEGIN IMMEDIATE');
    let results;
    try {
      results = await batch(w.store, form, w.targets, 'holder-1');
    } finally {
      other.exec('ROLLBACK');
      other.close();
    }
    assert.deepEqual(epochs(results), ['BUSY', 'BUSY']);
    for (const target of w.targets) {
      assert.deepEqual(row(w.db, target), { fencing_epoch: 0, state: 'unheld' });
      assert.deepEqual(files(w.runtimeRoot, target), [], 'nothing published, no temp file left');
    }
    assert.equal(w.db.inTransaction, false);
  });

  test(`${form}: once the store ended the transaction under the batch, no savepoint runs and the next batch publishes over what was left`, async () => {
    const w = world(3);
    // Right after the first target's savepoint is released, the transaction ends behind the
    // executor's back (as SQLite rolls it back under a full disk or an I/O error).
    let released = 0;
    const exec = (sql, real) => {
      const done = real();
      if (sql === 'RELEASE solewriter_target' && ++released === 1) w.db.exec('ROLLBACK');
      return done;
    };
    const store = new ProjectionStore(faulty(w.db, { exec }), w.store.config);
    const results = await batch(store, form, w.targets, 'holder-1');
    const [first, ...rest] = [...w.targets].sort();
    const of = (target) => results[w.targets.indexOf(target)];
    // The first target renamed, then lost its grant and release with the transaction.
    assert.equal(of(first).error.code, 'PUBLISHED_NOT_RELEASED');
    for (const target of rest) {
      assert.equal(of(target).error.code, 'SQLITE');
      assert.match(of(target).error.message, /SQLITE_ABORT: the write transaction is no longer open/);
      assert.deepEqual(files(w.runtimeRoot, target), [], 'nothing of a target that never began');
    }
    assert.equal(released, 1, 'no savepoint ran after the transaction ended');
    assert.equal(w.db.inTransaction, false, 'no transaction opened by a savepoint');
    for (const target of w.targets) assert.deepEqual(row(w.db, target), { fencing_epoch: 0, state: 'unheld' });
    assert.equal(w.store.readProjection(first).fencingEpoch, 1, 'the document left ahead of its row');
    // The next batch publishes every target, the first above the document left in place.
    const again = await batch(w.store, form, w.targets, 'holder-1');
    assert.deepEqual(epochs(again), w.targets.map((target) => (target === first ? 2 : 1)));
    releasedAndPublished(w, first, 2);
    for (const target of rest) releasedAndPublished(w, target, 1);
  });

  test(`${form}: a takeover whose own envelope could not start releases the grant it took; the other target publishes`, async () => {
    const w = world(2, { timeout: 50 });
    w.store.acquire(w.targets[0], 'holder-0'); // never released
    w.clock.now += TTL; // ... and now expired
    const blocker = new Database(w.dbPath);
    // The batch's transaction commits the takeover's grant (and publishes target 1); the
    // takeover's publication, in its own envelope, is BUSY; the release of its grant is not.
    const busy = busyAtBegin(w.db, w.store.config, blocker, 2);
    const results = await batch(busy.store, form, w.targets, 'holder-1');
    blocker.close();
    assert.deepEqual(epochs(results), ['BUSY', 1]);
    assert.match(results[0].error.message, /unused grant was released/);
    assert.equal(results[0].error.grantUnused, true, 'the fields of the error publishNow throws');
    assert.equal(busy.begins(), 3, 'the batch, the takeover\'s publication, the release of its grant');
    assert.deepEqual(row(w.db, w.targets[0]), { fencing_epoch: 2, state: 'released' }, 'the grant it took is released, not left to expire');
    assert.deepEqual(files(w.runtimeRoot, w.targets[0]), [], 'nothing published, no temp file left');
    releasedAndPublished(w, w.targets[1], 1);
    assert.equal(w.db.inTransaction, false);
  });

  test(`${form}: a batch refused before anything is touched: no target, a target twice, an argument that is not one, inside the host's transaction`, async () => {
    const w = world(2);
    const refused = async (args, pattern, code = 'INVALID_INPUT') => {
      await assert.rejects(
        () => batch(w.store, form, ...args),
        (e) => e.code === code && pattern.test(e.message),
        `${JSON.stringify(args)} refused`,
      );
    };
    const [a, b] = w.targets;
    await refused([[], 'holder-1'], /needs at least one target; nothing was written/);
    await refused([[a, b, a], 'holder-1'], new RegExp(`target ${a} is given twice in one batch; nothing was written`));
    await refused([a, 'holder-1'], /takes an array of target ids/);
    await refused([[a, 5], 'holder-1'], /takes an array of target ids/);
    await refused([[a, 'zz'], 'holder-1'], /target id/);
    await refused([[a, b], 'Not A Holder!'], /holder/);
    await refused([[a, b], 'holder-1', { tokenHex: '11'.repeat(32) }], /take no options but consumerBinding/);
    await refused([[a, b], 'holder-1', { [Symbol.for('solewriter.test.token')]: '11'.repeat(32) }], /a chosen token is refused/);
    w.db.exec('BEGIN');
    await refused([[a, b], 'holder-1'], /inside a transaction/, 'IN_TRANSACTION');
    assert.equal(w.db.inTransaction, true, 'the host\'s transaction untouched');
    w.db.exec('ROLLBACK');
    for (const target of w.targets) {
      assert.deepEqual(row(w.db, target), { fencing_epoch: 0, state: 'unheld' });
      assert.deepEqual(files(w.runtimeRoot, target), []);
    }
    // A target not admitted is that target's error alone.
    const stranger = '0'.repeat(64);
    const results = await batch(w.store, form, [stranger, a], 'holder-1');
    assert.deepEqual(epochs(results), ['NOT_ADMITTED', 1]);
  });

  test(`${form}: on a Memory Core store every document carries the consumer binding, which a batch needs as publishNow does`, async () => {
    const dir = setup().dir;
    const db = openMemoryCoreDb(path.join(dir, 'memory-core.sqlite'));
    initialize(db, { profile: PROFILE });
    const hookProjectionRoot = path.join(dir, 'memory-core-projections');
    const store = new ProjectionStore(db, { hookProjectionRoot, channels: MEMORY_CORE_CHANNELS, leaseTtlMs: TTL, busyTimeoutMs: 5000, profile: PROFILE });
    const targets = [TUPLE, { ...TUPLE, agentId: '@neo-other' }].map((t) => store.admitTarget(t));
    await assert.rejects(() => batch(store, form, targets, 'memory-core-1'), { code: 'INVALID_INPUT' });
    const results = await batch(store, form, targets, 'memory-core-1', { consumerBinding: BINDING });
    assert.deepEqual(epochs(results), [1, 1]);
    for (const target of targets) {
      const doc = JSON.parse(fs.readFileSync(path.join(hookProjectionRoot, target, 'current.json'), 'utf8'));
      assert.deepEqual(doc.consumerBinding, BINDING);
      assert.equal(doc.publication.targetId, target);
    }
    db.close();
  });
}

test('the executor runs a savepoint only inside the transaction it began, never once that transaction ended', () => {
  const { db } = setup();
  const savepoint = (kind) => executeSqlEffect(db, { kind, targetId: '0'.repeat(64) });
  const refused = { error: { code: 'SQLITE_ABORT', message: 'the write transaction is no longer open (it was rolled back); nothing was run' } };
  // No transaction: refused, none opened.
  assert.deepEqual(savepoint('savepoint'), refused);
  assert.equal(db.inTransaction, false);
  // A transaction of the host's is not the executor's: refused, untouched.
  db.exec('BEGIN');
  assert.deepEqual(savepoint('savepoint'), refused);
  db.exec('ROLLBACK');
  assert.deepEqual(savepoint('begin'), {});
  assert.deepEqual(savepoint('savepoint'), {});
  db.exec('CREATE TEMP TABLE scratch (x)');
  assert.deepEqual(savepoint('rollbackToSavepoint'), {});
  const scratch = () => db.prepare("SELECT count(*) AS n FROM sqlite_temp_master WHERE name = 'scratch'").get().n;
  assert.equal(scratch(), 0, 'rolled back to the savepoint');
  assert.equal(db.inTransaction, true, 'the transaction goes on');
  assert.deepEqual(savepoint('savepoint'), {});
  db.exec('CREATE TEMP TABLE scratch (x)');
  assert.deepEqual(savepoint('releaseSavepoint'), {});
  assert.equal(scratch(), 1, 'kept');
  // The transaction ends behind the executor's back: every savepoint statement is refused.
  db.exec('ROLLBACK');
  for (const kind of ['savepoint', 'releaseSavepoint', 'rollbackToSavepoint']) {
    assert.deepEqual(savepoint(kind), refused, kind);
    assert.equal(db.inTransaction, false, `${kind}: no transaction opened`);
  }
  assert.deepEqual(savepoint('rollback'), {});
});
