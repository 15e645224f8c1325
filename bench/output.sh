#!/bin/bash
# Output benchmark: a command's stdout carried to an HTTP client, beside the same pipeline
# on the host in the same run. SIZE bytes of text (`head -c SIZE /dev/zero | tr '\0' a`)
# and of binary (a pre-made file of random bytes in the sandbox, `cat` of it) through:
# the host pipeline to /dev/null (the baseline), buffered exec (POST .../exec, one JSON
# answer: BUFFERED bytes, the buffered limit is CELLA_EXEC_MAX_BUFFERED per stream), the
# SSE stream through curl, the raw stream (Accept: application/octet-stream) through curl,
# `cella exec` to /dev/null, and libcella (cella_exec_stream: SSE; cella_exec_raw: raw).
# MB/s (10^6 bytes per second), the p50 of RUNS runs, each form taking its turn in every
# run. Rewrites the section of docs/performance.md between the BEGIN/END OUTPUT FIGURES
# markers.
# The sandbox is of instance type TYPE (standard-3: 2 CPUs, the whole of a 2-CPU machine),
# so that its CPU quota does not bound what the path carries (standard-1's half a CPU is
# shared by the command and cella-init, and holds `head | tr` alone to a third of the
# host's rate); the same pipeline inside the sandbox to /dev/null is measured too, the
# command's own ceiling there.
# Usage: bench/output.sh  (env: BUILD, IMAGES, SIZE (1 GiB), BUFFERED (60 MiB), RUNS (3),
# TYPE (standard-3)).
# Needs root.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$src/build}
IMAGES=${IMAGES:-/var/lib/cella/images}
SIZE=${SIZE:-1073741824}
BUFFERED=${BUFFERED:-62914560}
RUNS=${RUNS:-3}
TYPE=${TYPE:-standard-3}
cmake -S "$src" -B "$BUILD" >/dev/null
cmake --build "$BUILD" --target cellad cella-init cella sdk-client >/dev/null

. "$src/bench/lib.sh"
bench_cellad "$IMAGES" outbench
sb=$url/v1/sandboxes/outbench
curl -sS -f -X PUT "$sb" -H 'Content-Type: application/json' \
        -d "{\"keepAlive\":true,\"instanceType\":\"$TYPE\"}" >/dev/null
text="head -c $SIZE /dev/zero | tr '\\0' a"
btext="head -c $BUFFERED /dev/zero | tr '\\0' a"
bin="cat /tmp/random.bin"
# the binary case's file, made once in the sandbox (its own /tmp)
curl -sS -f "$sb/exec" -H 'Content-Type: application/json' \
        -d "{\"command\":\"head -c $SIZE /dev/urandom > /tmp/random.bin\",\"timeout\":600000}" \
        >/dev/null

# req CMD: an exec request's JSON body
req() { jq -cn --arg c "$1" '{command:$c}'; }
# mbps BYTES SECONDS
mbps() { awk -v b="$1" -v s="$2" 'BEGIN {printf "%.0f", b / 1e6 / s}'; }
# timed CMD...: run CMD (its stdout is what is counted, on the file $tmp/n), echo MB/s.
timed() {
        local t0 t1 n
        t0=$(date +%s.%N)
        "$@" | wc -c >"$tmp/n"
        t1=$(date +%s.%N)
        n=$(cat "$tmp/n")
        mbps "$n" "$(echo "$t1 - $t0" | bc)"
        [ "$n" -gt 0 ] || { echo "no output from $*" >&2; exit 1; }
}
host() { bash -c "head -c $SIZE /dev/zero | tr '\\0' a"; }
# the text pipeline in the sandbox to /dev/null: MB/s from its own clock
inside() {
        local t
        t=$(curl -sS -f "$sb/exec" -H 'Content-Type: application/json' \
                -d "$(req "s=\$(date +%s.%N); $text > /dev/null; e=\$(date +%s.%N); echo \$s \$e")" |
                jq -r .stdout)
        mbps "$SIZE" "$(echo "$t" | awk '{print $2 - $1}')"
}
buffered() {
        curl -sS -f "$sb/exec" -H 'Content-Type: application/json' \
                -d "$(req "$btext")" -o "$tmp/buffered.json"
}
sse() {
        curl -sS -f -N "$sb/exec" -H 'Content-Type: application/json' \
                -H 'Accept: text/event-stream' -d "$(req "$1")"
}
raw() {
        curl -sS -f -N "$sb/exec" -H 'Content-Type: application/json' \
                -H 'Accept: application/octet-stream' -d "$(req "$1")"
}
cli() { "$BUILD/cella" --url "$url" exec outbench "$1"; }

declare -A fig_runs
add() { fig_runs[$1]+="$2 "; echo "run $r: $1 $2" >&2; }
p50() { printf '%s\n' ${fig_runs[$1]} | median; }
for r in $(seq 1 "$RUNS"); do
        add host "$(timed host)"
        add inside "$(inside)"
        # buffered: the JSON answer is what crosses the socket; its stdout is counted after
        t0=$(date +%s.%N)
        buffered
        t1=$(date +%s.%N)
        add buffered "$(mbps "$(jq -j .stdout "$tmp/buffered.json" | wc -c)" "$(echo "$t1 - $t0" | bc)")"
        add sse "$(timed sse "$text")"
        add raw "$(timed raw "$text")"
        add raw_bin "$(timed raw "$bin")"
        add cli "$(timed cli "$text")"
        add cli_bin "$(timed cli "$bin")"
        a=$("$BUILD/bench/sdk-client" "$url" outbench run "$text")
        add libcella_sse "$(fig "$a" mbps)"
        a=$("$BUILD/bench/sdk-client" "$url" outbench raw "$text")
        add libcella_raw "$(fig "$a" mbps)"
        a=$("$BUILD/bench/sdk-client" "$url" outbench raw "$bin")
        add libcella_bin "$(fig "$a" mbps)"
done
H=$(p50 host)
pct() { awk -v a="$1" -v h="$H" 'BEGIN {printf "%.0f %%", 100 * a / h}'; }
row() { echo "| $1 | $(p50 "$2") | $(pct "$(p50 "$2")") |"; }
{
        echo "Measured $(date -u '+%Y-%m-%d %H:%M UTC') on $(nproc) CPUs, kernel $(uname -r):" \
                "$SIZE bytes per stream ($BUFFERED for buffered exec), p50 of $RUNS runs, the" \
                "forms taking turns; the sandbox of instance type $TYPE; load average $(cut -d' ' -f1 /proc/loadavg) at the end."
        echo
        echo "| path | MB/s | of the host pipeline |"
        echo "|---|---|---|"
        echo "| host: \`head -c 1G /dev/zero \\| tr '\\0' a > /dev/null\` (baseline) | $H | 100 % |"
        row "the same pipeline in the sandbox ($TYPE) to /dev/null" inside
        row "buffered exec (\`POST .../exec\`, JSON; text)" buffered
        row "SSE through curl (text)" sse
        row "raw (\`Accept: application/octet-stream\`) through curl (text)" raw
        row "raw through curl (binary: \`cat\` of a random file)" raw_bin
        row "\`cella exec\` to a file (text)" cli
        row "\`cella exec\` to a file (binary)" cli_bin
        row "libcella \`cella_exec_stream\` (SSE, text)" libcella_sse
        row "libcella \`cella_exec_raw\` (text)" libcella_raw
        row "libcella \`cella_exec_raw\` (binary)" libcella_bin
} | tee /dev/stderr | bench_figures "OUTPUT FIGURES"
