#!/bin/bash
# Backup and restore benchmark (docs/decisions/0049): a sandbox with 1 GiB of files (64 files
# of 16 MiB of random bytes) in /workspace/big; RUNS times: POST /backups of it (to its 201:
# the archive made inside the sandbox, streamed into the local store) and POST .../restore
# into a new directory (to its 200: fetched, checked, extracted, renamed into place), beside
# `tar -cf - | zstd -3` of the same amount of data on the host (into the data dir's
# filesystem) and `zstd -d | tar -xf -` of that archive; MB/s of the tree's bytes. Then,
# when tests/s3's server is installed, the same to an S3 store: a multipart backup, a
# spooled one (multipart false) and a restore.
# Usage: bench/backups.sh (env: BUILD, IMAGES, RUNS). Needs root.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$src/build}
IMAGES=${IMAGES:-/var/lib/cella/images}
RUNS=${RUNS:-3}
cmake --build "$BUILD" --target cellad cella-init cella-archive >/dev/null

. "$src/bench/lib.sh"
bench_cellad "$IMAGES" bkbench
p50() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
ms() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.1f", (b - a) / 1e6}'; }
mbs() { awk -v bytes="$1" -v ms="$2" 'BEGIN {printf "%.0f", bytes / 1e6 / (ms / 1e3)}'; }
req() { # METHOD PATH [BODY]: the answer in $tmp/answer, fails on an HTTP error
        curl -sS -f -o "$tmp/answer" -X "$1" -H 'Content-Type: application/json' \
                ${3:+--data-binary "$3"} "$url$2"
}
req POST /v1/sandboxes/bkbench/exec \
        '{"command":"mkdir -p /workspace/big && for i in $(seq 1 64); do head -c 16777216 /dev/urandom >/workspace/big/f$i; done && du -sb /workspace/big","timeout":600000}'
bytes=$(jq -r .stdout "$tmp/answer" | cut -f1)
mkdir -p "$tmp/host/big"
for i in $(seq 1 64); do head -c 16777216 /dev/urandom >"$tmp/host/big/f$i"; done

# timed ARRAY COMMAND...: the page cache written out, then COMMAND; its ms appended to ARRAY.
timed() {
        local -n out=$1
        local t0 t1
        shift
        sync
        t0=$(date +%s%N)
        "$@"
        t1=$(date +%s%N)
        out+=("$(ms "$t0" "$t1")")
}
# round BACKUPS RESTORES: a backup of /workspace/big and its restore into another dir, each
# timed into its array; the restored copy and the backup removed after.
round() {
        timed "$1" req POST /v1/sandboxes/bkbench/backups '{"dir":"/workspace/big"}'
        local id
        id=$(jq -r .id "$tmp/answer")
        archive=$(jq -r .sizeBytes "$tmp/answer")
        timed "$2" req POST "/v1/sandboxes/bkbench/backups/$id/restore" '{"dir":"/workspace/restored"}'
        req POST /v1/sandboxes/bkbench/exec '{"command":"rm -rf /workspace/restored","timeout":600000}'
        req DELETE "/v1/backups/$id"
}
host_pack() { tar -C "$tmp/host/big" -cf - . | zstd -q -3 -o "$tmp/host.tar.zst"; }
host_unpack() { zstd -q -d -c "$tmp/host.tar.zst" | tar -C "$tmp/host/out" -xf -; }

backups=() restores=() tars=() untars=() archive=0
for i in $(seq 1 "$RUNS"); do
        round backups restores
        timed tars host_pack
        mkdir "$tmp/host/out"
        timed untars host_unpack
        rm -rf "$tmp/host/out" "$tmp/host.tar.zst"
done
# The same sandbox against an S3 store (tests/s3's server on loopback, when node and its
# packages are there): the backup streamed in a multipart upload (the default), the backup
# spooled and sent in one PUT (multipart false), and the restore from the bucket.
s3backups=() s3spooled=() s3restores=() s3note=
s3dir=$src/tests/s3
if command -v node >/dev/null && [ -d "$s3dir/node_modules/@20minutes/s3rver" ]; then
        kill -TERM "$cellad_pid"
        wait "$cellad_pid" 2>/dev/null || true
        mkdir -p "$tmp/s3"
        : >"$tmp/s3.log" # there before the server opens it: read below at once
        node "$s3dir/server.js" "$tmp/s3" bench >"$tmp/s3.log" 2>&1 &
        s3pid=$!
        trap 'kill -TERM $s3pid 2>/dev/null || true; bench_cleanup' EXIT
        s3port=
        for _ in $(seq 1 150); do
                s3port=$(awk '/^listening/ {print $2}' "$tmp/s3.log")
                [ -n "$s3port" ] && break
                sleep 0.2
        done
        [ -n "$s3port" ] || { cat "$tmp/s3.log" >&2; exit 1; }
        AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER "$BUILD/cellad" --listen 127.0.0.1:0 \
                --data-dir "$tmp/data" --images "$IMAGES" --pool 0 --log-level warn \
                --backup-store "s3://bench?endpoint=http://127.0.0.1:$s3port" >"$tmp/log" 2>&1 &
        cellad_pid=$!
        url=
        for _ in $(seq 1 300); do
                url=$(grep -o 'http://127\.0\.0\.1:[0-9]*' "$tmp/log" | head -n 1) || true
                [ -n "$url" ] && break
                sleep 0.1
        done
        [ -n "$url" ] || { cat "$tmp/log" >&2; exit 1; }
        for i in $(seq 1 "$RUNS"); do
                round s3backups s3restores
                timed s3spooled req POST /v1/sandboxes/bkbench/backups '{"dir":"/workspace/big","multipart":false}'
                req DELETE "/v1/backups/$(jq -r .id "$tmp/answer")"
        done
        s3note=" s3rver 4.0.4 (node) on loopback, storing on the same disk."
fi
row() { # LABEL MS...: p50 ms, MB/s at p50, runs
        local p
        p=$(printf '%s\n' "${@:2}" | p50)
        echo "| $1 | $p | $(mbs "$bytes" "$p") | ${*:2} |"
}
{
        echo "Measured $(date -u '+%Y-%m-%d %H:%M UTC') on $(nproc) CPUs, kernel $(uname -r)," \
                "$RUNS runs each; $((bytes / 1048576)) MiB of files (64 × 16 MiB of random" \
                "bytes, archive $((archive / 1048576)) MiB); data dir on" \
                "$(findmnt -n -o FSTYPE -T "$tmp" || stat -f -c %T "$tmp"); local store."
        echo
        echo "| | p50 (ms) | MB/s at p50 | runs (ms) |"
        echo "|---|---|---|---|"
        row "backup (POST /backups, to its 201)" "${backups[@]}"
        row "\`tar -cf - \| zstd -3\` on the host (baseline)" "${tars[@]}"
        row "restore into a new dir (POST .../restore, to its 200)" "${restores[@]}"
        row "\`zstd -d \| tar -xf -\` on the host (baseline)" "${untars[@]}"
} | tee "$tmp/figures" | bench_figures "BACKUP FIGURES"
cat "$tmp/figures"
[ ${#s3backups[@]} -gt 0 ] || exit 0
{
        echo "Measured $(date -u '+%Y-%m-%d %H:%M UTC'), the same 1 GiB to an S3 store:$s3note"
        echo
        echo "| | p50 (ms) | MB/s at p50 | runs (ms) |"
        echo "|---|---|---|---|"
        row "\`tar -cf - \| zstd -3\` on the host (baseline, this run)" "${tars[@]}"
        row "backup to S3, multipart (streamed in 8 MiB parts, to its 201)" "${s3backups[@]}"
        row "backup to S3, multipart false (spooled, one PUT, to its 201)" "${s3spooled[@]}"
        row "restore from S3 into a new dir (to its 200)" "${s3restores[@]}"
} | tee "$tmp/figures" | bench_figures "BACKUP S3 FIGURES"
cat "$tmp/figures"
