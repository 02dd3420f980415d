#!/usr/bin/env bash
# Runs a command with its disk writes throttled (not part of CI): the tests on a disk as slow
# as a throttled cloud volume. Needs root and a cgroup-v1 blkio hierarchy or cgroup v2 with
# the io controller. The limit applies to the block device holding the temp directory, where
# the tests put their stores, and to the writes the command's processes issue themselves —
# with cgroup v1 that includes every fsync's writeback, not background writeback.
#
# Build first (the limit slows a compile too). Run as root; under sudo the command itself
# runs as the calling user again, so `target/` stays theirs (keep their PATH for cargo:
# `sudo env PATH="$PATH" scripts/slow-disk.sh ...`).
#
# usage: scripts/slow-disk.sh BYTES_PER_SECOND COMMAND [ARGS...]
#   e.g. scripts/slow-disk.sh 1048576 cargo test --features model-check --test reader_atomicity
set -euo pipefail

bps=${1:?usage: scripts/slow-disk.sh BYTES_PER_SECOND COMMAND [ARGS...]}
shift
[ $# -gt 0 ] || { echo "slow-disk: no command given" >&2; exit 2; }
tmp=${TMPDIR:-/tmp}
# Throttling rules apply to whole disks (and device-mapper volumes), not partitions.
source=$(df --output=source "$tmp" | tail -1)
dev_path=$(readlink -f "$source")
if [ "$(lsblk -ndo TYPE "$dev_path")" = part ]; then
    dev_path=/dev/$(lsblk -ndo PKNAME "$dev_path")
fi
dev=$(lsblk -ndo MAJ:MIN "$dev_path" | tr -d ' ')
group=solewriter-slow-disk-$$
if [ -d /sys/fs/cgroup/blkio ]; then
    dir=/sys/fs/cgroup/blkio/$group
    rule=("$dev $bps" blkio.throttle.write_bps_device)
elif [ -f /sys/fs/cgroup/cgroup.controllers ]; then
    grep -qw io /sys/fs/cgroup/cgroup.subtree_control || {
        echo "slow-disk: the io controller is not enabled for child groups" \
            "(echo +io > /sys/fs/cgroup/cgroup.subtree_control)" >&2
        exit 2
    }
    dir=/sys/fs/cgroup/$group
    rule=("$dev wbps=$bps" io.max)
else
    echo "slow-disk: no blkio or io cgroup controller here" >&2
    exit 2
fi
mkdir "$dir"
trap 'rmdir "$dir" 2>/dev/null || echo "slow-disk: $dir still has processes; remove it later" >&2' EXIT
echo "${rule[0]}" >"$dir/${rule[1]}"
echo "slow-disk: writes to $dev_path ($dev) limited to $bps bytes/s" >&2
as_caller=()
if [ -n "${SUDO_UID:-}" ]; then
    as_caller=(setpriv --reuid="$SUDO_UID" --regid="$SUDO_GID" --init-groups --)
fi
status=0
bash -c 'echo $$ >"$1/cgroup.procs"; shift; exec "$@"' _ "$dir" "${as_caller[@]}" "$@" || status=$?
exit $status
