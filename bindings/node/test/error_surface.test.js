'use strict';
/**
 * The codes of the errors a caller sees: only the package's own errors pass as they are — a
 * host's error that looks like one (a solewriter code, even the package's old global mark) is
 * the host's, `HOST`.
 */

const test = require('node:test');
const assert = require('node:assert/strict');
const solewriter = require('..');
const { ProjectionStore, WriteGuard } = solewriter;
const { setup, tuple } = require('./helpers');

/** A host's error dressed as solewriter's: its code, and the mark the package once used. */
function forged() {
  return Object.assign(new Error('forged by the host'), { code: 'BUSY', [Symbol.for('solewriter.error')]: 'BUSY' });
}

test("a host callback's error dressed as the package's is the host's: HOST, never BUSY", async () => {
  const { db, store } = setup();
  const t = store.admitTarget(tuple(0));
  const host = (e) => e.code === 'HOST' && /forged by the host/.test(e.message);
  const clocked = new ProjectionStore(db, { ...store.config, clock: () => { throw forged(); } });
  assert.throws(() => clocked.acquire(t, 'holder-1'), host);
  assert.throws(() => clocked.publishNow(t, 'holder-1'), host);
  await assert.rejects(clocked.publishNowAsync(t, 'holder-1'), host);
  assert.throws(() => solewriter.adoptJsWriterTables(db, [], { clock: () => { throw forged(); } }), host);
  const context = { agentId: 'a', sessionId: 's' };
  const parentOf = () => {
    throw forged();
  };
  assert.throws(() => new WriteGuard().admitWrite({ context, componentId: 'x', parentOf }), host);
  assert.equal(db.inTransaction, false);
});
