'use strict';
/**
 * Where a store publishes and what it takes to get there: the two roots of a store's
 * configuration (`runtimeRoot`, `hookProjectionRoot`) and their refusals, the system clock of a
 * store given none, the Memory Core writer's `fs` and `clock` checks, and `solewriter/testing`'s
 * `testStore` (its directory, its database, its cleanup on every path).
 */

const { describe, it } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const Database = require('better-sqlite3');
const { ProjectionStore, initialize } = require('solewriter');
const { makeHookProjectionWriter } = require('solewriter/memory-core');
const { testStore } = require('solewriter/testing');
const { scratch, tuple, submission, CHANNELS, TTL_MS } = require('./helpers');

const refused = (pattern) => (e) => {
  assert.equal(e.code, 'INVALID_CONFIG', e.message);
  assert.match(e.message, pattern);
  return true;
};

/** Runs `body` on a fresh test store whose tables are made, then removes it. */
function withBed(body) {
  const bed = testStore(Database);
  try {
    initialize(bed.db);
    body(bed);
  } finally {
    bed.close();
  }
}

describe('a store\'s root', () => {
  const base = { channels: CHANNELS, leaseTtlMs: TTL_MS, busyTimeoutMs: 1_000 };

  it('one of the two is required, never both, never empty', () =>
    withBed((bed) => {
      const make = (roots) => () => new ProjectionStore(bed.db, { ...base, ...roots });
      assert.throws(make({}), refused(/`runtimeRoot` is missing \(or give `hookProjectionRoot`\)/));
      assert.throws(make({ runtimeRoot: bed.dir, hookProjectionRoot: bed.hookProjectionRoot }), refused(/give `runtimeRoot` or `hookProjectionRoot`, not both/));
      assert.throws(make({ hookProjectionRoot: '' }), refused(/`hookProjectionRoot` is missing \(an empty path\)/));
      assert.throws(make({ hookProjectionRoot: '/' }), refused(/`hookProjectionRoot`: "\/" names no directory below another/));
    }));

  it('a store makes no directory: a projection root below a missing one, or a runtime root not there, is refused', () =>
    withBed((bed) => {
      const absent = path.join(bed.dir, 'absent');
      assert.throws(
        () => new ProjectionStore(bed.db, { ...base, hookProjectionRoot: path.join(absent, 'projections') }),
        refused(/`hookProjectionRoot` .*absent cannot be read \(ENOENT\)/),
      );
      assert.throws(() => new ProjectionStore(bed.db, { ...base, runtimeRoot: absent }), refused(/`runtimeRoot` .*absent cannot be read \(ENOENT\)/));
      assert.equal(fs.existsSync(absent), false);
      const file = path.join(bed.dir, 'a-file');
      fs.writeFileSync(file, '');
      assert.throws(() => new ProjectionStore(bed.db, { ...base, hookProjectionRoot: file }), refused(/`hookProjectionRoot` .*a-file is not a directory/));
    }));

  it('a projection root of any name holds <targetId>/current.json and the lock; a store without a clock publishes on the system clock', () =>
    withBed((bed) => {
      const root = path.join(bed.dir, 'any-name');
      const store = new ProjectionStore(bed.db, { ...base, hookProjectionRoot: root });
      const target = store.admitTarget(tuple(0));
      store.submit('router', submission(target, 0, 10, 'ten'));
      const before = Date.now();
      const { published } = store.publishNow(target, 'holder-1');
      assert.equal(published.path, path.join(root, target, 'current.json'));
      assert.ok(published.publishedAt >= before && published.publishedAt <= Date.now(), 'the system clock');
      assert.equal(store.readProjection(target).fencingEpoch, published.epoch);
      assert.deepEqual(fs.readdirSync(root).sort(), [target, `${target}.lock`].sort());
      assert.equal(fs.statSync(root).mode & 0o777, 0o700);
      assert.equal(fs.existsSync(path.join(bed.dir, 'hook-projections')), false);
    }));
});

describe('the Memory Core writer\'s fs and clock', () => {
  const bed = { hookProjectionRoot: path.join(scratch(), 'hook-projections') };
  const config = { hookProjectionRoot: bed.hookProjectionRoot, hookProjectionLeaseTtlMs: TTL_MS, hookProjectionBusyTimeoutMs: 1_000, hookProjectionChannels: [] };
  const make = (more) => () => makeHookProjectionWriter({ getDb: () => null, config, ...more });
  const FS_FUNCTIONS = ['mkdirSync', 'writeFileSync', 'renameSync', 'openSync', 'fsyncSync', 'closeSync', 'unlinkSync', 'readdirSync'];

  it('an fs with any file function not Node\'s own, or no object, is refused; Node\'s functions taken', () => {
    const nodes = Object.fromEntries(FS_FUNCTIONS.map((name) => [name, fs[name]]));
    assert.equal(typeof make({ fs: nodes })().publish, 'function');
    for (const name of FS_FUNCTIONS) {
      assert.throws(make({ fs: { ...nodes, [name]: () => {} } }), refused(/fs must be Node's own node:fs.*held directory handles/s), name);
    }
    for (const bad of [null, 'node:fs', Object.assign(() => {}, nodes), 0]) {
      assert.throws(make({ fs: bad }), refused(/fs must be Node's own node:fs/), String(bad));
    }
  });

  it('a clock that is not a function is the writer\'s TypeError', () => {
    assert.throws(make({ clock: 1_800_000_000_000 }), (e) => e instanceof TypeError && e.message === '[hookProjectionWriter] clock must be a function () => epochMs');
  });
});

describe('testStore', () => {
  it('a private directory with a WAL database as the Memory Core opens its store; close is idempotent and removes it', () => {
    const bed = testStore(Database, { prefix: 'solewriter-roots-' });
    assert.match(path.basename(bed.dir), /^solewriter-roots-/);
    assert.equal(fs.statSync(bed.dir).mode & 0o777, 0o700);
    assert.equal(bed.dbPath, path.join(bed.dir, 'store.sqlite'));
    assert.equal(bed.runtimeRoot, bed.dir);
    assert.equal(bed.hookProjectionRoot, path.join(bed.dir, 'hook-projections'));
    assert.equal(bed.db.pragma('journal_mode', { simple: true }), 'wal');
    assert.equal(bed.db.pragma('busy_timeout', { simple: true }), 5000);
    assert.equal(bed.db.pragma('foreign_keys', { simple: true }), 1);
    bed.close();
    assert.equal(bed.db.open, false);
    assert.equal(fs.existsSync(bed.dir), false);
    bed.close();
  });

  it('no constructor: a TypeError saying what to pass; a database that fails to open leaves no directory', () => {
    assert.throws(() => testStore(), (e) => e instanceof TypeError && /pass better-sqlite3's Database constructor/.test(e.message));
    let dir;
    class Failing {
      constructor(file) {
        dir = path.dirname(file);
        throw new Error('cannot open');
      }
    }
    assert.throws(() => testStore(Failing), /cannot open/);
    assert.equal(fs.existsSync(dir), false);
    let opened;
    class FailingPragma extends Database {
      constructor(file) {
        super(file);
        opened = this;
        dir = path.dirname(file);
      }
      pragma() {
        throw new Error('no pragma');
      }
    }
    assert.throws(() => testStore(FailingPragma), /no pragma/);
    assert.equal(opened.open, false);
    assert.equal(fs.existsSync(dir), false);
  });
});
