'use strict';
/**
 * `solewriter/testing`: a test's one call to a store solewriter takes — `testStore(Database)`,
 * a fresh private temporary directory holding a WAL database opened as the Memory Core opens
 * its store (better-sqlite3: `journal_mode = WAL`, `busy_timeout = 5000`, `foreign_keys =
 * ON`) and an empty projection root beside it — so a test written against the Memory Core's
 * JavaScript writer (`new Database(':memory:')`, a fake `fs`, any root) switches by one line.
 * solewriter refuses `:memory:` and every other non-WAL database (its guarantees rest on
 * WAL's durable commit) and a substitute `fs` (it does its own file I/O), so a test runs on
 * the real thing, in a directory of its own.
 */

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

/**
 * A WAL database and a projection root in a new temporary directory (mode 0700):
 * `{ dir, db, dbPath, hookProjectionRoot, runtimeRoot, close }`. `Database` is the host's
 * better-sqlite3 constructor (the package does not bring its own). `hookProjectionRoot`
 * (`<dir>/hook-projections`, not yet made: the first publication makes it) is for the Memory
 * Core's writer's config; `runtimeRoot` (`dir`) for a `ProjectionStore`. `close()` closes the
 * database and removes the directory; it may be called more than once.
 */
function testStore(Database, { prefix = 'solewriter-test-' } = {}) {
  if (typeof Database !== 'function') {
    throw new TypeError("testStore(Database): pass better-sqlite3's Database constructor (require('better-sqlite3'))");
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  const dbPath = path.join(dir, 'store.sqlite');
  let db;
  try {
    db = new Database(dbPath);
    db.pragma('journal_mode = WAL');
    db.pragma('busy_timeout = 5000');
    db.pragma('foreign_keys = ON');
  } catch (e) {
    db?.close();
    fs.rmSync(dir, { recursive: true, force: true });
    throw e;
  }
  const close = () => {
    if (db.open) db.close();
    fs.rmSync(dir, { recursive: true, force: true });
  };
  return { dir, db, dbPath, hookProjectionRoot: path.join(dir, 'hook-projections'), runtimeRoot: dir, close };
}

module.exports = { testStore };
