'use strict';
/**
 * One publication of the Memory Core's document, four ways, against the unfenced floor in the
 * same run: what a switch to solewriter costs the Memory Core per publication.
 *
 * - `floor`: the same document bytes written the plain atomic way (temp file, fsync, rename,
 *   directory fsync), no lease, no SQLite: the baseline every ratio is against.
 * - `publishNow` and `publishNowAsync`: solewriter's one-shot publication on a store of the
 *   Memory Core profile, on the host's better-sqlite3 connection opened the Memory Core's way
 *   (WAL, better-sqlite3's default `synchronous`); solewriter fsyncs its own commits whatever
 *   that level is (grant and release in one transaction, the temp file, the directory).
 * - `rust one-shot`: the Rust path — the same publication (`publish_now`) of the same document
 *   by the Rust store on its own connection (rusqlite, `synchronous = FULL`; the same 3 fsyncs),
 *   driven in the scripted `holder` of the `solewriter` binary named by the environment
 *   variable `SOLEWRITER_BIN` (required: `cargo build --release -p solewriter-cli` makes
 *   `target/release/solewriter`) over a pipe, one `publish-now` line per publication. Its
 *   store is made by this package (the same schema) and holds the same target and envelopes.
 *   `rust round trip` is a `ping` over the same pipe, and `rust one-shot − round trip` the Rust
 *   publication alone, which `publishNow` is compared with.
 * - `16 × publishNow` and `publishManyNow` / `publishManyNowAsync` (16 targets): the batch
 *   against as many one-shots, on one store of the Memory Core profile with 16 targets: one
 *   operation is the 16 targets' publications, by 16 `publishNow`s (16 transactions, 16
 *   commits) or by one batch (one transaction, one commit). Printed with the batch's ratio to
 *   the 16 one-shots and the time per target.
 * - `js writer (FULL)` and `js writer (NORMAL)`: the Memory Core's own JavaScript writer
 *   (`test/js_writer.js`: its statements, its composition, its atomic write) doing the same
 *   publication — acquire, then one immediate transaction that revalidates, composes, writes
 *   and releases — at `synchronous = FULL` (its commits fsynced: solewriter's durability) and
 *   at `NORMAL` (its WAL commits not fsynced until a checkpoint).
 *
 * usage: node bench/publication.js [--test] [DIR] [N]   (DIR: where the databases and runtime
 * roots go, default the OS temp directory — pick a disk, not tmpfs, to see the fsyncs; N:
 * publications of each kind, default 300, after 20 unmeasured). The kinds take turns, in 10
 * rounds of N/10 publications each, so a disk that slows down during the run slows every kind
 * alike. Prints the mean and p50 of each kind in µs and its ratio to the floor's mean, and the
 * ratios of `publishNow` to the Rust path and to the JS writer, and of the batch to the 16
 * one-shots; beside each kind, this
 * process's CPU time per operation (user + system, every thread, `process.cpuUsage`), and for
 * the Rust path the holder's own CPU time per publication (from `/proc`, Linux only). `--test`
 * runs one publication of each kind, as CI does for every benchmark here, and exits non-zero
 * on any error.
 */

const { execFileSync, spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { randomBytes } = require('node:crypto');
const { performance } = require('node:perf_hooks');
const { initialize, ProjectionStore } = require('..');
const js = require('../test/js_writer');
const { openMemoryCoreDb, PROFILE, TUPLE, BINDING, CHANNELS, frontier, route } = require('../test/memory_core_fixtures');

const TEST = process.argv.includes('--test');
const [dirArg, countArg] = process.argv.slice(2).filter((arg) => arg !== '--test');
const N = TEST ? 1 : Number(countArg || 300);
const WARMUP = TEST ? 0 : 20;
const ROUNDS = TEST ? 1 : 10;
const BIN = process.env.SOLEWRITER_BIN;
// The kernel's clock ticks per second, in which /proc counts CPU time (Linux only; elsewhere
// the holder's CPU is not read).
const CLOCK_TICKS = process.platform === 'linux' ? Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' })) : null;
if (!BIN) throw new Error('SOLEWRITER_BIN must name the solewriter binary (the Rust path), e.g. target/release/solewriter');
if (!Number.isInteger(N / ROUNDS) || N < ROUNDS) throw new Error(`N (${N}) must be a multiple of ${ROUNDS}`);
const base = fs.mkdtempSync(path.join(path.resolve(dirArg || os.tmpdir()), 'solewriter-publication-'));
process.on('exit', () => fs.rmSync(base, { recursive: true, force: true }));

const ENVELOPES = [frontier(), route({ n: 1 })];
/** The targets of a batch. */
const BATCH = 16;

/** A host database and runtime root under `name`. */
function host(name) {
  const dir = path.join(base, name);
  fs.mkdirSync(path.join(dir, 'runtime'), { recursive: true });
  return { db: openMemoryCoreDb(path.join(dir, 'host.sqlite')), runtimeRoot: path.join(dir, 'runtime') };
}

/**
 * A Memory Core profile store under `name`: `count` targets (the first of TUPLE, the others of
 * another agent each), both channels submitted to each.
 */
function memoryCoreStore(name, count = 1) {
  const { db, runtimeRoot } = host(name);
  initialize(db, { profile: PROFILE });
  const store = new ProjectionStore(db, { runtimeRoot, channels: CHANNELS, leaseTtlMs: 60_000, busyTimeoutMs: 5_000, profile: PROFILE });
  const targets = Array.from({ length: count }, (_, i) => {
    const target = store.admitTarget(i === 0 ? TUPLE : { ...TUPLE, agentId: `${TUPLE.agentId}-${i}` });
    for (const [producer, envelope, channel] of [
      ['frontier', ENVELOPES[0], 'lifecycle-frontier'],
      ['router', ENVELOPES[1], 'computed-route'],
    ]) {
      store.submit(producer, {
        targetId: target,
        channel,
        sourceWatermark: envelope.sourceWatermark,
        envelopeJson: JSON.stringify(envelope),
        capturedAt: Date.parse(envelope.capturedAt),
        expiresAt: Date.parse(envelope.expiresAt),
      });
    }
    return target;
  });
  return { db, runtimeRoot, store, target: targets[0], targets };
}

/** solewriter's Node path on a Memory Core profile store. */
function solewriter() {
  const { runtimeRoot, store, target } = memoryCoreStore('solewriter');
  const publish = () => store.publishNow(target, 'memory-core-1', { consumerBinding: BINDING }).published;
  const publishAsync = async () => (await store.publishNowAsync(target, 'memory-core-1', { consumerBinding: BINDING })).published;
  const document = () => fs.readFileSync(path.join(runtimeRoot, 'hook-projections', target, 'current.json'));
  return { publish, publishAsync, document };
}

/**
 * The publications of BATCH targets of one Memory Core profile store: `each`, one `publishNow`
 * per target; `many` and `manyAsync`, one batch of them all (`publishManyNow`,
 * `publishManyNowAsync`). Every target published, or it throws.
 */
function batches() {
  const { store, targets } = memoryCoreStore('batch', BATCH);
  const options = { consumerBinding: BINDING };
  const published = (results) => {
    const failed = results.find((r) => !r.published);
    if (failed) throw new Error(`a target was not published: ${failed.error ? failed.error.message : JSON.stringify(failed)}`);
  };
  const each = () => published(targets.map((target) => store.publishNow(target, 'memory-core-1', options)));
  const many = () => published(store.publishManyNow(targets, 'memory-core-1', options));
  const manyAsync = async () => published(await store.publishManyNowAsync(targets, 'memory-core-1', options));
  return { each, many, manyAsync };
}

/**
 * The Rust path: `solewriter holder` on a store of its own made like the Node path's, asked
 * one line at a time; `publish` and `ping` resolve with the answer line.
 */
function rust() {
  const { db, runtimeRoot, target } = memoryCoreStore('rust');
  db.close();
  const dir = path.dirname(runtimeRoot);
  const toml = (value) => JSON.stringify(value);
  const config = [
    `store = ${toml(path.join(dir, 'host.sqlite'))}`,
    `runtime_root = ${toml(runtimeRoot)}`,
    'lease_ttl_ms = 60000',
    'busy_timeout_ms = 5000',
    ...CHANNELS.flatMap((c) => [
      '[[channels]]',
      `name = ${toml(c.name)}`,
      `owner = ${toml(c.owner)}`,
      `envelope_schema = ${toml(c.envelopeSchema)}`,
      `max_envelope_bytes = ${c.maxEnvelopeBytes}`,
      `watermark = ${toml(c.watermark)}`,
    ]),
  ].join('\n');
  fs.writeFileSync(path.join(dir, 'sw.toml'), `${config}\n`);
  fs.writeFileSync(path.join(dir, 'binding.json'), JSON.stringify(BINDING));
  const child = spawn(BIN, ['holder', '--config', path.join(dir, 'sw.toml'), '--target', target, '--instance', 'rust-1', '--consumer-binding-file', path.join(dir, 'binding.json')], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  let buffered = '';
  const waiting = [];
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (chunk) => {
    buffered += chunk;
    for (let at; (at = buffered.indexOf('\n')) >= 0; ) {
      const line = buffered.slice(0, at);
      buffered = buffered.slice(at + 1);
      const waiter = waiting.shift();
      if (!waiter) throw new Error(`the Rust holder said ${JSON.stringify(line)} unasked`);
      waiter.resolve(line);
    }
  });
  // Once its output is drained: whoever still waits gets no answer.
  let ended = null;
  const end = (why) => {
    ended = ended || why;
    for (const w of waiting.splice(0)) w.reject(new Error(`the Rust holder ${ended} without answering`));
  };
  child.on('error', (e) => end(`failed (${e.message})`));
  child.on('close', (code, signal) => end(`exited (${code ?? signal})`));
  const ask = (line) =>
    new Promise((resolve, reject) => {
      if (ended) return reject(new Error(`the Rust holder ${ended}`));
      waiting.push({ resolve, reject });
      child.stdin.write(`${line}\n`);
    });
  const publish = async () => {
    const answer = await ask('publish-now');
    if (!answer.startsWith('published ')) throw new Error(`the Rust path did not publish: ${answer}`);
  };
  const ping = async () => {
    const answer = await ask('ping');
    if (answer !== 'pong') throw new Error(`the Rust holder answered ${answer} to ping`);
  };
  // The holder's CPU time (user + system) so far, in µs, from /proc (Linux; null elsewhere):
  // counted in clock ticks, so read over a whole run, not per publication.
  const cpuUs = () => {
    if (CLOCK_TICKS === null) return null;
    try {
      const fields = fs.readFileSync(`/proc/${child.pid}/stat`, 'utf8').split(') ')[1].split(' ');
      return ((Number(fields[11]) + Number(fields[12])) * 1e6) / CLOCK_TICKS;
    } catch {
      return null;
    }
  };
  const closed = new Promise((resolve) => child.on('close', resolve));
  /** Ends the holder: end of stdin is its `quit`; a holder that does not end is killed. */
  const quit = async () => {
    child.stdin.end();
    const timer = setTimeout(() => child.kill(), 5_000);
    await closed;
    clearTimeout(timer);
  };
  return { publish, ping, cpuUs, quit };
}

/** The Memory Core's JavaScript writer at `synchronous = level`. */
function jsWriter(level) {
  const { db, runtimeRoot } = host(`js-${level}`);
  db.pragma(`synchronous = ${level}`);
  js.ensureSchema(db);
  const targetId = js.deriveTargetId(TUPLE);
  for (const [envelope, channel] of [
    [ENVELOPES[0], 'lifecycle-frontier'],
    [ENVELOPES[1], 'computed-route'],
  ]) {
    js.submit(db, {
      targetId,
      channel,
      envelope,
      sourceWatermark: envelope.sourceWatermark,
      capturedAt: envelope.capturedAt,
      expiresAt: envelope.expiresAt,
      now: new Date().toISOString(),
    });
  }
  return () => {
    const r = js.publish(db, { runtimeRoot, tuple: TUPLE, consumerBinding: BINDING, now: Date.now, leaseTtlMs: 60_000, token: randomBytes(32).toString('hex') });
    if (!r.published) throw new Error(`the JS writer did not publish: ${JSON.stringify(r)}`);
    return r;
  };
}

/** The plain atomic write of `bytes` to `dir/current.json`. */
function floor(bytes) {
  const dir = path.join(base, 'floor', 'hook-projections', 'target');
  fs.mkdirSync(dir, { recursive: true });
  const file = path.join(dir, 'current.json');
  return () => {
    const temp = path.join(dir, `.current.json.${randomBytes(8).toString('hex')}.tmp`);
    const fd = fs.openSync(temp, 'wx', 0o600);
    try {
      fs.writeSync(fd, bytes);
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(temp, file);
    const dirFd = fs.openSync(dir, 'r');
    try {
      fs.fsyncSync(dirFd);
    } finally {
      fs.closeSync(dirFd);
    }
  };
}

/** Runs each kind's op WARMUP times, unmeasured. */
async function warmUp(kinds) {
  for (const [, op] of kinds) for (let i = 0; i < WARMUP; i++) await op();
}

/** ROUNDS rounds of N / ROUNDS of each kind in turn (each round starting with the next kind):
 * each kind's N measured durations in µs, and this process's CPU time (user + system, all its
 * threads) per operation of the kind in µs. */
async function measure(kinds) {
  const us = kinds.map(() => []);
  const cpu = kinds.map(() => 0);
  for (let round = 0; round < ROUNDS; round++) {
    for (let j = 0; j < kinds.length; j++) {
      const k = (j + round) % kinds.length;
      const op = kinds[k][1];
      const before = process.cpuUsage();
      for (let i = 0; i < N / ROUNDS; i++) {
        const t0 = performance.now();
        await op();
        us[k].push((performance.now() - t0) * 1000);
      }
      const used = process.cpuUsage(before);
      cpu[k] += (used.user + used.system) / N;
    }
  }
  return kinds.map(([name], k) => [name, us[k], cpu[k]]);
}

const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;
const p50 = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function main() {
  const sw = solewriter();
  const first = sw.publish();
  if (!first) throw new Error('solewriter did not publish');
  const rs = rust();
  try {
    await rs.publish();
  } catch (e) {
    await rs.quit();
    throw e;
  }
  // Both paths publish the same document: the same bytes but for the moment it was made.
  const projections = path.join(base, 'rust', 'runtime', 'hook-projections');
  const target = fs.readdirSync(projections).find((name) => !name.endsWith('.lock'));
  const comparable = (bytes) => {
    const doc = JSON.parse(bytes);
    delete doc.publication.generatedAt;
    return JSON.stringify(doc);
  };
  if (comparable(fs.readFileSync(path.join(projections, target, 'current.json'))) !== comparable(sw.document())) {
    throw new Error('the Rust and the Node path published different documents');
  }
  const batch = batches();
  const kinds = [
    ['floor (atomic write, no lease)', floor(sw.document())],
    ['publishNow', sw.publish],
    ['publishNowAsync', sw.publishAsync],
    ['rust one-shot (over the pipe)', rs.publish],
    ['rust round trip (ping)', rs.ping],
    ['js writer (synchronous = FULL)', jsWriter('FULL')],
    ['js writer (synchronous = NORMAL)', jsWriter('NORMAL')],
    [`${BATCH} × publishNow (${BATCH} targets)`, batch.each],
    [`publishManyNow (${BATCH} targets)`, batch.many],
    [`publishManyNowAsync (${BATCH} targets)`, batch.manyAsync],
  ];
  let results, rustCpuBefore, rustCpuAfter;
  try {
    await warmUp(kinds);
    rustCpuBefore = rs.cpuUs();
    results = await measure(kinds);
    rustCpuAfter = rs.cpuUs();
  } finally {
    await rs.quit();
  }
  const baseline = mean(results[0][1]);
  console.log(`${base}: ${N} publications of each kind (${sw.document().length} bytes) in ${ROUNDS} rounds, ${WARMUP} unmeasured first`);
  for (const [name, us, cpu] of results) {
    console.log(`${name.padEnd(34)} mean ${mean(us).toFixed(0).padStart(6)} µs  p50 ${p50(us).toFixed(0).padStart(6)} µs  ${(mean(us) / baseline).toFixed(2)}× floor  node CPU ${cpu.toFixed(0).padStart(5)} µs`);
  }
  const at = (name) => mean(results.find(([n]) => n === name)[1]);
  const rustAlone = at('rust one-shot (over the pipe)') - at('rust round trip (ping)');
  console.log(`rust one-shot − round trip: ${rustAlone.toFixed(0)} µs  ${(rustAlone / baseline).toFixed(2)}× floor`);
  if (rustCpuBefore !== null && rustCpuAfter !== null) {
    const holderCpu = (rustCpuAfter - rustCpuBefore) / N;
    const ticks = ((rustCpuAfter - rustCpuBefore) * CLOCK_TICKS) / 1e6;
    console.log(`rust holder's own CPU per publication, its pings included: ${holderCpu.toFixed(0)} µs (${ticks.toFixed(0)} clock ticks of ${(1e3 / CLOCK_TICKS).toFixed(0)} ms)`);
  }
  console.log(`publishNow / rust one-shot: ${(at('publishNow') / rustAlone).toFixed(2)}×  publishNowAsync / rust one-shot: ${(at('publishNowAsync') / rustAlone).toFixed(2)}×`);
  console.log(`publishNow / js writer (FULL): ${(at('publishNow') / at('js writer (synchronous = FULL)')).toFixed(2)}×`);
  const each = at(`${BATCH} × publishNow (${BATCH} targets)`);
  for (const name of ['publishManyNow', 'publishManyNowAsync']) {
    const many = at(`${name} (${BATCH} targets)`);
    console.log(
      `${name} of ${BATCH} / ${BATCH} × publishNow: ${(many / each).toFixed(2)}×  (per target ${(many / BATCH).toFixed(0)} µs against ${(each / BATCH).toFixed(0)} µs)`,
    );
  }
}

main().catch((e) => {
  console.error(e);
  process.exitCode = 1;
});
