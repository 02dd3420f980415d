'use strict';
/**
 * Reference reader of solewriter's published hook projection (`current.json`, format v2).
 *
 * No dependencies (Node's `fs` and `crypto` only). A hook binds the reader to its OWN attested
 * identity (the seven-field attested tuple); the reader derives the target id from it exactly
 * as solewriter does (`solewriter.target.v1` canonical encoding, SHA-256, lowercase hex),
 * builds the one path `<runtimeRoot>/hook-projections/<targetId>/current.json` itself (no
 * path is ever taken from a document), and returns the whole validated document or throws one
 * typed error:
 *
 * - bounded read: a file of more than MAX_DOCUMENT_BYTES (64 MiB) is refused (TooLargeError);
 *   at most one byte past the bound is read;
 * - no symlink is followed: `hook-projections/`, the target directory and `current.json` are
 *   each opened with O_NOFOLLOW, and the opened directories are checked (device and inode)
 *   against the path once the file is open (UnsafePathError);
 * - every field's shape is checked as solewriter's Rust parser checks it (see
 *   `schema/current.v2.schema.json`): each channel's `status` and `reason` paired as the
 *   publisher pairs them and agreeing with `publishedAt`, `envelope` null exactly for a
 *   `corrupt-envelope` channel, `producerWatermarks` and `coverage` equal to what the channels
 *   imply, no name both in `channels` and `missing`; plus the order the publisher guarantees
 *   (InvalidDocumentError). A document of another format (v1 included) is refused as invalid,
 *   naming the format expected;
 * - a document for another target is refused (ForeignDocumentError);
 * - status is re-checked at the reader's clock (statusAt): a degraded or stale channel stays
 *   so, a fresh one is `stale` (reason `expired`) once `expiresAt <= now`; coverageAt
 *   recounts the coverage at that clock.
 */

const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');

const FORMAT = 'solewriter.hook-projection.v2';
const MAX_DOCUMENT_BYTES = 64 * 1024 * 1024;
const PROJECTIONS_DIR = 'hook-projections';
const CURRENT_FILE = 'current.json';
const CANONICAL_PREFIX = 'solewriter.target.v1\n';
const TUPLE_FIELDS = Object.freeze([
  'schemaVersion',
  'capability',
  'agentId',
  'harnessType',
  'instanceKeyDigest',
  'workspaceKeyDigest',
  'projectionKind',
]);
const MAX_FIELD_BYTES = 256;

const TARGET_ID = /^[0-9a-f]{64}$/;
const NAME = /^[a-z0-9][a-z0-9._-]{0,63}$/;
const SHOWN_FORMAT = /^[\x20-\x7e]{1,64}$/;
const TOP_KEYS = [
  'format',
  'targetId',
  'fencingEpoch',
  'publishedAt',
  'channels',
  'missing',
  'producerWatermarks',
  'coverage',
];
const CHANNEL_KEYS = [
  'channel',
  'producer',
  'sourceWatermark',
  'capturedAt',
  'expiresAt',
  'updatedAt',
  'status',
  'reason',
  'envelope',
];
const COVERAGE_KEYS = Object.freeze(['registered', 'fresh', 'stale', 'degraded', 'missing', 'unregistered']);
const STATUSES = Object.freeze(['fresh', 'stale', 'degraded']);
/** The reasons each status is published with. */
const REASONS = Object.freeze({
  fresh: Object.freeze([null]),
  stale: Object.freeze(['expired']),
  degraded: Object.freeze(['source-conflict', 'corrupt-envelope']),
});
const CORRUPT_ENVELOPE = 'corrupt-envelope';
const READ_CHUNK = 1024 * 1024;
const { O_RDONLY, O_DIRECTORY, O_NOFOLLOW, O_NONBLOCK } = fs.constants;

/** Base of every error this module throws; `code` names the type, `path` the file. */
class ReaderError extends Error {
  constructor(message, filePath, options) {
    super(filePath === undefined ? message : `${filePath}: ${message}`, options);
    this.name = this.constructor.name;
    this.path = filePath;
  }
}
/** The attested tuple is not exactly the seven fields, each a valid string. */
class InvalidTupleError extends ReaderError {}
/** No `current.json` for the target (nothing published yet). */
class NotPublishedError extends ReaderError {}
/** A symlink or a non-directory / non-regular file where the reader expects its path. */
class UnsafePathError extends ReaderError {}
/** Any other OS error while opening or reading (the system error is `cause`). */
class ReadFailedError extends ReaderError {}
/** The file holds more than MAX_DOCUMENT_BYTES bytes. */
class TooLargeError extends ReaderError {}
/** The bytes are not a complete, well-formed v2 projection document. */
class InvalidDocumentError extends ReaderError {}
/** A well-formed document naming another target than the reader's own. */
class ForeignDocumentError extends ReaderError {}

const CODES = [
  [InvalidTupleError, 'invalid-tuple'],
  [NotPublishedError, 'absent'],
  [UnsafePathError, 'unsafe-path'],
  [ReadFailedError, 'io'],
  [TooLargeError, 'too-large'],
  [InvalidDocumentError, 'invalid'],
  [ForeignDocumentError, 'foreign'],
];
for (const [cls, code] of CODES) {
  Object.defineProperty(cls.prototype, 'code', { value: code });
}

function isPlainObject(value) {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Rust's `char::is_control`: the C0 and C1 control ranges. */
function hasControl(text) {
  return /[\u0000-\u001f\u007f-\u009f]/.test(text);
}

/** The canonical encoding of the attested tuple, a Buffer (throws InvalidTupleError). */
function canonicalBytes(attestedTuple) {
  if (!isPlainObject(attestedTuple)) {
    throw new InvalidTupleError('attested tuple is not an object');
  }
  for (const key of Object.keys(attestedTuple)) {
    if (!TUPLE_FIELDS.includes(key)) {
      throw new InvalidTupleError(`attested tuple has unknown field \`${key}\``);
    }
  }
  const parts = [Buffer.from(CANONICAL_PREFIX, 'ascii')];
  for (const field of TUPLE_FIELDS) {
    if (!Object.prototype.hasOwnProperty.call(attestedTuple, field)) {
      throw new InvalidTupleError(`attested tuple is missing \`${field}\``);
    }
    const value = attestedTuple[field];
    if (typeof value !== 'string') {
      throw new InvalidTupleError(`attested field \`${field}\` is not a string`);
    }
    if (!value.isWellFormed()) {
      throw new InvalidTupleError(`attested field \`${field}\` is not valid Unicode`);
    }
    const encoded = Buffer.from(value, 'utf8');
    if (encoded.length === 0 || encoded.length > MAX_FIELD_BYTES) {
      throw new InvalidTupleError(`attested field \`${field}\` must be 1-${MAX_FIELD_BYTES} bytes`);
    }
    if (hasControl(value)) {
      throw new InvalidTupleError(`attested field \`${field}\` contains a control character`);
    }
    parts.push(Buffer.from(`${field}=${encoded.length}:`, 'ascii'), encoded, Buffer.from('\n'));
  }
  return Buffer.concat(parts);
}

/** The target id: lowercase hex SHA-256 of canonicalBytes(attestedTuple). */
function targetId(attestedTuple) {
  return crypto.createHash('sha256').update(canonicalBytes(attestedTuple)).digest('hex');
}

/** `<runtimeRoot>/hook-projections/<target>/current.json` for a valid target id. */
function currentPath(runtimeRoot, target) {
  if (typeof target !== 'string' || !TARGET_ID.test(target)) {
    throw new InvalidTupleError('target id must be 64 lowercase hex characters');
  }
  return path.join(runtimeRoot, PROJECTIONS_DIR, target, CURRENT_FILE);
}

function invalid(message) {
  throw new InvalidDocumentError(message);
}

function has(object, key) {
  return Object.prototype.hasOwnProperty.call(object, key);
}

/** An object of exactly `keys` (JSON.parse keeps the last of a key written twice). */
function checkObject(value, what, keys) {
  if (!isPlainObject(value)) invalid(`${what} is not an object`);
  for (const key of Object.keys(value)) {
    if (!keys.includes(key)) invalid(`${what} has the unknown key \`${key}\``);
  }
  for (const key of keys) {
    if (!has(value, key)) invalid(`${what} is missing \`${key}\``);
  }
}

/** A u64 as JavaScript can hold it exactly: a safe non-negative integer. */
function checkU64(value, what) {
  if (!Number.isSafeInteger(value) || value < 0) {
    invalid(`${what} is not an integer in 0..2^53-1`);
  }
}

function checkName(value, what) {
  if (typeof value !== 'string' || !NAME.test(value)) {
    invalid(`${what} is not a name ([a-z0-9][a-z0-9._-]{0,63})`);
  }
}

function checkAscending(names, what) {
  for (let i = 1; i < names.length; i += 1) {
    if (!(names[i - 1] < names[i])) {
      invalid(`${what} are not in strictly ascending name order (\`${names[i]}\`)`);
    }
  }
}

function checkChannel(channel, index, publishedAt) {
  const what = `channels[${index}]`;
  checkObject(channel, what, CHANNEL_KEYS);
  checkName(channel.channel, `${what}.channel`);
  if (channel.producer !== null) checkName(channel.producer, `${what}.producer`);
  for (const key of ['sourceWatermark', 'capturedAt', 'expiresAt', 'updatedAt']) {
    checkU64(channel[key], `${what}.${key}`);
  }
  const { status, reason } = channel;
  if (!STATUSES.includes(status)) invalid(`${what}.status is not \`fresh\`, \`stale\` or \`degraded\``);
  if (reason !== null && !REASONS.stale.includes(reason) && !REASONS.degraded.includes(reason)) {
    invalid(`${what}.reason is not null, \`expired\`, \`source-conflict\` or \`corrupt-envelope\``);
  }
  if (!REASONS[status].includes(reason)) {
    invalid(`${what} has status \`${status}\` with reason \`${reason === null ? 'null' : reason}\``);
  }
  if (channel.envelope === null && reason !== CORRUPT_ENVELOPE) {
    invalid(`${what}.envelope is null, but the reason is not \`${CORRUPT_ENVELOPE}\``);
  }
  if (channel.envelope !== null && reason === CORRUPT_ENVELOPE) {
    invalid(`${what}.envelope is not null, but the reason is \`${CORRUPT_ENVELOPE}\``);
  }
  if (channel.envelope !== null && (typeof channel.envelope !== 'object' || Array.isArray(channel.envelope))) {
    invalid(`${what}.envelope is not a JSON object`);
  }
  if (status === 'fresh' && channel.expiresAt <= publishedAt) {
    invalid(`${what} is \`fresh\`, but expiresAt <= publishedAt`);
  }
  if (status === 'stale' && publishedAt < channel.expiresAt) {
    invalid(`${what} is \`stale\`, but publishedAt < expiresAt`);
  }
}

/**
 * `producerWatermarks`: exactly producer -> channel -> watermark of the channels whose
 * producer is not null. Maps, not plain objects, hold what the channels imply, and keys are
 * looked up as own properties: a producer or channel may be named `constructor`.
 */
function checkProducerWatermarks(doc) {
  const value = doc.producerWatermarks;
  if (!isPlainObject(value)) invalid('producerWatermarks is not an object');
  for (const [producer, channels] of Object.entries(value)) {
    checkName(producer, `producerWatermarks key \`${producer}\``);
    if (!isPlainObject(channels)) invalid(`producerWatermarks.${producer} is not an object`);
    for (const [name, watermark] of Object.entries(channels)) {
      checkName(name, `producerWatermarks.${producer} key \`${name}\``);
      checkU64(watermark, `producerWatermarks.${producer}.${name}`);
    }
  }
  const implied = new Map();
  doc.channels.forEach((channel, index) => {
    if (channel.producer === null) return;
    if (!implied.has(channel.producer)) implied.set(channel.producer, new Map());
    implied.get(channel.producer).set(channel.channel, index);
  });
  for (const [producer, channels] of Object.entries(value)) {
    if (!implied.has(producer)) {
      invalid(`producerWatermarks has the producer \`${producer}\`, which owns no channel of channels`);
    }
    for (const name of Object.keys(channels)) {
      if (!implied.get(producer).has(name)) {
        invalid(
          `producerWatermarks.${producer} has the channel \`${name}\`, ` +
            `which is not a channel of \`${producer}\` in channels`,
        );
      }
    }
  }
  for (const [producer, channels] of implied) {
    if (!has(value, producer)) invalid(`producerWatermarks lacks the producer \`${producer}\``);
    for (const [name, index] of channels) {
      if (!has(value[producer], name)) invalid(`producerWatermarks.${producer} lacks the channel \`${name}\``);
      const listed = value[producer][name];
      const stored = doc.channels[index].sourceWatermark;
      if (listed !== stored) {
        invalid(
          `producerWatermarks.${producer}.${name} is ${listed}, but channels[${index}].sourceWatermark is ${stored}`,
        );
      }
    }
  }
}

/** The coverage of `document` for the channels' `statuses` (in channel order). */
function coverageOf(document, statuses) {
  const count = (status) => statuses.filter((s) => s === status).length;
  const unregistered = document.channels.filter((c) => c.producer === null).length;
  return {
    registered: document.channels.length - unregistered + document.missing.length,
    fresh: count('fresh'),
    stale: count('stale'),
    degraded: count('degraded'),
    missing: document.missing.length,
    unregistered,
  };
}

function checkCoverage(doc) {
  const value = doc.coverage;
  checkObject(value, 'coverage', COVERAGE_KEYS);
  for (const key of COVERAGE_KEYS) checkU64(value[key], `coverage.${key}`);
  const expected = coverageOf(doc, doc.channels.map((c) => c.status));
  for (const key of COVERAGE_KEYS) {
    if (value[key] !== expected[key]) invalid(`coverage.${key} is ${value[key]}, expected ${expected[key]}`);
  }
}

/**
 * Validates the bytes (a Buffer or Uint8Array) of a `current.json` and returns the document.
 * Throws TooLargeError, InvalidDocumentError or ForeignDocumentError.
 */
function parseDocument(bytes, expectedTargetId) {
  if (bytes.length > MAX_DOCUMENT_BYTES) {
    throw new TooLargeError(`${bytes.length} bytes or more exceeds the bound of ${MAX_DOCUMENT_BYTES}`);
  }
  let doc;
  try {
    const text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes);
    doc = JSON.parse(text);
  } catch (e) {
    throw new InvalidDocumentError(`not JSON: ${e.message}`);
  }
  if (isPlainObject(doc) && has(doc, 'format') && doc.format !== FORMAT) {
    if (typeof doc.format === 'string' && SHOWN_FORMAT.test(doc.format)) {
      invalid(`format is \`${doc.format}\`, expected \`${FORMAT}\``);
    }
    invalid(`format is not \`${FORMAT}\``);
  }
  checkObject(doc, 'document', TOP_KEYS);
  if (typeof doc.targetId !== 'string' || !TARGET_ID.test(doc.targetId)) {
    invalid('targetId is not 64 lowercase hex characters');
  }
  checkU64(doc.fencingEpoch, 'fencingEpoch');
  checkU64(doc.publishedAt, 'publishedAt');
  if (!Array.isArray(doc.channels)) invalid('channels is not an array');
  doc.channels.forEach((channel, index) => checkChannel(channel, index, doc.publishedAt));
  const names = doc.channels.map((c) => c.channel);
  checkAscending(names, 'channels');
  if (!Array.isArray(doc.missing)) invalid('missing is not an array');
  doc.missing.forEach((name, index) => checkName(name, `missing[${index}]`));
  checkAscending(doc.missing, 'missing channels');
  const stored = new Set(names);
  for (const name of doc.missing) {
    if (stored.has(name)) invalid(`\`${name}\` is both in channels and in missing`);
  }
  checkProducerWatermarks(doc);
  checkCoverage(doc);
  if (doc.targetId !== expectedTargetId) {
    throw new ForeignDocumentError(`document names target ${doc.targetId}, expected ${expectedTargetId}`);
  }
  return doc;
}

function channelStatusAt(channel, nowMs) {
  if (channel.status === 'fresh' && channel.expiresAt <= nowMs) return { status: 'stale', reason: 'expired' };
  return { status: channel.status, reason: channel.reason };
}

/**
 * `{channel: {status, reason}}` at `nowMs` for a validated document. A channel published
 * `degraded` keeps its status and reason, one published `stale` stays stale (it expired at
 * publication), one published `fresh` is `stale` with reason `expired` once
 * `expiresAt <= nowMs`, else `fresh` with reason null. The object has no prototype, so a
 * channel may be named `constructor`.
 */
function statusAt(document, nowMs) {
  const out = Object.create(null);
  for (const c of document.channels) out[c.channel] = channelStatusAt(c, nowMs);
  return out;
}

/**
 * The document's `coverage` recounted at `nowMs` (same keys): `fresh`, `stale` and `degraded`
 * by statusAt; `registered`, `missing` and `unregistered` as published.
 */
function coverageAt(document, nowMs) {
  return coverageOf(document, document.channels.map((c) => channelStatusAt(c, nowMs).status));
}

function openChecked(target, flags, filePath) {
  try {
    return fs.openSync(target, flags);
  } catch (e) {
    if (e.code === 'ENOENT') throw new NotPublishedError('not published', filePath);
    if (e.code === 'ELOOP' || e.code === 'ENOTDIR' || e.code === 'EMLINK') {
      throw new UnsafePathError(`a symlink or not a directory (${e.code})`, filePath);
    }
    throw new ReadFailedError(e.message, filePath, { cause: e });
  }
}

function sameFile(a, b) {
  return a.dev === b.dev && a.ino === b.ino;
}

/**
 * The bytes of the target's `current.json` (a Buffer of at most MAX_DOCUMENT_BYTES + 1
 * bytes), opened without following a symlink at `hook-projections/`, the target directory or
 * the file.
 */
function readBytes(runtimeRoot, target) {
  const filePath = currentPath(runtimeRoot, target);
  const dirs = [path.join(runtimeRoot, PROJECTIONS_DIR), path.dirname(filePath)];
  const fds = [];
  try {
    for (const dir of dirs) fds.push(openChecked(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, filePath));
    const fd = openChecked(filePath, O_RDONLY | O_NOFOLLOW | O_NONBLOCK, filePath);
    fds.push(fd);
    // O_NOFOLLOW guards only the last component of each path: the directories opened above
    // must still be the ones on the path now that the file is open.
    dirs.forEach((dir, i) => {
      if (!sameFile(fs.fstatSync(fds[i]), fs.lstatSync(dir))) {
        throw new UnsafePathError('a directory was replaced while opening', filePath);
      }
    });
    if (!fs.fstatSync(fd).isFile()) throw new UnsafePathError('not a regular file', filePath);
    const chunks = [];
    let size = 0;
    while (size <= MAX_DOCUMENT_BYTES) {
      const chunk = Buffer.allocUnsafe(Math.min(READ_CHUNK, MAX_DOCUMENT_BYTES + 1 - size));
      const n = fs.readSync(fd, chunk, 0, chunk.length, null);
      if (n === 0) break;
      chunks.push(chunk.subarray(0, n));
      size += n;
    }
    return Buffer.concat(chunks, size);
  } catch (e) {
    if (e instanceof ReaderError) throw e;
    throw new ReadFailedError(e.message, filePath, { cause: e });
  } finally {
    for (const fd of fds) fs.closeSync(fd);
  }
}

/**
 * Reads the document published for the reader's own attested identity. `options.nowMs`
 * (Unix milliseconds) defaults to the reader's clock. Returns
 * `{ targetId, path, document, readAtMs, status, coverage }` (status and coverage at
 * `readAtMs`: statusAt, coverageAt); throws a ReaderError subclass.
 */
function readCurrent(runtimeRoot, attestedTuple, options = {}) {
  const target = targetId(attestedTuple);
  const filePath = currentPath(runtimeRoot, target);
  const bytes = readBytes(runtimeRoot, target);
  let document;
  try {
    document = parseDocument(bytes, target);
  } catch (e) {
    if (!(e instanceof ReaderError)) throw e;
    throw new e.constructor(e.message, filePath);
  }
  const readAtMs = options.nowMs === undefined ? Date.now() : options.nowMs;
  return {
    targetId: target,
    path: filePath,
    document,
    readAtMs,
    status: statusAt(document, readAtMs),
    coverage: coverageAt(document, readAtMs),
  };
}

module.exports = {
  FORMAT,
  MAX_DOCUMENT_BYTES,
  TUPLE_FIELDS,
  COVERAGE_KEYS,
  STATUSES,
  REASONS,
  ReaderError,
  InvalidTupleError,
  NotPublishedError,
  UnsafePathError,
  ReadFailedError,
  TooLargeError,
  InvalidDocumentError,
  ForeignDocumentError,
  canonicalBytes,
  targetId,
  currentPath,
  parseDocument,
  statusAt,
  coverageAt,
  readBytes,
  readCurrent,
};
