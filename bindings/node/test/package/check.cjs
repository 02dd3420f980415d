'use strict';
// Reads back, with no help from solewriter, the current.json that publish.{cjs,mjs,ts} published:
// node check.cjs ROUTE < what-the-program-printed.json   (ROUTE: the envelope's marker; for the
// CommonJS run also ADDON, the file the process must have loaded, and the error codes expected).
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');

const [route, addon] = process.argv.slice(2);
const out = JSON.parse(fs.readFileSync(0, 'utf8'));
const { runtimeRoot, target, published } = out;
const file = path.join(runtimeRoot, 'hook-projections', target, 'current.json');
assert.match(target, /^[0-9a-f]{64}$/);
assert.equal(published.path, file);
assert.equal(published.targetId, target);
assert.equal(published.epoch, 1);
const text = fs.readFileSync(file, 'utf8');
assert.equal(Buffer.byteLength(text), published.bytes, 'the bytes published are the bytes on disk');
const doc = JSON.parse(text);
assert.equal(doc.format, 'solewriter.hook-projection.v2');
assert.equal(doc.targetId, target);
assert.equal(doc.fencingEpoch, 1);
assert.equal(doc.publishedAt, published.publishedAt);
assert.deepEqual(doc.producerWatermarks, { router: { 'computed-route': 1 } });
assert.equal(doc.channels.length, 1);
const [channel] = doc.channels;
assert.equal(channel.channel, 'computed-route');
assert.equal(channel.producer, 'router');
assert.equal(channel.status, 'fresh');
assert.deepEqual(channel.envelope, { schema: 'computed-route.v1', notAuthority: true, route });
assert.deepEqual(fs.readdirSync(path.dirname(file)), ['current.json'], 'no temp file left beside it');
if (addon !== undefined) {
  assert.deepEqual(out.addons, [addon], 'the addon loaded is the platform package\'s');
  assert.deepEqual(out.codes, { publishAgain: 'GRANT_SPENT', publishCopy: 'FENCED/released', numberTarget: 'INVALID_INPUT' });
}
console.log(`${route}: current.json read back (${published.bytes} bytes, epoch ${doc.fencingEpoch})`);
