#!/bin/bash
# Preview-proxy benchmark: wrk through a preview URL (cellad's proxy, a socket made in the
# sandbox's network namespace per request) versus wrk directly to the same port inside the
# sandbox's network namespace (nsenter --net), in the same run, against a small node HTTP
# server in the sandbox. Rewrites the section of docs/performance.md between the BEGIN/END
# PREVIEW FIGURES markers. Usage: bench/preview.sh  (env: BUILD, IMAGES, DURATION (s),
# CONNS). Needs wrk (scripts/deps.sh) and root.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$src/build}
IMAGES=${IMAGES:-/var/lib/cella/images}
DURATION=${DURATION:-10}
CONNS=${CONNS:-16}
PORT=8080
command -v wrk >/dev/null || { echo "preview.sh: wrk is not installed (scripts/deps.sh)" >&2; exit 1; }
cmake --build "$BUILD" --target cellad cella-init >/dev/null

. "$src/bench/lib.sh"
bench_sandbox pvbench
dport=${url##*:}

api() { curl -sS -f -X "$1" "$url$2" "${@:3}"; }
cat >"$tmp/server.js" <<'JS'
require('http').createServer((req, res) => {
  res.setHeader('Content-Type', 'text/plain');
  res.end('hello from the sandbox\n');
}).listen(+process.argv[2], '127.0.0.1');
JS
api PUT "/v1/sandboxes/pvbench/files?path=/workspace/server.js" --data-binary @"$tmp/server.js" \
        >/dev/null
api POST /v1/sandboxes/pvbench/processes -H 'Content-Type: application/json' \
        -d "{\"command\":\"node /workspace/server.js $PORT\",\"processId\":\"web\"}" >/dev/null
api POST /v1/sandboxes/pvbench/processes/web/waitForPort -H 'Content-Type: application/json' \
        -d "{\"port\":$PORT,\"timeout\":30000}" >/dev/null
purl=$(api POST /v1/sandboxes/pvbench/ports -H 'Content-Type: application/json' \
        -d "{\"port\":$PORT}" | jq -r .url)
phost=${purl#http://}
phost=${phost%/}
# The host pid of the server: its network namespace is the sandbox's.
spid=$(pgrep -f "node /workspace/server.js $PORT" | head -n 1)
[ -n "$spid" ] || { echo "preview.sh: server not found" >&2; exit 1; }

# wrk --latency output -> "req/s p50 p99" (latencies in ms)
parse() {
        awk '
        function ms(v) {
                if (v ~ /us$/) { sub(/us$/, "", v); return v / 1000 }
                if (v ~ /ms$/) { sub(/ms$/, "", v); return v + 0 }
                if (v ~ /s$/) { sub(/s$/, "", v); return v * 1000 }
                return v
        }
        $1 == "50%" { p50 = ms($2) }
        $1 == "99%" { p99 = ms($2) }
        $1 == "Requests/sec:" { rps = $2 }
        END { printf "%.0f %.3f %.3f\n", rps, p50, p99 }'
}
wrkargs=(-t 2 -c "$CONNS" -d "${DURATION}s" --latency)
curl -sS -f -H "Host: $phost" "$url/" >/dev/null
nsenter --net="/proc/$spid/ns/net" curl -sS -f "http://127.0.0.1:$PORT/" >/dev/null
direct=$(nsenter --net="/proc/$spid/ns/net" wrk "${wrkargs[@]}" "http://127.0.0.1:$PORT/" | parse)
proxy=$(wrk "${wrkargs[@]}" -H "Host: $phost" "$url/" | parse)
read -r drps dp50 dp99 <<<"$direct"
read -r prps pp50 pp99 <<<"$proxy"
ratio=$(awk -v a="$prps" -v b="$drps" 'BEGIN { printf "%.0f", 100 * a / b }')

out=$tmp/figures
{
        echo "Measured $(date -u '+%Y-%m-%d %H:%M UTC') on $(nproc) CPUs, kernel $(uname -r):" \
                "wrk -t 2 -c $CONNS -d ${DURATION}s, a node HTTP server in the sandbox" \
                "(23-byte body)."
        echo
        echo "| path | req/s | p50 (ms) | p99 (ms) |"
        echo "|---|---|---|---|"
        echo "| direct (wrk in the sandbox's netns, 127.0.0.1:$PORT) | $drps | $dp50 | $dp99 |"
        echo "| preview URL (through cellad's proxy) | $prps | $pp50 | $pp99 |"
        echo
        echo "Preview throughput: $ratio % of direct (target >= 70 %)."
} >"$out"
cat "$out"
bench_figures "PREVIEW FIGURES" <"$out"
