'use strict';
/**
 * solewriter for Node hosts (the Memory Core): fenced single-writer publication of
 * `current.json` with the two operational tables in the host's own SQLite database.
 *
 * ONE SQLite per process: every statement runs on the better-sqlite3 connection the host
 * passes in. The native addon (prebuilt in the platform package `solewriter-linux-x64-gnu`, or
 * `solewriter.node` built from `bindings/node` with cargo: `loadAddon` below) runs
 * the core's lease machines, the file effects (temp file + fsync, rename, directory fsync, the
 * per-target flock), the clock and the tokens; it links no SQLite. Each call is synchronous —
 * it blocks the event loop for its statements and fsyncs — except `publishAsync`,
 * `publishNowAsync` and `publishManyNowAsync`, whose file effects outside the transaction run
 * on the libuv thread pool (see the README). `ProjectLock` is the project lock (`lib/project_lock.js`).
 *
 * Every transaction it runs on the host's connection commits at `synchronous = FULL`, the
 * host's level restored after it (`lib/durable.js`). A grant keeps its raw token private
 * (`lib/grant.js`); the store keeps only its hash, which is never a credential.
 *
 * Host objects are read once (`lib/copy.js`): every entry point copies what it is handed into
 * plain values first, and only then looks at the connection's transaction state.
 *
 * Errors are `Error`s with a `code` naming the Rust error class: BUSY, FENCED, LEASE_EXPIRED,
 * NOT_ADMITTED, REJECTED, FOREIGN_SCHEMA, IN_TRANSACTION, CORRUPT_ROW, IO, INVALID_CONFIG,
 * INVALID_INPUT, INTERNAL, ... (docs/node.md lists them all).
 */

const { SQL, statement, executeSqlEffect, abandonOwn } = require('./lib/sql');
const { adoptOn, bindParam } = require('./lib/adopt');
const { addon } = require('./lib/addon');
const { ERROR_CODES, coded, native, batchResults } = require('./lib/answer');
const { durably, restore } = require('./lib/durable');
const { Grant, requireGrant, spend } = require('./lib/grant');
const { readHost, fieldsOf, jsonText } = require('./lib/copy');
const { storeConfigOf, badConfig } = require('./lib/config');

/**
 * The key of the test-only option of `acquire` and `publishNow` that chooses the raw holder
 * token (64 hex) instead of drawing one: the conformance tests give the reference model the
 * same token. It is a raw token, never a hash, and not part of the typed API.
 */
const TEST_TOKEN = Symbol.for('solewriter.test.token');
const { projectLockClasses } = require('./lib/project_lock');
const { writeGuardApi } = require('./lib/write_guard');
const { ledgerClasses } = require('./lib/ledger');

const { ProjectLock, ProjectLockGuard } = projectLockClasses(addon);
const { WriteGuard, admitWrite, parseBridgeFrame, parseAgentEnvelope } = writeGuardApi(addon);
const { Ledger } = ledgerClasses(addon);

/**
 * An error of a transaction solewriter ran with better-sqlite3 as one of solewriter's: its own
 * errors as they are, SQLITE_BUSY as BUSY, any other SQLite error as SQLITE (with
 * `sqliteCode`). The transaction was rolled back: nothing was written.
 */
function sqliteError(e) {
  const code = String(e.code);
  if (code.startsWith('SQLITE_BUSY')) {
    return coded('BUSY', `store is busy (${e.message}); nothing was written`);
  }
  if (code.startsWith('SQLITE')) {
    return coded('SQLITE', `store operation failed (${code}: ${e.message}); nothing was written`, { sqliteCode: code });
  }
  if (ERROR_CODES.includes(code)) return e;
  // better-sqlite3 refusing a value to bind (a TypeError or RangeError): the caller's input.
  return coded('INVALID_INPUT', `invalid input: ${e.message}; nothing was written`);
}

const STATEMENTS = native(() => addon.schemaStatements());
const TABLES = ['HookProjectionLeases', 'HookProjectionChannels'];

/** Whether `db` looks like a better-sqlite3 `Database` (what solewriter calls on it). */
function isDatabase(db) {
  return db !== null && typeof db === 'object' && typeof db.prepare === 'function' && typeof db.pragma === 'function';
}

/** Refuses (INVALID_INPUT) a first argument that is not the host's open database. */
function requireDatabase(db, what) {
  if (!readHost(`${what}: the database`, () => isDatabase(db))) {
    throw coded('INVALID_INPUT', `${what} takes the host's better-sqlite3 Database`);
  }
  if (readHost(`${what}: the database`, () => db.open) === false) {
    throw coded('INVALID_INPUT', `${what}: the database connection is closed`);
  }
}

/** Refuses (IN_TRANSACTION) a connection inside one of the host's transactions: `what` opens its own. */
function refuseTransaction(db, what) {
  if (db.inTransaction) {
    throw coded('IN_TRANSACTION', `the connection is inside a transaction; ${what} opens its own, so nothing was done`);
  }
}

/** Refuses (FOREIGN_SCHEMA) a database not in WAL mode: the host sets it, solewriter never does. */
function requireWal(db) {
  const mode = db.pragma('journal_mode', { simple: true });
  if (String(mode).toLowerCase() !== 'wal') {
    throw coded('FOREIGN_SCHEMA', `journal_mode ${mode}; solewriter needs WAL, which the host sets`);
  }
}

/** The profiles: solewriter's own document format (the default) and the Memory Core's. */
const GENERIC_PROFILE = 'solewriter.hook-projection.v2';
const PROFILES = Object.keys(STATEMENTS.current);

/** `application_id` of a release-0.1.0 store ("SoLW"), whose tables carry no marker. */
const LEGACY_APPLICATION_ID = 0x536f4c57;

/**
 * The profile named by `options.profile` (the generic one when absent), or INVALID_INPUT.
 * `options` is the host's object (read once here) or a copy of it.
 */
function profileOf(options, what) {
  const { profile = GENERIC_PROFILE } = fieldsOf(options, ['profile'], `${what}: options`);
  if (!PROFILES.includes(profile)) {
    throw coded('INVALID_INPUT', `${what}: unknown profile \`${profile}\` (known: ${PROFILES.join(', ')})`);
  }
  return profile;
}

/** The `CREATE TABLE` statements of the two tables in `db`, or null for a missing table. */
function storedStatements(db) {
  return TABLES.map((table) => {
    const objects = db
      .prepare(
        "SELECT type, name, sql FROM main.sqlite_master WHERE tbl_name = ? COLLATE NOCASE AND NOT (type = 'index' AND sql IS NULL)",
      )
      .all(table);
    if (objects.length === 0) return null;
    if (objects.length === 1 && objects[0].type === 'table' && objects[0].name === table) return objects[0].sql;
    const names = objects.map((o) => `${o.type} ${o.name}`).join(', ');
    throw coded('FOREIGN_SCHEMA', `table ${table} must stand alone, found ${names}; nothing was changed`);
  });
}

/** The profile of the current-schema tables `found`, or undefined. */
function currentProfile(found) {
  return PROFILES.find((p) => STATEMENTS.current[p].every((sql, i) => found[i] === sql));
}

/** Whether `found` are tables of schema 1 (marked, or release 0.1.0's with its pragmas). */
function earlierSchema(db, found) {
  const [marked, unmarked] = STATEMENTS.earlier;
  if (marked.every((sql, i) => found[i] === sql)) return true;
  if (!unmarked.every((sql, i) => found[i] === sql)) return false;
  const pragma = (name) => Number(db.pragma(name, { simple: true }));
  return pragma('application_id') === LEGACY_APPLICATION_ID && pragma('user_version') === 1;
}

/**
 * Refuses (FOREIGN_SCHEMA, naming what to run) a store whose tables are not this build's, of
 * `profile`, as the Rust adapter's `open` does: absent, of another profile or schema, or the
 * Memory Core's JavaScript writer's.
 */
function requireTablesOf(db, profile) {
  let found;
  try {
    found = storedStatements(db);
  } catch (e) {
    throw sqliteError(e);
  }
  const current = currentProfile(found);
  if (current === profile) return;
  const why =
    current !== undefined
      ? `the tables are of profile ${current}, not ${profile}`
      : found.every((sql) => sql === null)
        ? 'the two tables are missing (initialize makes them)'
        : earlierSchema(db, found)
          ? 'the tables are of schema 1 (initialize upgrades them)'
          : 'the tables are not solewriter\'s (the Memory Core\'s JavaScript writer\'s? adoptJsWriterTables converts them)';
  throw coded('FOREIGN_SCHEMA', `${why}; nothing was done`);
}

/**
 * Adds the two tables of `options.profile` (the generic profile when absent; the Memory
 * Core's is 'live-lane-awareness-projection.v1') to the host's WAL database in one
 * transaction (the same DDL text as the Rust adapter), or upgrades tables of schema 1 (every
 * row kept). Idempotent; refuses (FOREIGN_SCHEMA) a database not in WAL mode, a table of
 * another shape, version or profile, one table without the other, or an index, trigger or
 * view on either. Returns 'created', 'present' or 'upgraded'.
 */
function initialize(db, options = {}) {
  requireDatabase(db, 'initialize');
  const profile = native(() => profileOf(options, 'initialize'));
  refuseTransaction(db, 'initialize');
  requireWal(db);
  const run = db.transaction(() => {
    const found = storedStatements(db);
    if (found.every((sql) => sql === null)) {
      for (const ddl of STATEMENTS.current[profile]) db.exec(ddl);
      return 'created';
    }
    const current = currentProfile(found);
    if (current === profile) return 'present';
    if (current !== undefined) {
      throw coded('FOREIGN_SCHEMA', `the store is of profile ${current}, not ${profile}; nothing was changed`);
    }
    if (earlierSchema(db, found)) {
      if (profile !== GENERIC_PROFILE) {
        throw coded('FOREIGN_SCHEMA', `the store is of schema 1 (profile ${GENERIC_PROFILE}), not ${profile}; nothing was changed`);
      }
      const leases = statement(db, 'readLeases').all();
      const channels = statement(db, 'readAllChannels').all();
      const plan = native(() => addon.upgradeStatements(leases, channels));
      for (const { sql, params } of plan.statements) db.prepare(sql).run(...params.map(bindParam));
      return 'upgraded';
    }
    const known = (sql, i) =>
      [...Object.values(STATEMENTS.current), ...STATEMENTS.earlier].some((both) => both[i] === sql);
    found.forEach((sql, i) => {
      if (sql === null) throw coded('FOREIGN_SCHEMA', `table ${TABLES[i]} is missing; nothing was changed`);
      if (!known(sql, i)) {
        throw coded(
          'FOREIGN_SCHEMA',
          `table ${TABLES[i]} has another shape: ${sql} (tables of the Memory Core's JavaScript writer are converted by adoptJsWriterTables); nothing was changed`,
        );
      }
    });
    throw coded('FOREIGN_SCHEMA', 'the two tables are of different releases or profiles; nothing was changed');
  });
  try {
    return durably(db, () => run.immediate());
  } catch (e) {
    throw sqliteError(e);
  }
}

/**
 * The configuration checked whole (`lib/config.js`), or INVALID_CONFIG for a first argument
 * that is not the host's database or a field missing, unknown or wrong: `{ copy, store }`.
 */
function configOf(db, config) {
  if (!readHost('configuration: the database', () => isDatabase(db), 'INVALID_CONFIG')) {
    throw badConfig('the first argument must be the host\'s better-sqlite3 Database');
  }
  return storeConfigOf(config);
}

/**
 * A projection store on the host's connection `db`.
 *
 * config: { runtimeRoot (an existing directory: documents under its `hook-projections/`) or
 *   hookProjectionRoot (a directory of any name holding `<targetId>/current.json`, made on
 *   first use; its parent an existing directory), channels: [{ name, owner, envelopeSchema,
 *   maxEnvelopeBytes }], leaseTtlMs, busyTimeoutMs (the target lock's wait; the connection's
 *   own `timeout` governs SQLite's lock), clock?: () => ms (tests; the system clock
 *   otherwise: read at every clock step of a machine, inside its transaction too),
 *   probe?: (step, targetId) => void (called at each named step of a publication, inside its
 *   transaction: tests) }. Every field but `clock` and `probe` (and one of the two roots) is
 *   required — there is no default for any timing — and the whole configuration is checked
 *   here, once: INVALID_CONFIG names the first field that is missing, unknown or wrong.
 */
class ProjectionStore {
  // The addon's machinery is private (`#`): no caller can reach the native store, its executor
  // or the connection through the store, so every call into the addon goes through this class's
  // own checks (a native store driven with an executor of the caller's could write anything).
  /** The host's connection. */
  #db;
  /** The addon's store (`NativeStore`): its machines over the configuration checked once. */
  #native;
  /** The SQL executor of the synchronous calls. */
  #execute;

  constructor(db, config) {
    // The store's machines, its configuration checked once, whole (INVALID_CONFIG): every
    // field read once, here; the store uses only this copy.
    const { copy, store } = native(() => configOf(db, config));
    this.#db = db;
    this.config = Object.freeze(copy);
    this.#native = store;
    this.#execute = this.#executor();
    requireTablesOf(db, this.config.profile ?? GENERIC_PROFILE);
  }

  /**
   * The SQL executor of a machine run on this store's connection. `reached` is no SQL: a named
   * step of the publication, for the host's probe. In an asynchronous publication
   * (`onPause` given) a probe that returns a promise pauses the publication there until it
   * settles: the answer `{ pause: true }` ends the turn, outside the transaction only.
   */
  #executor(onPause) {
    const db = this.#db;
    const { probe } = this.config;
    const { clock } = this.config;
    return (effect) => {
      // The host's clock, asked at each clock step of the machine (`call`: `hostClock`), some
      // inside the machine's transaction: a clock that began or ended a transaction on the
      // connection stops the run there (before any rename), never lets it go on outside it.
      if (effect.kind === 'readClock') {
        const inTransaction = db.inTransaction;
        const clockMs = clock();
        if (db.inTransaction !== inTransaction) {
          throw coded('HOST', `the clock ${inTransaction ? 'ended' : 'began'} a transaction on the connection; the run was stopped, nothing renamed`);
        }
        return { clockMs };
      }
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
   * Drives an asynchronous publication (a `NativePublication` of the addon) to its answer: its
   * JS-thread turns (every SQL effect, and the whole transaction in one turn) alternate with
   * its file effects outside the transaction on the libuv thread pool, and with the pauses the
   * probe asks for.
   */
  async #turns(run) {
    let paused;
    const execute = this.#executor((promise) => {
      paused = promise;
    });
    try {
      for (;;) {
        const next = this.#machine(() => run.turn(execute));
        if (next.pool) await run.pool();
        // The target lock is another's: try again after a timer, the event loop free meanwhile.
        else if (next.waitMs !== undefined) await new Promise((resolve) => setTimeout(resolve, next.waitMs));
        // A pause ends when its promise settles, either way: the publication then goes on.
        else if (next.paused) await Promise.resolve(paused).then(undefined, () => undefined);
        else return next;
      }
    } catch (e) {
      // Failed between turns (its error is the call's): let its target lock go now.
      run.abandon();
      throw e;
    }
  }

  /**
   * What a machine's native call adds to the store's configuration: whether its clock steps
   * ask the host's `clock` (through the executor, `readClock`: each step reads it, as each
   * reads the system clock otherwise); a publication's consumer binding (Memory Core profile),
   * serialized once here (its JSON text is the copy the addon reads). Made before the call
   * looks at the connection's transaction state: a `toJSON` is the host's code.
   */
  #call(consumerBinding) {
    const options = { hostClock: this.config.clock !== undefined, probe: this.config.probe !== undefined };
    if (consumerBinding !== undefined) options.consumerBindingJson = jsonText(consumerBinding, 'the consumer binding');
    return options;
  }

  /**
   * What a decision outside a machine (a submission, an inspection) adds: the host's clock
   * read once, now (the addon reads the system clock when the store has none).
   */
  #reading() {
    const { clock } = this.config;
    return { clockMs: clock ? clock() : undefined };
  }

  /**
   * Runs one native call that executes a machine on this store's connection, and its answer.
   * Whatever happened inside it — even a failure that abandoned the machine mid-transaction —
   * the connection is left as the host had it: no transaction of solewriter's open (rolled
   * back: nothing it had not committed is committed), the host's `synchronous` level back.
   */
  #machine(call) {
    // Only a transaction solewriter's executor began is rolled back: the host's own — open
    // between an asynchronous publication's turns, or opened by a callback of the host's (a
    // probe) — is never touched.
    try {
      return native(call);
    } finally {
      abandonOwn(this.#db);
      restore(this.#db);
    }
  }

  /** A machine's transaction is its own: never inside one of the host's. */
  #outsideTransaction() {
    refuseTransaction(this.#db, 'solewriter');
  }

  /** Admits the target of an attested tuple (an object with its seven camelCase fields); its id. */
  admitTarget(tuple) {
    const id = targetIdFor(this.config.profile ?? GENERIC_PROFILE, tuple);
    this.#outsideTransaction();
    try {
      durably(this.#db, () => statement(this.#db, 'insertAdmitted').run(id));
    } catch (e) {
      throw sqliteError(e);
    }
    return id;
  }

  /**
   * Submits `producer`'s envelope for one channel: 'inserted' | 'advanced' | 'replayed' |
   * 'degraded', or throws REJECTED. One immediate transaction: read, decide (the core's
   * `decide_submission`, in the addon), write. The submission is copied first (each field read
   * once): the rows are looked up and the addon decides with the same values.
   */
  submit(producer, submission) {
    const [copy, call] = native(() => [fieldsOf(submission, SUBMISSION_FIELDS, 'submit: the submission'), this.#reading()]);
    this.#outsideTransaction();
    const run = this.#db.transaction(() => {
      const admitted = statement(this.#db, 'readLease').get(copy.targetId) !== undefined;
      const existing = statement(this.#db, 'readChannel').get(copy.targetId, copy.channel) ?? null;
      const decision = native(() => this.#native.decideSubmission(producer, admitted, existing, copy, call));
      const row = decision.row;
      if (row) {
        statement(this.#db, 'upsertChannel').run(
          row.target_id,
          row.channel,
          // An integer watermark as an INTEGER (a JS number would be bound as a REAL, which
          // the column refuses); a text watermark as TEXT.
          typeof row.source_watermark === 'number' ? BigInt(row.source_watermark) : row.source_watermark,
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
      return durably(this.#db, () => run.immediate());
    } catch (e) {
      throw sqliteError(e);
    }
  }

  /**
   * Acquires the lease: `{ granted: Grant }` (the raw token drawn from the OS, kept in the
   * grant's private field; the store keeps only its hash) or `{ held: { epoch, holder,
   * expiresAt, retryAfterMs } }`.
   */
  acquire(targetId, holder, options) {
    const [{ token }, call] = native(() => [optionsOf(options), this.#call()]);
    this.#outsideTransaction();
    const r = this.#machine(() => this.#native.acquire(targetId, holder, this.#execute, call, token));
    return r.granted ? { granted: new Grant(r.granted) } : r;
  }

  /**
   * Publishes with a grant from `acquire`, then releases it: `{ epoch, bytes, publishedAt,
   * path }`. A publication that cannot start (BUSY) releases the grant before it throws. The
   * `Grant` object is spent by this call (a second use throws GRANT_SPENT) unless its error
   * carries `grantUnused: true` (`lib/grant.js`).
   */
  publish(grant, options) {
    requireGrant(grant);
    const call = native(() => this.#call(bindingOf(options)));
    this.#outsideTransaction();
    return spending(grant, (presented) => this.#machine(() => this.#native.publish(presented, this.#execute, call)).published);
  }

  /** Grant, publish and release in one envelope: `{ published }` or `{ held }`. */
  publishNow(targetId, holder, options) {
    const [token, call] = native(() => {
      const copy = optionsOf(options, ['consumerBinding']);
      return [copy.token, this.#call(copy.consumerBinding)];
    });
    this.#outsideTransaction();
    return this.#machine(() => this.#native.publishNow(targetId, holder, this.#execute, call, token));
  }

  /**
   * `publishNow` of each of `targetIds` (an array of target ids), all in ONE write transaction
   * of the store: one durable commit for the batch (the core's `PublishMany`). The targets'
   * locks are taken in the order of their ids before the transaction; each target's grant,
   * revalidation, rename and release run under a savepoint of its own, so each is fenced
   * exactly as one `publishNow` is; a takeover of an expired grant publishes in an envelope of
   * its own after the batch. Answers an array, one entry per target in the order given: what
   * `publishNow` answers for it (`{ published }` or `{ held }`), or `{ error }`, the coded
   * error `publishNow` would throw for it (a target whose lock is busy, that is fenced, ...,
   * fails alone; a failure of the shared transaction — its begin, a statement inside it, its
   * commit — is every target's of it). Throws, having touched nothing, INVALID_INPUT for no
   * target, a target given twice, or an argument that is not one, and IN_TRANSACTION inside a
   * transaction of the host's.
   */
  publishManyNow(targetIds, holder, options) {
    const [targets, call] = native(() => [targetsOf(targetIds), this.#call(batchBindingOf(options))]);
    this.#outsideTransaction();
    return batchResults(this.#machine(() => this.#native.publishManyNow(targets, holder, this.#execute, call)));
  }

  /**
   * `publish` without blocking the event loop on its file effects: the draft (temp file and
   * fsync, the directory chain and parent fsyncs, the orphan sweep) and, after the commit, the
   * directory fsync run on the libuv thread pool; every SQL statement, and the whole
   * transaction (revalidation, rename, release, commit), runs on the JS thread within one
   * event-loop turn; a busy target lock is waited for on a timer between turns. Resolves to what `publish` returns; rejects with its errors, and with
   * IN_TRANSACTION when the host holds a transaction open on the connection when this one
   * would begin (nothing renamed, the draft removed).
   */
  async publishAsync(grant, options) {
    requireGrant(grant);
    const call = native(() => this.#call(bindingOf(options)));
    this.#outsideTransaction();
    // Spent now, synchronously: a use of the same object between the turns is refused.
    return spending(grant, async (presented) => {
      const run = native(() => this.#native.publication(presented, call));
      return (await this.#turns(run)).published;
    });
  }

  /** `publishNow` without blocking the event loop on its file effects (see `publishAsync`). */
  async publishNowAsync(targetId, holder, options) {
    const [token, call] = native(() => {
      const copy = optionsOf(options, ['consumerBinding']);
      return [copy.token, this.#call(copy.consumerBinding)];
    });
    this.#outsideTransaction();
    return this.#turns(native(() => this.#native.publicationNow(targetId, holder, call, token)));
  }

  /**
   * `publishManyNow` without blocking the event loop on its file effects (see `publishAsync`):
   * the whole transaction still runs in one event-loop turn. A busy target lock is waited for
   * on a timer between turns; while the lock of a later target of the batch is waited for,
   * the locks of the earlier ones are held across those turns (no transaction is open then).
   */
  async publishManyNowAsync(targetIds, holder, options) {
    const [targets, call] = native(() => [targetsOf(targetIds), this.#call(batchBindingOf(options))]);
    this.#outsideTransaction();
    return batchResults(await this.#turns(native(() => this.#native.publicationManyNow(targets, holder, call))));
  }

  /**
   * The conditional release: `{ released: true }` or `{ notHolder: { reason, currentEpoch? } }`.
   * Spends the `Grant` object whatever its outcome (a second use throws GRANT_SPENT).
   */
  release(grant) {
    requireGrant(grant);
    const call = native(() => this.#call());
    this.#outsideTransaction();
    const { presented } = spend(grant);
    return this.#machine(() => this.#native.release(presented, this.#execute, call));
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
    const call = native(() => this.#call());
    this.#outsideTransaction();
    return this.#machine(() => this.#native.endLease(targetId, this.#execute, call));
  }

  /**
   * Every lease row (its state observed at the broker clock: unheld, held, expired or
   * released) and every channel row, read-only and decoded strictly (a row solewriter could
   * not have written throws CORRUPT_ROW or INCONSISTENT_LEASE).
   */
  inspect() {
    let leases;
    let channels;
    try {
      leases = statement(this.#db, 'readLeases').all();
      channels = statement(this.#db, 'readAllChannels').all();
    } catch (e) {
      throw sqliteError(e);
    }
    return native(() => this.#native.inspect(leases, channels, this.#reading()));
  }

  /** The published document of a target (validated, in the store's profile), or throws NOT_PUBLISHED. */
  readProjection(targetId) {
    return native(() => this.#native.readProjection(targetId)).document;
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
function adoptJsWriterTables(db, tuples, options = {}) {
  requireDatabase(db, 'adoptJsWriterTables');
  // Everything of the host's read once, its callbacks (getters, toJSON, the clock) run, before
  // the transaction state is looked at.
  const host = native(() => {
    const copy = fieldsOf(options, ['clock', 'channels', 'profile'], 'adoptJsWriterTables: options');
    const { clock, channels = [] } = copy;
    const profile = profileOf(copy, 'adoptJsWriterTables');
    if (!Array.isArray(channels)) throw coded('INVALID_INPUT', 'adoptJsWriterTables: options.channels must be the store\'s channel registry (an array)');
    const channelsJson = jsonText(channels, 'adoptJsWriterTables: options.channels');
    const tuplesJson = jsonText(tuples, 'adoptJsWriterTables: the tuples');
    return { profile, channelsJson, tuplesJson, nowMs: clock ? clock() : undefined };
  });
  refuseTransaction(db, 'the adoption');
  requireWal(db);
  const run = db.transaction(() => adoptOn(db, addon, native, host));
  try {
    return durably(db, () => run.immediate());
  } catch (e) {
    throw sqliteError(e);
  }
}

/** The target id (64 hex) of an attested tuple (an object with its seven camelCase fields). */
function targetId(tuple) {
  return targetIdFor(GENERIC_PROFILE, tuple);
}

/**
 * The target id of an attested tuple in a store of `profile`: 64 hex digits for the generic
 * profile, 32 for the Memory Core's ('live-lane-awareness-projection.v1', the id its own
 * writer derives).
 */
function targetIdFor(profile, tuple) {
  const text = jsonText(tuple, 'tuple');
  return native(() => addon.targetId(text, profile)).targetId;
}

/**
 * Reads and validates `<runtimeRoot>/hook-projections/<targetId>/current.json` in the format of
 * `profile` (the generic one when absent; a Memory Core document is checked for its format,
 * epoch and target — judging it further is the hooks' reader's work).
 */
function readProjection(runtimeRoot, targetId, profile) {
  return native(() => addon.readProjection(runtimeRoot, targetId, profile)).document;
}

/**
 * The options of `acquire` (`allowed` none) and `publishNow` and `publishManyNow`
 * (`consumerBinding`), copied once:
 * `{ token, ...allowed }` — `token` is the one a test chose (`{ [Symbol.for('solewriter.test.token')]:
 * hex }`), or undefined: a fresh one is drawn. Any other option is refused (the first release's
 * `tokenHex` included).
 */
function optionsOf(options, allowed = []) {
  if (options === undefined) return Object.create(null);
  const refused = () => coded('INVALID_INPUT', 'acquire and publishNow (publishManyNow) take no options but consumerBinding');
  if (options === null || typeof options !== 'object') throw refused();
  if (readHost('the options', () => Object.keys(options)).some((k) => !allowed.includes(k))) throw refused();
  const copy = fieldsOf(options, [TEST_TOKEN, ...allowed], 'the options');
  copy.token = copy[TEST_TOKEN];
  return copy;
}

/**
 * The consumer binding of `publishManyNow`'s options (`publishNow`'s, read once), or undefined.
 * A batch draws a token for each target: a chosen one (the test seam) is refused.
 */
function batchBindingOf(options) {
  const copy = optionsOf(options, ['consumerBinding']);
  if (copy.token !== undefined) throw coded('INVALID_INPUT', 'publishManyNow draws a token for each target: a chosen token is refused');
  return copy.consumerBinding;
}

/**
 * The target ids of a batch, the host's array read once (its length and each element once):
 * INVALID_INPUT unless an array of strings.
 */
function targetsOf(targetIds) {
  const copy = readHost('the target ids', () => {
    if (!Array.isArray(targetIds)) return undefined;
    const { length } = targetIds;
    const ids = [];
    for (let i = 0; i < length; i++) ids.push(targetIds[i]);
    return ids;
  });
  if (copy === undefined || !copy.every((id) => typeof id === 'string')) {
    throw coded('INVALID_INPUT', 'publishManyNow takes an array of target ids (strings)');
  }
  return copy;
}

/** The consumer binding of `publish`'s options (read once), or undefined. */
function bindingOf(options) {
  if (options === undefined || options === null) return undefined;
  if (typeof options !== 'object') throw coded('INVALID_INPUT', 'publication options must be an object');
  return fieldsOf(options, ['consumerBinding'], 'publication options').consumerBinding;
}

/** The fields of a submission, each read once (`submit`). */
const SUBMISSION_FIELDS = ['targetId', 'channel', 'sourceWatermark', 'envelopeJson', 'capturedAt', 'expiresAt'];

/**
 * Runs `use(presented)` with `grant` spent (GRANT_SPENT if it already was): its value (or
 * promise). A failure carrying `grantUnused: true` (the publication did not use the grant: the
 * addon says so) hands the grant back, usable again; every other outcome leaves it spent.
 */
function spending(grant, use) {
  const { presented, giveBack } = spend(grant);
  const unused = (e) => {
    if (e !== null && typeof e === 'object' && e.grantUnused === true) giveBack();
    throw e;
  };
  let result;
  try {
    result = use(presented);
  } catch (e) {
    unused(e);
  }
  return result instanceof Promise ? result.catch(unused) : result;
}

module.exports = {
  ERROR_CODES,
  initialize,
  Grant,
  ProjectLock,
  ProjectLockGuard,
  WriteGuard,
  admitWrite,
  parseBridgeFrame,
  parseAgentEnvelope,
  Ledger,
  adoptJsWriterTables,
  ProjectionStore,
  targetId,
  targetIdFor,
  readProjection,
  executeSqlEffect,
  SQL,
};
