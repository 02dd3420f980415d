'use strict';
/**
 * A store's configuration, checked whole and at once: each field read once (`lib/copy.js`),
 * its types, the root (`runtimeRoot`, or `hookProjectionRoot`) resolved to an absolute path (a
 * later `process.chdir` moves nothing) and found to be a directory (the projection root's
 * parent, when the projection root itself is still to be made), then the addon's own check of every value
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
  runtimeRoot: 'optional string',
  hookProjectionRoot: 'optional string',
  channels: 'array',
  leaseTtlMs: 'number',
  busyTimeoutMs: 'number',
  profile: 'optional string',
  clock: 'optional function',
  probe: 'optional function',
};

/** INVALID_CONFIG saying `message`. */
const badConfig = (message) => coded('INVALID_CONFIG', `configuration: ${message}; nothing was done`);

/** The one root field the configuration gives, or INVALID_CONFIG. */
function rootField(copy) {
  const given = ['runtimeRoot', 'hookProjectionRoot'].filter((field) => copy[field] !== undefined);
  if (given.length !== 1) {
    throw badConfig(given.length ? 'give `runtimeRoot` or `hookProjectionRoot`, not both' : '`runtimeRoot` is missing (or give `hookProjectionRoot`)');
  }
  const [field] = given;
  if (copy[field].length === 0) throw badConfig(`\`${field}\` is missing (an empty path)`);
  return field;
}

/**
 * Checks the root `field` at `resolved` on the file system: the runtime root must be a
 * directory; the projection root's parent too, and the projection root itself once it is there
 * (it is made on first use). `makeParent`: the projection root's missing ancestors are made
 * first (mode 0700), as the Memory Core's writer's `mkdir -p` made them.
 */
function checkRoot(field, resolved, makeParent) {
  const dirs = field === 'runtimeRoot' ? [resolved] : [path.dirname(resolved), resolved];
  if (field === 'hookProjectionRoot' && makeParent) {
    try {
      fs.mkdirSync(dirs[0], { recursive: true, mode: 0o700 });
    } catch (e) {
      throw badConfig(`\`${field}\` ${resolved}: its directory ${dirs[0]} cannot be made (${e.code || e.message})`);
    }
  }
  for (const [i, dir] of dirs.entries()) {
    let stat;
    try {
      stat = fs.statSync(dir);
    } catch (e) {
      if (i > 0 && e.code === 'ENOENT') return;
      throw badConfig(`\`${field}\` ${dir} cannot be read (${e.code || e.message})`);
    }
    if (!stat.isDirectory()) throw badConfig(`\`${field}\` ${dir} is not a directory`);
  }
}

/**
 * The configuration copied (each field read once; the channel registry cloned through JSON;
 * the root absolute) and the addon's store of it: `{ copy, store }`, or INVALID_CONFIG for
 * a field missing, unknown, of another type or of a value the addon refuses. The file system
 * is looked at last, once every value passed: `makeParent` (the Memory Core's writer) makes
 * the missing ancestors of a `hookProjectionRoot` then, never for a configuration refused.
 */
function storeConfigOf(config, { makeParent = false } = {}) {
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
  // The root resolved once, here: a relative root names the directory it named when the store
  // was made (a later process.chdir moves nothing).
  const field = rootField(copy);
  copy[field] = path.resolve(copy[field]);
  const { runtimeRoot, hookProjectionRoot, leaseTtlMs, busyTimeoutMs, profile } = copy;
  const channelsJson = JSON.stringify(copy.channels);
  // The addon's check of every value (INVALID_CONFIG naming the field).
  const store = native(() => new addon.NativeStore({ channelsJson, leaseTtlMs, busyTimeoutMs, runtimeRoot, hookProjectionRoot, profile }));
  checkRoot(field, copy[field], makeParent);
  return { copy, store };
}

module.exports = { CONFIG_FIELDS, storeConfigOf, badConfig };
