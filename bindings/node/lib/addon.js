'use strict';
/**
 * The native addon, loaded once (`loadAddon`): the prebuilt one of the platform package, or a
 * development build beside the package. Also `coded`, the package's error constructor, which
 * the loader needs before there is an addon to list the codes.
 */

const fs = require('node:fs');
const path = require('node:path');

/**
 * The package's own errors: every error `coded` makes, and every error the addon makes (it is
 * handed a function that adds to this set once, at load: `markOwnErrors`, `src/failure.rs`).
 * Nothing outside this module can add to it, and nothing on an error can stand for it: `native`
 * passes an error on as the package's only when it is here, so a host's error with a code of
 * ours — and with whatever it copied from one of ours — is still the host's.
 */
const own = new WeakSet();

/** An `Error` of the package's, with a `code` and more fields. */
function coded(code, message, fields) {
  const error = Object.assign(new Error(message), { code }, fields);
  own.add(error);
  return error;
}

/** Whether `error` is one of the package's own errors (made by `coded` or by the addon). */
function isOwn(error) {
  return own.has(error);
}

/**
 * The platform this process runs on, as the platform packages are named: `linux-x64-gnu`,
 * `linux-x64-musl`, `darwin-arm64`, ... (on Linux the C library node itself runs with).
 */
function platformName() {
  const { platform, arch } = process;
  if (platform !== 'linux') return `${platform}-${arch}`;
  const { glibcVersionRuntime } = process.report.getReport().header;
  return `${platform}-${arch}-${glibcVersionRuntime ? 'gnu' : 'musl'}`;
}

/** Loads the addon at `file`, or throws ADDON_MISSING saying what `file` is and why it failed. */
function dlopen(file, what) {
  const module = { exports: {} };
  try {
    process.dlopen(module, file);
  } catch (e) {
    throw coded('ADDON_MISSING', `cannot load the solewriter addon at ${file} (${what}): ${e.message}`);
  }
  return module.exports;
}

/**
 * Loads the addon, the first of:
 * - the file `SOLEWRITER_NODE_ADDON` names (tests);
 * - the prebuilt addon of the platform package `solewriter-<platform>` (e.g.
 *   `solewriter-linux-x64-gnu`), an optional dependency of this package that npm installs on
 *   the platform it is built for; once installed it is used or the load fails (never a stale
 *   development build instead);
 * - `solewriter.node` beside this file, a development build (`npm run build`).
 * Nothing found: ADDON_MISSING naming the platform package looked for.
 */
function loadAddon() {
  const override = process.env.SOLEWRITER_NODE_ADDON;
  if (override) return dlopen(override, 'build it: npm run build');
  const platform = platformName();
  const pkg = `solewriter-${platform}`;
  let manifest;
  try {
    manifest = require.resolve(`${pkg}/package.json`);
  } catch (e) {
    if (e.code !== 'MODULE_NOT_FOUND') throw coded('ADDON_MISSING', `cannot look for the package ${pkg}: ${e.message}`);
  }
  if (manifest) {
    return dlopen(path.join(path.dirname(manifest), `solewriter.${platform}.node`), `the prebuilt addon of ${pkg}`);
  }
  const local = path.join(__dirname, '..', 'solewriter.node');
  if (fs.existsSync(local)) return dlopen(local, 'build it: npm run build');
  throw coded(
    'ADDON_MISSING',
    `no solewriter addon for ${platform}: the package ${pkg} is not installed (npm installs it with ` +
      `solewriter, as an optional dependency, on the platforms with a prebuilt addon: linux-x64-gnu), and there is no ` +
      `development build ${local} (in a checkout of the repository: npm run build in bindings/node)`,
  );
}

const addon = loadAddon();
addon.markOwnErrors((error) => {
  own.add(error);
});

module.exports = { addon, coded, isOwn };
