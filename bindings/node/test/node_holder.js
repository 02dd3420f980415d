'use strict';
/**
 * A Node lease holder speaking the protocol of the CLI's hidden `holder` subcommand (one
 * command per stdin line, one answer line each): `acquire` → `acquired <epoch> <expires_at>` |
 * `held <epoch> <retry_after_ms>`; `publish` → `published <epoch> <bytes>` | `fenced <reason>`
 * | `expired`; `release` → `released` | `not-holder <reason>`; `quit` → `bye`. Anything else
 * failing answers `error <code> <message>`.
 *
 * usage: node node_holder.js CONFIG_JSON (dbPath, runtimeRoot, target, instance, leaseTtlMs,
 * channels, clockFile: a file holding the broker clock in ms, shared with the Rust holders;
 * stallAt: a publication step where `publish` answers `stalled <step>` and blocks, inside its
 * transaction, until the process is killed).
 */

const fs = require('node:fs');
const readline = require('node:readline');
const Database = require('better-sqlite3');
const { ProjectionStore } = require('..');

const config = JSON.parse(process.argv[2]);
const db = new Database(config.dbPath, { timeout: 5000 });
const store = new ProjectionStore(db, {
  runtimeRoot: config.runtimeRoot,
  channels: config.channels,
  leaseTtlMs: config.leaseTtlMs,
  busyTimeoutMs: 5000,
  clock: () => Number(fs.readFileSync(config.clockFile, 'utf8').trim()),
  probe: (step) => {
    if (step !== config.stallAt) return;
    // Stalled inside the transaction, holding both locks, until killed.
    fs.writeSync(1, `stalled ${step}\n`);
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
  },
});
let grant;

function fenced(e) {
  return e.currentEpoch === undefined ? e.reason : `${e.reason} ${e.currentEpoch}`;
}

function answer(command) {
  try {
    switch (command) {
      case 'acquire': {
        const r = store.acquire(config.target, config.instance);
        if (r.held) return `held ${r.held.epoch} ${r.held.retryAfterMs}`;
        grant = r.granted;
        return `acquired ${grant.epoch} ${grant.expiresAt}`;
      }
      case 'publish': {
        const held = grant;
        grant = undefined;
        if (!held) return 'error no lease held (acquire first)';
        const p = store.publish(held);
        return `published ${p.epoch} ${p.bytes}`;
      }
      case 'release': {
        const held = grant;
        grant = undefined;
        if (!held) return 'error no lease held (acquire first)';
        const r = store.release(held);
        return r.released ? 'released' : `not-holder ${fenced(r.notHolder)}`;
      }
      default:
        return `error unknown command ${command}`;
    }
  } catch (e) {
    if (e.code === 'FENCED') return `fenced ${fenced(e)}`;
    if (e.code === 'LEASE_EXPIRED') return 'expired';
    if (e.code === 'BUSY') return 'busy';
    return `error ${e.code} ${String(e.message).replace(/\n/g, ' ')}`;
  }
}

const lines = readline.createInterface({ input: process.stdin });
lines.on('line', (line) => {
  const command = line.trim();
  if (command === 'quit') {
    process.stdout.write('bye\n');
    lines.close();
    return;
  }
  process.stdout.write(`${answer(command)}\n`);
});
lines.on('close', () => db.close());
