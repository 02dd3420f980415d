/**
 * ESM entry point of `solewriter/testing`: `testStore(Database)`, a test's WAL database and
 * projection root in a temporary directory of its own (see lib/testing.js).
 */
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const testing = require('./lib/testing.js');

export const { testStore } = testing;
export default testing;
