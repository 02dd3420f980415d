'use strict';
/**
 * Host objects are read once. Whatever a host hands to an entry point (a submission, options, a
 * configuration, a tuple, a consumer binding) is copied here into plain values before anything
 * is decided: each property read exactly once, into a fresh null-prototype object, or the whole
 * value cloned through JSON (its getters and `toJSON` run once, here). Every later step — the
 * rows looked up, the checks, the addon's decision — uses only the copy, so a getter that
 * answers differently on each read cannot make two steps of one call see two values.
 *
 * The copies are made first, before the connection's transaction state is looked at: a host
 * callback run while copying (a getter, a `toJSON`) that opens a transaction is then refused
 * (IN_TRANSACTION), never rolled back by solewriter.
 *
 * A host object that cannot be read or serialized (a getter or `toJSON` that throws, a Proxy
 * whose traps throw, a `BigInt`) is a wrong argument, INVALID_INPUT — INVALID_CONFIG for a
 * store's configuration — whatever it threw.
 */

const { coded } = require('./addon');

/** The message of whatever a host's code threw. */
function messageOf(thrown) {
  return thrown instanceof Error ? thrown.message : String(thrown);
}

/**
 * What `read()` returns — a look at a host object: its getters, a Proxy's traps — or `code`
 * ('INVALID_INPUT' unless told) saying `what` cannot be read. An argument (or a configuration)
 * that throws when it is read is a wrong one, whatever it threw: never an error passed on.
 */
function readHost(what, read, code = 'INVALID_INPUT') {
  try {
    return read();
  } catch (e) {
    throw coded(code, `${what} cannot be read (${messageOf(e)}); nothing was done`);
  }
}

/**
 * A null-prototype object of `fields`, each read once from `value` (through its prototype too,
 * as a property access reads it), or `code` ('INVALID_INPUT' unless told) saying `what` must be
 * an object or cannot be read.
 */
function fieldsOf(value, fields, what, code = 'INVALID_INPUT') {
  if (value === null || typeof value !== 'object') throw coded(code, `${what} must be an object`);
  return readHost(
    what,
    () => {
      const copy = Object.create(null);
      for (const field of fields) copy[field] = value[field];
      return copy;
    },
    code,
  );
}

/**
 * The JSON text of `value` (undefined for undefined, a function or a symbol), or `code`
 * ('INVALID_INPUT' unless told) saying `what` is not JSON (a `BigInt`, a cycle, a throwing
 * getter or `toJSON`). Its own enumerable properties and `toJSON` are read once, by the one
 * `JSON.stringify`.
 */
function jsonText(value, what, code = 'INVALID_INPUT') {
  try {
    return JSON.stringify(value);
  } catch (e) {
    throw coded(code, `${what} is not JSON (${messageOf(e)}); nothing was done`);
  }
}

/** `value` cloned through JSON (undefined stays undefined), or `code` saying `what` is not JSON. */
function jsonCopy(value, what, code = 'INVALID_INPUT') {
  const text = jsonText(value, what, code);
  return text === undefined ? undefined : JSON.parse(text);
}

module.exports = { readHost, fieldsOf, jsonText, jsonCopy };
