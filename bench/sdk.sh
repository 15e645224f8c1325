#!/bin/bash
# SDK benchmark: the TypeScript SDK (@cella/sandbox, sdk/typescript) beside libcella against
# one cellad in the same run. exec('true') round trips (p50/p95; the two clients take turns,
# ROUNDS rounds of N calls each, reported as the medians of the rounds' figures; the SDK
# also cold, the first N calls of its fresh process) and an
# execStream of STREAM_BYTES of text (MB/s). Rewrites the section of docs/performance.md
# between the BEGIN/END SDK FIGURES markers.
# Usage: bench/sdk.sh  (env: BUILD, IMAGES, N (default 1000), ROUNDS (7), WARM (3000), STREAM_BYTES (1 GiB)).
# Needs root, node, and the SDK built (scripts/sdk-deps.sh).
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$src/build}
IMAGES=${IMAGES:-/var/lib/cella/images}
N=${N:-1000}
ROUNDS=${ROUNDS:-7}
WARM=${WARM:-3000}
STREAM_BYTES=${STREAM_BYTES:-1073741824}
cmake -S "$src" -B "$BUILD" >/dev/null
cmake --build "$BUILD" --target cellad cella-init sdk-client >/dev/null
[ -f "$src/sdk/typescript/dist/index.js" ] || "$src/scripts/sdk-deps.sh" >&2

. "$src/bench/lib.sh"
bench_sandbox sdkbench

c=$BUILD/bench/sdk-client
sdk_start node "$src/bench/sdk-typescript.mjs" "$url" sdkbench
# Cold: the first N calls of a fresh process (after 100 unmeasured), JIT still warming.
ask "warm 100" >/dev/null
cold=$(ask "rt $N")
ask "warm $WARM" >/dev/null
echo "sdk, cold process: $cold; then $WARM calls to warm up" >&2
rt_rounds sdkbench
cs=$("$c" "$url" sdkbench stream "$STREAM_BYTES")
tss=$(ask "stream $STREAM_BYTES")
echo "stream: libcella $cs; sdk $tss" >&2
sdk_stop

{
        echo "Measured $(date -u '+%Y-%m-%d %H:%M UTC') on $(nproc) CPUs, kernel $(uname -r)," \
                "node $(node --version): $ROUNDS rounds of $N calls per client, taking turns" \
                "(median of the rounds' p50 and p95), the SDK in one node process warmed by" \
                "$WARM calls first; the stream is one execStream of" \
                "$STREAM_BYTES bytes of text, counted as it is parsed."
        echo
        echo "| client | exec('true') p50 (us) | p95 (us) | execStream MB/s |"
        echo "|---|---|---|---|"
        echo "| libcella (C, baseline) | $C50 | $C95 | $(fig "$cs" mbps) |"
        echo "| @cella/sandbox (TypeScript, Node) | $S50 | $S95 | $(fig "$tss" mbps) |"
        echo "| @cella/sandbox, the first $N calls of a fresh process | $(fig "$cold" p50_us) | $(fig "$cold" p95_us) | |"
        echo
        echo "The SDK adds $((S50 - C50)) us at p50 to an exec round trip."
} | tee /dev/stderr | bench_figures "SDK FIGURES"
