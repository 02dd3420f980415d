/**
 * ESM entry point of `solewriter/memory-core`: the Memory Core's writer on solewriter (see
 * lib/memory-core-writer.js), so the Memory Core switches by changing one import.
 */
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const memoryCore = require('./lib/memory-core-writer.js');

export const { makeHookProjectionWriter, deriveTargetId, TARGET_TUPLE_FIELDS, PROFILE } = memoryCore;
export default memoryCore;
