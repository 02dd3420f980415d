'use strict';
/**
 * The addon's answers as JS values: every native call answers JSON text, the outcome or
 * `{ error: { code, message, ...fields } }`, which becomes a thrown `Error` with that `code`
 * and those fields. The codes are solewriter's (UPPER_SNAKE, listed in docs/node.md); an error
 * the binding layer itself throws becomes one of them too (`native`), so a caller only ever
 * sees documented codes.
 */

/**
 * Every `code` an error of this package carries (docs/node.md says what each means): a call
 * throws an `Error` with one of these codes, never another.
 */
const ERROR_CODES = Object.freeze([
  // The caller's input.
  'INVALID_CONFIG',
  'INVALID_INPUT',
  'NOT_ADMITTED',
  'REJECTED',
  'DOCUMENT',
  // Contention worth retrying.
  'BUSY',
  'IN_TRANSACTION',
  // Lost authority.
  'FENCED',
  'LEASE_EXPIRED',
  'EPOCH_EXHAUSTED',
  'LOCK_LOST',
  // The store, the files or the environment.
  'FOREIGN_SCHEMA',
  'ADOPTION_REFUSED',
  'CORRUPT_ROW',
  'INCONSISTENT_LEASE',
  'SQLITE',
  'HOST',
  'IO',
  'UNSAFE_RUNTIME_DIR',
  'NOT_PUBLISHED',
  'READ',
  'RANDOM',
  'ADDON_MISSING',
  // Partial success.
  'NOT_DURABLE',
  'PUBLISHED_NOT_RELEASED',
  'RELEASE_FAILED',
  // The project lock.
  'KERNEL_LOCK_UNAVAILABLE',
  'CLEAR_REFUSED',
  'NO_DIRECTORY',
  'UNKNOWN_OWNER',
  'MALFORMED_LOCK',
  'RECOVERY_ABANDONED',
  'OWN_IDENTITY',
  'UNSAFE_LOCK_DIR',
  'LOCK', // a project lock error of a kind this build has no name for
  // The write guard.
  'MALFORMED_FRAME',
  'AUTHORITY_UNAVAILABLE',
  // The ledger.
  'SOURCE',
  'INTERPRETATION_MOVED',
  'FACT_CONFLICT',
  'SNAPSHOT_TOO_LARGE',
  'CONSUMER',
  'LEDGER', // a ledger error of a kind this build has no name for
  // A bug of solewriter's, caught at the native boundary instead of aborting the host.
  'INTERNAL',
]);

/** An `Error` with a `code` and more fields. */
function coded(code, message, fields) {
  return Object.assign(new Error(message), { code }, fields);
}

/** The addon's JSON answer, or its error thrown. */
function unwrap(text) {
  const value = JSON.parse(text);
  if (value.error) {
    const { code, message, ...fields } = value.error;
    throw coded(code, message, fields);
  }
  return value;
}

/** napi-rs's statuses (`InvalidArg`, `StringExpected`, ...): a value of the wrong type. */
const NAPI_STATUS = /^[A-Z][a-z]+(?:[A-Z][a-z]+)+$/;

/** Whether `message` is an answer of the addon's (JSON text with one of our codes). */
function nativeAnswer(message) {
  if (!message.startsWith('{"error":')) return false;
  try {
    return ERROR_CODES.includes(JSON.parse(message).error.code);
  } catch {
    return false;
  }
}

/**
 * Runs a call into the addon: its value (an answer's JSON text, or a native object), or its
 * error. The addon answers its own failures as text, so whatever it throws is an error of the
 * binding layer, which becomes one of ours: a failure a native constructor could only throw as
 * text (an answer's JSON, with one of our codes, as its message) is that answer's error; a
 * napi-rs status (an argument of the wrong type reached the addon) is INVALID_INPUT; anything
 * else escaped from a callback of the host's (an answer of the SQL executor the binding layer
 * could not read, a throwing clock) and is HOST.
 */
function native(call) {
  try {
    return call();
  } catch (e) {
    const message = e instanceof Error ? e.message : String(e);
    if (nativeAnswer(message)) unwrap(message);
    if (e instanceof Error && NAPI_STATUS.test(e.code)) {
      throw coded('INVALID_INPUT', `invalid argument (${e.code}): ${message}`);
    }
    throw coded('HOST', `a callback of the host failed inside solewriter: ${message}`);
  }
}

module.exports = { ERROR_CODES, coded, unwrap, native };
