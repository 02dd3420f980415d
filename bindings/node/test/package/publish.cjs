'use strict';
// One real publication through the installed package, from CommonJS (scripts/node_package_test.sh
// runs it in a scratch project): node publish.cjs DIR. Prints what it published and which addon
// file the process loaded; check.cjs reads current.json back.
const fs = require('node:fs');
const path = require('node:path');
const Database = require('better-sqlite3');
const { initialize, ProjectionStore, Grant, ERROR_CODES } = require('solewriter');

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
  agentId: 'agent-cjs',
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
  envelopeJson: '{"schema":"computed-route.v1","notAuthority":true,"route":"commonjs"}',
  capturedAt: now,
  expiresAt: now + 60000,
});
const { granted } = store.acquire(target, 'host-cjs');
// A copy of the grant, rebuilt from its export before the first use: another object.
const copy = Grant.fromSecret(granted.exportSecret());
const published = store.publish(granted);

// Errors carry a documented `code`: the JS layer's (a Grant object is used once), the machine's
// (a copy of the released grant is fenced), and the binding layer's (a number where the addon
// takes a string).
const codes = {};
for (const [name, call] of [
  ['publishAgain', () => store.publish(granted)],
  ['publishCopy', () => store.publish(copy)],
  ['numberTarget', () => store.acquire(42, 'host-cjs')],
]) {
  try {
    call();
    codes[name] = 'no error';
  } catch (e) {
    codes[name] = ERROR_CODES.includes(e.code) ? `${e.code}${e.reason ? `/${e.reason}` : ''}` : `undocumented: ${e.code}`;
  }
}
db.close();

// The solewriter addon files mapped into this process (better-sqlite3's is another).
const addons = [
  ...new Set(
    fs
      .readFileSync('/proc/self/maps', 'utf8')
      .split('\n')
      .map((line) => line.split(/\s+/)[5])
      .filter((file) => file && /^solewriter.*\.node$/.test(path.basename(file))),
  ),
];
console.log(JSON.stringify({ runtimeRoot, target, published, codes, addons }));
