'use strict';
/** The test-only option that chooses a holder's raw token (never a hash), for tests that must
 * give the reference model the same token: `chosenToken(hex)` as `acquire`'s options. */

const TEST_TOKEN = Symbol.for('solewriter.test.token');

/** The options of `acquire` / `publishNow` that choose the raw token `hex` (64 hex). */
function chosenToken(hex) {
  return { [TEST_TOKEN]: hex };
}

module.exports = { chosenToken };
