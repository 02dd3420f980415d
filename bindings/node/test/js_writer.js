'use strict';
/**
 * The Memory Core's own JavaScript writer, as far as its SQL goes: its statements copied
 * verbatim from the public neomjs/neo repository (`ai/services/memory-core/`
 * `hookProjectionLease.mjs`: createHookProjectionTables, acquireProjectionLease,
 * releaseProjectionLease; `hookProjectionSubmission.mjs`: submitProjectionChannel;
 * `hookProjectionWriter.mjs`: deriveTargetId, hashToken), run the way those functions run them
 * on better-sqlite3, so a test database holds exactly what that writer leaves behind. (The
 * same statements drive the Rust tests: `adapters/tests/support/js_writer.rs`.)
 */

const { createHash } = require('node:crypto');

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

module.exports = { createTables, legacyTargetId, hashToken, acquire, release, submit };
