'use strict';
require('./test_addon'); // chosen tokens: the test build of the addon
/**
 * Conformance of the JS executor with the model-checked reference model: seeded random
 * sequences (admit / submit / acquire / publish / publishNow / release / clock moves) are
 * generated and run on the model by the Rust side (`verification/examples/node_vectors.rs`),
 * then replayed here through the addon and the JS executor on better-sqlite3. After every
 * step the outcome, the lease rows (token hashes included), the channel rows and every
 * `current.json` (byte for byte) must be the model's.
 *
 * The vectors come from `SOLEWRITER_NODE_VECTORS` (a file) when set, else from running the
 * generator with cargo (seed `SOLEWRITER_NODE_SEED`, `SOLEWRITER_NODE_CASES` sequences).
 */

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const { targetId } = require('..');
const { setup } = require('./helpers');
const { chosenToken } = require('./tokens');

function vectors() {
  if (process.env.SOLEWRITER_NODE_VECTORS) {
    return JSON.parse(fs.readFileSync(process.env.SOLEWRITER_NODE_VECTORS, 'utf8'));
  }
  const seed = process.env.SOLEWRITER_NODE_SEED || '1343602928';
  const cases = process.env.SOLEWRITER_NODE_CASES || '300';
  const out = execFileSync(
    'cargo',
    ['run', '-q', '-p', 'solewriter-verification', '--example', 'node_vectors', '--', seed, cases],
    { cwd: path.join(__dirname, '..', '..', '..'), maxBuffer: 1 << 30, encoding: 'utf8' },
  );
  return JSON.parse(out);
}

const hex = (byte) => byte.toString(16).padStart(2, '0').repeat(32);

function fenced(e) {
  return e.currentEpoch === undefined ? e.reason : `${e.reason} ${e.currentEpoch}`;
}

/** The outcome of a publication as the generator spells it. */
function publication(run) {
  try {
    const r = run();
    const published = r.published || r;
    if (r.held) return `held ${r.held.epoch} ${r.held.retryAfterMs}`;
    return `published ${published.epoch} ${published.bytes}`;
  } catch (e) {
    if (e.code === 'FENCED') return `fenced ${fenced(e)}`;
    if (e.code === 'LEASE_EXPIRED') return 'expired';
    if (e.code === 'NOT_ADMITTED') return 'not-admitted';
    throw e;
  }
}

function replay(v, ops, steps) {
  const { db, store, clock, runtimeRoot } = setup({ ttlMs: v.ttlMs });
  const targets = v.tuples.map(targetId);
  const slots = [];
  const envelope = (c, body) =>
    `{"schema":"${v.channels[c].envelopeSchema}","notAuthority":true,"body":"b${body}"}`;
  ops.forEach((op, i) => {
    let outcome;
    switch (op.op) {
      case 'admit':
        outcome = `admitted ${store.admitTarget(v.tuples[op.target])}`;
        break;
      case 'submit': {
        let envelopeJson = envelope(op.channel, op.body);
        if (!op.validSchema) envelopeJson = envelopeJson.replace('notAuthority":true', 'notAuthority":false');
        const s = {
          targetId: targets[op.target],
          channel: v.channels[op.channel].name,
          sourceWatermark: op.watermark,
          envelopeJson,
          capturedAt: v.start,
          expiresAt: v.start + 10 * v.ttlMs,
        };
        try {
          outcome = `submitted ${store.submit(v.producers[op.producer], s)}`;
        } catch (e) {
          if (e.code !== 'REJECTED') throw e;
          outcome = 'rejected';
        }
        break;
      }
      case 'acquire': {
        if (slots[op.slot]) store.release(slots[op.slot]);
        slots[op.slot] = undefined;
        try {
          const r = store.acquire(targets[op.target], `holder-${op.slot}`, chosenToken(hex(op.token)));
          if (r.granted) {
            slots[op.slot] = r.granted;
            outcome = `acquired ${r.granted.epoch} ${r.granted.expiresAt}`;
          } else {
            outcome = `held ${r.held.epoch} ${r.held.retryAfterMs}`;
          }
        } catch (e) {
          if (e.code !== 'NOT_ADMITTED') throw e;
          outcome = 'not-admitted';
        }
        break;
      }
      case 'publish': {
        const grant = slots[op.slot];
        slots[op.slot] = undefined;
        outcome = grant ? publication(() => store.publish(grant)) : 'no-lease';
        break;
      }
      case 'publishNow':
        outcome = publication(() => store.publishNow(targets[op.target], 'holder-9', chosenToken(hex(op.token))));
        break;
      case 'release': {
        const grant = slots[op.slot];
        slots[op.slot] = undefined;
        if (!grant) {
          outcome = 'no-lease';
        } else {
          const r = store.release(grant);
          outcome = r.released ? 'released' : `not-holder ${fenced(r.notHolder)}`;
        }
        break;
      }
      case 'advance':
        clock.now += op.ms;
        outcome = 'clock-moved';
        break;
      case 'clockBack':
        clock.now = Math.max(clock.now - op.ms, v.start);
        outcome = 'clock-moved';
        break;
      default:
        throw new Error(`unknown op ${op.op}`);
    }
    const want = steps[i];
    const where = `step ${i} (${JSON.stringify(op)})`;
    assert.equal(outcome, want.outcome, `outcome differs at ${where}`);
    assert.equal(clock.now, want.clock, `clock differs at ${where}`);
    const leases = db
      .prepare('SELECT * FROM HookProjectionLeases ORDER BY target_id')
      .all()
      .map((r) => {
        const grant =
          r.holder_token_hash === null
            ? '-/-/-/-'
            : `${r.holder_token_hash.toString('hex')}/${r.holder_instance_digest}/${r.acquired_at}/${r.expires_at}`;
        return `${r.target_id} e${r.fencing_epoch} ${r.state} ${grant}`;
      });
    assert.deepEqual(leases, want.leases, `lease rows differ after ${where}`);
    const channels = db
      .prepare('SELECT * FROM HookProjectionChannels ORDER BY target_id, channel')
      .all()
      .map(
        (c) =>
          `${c.target_id} ${c.channel} ${c.source_watermark} ${c.envelope_json} ${c.captured_at} ${c.expires_at} ${c.updated_at} ${c.degraded_reason ?? '-'}`,
      );
    assert.deepEqual(channels, want.channels, `channel rows differ after ${where}`);
    const current = targets.map((t) => {
      const file = path.join(runtimeRoot, 'hook-projections', t, 'current.json');
      return fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : null;
    });
    assert.deepEqual(current, want.current, `current.json differs after ${where}`);
    assert.equal(db.inTransaction, false, `left inside a transaction after ${where}`);
  });
  db.close();
  // The outcome's kind: its first word, with the fencing reason or submission kind.
  return steps.map((s) => s.outcome.split(' ').slice(0, 2).join(' ').replace(/ [0-9a-f]+$/, ''));
}

test('the JS executor on better-sqlite3 agrees with the reference model', () => {
  const v = vectors();
  const seen = new Set();
  v.cases.forEach((c) => {
    for (const kind of replay(v, c.ops, c.steps)) seen.add(kind);
  });
  // Non-vacuity: the sequences reached the outcomes that matter.
  for (const kind of [
    'published',
    'fenced superseded',
    'fenced expired',
    'held',
    'not-admitted',
    'rejected',
    'released',
    'not-holder superseded',
    'submitted degraded',
    'submitted replayed',
    'submitted advanced',
  ]) {
    assert.ok(seen.has(kind), `no case reached ${kind} (seen: ${[...seen].sort().join(', ')})`);
  }
  console.log(`conformance: ${v.cases.length} sequences agreed (seed ${v.seed}); outcomes: ${[...seen].sort().join(', ')}`);
});
