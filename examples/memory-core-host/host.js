'use strict';
/**
 * A Memory Core host on solewriter, end to end in one process: the store opened the Memory
 * Core's way, two producers submitting, two fenced publications, and the hook side reading
 * `current.json` where the hooks read it. README.md beside this file says how to run it.
 *
 *   node examples/memory-core-host/host.js [dir]
 *
 * Exit 0 only if every step did what it should; otherwise one line on stderr and exit 1.
 */

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { pathToFileURL } = require('node:url');
const { setTimeout: sleep } = require('node:timers/promises');

// In this repository the package is bindings/node and better-sqlite3 its dev dependency; a host
// that installed both writes `require('solewriter')` and `require('better-sqlite3')` instead.
const REPO_PACKAGE = path.resolve(__dirname, '../../bindings/node');
const inRepo = fs.existsSync(path.join(REPO_PACKAGE, 'package.json'));
const { initialize, ProjectionStore, targetIdFor } = require(inRepo ? REPO_PACKAGE : 'solewriter');
const Database = require(inRepo ? require.resolve('better-sqlite3', { paths: [REPO_PACKAGE] }) : 'better-sqlite3');
// Our implementation of the hooks' reader rules; the Memory Core's hooks run their own reader.
const READER = path.resolve(__dirname, '../../clients/node/memory-core-reader.mjs');

const PROFILE = 'live-lane-awareness-projection.v1';

// The host's configuration. solewriter has no hidden defaults: the lease's time to live and how
// long a publication waits for the target's lock are leaves of the host's own config, and the
// hooks' render budget is theirs. A missing or malformed value is INVALID_CONFIG at construction.
const config = (dir) => ({
  hookProjectionRoot: path.join(dir, 'runtime', 'hook-projections'),
  hookProjectionLeaseTtlMs: 15_000,
  hookProjectionBusyTimeoutMs: 1_000,
  hookProjectionBudget: { maxRows: 12, maxBytes: 4096 },
});

// The one target this host publishes: the attested tuple (what `isTargetAdmitted` decided). The
// hook attests the same identity (and the target id) from its own config.
const IDENTITY = { capability: 'self-awareness', agentId: '@neo-gpt', harnessType: 'codex',
  instanceKeyDigest: 'instance-digest', workspaceKeyDigest: 'workspace-digest' };
const TUPLE = { schemaVersion: PROFILE, ...IDENTITY, projectionKind: 'live-lane-awareness' };

// The registry replaces `mayProduceChannel` and `PROJECTION_CHANNEL_SCHEMAS`: one owner per
// channel, and the watermark kind its producer emits, which orders its submissions.
const CHANNELS = [
  { name: 'lifecycle-frontier', owner: 'lifecycle', envelopeSchema: 'lifecycle-frontier.v1', maxEnvelopeBytes: 262144, watermark: 'instant' },
  { name: 'computed-route', owner: 'golden-path', envelopeSchema: 'computed-route.v1', maxEnvelopeBytes: 262144, watermark: 'instant-sequence' },
];

let step = 'start'; // named in the failure line
const check = (ok, what) => { if (!ok) throw new Error(what); };

/** The store as the Memory Core opens it, with one of its own tables holding a foreign key. */
function openMemoryCore(file) {
  const db = new Database(file);
  db.pragma('journal_mode = WAL'); // solewriter refuses a database not in WAL mode (FOREIGN_SCHEMA)
  db.pragma('busy_timeout = 5000'); // SQLite's own wait, beside solewriter's busyTimeoutMs
  db.pragma('foreign_keys = ON');
  db.exec(`CREATE TABLE IF NOT EXISTS Nodes (id TEXT PRIMARY KEY, label TEXT NOT NULL);
    CREATE TABLE IF NOT EXISTS Edges (source TEXT NOT NULL REFERENCES Nodes (id) ON DELETE CASCADE,
      target TEXT NOT NULL REFERENCES Nodes (id) ON DELETE CASCADE, kind TEXT NOT NULL, PRIMARY KEY (source, target, kind));
    INSERT OR IGNORE INTO Nodes VALUES ('agent:neo-gpt', 'agent'), ('issue:16200', 'issue');
    INSERT OR IGNORE INTO Edges VALUES ('agent:neo-gpt', 'issue:16200', 'routes');`);
  return db;
}

/** The connection settings the host chose; solewriter must leave them as they were. */
const connection = (db) => JSON.stringify(['journal_mode', 'busy_timeout', 'foreign_keys', 'synchronous']
  .map((p) => db.pragma(p, { simple: true })));

/** The lifecycle producer's envelope: its watermark is its `capturedAt`, as `toISOString()` prints it. */
const frontier = (capturedAt, expiresAt) => ({
  schemaVersion: 'lifecycle-frontier.v1', status: 'fresh', capturedAt, sourceWatermark: capturedAt, expiresAt,
  scope: { agentId: '@neo-gpt', harnessInstance: 'instance-digest', resolution: 'agent-instance', omittedReason: null },
  coverage: { sources: ['github-workflow'], degradedSources: [] },
  items: [{ id: 'lifecycle-one', stage: 'own-pr-repair', kind: 'pull-request', state: 'changes-requested',
    source: 'github-workflow', subjectId: '#16111', headSha: 'abc123', actionableSince: capturedAt, checkedAt: capturedAt, citations: [] }],
  notAuthority: true,
});

/** The route producer's pass `n`: its watermark is `${capturedAt}:${n}`. */
const route = (capturedAt, expiresAt, n, routeVersion, id, title) => ({
  schemaVersion: 'computed-route.v1', status: 'fresh', capturedAt, sourceWatermark: `${capturedAt}:${n}`, expiresAt,
  routeVersion, sourceManifestHash: '9e3779b9',
  provenance: { producer: 'GoldenPathSynthesizer', runId: `run-${n}`, algorithmVersion: 'v1', citations: [] },
  freshness: { status: 'fresh', checkedAt: capturedAt, expiresAt },
  route: { kind: 'computed-ranked', items: [{ id, title, score: 9, rank: 1, citations: [] }] },
  advisoryFallback: { kind: 'declared-intent', status: 'available', items: [] }, probe: null, citations: [], notAuthority: true,
});

/**
 * A producer's submission: the envelope as JSON, its times in ms, its watermark as stamped. Take
 * the watermark from the envelope: the store does not compare the two, the hooks do (a channel
 * whose envelope says another watermark renders `degraded`).
 */
const submission = (targetId, channel, envelope) => ({ targetId, channel, sourceWatermark: envelope.sourceWatermark,
  envelopeJson: JSON.stringify(envelope), capturedAt: Date.parse(envelope.capturedAt), expiresAt: Date.parse(envelope.expiresAt) });

/**
 * `{ held }` means another holder's lease is live (another process of the host, say): wait as
 * long as the answer says (up to the lease's TTL), once; still held, give up until the next
 * trigger (the document in place stays valid meanwhile).
 */
async function publishOnce(publish) {
  let answer = await publish();
  if (answer.held) { await sleep(answer.held.retryAfterMs); answer = await publish(); }
  check(answer.published, `still held by ${answer.held?.holder} (epoch ${answer.held?.epoch}) after retryAfterMs`);
  return answer.published;
}

async function run(dir) {
  const cfg = config(dir);
  step = 'open the store';
  fs.mkdirSync(path.dirname(cfg.hookProjectionRoot), { recursive: true }); // runtimeRoot must exist
  const db = openMemoryCore(path.join(dir, 'memory-core.sqlite'));
  try {
    const hostConnection = connection(db);
    // At every boot: 'created' the first time, 'present' after (a store from the JS writer's
    // tables is converted once before this, with adoptJsWriterTables; docs/memory-core.md).
    step = 'initialize';
    const made = initialize(db, { profile: PROFILE });
    check(made === 'created' || made === 'present', `initialize answered ${made}`);
    step = 'build the ProjectionStore';
    const store = new ProjectionStore(db, { profile: PROFILE, channels: CHANNELS,
      runtimeRoot: path.dirname(cfg.hookProjectionRoot),
      leaseTtlMs: cfg.hookProjectionLeaseTtlMs, busyTimeoutMs: cfg.hookProjectionBusyTimeoutMs });
    console.log(`store      ${made}, profile ${PROFILE}`);

    step = 'admit the target';
    // The 32-hex id the JS writer derives, so current.json lands where the hooks already read.
    const targetId = targetIdFor(PROFILE, TUPLE);
    check(store.admitTarget(TUPLE) === targetId, 'admitTarget and targetIdFor disagree');
    check(/^[0-9a-f]{32}$/.test(targetId), `target id ${targetId} is not 32 hex`);
    const hookPath = path.join(cfg.hookProjectionRoot, targetId, 'current.json');
    console.log(`target     ${targetId}`);

    step = 'run the producers';
    const capturedAt = new Date().toISOString();
    const expiresAt = new Date(Date.parse(capturedAt) + 10 * 60_000).toISOString();
    const submit = (producer, channel, envelope, expected) => {
      const answer = store.submit(producer, submission(targetId, channel, envelope));
      check(expected.includes(answer), `${channel} ${envelope.sourceWatermark}: ${answer}, expected ${expected.join(' or ')}`);
      console.log(`submit     ${channel} ${envelope.sourceWatermark}: ${answer}`);
    };
    // 'advanced' rather than 'inserted' when a dir is run again: its rows are still there.
    submit('lifecycle', 'lifecycle-frontier', frontier(capturedAt, expiresAt), ['inserted', 'advanced']);
    submit('golden-path', 'computed-route', route(capturedAt, expiresAt, 9, 'route-v1', 'issue-15315', 'Render the bounded hook projection'), ['inserted', 'advanced']);

    step = 'publish';
    // Every Memory Core publication carries the hooks' consumer binding; without one: INVALID_INPUT.
    // Only its being a JSON object is checked here; the hooks judge its fields (check the render).
    const consumerBinding = { ...IDENTITY, sessionId: 'correlation-only', status: 'attested',
      provenance: { producer: 'MemoryCoreProjectionBroker' }, assertedAt: capturedAt, expiresAt,
      conflicts: [], scopeResolution: 'agent-instance' };
    const holder = TUPLE.instanceKeyDigest;
    const first = await publishOnce(() => store.publishNow(targetId, holder, { consumerBinding }));
    check(path.resolve(first.path) === path.resolve(hookPath), `published at ${first.path}, hooks read ${hookPath}`);
    console.log(`publish    epoch ${first.epoch} (publishNow), ${first.bytes} bytes`);

    step = 'run the route producer again';
    // Same millisecond, next pass: ordered by instant then sequence, `:10` follows `:9`
    // (the JS writer compared the text and refused it).
    submit('golden-path', 'computed-route', route(capturedAt, expiresAt, 10, 'route-v2', 'issue-16200', 'Switch the hook projection writer'), ['advanced']);

    step = 'publish again';
    // The async form keeps the event loop free during the fsyncs; the same answers.
    const second = await publishOnce(() => store.publishNowAsync(targetId, holder, { consumerBinding }));
    check(second.epoch > first.epoch, `epoch ${second.epoch} did not rise above ${first.epoch}`);
    console.log(`publish    epoch ${second.epoch} (publishNowAsync), ${second.bytes} bytes`);

    step = 'check the document';
    const doc = JSON.parse(fs.readFileSync(hookPath, 'utf8'));
    check(doc.publication.targetId === targetId, `publication.targetId is ${doc.publication.targetId}`);
    check(doc.publication.fencingEpoch === second.epoch, `fencingEpoch ${doc.publication.fencingEpoch}`);
    check(doc.publication.producerWatermarks['computed-route'] === `${capturedAt}:10`,
      `computed-route watermark ${doc.publication.producerWatermarks['computed-route']}`);

    step = 'read it as the hook does';
    // The hook's side: its own config (path, attested binding, budget), its own clock.
    const { readHookProjection } = await import(pathToFileURL(READER).href);
    const result = readHookProjection({ projectionPath: hookPath, attestedBinding: { targetId, ...IDENTITY },
      budget: cfg.hookProjectionBudget, now: Date.now() });
    check(result.status === 'rendered', `hook read ${result.status}: ${result.diagnostics.join('; ')}`);
    const rows = result.render.split('\n').slice(1);
    check(rows.length === 2 && rows[0].startsWith('Lifecycle lifecycle-one ') && rows[1].startsWith('Route route-v2 #1 issue-16200 '),
      `unexpected render: ${JSON.stringify(rows)}`);
    console.log(`hook       ${result.status}, ${result.rowsRendered} rows\n${result.render}`);

    step = "check the host's connection";
    check(connection(db) === hostConnection, `connection settings ${connection(db)}, were ${hostConnection}`);
  } finally {
    db.close();
  }
}

// A dir argument is kept (run it again: the store is found 'present'); a temp dir is removed on
// success. On failure the files are kept either way, to look at.
const given = process.argv[2];
let dir = given ? path.resolve(given) : null;
Promise.resolve()
  .then(() => {
    step = 'make the directory';
    if (given) fs.mkdirSync(dir, { recursive: true });
    else dir = fs.mkdtempSync(path.join(os.tmpdir(), 'memory-core-host-'));
    return run(dir);
  })
  .then(
    () => {
      if (!given) fs.rmSync(dir, { recursive: true, force: true });
      console.log('ok');
    },
    (e) => {
      const message = String(e.message).split('\n')[0];
      const why = e.code && !message.startsWith(e.code) ? `${e.code}: ${message}` : message;
      const kept = dir && fs.existsSync(dir) ? ` (files kept in ${dir})` : '';
      process.stderr.write(`memory-core-host: ${step} failed: ${why}${kept}\n`);
      process.exitCode = 1;
    },
  );
