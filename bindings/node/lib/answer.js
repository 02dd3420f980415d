'use strict';
/**
 * The addon's answers as JS values: every native call answers JSON text, the outcome or
 * `{ error: { code, message, ...fields } }`, which becomes a thrown `Error` with that `code`
 * and those fields.
 */

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

module.exports = { coded, unwrap };
