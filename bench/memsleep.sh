#!/bin/bash
# Memory sleep benchmark (docs/decisions/0050): a sandbox with sleepMode "memory" running a
# python http.server (a background process, its port exposed); RUNS times: let it sleep
# (sleepAfter 1 s), then wake it and time, from the wake's first request, (1) the wake
# alone (an exec of `true` answered) and (2) the server's first answer through its preview
# URL. Where memory sleep is in effect (sleepMode "memory" in SandboxInfo), (2) is one
# preview request: the restored server answers it. Where the host falls back to files
# (the reason is printed), the server is gone after the wake, and (2) is what a client has
# to do then: start it again, wait for its port, expose it again, ask. The memory image's
# size on disk per slept sandbox is reported where there is one. Usage: bench/memsleep.sh
# (env: BUILD, IMAGES, RUNS). Needs root.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$src/build}
IMAGES=${IMAGES:-/var/lib/cella/images}
RUNS=${RUNS:-20}
cmake --build "$BUILD" --target cellad cella-init >/dev/null

. "$src/bench/lib.sh"
bench_cellad "$IMAGES" membench
pct() { sort -n | awk -v p="$1" '{a[NR]=$1} END {i=int(NR*p/100+0.999); if (i<1) i=1; print a[i]}'; }
ms() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.1f", (b - a) / 1e6}'; }
req() { # METHOD PATH [BODY]: the answer in $tmp/answer, fails on an HTTP error
        curl -sS -f -o "$tmp/answer" -X "$1" -H 'Content-Type: application/json' \
                ${3:+--data-binary "$3"} "$url$2"
}
P=8000
S=membench
req PUT "/v1/sandboxes/$S" '{"sleepMode":"memory","sleepAfter":1}'
mode=$(jq -r .sleepMode "$tmp/answer")
reason=$(jq -r '.sleepModeFallback // empty' "$tmp/answer")
req POST "/v1/sandboxes/$S/exec" '{"command":"echo hello >/workspace/index.html"}'
serve() { # the server started (again) and waited for
        req POST "/v1/sandboxes/$S/processes" \
                "{\"command\":\"cd /workspace && exec python3 -m http.server $P\",\"processId\":\"web\"}"
        req POST "/v1/sandboxes/$S/processes/web/waitForPort" "{\"port\":$P,\"timeout\":30000}"
}
serve
req POST "/v1/sandboxes/$S/ports" "{\"port\":$P,\"token\":\"membenchtoken123\"}"
host=$P-$S-membenchtoken123.localhost:${url##*:}
preview() { curl -sS -f -o /dev/null -H "Host: $host" "$url/index.html"; }
preview
asleep() { # until the sandbox sleeps (30 s at most)
        for _ in $(seq 1 300); do
                curl -sS -o "$tmp/info" "$url/v1/sandboxes/$S"
                [ "$(jq -r .state "$tmp/info")" = sleeping ] && return 0
                sleep 0.1
        done
        echo "membench did not sleep" >&2
        exit 1
}
wakes=() firsts=() images=()
for i in $(seq 1 "$RUNS"); do
        asleep
        if [ -d "$tmp/data/sandboxes" ]; then
                images+=("$({ du -sb "$tmp"/data/sandboxes/*/checkpoint 2>/dev/null || true; } |
                        awk '{s+=$1} END {print s+0}')")
        fi
        t0=$(date +%s%N)
        req POST "/v1/sandboxes/$S/exec" '{"command":"true"}'
        t1=$(date +%s%N)
        if [ "$mode" != memory ]; then
                serve
                req POST "/v1/sandboxes/$S/ports" "{\"port\":$P,\"token\":\"membenchtoken123\"}"
        fi
        preview
        t2=$(date +%s%N)
        wakes+=("$(ms "$t0" "$t1")")
        firsts+=("$(ms "$t0" "$t2")")
done
row() { echo "| $1 | $(printf '%s\n' "${@:2}" | pct 50) | $(printf '%s\n' "${@:2}" | pct 95) |"; }
{
        echo "Measured $(date -u '+%Y-%m-%d %H:%M UTC') on $(nproc) CPUs, kernel $(uname -r)," \
                "$RUNS sleeps and wakes of one sandbox (sleepMode \"memory\") running" \
                "\`python3 -m http.server\`; criu: $(criu --version 2>/dev/null |
                sed -n 's/^Version: //p' || true)$(command -v criu >/dev/null || echo none)."
        echo
        if [ "$mode" = memory ]; then
                echo "Memory sleep in effect."
        else
                echo "Memory sleep unavailable here, the sandbox slept with its files:" \
                        "$reason. The memory wake could not be measured on this host."
        fi
        echo
        echo "| wake of the sandbox ($mode sleep) | p50 (ms) | p95 (ms) |"
        echo "|---|---|---|"
        row "wake alone (first exec answered)" "${wakes[@]}"
        if [ "$mode" = memory ]; then
                row "to the server's first answer through its preview URL" "${firsts[@]}"
        else
                row "to the server's first answer through its preview URL (started again, port waited for, exposed again)" "${firsts[@]}"
        fi
        echo
        if [ "$mode" = memory ]; then
                echo "Memory image on disk per slept sandbox: $(printf '%s\n' "${images[@]}" |
                        pct 50) bytes (p50)."
        else
                echo "Memory image on disk per slept sandbox: none (a files sleep writes none;" \
                        "$(printf '%s\n' "${images[@]}" | pct 50) bytes found under checkpoint/)."
        fi
} | tee "$tmp/figures" | bench_figures "MEMSLEEP FIGURES"
cat "$tmp/figures"
