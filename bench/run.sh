#!/bin/bash
# Build cella-bench, run it against a fresh cellad, and rewrite the figures section of
# docs/performance.md (between the BEGIN/END FIGURES markers) with the table, the date and
# the machine. Usage: bench/run.sh [cella-bench args...]  (env: BUILD, IMAGES)
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$src/build}
IMAGES=${IMAGES:-/var/lib/cella/images}
export IMAGES
cmake -S "$src" -B "$BUILD" >/dev/null
cmake --build "$BUILD" --target cella-bench -j "$(nproc)" >/dev/null
out=$(mktemp)
trap 'rm -f "$out" "$out.doc"' EXIT
"$BUILD/bench/cella-bench" "$@" >"$out"
cat "$out"
doc=$src/docs/performance.md
{
        sed -n '1,/<!-- BEGIN FIGURES -->/p' "$doc"
        echo
        echo "Measured $(date -u '+%Y-%m-%d %H:%M UTC') on $(nproc) CPUs, kernel $(uname -r)," \
                "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')."
        echo
        cat "$out"
        echo
        sed -n '/<!-- END FIGURES -->/,$p' "$doc"
} >"$out.doc"
cp "$out.doc" "$doc"
echo "updated $doc" >&2
