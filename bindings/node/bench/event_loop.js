'use strict';
/**
 * How long a publication blocks the event loop, synchronous (`publish`) against asynchronous
 * (`publishAsync`), seen from the host: a `setImmediate` ticker runs beside the publications
 * and records the longest gap between two of its ticks during each one — the longest stretch
 * the loop could not run anything else. For `publish` that is the whole call.
 *
 * usage: node bench/event_loop.js [--test] [DIR] [N]   (DIR: where the database and the runtime
 * root go, default the OS temp directory — pick a disk, not tmpfs, to see the fsyncs; N: number
 * of publications of each kind, default 200). Prints p50 / p99 / max in ms for each kind.
 * `--test` runs one publication of each kind, as CI does for every benchmark in this directory
 * (`node BENCH --test`), so a broken benchmark fails the build; any error exits non-zero.
 */

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { performance } = require('node:perf_hooks');
const Database = require('better-sqlite3');
const { initialize, ProjectionStore } = require('..');

const TEST = process.argv.includes('--test');
const [dirArg, countArg] = process.argv.slice(2).filter((arg) => arg !== '--test');
const base = fs.mkdtempSync(path.join(dirArg || os.tmpdir(), 'solewriter-event-loop-'));
const N = TEST ? 1 : Number(countArg || 200);
// Removed however the run ends (a failed run too).
process.on('exit', () => fs.rmSync(base, { recursive: true, force: true }));
const CHANNELS = [{ name: 'computed-route', owner: 'router', envelopeSchema: 'computed-route.v1', maxEnvelopeBytes: 4096 }];

const db = new Database(path.join(base, 'host.sqlite'), { timeout: 5000 });
db.pragma('journal_mode = WAL');
initialize(db);
const runtimeRoot = path.join(base, 'runtime');
fs.mkdirSync(runtimeRoot);
const store = new ProjectionStore(db, { runtimeRoot, channels: CHANNELS, leaseTtlMs: 60000, busyTimeoutMs: 5000 });
const target = store.admitTarget({
  schemaVersion: '1',
  capability: 'hook-projection',
  agentId: 'agent-0',
  harnessType: 'claude-code',
  instanceKeyDigest: 'inst',
  workspaceKeyDigest: 'ws',
  projectionKind: 'live-lane',
});
const now = Date.now();
store.submit('router', {
  targetId: target,
  channel: 'computed-route',
  sourceWatermark: 1,
  envelopeJson: '{"schema":"computed-route.v1","notAuthority":true,"body":"x"}',
  capturedAt: now,
  expiresAt: now + 3600000,
});

function summary(name, ms) {
  ms.sort((a, b) => a - b);
  const at = (q) => ms[Math.min(ms.length - 1, Math.floor(q * ms.length))].toFixed(2);
  console.log(`${name}: p50 ${at(0.5)} ms, p99 ${at(0.99)} ms, max ${ms[ms.length - 1].toFixed(2)} ms (${ms.length} publications)`);
}

async function main() {
  const sync = [];
  for (let i = 0; i < N; i++) {
    const grant = store.acquire(target, 'bench').granted;
    const t0 = performance.now();
    store.publish(grant);
    sync.push(performance.now() - t0);
  }
  const asynchronous = [];
  for (let i = 0; i < N; i++) {
    const grant = store.acquire(target, 'bench').granted;
    let last = performance.now();
    let longest = 0;
    let running = true;
    const tick = () => {
      const t = performance.now();
      longest = Math.max(longest, t - last);
      last = t;
      if (running) setImmediate(tick);
    };
    setImmediate(tick);
    try {
      await store.publishAsync(grant);
    } finally {
      // Stopped on a failure too: a ticker left running would keep the process alive forever.
      running = false;
    }
    longest = Math.max(longest, performance.now() - last);
    asynchronous.push(longest);
  }
  console.log(`${base} (${N} each, one target, one channel)`);
  summary('publish (blocks for the whole call)', sync);
  summary('publishAsync (longest stretch without a tick)', asynchronous);
  db.close();
}

main().catch((e) => {
  console.error(e);
  process.exitCode = 1;
});
