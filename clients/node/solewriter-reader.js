'use strict';
/**
 * Reference reader of solewriter's published hook projection (`current.json`, format v1).
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
 *   `schema/current.v1.schema.json`), plus the order the publisher guarantees
 *   (InvalidDocumentError);
 * - a document for another target is refused (ForeignDocumentError);
 * - freshness is re-checked at the reader's clock: a channel is `fresh` while
 *   `now < expiresAt`, `expired` from then on.
 */

const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');

const FORMAT = 'solewriter.hook-projection.v1';
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
const TOP_KEYS = ['format', 'targetId', 'fencingEpoch', 'publishedAt', 'channels', 'missing'];
const CHANNEL_REQUIRED = [
  'channel',
  'sourceWatermark',
  'capturedAt',
  'expiresAt',
  'updatedAt',
  'freshness',
  'envelope',
];
const CHANNEL_OPTIONAL = ['producer', 'degraded'];
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
/** The bytes are not a complete, well-formed v1 projection document. */
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

function checkObject(value, what, required, optional = []) {
  if (!isPlainObject(value)) invalid(`${what} is not an object`);
  for (const key of Object.keys(value)) {
    if (!required.includes(key) && !optional.includes(key)) {
      invalid(`${what} has the unknown key \`${key}\``);
    }
  }
  for (const key of required) {
    if (!Object.prototype.hasOwnProperty.call(value, key)) invalid(`${what} is missing \`${key}\``);
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

function checkChannel(channel, index) {
  const what = `channels[${index}]`;
  checkObject(channel, what, CHANNEL_REQUIRED, CHANNEL_OPTIONAL);
  checkName(channel.channel, `${what}.channel`);
  if (channel.producer !== undefined && channel.producer !== null) {
    checkName(channel.producer, `${what}.producer`);
  }
  for (const key of ['sourceWatermark', 'capturedAt', 'expiresAt', 'updatedAt']) {
    checkU64(channel[key], `${what}.${key}`);
  }
  if (channel.freshness !== 'fresh' && channel.freshness !== 'expired') {
    invalid(`${what}.freshness is not \`fresh\` or \`expired\``);
  }
  if (![undefined, null, 'source-conflict'].includes(channel.degraded)) {
    invalid(`${what}.degraded is not null or \`source-conflict\``);
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
  checkObject(doc, 'document', TOP_KEYS);
  if (doc.format !== FORMAT) invalid(`format is not \`${FORMAT}\``);
  if (typeof doc.targetId !== 'string' || !TARGET_ID.test(doc.targetId)) {
    invalid('targetId is not 64 lowercase hex characters');
  }
  checkU64(doc.fencingEpoch, 'fencingEpoch');
  checkU64(doc.publishedAt, 'publishedAt');
  if (!Array.isArray(doc.channels)) invalid('channels is not an array');
  doc.channels.forEach(checkChannel);
  checkAscending(doc.channels.map((c) => c.channel), 'channels');
  if (!Array.isArray(doc.missing)) invalid('missing is not an array');
  doc.missing.forEach((name, index) => checkName(name, `missing[${index}]`));
  checkAscending(doc.missing, 'missing channels');
  if (doc.targetId !== expectedTargetId) {
    throw new ForeignDocumentError(`document names target ${doc.targetId}, expected ${expectedTargetId}`);
  }
  return doc;
}

/** `{channel: 'fresh' | 'expired'}` at `nowMs`: fresh iff `nowMs < expiresAt`. */
function freshnessAt(document, nowMs) {
  const out = {};
  for (const c of document.channels) out[c.channel] = nowMs < c.expiresAt ? 'fresh' : 'expired';
  return out;
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
 * `{ targetId, path, document, readAtMs, freshness }`; throws a ReaderError subclass.
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
  return { targetId: target, path: filePath, document, readAtMs, freshness: freshnessAt(document, readAtMs) };
}

module.exports = {
  FORMAT,
  MAX_DOCUMENT_BYTES,
  TUPLE_FIELDS,
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
  freshnessAt,
  readBytes,
  readCurrent,
};
