'use strict';
/** Shared fixtures of the Node tests: a host database in WAL mode, the two channels of the Rust
 * fixtures (`verification/src/fixtures.rs`), tuples, submissions, a hand-moved clock, a connection with
 * planted faults and a store busy at its n-th `BEGIN`. */

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFileSync, spawnSync } = require('node:child_process');
const Database = require('better-sqlite3');
const { initialize, ProjectionStore } = require('..');

const TTL_MS = 100;
const START = 1000;
const CHANNELS = [
  { name: 'computed-route', owner: 'router', envelopeSchema: 'computed-route.v1', maxEnvelopeBytes: 4096 },
  { name: 'lifecycle-frontier', owner: 'frontier', envelopeSchema: 'lifecycle-frontier.v1', maxEnvelopeBytes: 4096 },
];

/** The `n`-th attested tuple (as `fixtures::tuple`). */
function tuple(n) {
  return {
    schemaVersion: '1',
    capability: 'hook-projection',
    agentId: `agent-${n}`,
    harnessType: 'claude-code',
    instanceKeyDigest: 'inst',
    workspaceKeyDigest: 'ws',
    projectionKind: 'live-lane',
  };
}

/** A submission on channel `c` (as `fixtures::submission`). */
function submission(targetId, c, watermark, body, capturedAt = START) {
  const { name, envelopeSchema: schema } = CHANNELS[c];
  return {
    targetId,
    channel: name,
    sourceWatermark: watermark,
    envelopeJson: `{"schema":"${schema}","notAuthority":true,"body":"${body}"}`,
    capturedAt,
    expiresAt: capturedAt + 10 * TTL_MS,
  };
}

/** Scratch directories of this process, removed when it exits. */
const scratches = [];
process.on('exit', () => {
  for (const dir of scratches) fs.rmSync(dir, { recursive: true, force: true });
});

/** A scratch directory on RAM when the system has one. */
function scratch() {
  const base = fs.existsSync('/dev/shm') ? '/dev/shm' : os.tmpdir();
  const dir = fs.mkdtempSync(path.join(base, 'solewriter-node-'));
  scratches.push(dir);
  return dir;
}

/** A host database in WAL mode with the two tables, a runtime root, a clock and a store. */
function setup({ ttlMs = TTL_MS, dir = scratch(), timeout = 5000 } = {}) {
  const dbPath = path.join(dir, 'host.sqlite');
  const db = new Database(dbPath, { timeout });
  db.pragma('journal_mode = WAL');
  initialize(db);
  const runtimeRoot = path.join(dir, 'runtime');
  fs.mkdirSync(runtimeRoot, { recursive: true });
  const clock = { now: START };
  const store = new ProjectionStore(db, {
    runtimeRoot,
    channels: CHANNELS,
    leaseTtlMs: ttlMs,
    busyTimeoutMs: 5000,
    clock: () => clock.now,
  });
  return { dir, dbPath, db, runtimeRoot, clock, store };
}

/**
 * `db` seen through the structural `Database` of `index.d.ts` (what solewriter uses of one), with
 * faults a test plants where the host's connection answers: `exec(sql, real)` answers for
 * `db.exec(sql)` and `statement(sql, method, args, real)` for a prepared statement's `get`,
 * `all` or `run` — each calls `real()` for better-sqlite3's own answer, or answers otherwise.
 */
function faulty(db, { exec = (sql, real) => real(), statement = (sql, method, args, real) => real() } = {}) {
  return {
    name: db.name,
    get open() {
      return db.open;
    },
    get inTransaction() {
      return db.inTransaction;
    },
    pragma: (...args) => db.pragma(...args),
    transaction: (fn) => db.transaction(fn),
    exec: (sql) => exec(sql, () => db.exec(sql)),
    prepare(sql) {
      const prepared = db.prepare(sql);
      const method = (name) => (...args) => statement(sql, name, args, () => prepared[name](...args));
      return { get: method('get'), all: method('all'), run: method('run') };
    },
  };
}

/**
 * A store on `db` whose connection's write lock another connection (`blocker`) takes just
 * before its `at`-th `BEGIN` and lets go just before the next `BEGIN`: the transaction of that
 * `BEGIN` cannot start (BUSY), and the one after it (the release of the unused grant) finds the
 * store free — the shape of the Rust adapter's tests of the same rule (`fencing.rs`). `begins()`
 * counts the `BEGIN`s.
 */
function busyAtBegin(db, config, blocker, at) {
  let begins = 0;
  const exec = (sql, real) => {
    if (sql === 'BEGIN IMMEDIATE') {
      begins += 1;
      if (begins === at) blocker.exec('BEGIN IMMEDIATE');
      if (begins === at + 1) blocker.exec('ROLLBACK');
    }
    return real();
  };
  return { store: new ProjectionStore(faulty(db, { exec }), config), begins: () => begins };
}

/** A binary of the CLI package (`target/debug/<name>`), built with the package if needed. */
function cliBinary(name) {
  const root = path.join(__dirname, '..', '..', '..');
  execFileSync('cargo', ['build', '-q', '-p', 'solewriter-cli'], { cwd: root, stdio: 'inherit' });
  const target = process.env.CARGO_TARGET_DIR || path.join(root, 'target');
  return path.join(target, 'debug', name);
}

/** The shipped CLI binary (`target/debug/solewriter`), built if needed. */
function cli() {
  return cliBinary('solewriter');
}

/**
 * The CLI's test binary (`target/debug/solewriter-testkit`, built with the package): the same
 * commands with the test seams, e.g. the broker clock read from `SOLEWRITER_TEST_CLOCK_FILE`.
 */
function testkit() {
  return cliBinary('solewriter-testkit');
}

/** The shared syscall-trace helper of the fsync and lock tests. */
const TRACE = path.join(__dirname, '..', '..', '..', 'scripts', 'syscall_trace.py');

/**
 * Runs the host script `host` (a file of this directory) with `hostArgs` under the syscall-trace
 * helper with `traceArgs` (its `--out` is `out`): the child process's result.
 */
function traced(out, traceArgs, host, hostArgs) {
  return spawnSync('python3', [TRACE, '--out', out, ...traceArgs, '--', process.execPath, path.join(__dirname, host), ...hostArgs], {
    encoding: 'utf8',
  });
}

/**
 * What a traced host starts from: a WAL database in `dir` with solewriter's tables, a runtime
 * root, and a descriptor of /dev/null to write its `@@mark` lines to (one write each).
 */
function hostDatabase(dir) {
  const db = new Database(path.join(dir, 'host.sqlite'), { timeout: 5000 });
  db.pragma('journal_mode = WAL');
  initialize(db);
  const runtimeRoot = path.join(dir, 'runtime');
  fs.mkdirSync(runtimeRoot);
  return { db, runtimeRoot, marks: fs.openSync('/dev/null', 'w') };
}

module.exports = { TTL_MS, START, CHANNELS, tuple, submission, scratch, setup, faulty, busyAtBegin, cli, testkit, traced, hostDatabase };
