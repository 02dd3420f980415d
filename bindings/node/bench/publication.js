'use strict';
/**
 * One publication of the Memory Core's document, four ways, against the unfenced floor in the
 * same run: what a switch to solewriter costs the Memory Core per publication.
 *
 * - `floor`: the same document bytes written the plain atomic way (temp file, fsync, rename,
 *   directory fsync), no lease, no SQLite: the baseline every ratio is against.
 * - `publishNow` and `publishNowAsync`: solewriter's one-shot publication on a store of the
 *   Memory Core profile, on the host's better-sqlite3 connection opened the Memory Core's way
 *   (WAL, better-sqlite3's default `synchronous`); solewriter fsyncs its own commits whatever
 *   that level is (grant and release in one transaction, the temp file, the directory).
 * - `js writer (FULL)` and `js writer (NORMAL)`: the Memory Core's own JavaScript writer
 *   (`test/js_writer.js`: its statements, its composition, its atomic write) doing the same
 *   publication — acquire, then one immediate transaction that revalidates, composes, writes
 *   and releases — at `synchronous = FULL` (its commits fsynced: solewriter's durability) and
 *   at `NORMAL` (its WAL commits not fsynced until a checkpoint).
 *
 * usage: node bench/publication.js [--test] [DIR] [N]   (DIR: where the databases and runtime
 * roots go, default the OS temp directory — pick a disk, not tmpfs, to see the fsyncs; N:
 * publications of each kind, default 300, after 20 unmeasured). Prints the mean and p50 of each
 * kind in µs and its ratio to the floor's mean. `--test` runs one publication of each kind, as
 * CI does for every benchmark here, and exits non-zero on any error.
 */

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { randomBytes } = require('node:crypto');
const { performance } = require('node:perf_hooks');
const { initialize, ProjectionStore } = require('..');
const js = require('../test/js_writer');
const { openMemoryCoreDb, PROFILE, TUPLE, BINDING, CHANNELS, frontier, route } = require('../test/memory_core_fixtures');

const TEST = process.argv.includes('--test');
const [dirArg, countArg] = process.argv.slice(2).filter((arg) => arg !== '--test');
const base = fs.mkdtempSync(path.join(dirArg || os.tmpdir(), 'solewriter-publication-'));
const N = TEST ? 1 : Number(countArg || 300);
const WARMUP = TEST ? 0 : 20;
process.on('exit', () => fs.rmSync(base, { recursive: true, force: true }));

const ENVELOPES = [frontier(), route({ n: 1 })];

/** A host database and runtime root under `name`. */
function host(name) {
  const dir = path.join(base, name);
  fs.mkdirSync(path.join(dir, 'runtime'), { recursive: true });
  return { db: openMemoryCoreDb(path.join(dir, 'host.sqlite')), runtimeRoot: path.join(dir, 'runtime') };
}

/** solewriter on a Memory Core profile store: one target, both channels submitted. */
function solewriter() {
  const { db, runtimeRoot } = host('solewriter');
  initialize(db, { profile: PROFILE });
  const store = new ProjectionStore(db, { runtimeRoot, channels: CHANNELS, leaseTtlMs: 60_000, busyTimeoutMs: 5_000, profile: PROFILE });
  const target = store.admitTarget(TUPLE);
  for (const [producer, envelope, channel] of [
    ['frontier', ENVELOPES[0], 'lifecycle-frontier'],
    ['router', ENVELOPES[1], 'computed-route'],
  ]) {
    store.submit(producer, {
      targetId: target,
      channel,
      sourceWatermark: envelope.sourceWatermark,
      envelopeJson: JSON.stringify(envelope),
      capturedAt: Date.parse(envelope.capturedAt),
      expiresAt: Date.parse(envelope.expiresAt),
    });
  }
  const publish = () => store.publishNow(target, 'memory-core-1', { consumerBinding: BINDING }).published;
  const publishAsync = async () => (await store.publishNowAsync(target, 'memory-core-1', { consumerBinding: BINDING })).published;
  const document = () => fs.readFileSync(path.join(runtimeRoot, 'hook-projections', target, 'current.json'));
  return { publish, publishAsync, document };
}

/** The Memory Core's JavaScript writer at `synchronous = level`. */
function jsWriter(level) {
  const { db, runtimeRoot } = host(`js-${level}`);
  db.pragma(`synchronous = ${level}`);
  js.ensureSchema(db);
  const targetId = js.deriveTargetId(TUPLE);
  for (const [envelope, channel] of [
    [ENVELOPES[0], 'lifecycle-frontier'],
    [ENVELOPES[1], 'computed-route'],
  ]) {
    js.submit(db, {
      targetId,
      channel,
      envelope,
      sourceWatermark: envelope.sourceWatermark,
      capturedAt: envelope.capturedAt,
      expiresAt: envelope.expiresAt,
      now: new Date().toISOString(),
    });
  }
  return () => {
    const r = js.publish(db, { runtimeRoot, tuple: TUPLE, consumerBinding: BINDING, now: Date.now, leaseTtlMs: 60_000, token: randomBytes(32).toString('hex') });
    if (!r.published) throw new Error(`the JS writer did not publish: ${JSON.stringify(r)}`);
    return r;
  };
}

/** The plain atomic write of `bytes` to `dir/current.json`. */
function floor(bytes) {
  const dir = path.join(base, 'floor', 'hook-projections', 'target');
  fs.mkdirSync(dir, { recursive: true });
  const file = path.join(dir, 'current.json');
  return () => {
    const temp = path.join(dir, `.current.json.${randomBytes(8).toString('hex')}.tmp`);
    const fd = fs.openSync(temp, 'wx', 0o600);
    try {
      fs.writeSync(fd, bytes);
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(temp, file);
    const dirFd = fs.openSync(dir, 'r');
    try {
      fs.fsyncSync(dirFd);
    } finally {
      fs.closeSync(dirFd);
    }
  };
}

/** Runs `op` WARMUP + N times; the N measured durations in µs. */
async function measure(op) {
  for (let i = 0; i < WARMUP; i++) await op();
  const us = [];
  for (let i = 0; i < N; i++) {
    const t0 = performance.now();
    await op();
    us.push((performance.now() - t0) * 1000);
  }
  return us;
}

const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;
const p50 = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function main() {
  const sw = solewriter();
  const first = sw.publish();
  if (!first) throw new Error('solewriter did not publish');
  const kinds = [
    ['floor (atomic write, no lease)', floor(sw.document())],
    ['publishNow', sw.publish],
    ['publishNowAsync', sw.publishAsync],
    ['js writer (synchronous = FULL)', jsWriter('FULL')],
    ['js writer (synchronous = NORMAL)', jsWriter('NORMAL')],
  ];
  const results = [];
  for (const [name, op] of kinds) results.push([name, await measure(op)]);
  const baseline = mean(results[0][1]);
  console.log(`${base}: ${N} publications of each kind (${sw.document().length} bytes), ${WARMUP} unmeasured first`);
  for (const [name, us] of results) {
    console.log(`${name.padEnd(34)} mean ${mean(us).toFixed(0).padStart(6)} µs  p50 ${p50(us).toFixed(0).padStart(6)} µs  ${(mean(us) / baseline).toFixed(2)}× floor`);
  }
  const at = (name) => mean(results.find(([n]) => n === name)[1]);
  console.log(`publishNow / js writer (FULL): ${(at('publishNow') / at('js writer (synchronous = FULL)')).toFixed(2)}×`);
}

main().catch((e) => {
  console.error(e);
  process.exitCode = 1;
});
