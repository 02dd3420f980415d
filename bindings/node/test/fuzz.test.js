'use strict';
/**
 * Fuzzing the native boundary (seeded, so a failure replays): thousands of malformed
 * configurations, rows a host could have planted in the two tables, and malformed answers of
 * the host's connection to the SQL executor. Every case ends in an answer or a thrown `Error`
 * whose code is one of `ERROR_CODES` — never an abort (the test process would die), never another code — and a
 * call refused because of a planted row publishes nothing and writes no row (a one-shot that
 * had begun its transaction over a free row commits only the release of its own grant); a
 * call whose connection answered garbage leaves it outside any transaction at the host's
 * `synchronous` level.
 *
 * SOLEWRITER_FUZZ_SEED=<n> replays a run; SOLEWRITER_FUZZ_CASES=<n> scales each part.
 */

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { ProjectionStore, Grant, ERROR_CODES } = require('..');
const { setup, faulty, tuple, submission, CHANNELS, START } = require('./helpers');

const SEED = Number(process.env.SOLEWRITER_FUZZ_SEED || 20261201);
const CASES = Number(process.env.SOLEWRITER_FUZZ_CASES || 1500);

/** A small seeded generator (mulberry32). */
function generator(seed) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (n) => Math.floor(next() * n);
  const pick = (list) => list[int(list.length)];
  return { next, int, pick };
}

const HEX64 = 'ab'.repeat(32);
/** Values of every JS shape, the awkward ones first. */
const ODD = [undefined, null, 0, -1, 1.5, NaN, Infinity, 2 ** 53, 2 ** 64, '', 'x', HEX64, '0', [], [1], {}, { a: 1 }, true, () => 1, Symbol('s'), 10n];

/** A random value: odd, or one of a few sane ones. */
function value(g, sane = []) {
  return g.next() < 0.5 && sane.length ? g.pick(sane) : g.pick(ODD);
}

/** Asserts `e` is a documented error; its code. */
function documented(e, what) {
  assert.ok(e instanceof Error, `${what}: threw a non-Error ${String(e)}`);
  assert.ok(ERROR_CODES.includes(e.code), `${what}: undocumented code ${e.code}: ${e.message}`);
  return e.code;
}

function dump(db) {
  return JSON.stringify({
    leases: db.prepare('SELECT * FROM HookProjectionLeases ORDER BY target_id').all(),
    channels: db.prepare('SELECT * FROM HookProjectionChannels ORDER BY target_id, channel').all(),
  });
}

/**
 * The files under the runtime root but the target's directory and lock file, which a
 * publication or grant creates before it reads the row (the target lock is taken first).
 */
function files(root) {
  const dir = path.join(root, 'hook-projections');
  if (!fs.existsSync(dir)) return '';
  return fs
    .readdirSync(dir, { recursive: true })
    .filter((f) => !f.endsWith('.lock') && fs.statSync(path.join(dir, f)).isFile())
    .sort()
    .map((f) => {
      const full = path.join(dir, f);
      return fs.statSync(full).isFile() ? `${f}:${fs.readFileSync(full, 'utf8')}` : f;
    })
    .join('\n');
}

test(`malformed configurations: INVALID_CONFIG at construction or a store whose calls never refuse its configuration (${CASES} cases)`, (t) => {
  const g = generator(SEED);
  const { db, runtimeRoot } = setup();
  const target = new ProjectionStore(db, { runtimeRoot, channels: CHANNELS, leaseTtlMs: 100, busyTimeoutMs: 100 }).admitTarget(tuple(0));
  const counts = { refused: 0, accepted: 0 };
  for (let i = 0; i < CASES; i += 1) {
    const config = { runtimeRoot, channels: CHANNELS, leaseTtlMs: 100, busyTimeoutMs: 100 };
    for (let n = 1 + g.int(3); n > 0; n -= 1) {
      const field = g.pick(['runtimeRoot', 'channels', 'leaseTtlMs', 'busyTimeoutMs', 'clock', 'probe', 'extra']);
      const channel = () => ({ ...g.pick(CHANNELS), [g.pick(['name', 'owner', 'envelopeSchema', 'maxEnvelopeBytes'])]: value(g) });
      const sane = {
        runtimeRoot: [runtimeRoot, path.join(runtimeRoot, 'absent'), '/dev/null'],
        channels: [[], [channel()], [channel(), channel()], [CHANNELS[0], CHANNELS[0]]],
        leaseTtlMs: [1, 100, 2 ** 53 - 1],
        busyTimeoutMs: [1, 100],
        clock: [() => START, () => 'x', () => -1],
        probe: [() => undefined],
        extra: [1],
      }[field];
      config[field] = value(g, sane);
      if (config[field] === undefined) delete config[field];
    }
    let store;
    try {
      store = new ProjectionStore(db, config);
    } catch (e) {
      assert.equal(documented(e, `config ${i}`), 'INVALID_CONFIG', `config ${i}: ${e.message}`);
      counts.refused += 1;
      continue;
    }
    counts.accepted += 1;
    try {
      store.publishNow(target, 'holder-1');
    } catch (e) {
      const code = documented(e, `accepted config ${i}`);
      assert.notEqual(code, 'INVALID_CONFIG', `accepted config ${i} refused later: ${e.message}`);
    }
  }
  t.diagnostic(`seed ${SEED}: ${JSON.stringify(counts)}`);
  assert.ok(counts.refused > CASES / 4 && counts.accepted > 10, JSON.stringify(counts));
});

/** A lease row as solewriter writes it, then broken in one or two columns. */
function plantedLease(g, targetId) {
  const row = {
    target_id: targetId,
    fencing_epoch: 3,
    holder_token_hash: Buffer.alloc(32, 7),
    holder_instance_digest: 'holder-1',
    acquired_at: START,
    expires_at: START + 100,
    state: 'held',
  };
  const breaks = {
    target_id: ['A'.repeat(64), 'g'.repeat(64), targetId.toUpperCase()],
    fencing_epoch: [-1, 2 ** 53, 2 ** 62],
    holder_token_hash: [null, Buffer.alloc(31), Buffer.alloc(33), Buffer.alloc(0)],
    holder_instance_digest: [null, '', 'x'.repeat(5000), 'a b', '\u0000'],
    acquired_at: [null, -5, 2 ** 62, START + 1000],
    expires_at: [null, -5, 2 ** 62, START - 1000],
    state: ['unheld', 'released', 'HELD', 'expired', ''],
  };
  for (let n = 1 + g.int(2); n > 0; n -= 1) {
    const column = g.pick(Object.keys(breaks));
    row[column] = g.pick(breaks[column]);
  }
  return row;
}

/** A channel row as solewriter writes it, then broken in one or two columns. */
function plantedChannel(g, targetId) {
  const ok = JSON.parse(JSON.stringify(submission(targetId, 0, 5, 'x')));
  const row = {
    target_id: targetId,
    channel: 'computed-route',
    source_watermark: 5,
    envelope_json: ok.envelopeJson,
    captured_at: START,
    expires_at: START + 1000,
    updated_at: START,
    degraded_reason: null,
  };
  const breaks = {
    channel: ['', 'unknown-channel', 'a/b', 'x'.repeat(300)],
    source_watermark: [-1, 2 ** 53, 2 ** 62],
    envelope_json: ['', '{', '[]', 'null', '{"schema":"computed-route.v1"}', '{"schema":"other","notAuthority":true}', ' {} '],
    captured_at: [-1, 2 ** 62],
    expires_at: [-1, 2 ** 62, 0],
    updated_at: [-1, 2 ** 62],
    degraded_reason: ['', 'why-not', 'source-conflict '],
  };
  for (let n = 1 + g.int(2); n > 0; n -= 1) {
    const column = g.pick(Object.keys(breaks));
    row[column] = g.pick(breaks[column]);
  }
  return row;
}

function plant(db, table, row) {
  const columns = Object.keys(row);
  db.pragma('ignore_check_constraints = ON');
  try {
    db.prepare(`INSERT OR REPLACE INTO ${table} (${columns.join(', ')}) VALUES (${columns.map(() => '?').join(', ')})`).run(
      ...columns.map((c) => (typeof row[c] === 'number' && !Number.isSafeInteger(row[c]) ? BigInt(row[c]) : row[c])),
    );
  } finally {
    db.pragma('ignore_check_constraints = OFF');
  }
}

test(`rows a host planted: a documented error or an answer, and a refused call writes nothing (${CASES} cases)`, (t) => {
  const g = generator(SEED + 1);
  const { db, runtimeRoot, store } = setup({ ttlMs: 100 });
  const target = store.admitTarget(tuple(0));
  const counts = {};
  for (let i = 0; i < CASES; i += 1) {
    db.exec('DELETE FROM HookProjectionChannels; DELETE FROM HookProjectionLeases');
    fs.rmSync(path.join(runtimeRoot, 'hook-projections'), { recursive: true, force: true });
    const lease = g.next() < 0.6 ? plantedLease(g, target) : { target_id: target, fencing_epoch: 0, state: 'unheld' };
    try {
      plant(db, 'HookProjectionLeases', lease);
      if (lease.target_id === target && g.next() < 0.5) plant(db, 'HookProjectionChannels', plantedChannel(g, target));
    } catch (e) {
      counts.unplantable = (counts.unplantable || 0) + 1; // STRICT refused the type: no host could
      continue;
    }
    const before = dump(db);
    const filesBefore = files(runtimeRoot);
    const forged = Grant.fromSecret({ targetId: target, epoch: 3, holder: 'holder-1', acquiredAt: START, expiresAt: START + 100, token: HEX64 });
    const op = g.pick(['acquire', 'publishNow', 'publish', 'release', 'endLease', 'inspect', 'submit']);
    const call = {
      acquire: () => store.acquire(target, 'holder-2'),
      publishNow: () => store.publishNow(target, 'holder-2'),
      publish: () => store.publish(forged),
      release: () => store.release(forged),
      endLease: () => store.endLease(target),
      inspect: () => store.inspect(),
      submit: () => store.submit('router', submission(target, 0, 6, 'y')),
    }[op];
    let code = 'answered';
    try {
      call();
    } catch (e) {
      code = documented(e, `planted ${i} (${op}, ${JSON.stringify(lease, (k, v) => (Buffer.isBuffer(v) || v?.type === 'Buffer' ? 'blob' : v))})`);
      const after = JSON.parse(dump(db));
      const was = JSON.parse(before);
      assert.deepEqual(after.channels, was.channels, `planted ${i}: ${op} threw ${code} and wrote channel rows`);
      if (JSON.stringify(after.leases) !== JSON.stringify(was.leases)) {
        // A one-shot whose transaction began over a free row ends, like every publication that
        // fails inside its transaction, with its own grant released and committed (the core's
        // publication machine): the epoch is used, no document, no holder left.
        assert.equal(op, 'publishNow', `planted ${i}: ${op} threw ${code} and wrote lease rows: ${before} -> ${dump(db)}`);
        assert.equal(after.leases.length, 1);
        assert.equal(after.leases[0].state, 'released', `planted ${i}: ${op} threw ${code} and left its grant held: ${before} -> ${dump(db)}`);
      }
      assert.equal(files(runtimeRoot), filesBefore, `planted ${i}: ${op} threw ${code} and wrote files`);
    }
    assert.equal(db.inTransaction, false);
    counts[code] = (counts[code] || 0) + 1;
  }
  t.diagnostic(`seed ${SEED + 1}: ${JSON.stringify(counts)}`);
  assert.ok((counts.CORRUPT_ROW || 0) + (counts.INCONSISTENT_LEASE || 0) > CASES / 10, JSON.stringify(counts));
});

test(`malformed answers of the host's connection: a documented error or an answer, the connection left clean (${CASES} cases)`, async (t) => {
  const g = generator(SEED + 2);
  const { db, store: plain, clock } = setup({ ttlMs: 100 });
  const target = plain.admitTarget(tuple(0));
  plain.submit('router', submission(target, 0, 1, 'x'));
  const garbageRow = () => ({
    target_id: value(g, [target]),
    fencing_epoch: value(g, [0, 1]),
    state: value(g, ['held', 'unheld']),
    holder_token_hash: value(g, [Buffer.alloc(32)]),
  });
  const failure = () => Object.assign(new Error('the connection failed'), { code: value(g, ['SQLITE_BUSY', 'SQLITE_FULL', 5]) });
  // Once the store is made, now and then a statement answers garbage or throws, and a BEGIN or
  // COMMIT throws (a ROLLBACK always runs: a connection that cannot roll back cannot be left
  // clean by anyone).
  let faults = false;
  const statement = (sql, method, args, real) => {
    if (!faults || g.next() < 0.8) return real();
    return g.pick([
      () => value(g),
      () => ({ get: () => value(g, [garbageRow(), null]), all: () => value(g, [[garbageRow()], [{}], null]), run: () => value(g, [{ changes: 1 }, { changes: 0 }, null]) })[method](),
      () => {
        throw failure();
      },
    ])();
  };
  const exec = (sql, real) => {
    if (faults && sql !== 'ROLLBACK' && g.next() >= 0.8) throw failure();
    return real();
  };
  const store = new ProjectionStore(faulty(db, { exec, statement }), { ...plain.config, busyTimeoutMs: 50 });
  faults = true;
  const counts = {};
  for (let i = 0; i < CASES; i += 1) {
    clock.now += g.int(60);
    const op = g.pick(['acquire', 'publishNow', 'publish', 'release', 'endLease', 'publishAsync', 'publishNowAsync']);
    const granted = () => plain.acquire(target, 'holder-1').granted ?? Grant.fromSecret({ targetId: target, epoch: 1, holder: 'h', acquiredAt: 0, expiresAt: 0, token: HEX64 });
    let code = 'answered';
    try {
      await {
        acquire: () => store.acquire(target, 'holder-2'),
        publishNow: () => store.publishNow(target, 'holder-2'),
        publish: () => store.publish(granted()),
        release: () => store.release(granted()),
        endLease: () => store.endLease(target),
        publishAsync: () => store.publishAsync(granted()),
        publishNowAsync: () => store.publishNowAsync(target, 'holder-2'),
      }[op]();
    } catch (e) {
      code = documented(e, `case ${i} (${op})`);
    }
    assert.equal(db.inTransaction, false, `case ${i} (${op}): a transaction left open`);
    assert.equal(db.pragma('synchronous', { simple: true }), 1, `case ${i} (${op}): the host's level not restored`);
    counts[code] = (counts[code] || 0) + 1;
  }
  t.diagnostic(`seed ${SEED + 2}: ${JSON.stringify(counts)}`);
  assert.ok((counts.HOST || 0) > CASES / 20, JSON.stringify(counts));
  assert.ok((counts.answered || 0) > CASES / 20, JSON.stringify(counts));
});
