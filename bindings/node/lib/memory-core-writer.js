'use strict';
/**
 * The Memory Core's writer, on solewriter: `makeHookProjectionWriter({getDb, config, fs,
 * clock})` with the surface of its own JavaScript writer (`ai/services/memory-core/`
 * `hookProjectionWriter.mjs` of the public neomjs/neo repository) — `{deriveTargetId,
 * ensureSchema, submitChannel, publish}`, the same arguments, the same result shapes — built on
 * a `ProjectionStore` of the Memory Core profile. The Memory Core switches by changing one
 * import (`require('solewriter/memory-core')` or `import … from 'solewriter/memory-core'`) and
 * adding two configuration leaves (docs/memory-core.md, "Switching the Memory Core").
 *
 * What changes under the same calls: submissions are ordered by each channel's declared
 * watermark kind, not as text; a channel is produced by its registered owner, checked after
 * the host's own `mayProduceChannel`; every publication is fenced and durable; and what no
 * upstream outcome names is thrown as solewriter's coded error (`Error` with a `code`).
 *
 * Host objects are read once: the configuration's leaves and channel registry when the writer
 * is made, a call's tuple, envelope and consumer binding when it is called — cloned once, and
 * every check, lookup and write of the call uses that copy (`lib/copy.js`).
 */

const nodeFs = require('node:fs');
const path = require('node:path');
const { coded } = require('./addon');
const { initialize, adoptJsWriterTables, ProjectionStore, targetIdFor } = require('../index.js');
const { jsonCopy } = require('./copy');
const { storeConfigOf } = require('./config');

/** The Memory Core's profile: its hook document, its 32-hex target ids. */
const PROFILE = 'live-lane-awareness-projection.v1';

/** The attested tuple's fields, in the order the target id is derived from. */
const TARGET_TUPLE_FIELDS = Object.freeze([
  'schemaVersion',
  'capability',
  'agentId',
  'harnessType',
  'instanceKeyDigest',
  'workspaceKeyDigest',
  'projectionKind',
]);

/** The holder recorded when the tuple's instanceKeyDigest is not a valid holder name. */
const FALLBACK_HOLDER = 'memory-core';

/** A holder name solewriter takes: 1 to 64 of `a-z 0-9 . _ -`, starting with a letter or digit. */
const HOLDER = /^[0-9a-z][0-9a-z._-]{0,63}$/;

/** A canonical decimal: the text of an `integer` channel's watermark. */
const DECIMAL = /^(?:0|[1-9][0-9]*)$/;

/** Fencing reasons as the JavaScript writer names its refusals. */
const FENCED_REASONS = Object.freeze({
  superseded: 'superseded-epoch',
  'token-mismatch': 'foreign-token',
  expired: 'lease-expired',
  released: 'not-held',
  'never-granted': 'not-held',
  'document-ahead': 'superseded-epoch',
});

/** The file functions of Node's `fs` the JavaScript writer's transport calls. */
const FS_FUNCTIONS = ['mkdirSync', 'writeFileSync', 'renameSync', 'openSync', 'fsyncSync', 'closeSync', 'unlinkSync', 'readdirSync'];

/**
 * Whether `fs` is Node's own `node:fs`: the module itself, or an object whose file functions
 * are its very functions (the ESM namespace of `import * as fs from 'node:fs'`).
 */
const isNodeFs = (fs) =>
  fs === nodeFs || (fs !== null && typeof fs === 'object' && FS_FUNCTIONS.every((name) => fs[name] === nodeFs[name]));

const missingLeaf = (leaf) => new TypeError(`[hookProjectionWriter] ${leaf} is required from config — no local default`);

/**
 * The tuple as JSON carries it, cloned once (its getters and `toJSON` run once, here); a value
 * that is not an object stays as it is (the checks refuse it).
 */
function tupleCopy(tuple) {
  return tuple !== null && typeof tuple === 'object' ? jsonCopy(tuple, 'tuple') : tuple;
}

/** `deriveTargetId` of a tuple already copied (`tupleCopy`). */
function targetIdOf(tuple) {
  const missing = TARGET_TUPLE_FIELDS.filter((field) => typeof tuple?.[field] !== 'string' || tuple[field].length === 0);
  if (missing.length > 0) {
    throw new TypeError(`[hookProjectionWriter] the attested target tuple is missing: ${missing.join(', ')}`);
  }
  return targetIdFor(PROFILE, tuple);
}

/**
 * The target id of an attested tuple: the JavaScript writer's (the first 128 bits of SHA-256
 * of the seven fields as `field=value` joined by NUL). A missing or empty field throws the
 * writer's TypeError. The tuple is read once.
 */
function deriveTargetId(tuple) {
  return targetIdOf(tupleCopy(tuple));
}

/** The checks of the writer's `submitProjectionChannel`, in its order, with its TypeErrors. */
function checkSubmission({ targetId, channel, envelope, sourceWatermark, capturedAt, expiresAt, isTargetAdmitted, mayProduceChannel }) {
  const fail = (message) => {
    throw new TypeError(`[hookProjectionSubmission] ${message}`);
  };
  if (typeof targetId !== 'string' || !targetId.length || typeof channel !== 'string' || !channel.length) {
    fail('a server-derived targetId and a channel are required');
  }
  if (typeof sourceWatermark !== 'string' || !sourceWatermark.length) {
    fail('a sourceWatermark is required — an unwatermarked channel cannot be ordered');
  }
  if (typeof isTargetAdmitted !== 'function' || typeof mayProduceChannel !== 'function') {
    fail('isTargetAdmitted and mayProduceChannel must be injected');
  }
  if (!envelope || typeof envelope !== 'object' || Array.isArray(envelope)) fail('an envelope must be a plain object');
  // Read once: the checks below and the envelope stored are this one text and its parse.
  const envelopeJson = JSON.stringify(envelope);
  const copy = envelopeJson === undefined ? undefined : JSON.parse(envelopeJson);
  if (!copy || typeof copy !== 'object' || Array.isArray(copy)) fail('an envelope must be a plain object');
  if (typeof copy.schemaVersion !== 'string' || copy.schemaVersion.length === 0) {
    fail('an envelope must carry a schemaVersion — a reader binds to it');
  }
  const captured = Date.parse(capturedAt);
  const expires = Date.parse(expiresAt);
  if (!Number.isFinite(captured)) fail(`capturedAt must be a parseable timestamp; got ${JSON.stringify(capturedAt)}`);
  if (!Number.isFinite(expires)) fail(`expiresAt must be a parseable timestamp; got ${JSON.stringify(expiresAt)}`);
  if (expires <= captured) fail(`expiresAt ${expiresAt} is not after capturedAt ${capturedAt}`);
  return { captured, expires, envelopeJson, schemaVersion: copy.schemaVersion };
}

/**
 * The writer's surface on solewriter.
 *
 * @param {Object} params
 * @param {Function} params.getDb `() => db` (better-sqlite3, WAL), resolved on every call.
 * @param {Object} params.config `{hookProjectionRoot, hookProjectionLeaseTtlMs,
 *   hookProjectionBusyTimeoutMs, hookProjectionChannels}`: the root is the directory, of any
 *   name, that holds `<targetId>/current.json` (made when missing: its missing ancestors when
 *   the writer is made, itself at the first publication, each mode 0700); the busy timeout is
 *   how long a publication waits for the target's lock (ms); the channels are the registry
 *   `[{name, owner, envelopeSchema, maxEnvelopeBytes, watermark, envelopeJsonSchema?}]`. No
 *   leaf has a default.
 * @param {Object} [params.fs] Node's own `node:fs`, or absent: solewriter's addon runs every
 *   file step itself (directory handles, no symlink followed, fsyncs), so a substitute could
 *   never see or stage them and is refused (INVALID_CONFIG) rather than silently ignored.
 * @param {Function} [params.clock] `() => epochMs`, the broker clock, read at every clock step
 *   of a publication (its grant, its transaction, its deadline before the rename); the system
 *   clock when absent.
 * @throws {TypeError} When `getDb` or a config leaf is missing or malformed (the writer's own).
 * @throws {Error} INVALID_CONFIG (a `code`) when a leaf is present but a value the store refuses:
 *   a TTL or busy timeout that is not a whole number of ms (the TTL at most 2^52), a root that
 *   is not a directory or cannot be made, a channel without `envelopeSchema` or
 *   `maxEnvelopeBytes`, of an unknown watermark kind, or named twice; or an `fs` that is not
 *   Node's. The whole configuration is checked here, before anything touches the store.
 */
function makeHookProjectionWriter({ getDb, config, fs, clock } = {}) {
  if (typeof getDb !== 'function') {
    throw new TypeError('[hookProjectionWriter] an injected getDb resolver is required');
  }
  const root = config?.hookProjectionRoot;
  if (typeof root !== 'string' || root.length === 0) throw missingLeaf('hookProjectionRoot');
  const leaseTtlMs = config.hookProjectionLeaseTtlMs;
  if (!Number.isFinite(leaseTtlMs) || leaseTtlMs <= 0) throw missingLeaf('hookProjectionLeaseTtlMs');
  const busyTimeoutMs = config.hookProjectionBusyTimeoutMs;
  if (!Number.isFinite(busyTimeoutMs) || busyTimeoutMs <= 0) throw missingLeaf('hookProjectionBusyTimeoutMs');
  // The registry is cloned once: the writer's checks, its lookups at each submission and the
  // store all read this copy, never the host's objects again.
  const given = config.hookProjectionChannels;
  let channels;
  try {
    channels = Array.isArray(given) ? jsonCopy(given, 'hookProjectionChannels') : given;
  } catch {
    throw missingLeaf('hookProjectionChannels');
  }
  if (!Array.isArray(channels) || !channels.every((c) => c && typeof c.name === 'string' && typeof c.owner === 'string')) {
    throw missingLeaf('hookProjectionChannels');
  }
  if (clock !== undefined && typeof clock !== 'function') {
    throw new TypeError('[hookProjectionWriter] clock must be a function () => epochMs');
  }
  if (fs !== undefined && !isNodeFs(fs)) {
    throw coded(
      'INVALID_CONFIG',
      "[hookProjectionWriter] fs must be Node's own node:fs, or absent: solewriter runs every file step itself (through " +
        'held directory handles, no symlink followed, with its fsyncs), so a substitute fs would see none of them; a test ' +
        'publishes into a temporary directory instead (testStore of solewriter/testing); nothing was done',
    );
  }
  const storeConfig = {
    hookProjectionRoot: root,
    channels,
    leaseTtlMs,
    busyTimeoutMs,
    profile: PROFILE,
    ...(clock ? { clock } : {}),
  };
  // The whole configuration checked now, before anything touches the store: every value the
  // store would refuse (a TTL or busy timeout not a whole number of ms in range, a root that
  // is not a directory, a channel without envelopeSchema, of an unknown watermark kind or
  // named twice) is INVALID_CONFIG here, never at the first call after ensureSchema has run.
  // Then the root, resolved once (a later process.chdir moves nothing), its missing ancestors
  // made (mode 0700) as the JavaScript writer's mkdir -p made them.
  storeConfig.hookProjectionRoot = storeConfigOf(storeConfig, { makeParent: true }).copy.hookProjectionRoot;
  const registry = new Map(channels.map((c) => [c.name, c]));

  /** One store per database handle, with the targets it has admitted. */
  const stores = new WeakMap();

  const requireDb = () => {
    const db = getDb();
    if (!db) throw new Error('[hookProjectionWriter] the Memory Core SQLite store is unavailable');
    return db;
  };

  const storeOf = (db) => {
    let entry = stores.get(db);
    if (!entry) {
      entry = { store: new ProjectionStore(db, storeConfig), admitted: new Set() };
      stores.set(db, entry);
    }
    return entry;
  };

  /** The store of `db`, the attested `tuple`'s target (`targetId`) admitted in it. */
  const admittedStore = (db, tuple, targetId) => {
    const entry = storeOf(db);
    if (!entry.admitted.has(targetId)) {
      entry.store.admitTarget(tuple);
      entry.admitted.add(targetId);
    }
    return entry;
  };

  /**
   * Makes or finds the two tables of the Memory Core profile; idempotent, safe at every boot.
   * At the first boot after the switch the database holds the JavaScript writer's tables:
   * ensureSchema adopts them first (`adoptJsWriterTables`, in one transaction: ids, epochs,
   * rows and conflicts kept, the writer's grants ended), then `initialize` finds them.
   * Returns `{schema: 'created' | 'present' | 'upgraded', adoption: 'converted' |
   * 'alreadyAdopted' | 'nothingToAdopt'}` (the writer's returned nothing).
   */
  const ensureSchema = () => {
    const db = requireDb();
    const adoption = adoptJsWriterTables(db, [], { profile: PROFILE, channels, ...(clock ? { clock } : {}) }).outcome;
    const schema = initialize(db, { profile: PROFILE });
    return { schema, adoption };
  };

  /**
   * Submits one producer's channel for an attested target: `{accepted, outcome, reason?}`,
   * outcome `advanced`, `replayed`, `source-conflict`, `regressed-watermark`,
   * `target-not-admitted`, `foreign-producer`, `unknown-channel` or `schema-mismatch`. What no
   * outcome names (an oversized envelope, a watermark not of the channel's kind, ...) throws
   * solewriter's REJECTED error, with `rejection` naming why.
   */
  const submitChannel = ({ tuple: given, channel, envelope, sourceWatermark, capturedAt, expiresAt, isTargetAdmitted, mayProduceChannel }) => {
    const db = requireDb();
    const tuple = tupleCopy(given);
    const targetId = targetIdOf(tuple);
    const { captured, expires, envelopeJson, schemaVersion } = checkSubmission({
      targetId,
      channel,
      envelope,
      sourceWatermark,
      capturedAt,
      expiresAt,
      isTargetAdmitted,
      mayProduceChannel,
    });
    if (!isTargetAdmitted(targetId)) {
      return { accepted: false, outcome: 'target-not-admitted', reason: `target ${targetId} is not admitted` };
    }
    if (!mayProduceChannel({ targetId, channel })) {
      return { accepted: false, outcome: 'foreign-producer', reason: `this producer may not write channel ${channel}` };
    }
    const spec = registry.get(channel);
    if (!spec) {
      return { accepted: false, outcome: 'unknown-channel', reason: `channel ${channel} has no pinned schema contract (it is not in hookProjectionChannels)` };
    }
    if (schemaVersion !== spec.envelopeSchema) {
      return {
        accepted: false,
        outcome: 'schema-mismatch',
        reason: `channel ${channel} requires ${spec.envelopeSchema}; envelope carries ${schemaVersion}`,
      };
    }
    const { store } = admittedStore(db, tuple, targetId);
    const integer = (spec.watermark ?? 'integer') === 'integer' && DECIMAL.test(sourceWatermark) && Number.isSafeInteger(Number(sourceWatermark));
    let outcome;
    try {
      outcome = store.submit(spec.owner, {
        targetId,
        channel,
        sourceWatermark: integer ? Number(sourceWatermark) : sourceWatermark,
        envelopeJson,
        capturedAt: captured,
        expiresAt: expires,
      });
    } catch (e) {
      if (e.code !== 'REJECTED') throw e;
      if (e.rejection === 'regressed') {
        return { accepted: false, outcome: 'regressed-watermark', reason: `watermark ${e.submitted} is older than the stored ${e.stored}` };
      }
      if (e.rejection === 'schema-invalid') return { accepted: false, outcome: 'schema-mismatch', reason: e.message };
      throw e;
    }
    if (outcome === 'degraded') {
      return { accepted: false, outcome: 'source-conflict', reason: `two payloads claim watermark ${sourceWatermark}` };
    }
    if (outcome === 'replayed') return { accepted: true, outcome: 'replayed' };
    return { accepted: true, outcome: 'advanced' }; // inserted or advanced
  };

  /**
   * One fenced publication of the target's document with the hooks' consumer binding (grant,
   * compose, write, release): `{published: true, channels, targetId, epoch}`; contention
   * `{published: false, reason: 'held', retryAfterMs, targetId}`; a refusal the writer names
   * `{published: false, reason, targetId, epoch}` (`epoch`: the grant's, absent when the refusal
   * came before a grant; `superseded-epoch`, `foreign-token`,
   * `lease-expired`, `not-held`, `lease-expired-at-write`, `write-failed: …`). Anything else
   * (BUSY, NOT_DURABLE, ...) throws solewriter's coded error. The tuple is attested by the
   * caller: a target nobody submitted to is admitted here and its document published, every
   * slot honestly `missing`, as the JavaScript writer publishes it.
   */
  const publish = ({ tuple: given, consumerBinding }) => {
    const db = requireDb();
    const tuple = tupleCopy(given);
    const targetId = targetIdOf(tuple);
    const { store } = admittedStore(db, tuple, targetId);
    const holder = HOLDER.test(tuple.instanceKeyDigest) ? tuple.instanceKeyDigest : FALLBACK_HOLDER;
    let answer;
    try {
      answer = store.publishNow(targetId, holder, { consumerBinding });
    } catch (e) {
      // The grant's epoch, as the writer answers it, when the refusal came after a grant.
      const refusal = (reason) => ({ published: false, reason, targetId, ...(e.epoch === undefined ? {} : { epoch: e.epoch }) });
      if (e.code === 'FENCED' && FENCED_REASONS[e.reason]) return refusal(FENCED_REASONS[e.reason]);
      if (e.code === 'LEASE_EXPIRED') return refusal('lease-expired-at-write');
      if (e.code === 'IO' || e.code === 'UNSAFE_RUNTIME_DIR' || e.code === 'NOT_REGULAR_FILE') return refusal(`write-failed: ${e.message}`);
      throw e;
    }
    if (answer.held) return { published: false, reason: 'held', retryAfterMs: answer.held.retryAfterMs, targetId };
    const { n } = db.prepare('SELECT count(*) AS n FROM main."HookProjectionChannels" WHERE target_id = ?').get(targetId);
    return { published: true, channels: Number(n), targetId, epoch: answer.published.epoch };
  };

  return { deriveTargetId, ensureSchema, submitChannel, publish };
}

module.exports = { makeHookProjectionWriter, deriveTargetId, TARGET_TUPLE_FIELDS, PROFILE };
