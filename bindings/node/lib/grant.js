'use strict';
/**
 * A lease grant as the holder keeps it: its target, epoch, holder and times in public fields,
 * and its raw holder token — the secret `acquire` drew from the OS (256 bits) — in a private
 * field that only `publish` and `release` read. The store keeps only the token's SHA-256, so a
 * process that can read `HookProjectionLeases` learns nothing it can present: the hash is never
 * a credential (`publish` hashes the token it is given and compares in constant time).
 *
 * The secret never leaves the object by accident: `JSON.stringify`, `util.inspect` (so
 * `console.log`) and spreading show only the public fields. A grant that must cross processes
 * or be kept by the host is exported explicitly (`exportSecret()`) and rebuilt with
 * `Grant.fromSecret()`; whoever holds that export holds the grant.
 *
 * A `Grant` object is used once: the first `publish`, `publishAsync` or `release` that reaches
 * the store spends it, whatever its outcome (published, fenced, failed, published but not
 * released, released or not the holder), and any later use of the same object throws
 * GRANT_SPENT without touching the store. Only a publication that did not use the grant hands
 * it back, usable again: one refused before it reached the store (IN_TRANSACTION, a refused
 * consumer binding, ...), or one the machine answers could not start (its error carries
 * `grantUnused: true`). The rule is per object: an export taken before the first use rebuilds
 * another object (`Grant.fromSecret`), which is not spent by this one's use — what stops any
 * copy from renaming twice under one epoch is the store's fence (a publication whose epoch is
 * not above the document in place is refused), not this flag. `exportSecret()` of a spent
 * grant throws GRANT_SPENT.
 */

const util = require('node:util');
const { coded } = require('./answer');
const { fieldsOf } = require('./copy');

const TOKEN = /^[0-9a-f]{64}$/;
/** The fields of an exported grant (`exportSecret`), each read once by `Grant.fromSecret`. */
const EXPORTED_FIELDS = ['targetId', 'epoch', 'holder', 'acquiredAt', 'expiresAt', 'token'];
const TARGET = /^(?:[0-9a-f]{32}|[0-9a-f]{64})$/;

/** Reads the token of a grant: defined in the class's static block, so only this module has it. */
let tokenOf;

/** Spends a grant for one use: `{ presented, giveBack }` (defined in the static block). */
let spendOf;

/** The error of a second use of one `Grant` object. */
function spent() {
  return coded(
    'GRANT_SPENT',
    'this Grant was already used by a publish, publishAsync or release (a Grant is spent by its first use); acquire a new grant; nothing was done',
  );
}

class Grant {
  #token;
  #targetId;
  #epoch;
  /** Whether a publication or a release took this object (`spendOf`). */
  #spent = false;

  /** Made by `acquire` or `Grant.fromSecret`; the fields of an exported grant. */
  constructor({ targetId, epoch, holder, acquiredAt, expiresAt, token }) {
    if (typeof targetId !== 'string' || !TARGET.test(targetId)) {
      throw coded('INVALID_INPUT', 'grant: targetId must be 32 or 64 lowercase hex characters');
    }
    for (const [name, value] of Object.entries({ epoch, acquiredAt, expiresAt })) {
      if (!Number.isSafeInteger(value) || value < 0) {
        throw coded('INVALID_INPUT', `grant: ${name} must be a non-negative safe integer`);
      }
    }
    if (typeof holder !== 'string') throw coded('INVALID_INPUT', 'grant: holder must be a string');
    if (typeof token !== 'string' || !TOKEN.test(token)) {
      throw coded('INVALID_INPUT', 'grant: token must be 64 lowercase hex characters (the raw token, never its hash)');
    }
    this.targetId = targetId;
    this.epoch = epoch;
    this.holder = holder;
    this.acquiredAt = acquiredAt;
    this.expiresAt = expiresAt;
    this.#token = token;
    // What is presented to the store is kept privately too: never read back from the public
    // fields (a subclass could make them accessors).
    this.#targetId = targetId;
    this.#epoch = epoch;
    Object.freeze(this);
  }

  static {
    // A brand check, not `instanceof`: a Proxy, an `Object.create(Grant.prototype)` or a
    // `Symbol.hasInstance` trick passes `instanceof` but has no token of its own.
    tokenOf = (grant) => (grant !== null && typeof grant === 'object' && #token in grant ? grant.#token : undefined);
    spendOf = (grant) => {
      if (grant.#spent) throw spent();
      grant.#spent = true;
      return {
        presented: { targetId: grant.#targetId, epoch: grant.#epoch, token: grant.#token },
        giveBack: () => {
          grant.#spent = false;
        },
      };
    };
  }

  /** A grant exported by `exportSecret()` (in this or another process). */
  static fromSecret(exported) {
    if (exported === null || typeof exported !== 'object') {
      throw coded('INVALID_INPUT', 'Grant.fromSecret takes what exportSecret() returned');
    }
    return new Grant(fieldsOf(exported, EXPORTED_FIELDS, 'Grant.fromSecret: the export'));
  }

  /**
   * The grant with its secret, as a plain object `{ targetId, epoch, holder, acquiredAt,
   * expiresAt, token }`, for a host that must hand it to another process or keep it: whoever
   * holds it can publish and release in the holder's place until the grant ends.
   */
  exportSecret() {
    if (this.#spent) throw spent();
    return { ...this.toJSON(), token: this.#token };
  }

  /** The public fields only: what `JSON.stringify` writes. */
  toJSON() {
    const { targetId, epoch, holder, acquiredAt, expiresAt } = this;
    return { targetId, epoch, holder, acquiredAt, expiresAt };
  }

  [util.inspect.custom](depth, options, inspect) {
    return `Grant ${inspect({ ...this.toJSON(), token: '[redacted]' }, options)}`;
  }
}

/**
 * Refuses (INVALID_INPUT) anything but a `Grant` presented to `publish` or `release`, a plain
 * object carrying a token hash included. Reads nothing of it but its brand.
 */
function requireGrant(grant) {
  if (tokenOf(grant) === undefined) {
    throw coded(
      'INVALID_INPUT',
      'a grant must be the Grant acquire returned (or Grant.fromSecret of its export); a plain object is not a credential',
    );
  }
}

/**
 * Spends `grant` (a `Grant`, `requireGrant` checked) for the use about to reach the store, or
 * throws GRANT_SPENT: `{ presented, giveBack }` — `presented` is what the addon needs, `{
 * targetId, epoch, token }` (from the private fields), `giveBack()` makes it usable again (a
 * publication that did not use it).
 */
function spend(grant) {
  return spendOf(grant);
}

module.exports = { Grant, requireGrant, spend };
