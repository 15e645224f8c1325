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
#   the same four over cellad's unix socket (--listen unix:PATH, decision 0061): curl
#   --unix-socket, and the CLI with CELLA_URL=unix:PATH
# Nothing is synced and the page cache is not dropped, on either side: an upload's 200
# says the file is in place in the sandbox (renamed over the target), not that it is on
# the platter (docs/api.md), which is what `cp` says when it returns; dropping the cache
# is a host-wide act this machine shares. The source of every copy was just written or
# read, so it is in the page cache for all of them alike.
# MB/s (10^6 bytes per second), the p50 of RUNS runs, each form taking its turn in every
# run. Each copy's target is removed before the next (an upload's too: the rename over a
# 1 GiB file freed it inside the upload's time), and before each form the dirty pages
# of the one before are written out (`sync -f` of the sandbox's /workspace inside it, of
# the loop-mounted ext4 and of the data dir's filesystem, outside the timing), so that no
# form pays for another's writeback: an upload right after another one otherwise waited
# for the 1 GiB before it to reach the disk. Rewrites the section of docs/performance.md between
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
sock=$tmp/cellad.sock
bench_cellad_args=(--listen "unix:$sock")
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
uput() {
        curl -sS -f --unix-socket "$sock" -T "$tmp/src.bin" \
                "http://localhost/v1/sandboxes/filesbench/files?path=/workspace/up.bin" >/dev/null
}
uget() {
        curl -sS -f --unix-socket "$sock" -o "$tmp/down.bin" \
                "http://localhost/v1/sandboxes/filesbench/files?path=/workspace/up.bin"
}
ucli_write() { "$BUILD/cella" --url "unix:$sock" write filesbench /workspace/up.bin <"$tmp/src.bin" >/dev/null; }
ucli_read() { "$BUILD/cella" --url "unix:$sock" read filesbench /workspace/up.bin >"$tmp/down.bin"; }
insum() {
        curl -sS -f "$sb/exec" -H 'Content-Type: application/json' \
                -d '{"command":"md5sum < /workspace/up.bin"}' | jq -r .stdout | cut -d' ' -f1
}

# settle: the sandbox's copy of the form before removed (an upload's target is new, as
# cp's is), and the dirty pages written out, in the sandbox and on the host
settle() {
        curl -sS -f "$sb/exec" -H 'Content-Type: application/json' \
                -d '{"command":"rm -f /workspace/up.bin; sync -f /workspace"}' >/dev/null
        sync -f "$mnt/"
        sync -f "$tmp/"
}

declare -A fig_runs
add() { fig_runs[$1]+="$2 "; echo "run $r: $1 $2" >&2; }
p50() { printf '%s\n' ${fig_runs[$1]} | median; }
# upload FIG FORM: FORM timed as FIG after settle, the sandbox's copy checked
upload() {
        settle
        add "$1" "$(timed "$2")"
        [ "$(insum)" = "$sum" ] || { echo "upload by $2 differs" >&2; exit 1; }
}
# download FIG FORM: FORM timed as FIG after the dirty pages were written out and a host
# file of SIZE was written and removed (so that every download, `cp`'s too, starts on
# page frames just freed: on this VM the first write into frames not touched lately cost
# whatever came first after an upload about 1 s of system time a GiB, `cp` as much as the
# others), the host's copy checked and removed
download() {
        curl -sS -f "$sb/exec" -H 'Content-Type: application/json' \
                -d '{"command":"sync -f /workspace"}' >/dev/null
        sync -f "$mnt/"
        sync -f "$tmp/"
        cp "$tmp/src.bin" "$tmp/warm.bin"
        rm -f "$tmp/warm.bin"
        add "$1" "$(timed "$2")"
        check "$tmp/down.bin"
}
cp_in() { cp "$tmp/src.bin" "$mnt/up.bin"; }
cp_out() { cp "$mnt/in.bin" "$tmp/down.bin"; }
for r in $(seq 1 "$RUNS"); do
        settle
        add cp_in "$(timed cp_in)"
        rm -f "$mnt/up.bin"
        download cp_out cp_out
        upload curl_put put
        download curl_get get
        upload cli_write cli_write
        download cli_read cli_read
        upload ucurl_put uput
        download ucurl_get uget
        upload ucli_write ucli_write
        download ucli_read ucli_read
done
umount "$mnt"
mnt=
CI=$(p50 cp_in) CO=$(p50 cp_out)
pct() { awk -v a="$1" -v h="$2" 'BEGIN {printf "%.0f %%", 100 * a / h}'; }
{
        echo "Measured $(date -u '+%Y-%m-%d %H:%M UTC') on $(nproc) CPUs, kernel $(uname -r):" \
                "$SIZE bytes of random data, p50 of $RUNS runs, the forms taking turns; the" \
                "sandbox of instance type $TYPE; each form after the one before's dirty pages were" \
                "written out (outside its timing), the page cache not dropped;" \
                "load average $(cut -d' ' -f1 /proc/loadavg) at the end."
        echo
        echo "| direction | path | MB/s | of \`cp\` |"
        echo "|---|---|---|---|"
        echo "| in | \`cp\` host file -> loop-mounted ext4 of the sandbox disk's mkfs (baseline) | $CI | 100 % |"
        echo "| in | \`curl -T\` (\`PUT /files\`) | $(p50 curl_put) | $(pct "$(p50 curl_put)" "$CI") |"
        echo "| in | \`cella write\` (libcella \`cella_file_write_fd\`) | $(p50 cli_write) | $(pct "$(p50 cli_write)" "$CI") |"
        echo "| in | \`curl --unix-socket -T\` (cellad's unix socket) | $(p50 ucurl_put) | $(pct "$(p50 ucurl_put)" "$CI") |"
        echo "| in | \`cella write\`, \`CELLA_URL=unix:PATH\` | $(p50 ucli_write) | $(pct "$(p50 ucli_write)" "$CI") |"
        echo "| out | \`cp\` loop-mounted ext4 -> host file (baseline) | $CO | 100 % |"
        echo "| out | \`curl -o\` (\`GET /files\`) | $(p50 curl_get) | $(pct "$(p50 curl_get)" "$CO") |"
        echo "| out | \`cella read\` (libcella \`cella_file_read_fd\`) | $(p50 cli_read) | $(pct "$(p50 cli_read)" "$CO") |"
        echo "| out | \`curl --unix-socket -o\` (cellad's unix socket) | $(p50 ucurl_get) | $(pct "$(p50 ucurl_get)" "$CO") |"
        echo "| out | \`cella read\`, \`CELLA_URL=unix:PATH\` | $(p50 ucli_read) | $(pct "$(p50 ucli_read)" "$CO") |"
} | tee /dev/stderr | bench_figures "FILES FIGURES"
