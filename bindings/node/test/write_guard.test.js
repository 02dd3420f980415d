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
const { WriteGuard, admitWrite, parseBridgeFrame, parseAgentEnvelope } = require('..');
const { scratch } = require('./helpers');

/** app ─ panel ─ left, right; app ─ toolbar. */
const TREE = { app: null, panel: 'app', left: 'panel', right: 'panel', toolbar: 'app' };
const parentOf = (id) => (Object.hasOwn(TREE, id) ? TREE[id] : undefined);
const ctx = (agentId, sessionId) => ({ agentId, sessionId });
const lock = (agentId, sessionId, ...subtreePath) => ({ agentId, sessionId, subtreePath });
const RPC = { jsonrpc: '2.0', id: 1, method: 'set_instance_properties', params: { id: 'left', properties: {} } };

test('frames: an agent message, a legacy frame, a disconnect; a malformed envelope is never legacy', () => {
  const frame = { type: 'agent_message', agentId: 'a', sessionId: 's', message: RPC };
  const parsed = parseBridgeFrame(frame);
  assert.deepEqual(parsed, { type: 'message', jsonrpc: RPC, context: ctx('a', 's') });
  assert.equal(parsed.jsonrpc, RPC, 'the host keeps its own message object');
  assert.deepEqual(parseBridgeFrame(JSON.stringify(frame)).jsonrpc, RPC, 'text frames parse the same');
  assert.deepEqual(parseAgentEnvelope(RPC), { jsonrpc: RPC, context: null });
  assert.equal(parseAgentEnvelope(RPC).jsonrpc, RPC);
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
  assert.deepEqual(admit(null, 'left'), { admitted: true, reason: 'legacy', lock: null });
  assert.deepEqual(admit(ctx('a', 's'), 'left'), { admitted: true, reason: 'granted', lock: lock('a', 's', 'app', 'panel', 'left') });
  assert.deepEqual(admit(ctx('a', 's'), 'left'), { admitted: true, reason: 'reentrant', lock: lock('a', 's', 'app', 'panel', 'left') });
  const denied = (reason, answer) => {
    assert.equal(answer.admitted, false);
    assert.equal(answer.reason, reason);
    assert.equal(typeof answer.message, 'string');
    return answer;
  };
  for (const half of [ctx('a', null), ctx('', 's'), { agentId: 'a' }, 'a#s', 42, []]) {
    denied('incomplete-identity', admit(half, 'left'));
  }
  for (const target of ['nowhere', 'a/b', '']) denied('unresolvable-target', admit(ctx('b', 's'), target));
  denied(
    'unresolvable-target',
    admitWrite({ context: ctx('b', 's'), componentId: 'x', parentOf: (id) => (id === 'x' ? 'y' : 'x'), writeGuard }),
  );
  denied('no-write-guard', admit(ctx('b', 's'), 'right', null));
  assert.deepEqual(admit(null, 'right', null), { admitted: true, reason: 'legacy', lock: null });
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
  return { writeGuard, props, gates, swept, server, close };
}

/** An agent on its own connection: `call(message)` answers its reply. */
async function connect(socketPath, agentId) {
  const socket = net.connect(socketPath);
  const lines = readline.createInterface({ input: socket })[Symbol.asyncIterator]();
  socket.write(`${JSON.stringify({ hello: agentId })}\n`);
  const { sessionId } = JSON.parse((await lines.next()).value);
  let next = 0;
  const send = (id, properties, hold = false) => {
    const message = { jsonrpc: '2.0', id: ++next, method: 'set_instance_properties', params: { id, properties, hold } };
    socket.write(`${JSON.stringify(message)}\n`);
    return message.id;
  };
  const call = async (id, properties) => {
    send(id, properties);
    return JSON.parse((await lines.next()).value);
  };
  return { socket, sessionId, send, call, lines };
}

test('two agents on two connections edit one tree: overlap denied and unchanged, disjoint admitted, a swept writer in flight refused', async () => {
  const h = heap();
  const socketPath = path.join(scratch(), 'bridge.sock');
  await new Promise((resolve) => h.server.listen(socketPath, resolve));
  try {
    const a = await connect(socketPath, 'agent-a');
    const b = await connect(socketPath, 'agent-b');
    assert.equal((await a.call('left', { text: 'A' })).reason, 'granted');
    const overlap = await b.call('panel', { layout: 'B' });
    assert.equal(overlap.admitted, false);
    assert.equal(overlap.reason, 'conflict');
    assert.deepEqual(overlap.conflict, lock('agent-a', a.sessionId, 'app', 'panel', 'left'));
    assert.deepEqual(h.props.panel, {}, 'the denied write changed nothing');
    assert.deepEqual((await b.call('right', { text: 'B' })).reason, 'granted');
    assert.deepEqual(h.props, { app: {}, panel: {}, left: { text: 'A' }, right: { text: 'B' }, toolbar: {} });
    // The same agent on another connection is another writer.
    const a2 = await connect(socketPath, 'agent-a');
    assert.equal((await a2.call('left', { text: 'A2' })).reason, 'conflict');
    a2.socket.end();
    // A's write to toolbar is parsed, then A's connection drops before it is admitted.
    const inFlight = a.send('toolbar', { text: 'late' }, true);
    while (!h.gates.has(inFlight)) await new Promise((resolve) => setImmediate(resolve));
    a.socket.destroy();
    while (h.swept.length < 2) await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(h.swept[1], [lock('agent-a', a.sessionId, 'app', 'panel', 'left')]);
    h.gates.get(inFlight)();
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(h.props.toolbar, {}, 'the swept writer wrote nothing');
    assert.deepEqual(h.writeGuard.heldLocks(), [lock('agent-b', b.sessionId, 'app', 'panel', 'right')], 'and holds nothing');
    assert.equal((await b.call('panel', { layout: 'B' })).reason, 'granted', "A's subtree is free again");
    assert.deepEqual(h.props.panel, { layout: 'B' });
    b.socket.end();
  } finally {
    await h.close();
  }
});
