'use strict';
/**
 * An agent process on its own Bridge connection: it connects to the Unix socket SOCKET, says
 * hello as AGENT_ID, prints the session id the Bridge gave it (`session <id>`), then for each
 * stdin line `{ "write": id, "properties": {...}, "hold": bool }` sends one
 * `set_instance_properties` message and prints the Bridge's reply as one JSON line (a `hold`
 * write's reply comes only once the heap lets it through).
 *
 * usage: node agent_client.js SOCKET AGENT_ID
 */

const net = require('node:net');
const readline = require('node:readline');

const [socketPath, agentId] = process.argv.slice(2);
const socket = net.connect(socketPath);
let next = 0;
socket.write(`${JSON.stringify({ hello: agentId })}\n`);
readline.createInterface({ input: socket }).on('line', (line) => {
  const reply = JSON.parse(line);
  process.stdout.write(reply.sessionId ? `session ${reply.sessionId}\n` : `${line}\n`);
});
readline.createInterface({ input: process.stdin }).on('line', (line) => {
  const { write, properties, hold = false } = JSON.parse(line);
  const message = { jsonrpc: '2.0', id: ++next, method: 'set_instance_properties', params: { id: write, properties, hold } };
  socket.write(`${JSON.stringify(message)}\n`);
});
socket.on('close', () => process.exit(0));
