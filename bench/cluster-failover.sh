#!/bin/bash
# Failover time of a cluster (docs/decisions/0057): tests/integration/test-cluster-failover.sh
# run with IT_FAILOVER_ROUNDS=RUNS (3 etcd members, 3 cellad nodes, a shared S3 backup
# store on loopback): each round a node with a sandbox whose /workspace was backed up is
# killed with SIGKILL, and another node is asked for that name (PUT, every 100 ms) until it
# answers it, restored; the time from the kill to that answer. It is the node's lease TTL
# (5 s) less the part of it that had run since its last keepalive, plus the claim, the
# start and the restore. p50/p95 into docs/performance.md.
# Usage: bench/cluster-failover.sh (env: BUILD, IMAGES, RUNS). Needs root, etcd, node.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$src/build}
IMAGES=${IMAGES:-/var/lib/cella/images}
RUNS=${RUNS:-5}
cmake --build "$BUILD" --target cellad cella-init cella-archive >/dev/null

. "$src/bench/lib.sh"
pct() { # P: the Pth percentile (nearest rank) of the numbers on stdin
        sort -n | awk -v p="$1" '{v[NR]=$1} END {r=int((p*NR+99)/100); if (r<1) r=1; print v[r]}'
}
rc=0
CELLA_BUILD=$BUILD CELLA_IMAGES=$IMAGES IT_FAILOVER_ROUNDS=$RUNS IT_FAILOVER_TIMES=$tmp/times \
        bash "$src/tests/integration/test-cluster-failover.sh" >"$tmp/run.log" 2>&1 || rc=$?
if [ "$rc" -ne 0 ]; then
        tail -n 30 "$tmp/run.log" >&2
        [ "$rc" -eq 77 ] && { echo "cluster-failover: skipped" >&2; exit 0; }
        exit 1
fi
n=$(wc -l <"$tmp/times")
{
        echo "Measured $(date -u '+%Y-%m-%d %H:%M UTC') on $(nproc) CPUs, kernel $(uname -r)," \
                "$n kills; 3 etcd members and 3 nodes on loopback, backups on a local S3 server" \
                "(s3rver); lease TTL 5 s, keepalive every 1.5 s, the client asking every 100 ms."
        echo
        echo "| | p50 (ms) | p95 (ms) | runs (ms) |"
        echo "|---|---|---|---|"
        echo "| kill -9 of the owner to the first answer on another node (restored) |" \
                "$(pct 50 <"$tmp/times") | $(pct 95 <"$tmp/times") | $(tr '\n' ' ' <"$tmp/times")|"
} | tee "$tmp/figures" | bench_figures "CLUSTER FAILOVER FIGURES"
cat "$tmp/figures"
