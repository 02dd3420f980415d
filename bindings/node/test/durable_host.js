'use strict';
/**
 * A Node host wired the way docs/node.md wires it (better-sqlite3 with its defaults, WAL set by the host, so
 * `synchronous = NORMAL`), run under the syscall-trace helper by `durability.test.js`. Around
 * each call it writes the marks `NAME:begin` and `NAME:end` (`@@mark …` to /dev/null), and the
 * host's own write transaction is marked `host:begin` / `host:end` likewise. It prints, as JSON,
 * the connection's `synchronous` level after each call.
 *
 * usage: node durable_host.js DIR LEVEL (the host's `synchronous` level: 0 OFF, 1 NORMAL)
 */

const fs = require('node:fs');
const path = require('node:path');
const Database = require('better-sqlite3');
const { initialize, adoptJsWriterTables, ProjectionStore } = require('..');
const { CHANNELS, tuple, submission } = require('./helpers');
const js = require('./js_writer');

const dir = process.argv[2];
const marks = fs.openSync('/dev/null', 'w');
const levels = {};
const db = new Database(path.join(dir, 'host.sqlite'), { timeout: 5000 });
db.pragma('journal_mode = WAL');
db.pragma(`synchronous = ${Number(process.argv[3])}`);
db.exec('CREATE TABLE HostJobs (id INTEGER PRIMARY KEY, body TEXT NOT NULL)');

/** Runs `call` between the marks of `name`; its value. */
async function step(name, call) {
  fs.writeSync(marks, `@@mark ${name}:begin\n`);
  const value = await call();
  fs.writeSync(marks, `@@mark ${name}:end\n`);
  levels[name] = db.pragma('synchronous', { simple: true });
  return value;
}

(async () => {
  const runtimeRoot = path.join(dir, 'runtime');
  fs.mkdirSync(runtimeRoot);
  // The JavaScript writer's tables, with one grant of its own, adopted: a converting commit.
  js.createTables(db);
  js.acquire(db, js.legacyTargetId(tuple(1)), 'js-writer', Date.now(), 60000, 'ab'.repeat(32));
  await step('adoptJsWriterTables', () => adoptJsWriterTables(db, [tuple(1)]));
  await step('initialize', () => initialize(db));
  const store = new ProjectionStore(db, { runtimeRoot, channels: CHANNELS, leaseTtlMs: 60000, busyTimeoutMs: 5000 });
  const target = await step('admitTarget', () => store.admitTarget(tuple(0)));
  const now = Date.now();
  await step('submit', () => store.submit('router', submission(target, 0, 1, 'x', now)));
  const first = await step('acquire', () => store.acquire(target, 'host-1').granted);
  await step('publish', () => store.publish(first));
  const second = store.acquire(target, 'host-1').granted;
  await step('release', () => store.release(second));
  store.acquire(target, 'host-1');
  await step('endLease', () => store.endLease(target));
  await step('publishNow', () => store.publishNow(target, 'host-1'));
  const third = store.acquire(target, 'host-1').granted;
  await step('publishAsync', () => store.publishAsync(third));
  await step('publishNowAsync', () => store.publishNowAsync(target, 'host-1'));
  const other = store.admitTarget(tuple(2));
  await step('publishManyNow', () => store.publishManyNow([target, other], 'host-1'));
  await step('publishManyNowAsync', () => store.publishManyNowAsync([target, other], 'host-1'));
  await step('host', () => db.prepare('INSERT INTO HostJobs (body) VALUES (?)').run('job'));
  db.close();
  process.stdout.write(JSON.stringify({ levels }));
})();
