'use strict';
/**
 * A Node process that holds the project lock of a directory: it acquires it, prints
 * `acquired <nonce>`, and holds it until one line arrives on stdin (then releases it and
 * prints `released`) or until it is killed.
 *
 * usage: node lock_holder_node.js DIR
 */

const readline = require('node:readline');
const { ProjectLock } = require('..');

const guard = new ProjectLock(process.argv[2]).acquire({ wait: 'noWait' });
process.stdout.write(`acquired ${guard.record.nonce}\n`);
readline.createInterface({ input: process.stdin }).once('line', () => {
  guard.release();
  process.stdout.write('released\n');
  process.exit(0);
});
