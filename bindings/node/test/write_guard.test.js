'use strict';
/**
 * The subtree write guard from Node (seed 002): Bridge frames, every admission reason in the
 * seed's `{ admitted, reason, conflict }` shape, moves, the disconnect sweep as a barrier, and
 * two agents on two real socket connections editing one component tree through a Bridge and a
 * Client written the way the seed's heap wires them.
 */

const test = require('node:test');
const assert = require('node:assert/strict');
const net = require('node:net');
const path = require('node:path');
const readline = require('node:readline');
const { spawn } = require('node:child_process');
const { WriteGuard, admitWrite, parseBridgeFrame, parseAgentEnvelope } = require('..');
const { scratch } = require('./helpers');

/** app ─ panel ─ left, right; app ─ toolbar. */
const TREE = { app: null, panel: 'app', left: 'panel', right: 'panel', toolbar: 'app' };
const parentOf = (id) => (Object.hasOwn(TREE, id) ? TREE[id] : undefined);
const ctx = (agentId, sessionId) => ({ agentId, sessionId });
const lock = (agentId, sessionId, ...subtreePath) => ({ agentId, sessionId, subtreePath });
const RPC = { jsonrpc: '2.0', id: 1, method: 'set_instance_properties', params: { id: 'left', properties: {} } };

test("an agent's message comes back as JSON.parse makes it: a __proto__ key is its own, a large id a number", () => {
  const text =
    '{"type":"agent_message","agentId":"a","sessionId":"s","message":' +
    '{"jsonrpc":"2.0","id":9007199254740993,"method":"m","params":{"__proto__":{"admin":true}}}}';
  const { jsonrpc } = parseBridgeFrame(text);
  assert.deepEqual(jsonrpc, JSON.parse(text).message);
  assert.ok(Object.hasOwn(jsonrpc.params, '__proto__'), 'an own property, as JSON.parse makes it');
  assert.equal(jsonrpc.params.admin, undefined, 'never the prototype of the params');
  assert.equal(typeof jsonrpc.id, 'number', 'a number, never a BigInt');
  assert.equal(JSON.stringify({ id: jsonrpc.id }), '{"id":9007199254740992}');
});

test('frames: an agent message, a legacy frame, a disconnect; a malformed envelope is never legacy', () => {
  const frame = { type: 'agent_message', agentId: 'a', sessionId: 's', message: RPC };
  const parsed = parseBridgeFrame(frame);
  assert.deepEqual(parsed, { type: 'message', jsonrpc: RPC, context: ctx('a', 's') });
  assert.notEqual(parsed.jsonrpc, RPC, 'a copy: what is admitted is what the core parsed');
  assert.deepEqual(parseBridgeFrame(JSON.stringify(frame)), parsed, 'text frames parse the same');
  assert.deepEqual(parseBridgeFrame(Buffer.from(JSON.stringify(frame))), parsed, 'and bytes, as UTF-8');
  assert.deepEqual(parseAgentEnvelope(RPC), { jsonrpc: RPC, context: null });
  // A frame object whose JSON form differs from what it holds is parsed as serialized: an
  // envelope hidden behind toJSON is legacy with the serialized message, never the held one.
  const disguised = { ...frame, toJSON: () => RPC };
  assert.deepEqual(parseBridgeFrame(disguised), { type: 'message', jsonrpc: RPC, context: null });
  assert.deepEqual(parseAgentEnvelope({ type: 'agent_message', agentId: 'a', message: RPC }).context, ctx('a', null));
  assert.deepEqual(parseBridgeFrame({ type: 'agent_disconnected', agentId: 'a', sessionId: 's' }), {
    type: 'disconnected',
    writer: ctx('a', 's'),
  });
  for (const bad of [
    { agentId: 'a', sessionId: 's', ...RPC }, // ids without the envelope type
    { type: 'agent_message', agentId: 7, sessionId: 's', message: RPC },
    { type: 'agent_message', agentId: 'a', sessionId: 's' },
    { type: 'agent_message', agentId: 'a', sessionId: 's', message: 'text' },
    { type: 'agent_disconnected', agentId: 'a' },
    { type: 'something_else', message: RPC },
    '{"not json',
    '[1]',
    Buffer.from([0xff, 0xfe]),
  ]) {
    assert.throws(() => parseBridgeFrame(bad), { code: 'MALFORMED_FRAME' }, JSON.stringify(bad));
  }
  assert.throws(() => parseAgentEnvelope({ type: 'agent_disconnected', agentId: 'a', sessionId: 's' }), {
    code: 'MALFORMED_FRAME',
  });
  assert.throws(() => parseBridgeFrame('x'.repeat((1 << 20) + 1)), { code: 'MALFORMED_FRAME' });
});

test('every admission reason, in the seed shape', () => {
  const writeGuard = new WriteGuard();
  const admit = (context, componentId, guard = writeGuard) => admitWrite({ context, componentId, parentOf, writeGuard: guard });
  assert.deepEqual(admit(null, 'left'), { admitted: true, reason: 'legacy', lock: null, conflict: null });
  assert.deepEqual(admit(undefined, 'left'), { admitted: true, reason: 'legacy', lock: null, conflict: null });
  const left = lock('a', 's', 'app', 'panel', 'left');
  assert.deepEqual(admit(ctx('a', 's'), 'left'), { admitted: true, reason: 'granted', lock: left, conflict: null });
  assert.deepEqual(admit(ctx('a', 's'), 'left'), { admitted: true, reason: 'reentrant', lock: left, conflict: null });
  const denied = (reason, answer) => {
    assert.equal(answer.admitted, false);
    assert.equal(answer.reason, reason);
    assert.equal(typeof answer.message, 'string');
    return answer;
  };
  // Present but malformed contexts, whatever their JSON form (NaN and Infinity serialize as
  // null, so does an object whose toJSON answers null): denied, never legacy.
  const nulled = { toJSON: () => null };
  const disguised = { agentId: 'a', sessionId: 's', toJSON: () => null };
  for (const half of [ctx('a', null), ctx('', 's'), { agentId: 'a' }, 'a#s', 42, [], NaN, Infinity, new Date(NaN), nulled, ctx('a', 7), false]) {
    denied('incomplete-identity', admit(half, 'left'));
  }
  for (const target of ['nowhere', 'a/b', '']) denied('unresolvable-target', admit(ctx('b', 's'), target));
  denied(
    'unresolvable-target',
    admitWrite({ context: ctx('b', 's'), componentId: 'x', parentOf: (id) => (id === 'x' ? 'y' : 'x'), writeGuard }),
  );
  assert.equal(admit(disguised, 'right').reason, 'granted', 'the ids are read from the object itself');
  assert.deepEqual(writeGuard.releaseWrite(lock('a', 's', 'app', 'panel', 'right')), { released: true });
  denied('no-write-guard', admit(ctx('b', 's'), 'right', null));
  denied('incomplete-identity', admit(NaN, 'right', null));
  assert.deepEqual(admit(null, 'right', null), { admitted: true, reason: 'legacy', lock: null, conflict: null });
  const before = writeGuard.heldLocks();
  const conflict = denied('conflict', admit(ctx('b', 's'), 'panel'));
  assert.deepEqual(conflict.conflict, lock('a', 's', 'app', 'panel', 'left'));
  conflict.conflict.subtreePath.length = 0;
  assert.deepEqual(writeGuard.heldLocks(), before, 'the conflict is a copy; the table is unchanged');
  assert.deepEqual(writeGuard.releaseAgent(ctx('a', 's')), [lock('a', 's', 'app', 'panel', 'left')]);
  denied('writer-disconnected', admit(ctx('a', 's'), 'toolbar'));
  assert.deepEqual(writeGuard.heldLocks(), []);
  // A parentOf that calls into the guard it is deriving for finds it unavailable.
  let nested;
  const reentrant = (id) => {
    nested ??= admitWrite({ context: ctx('c', 's'), componentId: 'app', parentOf, writeGuard });
    assert.throws(() => writeGuard.heldLocks(), { code: 'AUTHORITY_UNAVAILABLE' });
    assert.throws(() => writeGuard.releaseAgent(ctx('d', 's')), { code: 'AUTHORITY_UNAVAILABLE' });
    return parentOf(id);
  };
  assert.equal(admitWrite({ context: ctx('d', 's'), componentId: 'left', parentOf: reentrant, writeGuard }).reason, 'granted');
  denied('authority-unavailable', nested);
  assert.deepEqual(writeGuard.heldLocks(), [lock('d', 's', 'app', 'panel', 'left')], 'the nested call took nothing');
});

test('a parentOf that throws or answers nonsense fails the call with HOST and acquires nothing', () => {
  const writeGuard = new WriteGuard();
  for (const broken of [
    () => {
      throw new Error('tree unavailable');
    },
    () => 42,
    () => ({ parent: 'app' }),
  ]) {
    assert.throws(() => admitWrite({ context: ctx('a', 's'), componentId: 'left', parentOf: broken, writeGuard }), { code: 'HOST' });
  }
  assert.deepEqual(writeGuard.heldLocks(), []);
  assert.throws(() => admitWrite({ context: ctx('a', 's'), componentId: 'left', parentOf: 'app', writeGuard }), { code: 'INVALID_INPUT' });
  assert.throws(() => admitWrite({ context: ctx('a', 's'), componentId: 'left', parentOf, writeGuard: {} }), {
    code: 'INVALID_INPUT',
  });
  assert.throws(() => admitWrite(), { code: 'INVALID_INPUT' });
  assert.throws(() => writeGuard.admitWrite(null), { code: 'INVALID_INPUT' });
});

test('moves take both subtrees or neither; release frees exactly one lock', () => {
  const writeGuard = new WriteGuard();
  assert.equal(writeGuard.admitWrite({ context: ctx('b', 's'), componentId: 'toolbar', parentOf }).reason, 'granted');
  const move = (agent, node, under) => writeGuard.admitMove({ context: ctx(agent, 's'), nodeId: node, newParentId: under, parentOf });
  const refused = move('a', 'left', 'toolbar');
  assert.equal(refused.reason, 'conflict');
  assert.deepEqual(refused.conflict, lock('b', 's', 'app', 'toolbar'));
  assert.deepEqual(writeGuard.heldLocks(), [lock('b', 's', 'app', 'toolbar')], 'nothing of the move was kept');
  assert.deepEqual(move('a', 'left', 'right'), {
    admitted: true,
    from: lock('a', 's', 'app', 'panel', 'left'),
    to: lock('a', 's', 'app', 'panel', 'right', 'left'),
  });
  assert.equal(move('a', 'panel', 'left').reason, 'unresolvable-target', 'not under its own subtree');
  assert.equal(writeGuard.admitMove({ context: null, nodeId: 'left', newParentId: 'app', parentOf }).reason, 'incomplete-identity');
  assert.deepEqual(writeGuard.releaseWrite(lock('a', 's', 'app', 'panel', 'left')), { released: true });
  assert.deepEqual(writeGuard.releaseWrite(lock('a', 's', 'app', 'panel', 'left')), { released: false });
  assert.throws(() => writeGuard.releaseWrite(lock('a', null, 'app')), { code: 'INVALID_INPUT' });
  assert.throws(() => writeGuard.releaseWrite(lock('a', 's', 'a/b')), { code: 'INVALID_INPUT' });
  assert.throws(() => writeGuard.releaseAgent({ agentId: 'a' }), { code: 'INVALID_INPUT' });
});

/**
 * One heap behind a Bridge: every connection is an agent session (the first line names the
 * agent; the Bridge numbers the session), every later line a JSON-RPC message the Bridge stamps
 * into an `agent_message` frame; a closed connection becomes an `agent_disconnected` frame. The
 * Client parses each frame, lets a `hold` message wait for `gates[id]` between its parse and its
 * admission (a write in flight), admits, and mutates the tree's properties only when admitted.
 */
function heap() {
  const writeGuard = new WriteGuard();
  const props = Object.fromEntries(Object.keys(TREE).map((id) => [id, {}]));
  const gates = new Map();
  const swept = [];
  const refused = [];
  let sessions = 0;
  const connections = new Set();
  const client = async (frame, reply) => {
    const parsed = parseBridgeFrame(frame);
    if (parsed.type === 'disconnected') {
      swept.push(writeGuard.releaseAgent(parsed.writer));
      return;
    }
    const { jsonrpc, context } = parsed;
    const { id, properties, hold } = jsonrpc.params;
    if (hold) await new Promise((resolve) => gates.set(jsonrpc.id, resolve));
    const { admitted, reason, conflict } = admitWrite({ context, componentId: id, parentOf, writeGuard });
    if (admitted) Object.assign(props[id], properties);
    else refused.push(reason);
    reply({ id: jsonrpc.id, admitted, reason, conflict });
  };
  const server = net.createServer((socket) => {
    connections.add(socket);
    const sessionId = `session-${++sessions}`;
    let agentId = null;
    const reply = (answer) => socket.writable && socket.write(`${JSON.stringify(answer)}\n`);
    readline.createInterface({ input: socket }).on('line', (line) => {
      if (agentId === null) {
        agentId = JSON.parse(line).hello;
        return reply({ sessionId });
      }
      client(JSON.stringify({ type: 'agent_message', agentId, sessionId, message: JSON.parse(line) }), reply);
    });
    socket.on('close', () => client(JSON.stringify({ type: 'agent_disconnected', agentId, sessionId }), reply));
  });
  /** Drops every connection and stops listening. */
  const close = () => {
    for (const socket of connections) socket.destroy();
    return new Promise((resolve) => server.close(resolve));
  };
  return { writeGuard, props, gates, swept, refused, server, close };
}

/** An agent process (`agent_client.js`) on its own connection: `call` answers its reply. */
async function agent(socketPath, agentId) {
  const child = spawn(process.execPath, [path.join(__dirname, 'agent_client.js'), socketPath, agentId]);
  child.stderr.on('data', (d) => process.stderr.write(d));
  const lines = readline.createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const sessionId = /^session (.+)$/.exec((await lines.next()).value)[1];
  let sent = 0;
  const send = (write, properties, hold = false) => {
    child.stdin.write(`${JSON.stringify({ write, properties, hold })}\n`);
    return ++sent;
  };
  const call = async (write, properties) => {
    send(write, properties);
    return JSON.parse((await lines.next()).value);
  };
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  return { child, sessionId, send, call, exited };
}

test('two agent processes on two connections edit one tree: overlap denied and unchanged, disjoint admitted, a killed writer in flight refused', { timeout: 60000 }, async () => {
  const h = heap();
  const socketPath = path.join(scratch(), 'bridge.sock');
  await new Promise((resolve) => h.server.listen(socketPath, resolve));
  const agents = [];
  try {
    const a = await agent(socketPath, 'agent-a');
    const b = await agent(socketPath, 'agent-b');
    agents.push(a, b);
    assert.equal((await a.call('left', { text: 'A' })).reason, 'granted');
    const overlap = await b.call('panel', { layout: 'B' });
    assert.equal(overlap.admitted, false);
    assert.equal(overlap.reason, 'conflict');
    assert.deepEqual(overlap.conflict, lock('agent-a', a.sessionId, 'app', 'panel', 'left'));
    assert.deepEqual(h.props.panel, {}, 'the denied write changed nothing');
    assert.equal((await b.call('right', { text: 'B' })).reason, 'granted');
    assert.deepEqual(h.props, { app: {}, panel: {}, left: { text: 'A' }, right: { text: 'B' }, toolbar: {} });
    // The same agent on another connection is another writer.
    const a2 = await agent(socketPath, 'agent-a');
    agents.push(a2);
    assert.equal((await a2.call('left', { text: 'A2' })).reason, 'conflict');
    a2.child.stdin.end();
    a2.child.kill('SIGTERM');
    // A's write to toolbar is parsed, then A is killed before the write is admitted: its
    // connection drops, the Bridge's disconnect frame sweeps it, and the write, let through
    // after the sweep, is refused.
    const inFlight = a.send('toolbar', { text: 'late' }, true);
    while (!h.gates.has(inFlight)) await new Promise((resolve) => setTimeout(resolve, 5));
    a.child.kill('SIGKILL');
    assert.deepEqual(await a.exited, { code: null, signal: 'SIGKILL' });
    while (!h.swept.some((freed) => freed.length > 0)) await new Promise((resolve) => setTimeout(resolve, 5));
    assert.deepEqual(h.swept.find((freed) => freed.length > 0), [lock('agent-a', a.sessionId, 'app', 'panel', 'left')]);
    const before = h.refused.length;
    h.gates.get(inFlight)();
    while (h.refused.length === before) await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(h.refused.slice(before), ['writer-disconnected']);
    assert.deepEqual(h.props.toolbar, {}, 'the swept writer wrote nothing');
    assert.deepEqual(h.writeGuard.heldLocks(), [lock('agent-b', b.sessionId, 'app', 'panel', 'right')], 'and holds nothing');
    assert.equal((await b.call('panel', { layout: 'B' })).reason, 'granted', "A's subtree is free again");
    assert.deepEqual(h.props.panel, { layout: 'B' });
  } finally {
    for (const { child } of agents) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await h.close();
  }
});
