'use strict';
require('./test_addon'); // the in-process tests below need the planted panics
/**
 * No panic of solewriter's kills the host. A panic planted (test seams, `test/seams.node`) in
 * the middle of a machine's transaction on the JS thread, and in a publication's work on the
 * libuv thread pool, reaches the host as an `INTERNAL` error of that call: the process lives,
 * the connection is out of any transaction at the host's `synchronous` level, nothing of the
 * abandoned call committed, and the next publication succeeds. Without the boundary the
 * process aborts (checked). The shipped addon carries no seam. The same in process (so that
 * mutation testing sees the JS layer's part): a panicking publication and a panicking native
 * constructor are INTERNAL, and the connection is clean.
 */

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { ProjectLock } = require('..');
const { setup, scratch, tuple, submission } = require('./helpers');

const SEAMS = path.join(__dirname, 'seams.node');
const SHIPPED = path.join(__dirname, '..', 'solewriter.node');

function run(place) {
  const child = spawnSync(process.execPath, [path.join(__dirname, 'panic_host.js')], {
    env: { ...process.env, SOLEWRITER_NODE_ADDON: SEAMS, SOLEWRITER_TEST_PANIC: place },
    encoding: 'utf8',
  });
  assert.equal(child.signal, null, `${place}: the host died (${child.signal}): ${child.stderr}`);
  assert.equal(child.status, 0, `${place}: ${child.stderr}`);
  return JSON.parse(child.stdout);
}

for (const place of ['write-release', 'pool']) {
  test(`a panic at ${place} is an INTERNAL error of that call; the host lives and publishes on`, () => {
    const report = run(place);
    // The write-release seam panics in both forms; the pool seam only where there is a pool.
    const panicked = place === 'pool' ? ['publishAsync'] : ['publish', 'publishAsync'];
    for (const name of ['publish', 'publishAsync']) {
      const { threw, inTransaction, synchronous } = report[name];
      assert.equal(threw, panicked.includes(name) ? 'INTERNAL' : null, `${name}: ${report[name].message}`);
      assert.equal(inTransaction, false, `${name}: the transaction was rolled back`);
      assert.equal(synchronous, 1, `${name}: the host's level restored`);
    }
    assert.equal(report.afterwards.threw, null, `afterwards: ${report.afterwards.message}`);
    assert.ok(report.afterwards.answer.published, 'the host publishes on');
    // A panicking call committed what it had committed before the panic (its grant), nothing
    // after (its release was rolled back, or never begun): its grant is held until it expires.
    for (const name of ['publish', 'publishAsync']) {
      const state = panicked.includes(name) ? 'held' : 'released';
      assert.deepEqual(report.rows[name], { fencing_epoch: 1, state }, name);
    }
  });
}

test('the shipped addon has no test seam', () => {
  const shipped = fs.readFileSync(SHIPPED);
  assert.equal(shipped.includes('SOLEWRITER_TEST_PANIC'), false);
  assert.equal(fs.readFileSync(SEAMS).includes('SOLEWRITER_TEST_PANIC'), true, 'the seams build has them');
});

/** Runs `call` with the panic planted at `place`. */
function planted(place, call) {
  process.env.SOLEWRITER_TEST_PANIC = place;
  try {
    return call();
  } finally {
    delete process.env.SOLEWRITER_TEST_PANIC;
  }
}

test('in process: a panic inside a publication\'s transaction and in a native constructor are INTERNAL, the connection clean', () => {
  const { db, store } = setup({ ttlMs: 60000 });
  const t = store.admitTarget(tuple(0));
  store.submit('router', submission(t, 0, 1, 'x'));
  const grant = store.acquire(t, 'holder-1').granted;
  const internal = (e) => e.code === 'INTERNAL' && /solewriter failed internally \(test seam: a planted panic at/.test(e.message);
  assert.throws(() => planted('write-release', () => store.publish(grant)), internal);
  assert.equal(db.inTransaction, false, 'the transaction the panic abandoned was rolled back');
  assert.equal(db.pragma('synchronous', { simple: true }), 1, "the host's level restored");
  assert.throws(() => planted('project-lock-new', () => new ProjectLock(scratch())), internal);
  assert.equal(store.publishNow(store.admitTarget(tuple(1)), 'holder-2').published.epoch, 1);
});
