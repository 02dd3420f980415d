'use strict';
/**
 * Durable on the host's connection, whatever the host chose: on a connection opened the
 * the way docs/node.md wires it (better-sqlite3's defaults, WAL set by the host: `synchronous = NORMAL`, whose
 * commits are not fsynced), every call that commits a transaction of solewriter's has fsynced
 * the `-wal` file before it returns — and the host's own transaction right after still commits
 * without one, at the level the host chose. Observed at the system-call layer: the host
 * (`durable_host.js`) runs under the shared syscall-trace helper (`scripts/syscall_trace.py`,
 * strace), marking each call's beginning and end.
 */

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const { scratch } = require('./helpers');

const TRACE = path.join(__dirname, '..', '..', '..', 'scripts', 'syscall_trace.py');
const CALLS = [
  'adoptJsWriterTables',
  'admitTarget',
  'submit',
  'acquire',
  'publish',
  'release',
  'endLease',
  'publishNow',
  'publishAsync',
  'publishNowAsync',
  'publishManyNow',
  'publishManyNowAsync',
];

/** The events between the marks `name:begin` and `name:end`. */
function between(events, name) {
  const begin = events.findIndex((e) => e.mark === `${name}:begin`);
  const end = events.findIndex((e) => e.mark === `${name}:end`);
  assert.ok(begin >= 0 && end > begin, `marks of ${name} traced`);
  return events.slice(begin + 1, end);
}

/** Whether `events` hold a completed fsync or fdatasync of the database's WAL. */
function walSynced(events) {
  return events.some((e) => ['fsync', 'fdatasync'].includes(e.call) && /host\.sqlite-wal$/.test(e.path || '') && e.result === '0');
}

for (const [name, level] of [['NORMAL', 1], ['OFF', 0]]) {
  test(`a host at ${name}: every solewriter commit on its connection fsyncs the WAL before the call returns; the host's own does not`, () => {
    const dir = scratch();
    const out = path.join(dir, 'events.json');
    const printed = execFileSync('python3', [TRACE, '--out', out, '--', process.execPath, path.join(__dirname, 'durable_host.js'), dir, String(level)], {
      encoding: 'utf8',
    });
    const { levels } = JSON.parse(printed);
    const events = JSON.parse(fs.readFileSync(out, 'utf8'));
    const unsynced = CALLS.filter((call) => !walSynced(between(events, call)));
    assert.deepEqual(unsynced, [], 'calls that returned without an fsync of the WAL');
    assert.equal(walSynced(between(events, 'host')), false, `the host's own transaction stays at ${name}: no WAL fsync`);
    for (const call of [...CALLS, 'initialize', 'host']) assert.equal(levels[call], level, `${call}: the host's synchronous level restored`);
  });
}
