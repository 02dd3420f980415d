'use strict';
/**
 * Tests of the Node reference reader: the shared hand-made documents of
 * `clients/testdata/documents.json` (every error type, each refused for its reason), the
 * status and coverage at the reader's clock, the target_id vector of docs/format.md, symlinks, the size
 * bound, and a document published by the real `solewriter` binary (`$SOLEWRITER_BIN`, or
 * `target/debug/solewriter`: `cargo build -p solewriter-cli`).
 */

const test = require('node:test');
const assert = require('node:assert/strict');
const childProcess = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const r = require('./solewriter-reader.js');

const REPO = path.resolve(__dirname, '..', '..');
const CASES = JSON.parse(fs.readFileSync(path.join(REPO, 'clients', 'testdata', 'documents.json'), 'utf8'));
const VECTOR_TUPLE = {
  schemaVersion: '1',
  capability: 'hook-projection',
  agentId: 'agent-7',
  harnessType: 'claude-code',
  instanceKeyDigest: 'inst-1',
  workspaceKeyDigest: 'ws-1',
  projectionKind: 'live-lane',
};
const VECTOR_ID = '29a47a1e0854db43f7fb283e889c03c45ccfaf73f15385d8c69120edad6cb06a';

function caseBytes(c) {
  return c.textBase64 !== undefined ? Buffer.from(c.textBase64, 'base64') : Buffer.from(c.text, 'utf8');
}
const BASE = caseBytes(CASES.cases[0]);

/** `['ok', undefined]` or `[error code, error message]` of parsing `bytes` for `target`. */
function outcome(bytes, target) {
  try {
    r.parseDocument(bytes, target);
    return ['ok', undefined];
  } catch (e) {
    if (!(e instanceof r.ReaderError)) throw e;
    return [e.code, e.message];
  }
}

function verdict(bytes, target) {
  return outcome(bytes, target)[0];
}

const FRESH = { status: 'fresh', reason: null };
const STALE = { status: 'stale', reason: 'expired' };
const CONFLICT = { status: 'degraded', reason: 'source-conflict' };
const CORRUPT = { status: 'degraded', reason: 'corrupt-envelope' };

function tempRoot(t) {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'solewriter-reader-'));
  t.after(() => fs.rmSync(root, { recursive: true, force: true }));
  return root;
}

function plant(root, target, bytes) {
  const dir = path.join(root, 'hook-projections', target);
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'current.json'), bytes);
  return path.join(dir, 'current.json');
}

/** The error code of reading the vector tuple's document under `root` (`ok` if it reads). */
function readCode(root) {
  try {
    r.readCurrent(root, VECTOR_TUPLE, { nowMs: 0 });
    return 'ok';
  } catch (e) {
    assert.ok(e instanceof r.ReaderError, e.stack);
    assert.equal(e.path, r.currentPath(root, VECTOR_ID));
    assert.ok(e.message.includes(e.path));
    return e.code;
  }
}

test('target_id vector of docs/format.md', () => {
  assert.equal(
    r.canonicalBytes(VECTOR_TUPLE).toString('utf8'),
    'solewriter.target.v1\nschemaVersion=1:1\ncapability=15:hook-projection\nagentId=7:agent-7\n' +
      'harnessType=11:claude-code\ninstanceKeyDigest=6:inst-1\nworkspaceKeyDigest=4:ws-1\nprojectionKind=9:live-lane\n',
  );
  assert.equal(r.targetId(VECTOR_TUPLE), VECTOR_ID);
  assert.ok(r.canonicalBytes({ ...VECTOR_TUPLE, agentId: 'é' }).includes(Buffer.from('agentId=2:é\n')));
});

test('refused attested tuples', () => {
  const { agentId, ...withoutAgent } = VECTOR_TUPLE;
  assert.equal(agentId, 'agent-7');
  const refused = {
    'session id': { ...VECTOR_TUPLE, sessionId: 's' },
    path: { ...VECTOR_TUPLE, path: '/x' },
    'field absent': withoutAgent,
    'not a string': { ...VECTOR_TUPLE, agentId: 7 },
    empty: { ...VECTOR_TUPLE, agentId: '' },
    '257 bytes': { ...VECTOR_TUPLE, agentId: 'a'.repeat(257) },
    'control character': { ...VECTOR_TUPLE, agentId: 'a\u0085' },
    'lone surrogate': { ...VECTOR_TUPLE, agentId: '\udc00' },
    'not an object': ['1'],
  };
  for (const [name, tuple] of Object.entries(refused)) {
    assert.throws(() => r.targetId(tuple), (e) => e instanceof r.InvalidTupleError && e.code === 'invalid-tuple', name);
  }
  r.targetId({ ...VECTOR_TUPLE, agentId: 'a'.repeat(256) });
  for (const bad of ['../x', VECTOR_ID.toUpperCase(), VECTOR_ID.slice(0, 63)]) {
    assert.throws(() => r.currentPath('root', bad), r.InvalidTupleError, bad);
  }
});

test('shared hand-made documents', async (t) => {
  for (const c of CASES.cases) {
    await t.test(c.name, () => {
      const [code, message] = outcome(caseBytes(c), CASES.targetId);
      assert.equal(code, c.node ?? c.expect, message);
      // `error` is the reason the case was written for; it applies where Node agrees.
      if (code !== 'ok' && code === c.expect) assert.ok(message.includes(c.error), message);
    });
  }
});

test('size bound: at the bound reads, one byte past is too large', () => {
  const atBound = Buffer.concat([BASE, Buffer.alloc(r.MAX_DOCUMENT_BYTES - BASE.length, ' ')]);
  assert.equal(verdict(atBound, VECTOR_ID), 'ok');
  assert.equal(verdict(Buffer.concat([atBound, Buffer.from(' ')]), VECTOR_ID), 'too-large');
});

test('status and coverage at the reader clock', (t) => {
  const root = tempRoot(t);
  plant(root, VECTOR_ID, BASE);
  const doc = JSON.parse(BASE);
  const expires = doc.channels[0].expiresAt;
  assert.ok(expires > doc.publishedAt);
  const published = {
    'computed-route': FRESH,
    'lifecycle-frontier': STALE,
    'old-notes': CONFLICT,
    'route-plan': CORRUPT,
  };
  const coverage = { registered: 5, fresh: 1, stale: 1, degraded: 2, missing: 2, unregistered: 1 };
  assert.deepEqual(doc.coverage, coverage);
  const before = r.readCurrent(root, VECTOR_TUPLE, { nowMs: expires - 1 });
  assert.deepEqual({ ...before.status }, published);
  assert.deepEqual(before.coverage, coverage);
  assert.equal(before.readAtMs, expires - 1);
  assert.equal(before.targetId, VECTOR_ID);
  assert.equal(before.path, r.currentPath(root, VECTOR_ID));
  assert.deepEqual(before.document, doc);
  // expiresAt == now is stale: the boundary.
  const at = r.readCurrent(root, VECTOR_TUPLE, { nowMs: expires });
  assert.deepEqual({ ...at.status }, { ...published, 'computed-route': STALE });
  assert.deepEqual(at.coverage, { ...coverage, fresh: 0, stale: 2 });
  // Published stale stays stale, degraded stays degraded, at any clock (even behind
  // publishedAt, where the stale channel's expiresAt is still ahead).
  assert.deepEqual({ ...r.statusAt(doc, 0) }, published);
  assert.deepEqual(r.coverageAt(doc, 0), coverage);
  assert.deepEqual({ ...r.statusAt(doc, Number.MAX_SAFE_INTEGER) }, { ...published, 'computed-route': STALE });
  assert.deepEqual(r.statusAt(doc, doc.channels[3].expiresAt - 1)['route-plan'], CORRUPT);
  assert.deepEqual(Object.keys(r.coverageAt(doc, 0)), r.COVERAGE_KEYS);
  assert.deepEqual(doc.coverage, coverage, 'coverageAt leaves the document as published');
  const now = Date.now();
  assert.ok(r.readCurrent(root, VECTOR_TUPLE).readAtMs >= now);
});

test('a v1 document is refused, naming the format expected', () => {
  const v1 = CASES.cases.find((c) => c.name === 'a v1 document');
  assert.equal(r.FORMAT, 'solewriter.hook-projection.v2');
  assert.throws(
    () => r.parseDocument(caseBytes(v1), VECTOR_ID),
    (e) => e instanceof r.InvalidDocumentError && e.message.includes(r.FORMAT),
  );
});

test('a channel named constructor has its own status', () => {
  const c = CASES.cases.find((x) => x.name.startsWith('a producer and a channel named constructor'));
  const doc = r.parseDocument(caseBytes(c), VECTOR_ID);
  assert.deepEqual(r.statusAt(doc, doc.publishedAt).constructor, FRESH);
  // Without such a channel, `constructor` is no channel at all (not Object's constructor).
  assert.equal(r.statusAt(JSON.parse(BASE), 0).constructor, undefined);
});

test('absent, invalid, foreign, too large', (t) => {
  const root = tempRoot(t);
  assert.equal(readCode(path.join(root, 'no-such-root')), 'absent');
  assert.equal(readCode(root), 'absent');
  fs.mkdirSync(path.join(root, 'hook-projections', VECTOR_ID), { recursive: true });
  assert.equal(readCode(root), 'absent');
  plant(root, VECTOR_ID, BASE.subarray(0, 100));
  assert.equal(readCode(root), 'invalid');
  plant(root, VECTOR_ID, Buffer.from(BASE.toString().replace(VECTOR_ID, '0'.repeat(64))));
  assert.equal(readCode(root), 'foreign');
  plant(root, VECTOR_ID, Buffer.concat([BASE, Buffer.alloc(r.MAX_DOCUMENT_BYTES, ' ')]));
  assert.equal(readCode(root), 'too-large');
});

test('reads at most one byte past the bound', (t) => {
  const root = tempRoot(t);
  const file = plant(root, VECTOR_ID, '');
  fs.truncateSync(file, r.MAX_DOCUMENT_BYTES * 2);
  assert.equal(r.readBytes(root, VECTOR_ID).length, r.MAX_DOCUMENT_BYTES + 1);
});

test('symlinks are refused at every level', async (t) => {
  const cases = {
    'current.json': (root, elsewhere) => {
      fs.mkdirSync(path.join(root, 'hook-projections', VECTOR_ID), { recursive: true });
      fs.symlinkSync(elsewhere, r.currentPath(root, VECTOR_ID));
    },
    'target directory': (root, elsewhere) => {
      fs.mkdirSync(path.join(root, 'hook-projections'));
      fs.symlinkSync(path.dirname(elsewhere), path.join(root, 'hook-projections', VECTOR_ID));
    },
    'hook-projections': (root, elsewhere) => {
      fs.symlinkSync(path.dirname(path.dirname(elsewhere)), path.join(root, 'hook-projections'));
    },
  };
  for (const [name, link] of Object.entries(cases)) {
    await t.test(name, (tt) => {
      const root = tempRoot(tt);
      const elsewhere = plant(path.join(root, 'elsewhere'), VECTOR_ID, BASE);
      link(root, elsewhere);
      assert.equal(readCode(root), 'unsafe-path');
    });
  }
});

test('a fifo or a directory is not read', (t) => {
  const root = tempRoot(t);
  const file = r.currentPath(root, VECTOR_ID);
  fs.mkdirSync(path.dirname(file), { recursive: true });
  childProcess.execFileSync('mkfifo', [file]);
  assert.equal(readCode(root), 'unsafe-path');
  fs.rmSync(file);
  fs.mkdirSync(file);
  assert.equal(readCode(root), 'unsafe-path');
});

test('a document published by the solewriter CLI', (t) => {
  const bin = process.env.SOLEWRITER_BIN || path.join(REPO, 'target', 'debug', 'solewriter');
  assert.ok(fs.existsSync(bin), `${bin} not found: run \`cargo build -p solewriter-cli\` first`);
  const dir = tempRoot(t);
  fs.copyFileSync(path.join(REPO, 'clients', 'testdata', 'sw.toml'), path.join(dir, 'sw.toml'));
  const cli = (...args) => childProcess.execFileSync(bin, ['--config', 'sw.toml', ...args], { cwd: dir, encoding: 'utf8' });
  cli('init');
  const target = cli('admit', JSON.stringify(VECTOR_TUPLE)).trim();
  assert.equal(target, VECTOR_ID);
  const root = path.join(dir, 'runtime');
  assert.equal(readCode(root), 'absent');
  const now = Date.now();
  const envelope = { schema: 'lifecycle-frontier.v1', notAuthority: true, frontier: [1, 2] };
  cli('submit', '--producer', 'lifecycle', '--target', target, '--channel', 'lifecycle-frontier', '--watermark', '3',
    '--envelope', JSON.stringify(envelope), '--captured-at', String(now), '--expires-in-ms', '60000');
  const answer = JSON.parse(cli('--json', 'publish', target, '--instance', 'ops-1'));
  const reading = r.readCurrent(root, VECTOR_TUPLE, { nowMs: now });
  assert.equal(reading.document.fencingEpoch, answer.fencingEpoch);
  assert.deepEqual(reading.document.channels[0].envelope, envelope);
  assert.deepEqual(reading.document.missing, ['computed-route']);
  assert.deepEqual(reading.document.producerWatermarks, { lifecycle: { 'lifecycle-frontier': 3 } });
  assert.deepEqual({ ...reading.status }, { 'lifecycle-frontier': FRESH });
  const coverage = { registered: 2, fresh: 1, stale: 0, degraded: 0, missing: 1, unregistered: 0 };
  assert.deepEqual(reading.document.coverage, coverage);
  assert.deepEqual(reading.coverage, coverage);
  const later = r.readCurrent(root, VECTOR_TUPLE, { nowMs: now + 60000 });
  assert.deepEqual({ ...later.status }, { 'lifecycle-frontier': STALE });
  assert.deepEqual(later.coverage, { ...coverage, fresh: 0, stale: 1 });
  assert.throws(() => r.readCurrent(root, { ...VECTOR_TUPLE, agentId: 'agent-8' }), r.NotPublishedError);
});
