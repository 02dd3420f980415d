/** ESM entry point of solewriter for Node: the CommonJS module's exports (see index.js). */
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const solewriter = require('./index.js');

export const { ERROR_CODES, initialize, adoptJsWriterTables, Grant, ProjectionStore, ProjectLock, ProjectLockGuard, WriteGuard, admitWrite, parseBridgeFrame, parseAgentEnvelope, Ledger, targetId, targetIdFor, readProjection, executeSqlEffect, SQL } = solewriter;
export default solewriter;
