'use strict';
/**
 * Fencing across languages and processes, on one host database: Node holders (better-sqlite3,
 * `node_holder.js`) and Rust holders (the `holder` subcommand of the CLI's test binary,
 * `solewriter-testkit`, whose clock seam reads the file) contend for the same target, all
 * reading one broker clock from a file. A holder frozen with SIGSTOP past its
 * expiry is taken over by a holder of the other language; resumed, it is fenced and
 * `current.json` stays the successor's document. Meanwhile a host process writes its own
 * `SummarizationJobs` table in its own transactions: every one of its rows lands, its schema
 * is untouched.
 */

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const readline = require('node:readline');
const { spawn } = require('node:child_process');
const Database = require('better-sqlite3');
const { Grant, readProjection, ProjectionStore } = require('..');
const { setup, tuple, submission, testkit, CHANNELS } = require('./helpers');

const TTL_MS = 1500;

/** Every child this test started, killed when the test ends (also on a failed assertion). */
const children = [];
test.after(() => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
});

/** A child speaking the holder protocol; `ask` sends a line and resolves with the answer. */
function holder(child) {
  children.push(child);
  const answers = [];
  const waiting = [];
  readline.createInterface({ input: child.stdout }).on('line', (line) => {
    const next = waiting.shift();
    if (next) next(line);
    else answers.push(line);
  });
  child.stderr.on('data', (d) => process.stderr.write(d));
  return {
    child,
    ask(command) {
      child.stdin.write(`${command}\n`);
      return answers.length ? Promise.resolve(answers.shift()) : new Promise((resolve) => waiting.push(resolve));
    },
    stop() {
      child.stdin.end();
      return new Promise((resolve) => child.on('exit', resolve));
    },
  };
}

/**
 * One host database with one admitted target (a submission stored), a broker clock file
 * shared by every holder, a CLI configuration, and spawners of Rust and Node holders.
 */
function environment({ busyTimeoutMs = 5000 } = {}) {
  const { dir, dbPath, db, runtimeRoot, store } = setup({ ttlMs: TTL_MS });
  const target = store.admitTarget(tuple(0));
  assert.equal(store.submit('router', submission(target, 0, 1, 'x')), 'inserted');
  const clockFile = path.join(dir, 'clock');
  const setClock = (ms) => {
    fs.writeFileSync(`${clockFile}.tmp`, String(ms));
    fs.renameSync(`${clockFile}.tmp`, clockFile);
  };
  setClock(1000);
  const toml = [
    `store = ${JSON.stringify(dbPath)}`,
    `runtime_root = ${JSON.stringify(runtimeRoot)}`,
    `lease_ttl_ms = ${TTL_MS}`,
    `busy_timeout_ms = ${busyTimeoutMs}`,
    ...CHANNELS.flatMap((c) => [
      '[[channels]]',
      `name = "${c.name}"`,
      `owner = "${c.owner}"`,
      `envelope_schema = "${c.envelopeSchema}"`,
      `max_envelope_bytes = ${c.maxEnvelopeBytes}`,
    ]),
  ].join('\n');
  fs.writeFileSync(path.join(dir, 'solewriter.toml'), toml);
  const bin = testkit();
  const rust = (instance) =>
    holder(
      spawn(bin, ['holder', '--config', path.join(dir, 'solewriter.toml'), '--target', target, '--instance', instance], {
        env: { ...process.env, SOLEWRITER_TEST_CLOCK_FILE: clockFile },
      }),
    );
  const node = (instance, extra = {}) =>
    holder(
      spawn(process.execPath, [
        path.join(__dirname, 'node_holder.js'),
        JSON.stringify({ dbPath, runtimeRoot, target, instance, leaseTtlMs: TTL_MS, channels: CHANNELS, clockFile, ...extra }),
      ]),
    );
  return { dir, dbPath, db, runtimeRoot, target, clockFile, setClock, rust, node, current: () => readProjection(runtimeRoot, target) };
}

test('a frozen holder of either language is fenced after a takeover by the other', { timeout: 120000 }, async () => {
  const { dbPath, db, target, setClock, rust, node, current } = environment();
  db.exec(`CREATE TABLE SummarizationJobs (id INTEGER PRIMARY KEY, body TEXT NOT NULL, created_at TEXT NOT NULL)`);
  const jobsSchema = db.prepare("SELECT sql FROM sqlite_master WHERE name = 'SummarizationJobs'").get().sql;
  // The host's own writer: one row per transaction, with its own busy timeout, until stopped.
  const jobs = spawn(process.execPath, [
    '-e',
    `const db = new (require(${JSON.stringify(require.resolve('better-sqlite3'))}))(${JSON.stringify(dbPath)}, { timeout: 5000 });
     const insert = db.prepare("INSERT INTO SummarizationJobs (body, created_at) VALUES (?, datetime('now'))");
     let n = 0, stop = false;
     process.stdin.on('data', () => { stop = true; });
     (function loop() { if (stop) { console.log(n); db.close(); process.exit(0); } db.transaction(() => insert.run('job ' + n))(); n++; setImmediate(loop); })();`,
  ]);
  children.push(jobs);
  const jobsDone = new Promise((resolve) => {
    let out = '';
    jobs.stdout.on('data', (d) => (out += d));
    jobs.stderr.on('data', (d) => process.stderr.write(d));
    jobs.on('exit', (code) => resolve({ code, written: Number(out.trim()) }));
  });

  const nodeA = node('node-a');
  const rustB = rust('rust-b');
  const rustC = rust('rust-c');
  const nodeD = node('node-d');

  // Round 1: a Node holder frozen past its expiry; a Rust holder takes over.
  assert.match(await nodeA.ask('acquire'), /^acquired 1 /);
  assert.match(await rustB.ask('acquire'), /^held 1 /);
  nodeA.child.kill('SIGSTOP');
  setClock(1000 + TTL_MS);
  assert.match(await rustB.ask('acquire'), /^acquired 2 /);
  assert.match(await rustB.ask('publish'), /^published 2 /);
  nodeA.child.kill('SIGCONT');
  assert.equal(await nodeA.ask('publish'), 'fenced superseded 2');
  assert.equal(current().fencingEpoch, 2, "current.json is the successor's");

  // Round 2: a Rust holder frozen past its expiry; a Node holder takes over.
  assert.match(await rustC.ask('acquire'), /^acquired 3 /);
  rustC.child.kill('SIGSTOP');
  setClock(1000 + 2 * TTL_MS);
  assert.match(await nodeD.ask('acquire'), /^acquired 4 /);
  assert.match(await nodeD.ask('publish'), /^published 4 /);
  rustC.child.kill('SIGCONT');
  assert.equal(await rustC.ask('publish'), 'fenced superseded 4');
  assert.equal(current().fencingEpoch, 4, "current.json is the successor's");

  // Contention: both languages race for a released target; exactly one is granted.
  const answers = await Promise.all([nodeA.ask('acquire'), rustB.ask('acquire')]);
  assert.equal(answers.filter((a) => a.startsWith('acquired 5 ')).length, 1, answers.join(' / '));
  assert.equal(answers.filter((a) => a.startsWith('held 5 ')).length, 1, answers.join(' / '));

  for (const h of [nodeA, rustB, rustC, nodeD]) await h.stop();
  jobs.stdin.end('stop\n');
  const { code, written } = await jobsDone;
  assert.equal(code, 0, 'the host writer never failed');
  assert.ok(written > 0, 'the host writer wrote');
  assert.equal(db.prepare('SELECT count(*) AS n FROM SummarizationJobs').get().n, written, 'every host row landed');
  assert.equal(db.prepare("SELECT sql FROM sqlite_master WHERE name = 'SummarizationJobs'").get().sql, jobsSchema);
  const row = db.prepare('SELECT fencing_epoch, state FROM HookProjectionLeases WHERE target_id = ?').get(target);
  assert.equal(row.fencing_epoch, 5);
  db.close();
});

test("a Rust holder's grant ended from Node is fenced and writes nothing", { timeout: 120000 }, async () => {
  const { db, runtimeRoot, target, clockFile, rust, node, current } = environment();
  const rustA = rust('rust-a');
  assert.match(await rustA.ask('acquire'), /^acquired 1 /);
  const operator = new ProjectionStore(db, {
    runtimeRoot,
    channels: CHANNELS,
    leaseTtlMs: TTL_MS,
    busyTimeoutMs: 5000,
    clock: () => Number(fs.readFileSync(clockFile, 'utf8')),
  });
  assert.equal(operator.endLease(target).ended.epoch, 1);
  assert.equal(await rustA.ask('publish'), 'fenced released');
  assert.throws(current, { code: 'NOT_PUBLISHED' });
  // A Node holder gets the next epoch.
  const nodeB = node('node-b');
  assert.match(await nodeB.ask('acquire'), /^acquired 2 /);
  for (const h of [rustA, nodeB]) await h.stop();
  db.close();
});

test("a Rust holder's grant cannot be forged from its lease row through Node: refused, nothing written, the holder publishes", { timeout: 120000 }, async () => {
  const { db, dbPath, runtimeRoot, target, rust, current } = environment();
  const operator = new ProjectionStore(db, { runtimeRoot, channels: CHANNELS, leaseTtlMs: TTL_MS, busyTimeoutMs: 5000, clock: () => 1000 });
  const rustA = rust('rust-a');
  assert.match(await rustA.ask('acquire'), /^acquired 1 /);
  // A reader of the table builds what it can: the row's fields with the stored hash as token.
  const reader = new Database(dbPath, { readonly: true });
  const row = reader.prepare('SELECT * FROM HookProjectionLeases WHERE target_id = ?').get(target);
  reader.close();
  const before = db.prepare('SELECT * FROM HookProjectionLeases').all();
  const hash = Buffer.from(row.holder_token_hash).toString('hex');
  const fields = { targetId: target, epoch: row.fencing_epoch, holder: row.holder_instance_digest, acquiredAt: row.acquired_at, expiresAt: row.expires_at };
  assert.throws(() => operator.publish({ ...fields, tokenHash: hash }), { code: 'INVALID_INPUT' });
  // A fresh Grant object for each attempt: a Grant is spent by its first use.
  const forgedGrant = () => Grant.fromSecret({ ...fields, token: hash });
  assert.throws(() => operator.publish(forgedGrant()), { code: 'FENCED', reason: 'token-mismatch' });
  assert.deepEqual(operator.release(forgedGrant()), { notHolder: { reason: 'token-mismatch' } });
  assert.deepEqual(db.prepare('SELECT * FROM HookProjectionLeases').all(), before, 'nothing written');
  assert.throws(current, { code: 'NOT_PUBLISHED' });
  assert.match(await rustA.ask('publish'), /^published 1 /);
  assert.equal(current().fencingEpoch, 1);
  await rustA.stop();
  db.close();
});

const STEPS = [
  'composed',
  'temp-written',
  'transaction-open',
  'revalidated',
  'deadline-checked',
  'renamed',
  'released',
  'unlocked',
  'directory-synced',
];
const INSIDE = ['transaction-open', 'revalidated', 'deadline-checked', 'renamed', 'released'];

test('a Node holder stalled outside its transaction never stops its successor, inside it cannot be taken over, and killed at any step loses nothing', { timeout: 120000 }, async () => {
  const { db, runtimeRoot, target, setClock, rust, node, current } = environment({ busyTimeoutMs: 300 });
  const successor = rust('rust-s');
  let now = 1000;
  let epoch = 0;
  for (const step of STEPS) {
    const z = node('node-z', { stallAt: step });
    assert.equal(await z.ask('acquire'), `acquired ${epoch + 1} ${now + TTL_MS}`, step);
    assert.equal(await z.ask('publish'), `stalled ${step}`);
    now += TTL_MS;
    setClock(now);
    const inside = INSIDE.includes(step);
    if (inside) {
      // Past its expiry, but inside its transaction (the target lock and SQLite's write lock
      // held): no takeover.
      assert.equal(await successor.ask('acquire'), 'busy', `${step}: taken over inside the transaction`);
    } else {
      // Outside its transaction it holds no lock: the successor is granted and publishes while
      // the holder is still stalled.
      assert.equal(await successor.ask('acquire'), `acquired ${epoch + 2} ${now + TTL_MS}`, step);
      assert.equal((await successor.ask('publish')).split(' ')[0], 'published', step);
    }
    const exited = new Promise((resolve) => z.child.on('exit', resolve));
    z.child.kill('SIGKILL');
    await exited;
    // The store is sound; current.json is absent or a complete document.
    assert.equal(db.pragma('integrity_check', { simple: true }), 'ok');
    try {
      assert.ok(current().fencingEpoch <= epoch + 2, step);
    } catch (e) {
      assert.equal(e.code, 'NOT_PUBLISHED', `${step}: ${e.message}`);
    }
    if (inside) {
      // The next holder takes over and publishes.
      assert.equal(await successor.ask('acquire'), `acquired ${epoch + 2} ${now + TTL_MS}`, step);
      assert.equal((await successor.ask('publish')).split(' ')[0], 'published', step);
    }
    epoch += 2;
    assert.equal(current().fencingEpoch, epoch, step);
    const leftovers = fs.readdirSync(path.join(runtimeRoot, 'hook-projections', target)).filter((f) => f !== 'current.json');
    assert.deepEqual(leftovers, [], `${step}: temp files left`);
  }
  await successor.stop();
  db.close();
});

test('an asynchronous publication waits for a target lock another process holds on a timer: the event loop turns meanwhile', { timeout: 60000 }, async () => {
  const { db, runtimeRoot, target, node } = environment();
  // A holder stalled inside its transaction holds the target lock (and SQLite's write lock).
  const z = node('node-z', { stallAt: 'revalidated' });
  assert.equal((await z.ask('acquire')).split(' ')[0], 'acquired');
  assert.equal(await z.ask('publish'), 'stalled revalidated');
  // A store of this process whose clock is past z's expiry: its one-shot takes over, so it
  // needs the target lock z holds, and waits for it up to its busy timeout.
  const store = new ProjectionStore(db, { runtimeRoot, channels: CHANNELS, leaseTtlMs: TTL_MS, busyTimeoutMs: 300, clock: () => 1000 + 2 * TTL_MS });
  let ticks = 0;
  const ticking = setInterval(() => {
    ticks += 1;
  }, 1);
  const started = Date.now();
  await assert.rejects(store.publishNowAsync(target, 'holder-2'), (e) => e.code === 'BUSY' && /target lock/.test(e.message));
  const waited = Date.now() - started;
  clearInterval(ticking);
  // Blocked in the turn, the interval could not have run at all while the lock was waited for.
  assert.ok(ticks >= 30, `the event loop turned ${ticks} times in ${waited} ms of waiting`);
  const exited = new Promise((resolve) => z.child.on('exit', resolve));
  z.child.kill('SIGKILL');
  await exited;
  // With the lock free, the same call takes over and publishes.
  const now = await store.publishNowAsync(target, 'holder-2');
  assert.equal(now.published.epoch, 2);
});
