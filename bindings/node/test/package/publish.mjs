// One real publication through the installed package, from an ES module (scripts/node_package_test.sh
// runs it in a scratch project): node publish.mjs DIR. Prints what it published; check.cjs reads
// current.json back.
import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { initialize, ProjectionStore, readProjection } from 'solewriter';

const dir = process.argv[2];
const db = new Database(path.join(dir, 'host.sqlite'), { timeout: 5000 });
db.pragma('journal_mode = WAL');
initialize(db);
const runtimeRoot = path.join(dir, 'runtime');
fs.mkdirSync(runtimeRoot);
const channels = [{ name: 'computed-route', owner: 'router', envelopeSchema: 'computed-route.v1', maxEnvelopeBytes: 4096 }];
const store = new ProjectionStore(db, { runtimeRoot, channels, leaseTtlMs: 60000, busyTimeoutMs: 1000 });
const target = store.admitTarget({
  schemaVersion: '1',
  capability: 'hook-projection',
  agentId: 'agent-esm',
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
  envelopeJson: '{"schema":"computed-route.v1","notAuthority":true,"route":"esm"}',
  capturedAt: now,
  expiresAt: now + 60000,
});
const { granted } = store.acquire(target, 'host-esm');
const published = await store.publishAsync(granted);
// The package's own reader validates what it published.
if (readProjection(runtimeRoot, target).fencingEpoch !== published.epoch) throw new Error('readProjection disagrees');
db.close();
console.log(JSON.stringify({ runtimeRoot, target, published }));
