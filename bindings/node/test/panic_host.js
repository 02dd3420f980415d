'use strict';
/**
 * A host whose addon (`test/seams.node`, built with the `test-seams` feature) panics where
 * `SOLEWRITER_TEST_PANIC` says, run by `boundary.test.js` in a child process. It tries a
 * synchronous and an asynchronous publication and prints, as JSON, what each threw and the
 * state of its connection afterwards; then, without the planted panic, whether it can still
 * publish (another target: the abandoned grants stay held until they expire, as after a crash). A process killed by the panic prints nothing and dies by a signal.
 *
 * usage: SOLEWRITER_NODE_ADDON=test/seams.node SOLEWRITER_TEST_PANIC=PLACE node panic_host.js
 */

const { setup, tuple, submission } = require('./helpers');

(async () => {
  const { db, store } = setup({ ttlMs: 60000 });
  const [first, second, other] = [0, 1, 2].map((n) => store.admitTarget(tuple(n)));
  for (const t of [first, second]) store.submit('router', submission(t, 0, 1, 'x'));
  const report = {};
  const attempt = async (name, call) => {
    try {
      report[name] = { threw: null, answer: await call() };
    } catch (e) {
      report[name] = { threw: e.code, message: e.message };
    }
    report[name].inTransaction = db.inTransaction;
    report[name].synchronous = db.pragma('synchronous', { simple: true });
  };
  await attempt('publish', () => store.publish(store.acquire(first, 'host-1').granted));
  await attempt('publishAsync', () => store.publishAsync(store.acquire(second, 'host-1').granted));
  delete process.env.SOLEWRITER_TEST_PANIC;
  // The abandoned grants stay held until they expire, as after a crash; another target publishes.
  await attempt('afterwards', () => store.publishNow(other, 'host-1'));
  const row = db.prepare('SELECT fencing_epoch, state FROM HookProjectionLeases WHERE target_id = ?');
  report.rows = { publish: { ...row.get(first) }, publishAsync: { ...row.get(second) } };
  process.stdout.write(JSON.stringify(report));
})();
