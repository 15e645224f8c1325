#!/bin/bash
# Three cellad nodes on a three-member etcd cluster (docs/cluster.md, decisions 0055 and
# 0056), each node in a network namespace of its own that this run makes, with its own
# address on a bridge in a fourth namespace (the "client" one: the etcd members listen
# there, and every request of this script is made from there); each node with its own data
# dir and network range (a /20 of the run's /18), all signing node-to-node requests with
# one cluster secret. Checks: the nodes register and appear in GET /v1/cluster/nodes; a
# name created through node A is served through B and C: exec (JSON and its SSE stream), a
# file uploaded and downloaded (checksums), a terminal WebSocket, a preview URL of a python
# http.server; 300 new names through random nodes spread across the three within 20 %; 50
# clients racing on one name through the three nodes get one sandbox; a forged, malformed
# or misplaced authenticator is refused; a tenant's key reaches its sandbox on another node
# and another tenant's name is 404 as on one node; GET /v1/sandboxes on any node lists
# every node's, each with its node; a node killed with SIGKILL leaves the list within its
# lease's TTL and comes back when restarted; etcd losing one member keeps the cluster
# working, losing its quorum makes new names fail with 503 CLUSTER_UNAVAILABLE while
# existing sandboxes keep serving, and the nodes register again when it is back; the etcd
# and forwarding series of /metrics parse; a node without --cluster has no cluster. The hook
# below stops every node and checks each namespace before it goes.
. "$(dirname "$0")/lib.sh"
command -v etcd >/dev/null || skip "needs etcd (Debian's etcd-server)"
command -v nsenter >/dev/null || skip "needs nsenter (util-linux)"
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
PC=$CELLA_BUILD/tests/pty-client

# ---- the network: a namespace per node, a bridge in the client's ----
. "$(dirname "$0")/lib-daemons.sh"
it_net_range
# subrange N (lib-daemons.sh): nodes a, b, c: 0, 1, 2; the plain daemon: 3.
# The nodes' own /24: the last of the fourth /20 (the plain daemon's sandboxes start at its
# first, and run on the host, where this one does not exist).
NET=$(subrange 3)
NET=${NET%.0/20}
NET=${NET%.*}.$((${NET##*.} + 15))
NS_CL=cella-$IT_RUN-cl
declare -A NS=([a]=cella-$IT_RUN-a [b]=cella-$IT_RUN-b [c]=cella-$IT_RUN-c)
declare -A ADDR=([a]=$NET.1 [b]=$NET.2 [c]=$NET.3)
CL_ADDR=$NET.254
IT_CURL_NS=
# Every curl of this script (lib.sh's api too) runs in the client's namespace while a
# node is the daemon in use (use_daemon sets IT_CURL_NS; the plain daemon is on the host).
curl() {
        if [ -n "$IT_CURL_NS" ]; then
                nsenter --net="/run/netns/$IT_CURL_NS" curl "$@"
        else
                command curl "$@"
        fi
}
in_cl() { nsenter --net="/run/netns/$NS_CL" "$@"; }
ip netns add "$NS_CL"
NETNS_MADE="$NS_CL"
ip -n "$NS_CL" link set lo up
ip -n "$NS_CL" link add br0 type bridge
ip -n "$NS_CL" addr add "$CL_ADDR/24" dev br0
ip -n "$NS_CL" link set br0 up
for n in a b c; do
        ip netns add "${NS[$n]}"
        NETNS_MADE+=" ${NS[$n]}"
        ip -n "${NS[$n]}" link set lo up
        ip -n "$NS_CL" link add "v$n" type veth peer name eth0 netns "${NS[$n]}"
        ip -n "$NS_CL" link set "v$n" master br0 up
        ip -n "${NS[$n]}" addr add "${ADDR[$n]}/24" dev eth0
        ip -n "${NS[$n]}" link set eth0 up
done
IT_CURL_NS=$NS_CL
info "nodes at ${ADDR[a]}, ${ADDR[b]}, ${ADDR[c]}; the client and etcd at $CL_ADDR"

# ---- the cluster's secret ----
SECRET=$IT_TMP/cluster-secret
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$SECRET"
chmod 600 "$SECRET"

# ---- etcd: three members, in the client's namespace ----
declare -A E
ETCD_INITIAL=
for m in 1 2 3; do
        E[$m.client]=$((2377 + 2 * m))
        E[$m.peer]=$((2378 + 2 * m))
        ETCD_INITIAL+="${ETCD_INITIAL:+,}e$m=http://$CL_ADDR:${E[$m.peer]}"
done
ETCD_ENDPOINTS=http://$CL_ADDR:${E[1.client]},http://$CL_ADDR:${E[2.client]},http://$CL_ADDR:${E[3.client]}

start_etcd() { # member
        local m=$1
        # nsenter itself, not in_cl: a function in the background is a subshell, and $! would
        # be its pid, not etcd's (nsenter execs etcd)
        nsenter --net="/run/netns/$NS_CL" etcd --name "e$m" --data-dir "$IT_TMP/etcd$m" \
                --listen-client-urls "http://$CL_ADDR:${E[$m.client]}" \
                --advertise-client-urls "http://$CL_ADDR:${E[$m.client]}" \
                --listen-peer-urls "http://$CL_ADDR:${E[$m.peer]}" \
                --initial-advertise-peer-urls "http://$CL_ADDR:${E[$m.peer]}" \
                --initial-cluster "$ETCD_INITIAL" --initial-cluster-state new \
                --initial-cluster-token "cella-it-$IT_RUN" >>"$IT_TMP/etcd$m.log" 2>&1 &
        E[$m.pid]=$!
        # lib.sh's cleanup leaves it to the hook, which stops the nodes first (with etcd
        # there, they list and release their names at once)
        IT_CELLADS="$IT_CELLADS ${E[$m.pid]}"
}
stop_etcd() { # member
        [ -n "${E[$1.pid]:-}" ] || return 0
        kill -KILL "${E[$1.pid]}" 2>/dev/null || true
        wait "${E[$1.pid]}" 2>/dev/null || true
        E[$1.pid]=
}
# etcd_ok member: the member answers a linearizable read.
etcd_ok() {
        in_cl curl -sf -m 3 -X POST -d '{"key":"eA=="}' "http://$CL_ADDR:${E[$1.client]}/v3/kv/range" >/dev/null
}

# ---- cellad nodes ----
# start_node NAME INDEX [extra args]: a cluster node in its namespace, on its address.
start_node() {
        local n=$1 i=$2
        shift 2
        CELLAD_LOG=$IT_TMP/cellad-$n.log
        CELLAD_PID=
        IT_CURL_NS=$NS_CL
        IT_CELLAD_WRAP="nsenter --net=/run/netns/${NS[$n]}" \
                start_cellad --pool 0 --data-dir "$IT_TMP/data-$n" --listen "${ADDR[$n]}:7070" \
                --network-range "$(subrange "$i")" --cluster "etcd=$ETCD_ENDPOINTS" --node "$n" \
                --advertise "http://${ADDR[$n]}:7070" --cluster-secret-file "$SECRET" "$@"
        save_daemon "$n"
}

it_cleanup_hook() {
        local n
        for n in b c d a; do
                stop_daemon $n "${NS[$n]:-}"
        done
        # The etcd members, once the nodes are gone (their data dirs go with the run's temp
        # dir).
        for m in 1 2 3; do stop_etcd $m; done
        for n in ${NETNS_MADE:-}; do
                ip netns del "$n" 2>/dev/null || { echo "LEAK: netns $n" >&2; IT_FAILED_CLEANUP=1; }
        done
        if ip netns list | grep -q "cella-$IT_RUN-"; then
                echo "LEAK: network namespaces of this run: $(ip netns list | grep "cella-$IT_RUN-")" >&2
                IT_FAILED_CLEANUP=1
        fi
        IT_CURL_NS=
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

start_node c 2
start_node b 1
start_node a 0

# nodes_of NODE: the names of the live nodes seen from NODE, sorted, one line.
# owner NAME [TENANT]: the node that has NAME, as node a's list says.
owner() {
        CELLA_URL=${D[a.url]} IT_CURL_NS=$NS_CL api GET "/v1/sandboxes${2:+?tenant=$2}" |
                jq -r --arg id "$1" '.sandboxes[] | select(.id == $id) | .node'
}
# metric NODE SAMPLE: a sample's value in NODE's /metrics (0 when absent).
metric() {
        local v
        v=$(CELLA_URL=${D[$1.url]} IT_CURL_NS=$NS_CL api GET /metrics | grep -F "$2 " |
                awk '{print $2}' | head -n 1)
        echo "${v:-0}"
}
# signed PATH PRINCIPAL-FIELDS SECRET-FILE: an X-Cella-Cluster value of node a for GET PATH
# (PRINCIPAL-FIELDS: "ADMIN TENANT"), made here as a node would.
signed() {
        python3 - "$1" "$2" "$3" <<'PYEOF'
import hashlib, hmac, os, sys, time
path, principal, secret_file = sys.argv[1], sys.argv[2].split(" "), sys.argv[3]
admin, tenant = principal[0], principal[1] if len(principal) > 1 else ""
secret = open(secret_file, "rb").read().rstrip(b"\r\n")
ts = int(time.time() * 1000)
nonce = os.urandom(16).hex()
msg = "cella-cluster-v1\nGET\n%s\na\n%d\n%s\n%s\n%s\n\n0\n0\n" % (path, ts, nonce, admin, tenant)
mac = hmac.new(secret, msg.encode(), hashlib.sha256).hexdigest()
print("v1; node=a; ts=%d; nonce=%s; admin=%s; tenant=%s; key=; maxsb=0; maxmem=0; mac=%s"
      % (ts, nonce, admin, tenant, mac))
PYEOF
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
[ -n "$(body '.nodes[] | select(.node == "b") | .lease')" ] || fail "b's record has no lease"
# a tenant's key is refused: the admin's route
api_json POST /v1/keys '{"tenant":"acme"}'
expect_status 201
KEY_A=$(body .key)
CELLA_TOKEN=$KEY_A api GET /v1/cluster/nodes >/dev/null
expect_status 403 PERMISSION_DENIED

info "a name made through a is served through b and c"
X=$(sbx x)
api PUT "/v1/sandboxes/$X" >/dev/null
expect_status 201
XO=$(owner "$X")
info "$X placed on node $XO"
[ -n "$XO" ] || fail "$X has no node"
for n in a b c; do
        use_daemon $n
        assert_eq "x-$n" "$(run_in "$X" "echo x-$n")" "exec through $n"
        api GET "/v1/sandboxes/$X" >/dev/null
        expect_status 200
        assert_eq "$X" "$(body .id)" "GET through $n"
done
# the owner's errors pass through unchanged
use_daemon b
api_json POST "/v1/sandboxes/$X/exec" '{"command":""}'
expect_status 400 VALIDATION_FAILED
# POST /sleep through a node that does not have it: forwarded to its owner (0063); a
# name nobody has is 404 and placed nowhere (a sleep creates nothing)
for n in a b c; do [ "$n" != "$XO" ] && NS_SLEEP=$n && break; done
use_daemon "$NS_SLEEP"
api POST "/v1/sandboxes/$X/sleep" >/dev/null
expect_status 200
assert_eq sleeping "$(body .state)" "POST /sleep through $NS_SLEEP"
use_daemon "$XO"
api GET "/v1/sandboxes/$X" >/dev/null
assert_eq sleeping "$(body .state)" "asleep on its owner $XO"
use_daemon "$NS_SLEEP"
api POST "/v1/sandboxes/$(sbx nosleep)/sleep" >/dev/null
expect_status 404 SANDBOX_NOT_FOUND
assert_eq "" "$(owner "$(sbx nosleep)")" "a sleep of a new name placed it nowhere"
# the exec's SSE stream
for n in b c; do
        use_daemon $n
        curl -sS -N -m 60 -H "Authorization: Bearer $CELLA_TOKEN" -H 'Accept: text/event-stream' \
                -H 'Content-Type: application/json' \
                -d '{"command":"for i in 1 2 3; do echo line$i; sleep 0.1; done"}' \
                "$CELLA_URL/v1/sandboxes/$X/exec" >"$IT_TMP/sse-$n"
        assert_eq "line1line2line3" "$(grep '"type":"stdout"' "$IT_TMP/sse-$n" | sed 's/^data: //' |
                jq -r .data | tr -d '\n')" "SSE stream through $n"
        assert_contains "$(cat "$IT_TMP/sse-$n")" '"type":"complete"' "SSE's end through $n"
done
# a client that goes away from a relayed SSE stream cancels the owner's command
for n in a b c; do [ "$n" != "$XO" ] && NX=$n && break; done
use_daemon "$NX"
curl -sS -N -m 1 -X POST -H "Authorization: Bearer $CELLA_TOKEN" -H 'Accept: text/event-stream' \
        -H 'Content-Type: application/json' --data-binary '{"command":"sleep 302"}' \
        "$CELLA_URL/v1/sandboxes/$X/exec" >/dev/null 2>&1 || true
use_daemon "$XO"
left=
for i in $(seq 1 50); do
        left=$(run_in "$X" 'ps -eo args= | grep "^sleep 302" || true')
        [ -z "$left" ] && break
        sleep 0.2
done
assert_eq "" "$left" "a relayed command survived its client's disconnect (through $NX)"
# a file of 4 MiB up through b, down through c and a
head -c $((4 * 1024 * 1024)) /dev/urandom >"$IT_TMP/up.bin"
SUM=$(sha256sum <"$IT_TMP/up.bin" | cut -d' ' -f1)
use_daemon b
api PUT "/v1/sandboxes/$X/files?path=/tmp/up.bin" --data-binary @"$IT_TMP/up.bin" >/dev/null
expect_status 200
assert_eq "$((4 * 1024 * 1024))" "$(body .size)" "uploaded size"
for n in c a; do
        use_daemon $n
        curl -sS -m 60 -o "$IT_TMP/down-$n.bin" -H "Authorization: Bearer $CELLA_TOKEN" \
                "$CELLA_URL/v1/sandboxes/$X/files?path=/tmp/up.bin"
        assert_eq "$SUM" "$(sha256sum <"$IT_TMP/down-$n.bin" | cut -d' ' -f1)" "download through $n"
done
assert_eq "$SUM" "$(run_in "$X" 'sha256sum /tmp/up.bin | cut -d" " -f1')" "the file in the sandbox"
# a terminal WebSocket through each node
for n in a b c; do
        use_daemon $n
        in_cl "$PC" --url "$CELLA_URL" --token "$CELLA_TOKEN" "$X" ready \
                "send:echo pty-\$((6*7))-$n\r" "expect:pty-42-$n" "send:exit\r" "exit:0" ||
                fail "terminal through $n"
done
# a preview URL of a python http.server, through each node
use_daemon a
sx "$X" 'mkdir -p /tmp/www && echo preview-ok >/tmp/www/index.html && (cd /tmp/www && nohup python3 -m http.server 8000 >/dev/null 2>&1 &); for i in $(seq 1 100); do python3 -c "import urllib.request; urllib.request.urlopen(\"http://127.0.0.1:8000/\")" 2>/dev/null && break; sleep 0.1; done; echo up'
expect_status 200
api_json POST "/v1/sandboxes/$X/ports" '{"port":8000}'
expect_status 201
PHOST=$(body .url | sed 's|^http://||; s|/.*||')
BADHOST=$(echo "$PHOST" | sed 's/-[a-z0-9_]*\.localhost/-zzzzzzzzzzzzzzzz.localhost/')
for n in a b c; do
        use_daemon $n
        assert_eq "preview-ok" "$(curl -sS -m 30 -H "Host: $PHOST" "$CELLA_URL/index.html")" "preview through $n"
        # a wrong token: answered as on one node
        api GET /index.html -H "Host: $BADHOST" >/dev/null
        expect_status 404 INVALID_TOKEN
done
# the forwarding series count what went through (each other node relayed at least its
# exec, GET, SSE stream, file and terminal, and its previews; the owner took them all)
sent=0
for n in a b c; do
        [ "$n" = "$XO" ] && continue
        k=$(metric $n 'cella_forward_requests_total{kind="api",result="answered"}')
        [ "$k" -ge 5 ] || fail "node $n counted $k relayed API requests"
        sent=$((sent + k))
        k=$(metric $n 'cella_forward_requests_total{kind="preview",result="answered"}')
        [ "$k" -ge 2 ] || fail "node $n counted $k relayed previews"
        sent=$((sent + k))
done
k=$(metric "$XO" 'cella_forward_received_total{result="accepted"}')
[ "$k" -ge "$sent" ] || fail "the owner counted $k forwarded requests of the $sent relayed"

info "the cluster's authenticator"
use_daemon b
FORGED="v1; node=a; ts=$(date +%s)000; nonce=0123456789abcdef0123456789abcdef; admin=1; tenant=; key=; maxsb=0; maxmem=0; mac=$(printf 'ab%.0s' $(seq 1 32))"
# no token, and a forged authenticator claiming the admin: refused
CELLA_TOKEN='' api GET "/v1/sandboxes/$X" -H "X-Cella-Cluster: $FORGED" >/dev/null
expect_status 401 UNAUTHORIZED
assert_contains "$(body .message)" "does not hold" "a forged MAC"
# with the admin's token too: the authenticator is checked all the same
api GET "/v1/sandboxes/$X" -H "X-Cella-Cluster: $FORGED" >/dev/null
expect_status 401 UNAUTHORIZED
api GET "/v1/sandboxes/$X" -H "X-Cella-Cluster: v1; node=a" >/dev/null
expect_status 401 UNAUTHORIZED
assert_contains "$(body .message)" "malformed" "a malformed authenticator"
# a preview host with a forged one
api GET /index.html -H "Host: $PHOST" -H "X-Cella-Cluster: $FORGED" >/dev/null
expect_status 401 UNAUTHORIZED
# neither a token nor an authenticator: a client like any other
CELLA_TOKEN='' api GET "/v1/sandboxes/$X" >/dev/null
expect_status 401 UNAUTHORIZED
# a MAC made right with another secret: refused
echo "another secret, of 32 bytes or so" >"$IT_TMP/other-secret"
CELLA_TOKEN='' api GET "/v1/sandboxes/$X" \
        -H "X-Cella-Cluster: $(signed "/v1/sandboxes/$X" "1" "$IT_TMP/other-secret")" >/dev/null
expect_status 401 UNAUTHORIZED
# with the cluster's secret: accepted once (served here, never forwarded again), its
# replay refused
GOOD=$(signed "/v1/sandboxes/$X" "1" "$SECRET")
CELLA_TOKEN='' api GET "/v1/sandboxes/$X" -H "X-Cella-Cluster: $GOOD" >/dev/null
if [ "$XO" = b ]; then expect_status 200; else expect_status 404 SANDBOX_NOT_FOUND; fi
CELLA_TOKEN='' api GET "/v1/sandboxes/$X" -H "X-Cella-Cluster: $GOOD" >/dev/null
expect_status 401 UNAUTHORIZED
assert_contains "$(body .message)" "replayed" "a replayed authenticator"
# a forwarded request is never forwarded again: a create of a name another node owns
use_daemon "$XO"
for n in a b c; do [ "$n" != "$XO" ] && NX=$n && break; done
use_daemon "$NX"
CELLA_TOKEN='' api PUT "/v1/sandboxes/$X" \
        -H "X-Cella-Cluster: $(python3 - "/v1/sandboxes/$X" "$SECRET" <<'PYEOF'
import hashlib, hmac, os, sys, time
path, secret = sys.argv[1], open(sys.argv[2], "rb").read().rstrip(b"\r\n")
ts, nonce = int(time.time() * 1000), os.urandom(16).hex()
msg = "cella-cluster-v1\nPUT\n%s\na\n%d\n%s\n1\n\n\n0\n0\n" % (path, ts, nonce)
print("v1; node=a; ts=%d; nonce=%s; admin=1; tenant=; key=; maxsb=0; maxmem=0; mac=%s"
      % (ts, nonce, hmac.new(secret, msg.encode(), hashlib.sha256).hexdigest()))
PYEOF
)" >/dev/null
expect_status 409 SANDBOX_ON_OTHER_NODE
assert_contains "$(body .message)" "node '$XO'" "the owner is named"

info "a tenant's key through a node that does not have its sandbox"
use_daemon a
for i in 1 2 3 4 5 6; do
        T=$(sbx t$i)
        CELLA_TOKEN=$KEY_A api PUT "/v1/sandboxes/$T" >/dev/null
        expect_status 201
        [ "$(owner "$T" acme)" != a ] && break
done
TO=$(owner "$T" acme)
[ "$TO" != a ] || fail "six of acme's names placed on a, none elsewhere"
assert_eq "t-acme" "$(CELLA_TOKEN=$KEY_A run_in "$T" 'echo t-acme')" "acme's exec through a, on $TO"
CELLA_TOKEN=$KEY_A api GET "/v1/sandboxes/$T" >/dev/null
expect_status 200
assert_eq "acme" "$(body .tenant)" "acme's sandbox through a"
# another tenant's key (made on a) names its own tenant's T: there is none
api_json POST /v1/keys '{"tenant":"beta"}'
expect_status 201
KEY_BETA=$(body .key)
CELLA_TOKEN=$KEY_BETA api GET "/v1/sandboxes/$T" >/dev/null
expect_status 404 SANDBOX_NOT_FOUND
# the default tenant's X is not acme's
CELLA_TOKEN=$KEY_A api GET "/v1/sandboxes/$X" >/dev/null
expect_status 404 SANDBOX_NOT_FOUND
# a forwarded request for X with acme's principal: 404 on its owner, as on one node
use_daemon "$XO"
CELLA_TOKEN='' api GET "/v1/sandboxes/$X" \
        -H "X-Cella-Cluster: $(signed "/v1/sandboxes/$X" "0 acme" "$SECRET")" >/dev/null
expect_status 404 SANDBOX_NOT_FOUND
# and for acme's T on its owner, with beta's
use_daemon "$TO"
CELLA_TOKEN='' api GET "/v1/sandboxes/$T" \
        -H "X-Cella-Cluster: $(signed "/v1/sandboxes/$T" "0 beta" "$SECRET")" >/dev/null
expect_status 404 SANDBOX_NOT_FOUND

info "the cluster's list from every node"
use_daemon b
Y=$(sbx y)
api PUT "/v1/sandboxes/$Y" >/dev/null
expect_status 201
YO=$(owner "$Y")
for n in a b c; do
        use_daemon $n
        api GET /v1/sandboxes >/dev/null
        expect_status 200
        assert_eq "$XO" "$(body ".sandboxes[] | select(.id == \"$X\") | .node")" "$X's node seen from $n"
        assert_eq "$YO" "$(body ".sandboxes[] | select(.id == \"$Y\") | .node")" "$Y's node seen from $n"
done
use_daemon "$XO"
api GET /v1/sandboxes >/dev/null
assert_eq "running" "$(body ".sandboxes[] | select(.id == \"$X\") | .state")" "the owner's own in full"
use_daemon a
CELLA_TOKEN=$KEY_A api GET /v1/sandboxes >/dev/null
expect_status 200
assert_eq "" "$(body '.sandboxes[] | select(.tenant != "acme") | .id')" "acme's list holds acme's alone"
api GET "/v1/sandboxes?tenant=acme" >/dev/null
assert_contains "$(body '[.sandboxes[].id] | join(",")')" "$T" "the admin's ?tenant="

info "300 new names through random nodes"
mkdir -p "$IT_TMP/spread"
# six at a time (a plain `wait` would wait for the etcd members and the nodes too)
batch=()
for i in $(seq 1 300); do
        n=$(echo "a b c" | cut -d' ' -f$((RANDOM % 3 + 1)))
        curl -sS -o /dev/null -w "%{http_code}\n" -X PUT -H "Authorization: Bearer $CELLA_TOKEN" \
                -m 120 "${D[$n.url]}/v1/sandboxes/$(sbx s$i)" >"$IT_TMP/spread/$i" &
        batch+=($!)
        if [ ${#batch[@]} -eq 6 ]; then wait "${batch[@]}"; batch=(); fi
done
[ ${#batch[@]} -eq 0 ] || wait "${batch[@]}"
assert_eq "201" "$(cat "$IT_TMP/spread/"* | sort -u | tr -d '\n')" "every new name made (201)"
use_daemon a
api GET /v1/sandboxes >/dev/null
for n in a b c; do
        k=$(body "[.sandboxes[] | select((.id | startswith(\"$(sbx s)\")) and .node == \"$n\")] | length")
        info "node $n: $k of the 300"
        [ "$k" -ge 80 ] && [ "$k" -le 120 ] || fail "node $n has $k of the 300 names (80..120 expected)"
done
batch=()
for i in $(seq 1 300); do
        curl -sS -o /dev/null -X DELETE -H "Authorization: Bearer $CELLA_TOKEN" -m 60 \
                "${D[a.url]}/v1/sandboxes/$(sbx s$i)" &
        batch+=($!)
        if [ ${#batch[@]} -eq 6 ]; then wait "${batch[@]}"; batch=(); fi
done
[ ${#batch[@]} -eq 0 ] || wait "${batch[@]}"
api GET /v1/sandboxes >/dev/null
assert_eq "0" "$(body "[.sandboxes[] | select(.id | startswith(\"$(sbx s)\"))] | length")" "the 300 destroyed through a"

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
others=$(cat "$IT_TMP/race/"*.status | awk '$1 != 200 && $1 != 201' | head -n 3)
assert_eq "" "$others" "every racing client got 200 or 201"
assert_eq "1" "$(cat "$IT_TMP/race/"*.status | grep -c '^201 ')" "one create"
info "owner of the raced name: $(owner "$Z")"
for n in a b c; do
        use_daemon $n
        api GET "/v1/sandboxes/$Z" >/dev/null
        expect_status 200
done
api GET /v1/sandboxes >/dev/null
assert_eq "1" "$(body "[.sandboxes[] | select(.id == \"$Z\")] | length")" "one sandbox named $Z"

info "a killed node leaves within its lease, and comes back"
use_daemon c
for i in 1 2 3 4 5 6 7 8; do
        K=$(sbx k$i)
        api PUT "/v1/sandboxes/$K" >/dev/null
        expect_status 201
        [ "$(owner "$K")" = c ] && break
done
assert_eq "c" "$(owner "$K")" "a name placed on c"
kill -KILL "${D[c.pid]}"
wait "${D[c.pid]}" 2>/dev/null || true
# its lease lives on for a few seconds: its names' requests through another node are 503
# naming it (nothing listens at its address any more)
use_daemon a
api GET "/v1/sandboxes/$K" >/dev/null
expect_status 503 CLUSTER_UNAVAILABLE
assert_contains "$(body .message)" "node 'c'" "the unreachable owner is named"
wait_nodes a a,b
use_daemon a
api GET /v1/sandboxes >/dev/null
assert_eq "" "$(body ".sandboxes[] | select(.id == \"$K\") | .id")" "c's name released with its lease"
start_node c 2
wait_nodes a a,b,c
# c re-claims the names of the sandboxes it still has
for i in $(seq 1 100); do
        [ "$(owner "$K")" = c ] && break
        sleep 0.1
done
assert_eq "c" "$(owner "$K")" "c re-claimed $K"
use_daemon b
assert_eq "back" "$(run_in "$K" 'echo back')" "$K through b after c came back"

info "etcd losing one member"
stop_etcd 3
# the two left elect a leader (etcd's election timeout is 1 s) and answer
for i in $(seq 1 150); do
        etcd_ok 1 && etcd_ok 2 && break
        sleep 0.1
done
etcd_ok 1 && etcd_ok 2 ||
        fail "etcd with two members: $(tail -n 3 "$IT_TMP/etcd1.log" "$IT_TMP/etcd2.log")"
use_daemon a
W=$(sbx w)
api PUT "/v1/sandboxes/$W" -m 60 >/dev/null
expect_status 201
use_daemon b
api GET /v1/sandboxes -m 60 >/dev/null
expect_status 200
[ -n "$(body ".sandboxes[] | select(.id == \"$W\") | .node")" ] || fail "a new name with two members"
assert_eq "w" "$(run_in "$W" 'echo w')" "a new name served with two members"

info "etcd without a quorum"
stop_etcd 2
use_daemon a
V=$(sbx v)
api PUT "/v1/sandboxes/$V" -m 90 >/dev/null
expect_status 503 CLUSTER_UNAVAILABLE
# an existing sandbox serves on its node
use_daemon "$XO"
assert_eq "ok" "$(run_in "$X" 'echo ok')" "an existing sandbox serves"
api GET "/v1/sandboxes/$V" -m 90 >/dev/null
expect_status 503 CLUSTER_UNAVAILABLE
api GET /v1/sandboxes -m 90 >/dev/null
expect_status 200
assert_eq "true" "$(body .partial)" "the list says it is partial"
assert_eq "$XO" "$(body ".sandboxes[] | select(.id == \"$X\" and .tenant == null) | .node")" "the node's own are listed"
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

info "/metrics: the etcd client's and forwarding's series"
use_daemon a
api GET /metrics >"$IT_TMP/metrics"
expect_status 200
"$PY" - "$IT_TMP/metrics" <<'PYEOF' || fail "/metrics does not parse or lacks the etcd or forwarding series"
import sys
from prometheus_client.parser import text_string_to_metric_families
fams = {f.name: f for f in text_string_to_metric_families(open(sys.argv[1]).read())}
req = {(s.labels["op"], s.labels["result"]): s.value for s in fams["cella_etcd_requests"].samples
       if s.name == "cella_etcd_requests_total"}
assert req[("txn", "ok")] >= 3, req
assert req[("lease_keepalive", "ok")] >= 1, req
assert req[("range", "error")] >= 1, req  # the lookups without a quorum
assert fams["cella_etcd_up"].samples[0].value == 1
assert fams["cella_cluster_registered"].samples[0].value == 1
fwd = {(s.labels["kind"], s.labels["result"]): s.value
       for s in fams["cella_forward_requests"].samples if s.name == "cella_forward_requests_total"}
assert fwd[("api", "answered")] >= 1, fwd
count = [s.value for s in fams["cella_forward_seconds"].samples
         if s.name == "cella_forward_seconds_count" and s.labels["kind"] == "api"]
assert count == [fwd[("api", "answered")]], (count, fwd)
placed = {s.labels["on"]: s.value for s in fams["cella_forward_placements"].samples}
assert placed["self"] + placed["other"] >= 50, placed
PYEOF

info "cella top on a cluster node shows the live nodes and each sandbox's node"
use_daemon a
top_out=$(in_cl env CELLA_URL="${D[a.url]}" CELLA_TOKEN="$CELLA_TOKEN" "$CELLA_BUILD/cella" top --once) ||
        fail "cella top --once failed: $top_out"
for n in a b c; do
        grep -Eq "^$n +http://" <<<"$top_out" || fail "cella top lacks node $n: $top_out"
done
grep -Eq '^a +http://.* live \(this node\)$' <<<"$top_out" || fail "cella top: node a is not marked: $top_out"
grep -q '^forwarded [0-9]' <<<"$top_out" || fail "cella top lacks the forwarding line: $top_out"
grep -Eq "^$V +.* [abc]\$" <<<"$top_out" || fail "cella top: sandbox $V without its node: $top_out"

info "a node without --cluster has no cluster"
CELLAD_LOG=$IT_TMP/cellad-d.log
CELLAD_PID=
IT_CURL_NS=
start_cellad --pool 0 --data-dir "$IT_TMP/data-d" --network-range "$(subrange 3)"
save_daemon d
api GET /v1/cluster/nodes >/dev/null
expect_status 404 NOT_FOUND
top_out=$("$CELLA_BUILD/cella" top --once) || fail "cella top --once failed: $top_out"
assert_not_contains "$top_out" "NODE" "cella top without a cluster shows no nodes"
api GET /metrics >"$IT_TMP/metrics-d"
assert_not_contains "$(cat "$IT_TMP/metrics-d")" "cella_etcd_" "no etcd series"
assert_not_contains "$(cat "$IT_TMP/metrics-d")" "cella_forward_" "no forwarding series"
api PUT "/v1/sandboxes/$X" >/dev/null
expect_status 201
api GET /v1/sandboxes >/dev/null
assert_eq "null" "$(body '.sandboxes[0].node')" "no node in a single daemon's list"
# an authenticator on a node without a cluster secret is refused
api GET "/v1/sandboxes/$X" -H "X-Cella-Cluster: $FORGED" >/dev/null
expect_status 401 UNAUTHORIZED
use_daemon a

info "ok"
