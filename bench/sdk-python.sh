#!/bin/bash
# Python SDK benchmark: sdk/python beside libcella and curl against one cellad in the same
# run. exec('true') round trips (p50/p95; the two clients take turns, ROUNDS rounds of N
# calls each, reported as the medians of the rounds' figures, the SDK in one Python process
# warmed first), and a FILE_BYTES upload and download (PUT/GET /files) through the SDK and
# through curl, each the best of REPS. Rewrites the section of docs/performance.md between
# the BEGIN/END PYTHON SDK FIGURES markers.
# Usage: bench/sdk-python.sh  (env: BUILD, IMAGES, PY (/usr/bin/python3), N (1000),
# ROUNDS (7), WARM (2000), FILE_BYTES (1 GiB), REPS (3)).
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$src/build}
IMAGES=${IMAGES:-/var/lib/cella/images}
PY=${PY:-/usr/bin/python3}
N=${N:-1000}
ROUNDS=${ROUNDS:-7}
WARM=${WARM:-2000}
FILE_BYTES=${FILE_BYTES:-1073741824}
REPS=${REPS:-3}
cmake -S "$src" -B "$BUILD" >/dev/null
cmake --build "$BUILD" --target cellad cella-init sdk-client >/dev/null

. "$src/bench/lib.sh"
bench_sandbox pybench

sdk_start "$PY" "$src/bench/sdk-python.py" "$url" pybench
ask "warm $WARM" >/dev/null
rt_rounds pybench

# The file: sparse (its pages are zeros the kernel makes, so the disk does not pace
# either client); both clients read the same file.
f=$tmp/big.bin
truncate -s "$FILE_BYTES" "$f"
up_c=() down_c=() up_p=() down_p=()
for r in $(seq 1 "$REPS"); do
        t=$(curl -sS -f -T "$f" -o /dev/null -w '%{time_total}' "$url/v1/sandboxes/pybench/files?path=big.bin")
        up_c+=("$(awk -v b="$FILE_BYTES" -v t="$t" 'BEGIN {printf "%.0f", b / t / 1e6}')")
        t=$(curl -sS -f -o /dev/null -w '%{time_total}' "$url/v1/sandboxes/pybench/files?path=big.bin")
        down_c+=("$(awk -v b="$FILE_BYTES" -v t="$t" 'BEGIN {printf "%.0f", b / t / 1e6}')")
        u=$(ask "upload $f")
        d=$(ask "download")
        [ "$(fig "$d" bytes)" = "$FILE_BYTES" ] || { echo "download: $d" >&2; exit 1; }
        up_p+=("$(fig "$u" mbps)") down_p+=("$(fig "$d" mbps)")
        echo "file $r: curl up ${up_c[-1]} MB/s down ${down_c[-1]} MB/s; python up $u; down $d" >&2
done
sdk_stop

UC=$(printf '%s\n' "${up_c[@]}" | best) DC=$(printf '%s\n' "${down_c[@]}" | best)
UP=$(printf '%s\n' "${up_p[@]}" | best) DP=$(printf '%s\n' "${down_p[@]}" | best)
{
        echo "Measured $(date -u '+%Y-%m-%d %H:%M UTC') on $(nproc) CPUs, kernel $(uname -r)," \
                "$($PY --version): $ROUNDS rounds of $N calls per client, taking turns" \
                "(median of the rounds' p50 and p95), the SDK in one Python process warmed by" \
                "$WARM calls first; files: $FILE_BYTES bytes (a sparse file) uploaded with PUT" \
                "/files and downloaded to /dev/null, best of $REPS, curl and the SDK taking turns;" \
                "load average $(cut -d' ' -f1 /proc/loadavg) at the end."
        echo
        echo "| client | exec('true') p50 (us) | p95 (us) | upload MB/s | download MB/s |"
        echo "|---|---|---|---|---|"
        echo "| libcella (C, baseline) | $C50 | $C95 | | |"
        echo "| curl (baseline) | | | $UC | $DC |"
        echo "| cella (Python SDK) | $S50 | $S95 | $UP | $DP |"
        echo
        echo "The Python SDK adds $((S50 - C50)) us at p50 to an exec round trip; its upload runs at" \
                "$((100 * UP / UC)) % and its download at $((100 * DP / DC)) % of curl's rate."
} | tee /dev/stderr | bench_figures "PYTHON SDK FIGURES"
