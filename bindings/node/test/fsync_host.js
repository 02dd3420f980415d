'use strict';
/**
 * A Node host wired the way docs/node.md wires it (better-sqlite3 with its defaults, WAL set by the host, so
 * `synchronous = NORMAL` for the host's own commits), run under the syscall-trace helper by
 * `fsync_counts.test.js`. It writes the marks `NAME:begin` and `NAME:end` (`@@mark …` to
 * /dev/null, each in one write) around each operation: the first publication of a target in
 * this process and that of a second target, then ROUNDS rounds of `submit`, `acquire`, `publish`, `release` (a grant released
 * unpublished), `publishNow`, `publishAsync`, `publishNowAsync`, and a batch of both targets,
 * `publishManyNow` and `publishManyNowAsync`. It prints, as JSON, the
 * epochs it published and the number of rounds.
 *
 * usage: node fsync_host.js DIR ROUNDS
 */

const fs = require('node:fs');
const { ProjectionStore } = require('..');
const { CHANNELS, tuple, submission, hostDatabase } = require('./helpers');

const dir = process.argv[2];
const rounds = Number(process.argv[3]);
const { db, runtimeRoot, marks } = hostDatabase(dir);
const store = new ProjectionStore(db, { runtimeRoot, channels: CHANNELS, leaseTtlMs: 60000, busyTimeoutMs: 5000 });

/** Runs `call` between the marks of `name`; its value. */
async function marked(name, call) {
  fs.writeSync(marks, `@@mark ${name}:begin\n`);
  const value = await call();
  fs.writeSync(marks, `@@mark ${name}:end\n`);
  return value;
}

(async () => {
  const target = store.admitTarget(tuple(0));
  const now = Date.now();
  store.submit('router', submission(target, 0, 1, 'x0', now));
  const epochs = [];
  epochs.push((await marked('first-publishNow', () => store.publishNow(target, 'host-1'))).published.epoch);
  const other = store.admitTarget(tuple(1));
  store.submit('router', submission(other, 0, 1, 'y0', now));
  epochs.push((await marked('newTarget-publishNow', () => store.publishNow(other, 'host-1'))).published.epoch);
  for (let round = 0; round < rounds; round++) {
    await marked('submit', () => store.submit('router', submission(target, 0, 2 + round, `x${round + 1}`, now)));
    const grant = await marked('acquire', () => store.acquire(target, 'host-1').granted);
    epochs.push((await marked('publish', () => store.publish(grant))).epoch);
    const unused = store.acquire(target, 'host-1').granted;
    const released = await marked('release', () => store.release(unused));
    if (released.released !== true) throw new Error(`the unused grant was not released: ${JSON.stringify(released)}`);
    epochs.push((await marked('publishNow', () => store.publishNow(target, 'host-1'))).published.epoch);
    const another = store.acquire(target, 'host-1').granted;
    epochs.push((await marked('publishAsync', () => store.publishAsync(another))).epoch);
    epochs.push((await marked('publishNowAsync', () => store.publishNowAsync(target, 'host-1'))).published.epoch);
    for (const r of await marked('publishManyNow', () => store.publishManyNow([target, other], 'host-1'))) epochs.push(r.published.epoch);
    for (const r of await marked('publishManyNowAsync', () => store.publishManyNowAsync([target, other], 'host-1'))) epochs.push(r.published.epoch);
  }
  db.close();
  process.stdout.write(JSON.stringify({ epochs, rounds }));
})();
