'use strict';
/**
 * The project lock from Node (`ProjectLock`, the Rust `ProjectLock` in the addon): acquire and
 * release; a second acquisition is BUSY and names the owner; a lock held by a Rust process
 * (the CLI's hidden `lock-holder`) is BUSY from Node, and once that process is killed with
 * SIGKILL its dead record is recovered; an unknown owner (a record of another boot) fails
 * loudly and is cleared only with its nonce; a foreign lock file is left alone; the status
 * shapes; the wait has no default.
 */

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const readline = require('node:readline');
const { spawn } = require('node:child_process');
const { ProjectLock, ProjectLockGuard } = require('..');
const { scratch, cli } = require('./helpers');

const HEX64 = /^[0-9a-f]{64}$/;

/** A fresh project directory (its parent exists; the lock creates it). */
function projectDir() {
  return path.join(scratch(), 'project');
}

/** This process's identity as the lock records it (the start token is not compared). */
function me() {
  return {
    pid: process.pid,
    pidNamespace: Number(/\[(\d+)\]/.exec(fs.readlinkSync('/proc/self/ns/pid'))[1]),
    bootId: fs.readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim(),
  };
}

function sameProcess(owner, expected) {
  assert.equal(owner.pid, expected.pid);
  assert.equal(owner.pidNamespace, expected.pidNamespace);
  assert.equal(owner.bootId, expected.bootId);
  assert.equal(typeof owner.startToken, 'number');
}

test('acquire, verify and release; the status before, during and after', () => {
  const dir = projectDir();
  const lock = new ProjectLock(dir);
  assert.throws(() => lock.status(), { code: 'NO_DIRECTORY', dir });
  const guard = lock.acquire({ wait: 'noWait' });
  assert.ok(guard instanceof ProjectLockGuard);
  sameProcess(guard.record.owner, me());
  assert.equal(guard.record.guard, 'kernel');
  assert.match(guard.record.nonce, HEX64);
  assert.equal(typeof guard.record.acquiredAt, 'number');
  guard.verify();
  assert.deepEqual(lock.status(), {
    lock: path.join(dir, 'project.lock'),
    kernel: 'held',
    record: guard.record,
    ownership: { state: 'alive' },
  });
  assert.deepEqual(guard.release(), { removed: true });
  assert.throws(() => guard.release(), { code: 'INVALID_INPUT' });
  assert.throws(() => guard.verify(), { code: 'INVALID_INPUT' });
  assert.deepEqual(lock.status(), { lock: path.join(dir, 'project.lock'), kernel: 'free', record: null, ownership: null });
  // Taken again after the release.
  lock.acquire({ wait: { timeoutMs: 0 } }).release();
});

test('a lock never used has no kernel lock file; record-only mode does not use one', () => {
  const dir = projectDir();
  fs.mkdirSync(dir, { mode: 0o700 });
  const status = { lock: path.join(dir, 'project.lock'), record: null, ownership: null };
  assert.deepEqual(new ProjectLock(dir).status(), { ...status, kernel: 'no-file' });
  const recordOnly = new ProjectLock(dir, { recordOnly: true });
  assert.deepEqual(recordOnly.status(), { ...status, kernel: 'not-used' });
  const guard = recordOnly.acquire({ wait: 'noWait' });
  assert.equal(guard.record.guard, 'record-only');
  assert.deepEqual(recordOnly.status().ownership, { state: 'alive' });
  assert.deepEqual(guard.release(), { removed: true });
});

test('a second acquisition is BUSY and names the owner, also after a bounded wait', () => {
  const dir = projectDir();
  const guard = new ProjectLock(dir).acquire({ wait: 'noWait' });
  for (const wait of ['noWait', { timeoutMs: 20 }]) {
    assert.throws(
      () => new ProjectLock(dir).acquire({ wait }),
      (e) => {
        assert.equal(e.code, 'BUSY');
        assert.equal(e.lock, path.join(dir, 'project.lock'));
        assert.deepEqual(e.owner, guard.record.owner);
        return true;
      },
    );
  }
  guard.release();
});

test('the wait has no default: a missing or malformed wait is INVALID_INPUT and takes nothing', () => {
  const dir = projectDir();
  const lock = new ProjectLock(dir);
  for (const options of [undefined, {}, { wait: 'forever' }, { wait: {} }, { wait: { timeoutMs: -1 } },
    { wait: { timeoutMs: 1.5 } }, { wait: { timeoutMs: Infinity } }, { wait: { timeoutMs: 1, extra: 1 } }]) {
    assert.throws(() => lock.acquire(options), { code: 'INVALID_INPUT' }, JSON.stringify(options));
  }
  assert.equal(fs.existsSync(dir), false, 'nothing was created');
});

/** The CLI's `lock-holder DIR`: answers `acquired <nonce>` and holds until killed. */
function rustHolder(dir) {
  const child = spawn(cli(), ['lock-holder', dir]);
  child.stderr.on('data', (d) => process.stderr.write(d));
  const exited = new Promise((resolve) => child.on('exit', resolve));
  const first = new Promise((resolve) => readline.createInterface({ input: child.stdout }).once('line', resolve));
  return { child, exited, first };
}

test('a lock held by a Rust process is BUSY from Node, and recovered once it is killed', { timeout: 120000 }, async () => {
  const dir = projectDir();
  const rust = rustHolder(dir);
  try {
    const line = await rust.first;
    const nonce = /^acquired ([0-9a-f]{64})$/.exec(line)?.[1];
    assert.ok(nonce, line);
    const lock = new ProjectLock(dir);
    assert.throws(
      () => lock.acquire({ wait: 'noWait' }),
      (e) => e.code === 'BUSY' && e.owner.pid === rust.child.pid,
    );
    const held = lock.status();
    assert.equal(held.kernel, 'held');
    assert.equal(held.record.nonce, nonce);
    assert.equal(held.record.owner.pid, rust.child.pid);
    assert.deepEqual(held.ownership, { state: 'alive' });
    // A clear of a running owner's lock is refused, whatever the nonce.
    assert.throws(() => lock.clear(nonce), { code: 'CLEAR_REFUSED', refused: 'held' });
    rust.child.kill('SIGKILL');
    await rust.exited;
    // Its kernel lock died with it; its record is stale.
    const dead = lock.status();
    assert.equal(dead.kernel, 'free');
    assert.equal(dead.record.nonce, nonce);
    assert.deepEqual(dead.ownership, { state: 'dead', reason: 'kernel-lock-free' });
    assert.throws(() => lock.clear(nonce), { code: 'CLEAR_REFUSED', refused: 'known' });
    const guard = lock.acquire({ wait: 'noWait' });
    assert.notEqual(guard.record.nonce, nonce);
    sameProcess(guard.record.owner, me());
    assert.deepEqual(guard.release(), { removed: true });
  } finally {
    if (rust.child.exitCode === null && rust.child.signalCode === null) rust.child.kill('SIGKILL');
  }
});

test('an owner unknown from here fails loudly and is cleared only with its nonce', () => {
  const dir = projectDir();
  fs.mkdirSync(dir, { mode: 0o700 });
  const nonce = 'ab'.repeat(32);
  const { pidNamespace } = me();
  // A record-only record of another boot: nothing here can tell whether its owner lives.
  fs.writeFileSync(
    path.join(dir, 'project.lock'),
    `solewriter-project-lock v2\npid 1\nstart 1\nboot 0dd-b00f\npidns ${pidNamespace}\nguard record-only\nnonce ${nonce}\nacquired_ms 5\n`,
  );
  const lock = new ProjectLock(dir);
  assert.throws(
    () => lock.acquire({ wait: 'noWait' }),
    (e) => e.code === 'UNKNOWN_OWNER' && e.reason === 'other-boot' && e.owner.bootId === '0dd-b00f',
  );
  assert.deepEqual(lock.status().ownership.state, 'unknown');
  assert.equal(lock.status().ownership.reason, 'other-boot');
  assert.throws(() => lock.clear('cd'.repeat(32)), (e) => {
    assert.equal(e.code, 'CLEAR_REFUSED');
    assert.equal(e.refused, 'nonce-mismatch');
    assert.equal(e.record.nonce, nonce);
    return true;
  });
  assert.throws(() => lock.clear('not hex'), { code: 'INVALID_INPUT' });
  assert.ok(fs.existsSync(path.join(dir, 'project.lock')), 'the refused clears removed nothing');
  const cleared = lock.clear(nonce);
  assert.equal(cleared.removed.nonce, nonce);
  assert.deepEqual(cleared.removed.owner, { pid: 1, startToken: 1, bootId: '0dd-b00f', pidNamespace });
  assert.deepEqual(lock.clear(nonce), { noLock: true });
  lock.acquire({ wait: 'noWait' }).release();
});

test('a lock file that is not a lock record is MALFORMED_LOCK and left alone', () => {
  const dir = projectDir();
  fs.mkdirSync(dir, { mode: 0o700 });
  const file = path.join(dir, 'project.lock');
  fs.writeFileSync(file, 'someone else\n');
  assert.throws(() => new ProjectLock(dir).acquire({ wait: 'noWait' }), { code: 'MALFORMED_LOCK', lock: file });
  assert.equal(fs.readFileSync(file, 'utf8'), 'someone else\n');
});

test('a guard whose record was replaced has lost the lock', () => {
  const dir = projectDir();
  const guard = new ProjectLock(dir).acquire({ wait: 'noWait' });
  const file = path.join(dir, 'project.lock');
  const text = fs.readFileSync(file, 'utf8').replace(guard.record.nonce, 'ef'.repeat(32));
  fs.writeFileSync(file, text);
  assert.throws(() => guard.verify(), { code: 'LOCK_LOST' });
  const released = guard.release();
  assert.equal(released.notHolder.found.nonce, 'ef'.repeat(32), 'a lock it does not carry is not removed');
  assert.ok(fs.existsSync(file));
});

test('an unsafe directory is refused', () => {
  const dir = projectDir();
  fs.mkdirSync(dir, { mode: 0o700 });
  fs.chmodSync(dir, 0o777);
  assert.throws(() => new ProjectLock(dir).acquire({ wait: 'noWait' }), { code: 'UNSAFE_LOCK_DIR', dir });
});

test('both entry points export the project lock', async () => {
  const esm = await import('../index.mjs');
  assert.equal(esm.ProjectLock, ProjectLock);
  assert.equal(esm.ProjectLockGuard, ProjectLockGuard);
  assert.equal(esm.default.ProjectLock, ProjectLock);
});
