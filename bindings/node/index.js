'use strict';
/**
 * solewriter for Node hosts (the Memory Core): fenced single-writer publication of
 * `current.json` with the two operational tables in the host's own SQLite database.
 *
 * ONE SQLite per process: every statement runs on the better-sqlite3 connection the host
 * passes in. The native addon (`solewriter.node`, built from `bindings/node` with cargo) runs
 * the core's lease machines, the file effects (temp file + fsync, rename, directory fsync, the
 * per-target flock), the clock and the tokens; it links no SQLite. Each call is synchronous —
 * it blocks the event loop for its statements and fsyncs — except `publishAsync` and
 * `publishNowAsync`, whose file effects outside the transaction run on the libuv thread pool
 * (see the README). `ProjectLock` is the project lock (`lib/project_lock.js`).
 *
 * Errors are `Error`s with a `code` naming the Rust error class: BUSY, FENCED, LEASE_EXPIRED,
 * NOT_ADMITTED, REJECTED, FOREIGN_SCHEMA, IN_TRANSACTION, CORRUPT_ROW, IO, ...
 */

const path = require('node:path');
const { SQL, statement, executeSqlEffect } = require('./lib/sql');
const { adoptOn } = require('./lib/adopt');
const { coded, unwrap } = require('./lib/answer');
const { projectLockClasses } = require('./lib/project_lock');

/** Loads the addon: `SOLEWRITER_NODE_ADDON`, else `solewriter.node` beside this file. */
function loadAddon() {
  const file = process.env.SOLEWRITER_NODE_ADDON || path.join(__dirname, 'solewriter.node');
  const module = { exports: {} };
  try {
    process.dlopen(module, file);
  } catch (e) {
    throw coded(
      'ADDON_MISSING',
      `cannot load the solewriter addon at ${file} (build it: npm run build): ${e.message}`,
    );
  }
  return module.exports;
}

const addon = loadAddon();
const { ProjectLock, ProjectLockGuard } = projectLockClasses(addon);

/** A better-sqlite3 error as solewriter's (SQLITE_BUSY is BUSY). */
function sqliteError(e) {
  if (typeof e.code === 'string' && e.code.startsWith('SQLITE_BUSY')) {
    return coded('BUSY', `store is busy (${e.message}); nothing was written`);
  }
  return e;
}

const STATEMENTS = JSON.parse(addon.schemaStatements());
const TABLES = ['HookProjectionLeases', 'HookProjectionChannels'];

/** Refuses (FOREIGN_SCHEMA) a database not in WAL mode: the host sets it, solewriter never does. */
function requireWal(db) {
  const mode = db.pragma('journal_mode', { simple: true });
  if (String(mode).toLowerCase() !== 'wal') {
    throw coded('FOREIGN_SCHEMA', `journal_mode ${mode}; solewriter needs WAL, which the host sets`);
  }
}

/**
 * Adds the two tables to the host's WAL database in one transaction (the same DDL text as the
 * Rust adapter). Idempotent; refuses (FOREIGN_SCHEMA) a database not in WAL mode, a table of
 * another shape or version, one table without the other, or an index, trigger or view on
 * either. Returns 'created' or 'present'.
 */
function initialize(db) {
  requireWal(db);
  const run = db.transaction(() => {
    const found = TABLES.map((table) => {
      const objects = db
        .prepare(
          "SELECT type, name, sql FROM sqlite_master WHERE tbl_name = ? COLLATE NOCASE AND NOT (type = 'index' AND sql IS NULL)",
        )
        .all(table);
      if (objects.length === 0) return null;
      if (objects.length === 1 && objects[0].type === 'table' && objects[0].name === table) return objects[0].sql;
      const names = objects.map((o) => `${o.type} ${o.name}`).join(', ');
      throw coded('FOREIGN_SCHEMA', `table ${table} must stand alone, found ${names}; nothing was changed`);
    });
    if (found.every((sql) => sql === null)) {
      for (const ddl of STATEMENTS) db.exec(ddl);
      return 'created';
    }
    found.forEach((sql, i) => {
      if (sql !== STATEMENTS[i]) {
        throw coded(
          'FOREIGN_SCHEMA',
          sql === null
            ? `table ${TABLES[i]} is missing; nothing was changed`
            : `table ${TABLES[i]} has another shape: ${sql}; nothing was changed`,
        );
      }
    });
    return 'present';
  });
  try {
    return run.immediate();
  } catch (e) {
    throw sqliteError(e);
  }
}

/**
 * A projection store on the host's connection `db`.
 *
 * config: { runtimeRoot, channels: [{ name, owner, envelopeSchema, maxEnvelopeBytes }],
 *   leaseTtlMs, busyTimeoutMs (the target lock's wait; the connection's own `timeout` governs
 *   SQLite's lock), clock?: () => ms (tests; the system clock otherwise), probe?: (step,
 *   targetId) => void (called at each named step of a publication, inside its transaction:
 *   tests) }.
 */
class ProjectionStore {
  constructor(db, config) {
    this.db = db;
    this.config = config;
    this.channelsJson = JSON.stringify(config.channels || []);
    this.execute = this.executor();
  }

  /**
   * The SQL executor of a machine run on this store's connection. `reached` is no SQL: a named
   * step of the publication, for the host's probe. In an asynchronous publication
   * (`onPause` given) a probe that returns a promise pauses the publication there until it
   * settles: the answer `{ pause: true }` ends the turn, outside the transaction only.
   */
  executor(onPause) {
    const { db } = this;
    const { probe } = this.config;
    return (effect) => {
      if (effect.kind !== 'reached') return executeSqlEffect(db, effect);
      const returned = probe && probe(effect.step, effect.targetId);
      if (onPause && returned && typeof returned.then === 'function') {
        onPause(returned);
        return { pause: true };
      }
      return {};
    };
  }

  /**
   * Drives an asynchronous publication (`addon.NativePublication`) to its answer: its
   * JS-thread turns (every SQL effect, and the whole transaction in one turn) alternate with
   * its file effects outside the transaction on the libuv thread pool, and with the pauses the
   * probe asks for.
   */
  async turns(run) {
    let paused;
    const execute = this.executor((promise) => {
      paused = promise;
    });
    for (;;) {
      const { clock } = this.config;
      const next = unwrap(run.turn(execute, clock ? clock() : undefined));
      if (next.pool) await run.pool();
      // A pause ends when its promise settles, either way: the publication then goes on.
      else if (next.paused) await paused.then(undefined, () => undefined);
      else return next;
    }
  }

  options() {
    const { runtimeRoot, leaseTtlMs, busyTimeoutMs, clock } = this.config;
    return {
      channelsJson: this.channelsJson,
      leaseTtlMs,
      busyTimeoutMs: busyTimeoutMs ?? 5000,
      runtimeRoot,
      clockMs: clock ? clock() : undefined,
    };
  }

  /** A machine's transaction is its own: never inside one of the host's. */
  outsideTransaction() {
    if (this.db.inTransaction) {
      throw coded('IN_TRANSACTION', 'the connection is inside a transaction; solewriter opens its own');
    }
  }

  /** Admits the target of an attested tuple (an object with its seven camelCase fields); its id. */
  admitTarget(tuple) {
    const id = targetId(tuple);
    try {
      statement(this.db, 'insertAdmitted').run(id);
    } catch (e) {
      throw sqliteError(e);
    }
    return id;
  }

  /**
   * Submits `producer`'s envelope for one channel: 'inserted' | 'advanced' | 'replayed' |
   * 'degraded', or throws REJECTED. One immediate transaction: read, decide (the core's
   * `decide_submission`, in the addon), write.
   */
  submit(producer, submission) {
    this.outsideTransaction();
    const run = this.db.transaction(() => {
      const admitted = statement(this.db, 'readLease').get(submission.targetId) !== undefined;
      const existing = statement(this.db, 'readChannel').get(submission.targetId, submission.channel) ?? null;
      const decision = unwrap(addon.decideSubmission(this.options(), producer, admitted, existing, submission));
      const row = decision.row;
      if (row) {
        statement(this.db, 'upsertChannel').run(
          row.target_id,
          row.channel,
          row.source_watermark,
          row.envelope_json,
          row.captured_at,
          row.expires_at,
          row.updated_at,
          row.degraded_reason,
        );
      }
      return { insert: 'inserted', advance: 'advanced', replay: 'replayed', degrade: 'degraded' }[decision.plan];
    });
    try {
      return run.immediate();
    } catch (e) {
      throw sqliteError(e);
    }
  }

  /** Acquires the lease: `{ granted: grant }` or `{ held: { epoch, holder, expiresAt, retryAfterMs } }`. */
  acquire(targetId, holder, { tokenHex } = {}) {
    this.outsideTransaction();
    return unwrap(addon.acquire(this.options(), targetId, holder, this.execute, tokenHex));
  }

  /** Publishes with a grant from `acquire`, then releases it: `{ epoch, bytes, publishedAt, path }`. */
  publish(grant) {
    this.outsideTransaction();
    return unwrap(addon.publish(this.options(), grant, this.execute)).published;
  }

  /** Grant, publish and release in one envelope: `{ published }` or `{ held }`. */
  publishNow(targetId, holder, { tokenHex } = {}) {
    this.outsideTransaction();
    return unwrap(addon.publishNow(this.options(), targetId, holder, this.execute, tokenHex));
  }

  /**
   * `publish` without blocking the event loop on its file effects: the draft (temp file and
   * fsync, the directory chain and parent fsyncs, the orphan sweep) and, after the commit, the
   * directory fsync run on the libuv thread pool; every SQL statement, and the whole
   * transaction (revalidation, rename, release, commit), runs on the JS thread within one
   * event-loop turn. Resolves to what `publish` returns; rejects with its errors, and with
   * IN_TRANSACTION when the host holds a transaction open on the connection when this one
   * would begin (nothing renamed, the draft removed).
   */
  async publishAsync(grant) {
    this.outsideTransaction();
    return (await this.turns(addon.NativePublication.publish(this.options(), grant))).published;
  }

  /** `publishNow` without blocking the event loop on its file effects (see `publishAsync`). */
  async publishNowAsync(targetId, holder, { tokenHex } = {}) {
    this.outsideTransaction();
    return this.turns(addon.NativePublication.publishNow(this.options(), targetId, holder, tokenHex));
  }

  /** The conditional release: `{ released: true }` or `{ notHolder: { reason, currentEpoch? } }`. */
  release(grant) {
    this.outsideTransaction();
    return unwrap(addon.release(this.options(), grant, this.execute));
  }

  /**
   * An operator's end of the target's current grant, whoever holds it (the core's
   * `Release::end()` machine, the one `solewriter lease end` runs): `{ ended: { epoch, holder,
   * acquiredAt, expiresAt } }` — that grant is released at its epoch, so its holder's next
   * publish or release is fenced (`released`) and writes nothing; the next grant gets a higher
   * epoch — or `{ nothingHeld: { epoch, why } }` (`why`: 'unheld' | 'released' | 'expired';
   * nothing was written). Throws NOT_ADMITTED, BUSY, IN_TRANSACTION like the others.
   */
  endLease(targetId) {
    this.outsideTransaction();
    return unwrap(addon.endLease(this.options(), targetId, this.execute));
  }

  /**
   * Every lease row (its state observed at the broker clock: unheld, held, expired or
   * released) and every channel row, read-only and decoded strictly (a row solewriter could
   * not have written throws CORRUPT_ROW or INCONSISTENT_LEASE).
   */
  inspect() {
    const leases = statement(this.db, 'readLeases').all();
    const channels = statement(this.db, 'readAllChannels').all();
    return unwrap(addon.inspect(this.options(), leases, channels));
  }

  /** The published document of a target (validated), or throws NOT_PUBLISHED. */
  readProjection(targetId) {
    return readProjection(this.config.runtimeRoot, targetId);
  }
}

/**
 * Converts the tables the Memory Core's own JavaScript writer made (`HookProjectionLeases`,
 * `HookProjectionChannels` of another shape) into solewriter's, in one immediate transaction
 * on the host's connection: epochs kept (the next grant takes the stored epoch + 1), grants
 * ended at the adoption (the writer's token hashes cannot be validated by solewriter), channel
 * rows and conflicts carried. `tuples` are the attested tuples of the host's targets (the
 * writer's 128-bit ids map through them). Returns `{ outcome: 'converted', leases, channels }`,
 * or `{ outcome: 'alreadyAdopted' | 'nothingToAdopt' }` (nothing changed); throws
 * ADOPTION_REFUSED (with `table`, `rowid`, `column`, `problem` or `reason`), FOREIGN_SCHEMA
 * (not WAL), BUSY or IN_TRANSACTION, having changed nothing. `clock`: `() => ms` (tests).
 */
function adoptJsWriterTables(db, tuples, { clock } = {}) {
  if (db.inTransaction) {
    throw coded('IN_TRANSACTION', 'the connection is inside a transaction; the adoption opens its own');
  }
  requireWal(db);
  const run = db.transaction(() => adoptOn(db, addon, unwrap, tuples, clock ? clock() : undefined));
  try {
    return run.immediate();
  } catch (e) {
    throw sqliteError(e);
  }
}

/** The target id (64 hex) of an attested tuple (an object with its seven camelCase fields). */
function targetId(tuple) {
  return unwrap(addon.targetId(JSON.stringify(tuple))).targetId;
}

/** Reads and validates `<runtimeRoot>/hook-projections/<targetId>/current.json`. */
function readProjection(runtimeRoot, targetId) {
  return unwrap(addon.readProjection(runtimeRoot, targetId)).document;
}

module.exports = {
  initialize,
  ProjectLock,
  ProjectLockGuard,
  adoptJsWriterTables,
  ProjectionStore,
  targetId,
  readProjection,
  executeSqlEffect,
  SQL,
};
