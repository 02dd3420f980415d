'use strict';
/**
 * The JS executor of the machines' SQL effects: one explicit mapping from each effect the
 * addon hands out to one statement on the host's own better-sqlite3 connection. The
 * statements are those of the Rust adapter (`adapters/src/rows.rs`, with positional `?`); the
 * decisions are all the addon's (the core machine), so this file decides nothing.
 *
 * Every transaction begins at `synchronous = FULL` and ends with the host's level restored
 * (`durable.js`): its commit is fsynced before the machine goes on, the host's own
 * transactions keep their durability.
 *
 * Every statement names its table with the schema, `main."HookProjectionLeases"`: a TEMP
 * table of the same name on the host's connection (which an unqualified name would reach
 * first) is never read or written.
 *
 * A batch (`publishManyNow`) runs each target's body under a savepoint of its own inside its
 * one transaction: `savepoint`, then `releaseSavepoint` (the body's writes kept) or
 * `rollbackToSavepoint` (undone). A savepoint statement runs only inside the transaction the
 * executor began: once the connection is no longer in it (SQLite rolled it back under a
 * failure, or a callback of the host's ended it), it is refused (`SQLITE_ABORT`) and nothing
 * runs — outside a transaction `SAVEPOINT` would open one of its own, and `RELEASE` or
 * `ROLLBACK TO` would fail or commit it. The Rust adapter's executor has the same rule.
 *
 * Every answer is an object: `{ lease }` for the lease reads (undefined: no row),
 * `{ channels }`, `{ written }` for the conditional writes (whether one row changed), `{}`
 * for begin/commit/rollback and the savepoints, and `{ error: { code, message } }` when a
 * statement threw or was refused.
 */

const { raise, restore } = require('./durable');

const LEASE_COLUMNS =
  'target_id, fencing_epoch, holder_token_hash, holder_instance_digest, acquired_at, expires_at, state';
const CHANNEL_COLUMNS =
  'target_id, channel, source_watermark, envelope_json, captured_at, expires_at, updated_at, degraded_reason';

const SQL = {
  readLease: `SELECT ${LEASE_COLUMNS} FROM main."HookProjectionLeases" WHERE target_id = ?`,
  readChannels: `SELECT ${CHANNEL_COLUMNS} FROM main."HookProjectionChannels" WHERE target_id = ? ORDER BY channel`,
  readChannel: `SELECT ${CHANNEL_COLUMNS} FROM main."HookProjectionChannels" WHERE target_id = ? AND channel = ?`,
  readLeases: `SELECT ${LEASE_COLUMNS} FROM main."HookProjectionLeases" ORDER BY target_id`,
  readAllChannels: `SELECT ${CHANNEL_COLUMNS} FROM main."HookProjectionChannels" ORDER BY target_id, channel`,
  writeGrant: `UPDATE main."HookProjectionLeases" SET fencing_epoch = ?, holder_token_hash = ?, holder_instance_digest = ?,
                 acquired_at = ?, expires_at = ?, state = 'held'
             WHERE target_id = ? AND fencing_epoch = ?`,
  writeRelease: `UPDATE main."HookProjectionLeases" SET state = 'released'
             WHERE target_id = ? AND fencing_epoch = ? AND holder_token_hash = ? AND state = 'held'`,
  insertAdmitted:
    `INSERT OR IGNORE INTO main."HookProjectionLeases" (target_id, fencing_epoch, state) VALUES (?, 0, 'unheld')`,
  upsertChannel: `INSERT OR REPLACE INTO main."HookProjectionChannels" (${CHANNEL_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
};

/** The savepoint every target of a batch writes under (one at a time), and its three statements. */
const SAVEPOINT = 'solewriter_target';
const SAVEPOINTS = {
  savepoint: `SAVEPOINT ${SAVEPOINT}`,
  releaseSavepoint: `RELEASE ${SAVEPOINT}`,
  rollbackToSavepoint: `ROLLBACK TO ${SAVEPOINT}; RELEASE ${SAVEPOINT}`,
};

/**
 * The connections on which a transaction solewriter's executor began (`begin`) is open: ended
 * by its `commit` or `rollback`. Only such a transaction is ever rolled back by solewriter when a
 * call is abandoned (`abandonOwn`); a transaction of the host's — open before the call, or
 * opened by a callback of the host's during it — is never touched.
 */
const own = new WeakSet();

/** Prepared statements per connection. */
const prepared = new WeakMap();

/** The prepared statement `name` of `SQL` on `db`. */
function statement(db, name) {
  let cache = prepared.get(db);
  if (!cache) {
    cache = new Map();
    prepared.set(db, cache);
  }
  let stmt = cache.get(name);
  if (!stmt) {
    stmt = db.prepare(SQL[name]);
    cache.set(name, stmt);
  }
  return stmt;
}

/** Runs one SQL effect of a machine on `db`. */
function executeSqlEffect(db, effect) {
  try {
    switch (effect.kind) {
      case 'readCommittedLease':
      case 'readLease':
        return { lease: statement(db, 'readLease').get(effect.targetId) };
      case 'readChannels':
        return { channels: statement(db, 'readChannels').all(effect.targetId) };
      case 'begin':
        // The host's own transaction is open (an asynchronous publication's turns let the host
        // run between them): never nest into it, never touch it.
        if (db.inTransaction) {
          return { error: { code: 'IN_TRANSACTION', message: 'the connection is inside a transaction of the host' } };
        }
        raise(db);
        try {
          db.exec('BEGIN IMMEDIATE');
        } catch (e) {
          restore(db);
          throw e;
        }
        own.add(db);
        return {};
      case 'writeGrant': {
        const info = statement(db, 'writeGrant').run(
          effect.epoch,
          effect.tokenHash,
          effect.holder,
          effect.acquiredAt,
          effect.expiresAt,
          effect.targetId,
          effect.priorEpoch,
        );
        return { written: info.changes === 1 };
      }
      case 'writeRelease': {
        const info = statement(db, 'writeRelease').run(effect.targetId, effect.epoch, effect.tokenHash);
        return { written: info.changes === 1 };
      }
      case 'savepoint':
      case 'releaseSavepoint':
      case 'rollbackToSavepoint':
        if (!own.has(db) || !db.inTransaction) {
          return { error: { code: 'SQLITE_ABORT', message: 'the write transaction is no longer open (it was rolled back); nothing was run' } };
        }
        db.exec(SAVEPOINTS[effect.kind]);
        return {};
      case 'commit':
        // A failed commit leaves the level raised: the rollback that follows restores it.
        db.exec('COMMIT');
        own.delete(db);
        restore(db);
        return {};
      case 'rollback':
        // Also after a failed commit: never leave the connection inside the transaction.
        if (own.has(db) && db.inTransaction) db.exec('ROLLBACK');
        own.delete(db);
        restore(db);
        return {};
      default:
        return { error: { code: 'UNKNOWN_EFFECT', message: `unknown SQL effect ${effect.kind}` } };
    }
  } catch (e) {
    return { error: { code: String(e.code || e.name || 'ERROR'), message: String(e.message) } };
  }
}

/**
 * After a call that may have been abandoned mid-transaction (a failure, a panic caught as
 * INTERNAL): rolls back the transaction solewriter's executor began on `db` if it is still
 * open — and no other.
 */
function abandonOwn(db) {
  if (!own.has(db)) return;
  own.delete(db);
  if (db.inTransaction) db.exec('ROLLBACK');
}

module.exports = { SQL, statement, executeSqlEffect, abandonOwn };
