'use strict';
/**
 * The event ledger for Node hosts (seed 003): the Rust `Ledger` over the Git source, run by the
 * addon with the system process probe, so a Node process, a Rust process and `solewriter
 * ledger …` share one snapshot and one project lock.
 *
 * What blocks, and on what (every call is synchronous but `demandAsync` and `buildAsync`, the
 * same calls run on the libuv thread pool, whose `git` runs and wait leave the event loop free):
 * - `demand(query)` never waits for a writer: it reads the snapshot without the lock, runs
 *   `git` for facts the snapshot lacks, and only then tries the lock once, without waiting —
 *   free, it persists them; held by a live writer, it answers anyway and discards them. A
 *   query that needs no fact (`heads: []`) runs no `git`, reads no snapshot, takes no lock.
 * - `build(query)` is the sole writer: it waits for a live writer as its `wait` allows
 *   (`'noWait'` or `{ timeoutMs }`, required), then runs `git` for what is missing.
 * - `resolve(rev)` runs `git` only; `status()` reads the snapshot and the lock's state without
 *   `git`, without writing (a free kernel lock is taken for the moment of the look).
 */

const { coded, native } = require('./answer');
const { fieldsOf, jsonText } = require('./copy');

/** The options as JSON text, or INVALID_INPUT. */
function text(value, what) {
  if (value === null || typeof value !== 'object') throw coded('INVALID_INPUT', `${what} must be an object`);
  return jsonText(value, what);
}

/** The ledger classes over the loaded `addon`. */
function ledgerClasses(addon) {
  /** The ledger of project directory `dir` over the Git repository `repo`. */
  class Ledger {
    /** The addon's ledger: private, so every call into it goes through this class's checks. */
    #native;

    /**
     * `options`: `{ recordOnly }` (no kernel lock) and `gitEnv` (more environment for every
     * `git` run, e.g. `{ GIT_CONFIG_GLOBAL: '/dev/null' }`).
     */
    constructor(options) {
      const { dir, repo, recordOnly = false, gitEnv = {} } = fieldsOf(options, ['dir', 'repo', 'recordOnly', 'gitEnv'], 'Ledger: options');
      if (typeof dir !== 'string' || typeof repo !== 'string') throw coded('INVALID_INPUT', 'Ledger: dir and repo must be strings');
      if (typeof recordOnly !== 'boolean') throw coded('INVALID_INPUT', 'Ledger: recordOnly must be a boolean');
      const env = text(gitEnv, 'gitEnv');
      this.#native = native(() => new addon.NativeLedger(dir, repo, recordOnly, env));
    }

    /** The commit id (hex) `rev` names now. */
    resolve(rev) {
      if (typeof rev !== 'string') throw coded('INVALID_INPUT', 'resolve: rev must be a string');
      return native(() => this.#native.resolve(rev)).oid;
    }

    /** The demand read: `{ history, persisted }`; never waits for a live writer. */
    demand(query) {
      const json = text(query, 'the query');
      return native(() => this.#native.demand(json));
    }

    /** The build transaction under the project lock: `{ history, persisted }`. */
    build(query) {
      const json = text(query, 'the query');
      return native(() => this.#native.build(json));
    }

    /**
     * `demand` on the libuv thread pool: a promise of the same answer (rejected with the same
     * coded errors). Its `git` runs do not block the event loop.
     */
    async demandAsync(query) {
      const json = text(query, 'the query');
      return await native(() => this.#native.demandAsync(json));
    }

    /**
     * `build` on the libuv thread pool: a promise of the same answer. Its wait for a live
     * writer and its `git` runs occupy a pool thread, not the event loop.
     */
    async buildAsync(query) {
      const json = text(query, 'the query');
      return await native(() => this.#native.buildAsync(json));
    }

    /** `{ snapshot, lock }`: what is stored and who holds the lock, writing nothing. */
    status() {
      return native(() => this.#native.status());
    }
  }

  return { Ledger };
}

module.exports = { ledgerClasses };
