'use strict';
/**
 * The event ledger from Node (seed 003): `Ledger` over a real Git repository. The uncontended
 * demand is the writer and persists; a second one needs nothing; a demand that needs no fact
 * touches neither Git nor the lock (a repository that does not exist, a malformed snapshot and
 * a live writer all beside it); status reports absent, reusable and rejected snapshots. And
 * with real processes: a Node writer holding the project lock while a Node demand answers
 * without waiting and discards only its own additions; that holder killed with SIGKILL and
 * recovered by the next build.
 */

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const readline = require('node:readline');
const { execFileSync, spawn } = require('node:child_process');
const { Ledger } = require('..');
const { scratch } = require('./helpers');

/** No global or system configuration, a fixed author, committer and date. */
const HERMETIC = {
  GIT_CONFIG_GLOBAL: '/dev/null',
  GIT_CONFIG_NOSYSTEM: '1',
  GIT_AUTHOR_NAME: 'A',
  GIT_AUTHOR_EMAIL: 'a@example.invalid',
  GIT_COMMITTER_NAME: 'A',
  GIT_COMMITTER_EMAIL: 'a@example.invalid',
  GIT_AUTHOR_DATE: '1700000000 +0000',
  GIT_COMMITTER_DATE: '1700000000 +0000',
};
const SUBJECTS = ['change 2', 'change 1', 'change 0'];

function git(repo, ...args) {
  return execFileSync('git', ['-C', repo, ...args], { env: { ...process.env, ...HERMETIC }, encoding: 'utf8' });
}

/** A project directory (not yet made) and a repository of three commits of one file. */
function fixture() {
  const root = scratch();
  const repo = path.join(root, 'repo');
  fs.mkdirSync(repo);
  git(repo, 'init', '-q', '-b', 'main');
  ['a\nb\n', 'a\nB\nc\n', 'z\na\nB\nc\n'].forEach((content, i) => {
    fs.writeFileSync(path.join(repo, 'f.txt'), content);
    git(repo, 'add', 'f.txt');
    git(repo, 'commit', '-q', '-m', `change ${i}`);
  });
  const dir = path.join(root, 'project');
  return { root, repo, dir, ledger: new Ledger({ dir, repo, gitEnv: HERMETIC }) };
}

const subjects = (read) => read.history.map((entry) => entry.commit.subject);

/** A Node process holding the project lock of `dir` until a line on its stdin. */
async function nodeHolder(dir) {
  const child = spawn(process.execPath, [path.join(__dirname, 'lock_holder_node.js'), dir]);
  child.stderr.on('data', (d) => process.stderr.write(d));
  const lines = readline.createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const first = (await lines.next()).value;
  const nonce = /^acquired ([0-9a-f]{64})$/.exec(first)?.[1];
  assert.ok(nonce, `the holder said: ${first}`);
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  return { child, nonce, lines, exited };
}

test('an uncontended demand is the writer and persists; a second needs nothing', () => {
  const { ledger, repo } = fixture();
  const head = ledger.resolve('HEAD');
  assert.equal(head, git(repo, 'rev-parse', 'HEAD').trim());
  const first = ledger.demand({ heads: [head], hunks: true });
  assert.deepEqual(subjects(first), SUBJECTS);
  assert.deepEqual(first.persisted, { state: 'replaced', added: 6 });
  const newest = first.history[0];
  assert.equal(newest.commit.commit, head);
  assert.equal(newest.commit.author_time, 1700000000);
  assert.equal(newest.hunks.files[0].path, 'f.txt');
  const again = ledger.demand({ heads: [head], hunks: true });
  assert.deepEqual(again.history, first.history);
  assert.deepEqual(again.persisted, { state: 'unchanged' });
  const one = ledger.demand({ heads: [head], limit: 1 });
  assert.deepEqual(subjects(one), ['change 2']);
  assert.equal(one.history[0].hunks, undefined, 'hunks only when asked');
  const status = ledger.status();
  assert.equal(status.snapshot.state, 'reusable');
  assert.equal(status.snapshot.facts, 6);
  assert.equal(status.lock.kernel, 'free');
  assert.equal(status.lock.record, null);
});

test('demandAsync and buildAsync answer as demand and build do, off the event loop', async () => {
  const { ledger, dir, root } = fixture();
  const head = ledger.resolve('HEAD');
  // A setImmediate chain ticks once per turn of the event loop, however long a turn takes: a
  // call that ran synchronously (resolving in microtasks) would leave it at 0.
  let ticks = 0;
  let running = true;
  const tick = () => {
    ticks++;
    if (running) setImmediate(tick);
  };
  setImmediate(tick);
  try {
    const first = await ledger.demandAsync({ heads: [head], hunks: true });
    assert.deepEqual(subjects(first), SUBJECTS);
    assert.deepEqual(first.persisted, { state: 'replaced', added: 6 });
    assert.deepEqual(await ledger.demandAsync({ heads: [head], hunks: true }), { ...first, persisted: { state: 'unchanged' } });
    assert.deepEqual((await ledger.buildAsync({ heads: [head], hunks: true, wait: 'noWait' })).persisted, { state: 'unchanged' });
  } finally {
    running = false;
  }
  assert.ok(ticks > 0, 'the event loop ran while git did');
  await assert.rejects(ledger.buildAsync({ heads: [head] }), { code: 'INVALID_INPUT' });
  await assert.rejects(ledger.demandAsync(null), { code: 'INVALID_INPUT' });
  const elsewhere = new Ledger({ dir, repo: path.join(root, 'missing'), gitEnv: HERMETIC });
  await assert.rejects(elsewhere.demandAsync({ heads: [head] }), { code: 'SOURCE' });
});

test('a build is the sole writer; bad queries and git failures are loud', () => {
  const { ledger, dir, root } = fixture();
  const head = ledger.resolve('HEAD');
  assert.deepEqual(ledger.build({ heads: [head], wait: 'noWait' }).persisted, { state: 'replaced', added: 3 });
  assert.deepEqual(ledger.build({ heads: [head], hunks: true, wait: { timeoutMs: 1000 } }).persisted, {
    state: 'replaced',
    added: 3,
  });
  assert.throws(() => ledger.build({ heads: [head] }), { code: 'INVALID_INPUT' }, 'the wait has no default');
  for (const query of [{}, { heads: ['HEAD'] }, { heads: [head], limit: 0 }, { heads: [head], hunks: 'yes' }]) {
    assert.throws(() => ledger.demand(query), { code: 'INVALID_INPUT' }, JSON.stringify(query));
  }
  assert.throws(() => ledger.resolve('no-such-branch'), { code: 'SOURCE' });
  const elsewhere = new Ledger({ dir, repo: path.join(root, 'missing'), gitEnv: HERMETIC });
  assert.throws(() => elsewhere.demand({ heads: [head] }), { code: 'SOURCE' });
  assert.throws(() => new Ledger({ dir, repo: root, gitEnv: { GIT_DIR: 7 } }), { code: 'INVALID_INPUT' });
});

test('status: absent, then a rejected snapshot, without git and without writing', () => {
  const { root, dir } = fixture();
  const ledger = new Ledger({ dir, repo: path.join(root, 'not-a-repository') });
  assert.deepEqual(ledger.status(), { snapshot: { path: path.join(dir, 'ledger.snapshot'), state: 'absent' }, lock: null });
  fs.mkdirSync(dir, { mode: 0o700 });
  fs.writeFileSync(path.join(dir, 'ledger.snapshot'), 'torn');
  const status = ledger.status();
  assert.equal(status.snapshot.state, 'rejected');
  assert.match(status.snapshot.reason, /header/);
  assert.equal(status.lock.kernel, 'no-file');
  assert.deepEqual(fs.readdirSync(dir), ['ledger.snapshot'], 'nothing was written');
});

test('processes: a Node demand beside a Node writer holding the project lock answers at once; the holder killed with SIGKILL is recovered', { timeout: 120000 }, async () => {
  const { ledger, dir } = fixture();
  const head = ledger.resolve('HEAD');
  const holder = await nodeHolder(dir);
  try {
    // Seed 003: a replay that needs no fact never consults the writer's lock, nor Git, nor a
    // malformed snapshot (a ledger over no repository at all answers it).
    fs.writeFileSync(path.join(dir, 'ledger.snapshot'), 'torn');
    const blind = new Ledger({ dir, repo: path.join(dir, 'no-repository') });
    assert.deepEqual(blind.demand({ heads: [] }), { history: [], persisted: { state: 'unchanged' } });
    assert.equal(fs.readFileSync(path.join(dir, 'ledger.snapshot'), 'utf8'), 'torn');
    // A demand that needs facts: derived from Git, answered at once, its additions discarded
    // (it would hang here, and the test time out, if it waited for the holder).
    const beside = ledger.demand({ heads: [head], hunks: true });
    assert.deepEqual(subjects(beside), SUBJECTS);
    assert.equal(beside.persisted.state, 'discarded');
    assert.equal(beside.persisted.added, 6);
    assert.equal(beside.persisted.writer.pid, holder.child.pid);
    assert.equal(holder.child.exitCode, null, 'the writer still holds');
    assert.throws(() => ledger.build({ heads: [head], wait: 'noWait' }), (e) => e.code === 'BUSY' && e.owner.pid === holder.child.pid);
    assert.equal(fs.readFileSync(path.join(dir, 'ledger.snapshot'), 'utf8'), 'torn', 'only the writer replaces');
    holder.child.kill('SIGKILL');
    assert.deepEqual(await holder.exited, { code: null, signal: 'SIGKILL' });
    const dead = ledger.status().lock;
    assert.equal(dead.record.nonce, holder.nonce);
    assert.deepEqual(dead.ownership, { state: 'dead', reason: 'kernel-lock-free' });
    // The next acquisition recovers the dead owner's lock and rebuilds the torn snapshot.
    assert.deepEqual(ledger.build({ heads: [head], hunks: true, wait: 'noWait' }).persisted, { state: 'replaced', added: 6 });
    const after = ledger.status();
    assert.equal(after.snapshot.state, 'reusable');
    assert.equal(after.lock.record, null, 'released');
  } finally {
    if (holder.child.exitCode === null && holder.child.signalCode === null) holder.child.kill('SIGKILL');
  }
});
