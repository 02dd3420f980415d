'use strict';
/**
 * The Memory Core's own JavaScript writer, as far as its SQL goes: its statements copied
 * verbatim from the public neomjs/neo repository (`ai/services/memory-core/`
 * `hookProjectionLease.mjs`: createHookProjectionTables, acquireProjectionLease,
 * releaseProjectionLease; `hookProjectionSubmission.mjs`: submitProjectionChannel;
 * `hookProjectionWriter.mjs`: deriveTargetId, hashToken), run the way those functions run them
 * on better-sqlite3, so a test database holds exactly what that writer leaves behind. (The
 * same statements drive the Rust tests: `adapters/tests/support/js_writer.rs`.)
 *
 * Node only, for the Memory Core switch (`memory_core_switch.test.js`): `ensureSchema` (the
 * writer's createHookProjectionTables + addProjectionConflictColumn) and `publish`, what
 * `writer.publish({tuple, consumerBinding})` does — acquire, then `publishProjection`'s one
 * immediate transaction (revalidate, sweep orphans, read the rows, compose, write atomically,
 * release) — with its lease-row and channel-row reads written here to the same columns and
 * order, and its composition (`buildProjectionEnvelope`, `projectChannel` of
 * `hookProjectionLease.mjs` at 1ae816fda6bb80b5e451bfcfe0c2b194c10bb265) and transport
 * (`writeAtomic`, `sweepOrphans` of `hookProjectionTransport.mjs` at
 * 4932f3e7dcc66e852f93d9c91d189a31a26163e3) retyped here, not copied (their behaviour:
 * docs/memory-core-upstream.md, sections 1, 4.2, 4.5 and 6). The Rust mirror has none of these.
 */

const { createHash, randomBytes } = require('node:crypto');
const fs = require('node:fs');

const FIELDS = ['schemaVersion', 'capability', 'agentId', 'harnessType', 'instanceKeyDigest', 'workspaceKeyDigest', 'projectionKind'];

function createTables(db) {
  db.exec(`
        CREATE TABLE IF NOT EXISTS HookProjectionChannels (
            target_id TEXT NOT NULL,
            channel TEXT NOT NULL,
            source_watermark TEXT NOT NULL,
            envelope_json TEXT NOT NULL,
            captured_at TEXT NOT NULL,
            expires_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            conflict_reason TEXT,
            PRIMARY KEY (target_id, channel)
        );
    `);
  db.exec(`
        CREATE TABLE IF NOT EXISTS HookProjectionLeases (
            target_id TEXT PRIMARY KEY,
            fencing_epoch INTEGER NOT NULL,
            holder_token_hash TEXT,
            holder_instance_digest TEXT,
            acquired_at INTEGER,
            expires_at INTEGER,
            state TEXT NOT NULL CHECK(state IN ('held', 'released'))
        );
    `);
}

const legacyTargetId = (tuple) =>
  createHash('sha256').update(FIELDS.map((f) => `${f}=${tuple[f]}`).join('\0')).digest('hex').slice(0, 32);
const hashToken = (raw) => createHash('sha256').update(String(raw)).digest('hex');

/** The epoch granted, or null when held. */
function acquire(db, targetId, instanceDigest, now, leaseTtlMs, token) {
  return db
    .transaction(() => {
      const row = db.prepare('SELECT fencing_epoch, expires_at, state FROM HookProjectionLeases WHERE target_id = ?').get(targetId);
      if (row && row.state === 'held' && Number(row.expires_at) > now) return null;
      const epoch = (row ? Number(row.fencing_epoch) : 0) + 1;
      db.prepare(`
            INSERT INTO HookProjectionLeases
                (target_id, fencing_epoch, holder_token_hash, holder_instance_digest, acquired_at, expires_at, state)
            VALUES (?, ?, ?, ?, ?, ?, 'held')
            ON CONFLICT(target_id) DO UPDATE SET
                fencing_epoch          = excluded.fencing_epoch,
                holder_token_hash      = excluded.holder_token_hash,
                holder_instance_digest = excluded.holder_instance_digest,
                acquired_at            = excluded.acquired_at,
                expires_at             = excluded.expires_at,
                state                  = 'held'
        `).run(targetId, epoch, hashToken(token), instanceDigest ?? null, now, now + leaseTtlMs);
      return epoch;
    })
    .immediate();
}

function release(db, targetId, epoch, token) {
  return (
    db.prepare(`
            UPDATE HookProjectionLeases
            SET state = 'released', holder_token_hash = NULL, expires_at = 0
            WHERE target_id = ? AND fencing_epoch = ? AND holder_token_hash = ?
        `).run(targetId, epoch, hashToken(token)).changes > 0
  );
}

/** 'advanced' | 'replayed' | 'regressed-watermark' | 'source-conflict'. */
function submit(db, { targetId, channel, envelope, sourceWatermark, capturedAt, expiresAt, now }) {
  const payload = JSON.stringify(envelope);
  return db
    .transaction(() => {
      const row = db.prepare(`
            SELECT source_watermark, envelope_json FROM HookProjectionChannels
            WHERE target_id = ? AND channel = ?
        `).get(targetId, channel);
      if (row) {
        const previous = String(row.source_watermark);
        if (sourceWatermark < previous) return 'regressed-watermark';
        if (sourceWatermark === previous) {
          if (row.envelope_json === payload) return 'replayed';
          const reason = `two payloads claim watermark ${sourceWatermark}`;
          db.prepare(`
                    UPDATE HookProjectionChannels SET conflict_reason = ?, updated_at = ?
                    WHERE target_id = ? AND channel = ?
                `).run(reason, now, targetId, channel);
          return 'source-conflict';
        }
      }
      db.prepare(`
            INSERT INTO HookProjectionChannels
                (target_id, channel, source_watermark, envelope_json, captured_at, expires_at, updated_at, conflict_reason)
            VALUES (?, ?, ?, ?, ?, ?, ?, NULL)
            ON CONFLICT(target_id, channel) DO UPDATE SET
                source_watermark = excluded.source_watermark,
                envelope_json    = excluded.envelope_json,
                captured_at      = excluded.captured_at,
                expires_at       = excluded.expires_at,
                updated_at       = excluded.updated_at,
                conflict_reason  = NULL
        `).run(targetId, channel, sourceWatermark, payload, capturedAt, expiresAt, now);
      return 'advanced';
    })
    .immediate();
}

/** `ensureSchema()`: the two tables, then the conflict column on a table made before it existed. */
function ensureSchema(db) {
  createTables(db);
  const columns = db.prepare('PRAGMA table_info(HookProjectionChannels)').all();
  if (!columns.some((c) => c.name === 'conflict_reason')) {
    db.exec('ALTER TABLE HookProjectionChannels ADD COLUMN conflict_reason TEXT');
  }
}

/** `deriveTargetId`: `legacyTargetId`, after the writer's check that every field is non-empty text. */
function deriveTargetId(tuple) {
  const missing = FIELDS.filter((f) => typeof tuple?.[f] !== 'string' || tuple[f].length === 0);
  if (missing.length > 0) throw new TypeError(`the attested target tuple is missing: ${missing.join(', ')}`);
  return legacyTargetId(tuple);
}

// ---------------------------------------------------------------------------------------------
// The composition, retyped (upstream `projectChannel` and `buildProjectionEnvelope`,
// hookProjectionLease.mjs @1ae816fd): same fields, same key order, same status rules.

const LIFECYCLE = 'lifecycle-frontier';
const ROUTE = 'computed-route';
const CONTEXT_VIEW = 'context-view:';

/** One stored row's slot at `generatedAt` (epoch ms). */
function projectChannel(row, generatedAt) {
  let status = 'fresh';
  let degradedReason = row.conflict_reason ?? null;
  let envelope = null;
  try {
    envelope = JSON.parse(row.envelope_json);
  } catch (e) {
    status = 'degraded';
    degradedReason = `unreadable envelope: ${e instanceof Error ? e.message : String(e)}`;
  }
  if (status === 'fresh' && degradedReason) status = 'degraded';
  const expires = Date.parse(row.expires_at);
  if (status === 'fresh' && Number.isFinite(expires) && Number.isFinite(generatedAt) && expires <= generatedAt) {
    status = 'stale';
    degradedReason = `channel expired at ${row.expires_at}`;
  }
  return {
    status,
    sourceWatermark: row.source_watermark,
    capturedAt: row.captured_at,
    expiresAt: row.expires_at,
    envelope,
    citations: [],
    degradedReason,
  };
}

/** The `live-lane-awareness-projection.v1` document of `rows` (already in `ORDER BY channel` order). */
function buildProjectionEnvelope({ targetId, fencingEpoch, generatedAt, consumerBinding, rows }) {
  const slots = new Map();
  const producerWatermarks = {};
  for (const row of rows) {
    slots.set(row.channel, projectChannel(row, generatedAt));
    producerWatermarks[row.channel] = row.source_watermark;
  }
  const slotOf = (channel) =>
    slots.get(channel) ?? { status: 'missing', envelope: null, degradedReason: 'no accepted channel' };
  const entries = [...slots.entries()];
  return {
    schemaVersion: 'live-lane-awareness-projection.v1',
    publication: { targetId, fencingEpoch: Number(fencingEpoch), generatedAt, producerWatermarks },
    consumerBinding,
    lifecycleActions: slotOf(LIFECYCLE),
    computedRoute: slotOf(ROUTE),
    contextViews: entries.filter(([channel]) => channel.startsWith(CONTEXT_VIEW)).map(([channel, slot]) => ({ channel, ...slot })),
    coverage: {
      sources: entries.map(([channel]) => channel),
      degradedSources: entries.filter(([, slot]) => slot.status === 'degraded' || slot.status === 'stale').map(([channel]) => channel),
    },
    notAuthority: true,
  };
}

// ---------------------------------------------------------------------------------------------
// The transport, retyped (upstream `writeAtomic` and `sweepOrphans`, hookProjectionTransport.mjs):
// the projection root is `<runtimeRoot>/hook-projections`, paths joined with `/`.

/** The target's directory and `current.json`, for an id that can be a path segment. */
function targetPath(runtimeRoot, targetId) {
  if (typeof targetId !== 'string' || !/^[A-Za-z0-9_-]+$/.test(targetId)) {
    throw new TypeError(`targetId must be an opaque server-derived token; got ${JSON.stringify(targetId)}`);
  }
  const dir = `${runtimeRoot}/hook-projections/${targetId}`;
  return { dir, file: `${dir}/current.json` };
}

/** Writes `JSON.stringify(envelope)` to a unique temp sibling, fsyncs it, checks the deadline, renames. */
function writeAtomic(runtimeRoot, targetId, envelope, assertDeadline) {
  const { dir, file } = targetPath(runtimeRoot, targetId);
  const temp = `${file}.${randomBytes(8).toString('hex')}.tmp`;
  fs.mkdirSync(dir, { recursive: true });
  try {
    fs.writeFileSync(temp, JSON.stringify(envelope), 'utf8');
    const fd = fs.openSync(temp, 'r');
    try {
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    assertDeadline();
    fs.renameSync(temp, file);
  } catch (e) {
    try {
      fs.unlinkSync(temp);
    } catch {
      // best effort: the write's own failure is the one reported
    }
    throw e;
  }
}

/** Removes every `current.json.*.tmp` in the target's directory; never fails. */
function sweepOrphans(runtimeRoot, targetId) {
  const { dir } = targetPath(runtimeRoot, targetId);
  const swept = [];
  let entries = [];
  try {
    entries = fs.readdirSync(dir);
  } catch {
    return swept;
  }
  for (const entry of entries) {
    if (!entry.startsWith('current.json.') || !entry.endsWith('.tmp')) continue;
    try {
      fs.unlinkSync(`${dir}/${entry}`);
      swept.push(entry);
    } catch {
      // best effort
    }
  }
  return swept;
}

/**
 * `writer.publish({tuple, consumerBinding})`: acquires the target's lease (the writer's `acquire`
 * above), then in ONE immediate transaction revalidates it, sweeps orphaned temp files, reads the
 * channel rows `ORDER BY channel`, composes the document and writes it atomically inside the
 * transaction, and releases the lease. `now`: the broker clock, epoch ms or `() => ms` (read at
 * acquisition, at the transaction's start, at the mutation boundary — `generatedAt` — and at the
 * rename); `token`: the raw holder token (the writer mints 32 random bytes as hex).
 * Returns, as upstream: `{ published: true, channels, targetId, epoch }`; held: `{ published:
 * false, reason: 'held', retryAfterMs, targetId }`; refused: `{ published: false, reason:
 * 'not-held' | 'superseded-epoch' | 'foreign-token' | 'lease-expired' | 'lease-expired-at-write' |
 * 'write-failed: …', targetId, epoch }`.
 */
function publish(db, { runtimeRoot, tuple, consumerBinding, now, leaseTtlMs, token = randomBytes(32).toString('hex') }) {
  const clock = typeof now === 'function' ? now : () => now;
  const targetId = deriveTargetId(tuple);
  const acquiredAt = clock();
  const epoch = acquire(db, targetId, tuple.instanceKeyDigest, acquiredAt, leaseTtlMs, token);
  if (epoch === null) {
    const { expires_at: expiresAt } = db.prepare('SELECT expires_at FROM HookProjectionLeases WHERE target_id = ?').get(targetId);
    return { published: false, reason: 'held', retryAfterMs: Math.max(0, Number(expiresAt) - acquiredAt), targetId };
  }
  const result = db
    .transaction(() => {
      const at = clock();
      if (!Number.isFinite(at)) throw new TypeError('clock() must return epoch ms');
      const lease = db
        .prepare('SELECT fencing_epoch, holder_token_hash, expires_at, state FROM HookProjectionLeases WHERE target_id = ?')
        .get(targetId);
      if (!lease || lease.state !== 'held') return { published: false, reason: 'not-held' };
      if (Number(lease.fencing_epoch) !== Number(epoch)) return { published: false, reason: 'superseded-epoch' };
      if (lease.holder_token_hash !== hashToken(token)) return { published: false, reason: 'foreign-token' };
      if (Number(lease.expires_at) <= at) return { published: false, reason: 'lease-expired' };
      sweepOrphans(runtimeRoot, targetId);
      const rows = db
        .prepare(
          `SELECT channel, source_watermark, envelope_json, captured_at, expires_at, conflict_reason
           FROM HookProjectionChannels WHERE target_id = ? ORDER BY channel`,
        )
        .all(targetId);
      const generatedAt = clock();
      if (!Number.isFinite(generatedAt) || Number(lease.expires_at) <= generatedAt) {
        return { published: false, reason: 'lease-expired-at-write' }; // the lease stays held, as upstream
      }
      const envelope = buildProjectionEnvelope({ targetId, fencingEpoch: epoch, generatedAt, consumerBinding, rows });
      try {
        writeAtomic(runtimeRoot, targetId, envelope, () => {
          const atRename = clock();
          if (!Number.isFinite(atRename) || Number(lease.expires_at) <= atRename) {
            throw new Error(`lease expired mid-write (deadline ${lease.expires_at})`);
          }
        });
      } catch (e) {
        release(db, targetId, epoch, token); // release and return: a throw would roll the release back
        return { published: false, reason: `write-failed: ${e instanceof Error ? e.message : String(e)}` };
      }
      release(db, targetId, epoch, token);
      return { published: true, channels: rows.length };
    })
    .immediate();
  return { ...result, targetId, epoch };
}

module.exports = {
  createTables,
  ensureSchema,
  legacyTargetId,
  deriveTargetId,
  hashToken,
  acquire,
  release,
  submit,
  projectChannel,
  buildProjectionEnvelope,
  publish,
};
