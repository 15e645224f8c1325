#!/usr/bin/env bash
# Removes what an earlier test run left behind when it was killed before its own cleanup
# (SIGKILL, a machine restart): its daemons' instance claims, mounts, loop devices,
# cgroups, nft tables and temp dirs. Run by `make test` before ctest starts.
#
# Only a test's leftovers are touched: a claim (/run/cella/instances/NAME,
# docs/decisions/0033-instance-claims.md) whose daemon does not hold it locked any more and
# whose data directory is below a test temp dir (/tmp/cella-*/, as tests/integration/lib.sh
# and the unit tests make them) of a test that is gone: neither the pid lib.sh writes to
# the dir's `owner` file nor the holder of the claim's network-range lock
# (/tmp/cella-it-net/N) is alive. A stale claim otherwise keeps its range: a later daemon given that range
# (the tests give one each) would refuse to start.
set -u
claims=/run/cella/instances
locks=/tmp/cella-it-net

# owner_alive RANGE: is the lock file of this /18 held by a live process?
owner_alive() {
        local range=$1 a b c i owner
        IFS=./ read -r a b c _ _ <<<"$range"
        [ "$a" = 10 ] && [ "$b" -ge 128 ] 2>/dev/null || return 1
        i=$(((b - 128) * 4 + c / 64))
        owner=$(cat "$locks/$i" 2>/dev/null) || return 1
        [ -n "$owner" ] && kill -0 "$owner" 2>/dev/null
}

reap() {
        local name=$1 dir=$2 m l cg
        echo "reap-leftovers: $name (data dir $dir/data) of an interrupted test run" >&2
        for cg in /sys/fs/cgroup/*/"$name" /sys/fs/cgroup/unified/"$name"; do
                [ -d "$cg" ] || continue
                find "$cg" -name cgroup.procs -exec cat {} + 2>/dev/null |
                        xargs -r kill -KILL 2>/dev/null
        done
        grep -F " $dir/" /proc/self/mountinfo | awk '{print $5}' | sort -r |
                while read -r m; do umount -l "$m" 2>/dev/null; done
        losetup -nO NAME,BACK-FILE 2>/dev/null | while read -r l m; do
                case "$m" in "$dir"/*) losetup -d "$l" 2>/dev/null ;; esac
        done
        for cg in /sys/fs/cgroup/*/"$name" /sys/fs/cgroup/unified/"$name"; do
                [ -d "$cg" ] && find "$cg" -depth -type d -exec rmdir {} \; 2>/dev/null
        done
        command -v nft >/dev/null && nft delete table inet "$name" 2>/dev/null
        rm -rf --one-file-system "$dir"
        rm -f "$claims/$name"
}

[ -d "$claims" ] || exit 0
for f in "$claims"/*; do
        [ -f "$f" ] || continue
        name=${f##*/}
        # The daemon holds its claim locked while it runs.
        flock -n -s "$f" true 2>/dev/null || continue
        data=$(sed -n 's/^data-dir //p' "$f")
        range=$(sed -n 's/^network-range //p' "$f")
        case "$data" in /tmp/cella-*/*) ;; *) continue ;; esac
        dir=${data#/tmp/}
        dir=/tmp/${dir%%/*}
        owner=$(cat "$dir/owner" 2>/dev/null) || owner=
        [ -n "$owner" ] && kill -0 "$owner" 2>/dev/null && continue
        owner_alive "$range" && continue
        reap "$name" "$dir"
done
exit 0
