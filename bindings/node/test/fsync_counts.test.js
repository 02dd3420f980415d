'use strict';
/**
 * The fsyncs of each store operation on the Node path, pinned at the system-call layer: the host
 * (`fsync_host.js`, a better-sqlite3 connection opened the way docs/node.md wires it) runs under the shared
 * syscall-trace helper (`scripts/syscall_trace.py --count-syncs`, strace), which counts every
 * fsync, fdatasync, sync_file_range, syncfs and sync between the marks `NAME:begin` and
 * `NAME:end` around each operation, in every thread (the JS thread and the libuv pool), per file
 * kind (the host database's WAL, its main file, a temp sibling of `current.json`, a target
 * directory, ...). The counts are asserted exactly, so a change that adds (or drops) a durability
 * call fails here and has to update the table in BENCHMARKS.md with it. The Rust path has the
 * same check: `adapters/tests/fsync_counts.rs`.
 */

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { scratch, traced } = require('./helpers');
const ROUNDS = 2;
/** How the helper names the synced files (first match wins); any other is `other:PATH`. */
const KINDS = [
  'wal=\\.sqlite-wal$',
  'journal=\\.sqlite-journal$',
  'database=\\.sqlite$',
  'temp=/\\.current\\.json\\.tmp-[0-9a-f]+$',
  'target-dir=/hook-projections/[0-9a-f]{64}$',
  'projections-dir=/hook-projections$',
  'runtime-root=/runtime$',
];

/** A publication: the temp file, its one commit, the target directory. */
const PUBLICATION = { temp: 1, wal: 1, 'target-dir': 1 };
/** A batch of two one-shots: each target's temp file and directory, ONE commit for both. */
const BATCH_OF_TWO = { temp: 2, wal: 1, 'target-dir': 2 };
/**
 * The expected number of durability calls per file kind, per region (fsync and fdatasync alike:
 * which one SQLite uses for its WAL depends on how it was built).
 */
const EXPECTED = {
  // The store's first publication also creates `hook-projections/` and the target directory, and
  // fsyncs the parent of each (the runtime root, `hook-projections/`).
  'first-publishNow': { ...PUBLICATION, 'projections-dir': 1, 'runtime-root': 1 },
  // The first publication of another target: its directory is new, `hook-projections/` (its
  // parent) is fsynced; the rest of the chain is known durable.
  'newTarget-publishNow': { ...PUBLICATION, 'projections-dir': 1 },
  // The commit of a submission, of a grant, of a release: the WAL, once (solewriter's commits are
  // fsynced whatever the host's level).
  submit: { wal: 1 },
  acquire: { wal: 1 },
  release: { wal: 1 },
  publish: PUBLICATION,
  publishNow: PUBLICATION,
  publishAsync: PUBLICATION,
  publishNowAsync: PUBLICATION,
  publishManyNow: BATCH_OF_TWO,
  publishManyNowAsync: BATCH_OF_TWO,
};
/** A region's calls per kind, whatever the call: `{kind: count}`. */
function perKind(syncs) {
  return Object.fromEntries(Object.entries(syncs).map(([kind, calls]) => [kind, Object.values(calls).reduce((a, n) => a + n, 0)]));
}
const ROUND = ['submit', 'acquire', 'publish', 'release', 'publishNow', 'publishAsync', 'publishNowAsync', 'publishManyNow', 'publishManyNowAsync'];

test('every operation on a better-sqlite3 host syncs exactly the pinned files, the pinned number of times', (t) => {
  const dir = scratch();
  const out = path.join(dir, 'events.json');
  const run = traced(
    out,
    ['--count-syncs', ...KINDS.flatMap((kind) => ['--kind', kind])],
    'fsync_host.js',
    [dir, String(ROUNDS)],
  );
  assert.equal(
    run.status,
    0,
    `the helper could not trace (strace missing or ptrace refused: exit 2), a region was never closed (3), or the host failed: ${run.stderr}`,
  );
  assert.deepEqual(JSON.parse(run.stdout).epochs.length, 2 + 8 * ROUNDS, 'every publication published');
  const { regions } = JSON.parse(fs.readFileSync(out, 'utf8'));
  const wanted = ['first-publishNow', 'newTarget-publishNow'];
  for (let round = 0; round < ROUNDS; round++) wanted.push(...ROUND);
  assert.deepEqual(
    regions.map((r) => r.name),
    wanted,
    'every operation traced, in order',
  );
  for (const { name, syncs } of regions) {
    assert.deepEqual(perKind(syncs), EXPECTED[name], `durability calls of ${name} per file kind (the calls: ${JSON.stringify(syncs)})`);
  }
  // The table of BENCHMARKS.md.
  for (const { name, syncs } of regions) t.diagnostic(`${name}: ${JSON.stringify(syncs)}`);
});
