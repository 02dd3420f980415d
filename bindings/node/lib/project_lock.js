'use strict';
/**
 * The project lock for Node hosts: one sole writer per project directory. It is the Rust
 * `ProjectLock` (`project_lock/src/`: a kernel `flock` on `project.lock.kernel` plus the
 * lock record `project.lock`, dead owners recovered race-free), run by the addon with the
 * system process probe, so a Node process and a Rust process (`solewriter lock …`, the Rust
 * API) exclude each other on the same directory.
 *
 * Every call is synchronous; `acquire` with `{ wait: { timeoutMs } }` blocks the event loop
 * for at most that long while a live owner holds the lock (there is no default wait).
 */

const { native } = require('./answer');
const { fieldsOf, jsonText } = require('./copy');

/** The classes over the loaded `addon`. */
function projectLockClasses(addon) {
  /** A held project lock: `record` (owner, guard, nonce, acquiredAt), `verify()`, `release()`. */
  class ProjectLockGuard {
    /** The addon's guard: private, so no caller can reach it but through `verify` and `release`. */
    #native;

    constructor(guard) {
      this.#native = guard;
      this.record = native(() => guard.record());
    }

    /** Returns while this guard still holds the lock; throws LOCK_LOST otherwise. */
    verify() {
      native(() => this.#native.verify());
    }

    /**
     * Removes the record if it still carries this acquisition's nonce, then lets the kernel
     * lock go: `{ removed: true }` or `{ notHolder: { found } }` (the record found, or null).
     */
    release() {
      return native(() => this.#native.release());
    }
  }

  /** The project lock of directory `dir` (`recordOnly`: no kernel lock). */
  class ProjectLock {
    /** The addon's lock: private, so every call into it goes through this class's checks. */
    #native;

    constructor(dir, options = {}) {
      const { recordOnly = false } = fieldsOf(options, ['recordOnly'], 'ProjectLock: options');
      this.#native = native(() => new addon.NativeProjectLock(dir, recordOnly));
    }

    /**
     * Takes the lock: `{ wait: 'noWait' }` (a live owner is BUSY at once) or `{ wait: {
     * timeoutMs } }` (waits for a live owner at most that long, blocking; a dead owner is
     * recovered at once). A guard, or throws BUSY (with `owner`), UNKNOWN_OWNER,
     * MALFORMED_LOCK, ... — and INVALID_INPUT without a `wait`.
     */
    acquire(options) {
      const text = jsonText(options ?? {}, 'acquire: the options');
      return new ProjectLockGuard(native(() => this.#native.acquire(text)));
    }

    /** `{ lock, kernel, record, ownership }`, read without writing (the Rust `LockStatus`). */
    status() {
      return native(() => this.#native.status());
    }

    /**
     * Removes the record carrying `nonce` if its owner is unknown from here (`clear_unknown`):
     * `{ removed: record }` or `{ noLock: true }`; throws CLEAR_REFUSED (`refused`: 'held' |
     * 'known' | 'nonce-mismatch', with the `record`) having removed nothing.
     */
    clear(nonce) {
      return native(() => this.#native.clear(nonce));
    }
  }

  return { ProjectLock, ProjectLockGuard };
}

module.exports = { projectLockClasses };
