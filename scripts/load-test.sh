#!/usr/bin/env bash
# Load test (not part of CI): runs the whole `cargo test --features model-check` beside an
# fsync-heavy writer and CPU hogs, twice — once with the default test threads, once with
# `-- --test-threads=1` — and reports each run's result and wall time. PHASES chooses:
# `both` (the default), `default` (the default test threads only) or `single`
# (`--test-threads=1` only).
#
# The load, started after the build so that it weighs on the tests and not on the compiler:
#   WRITERS processes (default 2), each a loop of
#       dd if=/dev/zero of=<scratch> bs=1M count=64 conv=fsync
#   HOGS busy loops (default: the number of CPUs).
# The scratch files go to LOAD_DIR (default: TMPDIR, else /tmp — where the tests' own temp
# directories are), so the writers compete with the tests' fsyncs on the same file system.
#
# Every background process runs in its own process group and is killed, with its group, on
# every exit of this script (success, failure, Ctrl-C, TERM); the scratch directory is removed.
#
# usage: scripts/load-test.sh [WRITERS] [HOGS] [PHASES]
# Exits 0 if every run passed, 1 otherwise (2 for a bad PHASES); prints one `load-test:` line
# per run.
set -euo pipefail

writers=${1:-2}
hogs=${2:-$(nproc)}
phases=${3:-both}
case $phases in
both | default | single) ;;
*)
    echo "load-test: PHASES must be both, default or single (got '$phases')" >&2
    exit 2
    ;;
esac
cd "$(dirname "$0")/.."
scratch=$(mktemp -d "${LOAD_DIR:-${TMPDIR:-/tmp}}/solewriter-load.XXXXXX")
loaders=()
cargo_pid=

stop_load() {
    local pid
    for pid in "${loaders[@]}"; do
        # The group first (the loop and its current dd), then the leader itself.
        kill -- "-$pid" 2>/dev/null || kill "$pid" 2>/dev/null || true
    done
    for pid in "${loaders[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
    loaders=()
}

cleanup() {
    if [[ -n $cargo_pid ]]; then
        kill "$cargo_pid" 2>/dev/null || true
        wait "$cargo_pid" 2>/dev/null || true
    fi
    stop_load
    rm -rf "$scratch"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

start_load() {
    local i
    for ((i = 0; i < writers; i++)); do
        setsid bash -c 'while :; do dd if=/dev/zero of="$1" bs=1M count=64 conv=fsync status=none; done' \
            _ "$scratch/writer-$i" &
        loaders+=("$!")
    done
    for ((i = 0; i < hogs; i++)); do
        setsid bash -c 'while :; do :; done' &
        loaders+=("$!")
    done
}

# Cargo runs in the background and is waited for, so a signal to this script is handled at
# once (bash defers traps while a foreground command runs).
cargo_status=0
run_cargo() {
    cargo_status=0
    cargo test --features model-check "$@" &
    cargo_pid=$!
    wait "$cargo_pid" || cargo_status=$?
    cargo_pid=
}

echo "load-test: building (no load yet)"
run_cargo --no-run --quiet
if ((cargo_status != 0)); then
    echo "load-test: build failed (exit $cargo_status)"
    exit 1
fi

failed=0
run() {
    local label=$1
    shift
    local start end status
    start_load
    echo "load-test: $label under $writers fsync writer(s) and $hogs CPU hog(s)"
    start=$(date +%s)
    run_cargo "$@"
    status=$cargo_status
    end=$(date +%s)
    stop_load
    if ((status == 0)); then
        echo "load-test: $label: PASSED in $((end - start)) s"
    else
        echo "load-test: $label: FAILED (exit $status) after $((end - start)) s"
        failed=1
    fi
}

if [[ $phases != single ]]; then
    run "default test threads"
fi
if [[ $phases != default ]]; then
    run "--test-threads=1" -- --test-threads=1
fi
exit "$failed"
