#!/usr/bin/env bash
# Runs a command with its disk writes throttled (not part of CI): the tests on a disk as slow
# as a throttled cloud volume. Needs root and a cgroup-v1 blkio hierarchy or cgroup v2 with
# the io controller. The limit applies to the block device holding the temp directory, where
# the tests put their stores.
#
# usage: scripts/slow-disk.sh BYTES_PER_SECOND COMMAND [ARGS...]
#   e.g. scripts/slow-disk.sh 1048576 cargo test --features model-check --test reader_atomicity
set -euo pipefail

bps=${1:?usage: scripts/slow-disk.sh BYTES_PER_SECOND COMMAND [ARGS...]}
shift
[ $# -gt 0 ] || { echo "slow-disk: no command given" >&2; exit 2; }
tmp=${TMPDIR:-/tmp}
# The whole disk (not a partition): throttling is per device as the block layer sees it.
source=$(df --output=source "$tmp" | tail -1)
disk=$(lsblk -ndo PKNAME "$source" 2>/dev/null || true)
[ -n "$disk" ] || disk=$(basename "$source")
dev=$(lsblk -ndo MAJ:MIN "/dev/$disk" | tr -d ' ')
group=solewriter-slow-disk-$$
if [ -d /sys/fs/cgroup/blkio ]; then
    dir=/sys/fs/cgroup/blkio/$group
    mkdir "$dir"
    echo "$dev $bps" >"$dir/blkio.throttle.write_bps_device"
elif [ -f /sys/fs/cgroup/cgroup.controllers ]; then
    dir=/sys/fs/cgroup/$group
    echo +io >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || true
    mkdir "$dir"
    echo "$dev wbps=$bps" >"$dir/io.max"
else
    echo "slow-disk: no blkio or io cgroup controller here" >&2
    exit 2
fi
echo "slow-disk: writes to $disk ($dev) limited to $bps bytes/s" >&2
status=0
bash -c 'echo $$ >"$1/cgroup.procs"; shift; exec "$@"' _ "$dir" "$@" || status=$?
# The command ran in a child, now gone: remove its (empty) group.
rmdir "$dir" 2>/dev/null || true
exit $status
