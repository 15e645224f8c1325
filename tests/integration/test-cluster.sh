#!/bin/bash
# Three cellad nodes on a three-member etcd cluster (docs/cluster.md, decision 0055), all on
# loopback ports of this run, each etcd member with its own data dir under the run's temp
# dir, each node with its own data dir, port and network range (a /20 of the run's /18).
# Checks: the nodes register and appear in GET /v1/cluster/nodes; a name is owned by the
# node that made it, and another node refuses it with 409 SANDBOX_ON_OTHER_NODE naming the
# owner; 50 clients racing on one name through the three nodes get one owner and one
# sandbox; GET /v1/sandboxes on any node lists every node's, each with its node, and a
# tenant's key sees its tenant's alone; a node killed with SIGKILL leaves the list within
# its lease's TTL and comes back when restarted; etcd losing one member keeps the cluster
# working, losing its quorum makes new names fail with 503 CLUSTER_UNAVAILABLE while
# existing sandboxes keep serving, and the nodes register again when it is back; the etcd
# series of /metrics parse; a node without --cluster has no cluster. lib.sh checks node A
# at exit, the hook below B, C and the plain daemon D.
. "$(dirname "$0")/lib.sh"
command -v etcd >/dev/null || skip "needs etcd (Debian's etcd-server)"
command -v python3 >/dev/null || skip "needs python3"
# Debian's python3-prometheus-client is in the system python3 (as in test-metrics.sh)
PY=
for p in python3 /usr/bin/python3; do
        if "$p" -c 'import prometheus_client' 2>/dev/null; then
                PY=$p
                break
        fi
done
[ -n "$PY" ] || skip "needs python3-prometheus-client (scripts/deps.sh)"

CELLA_TOKEN=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
export CELLA_TOKEN

free_port() {
        python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# ---- etcd: three members ----
declare -A E
ETCD_INITIAL=
for m in 1 2 3; do
        E[$m.client]=$(free_port)
        E[$m.peer]=$(free_port)
        ETCD_INITIAL+="${ETCD_INITIAL:+,}e$m=http://127.0.0.1:${E[$m.peer]}"
done
ETCD_ENDPOINTS=http://127.0.0.1:${E[1.client]},http://127.0.0.1:${E[2.client]},http://127.0.0.1:${E[3.client]}

start_etcd() { # member
        local m=$1
        etcd --name "e$m" --data-dir "$IT_TMP/etcd$m" \
                --listen-client-urls "http://127.0.0.1:${E[$m.client]}" \
                --advertise-client-urls "http://127.0.0.1:${E[$m.client]}" \
                --listen-peer-urls "http://127.0.0.1:${E[$m.peer]}" \
                --initial-advertise-peer-urls "http://127.0.0.1:${E[$m.peer]}" \
                --initial-cluster "$ETCD_INITIAL" --initial-cluster-state new \
                --initial-cluster-token "cella-it-$IT_RUN" >>"$IT_TMP/etcd$m.log" 2>&1 &
        E[$m.pid]=$!
}
stop_etcd() { # member
        [ -n "${E[$1.pid]:-}" ] || return 0
        kill -KILL "${E[$1.pid]}" 2>/dev/null || true
        wait "${E[$1.pid]}" 2>/dev/null || true
        E[$1.pid]=
}
# etcd_ok member: the member answers a linearizable read.
etcd_ok() {
        curl -sf -m 3 -X POST -d '{"key":"eA=="}' "http://127.0.0.1:${E[$1.client]}/v3/kv/range" >/dev/null
}

# ---- cellad nodes ----
declare -A D
save_daemon() {
        D[$1.pid]=$CELLAD_PID D[$1.url]=$CELLA_URL D[$1.log]=$CELLAD_LOG
        D[$1.cg]=$IT_CGPARENT D[$1.if]=$IT_IFPREFIX D[$1.range]=$IT_RANGE
        D[$1.uid0]=$IT_UID_FIRST D[$1.uid1]=$IT_UID_LAST
}
use_daemon() {
        CELLAD_PID=${D[$1.pid]} CELLA_URL=${D[$1.url]} CELLAD_LOG=${D[$1.log]}
        IT_CGPARENT=${D[$1.cg]} IT_IFPREFIX=${D[$1.if]} IT_RANGE=${D[$1.range]}
        IT_UID_FIRST=${D[$1.uid0]} IT_UID_LAST=${D[$1.uid1]}
        export CELLA_URL
}
# subrange N: the Nth /20 of this run's /18.
subrange() {
        local base=${IT_NETRANGE%/18}
        local a b c _
        IFS=. read -r a b c _ <<<"$base"
        echo "$a.$b.$((c + $1 * 16)).0/20"
}
# start_node NAME INDEX [extra args]: a cluster node on a fixed port (its advertise URL).
start_node() {
        local n=$1 i=$2
        shift 2
        local port=${D[$n.port]:-$(free_port)}
        D[$n.port]=$port
        CELLAD_LOG=$IT_TMP/cellad-$n.log
        CELLAD_PID=
        start_cellad --pool 0 --data-dir "$IT_TMP/data-$n" --listen "127.0.0.1:$port" \
                --network-range "$(subrange "$i")" --cluster "etcd=$ETCD_ENDPOINTS" --node "$n" \
                --advertise "http://127.0.0.1:$port" "$@"
        save_daemon "$n"
}

# stop_extra NAME: what lib.sh does for A, for another daemon of the run.
stop_extra() {
        [ -n "${D[$1.log]:-}" ] || return 0
        use_daemon "$1"
        local cellad=$CELLAD_PID left
        stop_cellad
        CELLAD_PID=$cellad
        left=$(wait_empty run_pids) || { echo "LEAK: processes of daemon $1: $left" >&2; IT_FAILED_CLEANUP=1; }
        CELLAD_PID=
        left=$(wait_empty run_cgroups) || { echo "LEAK: cgroups of daemon $1: $left" >&2; IT_FAILED_CLEANUP=1; }
        left=$(wait_empty run_links) || { echo "LEAK: veths of daemon $1: $left" >&2; IT_FAILED_CLEANUP=1; }
        rm -f "/run/cella/instances/$IT_CGPARENT"
}
it_cleanup_hook() {
        for n in b c d; do
                stop_extra $n
        done
        use_daemon a
        # The etcd members are jobs of this shell: lib.sh's cleanup has killed them before
        # this hook (the nodes then stop on their own sandboxes alone); their data dirs go
        # with the run's temp dir.
        for m in 1 2 3; do stop_etcd $m; done
        return 0
}

# ---- start ----
for m in 1 2 3; do start_etcd $m; done
for i in $(seq 1 300); do
        etcd_ok 1 && etcd_ok 2 && etcd_ok 3 && break
        sleep 0.1
done
etcd_ok 1 || fail "etcd not up after 30 s: $(tail -n 5 "$IT_TMP/etcd1.log")"
info "etcd members at $ETCD_ENDPOINTS"

it_net_range
start_node c 2
start_node b 1
start_node a 0

# nodes NODE_URL: the names of the live nodes, sorted, one line.
nodes_of() {
        CELLA_URL=${D[$1.url]} api GET /v1/cluster/nodes | jq -r '[.nodes[].node] | sort | join(",")'
}
wait_nodes() { # daemon expected
        local i got=
        for i in $(seq 1 150); do
                got=$(nodes_of "$1" 2>/dev/null) || got=
                [ "$got" = "$2" ] && return 0
                sleep 0.1
        done
        fail "nodes seen from $1: expected [$2], got [$got]"
}
info "membership"
wait_nodes a a,b,c
wait_nodes c a,b,c
use_daemon a
api GET /v1/cluster/nodes >/dev/null
expect_status 200
assert_eq "true" "$(body '.nodes[] | select(.node == "a") | .self')" "a is self on a"
assert_eq "${D[b.url]}" "$(body '.nodes[] | select(.node == "b") | .advertise')" "b's advertise"
assert_eq "0" "$(body '.nodes[] | select(.node == "b") | .sandboxes')" "b's load"
assert_contains "$(body '.nodes[0].images | join(",")')" "default" "images published"
# a tenant's key is refused: the admin's route
api_json POST /v1/keys '{"tenant":"acme"}'
expect_status 201
KEY_A=$(body .key)
CELLA_TOKEN=$KEY_A api GET /v1/cluster/nodes >/dev/null
expect_status 403 PERMISSION_DENIED

info "ownership of names"
X=$(sbx x)
api PUT "/v1/sandboxes/$X" >/dev/null
expect_status 201
use_daemon b
api PUT "/v1/sandboxes/$X" >/dev/null
expect_status 409 SANDBOX_ON_OTHER_NODE
assert_contains "$(body .message)" "node 'a'" "the owner is named"
api POST "/v1/sandboxes/$X/exec" -H 'Content-Type: application/json' -d '{"command":"true"}' >/dev/null
expect_status 409 SANDBOX_ON_OTHER_NODE
Y=$(sbx y)
api PUT "/v1/sandboxes/$Y" >/dev/null
expect_status 201
# the load is published (coalesced) with b's new sandbox
for i in $(seq 1 100); do
        [ "$(CELLA_URL=${D[a.url]} api GET /v1/cluster/nodes | jq -r '.nodes[] | select(.node == "b") | .sandboxes')" = 1 ] && break
        sleep 0.1
done
assert_eq "1" "$(CELLA_URL=${D[a.url]} api GET /v1/cluster/nodes | jq -r '.nodes[] | select(.node == "b") | .sandboxes')" "b's load after a create"

info "the cluster's list from every node"
for n in a b c; do
        use_daemon $n
        api GET /v1/sandboxes >/dev/null
        expect_status 200
        assert_eq "a" "$(body ".sandboxes[] | select(.id == \"$X\") | .node")" "$X's node seen from $n"
        assert_eq "b" "$(body ".sandboxes[] | select(.id == \"$Y\") | .node")" "$Y's node seen from $n"
done
use_daemon a
api GET /v1/sandboxes >/dev/null
assert_eq "running" "$(body ".sandboxes[] | select(.id == \"$X\") | .state")" "a's own in full"

info "a tenant sees its own tenant's, on every node"
use_daemon b
api_json POST /v1/keys '{"tenant":"acme"}'
expect_status 201
KEY_B=$(body .key)
T=$(sbx t)
CELLA_TOKEN=$KEY_B api PUT "/v1/sandboxes/$T" >/dev/null
expect_status 201
use_daemon a
CELLA_TOKEN=$KEY_A api GET /v1/sandboxes >/dev/null
expect_status 200
assert_eq "$T" "$(body '[.sandboxes[].id] | join(",")')" "acme's list on a: its one sandbox, on b"
assert_eq "b" "$(body '.sandboxes[0].node')" "acme's sandbox's node"
assert_eq "acme" "$(body '.sandboxes[0].tenant')" "acme's sandbox's tenant"
api GET /v1/sandboxes >/dev/null
assert_eq "" "$(body ".sandboxes[] | select(.id == \"$T\" and .tenant == null) | .id")" "acme's not the default tenant's"
api GET "/v1/sandboxes?tenant=acme" >/dev/null
assert_eq "$T" "$(body '[.sandboxes[].id] | join(",")')" "the admin's ?tenant="
# the same name in another tenant is another name
CELLA_TOKEN=$KEY_A api PUT "/v1/sandboxes/$X" >/dev/null
expect_status 201

info "50 clients racing on one name through three nodes"
Z=$(sbx z)
mkdir -p "$IT_TMP/race"
pids=()
for i in $(seq 1 50); do
        n=$(echo "a b c" | cut -d' ' -f$((i % 3 + 1)))
        curl -sS -o "$IT_TMP/race/$i.body" -w "%{http_code} $n\n" -X PUT \
                -H "Authorization: Bearer $CELLA_TOKEN" -m 120 \
                "${D[$n.url]}/v1/sandboxes/$Z" >"$IT_TMP/race/$i.status" &
        pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || fail "a racing client failed"; done
winners=$(cat "$IT_TMP/race/"*.status | awk '$1 == 200 || $1 == 201 {print $2}' | sort -u)
losers=$(cat "$IT_TMP/race/"*.status | awk '$1 == 409 {print $2}' | sort -u | tr '\n' ' ')
others=$(cat "$IT_TMP/race/"*.status | awk '$1 != 200 && $1 != 201 && $1 != 409' | head -n 3)
assert_eq "" "$others" "every racing client got 200, 201 or 409"
assert_eq "1" "$(echo "$winners" | grep -c .)" "one owner (winners: $winners)"
info "owner of the raced name: $winners; refused by: $losers"
assert_not_contains "$losers" "$winners" "the owner refused none"
assert_eq "1" "$(cat "$IT_TMP/race/"*.status | grep -c '^201 ')" "one create"
for n in a b c; do
        use_daemon $n
        api GET "/v1/sandboxes/$Z" >/dev/null
        if [ "$n" = "$winners" ]; then expect_status 200; else expect_status 404 SANDBOX_NOT_FOUND; fi
done
use_daemon c
api GET /v1/sandboxes >/dev/null
assert_eq "$winners" "$(body ".sandboxes[] | select(.id == \"$Z\") | .node")" "the list's owner of $Z"

info "a killed node leaves within its lease, and comes back"
K=$(sbx k)
use_daemon c
api PUT "/v1/sandboxes/$K" >/dev/null
expect_status 201
kill -KILL "${D[c.pid]}"
wait "${D[c.pid]}" 2>/dev/null || true
wait_nodes a a,b
use_daemon a
api GET /v1/sandboxes >/dev/null
assert_eq "" "$(body ".sandboxes[] | select(.id == \"$K\") | .id")" "c's name released with its lease"
start_node c 2
wait_nodes a a,b,c
# c re-claims the names of the sandboxes it still has
for i in $(seq 1 100); do
        [ "$(CELLA_URL=${D[a.url]} api GET /v1/sandboxes | jq -r ".sandboxes[] | select(.id == \"$K\") | .node")" = c ] && break
        sleep 0.1
done
assert_eq "c" "$(CELLA_URL=${D[a.url]} api GET /v1/sandboxes | jq -r ".sandboxes[] | select(.id == \"$K\") | .node")" "c re-claimed $K"
use_daemon b
api PUT "/v1/sandboxes/$K" >/dev/null
expect_status 409 SANDBOX_ON_OTHER_NODE

info "etcd losing one member"
stop_etcd 3
use_daemon a
W=$(sbx w)
api PUT "/v1/sandboxes/$W" -m 60 >/dev/null
expect_status 201
use_daemon b
api GET /v1/sandboxes -m 60 >/dev/null
expect_status 200
assert_eq "a" "$(body ".sandboxes[] | select(.id == \"$W\") | .node")" "a new name with two members"

info "etcd without a quorum"
stop_etcd 2
use_daemon a
V=$(sbx v)
api PUT "/v1/sandboxes/$V" -m 90 >/dev/null
expect_status 503 CLUSTER_UNAVAILABLE
api GET "/v1/sandboxes/$V" >/dev/null
expect_status 404 SANDBOX_NOT_FOUND
assert_eq "ok" "$(run_in "$X" 'echo ok')" "an existing sandbox serves"
api GET /v1/sandboxes -m 90 >/dev/null
expect_status 200
assert_eq "true" "$(body .partial)" "the list says it is partial"
assert_eq "a" "$(body ".sandboxes[] | select(.id == \"$X\" and .tenant == null) | .node")" "the node's own are listed"
api GET /v1/cluster/nodes -m 90 >/dev/null
expect_status 503 CLUSTER_UNAVAILABLE

info "etcd back"
start_etcd 2
start_etcd 3
for i in $(seq 1 300); do
        etcd_ok 1 && etcd_ok 2 && etcd_ok 3 && break
        sleep 0.1
done
wait_nodes a a,b,c
use_daemon a
api PUT "/v1/sandboxes/$V" -m 60 >/dev/null
expect_status 201

info "/metrics: the etcd client's series"
api GET /metrics >"$IT_TMP/metrics"
expect_status 200
"$PY" - "$IT_TMP/metrics" <<'EOF' || fail "/metrics does not parse or lacks the etcd series"
import sys
from prometheus_client.parser import text_string_to_metric_families
fams = {f.name: f for f in text_string_to_metric_families(open(sys.argv[1]).read())}
req = {(s.labels["op"], s.labels["result"]): s.value for s in fams["cella_etcd_requests"].samples
       if s.name == "cella_etcd_requests_total"}
assert req[("txn", "ok")] >= 3, req
assert req[("lease_keepalive", "ok")] >= 1, req
assert req[("txn", "error")] >= 1, req  # the placement without a quorum
assert fams["cella_etcd_up"].samples[0].value == 1
assert fams["cella_cluster_registered"].samples[0].value == 1
claims = {s.labels["result"]: s.value for s in fams["cella_cluster_claims"].samples}
assert claims["won"] >= 3, claims
EOF

info "a node without --cluster has no cluster"
CELLAD_LOG=$IT_TMP/cellad-d.log
CELLAD_PID=
start_cellad --pool 0 --data-dir "$IT_TMP/data-d" --network-range "$(subrange 3)"
save_daemon d
api GET /v1/cluster/nodes >/dev/null
expect_status 404 NOT_FOUND
api GET /metrics >"$IT_TMP/metrics-d"
assert_not_contains "$(cat "$IT_TMP/metrics-d")" "cella_etcd_" "no etcd series"
api PUT "/v1/sandboxes/$X" >/dev/null
expect_status 201
api GET /v1/sandboxes >/dev/null
assert_eq "null" "$(body '.sandboxes[0].node')" "no node in a single daemon's list"
use_daemon a

info "ok"
