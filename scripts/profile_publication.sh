#!/usr/bin/env bash
# Where a publication's CPU goes: runs the publication benchmark for one size and one kind
# under `perf record` (the atomic write runs beside it, as in every run of that benchmark) and
# prints the functions by their own share of the samples, user and kernel, and the share of
# each layer (SQLite, the kernel, solewriter and serde_json, the allocator). Not in CI.
#
#   scripts/profile_publication.sh ['1 KiB'|'256 KiB'] [one-shot|two-step] [OUT_DIR]
#
# Needs `perf` (linux-tools) and permission to profile this process
# (/proc/sys/kernel/perf_event_paranoid at most 1, or root). OUT_DIR (default
# target/profile) receives perf.data and the report, profile.txt.
set -euo pipefail
size=${1:-1 KiB}
kind=${2:-one-shot}
out=${3:-target/profile}
mkdir -p "$out"
cargo bench --bench publication --no-run 2>/dev/null
bench=$(cargo bench --bench publication --no-run --message-format=json 2>/dev/null \
  | python3 -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "publication" and m.get("executable"):
        print(m["executable"])')
perf record -F 4999 -o "$out/perf.data" -- "$bench" --bench "$size" "$kind" >"$out/run.txt" 2>/dev/null
perf report -i "$out/perf.data" --no-children --sort symbol --stdio -g none 2>/dev/null \
  | python3 -c '
import re, sys
rows = []
for line in sys.stdin:
    m = re.match(r"\s*([\d.]+)%\s+\[(.)\]\s+(.*?)\s*(-\s+-\s*)?$", line)
    if m:
        rows.append((float(m.group(1)), m.group(2), m.group(3)))
def layer(space, name):
    if space == "k":
        return "kernel"
    if name.startswith(("sqlite3", "pager", "wal", "btree", "vdbe", "yy", "unix")):
        return "sqlite"
    if "serde_json" in name:
        return "serde_json"
    if "solewriter" in name or "sha2" in name:
        return "solewriter"
    if re.search(r"malloc|free|realloc|_int_|memmove|memcpy|memset|memcmp", name):
        return "allocator and mem*"
    return "other"
layers = {}
for pct, space, name in rows:
    layers[layer(space, name)] = layers.get(layer(space, name), 0) + pct
print("share of all samples by layer:")
for name, pct in sorted(layers.items(), key=lambda kv: -kv[1]):
    print(f"  {pct:6.2f}%  {name}")
print("top functions (own samples):")
for pct, space, name in rows[:40]:
    print(f"  {pct:6.2f}%  [{space}] {name[:110]}")
' | tee "$out/profile.txt"
cat "$out/run.txt"
