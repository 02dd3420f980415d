'use strict';
/**
 * A Node host whose publications mark their steps (`@@mark reached <step>` to /dev/null), run by
 * `lock_spans.test.js` under the syscall-trace helper: a synchronous publication of a grant, a
 * one-shot, a batch of two one-shots, and the asynchronous forms of the three.
 *
 * usage: node lock_span_host.js DIR
 */

const fs = require('node:fs');
const { ProjectionStore } = require('..');
const { CHANNELS, tuple, submission, hostDatabase } = require('./helpers');

const dir = process.argv[2];
const { db, runtimeRoot, marks } = hostDatabase(dir);
const store = new ProjectionStore(db, {
  runtimeRoot,
  channels: CHANNELS,
  leaseTtlMs: 60000,
  busyTimeoutMs: 5000,
  probe: (step) => {
    fs.writeSync(marks, `@@mark reached ${step}\n`);
  },
});

(async () => {
  const target = store.admitTarget(tuple(0));
  store.submit('router', submission(target, 0, 1, 'x', Date.now()));
  const epochs = [];
  epochs.push(store.publish(store.acquire(target, 'host-1').granted).epoch);
  epochs.push(store.publishNow(target, 'host-1').published.epoch);
  epochs.push((await store.publishAsync(store.acquire(target, 'host-1').granted)).epoch);
  epochs.push((await store.publishNowAsync(target, 'host-1')).published.epoch);
  const other = store.admitTarget(tuple(1));
  store.submit('router', submission(other, 0, 1, 'y', Date.now()));
  const batched = (results) => results.map((r) => r.published.epoch);
  epochs.push(...batched(store.publishManyNow([target, other], 'host-1')));
  epochs.push(...batched(await store.publishManyNowAsync([target, other], 'host-1')));
  db.close();
  process.stdout.write(JSON.stringify({ epochs }));
})();
