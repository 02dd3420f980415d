#!/usr/bin/env bash
# The Node package installed as a user installs it (CI, after the Node binding's own tests).
#
# 1. Packs the platform package and the main package into tarballs (bindings/node/scripts/pack.js:
#    the release build of the addon, stripped, in solewriter-linux-x64-gnu; the JS layer and the
#    types in solewriter, whose packed manifest lists the platform package as an optional
#    dependency) and checks what each tarball holds.
# 2. From here on PATH holds no cargo and no rustc (checked): in a scratch project, installs
#    better-sqlite3 (from the registry; it compiles with python3 and a C++ compiler unless a
#    prebuilt binary is downloaded), typescript and @types/better-sqlite3 at the versions of
#    bindings/node/package-lock.json, and both tarballs from their files.
# 3. Runs a real publication (a better-sqlite3 database in WAL mode, initialize, admit, submit,
#    acquire, publish) from CommonJS, from an ES module and from TypeScript (compiled with
#    tsc --strict, then run), and reads each current.json back without solewriter
#    (bindings/node/test/package/); the CommonJS run also checks that the addon loaded is the
#    platform package's and that errors carry documented codes.
# 4. Installs the main package alone (no platform package): require throws ADDON_MISSING naming
#    the platform package it looked for.
#
# usage: scripts/node_package_test.sh     Prints `node-package: ...` lines; exits non-zero on
# the first failure. Everything it makes is under one temporary directory, removed at exit.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
node_dir=$root/bindings/node
examples=$node_dir/test/package
work=$(mktemp -d "${TMPDIR:-/tmp}/solewriter-node-package.XXXXXX")
trap 'rm -rf "$work"' EXIT
say() { echo "node-package: $*"; }
fail() { echo "node-package: FAIL: $*" >&2; exit 1; }

# --- 1. the tarballs
node "$node_dir/scripts/pack.js" "$work/tarballs"
version=$(node -p "require('$node_dir/package.json').version")
platform_tgz=$work/tarballs/solewriter-linux-x64-gnu-$version.tgz
main_tgz=$work/tarballs/solewriter-$version.tgz
listing() { tar -tzf "$1" | sort | tr '\n' ' '; }
[[ "$(listing "$platform_tgz")" == "package/README.md package/package.json package/solewriter.linux-x64-gnu.node " ]] ||
  fail "the platform package holds: $(listing "$platform_tgz")"
[[ "$(listing "$main_tgz")" != *.node* ]] || fail "the main package holds an addon: $(listing "$main_tgz")"
for file in memory-core.mjs memory-core.d.ts lib/memory-core-writer.js testing.mjs testing.d.ts lib/testing.js; do
  [[ "$(listing "$main_tgz")" == *"package/$file "* ]] || fail "the main package lacks $file (solewriter/memory-core, solewriter/testing)"
done
tar -xzOf "$main_tgz" package/package.json |
  node -e "const m = JSON.parse(require('fs').readFileSync(0, 'utf8'));
    const want = { 'solewriter-linux-x64-gnu': '$version' };
    if (JSON.stringify(m.optionalDependencies) !== JSON.stringify(want)) {
      console.error('optionalDependencies:', m.optionalDependencies); process.exit(1);
    }" || fail "the main package's manifest does not select the platform package"
say "packed $(stat -c %s "$platform_tgz") + $(stat -c %s "$main_tgz") bytes"

# --- 2. no Rust toolchain from here on: PATH without the directories holding cargo or rustc
# (a tool of the list below that lived only there is linked into a directory of its own).
versions=$(node -p "const l = require('$node_dir/package-lock.json').packages;
  ['better-sqlite3', 'typescript', '@types/better-sqlite3'].map((n) => n + '@' + l['node_modules/' + n].version).join(' ')")
tools=$work/tools
mkdir "$tools"
kept=()
IFS=: read -ra dirs <<<"$PATH"
for d in "${dirs[@]}"; do
  [[ -n "$d" && ! -e "$d/cargo" && ! -e "$d/rustc" && ! -e "$d/rustup" ]] && kept+=("$d")
done
no_rust=$(IFS=:; echo "$tools:${kept[*]}")
for tool in node npm npx python3 make cc c++ gcc g++ ar sh; do
  if ! PATH=$no_rust command -v "$tool" >/dev/null && command -v "$tool" >/dev/null; then
    ln -s "$(command -v "$tool")" "$tools/$tool"
  fi
done
export PATH=$no_rust
hash -r
unset CARGO CARGO_HOME RUSTUP_HOME RUSTC CARGO_TARGET_DIR SOLEWRITER_NODE_ADDON
if command -v cargo || command -v rustc; then fail "cargo or rustc is still on PATH"; fi
say "no cargo, no rustc on PATH; node $(node --version), npm $(npm --version)"

host=$work/host
mkdir "$host"
cd "$host"
# allowScripts: better-sqlite3's install script (its build) may run; npm 12 blocks unlisted ones.
printf '{ "name": "host", "version": "1.0.0", "private": true, "allowScripts": { "better-sqlite3": true } }\n' >package.json
# JOBS: node-gyp compiles better-sqlite3's two sources side by side.
# shellcheck disable=SC2086 # $versions is a list of words
JOBS=max npm install --no-audit --no-fund --loglevel=error "$platform_tgz" "$main_tgz" $versions
[[ -f node_modules/solewriter-linux-x64-gnu/solewriter.linux-x64-gnu.node ]] || fail "the platform package did not install its addon"
[[ ! -e node_modules/solewriter/solewriter.node ]] || fail "the main package brought an addon of its own"
# solewriter's optional dependency is the platform package installed beside it (npm ls fails on
# an edge that is missing or invalid).
npm ls --all --json | node -e "const t = JSON.parse(require('fs').readFileSync(0, 'utf8'));
    const got = t.dependencies.solewriter.dependencies;
    process.exit(got && got['solewriter-linux-x64-gnu'] && got['solewriter-linux-x64-gnu'].version === '$version' ? 0 : 1);" ||
  fail "solewriter's optional dependency is not the platform package installed"
say "installed $versions and both tarballs"

# --- 3. a publication from CommonJS, from ESM and from TypeScript
cp "$examples"/publish.cjs "$examples"/publish.mjs "$examples"/publish.ts "$examples"/memory_core.ts "$examples"/seeds.ts "$examples"/tsconfig.json "$examples"/check.cjs .
mkdir cjs esm ts
node publish.cjs "$host/cjs" >cjs.json || fail "the CommonJS publication failed"
node check.cjs commonjs "$host/node_modules/solewriter-linux-x64-gnu/solewriter.linux-x64-gnu.node" <cjs.json
node publish.mjs "$host/esm" >esm.json || fail "the ESM publication failed"
node check.cjs esm <esm.json
npx tsc -p . || fail "tsc --strict refused the typed example"
node publish.js "$host/ts" >ts.json || fail "the TypeScript publication failed"
node check.cjs typescript <ts.json

# --- 4. the main package without its platform package
alone=$work/alone
mkdir "$alone"
cd "$alone"
printf '{ "name": "alone", "version": "1.0.0", "private": true }\n' >package.json
npm install --no-audit --no-fund --loglevel=error --omit=optional "$main_tgz"
[[ ! -e node_modules/solewriter-linux-x64-gnu ]] || fail "--omit=optional installed the platform package"
node -e "try { require('solewriter'); process.exit(1); } catch (e) {
    console.log(e.code + ': ' + e.message);
    process.exit(e.code === 'ADDON_MISSING' && e.message.includes('solewriter-linux-x64-gnu is not installed') ? 0 : 1);
  }" || fail "without the platform package, require('solewriter') did not throw ADDON_MISSING naming it"
say "ok"
