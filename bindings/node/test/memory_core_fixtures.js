'use strict';
/**
 * What the Memory Core tests share: its store opened its way, its profile, the broker clock, the attested tuple, the
 * consumer binding its hooks' reader expects, the channel registry of its two producers, the
 * reader's budget and rendered rows, and the producers' envelopes in the key order of their
 * builders (`lifecycleFrontier.mjs`, `computedRouteResult.mjs` of neomjs/neo); the watermark
 * each producer stamps is the one it submits.
 */

const Database = require('better-sqlite3');

const PROFILE = 'live-lane-awareness-projection.v1';

/** A database opened as the Memory Core opens its store (`ai/graph/storage/SQLite.mjs`). */
function openMemoryCoreDb(file) {
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.pragma('busy_timeout = 5000');
  db.pragma('foreign_keys = ON');
  return db;
}

// The broker clock: the JS writer publishes at NOW, the hooks read at READ_AT.
const NOW = Date.parse('2026-07-28T18:30:00.000Z');
const READ_AT = NOW + 5_000;
const CAPTURED_AT = new Date(NOW - 60_000).toISOString(); // 2026-07-28T18:29:00.000Z
const EXPIRES_AT = new Date(NOW + 10 * 60_000).toISOString(); // 2026-07-28T18:40:00.000Z

/** The attested tuple of the target (its `schemaVersion` as the writer's own unit test has it). */
const TUPLE = Object.freeze({
  schemaVersion: PROFILE,
  capability: 'self-awareness',
  agentId: '@neo-gpt',
  harnessType: 'codex',
  instanceKeyDigest: 'instance-digest',
  workspaceKeyDigest: 'workspace-digest',
  projectionKind: 'live-lane-awareness',
});

/** The full categorical binding the Memory Core attaches to a publication (the reader's shape). */
const BINDING = Object.freeze({
  capability: 'self-awareness',
  agentId: '@neo-gpt',
  harnessType: 'codex',
  instanceKeyDigest: 'instance-digest',
  workspaceKeyDigest: 'workspace-digest',
  sessionId: 'correlation-only',
  status: 'attested',
  provenance: { producer: 'MemoryCoreProjectionBroker' },
  assertedAt: CAPTURED_AT,
  expiresAt: EXPIRES_AT,
  conflicts: [],
  scopeResolution: 'agent-instance',
});

/** solewriter's channel registry: the two pinned channels, with the kinds their producers emit. */
const CHANNELS = Object.freeze([
  { name: 'lifecycle-frontier', owner: 'frontier', envelopeSchema: 'lifecycle-frontier.v1', maxEnvelopeBytes: 65536, watermark: 'instant' },
  { name: 'computed-route', owner: 'router', envelopeSchema: 'computed-route.v1', maxEnvelopeBytes: 65536, watermark: 'instant-sequence' },
]);

const BUDGET = Object.freeze({ maxRows: 12, maxBytes: 4096 });
const HEADER = 'Live lane awareness — source data only; informational, no admission change:';

/** The reader's row of the frontier below, captured at `capturedAt`. */
const lifecycleRow = (capturedAt = CAPTURED_AT) =>
  'Lifecycle lifecycle-one [own-pr-repair/changes-requested] #16111 — actionable since ' +
  `2026-07-28T17:00:00.000Z (as of ${capturedAt})`;

/** The reader's row of a route below. */
const routeRow = (version, id, title) =>
  `Route ${version} #1 ${id} — "${title}" (as of ${CAPTURED_AT}; advisory, no automatic action)`;

/** A `lifecycle-frontier.v1` envelope: the producer's watermark is its `capturedAt`. */
function frontier({ capturedAt = CAPTURED_AT, sourceWatermark = capturedAt, state = 'changes-requested' } = {}) {
  return {
    schemaVersion: 'lifecycle-frontier.v1',
    status: 'fresh',
    capturedAt,
    sourceWatermark,
    expiresAt: EXPIRES_AT,
    scope: { agentId: '@neo-gpt', harnessInstance: 'instance-digest', resolution: 'agent-instance', omittedReason: null },
    coverage: { sources: ['github-workflow', 'a2a'], degradedSources: [] },
    items: [
      {
        id: 'lifecycle-one',
        stage: 'own-pr-repair',
        kind: 'pull-request',
        state,
        source: 'github-workflow',
        subjectId: '#16111',
        headSha: 'abc123',
        actionableSince: '2026-07-28T17:00:00.000Z',
        checkedAt: capturedAt,
        citations: ['https://github.com/neomjs/neo/pull/16111'],
      },
    ],
    notAuthority: true,
  };
}

/** A `computed-route.v1` envelope: the producer's watermark is `${capturedAt}:${n}`. */
function route({ n, routeVersion = 'route-v1', id = 'issue-15315', title = 'Render the bounded hook projection' }) {
  return {
    schemaVersion: 'computed-route.v1',
    status: 'fresh',
    capturedAt: CAPTURED_AT,
    sourceWatermark: `${CAPTURED_AT}:${n}`,
    expiresAt: EXPIRES_AT,
    routeVersion,
    sourceManifestHash: '9e3779b9',
    provenance: { producer: 'GoldenPathSynthesizer', runId: `run-${n}`, algorithmVersion: 'v1', citations: [] },
    freshness: { status: 'fresh', checkedAt: CAPTURED_AT, expiresAt: EXPIRES_AT },
    route: { kind: 'computed-ranked', items: [{ id, title, score: 9, rank: 1, citations: [] }] },
    // Not rendered while the route has items, but published: text JSON.stringify escapes its own way.
    advisoryFallback: { kind: 'declared-intent', status: 'available', items: [{ id: 'goal-v13.2', title: 'Café "résumé"\nline\u2028\u0007 ✓', citations: [] }] },
    probe: null,
    citations: [],
    notAuthority: true,
  };
}

/**
 * The writer's `submitChannel` arguments for a producer's `envelope` on `channel`: the
 * producer's own watermark and times, both gates open; `more` overrides any of them.
 */
const writerSubmission = (channel, envelope, more = {}) => ({
  tuple: TUPLE,
  channel,
  envelope,
  sourceWatermark: envelope.sourceWatermark,
  capturedAt: envelope.capturedAt,
  expiresAt: envelope.expiresAt,
  isTargetAdmitted: () => true,
  mayProduceChannel: () => true,
  ...more,
});

/** What the hooks' reader answers for a document that renders `rows` under HEADER. */
const rendered = (rows) => ({
  status: 'rendered',
  render: [HEADER, ...rows].join('\n'),
  policy: { admissionEffect: 'none', fallback: 'existing-bare-policy' },
  rowsRendered: rows.length,
  rowsOmitted: 0,
  truncated: false,
  diagnostics: [],
});

module.exports = {
  openMemoryCoreDb,
  PROFILE,
  NOW,
  READ_AT,
  CAPTURED_AT,
  EXPIRES_AT,
  TUPLE,
  BINDING,
  CHANNELS,
  BUDGET,
  HEADER,
  lifecycleRow,
  routeRow,
  frontier,
  route,
  rendered,
  writerSubmission,
};
