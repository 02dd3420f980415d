'use strict';
/**
 * The addon's answers as JS values: every native call returns its value, or throws an `Error`
 * whose `code` is one of the package's (the addon's `errorCodes()`, listed in docs/node.md)
 * and whose other own properties are the failure's fields (a fencing `reason`, a lock's
 * `owner`, ...). An error the binding layer itself meets becomes one of those codes too
 * (`native`), so a caller only ever sees documented codes.
 */

const { addon, coded, isOwn } = require('./addon');

/**
 * Every `code` an error of this package carries, in the manual's order (docs/node.md says what
 * each means): a call throws an `Error` with one of these codes, never another. The list is
 * the addon's (`errorCodes()`, from the Rust enum that names each code once).
 */
const ERROR_CODES = Object.freeze(addon.errorCodes());

/** napi-rs's statuses (`InvalidArg`, `StringExpected`, ...): a value of the wrong type. */
const NAPI_STATUS = /^[A-Z][a-z]+(?:[A-Z][a-z]+)+$/;

/**
 * Runs a call into the addon: its value, or its error. The package's own errors (`isOwn`: the
 * addon's and `coded`'s) pass as they are; whatever else escapes is an error of the binding
 * layer, which becomes one of ours: a napi-rs status (an argument of the wrong type reached the
 * addon) is INVALID_INPUT; anything else escaped from a callback of the host's (a clock) and is
 * HOST, whatever code or mark it carries.
 */
function native(call) {
  try {
    return call();
  } catch (e) {
    if (isOwn(e) && ERROR_CODES.includes(e.code)) throw e;
    const message = e instanceof Error ? e.message : String(e);
    if (e instanceof Error && NAPI_STATUS.test(e.code)) {
      throw coded('INVALID_INPUT', `invalid argument (${e.code}): ${message}`);
    }
    throw coded('HOST', `a callback of the host failed inside solewriter: ${message}`);
  }
}

/**
 * A batch's answer (`publishManyNow`) as JS values: its `results`, one per target, each
 * `{ published }` or `{ held }` as the addon answered it, or `{ error }`: the target's failure,
 * which the addon carries as its fields, made the coded error (`code`, `message` and the other
 * fields) that `publishNow` would throw for that target.
 */
function batchResults({ results }) {
  return results.map((result) => {
    if (result.error === undefined) return result;
    const { code, message, ...fields } = result.error;
    return { error: coded(code, message, fields) };
  });
}

module.exports = { ERROR_CODES, coded, native, batchResults };
