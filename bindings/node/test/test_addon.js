'use strict';
/**
 * Required first by the test files whose holders choose their raw tokens (`tokens.js`): loads
 * the test build of the addon (`seams.node`, feature `test-seams`, built by `npm test`), the
 * only build that honours a chosen token. The machines, file steps and boundary are the same
 * code as the shipped addon's. An explicit SOLEWRITER_NODE_ADDON wins.
 */

const path = require('node:path');

process.env.SOLEWRITER_NODE_ADDON ||= path.join(__dirname, 'seams.node');
