'use strict';
/**
 * Lock spans checked where they happen, on the Node path: from the opening of a publication's
 * transaction (through its revalidation read) to its release (through the rename and the sweep),
 * neither the target's kernel lock nor SQLite's write lock is let go, and at every step outside
 * the transaction (the draft composed, its temp written, the locks let go after the commit, the
 * directory fsynced) neither is held, so a holder frozen there (a GC pause) stops nobody — for
 * the synchronous and the asynchronous publication, of a grant, in one shot and in a batch of two
 * one-shots (whose every target's transaction-open to released lies inside the one transaction,
 * all the batch's target locks held). The host
 * (`lock_span_host.js`) runs under the shared syscall-trace helper (`scripts/syscall_trace.py
 * --hold --free`), which follows the `flock` on the target's lock file and the `fcntl` write lock
 * on byte 120 of the `-shm` file through every thread (the JS thread and the libuv pool). The
 * Rust path has the same check: `adapters/tests/lock_spans.rs`.
 */

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { scratch, traced } = require('./helpers');

test('from the transaction to the release no lock is let go, and outside it none is held, in all six forms', () => {
  const dir = scratch();
  const out = path.join(dir, 'events.json');
  const run = traced(
    out,
    [
      '--hold',
      'reached transaction-open',
      'reached released',
      '--free',
      'reached composed',
      '--free',
      'reached temp-written',
      '--free',
      'reached unlocked',
      '--free',
      'reached directory-synced',
    ],
    'lock_span_host.js',
    [dir],
  );
  const { spans } = JSON.parse(fs.readFileSync(out, 'utf8'));
  assert.equal(
    spans.length,
    40,
    `every publication traced, the span and the four free marks of each: ${JSON.stringify(spans)}`,
  );
  for (const span of spans) {
    assert.equal(span.held_at_start, span.locks !== 'none', JSON.stringify(span));
    assert.deepEqual(span.violations, [], JSON.stringify(span));
  }
  assert.equal(run.status, 0, run.stderr);
  assert.deepEqual(JSON.parse(run.stdout).epochs, [1, 2, 3, 4, 5, 1, 6, 2]);
});
