#!/usr/bin/env node
'use strict';
/**
 * Packs the Node package as it is installed: the platform package `solewriter-linux-x64-gnu`
 * (the addon, a release build, stripped) and the main package `solewriter` (the JS layer and
 * the types, no addon), whose packed manifest lists the platform package as an optional
 * dependency of its exact version — as napi-rs's `pre-publish` does; the manifest in the
 * repository lists none, so a development install never looks for an unpublished package.
 *
 * usage: node scripts/pack.js OUT_DIR     (from anywhere; needs cargo, strip and npm)
 * Writes OUT_DIR/solewriter-linux-x64-gnu-<version>.tgz and OUT_DIR/solewriter-<version>.tgz
 * and prints what each holds.
 */

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFileSync } = require('node:child_process');

const HERE = path.join(__dirname, '..');
const ROOT = path.join(HERE, '..', '..');
const PLATFORM = 'linux-x64-gnu';
const PLATFORM_DIR = path.join(HERE, 'npm', PLATFORM);
const ADDON = `solewriter.${PLATFORM}.node`;

function fail(message) {
  console.error(`pack: ${message}`);
  process.exit(1);
}

function run(command, args, options = {}) {
  return execFileSync(command, args, { stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8', ...options });
}

/** `npm pack` of `dir` into `out`: the tarball's path and its entry of `npm pack --json`. */
function npmPack(dir, out) {
  const [packed] = JSON.parse(run('npm', ['pack', '--json', '--pack-destination', out], { cwd: dir }));
  return { file: path.join(out, packed.filename), packed };
}

const out = process.argv[2];
if (!out) fail('usage: node scripts/pack.js OUT_DIR');
fs.mkdirSync(out, { recursive: true });
const outDir = path.resolve(out);

// The addon is built for the machine that packs: only linux-x64-gnu has a platform package.
const glibc = process.platform === 'linux' && process.report.getReport().header.glibcVersionRuntime;
if (`${process.platform}-${process.arch}-${glibc ? 'gnu' : 'other'}` !== PLATFORM) {
  fail(`the addon is built for this machine, and ${PLATFORM} is the only platform package (this is ${process.platform}-${process.arch})`);
}

const main = JSON.parse(fs.readFileSync(path.join(HERE, 'package.json'), 'utf8'));
const platform = JSON.parse(fs.readFileSync(path.join(PLATFORM_DIR, 'package.json'), 'utf8'));
if (platform.version !== main.version) {
  fail(`npm/${PLATFORM}/package.json has version ${platform.version}, package.json ${main.version}: they must be equal`);
}
if (platform.main !== ADDON || !platform.files.includes(ADDON)) {
  fail(`npm/${PLATFORM}/package.json must name ${ADDON} as its main file and in its files`);
}

// The release build of the addon, copied into the platform package and stripped.
execFileSync('cargo', ['build', '-p', 'solewriter-node', '--release'], { cwd: ROOT, stdio: 'inherit' });
const built = path.join(process.env.CARGO_TARGET_DIR || path.join(ROOT, 'target'), 'release', 'libsolewriter_node.so');
const addon = path.join(PLATFORM_DIR, ADDON);
fs.copyFileSync(built, addon);
run('strip', ['--strip-unneeded', addon]);
// It loads here: a copy that cannot load fails the pack, not a user's install.
const loaded = { exports: {} };
process.dlopen(loaded, addon);
if (typeof loaded.exports.targetId !== 'function') fail(`${addon} does not export the addon's functions`);

const platformTarball = npmPack(PLATFORM_DIR, outDir);

// The main package: the files its `files` selects, its manifest with the optional dependency.
const stage = fs.mkdtempSync(path.join(os.tmpdir(), 'solewriter-pack-'));
try {
  const [listed] = JSON.parse(run('npm', ['pack', '--dry-run', '--json'], { cwd: HERE }));
  for (const { path: file } of listed.files) {
    if (file.endsWith('.node')) fail(`the main package would ship ${file}: the addon belongs to the platform package`);
    fs.mkdirSync(path.dirname(path.join(stage, file)), { recursive: true });
    fs.copyFileSync(path.join(HERE, file), path.join(stage, file));
  }
  const manifest = { ...main, optionalDependencies: { [platform.name]: platform.version } };
  fs.writeFileSync(path.join(stage, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  const mainTarball = npmPack(stage, outDir);
  for (const { file, packed } of [platformTarball, mainTarball]) {
    console.log(`${path.basename(file)}: ${packed.size} bytes packed, ${packed.unpackedSize} unpacked`);
    for (const entry of packed.files) console.log(`  ${entry.path} (${entry.size} bytes)`);
  }
} finally {
  fs.rmSync(stage, { recursive: true, force: true });
}
