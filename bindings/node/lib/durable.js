'use strict';
/**
 * Durable commits on the host's connection, whatever durability the host chose for its own.
 *
 * better-sqlite3 builds SQLite with `SQLITE_DEFAULT_WAL_SYNCHRONOUS=1`: a connection in WAL
 * mode runs at `synchronous = NORMAL`, whose commits are not fsynced (a power loss may take
 * them back). solewriter's commits must be durable before a call returns — a grant lost after
 * its holder renamed could hand its epoch out twice; an acknowledged submission could vanish.
 * So every transaction solewriter runs on the host's connection runs at `synchronous = FULL`
 * (WAL fsynced at its commit), and the host's level is put back right after, so the host's own
 * transactions keep the durability the host chose. SQLite refuses to change the level inside a
 * transaction, so it is raised before `BEGIN` and restored after `COMMIT` or `ROLLBACK`; a
 * host level at or above FULL is left alone.
 */

const FULL = 2;

/** The host's level of each connection while one of solewriter's transactions runs on it. */
const saved = new WeakMap();

/**
 * Raises `db` to FULL for the transaction solewriter is about to begin (never called inside a
 * transaction: every caller refuses one first). A level still saved from a call that could not
 * restore it is restored first if solewriter's FULL is still set; if the host has set a level
 * of its own since, that one stays. Either way the level saved now is the host's.
 */
function raise(db) {
  if (saved.has(db) && db.pragma('synchronous', { simple: true }) !== FULL) saved.delete(db);
  restore(db);
  const level = db.pragma('synchronous', { simple: true });
  if (level < FULL) db.pragma(`synchronous = ${FULL}`);
  saved.set(db, level);
}

/** Puts the host's level back, once no transaction is open (idempotent). */
function restore(db) {
  if (!saved.has(db) || db.inTransaction) return;
  const level = saved.get(db);
  saved.delete(db);
  if (level < FULL) db.pragma(`synchronous = ${level}`);
}

/** Runs `fn` (which opens and ends its own transaction on `db`) at FULL, then restores. */
function durably(db, fn) {
  raise(db);
  try {
    return fn();
  } finally {
    restore(db);
  }
}

module.exports = { raise, restore, durably };
