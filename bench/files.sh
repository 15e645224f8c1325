#!/bin/bash
# Files benchmark: a SIZE-byte file of random bytes moved into and out of a sandbox, beside
# `cp` on the same disk in the same run.
# The sandbox's files live on its own ext4 on a loop device (decision 0014), so the
# baseline is `cp` between the host directory and a directory on such an ext4: the data
# dir's own disk template of TYPE's size (the very mkfs of a sandbox's disk), copied and
# loop-mounted by this script. Every source and destination is on the filesystem of
# cellad's data dir (its $tmp), or on that loop-mounted ext4.
#   cp in:   host file -> the loop ext4 (`cp`, then the target is removed)
#   cp out:  a file on the loop ext4 -> a host file
#   curl -T: PUT /files of the host file (streamed)
#   curl -o: GET /files into a host file
#   cella write NAME PATH < file / cella read NAME PATH > file (libcella's fd calls)
# Nothing is synced and the page cache is not dropped, on either side: an upload's 200
# says the file is in place in the sandbox (renamed over the target), not that it is on
# the platter (docs/api.md), which is what `cp` says when it returns; dropping the cache
# is a host-wide act this machine shares. The source of every copy was just written or
# read, so it is in the page cache for all of them alike.
# MB/s (10^6 bytes per second), the p50 of RUNS runs, each form taking its turn in every
# run. Each copy's target is removed before the next, so no form pays for another's
# dirty pages more than its turn does. Rewrites the section of docs/performance.md between
# the BEGIN/END FILES FIGURES markers.
# The sandbox is of instance type TYPE (standard-3: 2 CPUs), so that its CPU quota does not
# bound cella-init's part of the path.
# Usage: bench/files.sh  (env: BUILD, IMAGES, SIZE (1 GiB), RUNS (5), TYPE (standard-3)).
# Needs root.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$src/build}
IMAGES=${IMAGES:-/var/lib/cella/images}
SIZE=${SIZE:-1073741824}
RUNS=${RUNS:-5}
TYPE=${TYPE:-standard-3}
cmake -S "$src" -B "$BUILD" >/dev/null
cmake --build "$BUILD" --target cellad cella-init cella >/dev/null

. "$src/bench/lib.sh"
mnt=
files_cleanup() {
        if [ -n "$mnt" ] && mountpoint -q "$mnt"; then umount "$mnt"; fi
        bench_cleanup
}
trap files_cleanup EXIT
bench_cellad "$IMAGES" filesbench
sb=$url/v1/sandboxes/filesbench
curl -sS -f -X PUT "$sb" -H 'Content-Type: application/json' \
        -d "{\"keepAlive\":true,\"instanceType\":\"$TYPE\"}" >/dev/null

# the baseline's ext4: the data dir's template of this sandbox's disk size, loop-mounted
tpl=$(ls "$tmp"/data/disk-templates/ext4-*.img 2>/dev/null | head -n 1)
[ -n "$tpl" ] || { echo "no disk template in $tmp/data/disk-templates" >&2; exit 1; }
cp --sparse=always "$tpl" "$tmp/base.img"
mnt=$tmp/base
mkdir -p "$mnt"
mount -o loop "$tmp/base.img" "$mnt"

head -c "$SIZE" /dev/urandom >"$tmp/src.bin"
sum=$(md5sum <"$tmp/src.bin" | cut -d' ' -f1)
cp "$tmp/src.bin" "$mnt/in.bin" # cp out's source, kept

# mbps BYTES SECONDS
mbps() { awk -v b="$1" -v s="$2" 'BEGIN {printf "%.0f", b / 1e6 / s}'; }
# timed CMD...: MB/s of CMD moving SIZE bytes
timed() {
        local t0 t1
        t0=$(date +%s.%N)
        "$@"
        t1=$(date +%s.%N)
        mbps "$SIZE" "$(echo "$t1 - $t0" | bc)"
}
# check FILE: FILE holds the source's bytes (outside the timing), then is removed
check() {
        [ "$(md5sum <"$1" | cut -d' ' -f1)" = "$sum" ] || { echo "$1 differs" >&2; exit 1; }
        rm -f "$1"
}
put() { curl -sS -f -T "$tmp/src.bin" "$sb/files?path=/workspace/up.bin" >/dev/null; }
get() { curl -sS -f -o "$tmp/down.bin" "$sb/files?path=/workspace/up.bin"; }
cli_write() { "$BUILD/cella" --url "$url" write filesbench /workspace/up.bin <"$tmp/src.bin" >/dev/null; }
cli_read() { "$BUILD/cella" --url "$url" read filesbench /workspace/up.bin >"$tmp/down.bin"; }
insum() {
        curl -sS -f "$sb/exec" -H 'Content-Type: application/json' \
                -d '{"command":"md5sum < /workspace/up.bin"}' | jq -r .stdout | cut -d' ' -f1
}

declare -A fig_runs
add() { fig_runs[$1]+="$2 "; echo "run $r: $1 $2" >&2; }
p50() { printf '%s\n' ${fig_runs[$1]} | median; }
for r in $(seq 1 "$RUNS"); do
        add cp_in "$(timed cp "$tmp/src.bin" "$mnt/up.bin")"
        rm -f "$mnt/up.bin"
        add cp_out "$(timed cp "$mnt/in.bin" "$tmp/down.bin")"
        check "$tmp/down.bin"
        add curl_put "$(timed put)"
        [ "$(insum)" = "$sum" ] || { echo "upload differs" >&2; exit 1; }
        add curl_get "$(timed get)"
        check "$tmp/down.bin"
        add cli_write "$(timed cli_write)"
        add cli_read "$(timed cli_read)"
        check "$tmp/down.bin"
done
umount "$mnt"
mnt=
CI=$(p50 cp_in) CO=$(p50 cp_out)
pct() { awk -v a="$1" -v h="$2" 'BEGIN {printf "%.0f %%", 100 * a / h}'; }
{
        echo "Measured $(date -u '+%Y-%m-%d %H:%M UTC') on $(nproc) CPUs, kernel $(uname -r):" \
                "$SIZE bytes of random data, p50 of $RUNS runs, the forms taking turns; the" \
                "sandbox of instance type $TYPE; nothing synced, the page cache not dropped;" \
                "load average $(cut -d' ' -f1 /proc/loadavg) at the end."
        echo
        echo "| direction | path | MB/s | of \`cp\` |"
        echo "|---|---|---|---|"
        echo "| in | \`cp\` host file -> loop-mounted ext4 of the sandbox disk's mkfs (baseline) | $CI | 100 % |"
        echo "| in | \`curl -T\` (\`PUT /files\`) | $(p50 curl_put) | $(pct "$(p50 curl_put)" "$CI") |"
        echo "| in | \`cella write\` (libcella \`cella_file_write_fd\`) | $(p50 cli_write) | $(pct "$(p50 cli_write)" "$CI") |"
        echo "| out | \`cp\` loop-mounted ext4 -> host file (baseline) | $CO | 100 % |"
        echo "| out | \`curl -o\` (\`GET /files\`) | $(p50 curl_get) | $(pct "$(p50 curl_get)" "$CO") |"
        echo "| out | \`cella read\` (libcella \`cella_file_read_fd\`) | $(p50 cli_read) | $(pct "$(p50 cli_read)" "$CO") |"
} | tee /dev/stderr | bench_figures "FILES FIGURES"
