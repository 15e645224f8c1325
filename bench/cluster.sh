#!/bin/bash
# Cluster benchmark (docs/cluster.md, decision 0056), on loopback: a one-member etcd and two
# cellad nodes signing node-to-node requests with one secret, plus a single cellad without
# --cluster, all started here. Measured in the same run, with one keep-alive client
# (python's http.client) for every path:
#   * an exec (`true`, JSON answer) sent to the node that has the sandbox (local) and to
#     the other node (forwarded: relayed to the owner over a reused connection), N each,
#     interleaved; p50/p95 of both and their difference (target <= +0.3 ms);
#   * a new name's first PUT (--pool 0: a container is built) through a node of the cluster
#     (the owner lookup, placement and its claim in etcd, maybe a relay) and through the
#     single cellad: median of M each (time to interactive with the cluster vs alone).
# Rewrites the section of docs/performance.md between the BEGIN/END CLUSTER FIGURES markers.
# Usage: bench/cluster.sh  (env: BUILD, IMAGES, N (default 400), M (default 15)). Needs etcd
# (Debian's etcd-server) and root.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$src/build}
IMAGES=${IMAGES:-/var/lib/cella/images}
N=${N:-400}
M=${M:-15}
command -v etcd >/dev/null || { echo "cluster.sh: etcd is not installed (scripts/deps.sh)" >&2; exit 1; }
cmake --build "$BUILD" --target cellad cella-init >/dev/null

. "$src/bench/lib.sh" # $tmp, fig, bench_figures (its own cellad is not used)
pids=()
cleanup() {
        local p
        for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
        for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
        rm -rf "$tmp"
}
trap cleanup EXIT
free_port() {
        python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
trap cleanup EXIT

ec=$(free_port)
ep=$(free_port)
etcd --name e1 --data-dir "$tmp/etcd" --listen-client-urls "http://127.0.0.1:$ec" \
        --advertise-client-urls "http://127.0.0.1:$ec" --listen-peer-urls "http://127.0.0.1:$ep" \
        --initial-advertise-peer-urls "http://127.0.0.1:$ep" \
        --initial-cluster "e1=http://127.0.0.1:$ep" >"$tmp/etcd.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do
        curl -sf -m 2 -X POST -d '{"key":"eA=="}' "http://127.0.0.1:$ec/v3/kv/range" >/dev/null && break
        sleep 0.1
done
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/secret"
chmod 600 "$tmp/secret"

# node NAME PORT [args]: a cellad on loopback port PORT; its URL in url_NAME.
node() {
        local n=$1 port=$2
        shift 2
        "$BUILD/cellad" --listen "127.0.0.1:$port" --data-dir "$tmp/data-$n" --images "$IMAGES" \
                --pool 0 --log-level warn "$@" >"$tmp/$n.log" 2>&1 &
        pids+=($!)
        for _ in $(seq 1 300); do
                curl -sf "http://127.0.0.1:$port/v1/health" >/dev/null 2>&1 && break
                sleep 0.1
        done
        printf -v "url_$n" '%s' "http://127.0.0.1:$port"
}
for n in a b; do
        port=$(free_port)
        node $n "$port" --cluster "etcd=http://127.0.0.1:$ec" --node $n \
                --advertise "http://127.0.0.1:$port" --cluster-secret-file "$tmp/secret"
done
node single "$(free_port)"
for _ in $(seq 1 100); do
        [ "$(curl -sf "$url_a/v1/cluster/nodes" | jq '.nodes | length')" = 2 ] && break
        sleep 0.1
done

figures=$(python3 - "$url_a" "$url_b" "$url_single" "$N" "$M" <<'PYEOF'
import http.client, json, sys, time, urllib.parse

url_a, url_b, url_single, n, m = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])

def conn(u):
    p = urllib.parse.urlparse(u)
    return http.client.HTTPConnection(p.hostname, p.port)

def call(c, method, path, body=None):
    hdr = {"Content-Type": "application/json"} if body is not None else {}
    t = time.perf_counter()
    c.request(method, path, body=json.dumps(body) if body is not None else None, headers=hdr)
    r = c.getresponse()
    data = r.read()
    dt = (time.perf_counter() - t) * 1000
    if r.status >= 300:
        raise SystemExit("%s %s: %d %s" % (method, path, r.status, data[:200]))
    return dt, data

def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]

ca, cb, cs = conn(url_a), conn(url_b), conn(url_single)
call(ca, "PUT", "/v1/sandboxes/benchfwd", {"keepAlive": True})
nodes = json.loads(call(ca, "GET", "/v1/sandboxes")[1])["sandboxes"]
owner = [s["node"] for s in nodes if s["id"] == "benchfwd"][0]
local, remote = (ca, cb) if owner == "a" else (cb, ca)
ex = {"command": "true"}
for _ in range(30):  # warm both paths (connections, the owner cache)
    call(local, "POST", "/v1/sandboxes/benchfwd/exec", ex)
    call(remote, "POST", "/v1/sandboxes/benchfwd/exec", ex)
lt, rt = [], []
for _ in range(n):
    lt.append(call(local, "POST", "/v1/sandboxes/benchfwd/exec", ex)[0])
    rt.append(call(remote, "POST", "/v1/sandboxes/benchfwd/exec", ex)[0])
call(ca, "DELETE", "/v1/sandboxes/benchfwd")

# a new name's first PUT: through a (the cluster: lookup, placement, claim, maybe a relay)
# and on the single cellad, interleaved
ct, st = [], []
placed = {"a": 0, "b": 0}
for i in range(m):
    ct.append(call(ca, "PUT", "/v1/sandboxes/benchnew%d" % i, {})[0])
    st.append(call(cs, "PUT", "/v1/sandboxes/benchnew%d" % i, {})[0])
nodes = json.loads(call(ca, "GET", "/v1/sandboxes")[1])["sandboxes"]
for s in nodes:
    if s["id"].startswith("benchnew"):
        placed[s["node"]] += 1
for i in range(m):
    call(ca, "DELETE", "/v1/sandboxes/benchnew%d" % i)
    call(cs, "DELETE", "/v1/sandboxes/benchnew%d" % i)
print("local_p50=%.3f local_p95=%.3f fwd_p50=%.3f fwd_p95=%.3f ctti=%.1f stti=%.1f pa=%d pb=%d"
      % (pct(lt, 50), pct(lt, 95), pct(rt, 50), pct(rt, 95), pct(ct, 50), pct(st, 50),
         placed["a"], placed["b"]))
PYEOF
)
echo "$figures" >&2
lp50=$(fig "$figures" local_p50)
lp95=$(fig "$figures" local_p95)
fp50=$(fig "$figures" fwd_p50)
fp95=$(fig "$figures" fwd_p95)
d50=$(awk -v a="$fp50" -v b="$lp50" 'BEGIN { printf "%+.3f", a - b }')
d95=$(awk -v a="$fp95" -v b="$lp95" 'BEGIN { printf "%+.3f", a - b }')
ctti=$(fig "$figures" ctti)
stti=$(fig "$figures" stti)

out=$tmp/figures
{
        echo "Measured $(date -u '+%Y-%m-%d %H:%M UTC') on $(nproc) CPUs, kernel $(uname -r):" \
                "one etcd member and two nodes on loopback, one keep-alive client (python" \
                "http.client); $N execs of \`true\` each way, interleaved; $M new names each way" \
                "(--pool 0)."
        echo
        echo "| path | p50 (ms) | p95 (ms) |"
        echo "|---|---|---|"
        echo "| exec on the sandbox's node (local) | $lp50 | $lp95 |"
        echo "| exec through the other node (forwarded) | $fp50 | $fp95 |"
        echo "| forwarding's cost | $d50 | $d95 |"
        echo
        echo "Forwarded exec: $d50 ms at p50 (target <= +0.3 ms)."
        echo
        echo "| a new name's first PUT | median (ms) |"
        echo "|---|---|"
        echo "| through a cluster node (lookup, placement, claim, relay when placed elsewhere;" \
                "$(fig "$figures" pa) on a, $(fig "$figures" pb) on b) | $ctti |"
        echo "| single cellad | $stti |"
} >"$out"
cat "$out"
bench_figures "CLUSTER FIGURES" <"$out"
