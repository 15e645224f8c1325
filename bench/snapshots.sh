#!/bin/bash
# Snapshot and fork benchmark (docs/decisions/0048): a sandbox with 1 GiB of files (64 files
# of 16 MiB) in /workspace; p50 of RUNS of: POST /fork (a snapshot of its writable layer,
# frozen, plus a new sandbox over it, to its 201), POST /snapshots alone, PUT
# {"fromSnapshot"} of a new sandbox from an existing snapshot (what does not depend on the
# size), beside `cp -a` of the same tree (the snapshot's layer) on the data dir's
# filesystem and a plain create (PUT {} of a new sandbox). Usage: bench/snapshots.sh
# (env: BUILD, IMAGES, RUNS). Needs root.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$src/build}
IMAGES=${IMAGES:-/var/lib/cella/images}
RUNS=${RUNS:-5}
cmake --build "$BUILD" --target cellad cella-init >/dev/null

. "$src/bench/lib.sh"
bench_cellad "$IMAGES" snapbench
p50() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
ms() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.1f", (b - a) / 1e6}'; }
req() { # METHOD PATH [BODY]: the answer in $tmp/answer, fails on an HTTP error
        curl -sS -f -o "$tmp/answer" -X "$1" -H 'Content-Type: application/json' \
                ${3:+--data-binary "$3"} "$url$2"
}
req POST /v1/sandboxes/snapbench/exec \
        '{"command":"mkdir -p /workspace/big && for i in $(seq 1 64); do head -c 16777216 /dev/urandom >/workspace/big/f$i; done && du -sm /workspace/big","timeout":600000}'
size=$(jq -r .stdout "$tmp/answer" | cut -f1)
forks=() snaps=() froms=() cps=() creates=()
req POST /v1/sandboxes/snapbench/snapshots '{"name":"base"}'
base=$(jq -r .snapshotId "$tmp/answer")
for i in $(seq 1 "$RUNS"); do
        sync
        t0=$(date +%s%N)
        req POST /v1/sandboxes/snapbench/fork "{\"name\":\"fork$i\"}"
        t1=$(date +%s%N)
        forks+=("$(ms "$t0" "$t1")")
        fsnap=$(jq -r .snapshot "$tmp/answer")
        req DELETE "/v1/sandboxes/fork$i"
        req DELETE "/v1/snapshots/$fsnap"

        sync
        t0=$(date +%s%N)
        req POST /v1/sandboxes/snapbench/snapshots '{}'
        t1=$(date +%s%N)
        snaps+=("$(ms "$t0" "$t1")")
        req DELETE "/v1/snapshots/$(jq -r .snapshotId "$tmp/answer")"

        t0=$(date +%s%N)
        req PUT "/v1/sandboxes/from$i" "{\"fromSnapshot\":\"$base\"}"
        t1=$(date +%s%N)
        froms+=("$(ms "$t0" "$t1")")
        req DELETE "/v1/sandboxes/from$i"

        sync
        t0=$(date +%s%N)
        cp -a "$tmp/data/snapshots/$base/layer" "$tmp/cp$i"
        t1=$(date +%s%N)
        cps+=("$(ms "$t0" "$t1")")
        rm -rf "$tmp/cp$i"

        t0=$(date +%s%N)
        req PUT "/v1/sandboxes/plain$i" '{}'
        t1=$(date +%s%N)
        creates+=("$(ms "$t0" "$t1")")
        req DELETE "/v1/sandboxes/plain$i"
done
req DELETE "/v1/snapshots/$base" || true
cloned=$(grep -o "snapshot '[^']*' ([^)]*) of sandbox 'snapbench'.*" "$tmp/log" | tail -n 1 || true)
row() { echo "| $1 | $(printf '%s\n' "${@:2}" | p50) | ${*:2} |"; }
{
        echo "Measured $(date -u '+%Y-%m-%d %H:%M UTC') on $(nproc) CPUs, kernel $(uname -r)," \
                "$RUNS runs each; $size MiB of files (64 × 16 MiB); data dir on" \
                "$(findmnt -n -o FSTYPE -T "$tmp" || stat -f -c %T "$tmp")."
        echo
        echo "| | p50 (ms) | runs (ms) |"
        echo "|---|---|---|"
        row "fork (POST /fork: snapshot + new sandbox over it)" "${forks[@]}"
        row "snapshot alone (POST /snapshots)" "${snaps[@]}"
        row "new sandbox from an existing snapshot (PUT fromSnapshot)" "${froms[@]}"
        row "\`cp -a\` of the same tree (baseline)" "${cps[@]}"
        row "plain create (PUT {})" "${creates[@]}"
} | tee "$tmp/figures" | bench_figures "SNAPSHOT FIGURES"
cat "$tmp/figures"
