'use strict';
/**
 * Reader side of the cross-language test: reads one target's current.json in a tight loop.
 *
 *     node churn-reader.js RUNTIME_ROOT TUPLE_JSON STOP_FILE
 *
 * Prints `ready` once it has read a first document, then checks every document it reads
 * until STOP_FILE exists and it has seen the epoch written there; then prints one JSON line of
 * counts: `reads`, `epochs` (distinct epochs seen), `regressions` (an epoch lower than the one
 * before), `errors` (by error code: torn, invalid, absent, …), `lastEpoch`. The test publishes
 * before it starts the readers, so the first read must succeed: if it fails, the reader prints
 * `error CODE: MESSAGE` instead of `ready` and exits 1 (rather than retrying forever, as it
 * would against a publisher of another format).
 */

const fs = require('node:fs');
const r = require('./solewriter-reader.js');

function main(root, tupleJson, stopFile) {
  const attested = JSON.parse(tupleJson);
  const epochs = new Set();
  const errors = {};
  let reads = 0;
  let regressions = 0;
  let last = -1;
  let stop = null;
  while (stop === null || last < stop) {
    if (stop === null && fs.existsSync(stopFile)) stop = Number(fs.readFileSync(stopFile, 'utf8'));
    let epoch;
    try {
      epoch = r.readCurrent(root, attested).document.fencingEpoch;
    } catch (e) {
      if (!(e instanceof r.ReaderError)) throw e;
      if (reads === 0) {
        fs.writeSync(1, `error ${e.code}: ${e.message}\n`);
        process.exit(1);
      }
      errors[e.code] = (errors[e.code] || 0) + 1;
      continue;
    }
    if (reads === 0) fs.writeSync(1, 'ready\n');
    reads += 1;
    if (epoch < last) regressions += 1;
    epochs.add(epoch);
    last = epoch;
  }
  return { reads, epochs: epochs.size, regressions, errors, lastEpoch: last };
}

fs.writeSync(1, `${JSON.stringify(main(...process.argv.slice(2, 5)))}\n`);
