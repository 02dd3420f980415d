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
 */

const { coded } = require('./addon');

/**
 * A null-prototype object of `fields`, each read once from `value` (through its prototype too,
 * as a property access reads it), or `code` ('INVALID_INPUT' unless told) saying `what` must be
 * an object.
 */
function fieldsOf(value, fields, what, code = 'INVALID_INPUT') {
  if (value === null || typeof value !== 'object') throw coded(code, `${what} must be an object`);
  const copy = Object.create(null);
  for (const field of fields) copy[field] = value[field];
  return copy;
}

/**
 * `value` cloned through JSON (undefined stays undefined), or `code` saying `what` is not JSON.
 * Its own enumerable properties and `toJSON` are read once, by the one `JSON.stringify`.
 */
function jsonCopy(value, what, code = 'INVALID_INPUT') {
  let text;
  try {
    text = JSON.stringify(value);
  } catch (e) {
    throw coded(code, `${what} is not JSON (${e.message}); nothing was done`);
  }
  return text === undefined ? undefined : JSON.parse(text);
}

module.exports = { fieldsOf, jsonCopy };
