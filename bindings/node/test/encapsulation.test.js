'use strict';
/**
 * The public classes hold the addon's machinery privately: an instance of `ProjectionStore`,
 * `ProjectLock`, `ProjectLockGuard`, `WriteGuard`, `Ledger` or `Grant` shows exactly the members
 * `index.d.ts` declares — no handle on a native object (`store.native`, which a caller with an
 * executor of its own could drive past every check), no executor, no connection — whether looked
 * at by name, by `Object.keys`, by `Reflect.ownKeys` or on its prototype.
 */

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { ProjectionStore, ProjectLock, ProjectLockGuard, WriteGuard, Ledger, Grant } = require('..');
const { setup, scratch, tuple } = require('./helpers');

/** The members `index.d.ts` declares in `class name`, but its constructor: `{ fields, methods, statics }`. */
function declared(name) {
  const types = fs.readFileSync(path.join(__dirname, '..', 'index.d.ts'), 'utf8');
  const start = types.indexOf(`export class ${name} {`);
  assert.notEqual(start, -1, `index.d.ts declares class ${name}`);
  const body = types.slice(start, types.indexOf('\n}\n', start));
  const members = { fields: [], methods: [], statics: [] };
  for (const [, modifier, member, kind] of body.matchAll(/^ {2}(readonly |static |private )?(\w+)\??([(:])/gm)) {
    if (member === 'constructor') continue;
    if (modifier === 'static ') members.statics.push(member);
    else members[kind === '(' ? 'methods' : 'fields'].push(member);
  }
  return members;
}

/** Asserts `instance` of class `name` shows only what index.d.ts declares, and none of `handles`. */
function showsOnlyDeclared(name, instance, handles) {
  const { fields, methods, statics } = declared(name);
  const Class = instance.constructor;
  assert.deepEqual(Reflect.ownKeys(instance).sort(), [...fields].sort(), `${name}: own keys`);
  assert.deepEqual(Object.keys(instance).sort(), [...fields].sort(), `${name}: Object.keys`);
  const own = Reflect.ownKeys(Class.prototype).filter((k) => k !== 'constructor' && typeof k === 'string');
  assert.deepEqual(own.sort(), [...methods].sort(), `${name}: prototype methods`);
  const staticKeys = Reflect.ownKeys(Class).filter((k) => !['length', 'name', 'prototype'].includes(k));
  assert.deepEqual(staticKeys.sort(), [...statics].sort(), `${name}: static members`);
  for (const handle of handles) assert.equal(instance[handle], undefined, `${name}: ${handle}`);
}

const HANDLES = ['native', 'execute', 'executor', 'db', 'channelsJson', 'dir', 'machine', 'turns', 'call', 'clockMs', 'outsideTransaction'];

test('a store, a lock, its guard, a write guard, a ledger and a grant show only their declared members', () => {
  const { store } = setup();
  const target = store.admitTarget(tuple(0));
  showsOnlyDeclared('ProjectionStore', store, HANDLES);
  const lock = new ProjectLock(scratch());
  showsOnlyDeclared('ProjectLock', lock, HANDLES);
  const guard = lock.acquire({ wait: 'noWait' });
  assert.ok(guard instanceof ProjectLockGuard);
  showsOnlyDeclared('ProjectLockGuard', guard, HANDLES);
  guard.release();
  showsOnlyDeclared('WriteGuard', new WriteGuard(), HANDLES);
  showsOnlyDeclared('Ledger', new Ledger({ dir: scratch(), repo: scratch() }), HANDLES);
  const grant = store.acquire(target, 'holder-1').granted;
  assert.ok(grant instanceof Grant);
  showsOnlyDeclared('Grant', grant, HANDLES);
});

test("a subclass cannot reach the store's executor: its own `executor` is never called", () => {
  const { db, store } = setup();
  const target = store.admitTarget(tuple(0));
  let called = false;
  class Rogue extends ProjectionStore {
    executor() {
      called = true;
      return () => ({ lease: undefined, written: true, channels: [] });
    }
  }
  const rogue = new Rogue(db, store.config);
  assert.ok(rogue.acquire(target, 'holder-1').granted);
  assert.equal(called, false);
});
