'use strict';
/**
 * A store's configuration, checked whole and at once: each field read once (`lib/copy.js`),
 * its types, the runtime root resolved to an absolute path (a later `process.chdir` moves
 * nothing) and found to be a directory, then the addon's own check of every value
 * (`NativeStore`: the channel registry's shape, duplicates and watermark kinds, the TTL and the
 * busy timeout as whole milliseconds in range, the profile). Nothing here touches a database:
 * `ProjectionStore` and the Memory Core's writer factory both refuse a wrong configuration
 * (INVALID_CONFIG, naming the field) before any statement runs.
 */

const fs = require('node:fs');
const path = require('node:path');
const { addon, coded } = require('./addon');
const { native } = require('./answer');
const { readHost, fieldsOf, jsonCopy } = require('./copy');

/** The configuration fields of a store: those without `optional` are required. */
const CONFIG_FIELDS = {
  runtimeRoot: 'string',
  channels: 'array',
  leaseTtlMs: 'number',
  busyTimeoutMs: 'number',
  profile: 'optional string',
  clock: 'optional function',
  probe: 'optional function',
};

/** INVALID_CONFIG saying `message`. */
const badConfig = (message) => coded('INVALID_CONFIG', `configuration: ${message}; nothing was done`);

/**
 * The configuration copied (each field read once; the channel registry cloned through JSON;
 * `runtimeRoot` absolute) and the addon's store of it: `{ copy, store }`, or INVALID_CONFIG for
 * a field missing, unknown, of another type or of a value the addon refuses.
 */
function storeConfigOf(config) {
  if (config === null || typeof config !== 'object') throw badConfig('a configuration object is required');
  for (const field of readHost('configuration', () => Object.keys(config), 'INVALID_CONFIG')) {
    if (!(field in CONFIG_FIELDS)) throw badConfig(`unknown field \`${field}\` (known: ${Object.keys(CONFIG_FIELDS).join(', ')})`);
  }
  const copy = fieldsOf(config, Object.keys(CONFIG_FIELDS), 'configuration', 'INVALID_CONFIG');
  for (const [field, kind] of Object.entries(CONFIG_FIELDS)) {
    const value = copy[field];
    if (value === undefined) {
      if (kind.startsWith('optional')) continue;
      throw badConfig(`\`${field}\` is missing (there is no default)`);
    }
    const type = kind.replace('optional ', '');
    const ok = type === 'array' ? Array.isArray(value) : typeof value === type;
    if (!ok) throw badConfig(`\`${field}\` must be a ${type}`);
  }
  copy.channels = jsonCopy(copy.channels, 'configuration: `channels`', 'INVALID_CONFIG');
  if (copy.runtimeRoot.length === 0) throw badConfig('`runtimeRoot` is missing (an empty path)');
  // Resolved once, here: a relative root names the directory it named when the store was made.
  copy.runtimeRoot = path.resolve(copy.runtimeRoot);
  let stat;
  try {
    stat = fs.statSync(copy.runtimeRoot);
  } catch (e) {
    throw badConfig(`\`runtimeRoot\` ${copy.runtimeRoot} cannot be read (${e.code || e.message})`);
  }
  if (!stat.isDirectory()) throw badConfig(`\`runtimeRoot\` ${copy.runtimeRoot} is not a directory`);
  const { runtimeRoot, leaseTtlMs, busyTimeoutMs, profile } = copy;
  const channelsJson = JSON.stringify(copy.channels);
  // The addon's check of every value (INVALID_CONFIG naming the field).
  const store = native(() => new addon.NativeStore({ channelsJson, leaseTtlMs, busyTimeoutMs, runtimeRoot, profile }));
  return { copy, store };
}

module.exports = { CONFIG_FIELDS, storeConfigOf, badConfig };
