#!/bin/bash
# Terminal benchmark: keystroke echo round trips (send one byte, wait until it is echoed)
# through the PTY WebSocket (build/tests/pty-client on libcella -> cellad -> agent -> bash
# on a pty in a sandbox, and back), beside the same round trips on a local pty with bash
# and no cella, in the same run. Rewrites the section of docs/performance.md between the
# BEGIN/END PTY FIGURES markers. Usage: bench/pty.sh  (env: BUILD, IMAGES, N (keystrokes,
# default 1000)). Needs root.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$src/build}
IMAGES=${IMAGES:-/var/lib/cella/images}
N=${N:-1000}
cmake --build "$BUILD" --target cellad cella-init pty-client >/dev/null

. "$src/bench/lib.sh"
bench_sandbox ptybench

pc=$BUILD/tests/pty-client
# warm-up: the terminal's shell starts with the first connection
"$pc" --url "$url" ptybench ready 'send:echo warm-$((1+1))\r' 'expect:warm-2' >/dev/null
ws=$("$pc" --url "$url" ptybench ready "echo-bench:$N")
local=$("$pc" --local-echo-bench "$N")
echo "$ws"
echo "$local"
{
        echo "Measured $(date -u '+%Y-%m-%d %H:%M UTC') on $(nproc) CPUs, kernel $(uname -r):" \
                "$N keystrokes each, one at a time."
        echo
        echo "| path | p50 (us) | p95 (us) | max (us) |"
        echo "|---|---|---|---|"
        echo "| local pty, bash (baseline) | $(fig "$local" p50) | $(fig "$local" p95) | $(fig "$local" max) |"
        echo "| cella PTY WebSocket (libcella → cellad → agent → bash) | $(fig "$ws" p50) | $(fig "$ws" p95) | $(fig "$ws" max) |"
} | bench_figures "PTY FIGURES"
