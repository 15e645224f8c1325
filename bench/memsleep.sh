#!/bin/bash
# Memory sleep benchmark (docs/decisions/0050): two sandboxes running a python
# http.server (a background process, its port exposed), one with sleepMode "memory" and
# one with sleepMode "files", in the same run; RUNS times each: let it sleep (sleepAfter
# 1 s), then wake it and time, from the wake's first request, (1) the wake alone (an exec
# of `true` answered) and (2) the server's first answer through its preview URL. Asleep
# with its memory, (2) is one preview request: it wakes the sandbox, the restored server
# answers it. Asleep with its files, the server is gone after the wake, and (2) is what a
# client has to do then: start it again, wait for its port, expose it again, ask. Where the
# host cannot checkpoint (the reason is printed), the "memory" sandbox sleeps with its
# files too. The checkpoint's size on disk per slept sandbox is reported. Then, where
# memory sleep is in effect, FORKS forks of the running "memory" sandbox (its server
# running), each timed to its 201: with its memory (`"memory": true`: the child has the
# running server too) and, in the same run, of its files alone. Usage:
# bench/memsleep.sh (env: BUILD, IMAGES, RUNS, FORKS). Needs root.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$src/build}
IMAGES=${IMAGES:-/var/lib/cella/images}
RUNS=${RUNS:-20}
FORKS=${FORKS:-10}
cmake --build "$BUILD" --target cellad cella-init >/dev/null

. "$src/bench/lib.sh"
bench_cellad "$IMAGES" mb-memory mb-files
pct() { sort -n | awk -v p="$1" '{a[NR]=$1} END {i=int(NR*p/100+0.999); if (i<1) i=1; print a[i]}'; }
ms() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.1f", (b - a) / 1e6}'; }
req() { # METHOD PATH [BODY]: the answer in $tmp/answer, fails on an HTTP error
        curl -sS -f -o "$tmp/answer" -X "$1" -H 'Content-Type: application/json' \
                ${3:+--data-binary "$3"} "$url$2"
}
# the CRIU cellad runs (runtime/criu.h): CELLA_CRIU, else scripts/criu.sh's, else PATH's
criu=${CELLA_CRIU:-criu}
[ -z "${CELLA_CRIU:-}" ] && [ -x /var/cache/cella/criu/criu ] && criu=/var/cache/cella/criu/criu
P=8000
serve() { # the server of sandbox $1 started (again) and waited for
        req POST "/v1/sandboxes/$1/processes" \
                "{\"command\":\"cd /workspace && exec python3 -m http.server $P\",\"processId\":\"web\"}"
        req POST "/v1/sandboxes/$1/processes/web/waitForPort" "{\"port\":$P,\"timeout\":30000}"
}
expose() { req POST "/v1/sandboxes/$1/ports" "{\"port\":$P,\"token\":\"membenchtoken123\"}"; }
preview() { curl -sS -f -o /dev/null -H "Host: $P-$1-membenchtoken123.localhost:${url##*:}" "$url/index.html"; }
asleep() { # until sandbox $1 sleeps, its checkpoint over when it has one (60 s at most)
        for _ in $(seq 1 600); do
                curl -sS -o "$tmp/info" "$url/v1/sandboxes/$1"
                if [ "$(jq -r .state "$tmp/info")" = sleeping ] &&
                        { [ "$(jq -r .sleepMode "$tmp/info")" != memory ] ||
                                [ "$(jq -r '.memorySnapshotBytes // empty' "$tmp/info")" != "" ] ||
                                [ "$(jq -r '.memorySleepError // empty' "$tmp/info")" != "" ]; }; then
                        return 0
                fi
                sleep 0.1
        done
        echo "$1 did not sleep" >&2
        exit 1
}
declare -A mode
reason=
for want in memory files; do
        S=mb-$want
        req PUT "/v1/sandboxes/$S" "{\"sleepMode\":\"$want\",\"sleepAfter\":1}"
        mode[$want]=$(jq -r .sleepMode "$tmp/answer")
        [ "$want" = memory ] && reason=$(jq -r '.sleepModeFallback // empty' "$tmp/answer")
        req POST "/v1/sandboxes/$S/exec" '{"command":"echo hello >/workspace/index.html"}'
        serve "$S"
        expose "$S"
        preview "$S"
done
# one sandbox at a time: the other is asleep meanwhile (keepAlive while it waits would
# change nothing measured)
measure() { # want: fills wakes_$want, firsts_$want, images_$want
        local want=$1 S=mb-$1 t0 t1 t2 w=() f=() im=()
        for i in $(seq 1 "$RUNS"); do
                asleep "$S"
                im+=("$(jq -r '.memorySnapshotBytes // 0' "$tmp/info")")
                t0=$(date +%s%N)
                if [ "${mode[$want]}" = memory ]; then
                        preview "$S" # the wake's first request: the server's answer
                        t2=$(date +%s%N)
                        t1=$t2
                else
                        req POST "/v1/sandboxes/$S/exec" '{"command":"true"}'
                        t1=$(date +%s%N)
                        serve "$S"
                        expose "$S"
                        preview "$S"
                        t2=$(date +%s%N)
                fi
                w+=("$(ms "$t0" "$t1")")
                f+=("$(ms "$t0" "$t2")")
        done
        eval "wakes_$want=(\"\${w[@]}\")"
        eval "firsts_$want=(\"\${f[@]}\")"
        eval "images_$want=(\"\${im[@]}\")"
}
load=$(cut -d' ' -f1 /proc/loadavg)
measure memory
measure files
# forks of the running "memory" sandbox: with its memory, then of its files alone
forks_memory=()
forks_files=()
if [ "${mode[memory]}" = memory ]; then
        req PUT /v1/sandboxes/mb-memory '{"keepAlive":true}'
        req POST /v1/sandboxes/mb-memory/exec '{"command":"true"}'
        for i in $(seq 1 "$FORKS"); do
                for how in memory files; do
                        body="{\"name\":\"mb-$how-fork-$i\"}"
                        [ "$how" = memory ] && body="{\"name\":\"mb-$how-fork-$i\",\"memory\":true}"
                        t0=$(date +%s%N)
                        req POST /v1/sandboxes/mb-memory/fork "$body"
                        t1=$(date +%s%N)
                        eval "forks_$how+=(\"$(ms "$t0" "$t1")\")"
                        req DELETE "/v1/sandboxes/mb-$how-fork-$i"
                done
        done
fi
row() { echo "| $1 | $(printf '%s\n' "${@:2}" | pct 50) | $(printf '%s\n' "${@:2}" | pct 95) |"; }
{
        echo "Measured $(date -u '+%Y-%m-%d %H:%M UTC') on $(nproc) CPUs (load average $load" \
                "at the start), kernel $(uname -r)," \
                "$RUNS sleeps and wakes of each of two sandboxes running \`python3 -m" \
                "http.server\`, one with sleepMode \"memory\", one with \"files\"; criu (the" \
                "one cellad runs: $criu): $("$criu" --version 2>/dev/null |
                        sed -n 's/^Version: //p' || true)$(command -v "$criu" >/dev/null || echo none)."
        echo
        if [ "${mode[memory]}" = memory ]; then
                echo "Memory sleep in effect."
        else
                echo "Memory sleep unavailable here, both sandboxes slept with their files:" \
                        "$reason. The memory wake could not be measured on this host."
        fi
        echo
        echo "| wake of the sandbox | p50 (ms) | p95 (ms) |"
        echo "|---|---|---|"
        if [ "${mode[memory]}" = memory ]; then
                row "memory sleep: the server's first answer through its preview URL (the request wakes it)" "${firsts_memory[@]}"
        fi
        row "files sleep: wake alone (first exec answered)" "${wakes_files[@]}"
        row "files sleep: to the server's first answer through its preview URL (started again, port waited for, exposed again)" "${firsts_files[@]}"
        if [ "${mode[memory]}" = memory ]; then
                echo
                echo "| fork of the running sandbox ($FORKS each, to the 201) | p50 (ms) | p95 (ms) |"
                echo "|---|---|---|"
                row "with its memory (the child has the running server)" "${forks_memory[@]}"
                row "of its files alone" "${forks_files[@]}"
        fi
        echo
        if [ "${mode[memory]}" = memory ]; then
                echo "Memory on disk per slept sandbox (its checkpoint, memorySnapshotBytes):" \
                        "$(printf '%s\n' "${images_memory[@]}" | pct 50) bytes (p50)."
        else
                echo "Memory on disk per slept sandbox: none (a files sleep writes none)."
        fi
} | tee "$tmp/figures" | bench_figures "MEMSLEEP FIGURES"
cat "$tmp/figures"
