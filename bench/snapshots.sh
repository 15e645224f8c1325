#!/bin/bash
# Snapshot and fork benchmark (docs/decisions/0048, 0051), in one run:
# * on an XFS data dir with reflinks (made here: a sparse file, mkfs.xfs -m reflink=1, a
#   loop device, mounted under the temp dir), where a snapshot is a reflinked clone of the
#   sandbox's disk: a sandbox with 100 MiB (25 files of 4 MiB) and one with 1 GiB (64 of
#   16 MiB) of random bytes in /workspace; RUNS times each: POST /fork (snapshot + a new sandbox
#   over it, to its 201) and POST /snapshots alone; then PUT {"fromSnapshot"} of a new
#   sandbox from an existing snapshot and a plain create (PUT {}); beside `cp -a` and
#   `cp --reflink=always` of a 1 GiB tree of the same shape on the same XFS;
# * on the ext4 data dir (the temp dir's filesystem), where the layer is copied (0048):
#   POST /fork and POST /snapshots of the 1 GiB sandbox, and `cp -a` of its layer.
# p50 and p95 (nearest rank) of each: requests timed by curl (request to answer), copies
# by the clock around cp. Usage: bench/snapshots.sh (env: BUILD, IMAGES, RUNS,
# default 9). Needs root, xfsprogs and a kernel with XFS.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$src/build}
IMAGES=${IMAGES:-/var/lib/cella/images}
RUNS=${RUNS:-9}
cmake --build "$BUILD" --target cellad cella-init >/dev/null
command -v mkfs.xfs >/dev/null || { echo "bench/snapshots.sh: needs mkfs.xfs (xfsprogs)" >&2; exit 1; }

. "$src/bench/lib.sh"
xfs_loop=
ext_pid=
ext_url=
snap_cleanup() {
        local p
        for p in "$ext_pid" "$cellad_pid"; do
                [ -n "$p" ] && kill -TERM "$p" 2>/dev/null && wait "$p" 2>/dev/null
        done
        cellad_pid=
        if [ -n "$xfs_loop" ]; then
                # the snapshots' read-only loop devices go with their last mount
                for _ in $(seq 1 100); do
                        grep -qF "$tmp/data/" /sys/block/loop*/loop/backing_file 2>/dev/null || break
                        sleep 0.1
                done
                umount "$tmp/data" || umount -l "$tmp/data"
                losetup -d "$xfs_loop"
        fi
        bench_cleanup
}
trap snap_cleanup EXIT

truncate -s 16G "$tmp/xfs.img"
mkfs.xfs -q -m reflink=1 "$tmp/xfs.img"
xfs_loop=$(losetup --find --show "$tmp/xfs.img")
mkdir -p "$tmp/data"
mount -t xfs "$xfs_loop" "$tmp/data"

bench_cellad "$IMAGES"
xfs_url=$url
"$BUILD/cellad" --listen 127.0.0.1:0 --data-dir "$tmp/ext4" --images "$IMAGES" --pool 0 \
        --log-level warn >"$tmp/ext4.log" 2>&1 &
ext_pid=$!
for _ in $(seq 1 300); do
        ext_url=$(grep -o 'http://127\.0\.0\.1:[0-9]*' "$tmp/ext4.log" | head -n 1) || true
        [ -n "$ext_url" ] && break
        sleep 0.1
done
[ -n "$ext_url" ] || { cat "$tmp/ext4.log" >&2; exit 1; }

pct() { # P: the P-th percentile (nearest rank) of the numbers on stdin
        sort -n | awk -v p="$1" '{a[NR]=$1} END {i=int((NR*p+99)/100); if (i<1) i=1; print a[i]}'
}
ms() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.1f", (b - a) / 1e6}'; }
req() { # URL METHOD PATH [BODY]: the answer in $tmp/answer, fails on an HTTP error
        curl -sS -f -o "$tmp/answer" -X "$2" -H 'Content-Type: application/json' \
                ${4:+--data-binary "$4"} "$1$3"
}
treq() { # FILE URL METHOD PATH [BODY]: req, its time (ms, curl's own: request sent to answer
        # read, not curl's start) appended to FILE
        curl -sS -f -o "$tmp/answer" -w '%{time_total}\n' -X "$3" \
                -H 'Content-Type: application/json' ${5:+--data-binary "$5"} "$2$4" |
                awk '{printf "%.1f\n", $1 * 1000}' >>"$1"
        [ "${PIPESTATUS[0]}" -eq 0 ]
}
fill() { # URL SANDBOX N MIB: a sandbox with N files of MIB MiB in /workspace/big
        req "$1" PUT "/v1/sandboxes/$2" '{"keepAlive":true}'
        req "$1" POST "/v1/sandboxes/$2/exec" "{\"command\":\"mkdir -p /workspace/big && for i in \$(seq 1 $3); do head -c $(($4 << 20)) /dev/urandom >/workspace/big/f\$i; done && du -sm /workspace/big\",\"timeout\":600000}"
        jq -r .stdout "$tmp/answer" | cut -f1
}
# forks URL SANDBOX TAG: RUNS forks (and snapshots alone) of SANDBOX; times in $tmp/TAG.*
forks() {
        local i fsnap
        : >"$tmp/$3.fork"
        : >"$tmp/$3.snap"
        for i in $(seq 1 "$RUNS"); do
                sync
                treq "$tmp/$3.fork" "$1" POST "/v1/sandboxes/$2/fork" "{\"name\":\"$3-fork$i\"}"
                fsnap=$(jq -r .snapshot "$tmp/answer")
                req "$1" DELETE "/v1/sandboxes/$3-fork$i"
                req "$1" DELETE "/v1/snapshots/$fsnap"
                sync
                treq "$tmp/$3.snap" "$1" POST "/v1/sandboxes/$2/snapshots" '{}'
                METHOD=$(jq -r .method "$tmp/answer")
                req "$1" DELETE "/v1/snapshots/$(jq -r .snapshotId "$tmp/answer")"
        done
}
timed() { # FILE CMD...: append the time of CMD (ms) to FILE
        local t0 t1
        t0=$(date +%s%N)
        "${@:2}"
        t1=$(date +%s%N)
        ms "$t0" "$t1" >>"$1"
        echo >>"$1"
}

small=$(fill "$xfs_url" small 25 4)
big=$(fill "$xfs_url" big 64 16)
ebig=$(fill "$ext_url" ebig 64 16)
forks "$xfs_url" small xsmall
xsmall_method=$METHOD
forks "$xfs_url" big xbig
xbig_method=$METHOD
forks "$ext_url" ebig ebig
ebig_method=$METHOD

# from an existing snapshot, and a plain create, on the XFS data dir
req "$xfs_url" POST /v1/sandboxes/big/snapshots '{"name":"base"}'
: >"$tmp/from"
: >"$tmp/plain"
for i in $(seq 1 "$RUNS"); do
        treq "$tmp/from" "$xfs_url" PUT "/v1/sandboxes/from$i" '{"fromSnapshot":"base"}'
        req "$xfs_url" DELETE "/v1/sandboxes/from$i"
        treq "$tmp/plain" "$xfs_url" PUT "/v1/sandboxes/plain$i" '{}'
        req "$xfs_url" DELETE "/v1/sandboxes/plain$i"
done
req "$xfs_url" DELETE /v1/snapshots/base

# baselines: a 1 GiB tree of the same shape on the XFS data dir's filesystem; the copied
# layer of the ext4 daemon's sandbox
mkdir -p "$tmp/data/tree"
for i in $(seq 1 64); do head -c 16777216 /dev/urandom >"$tmp/data/tree/f$i"; done
req "$ext_url" POST /v1/sandboxes/ebig/snapshots '{"name":"base"}'
elayer=$tmp/ext4/snapshots/$(jq -r .snapshotId "$tmp/answer")/layer
: >"$tmp/cpa"
: >"$tmp/cpr"
: >"$tmp/ecpa"
for i in $(seq 1 "$RUNS"); do
        sync
        timed "$tmp/cpa" cp -a "$tmp/data/tree" "$tmp/data/cpa$i"
        rm -rf "$tmp/data/cpa$i"
        sync
        timed "$tmp/cpr" cp -a --reflink=always "$tmp/data/tree" "$tmp/data/cpr$i"
        rm -rf "$tmp/data/cpr$i"
        sync
        timed "$tmp/ecpa" cp -a "$elayer" "$tmp/ecpa$i"
        rm -rf "$tmp/ecpa$i"
done
rm -rf "$tmp/data/tree"
req "$ext_url" DELETE /v1/snapshots/base
for s in small big; do req "$xfs_url" DELETE "/v1/sandboxes/$s"; done
req "$ext_url" DELETE /v1/sandboxes/ebig

row() { # LABEL FILE
        echo "| $1 | $(pct 50 <"$2") | $(pct 95 <"$2") | $(grep -v '^$' "$2" | tr '\n' ' ' | sed 's/ $//') |"
}
{
        echo "Measured $(date -u '+%Y-%m-%d %H:%M UTC') on $(nproc) CPUs, kernel $(uname -r)," \
                "$RUNS runs each; random bytes in files of 4 MiB (100 MiB) or 16 MiB (1 GiB); XFS data dir (reflink=1, on a" \
                "loop device over a sparse file of the $(findmnt -n -o FSTYPE -T "$tmp" ||
                        stat -f -c %T "$tmp") temp dir) and ext4 data dir" \
                "($(findmnt -n -o FSTYPE -T "$tmp/ext4" || stat -f -c %T "$tmp/ext4")), one cellad each."
        echo
        echo "| | p50 (ms) | p95 (ms) | runs (ms) |"
        echo "|---|---|---|---|"
        row "XFS: fork of a sandbox with $small MiB of files (method $xsmall_method)" "$tmp/xsmall.fork"
        row "XFS: fork of a sandbox with $big MiB of files (method $xbig_method)" "$tmp/xbig.fork"
        row "XFS: snapshot alone, $small MiB" "$tmp/xsmall.snap"
        row "XFS: snapshot alone, $big MiB" "$tmp/xbig.snap"
        row "XFS: new sandbox from an existing $big MiB snapshot (PUT fromSnapshot)" "$tmp/from"
        row "XFS: plain create (PUT {})" "$tmp/plain"
        row "XFS: \`cp -a\` of a 1 GiB tree (baseline)" "$tmp/cpa"
        row "XFS: \`cp -a --reflink=always\` of the same tree (baseline)" "$tmp/cpr"
        row "ext4: fork of a sandbox with $ebig MiB of files (method $ebig_method)" "$tmp/ebig.fork"
        row "ext4: snapshot alone, $ebig MiB" "$tmp/ebig.snap"
        row "ext4: \`cp -a\` of that snapshot's layer (baseline)" "$tmp/ecpa"
} | tee "$tmp/figures" | bench_figures "SNAPSHOT FIGURES"
cat "$tmp/figures"
