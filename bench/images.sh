#!/bin/bash
# Image import benchmark: POST /v1/images/NAME/import of an OCI layout tarball with 3 gzip
# layers made from the default image's /usr/lib/python3.11 (about 50 MiB of files), p50
# of RUNS imports (upload over loopback, digest checks, both passes of each layer, rename),
# beside `tar -xzf` of the same 3 layers into an empty directory (the baseline: no
# checks, no upload). Usage: bench/images.sh  (env: BUILD, IMAGES, RUNS). Needs root.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$src/build}
IMAGES=${IMAGES:-/var/lib/cella/images}
RUNS=${RUNS:-5}
TREE=$IMAGES/default/rootfs/usr/lib/python3.11
[ -d "$TREE" ] || { echo "images.sh: no $TREE (build the default image)" >&2; exit 1; }
cmake --build "$BUILD" --target cellad cella-init >/dev/null

. "$src/bench/lib.sh"
mkdir -p "$tmp/images"
ln -s "$IMAGES/default" "$tmp/images/default"
python3 "$src/tests/integration/images/mktar.py" tree "$tmp/img.tar" "$TREE"
bench_cellad "$tmp/images"

p50() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
ms() { echo $(( ($2 - $1) / 1000000 )); }
imports=() extracts=()
for i in $(seq 1 "$RUNS"); do
        sync
        t0=$(date +%s%N)
        curl -sS -f -o "$tmp/answer" -X POST --data-binary "@$tmp/img.tar" \
                "$url/v1/images/bench$i/import"
        t1=$(date +%s%N)
        imports+=("$(ms "$t0" "$t1")")
        curl -sS -f -o /dev/null -X DELETE "$url/v1/images/bench$i"
        mkdir "$tmp/x$i"
        sync
        t0=$(date +%s%N)
        for l in "$tmp"/img.tar.layer*.tar.gz; do tar -xzf "$l" -C "$tmp/x$i"; done
        t1=$(date +%s%N)
        extracts+=("$(ms "$t0" "$t1")")
        rm -rf "$tmp/x$i"
done
size=$(jq .sizeBytes "$tmp/answer")
imp=$(printf '%s\n' "${imports[@]}" | p50)
ext=$(printf '%s\n' "${extracts[@]}" | p50)
desc="$(du -m "$tmp/img.tar" | cut -f1) MiB tarball, $(jq .entries "$tmp/answer") entries, $((size / 1048576)) MiB of files"
echo "image import: $desc, 3 gzip layers"
echo "  import (POST .../import) p50: $imp ms (runs: ${imports[*]})"
echo "  tar -xzf of the layers p50:   $ext ms (runs: ${extracts[*]})"
{
        echo "Measured $(date -u '+%Y-%m-%d %H:%M UTC') on $(nproc) CPUs, kernel $(uname -r)," \
                "$RUNS runs each."
        echo
        echo "| | p50 (ms) | runs (ms) |"
        echo "|---|---|---|"
        echo "| import: $desc | $imp | ${imports[*]} |"
        echo "| \`tar -xzf\` of the same layers (baseline) | $ext | ${extracts[*]} |"
} | bench_figures "IMAGE FIGURES"
