#!/bin/bash
# Tenants' keys and quotas across a cluster (docs/tenants.md, docs/cluster.md, decisions 0053
# and 0055): one etcd member and three cellad nodes a, b and c on loopback ports of this run.
# Checks: a key made on one node authenticates on the others (etcd holds its hash, never its
# secret), and a key removed on one node is refused at once there and within a bounded time
# on the others; GET /v1/keys answers the same on every node, and the CLI's key commands
# work against any node; a tenant's key never sees, reaches or guesses another tenant's
# sandboxes through any node (list, get, exec, preview URLs); a tenant's maxSandboxes and
# maxMemory hold across nodes (N through different nodes make N sandboxes, the next one is
# 403 QUOTA_EXCEEDED; two creates racing through two nodes for the last slot make one; a
# wake past maxMemory with another node's sandbox is refused and wakes nothing); a
# destroyed sandbox and a killed node's lapsed lease give the slot back; etcd out of reach:
# known keys keep working, a new key is 503 CLUSTER_UNAVAILABLE. lib.sh checks node a at
# exit, the hook below b and c.
. "$(dirname "$0")/lib.sh"
command -v etcd >/dev/null || skip "needs etcd (Debian's etcd-server)"
command -v etcdctl >/dev/null || skip "needs etcdctl (Debian's etcd-client)"
CLI=$CELLA_BUILD/cella
[ -x "$CLI" ] || skip "no $CLI"

CELLA_TOKEN=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
export CELLA_TOKEN

. "$(dirname "$0")/lib-daemons.sh"

# ---- etcd: one member ----
ETCD_CLIENT=$(free_port)
ETCD_PEER=$(free_port)
ETCD_ENDPOINTS=http://127.0.0.1:$ETCD_CLIENT
ETCD_PID=
start_etcd() {
        etcd --name e1 --data-dir "$IT_TMP/etcd" \
                --listen-client-urls "$ETCD_ENDPOINTS" --advertise-client-urls "$ETCD_ENDPOINTS" \
                --listen-peer-urls "http://127.0.0.1:$ETCD_PEER" \
                --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER" \
                --initial-cluster "e1=http://127.0.0.1:$ETCD_PEER" --initial-cluster-state new \
                --initial-cluster-token "cella-it-$IT_RUN" >>"$IT_TMP/etcd.log" 2>&1 &
        ETCD_PID=$!
}
stop_etcd() {
        [ -n "$ETCD_PID" ] || return 0
        kill -KILL "$ETCD_PID" 2>/dev/null || true
        wait "$ETCD_PID" 2>/dev/null || true
        ETCD_PID=
}
etcd_ok() {
        curl -sf -m 3 -X POST -d '{"key":"eA=="}' "$ETCD_ENDPOINTS/v3/kv/range" >/dev/null
}

# ---- cellad nodes ----
start_node() { # NAME INDEX: a node on a fixed port (its advertise URL)
        local n=$1 i=$2
        local port=${D[$n.port]:-$(free_port)}
        D[$n.port]=$port
        CELLAD_LOG=$IT_TMP/cellad-$n.log
        CELLAD_PID=
        start_cellad --pool 0 --data-dir "$IT_TMP/data-$n" --listen "127.0.0.1:$port" \
                --network-range "$(subrange "$i")" --cluster "etcd=$ETCD_ENDPOINTS" --node "$n" \
                --advertise "http://127.0.0.1:$port"
        save_daemon "$n"
}
it_cleanup_hook() {
        for n in b c; do
                stop_daemon $n
        done
        # node a is lib.sh's (when it was started)
        if [ -n "${D[a.log]:-}" ]; then use_daemon a; else CELLAD_PID=; fi
        stop_etcd
        return 0
}
on() { # on NODE KEY FUNCTION ARGS...: the function against NODE with KEY as the token
        local n=$1 k=$2
        shift 2
        CELLA_URL=${D[$n.url]} CELLA_TOKEN=$k "$@"
}
status_on() { # NODE KEY: the status of GET /v1/sandboxes there with that key
        curl -sS -o /dev/null -w '%{http_code}' -m 30 -H "Authorization: Bearer $2" \
                "${D[$1.url]}/v1/sandboxes"
}
# wait_status NODE KEY STATUS: until GET /v1/sandboxes answers STATUS (10 s at most; the
# bound docs/tenants.md gives is about 1 s). Prints the milliseconds it took.
wait_status() {
        local t0 i got=
        t0=$(date +%s%N)
        for i in $(seq 1 50); do
                got=$(status_on "$1" "$2")
                [ "$got" = "$3" ] && { echo $((($(date +%s%N) - t0) / 1000000)); return 0; }
                sleep 0.2
        done
        fail "key on node $1: expected $3, got $got after 10 s"
}

# ---- start ----
start_etcd
for i in $(seq 1 300); do
        etcd_ok && break
        sleep 0.1
done
etcd_ok || fail "etcd not up after 30 s: $(tail -n 5 "$IT_TMP/etcd.log")"
it_net_range
start_node c 2
start_node b 1
start_node a 0
wait_nodes a a,b,c

TA=a$IT_RUN
TB=b$IT_RUN
TQ=q$IT_RUN
TM=m$IT_RUN

info "a key made on a works on b and c; etcd holds its hash alone"
on a "$CELLA_TOKEN" api_json POST /v1/keys "{\"tenant\":\"$TA\"}"
expect_status 201
KA=$(body .key)
IDA=$(body .id)
assert_eq 200 "$(status_on a "$KA")" "the key on its own node, at once"
ms_b=$(wait_status b "$KA" 200)
ms_c=$(wait_status c "$KA" 200)
info "a new key authenticated on b after ${ms_b} ms, on c after ${ms_c} ms"
rec=$(etcdctl --endpoints "$ETCD_ENDPOINTS" get "/cella/keys/$IDA" --print-value-only)
assert_eq "$TA" "$(echo "$rec" | jq -r .tenant)" "the record's tenant"
assert_eq "$(printf %s "${KA:19}" | sha256sum | cut -d' ' -f1)" "$(echo "$rec" | jq -r .secretSha256)" \
        "the record holds the secret's SHA-256"
assert_not_contains "$(etcdctl --endpoints "$ETCD_ENDPOINTS" get --prefix /cella/ -w json)" "${KA:19}" \
        "etcd holds no secret"
for n in a b c; do
        on $n "$CELLA_TOKEN" api GET /v1/keys >/dev/null
        expect_status 200
        assert_eq "$TA" "$(body ".keys[] | select(.id == \"$IDA\") | .tenant")" "GET /v1/keys on $n"
        assert_not_contains "$(body)" "${KA:19}" "GET /v1/keys on $n shows no secret"
        on $n "$KA" api GET /v1/keys >/dev/null
        expect_status 403 PERMISSION_DENIED
done
on b "$CELLA_TOKEN" api_json POST /v1/keys "{\"tenant\":\"$TB\"}"
expect_status 201
KB=$(body .key)
wait_status a "$KB" 200 >/dev/null
wait_status c "$KB" 200 >/dev/null
on c "$CELLA_TOKEN" api_json POST /v1/keys '{"tenant":"Bad"}'
expect_status 400 VALIDATION_FAILED
on c "$CELLA_TOKEN" api DELETE /v1/keys/000000000000 >/dev/null
expect_status 404 KEY_NOT_FOUND
assert_eq 401 "$(status_on b "cella_${IDA}_$(printf 'x%.0s' $(seq 32))")" "a known id with a wrong secret"

info "a key removed on c is refused there at once, on a and b within the bound"
on a "$CELLA_TOKEN" api_json POST /v1/keys "{\"tenant\":\"$TA\"}"
expect_status 201
KR=$(body .key)
IDR=$(body .id)
wait_status b "$KR" 200 >/dev/null
wait_status c "$KR" 200 >/dev/null
on c "$CELLA_TOKEN" api DELETE "/v1/keys/$IDR" >/dev/null
expect_status 200
assert_eq 401 "$(status_on c "$KR")" "refused on c at once"
ms_a=$(wait_status a "$KR" 401)
ms_b=$(wait_status b "$KR" 401)
info "a removed key refused on a after ${ms_a} ms, on b after ${ms_b} ms"
on b "$CELLA_TOKEN" api DELETE "/v1/keys/$IDR" >/dev/null
expect_status 404 KEY_NOT_FOUND
assert_eq 200 "$(status_on a "$KA")" "the tenant's other key still works"
assert_eq "" "$(etcdctl --endpoints "$ETCD_ENDPOINTS" get "/cella/keys/$IDR" --print-value-only)" \
        "the record is gone from etcd"

info "the CLI's key commands against any node"
out=$(CELLA_URL=${D[b.url]} "$CLI" key create --tenant "c$IT_RUN" --max-sandboxes 2 --max-memory 2G)
assert_contains "$out" "cella_" "cella key create on b prints the key"
KC=$(echo "$out" | grep -o 'cella_[0-9a-f]*_[A-Za-z0-9]*' | head -n 1)
IDC=$(CELLA_URL=${D[c.url]} "$CLI" --json key ls | jq -r ".keys[] | select(.tenant == \"c$IT_RUN\") | .id")
assert_eq "cella_${IDC}_" "${KC:0:19}" "cella key ls on c lists it"
assert_eq 2147483648 "$(CELLA_URL=${D[a.url]} "$CLI" --json key ls | jq -r ".keys[] | select(.id == \"$IDC\") | .maxMemory")" \
        "its --max-memory on a"
wait_status c "$KC" 200 >/dev/null
CELLA_URL=${D[a.url]} "$CLI" key rm "$IDC" >/dev/null
assert_eq "" "$(CELLA_URL=${D[b.url]} "$CLI" --json key ls | jq -r ".keys[] | select(.id == \"$IDC\") | .id")" \
        "cella key rm on a, gone on b"
wait_status c "$KC" 401 >/dev/null

info "tenants see and reach their own alone, through every node"
on a "$KA" api_json PUT /v1/sandboxes/web '{"labels":{"who":"a"}}'
expect_status 201
assert_eq a "$(on a "$KA" run_in web 'echo a > /workspace/who; cat /workspace/who')" "A's web on a"
on b "$KB" api_json PUT /v1/sandboxes/web '{"labels":{"who":"b"}}'
expect_status 201
assert_eq b "$(on b "$KB" run_in web 'echo b > /workspace/who; cat /workspace/who')" "B's web on b"
on b "$KB" sx web "nohup python3 -m http.server 8000 --directory /workspace >/dev/null 2>&1 &"
expect_status 200
for i in $(seq 1 100); do
        on b "$KB" sx web 'python3 -c "import urllib.request;urllib.request.urlopen(\"http://127.0.0.1:8000/who\")"'
        [ "$(body .exitCode)" = 0 ] && break
        sleep 0.2
done
on b "$KB" api_json POST /v1/sandboxes/web/ports '{"port":8000}'
expect_status 201
UB=$(body .url)
BPORT=${D[b.port]}
TOKB=$(echo "$UB" | sed -E "s#^http://8000-web--$TB-([a-z0-9_]+)\.localhost:$BPORT/\$#\1#")
assert_eq 16 "${#TOKB}" "B's preview host names its tenant ($UB)"
pv() { # pv NODE HOST: GET /who through the preview host on NODE, status printed
        curl -sS -o "$IT_TMP/pv" -w '%{http_code}' -m 30 -H "Host: $2.localhost:${D[$1.port]}" \
                "${D[$1.url]}/who"
}
assert_eq 200 "$(pv b "8000-web--$TB-$TOKB")" "B's URL on its node"
assert_eq b "$(tr -d '\n' <"$IT_TMP/pv")" "B's URL reaches B's web"
for n in a b c; do
        on $n "$KA" api GET /v1/sandboxes >/dev/null
        expect_status 200
        assert_eq "$TA" "$(body '[.sandboxes[].tenant] | unique | join(",")')" "A's list on $n: A's alone"
        assert_eq "web" "$(body '[.sandboxes[].id] | join(",")')" "A's list on $n: its web"
        assert_eq "a" "$(body '.sandboxes[0].node')" "A's web's node, seen from $n"
        on $n "$KB" api GET /v1/sandboxes >/dev/null
        assert_eq "$TB" "$(body '[.sandboxes[].tenant] | unique | join(",")')" "B's list on $n: B's alone"
        on $n "$KA" api GET "/v1/sandboxes/web?tenant=$TB" >/dev/null
        expect_status 403 PERMISSION_DENIED
        on $n "$KA" api GET "/v1/sandboxes?tenant=$TB" >/dev/null
        expect_status 403 PERMISSION_DENIED
        # A's key names A's web, wherever it asks: never B's
        on $n "$KA" api GET /v1/sandboxes/web >/dev/null
        st=$API_STATUS
        if [ "$st" = 200 ]; then
                assert_eq a "$(body .labels.who)" "A's get on $n is A's web"
        else
                expect_status 404 SANDBOX_NOT_FOUND
        fi
        on $n "$KA" sx web 'cat /workspace/who'
        st=$API_STATUS
        if [ "$st" = 200 ]; then
                assert_eq a "$(body .stdout | tr -d '\n')" "A's exec through $n runs in A's web"
        else
                expect_status 409 SANDBOX_ON_OTHER_NODE
                assert_contains "$(body .message)" "node 'a'" "A's exec through $n: its own web's node"
                assert_not_contains "$(body .message)" "$TB" "and nothing of B"
        fi
        # guessing B's preview host: A's name with B's token, the default tenant's, no token
        assert_eq 404 "$(pv $n "8000-web--$TA-$TOKB")" "A's host with B's token on $n"
        assert_eq 404 "$(pv $n "8000-web-$TOKB")" "the default tenant's host with B's token on $n"
        assert_eq 404 "$(pv $n "8000-web--$TB-0000000000000000")" "B's host, a guessed token, on $n"
done
assert_eq b "$(on b "$KB" run_in web 'cat /workspace/who')" "B's web is untouched"

info "maxSandboxes across nodes: N through different nodes make N, the next is refused"
on a "$CELLA_TOKEN" api_json POST /v1/keys "{\"tenant\":\"$TQ\",\"maxSandboxes\":2}"
expect_status 201
KQ=$(body .key)
wait_status b "$KQ" 200 >/dev/null
wait_status c "$KQ" 200 >/dev/null
on a "$KQ" api PUT /v1/sandboxes/q1 >/dev/null
expect_status 201
on b "$KQ" api PUT /v1/sandboxes/q2 >/dev/null
expect_status 201
on c "$KQ" api PUT /v1/sandboxes/q3 >/dev/null
expect_status 403 QUOTA_EXCEEDED
assert_contains "$(body .message)" "has 2 sandboxes across the cluster" "the figures"
assert_not_contains "$(body .message)" "q3.$TQ" "the tenant's own names in the message"
on a "$KQ" api PUT /v1/sandboxes/q3 >/dev/null
expect_status 403 QUOTA_EXCEEDED
on a "$KQ" api POST /v1/sandboxes/q4/exec -H 'Content-Type: application/json' -d '{"command":"true"}' >/dev/null
expect_status 403 QUOTA_EXCEEDED
on b "$KQ" api PUT /v1/sandboxes/q2 >/dev/null
expect_status 200
on c "$KQ" api GET /v1/sandboxes >/dev/null
assert_eq "q1,q2" "$(body '[.sandboxes[].id] | sort | join(",")')" "two sandboxes, nothing of the refused"
assert_eq 2 "$(etcdctl --endpoints "$ETCD_ENDPOINTS" get --prefix "/cella/names/$TQ/" --keys-only | grep -c .)" \
        "two names in etcd"

info "a destroyed sandbox gives its slot back; two nodes racing for it make one"
on b "$KQ" api DELETE /v1/sandboxes/q2 >/dev/null
expect_status 200
for round in 1 2 3; do
        curl -sS -o "$IT_TMP/rb" -w '%{http_code}' -m 120 -X PUT -H "Authorization: Bearer $KQ" \
                "${D[b.url]}/v1/sandboxes/rb$round" >"$IT_TMP/rb.status" &
        pb=$!
        curl -sS -o "$IT_TMP/rc" -w '%{http_code}' -m 120 -X PUT -H "Authorization: Bearer $KQ" \
                "${D[c.url]}/v1/sandboxes/rc$round" >"$IT_TMP/rc.status" &
        pc=$!
        wait $pb || fail "the racer through b failed"
        wait $pc || fail "the racer through c failed"
        sb=$(cat "$IT_TMP/rb.status")
        sc=$(cat "$IT_TMP/rc.status")
        info "round $round: through b $sb, through c $sc"
        assert_eq "201 403" "$(echo "$sb $sc" | tr ' ' '\n' | sort | tr '\n' ' ' | sed 's/ $//')" \
                "one created, one refused (round $round)"
        if [ "$sb" = 201 ]; then won=b name=rb$round lost=rc; else won=c name=rc$round lost=rb; fi
        assert_eq QUOTA_EXCEEDED "$(jq -r .code <"$IT_TMP/$lost")" "the refused racer's code"
        on a "$KQ" api GET /v1/sandboxes >/dev/null
        assert_eq 2 "$(body '.sandboxes | length')" "two sandboxes after round $round"
        on $won "$KQ" api DELETE "/v1/sandboxes/$name" >/dev/null
        expect_status 200
done

info "a killed node's lapsed lease gives its slots back"
on c "$KQ" api PUT /v1/sandboxes/qc >/dev/null
expect_status 201
on b "$KQ" api PUT /v1/sandboxes/qb >/dev/null
expect_status 403 QUOTA_EXCEEDED
kill -KILL "${D[c.pid]}"
wait "${D[c.pid]}" 2>/dev/null || true
wait_nodes a a,b
on b "$KQ" api PUT /v1/sandboxes/qb >/dev/null
expect_status 201
start_node c 2
wait_nodes a a,b,c
# c re-claims qc (its sandbox is there): the tenant is over its quota until it destroys one
for i in $(seq 1 100); do
        [ "$(on a "$KQ" api GET /v1/sandboxes | jq '.sandboxes | length')" = 3 ] && break
        sleep 0.1
done
on a "$KQ" api GET /v1/sandboxes >/dev/null
assert_eq "q1,qb,qc" "$(body '[.sandboxes[].id] | sort | join(",")')" "c's sandbox back with c"
on a "$KQ" api PUT /v1/sandboxes/qx >/dev/null
expect_status 403 QUOTA_EXCEEDED
on c "$KQ" api DELETE /v1/sandboxes/qc >/dev/null
expect_status 200

info "maxMemory across nodes"
on a "$CELLA_TOKEN" api_json POST /v1/keys "{\"tenant\":\"$TM\",\"maxMemory\":$((8 * 1024 * 1024 * 1024))}"
expect_status 201
KM=$(body .key)
wait_status b "$KM" 200 >/dev/null
wait_status c "$KM" 200 >/dev/null
on a "$KM" api PUT /v1/sandboxes/m1 >/dev/null # standard-1: 4 GiB
expect_status 201
on b "$KM" api PUT /v1/sandboxes/m2 >/dev/null
expect_status 201
on c "$KM" api PUT /v1/sandboxes/m3 >/dev/null
expect_status 403 QUOTA_EXCEEDED
assert_contains "$(body .message)" "maxMemory" "the memory figure"
on c "$KM" api_json PUT /v1/sandboxes/m3 '{"instanceType":"lite"}'
expect_status 403 QUOTA_EXCEEDED

info "maxMemory across nodes: a wake is checked against the other nodes' sandboxes"
TW=w$IT_RUN
on a "$CELLA_TOKEN" api_json POST /v1/keys "{\"tenant\":\"$TW\",\"maxMemory\":$((8 * 1024 * 1024 * 1024))}"
expect_status 201
KW=$(body .key)
wait_status b "$KW" 200 >/dev/null
on a "$KW" api_json PUT /v1/sandboxes/w1 '{"sleepAfter":1}'
expect_status 201
for i in $(seq 1 150); do # it sleeps after 1 s idle
        on a "$KW" api GET /v1/sandboxes/w1 >/dev/null
        [ "$(body .state)" = sleeping ] && break
        sleep 0.2
done
assert_eq sleeping "$(body .state)" "w1 sleeps"
on b "$KW" api_json PUT /v1/sandboxes/w3 '{"keepAlive":true}'
expect_status 201
on a "$KW" api_json PUT /v1/sandboxes/w2 '{"keepAlive":true}'
expect_status 201
on a "$KW" sx w1 'true'
expect_status 403 QUOTA_EXCEEDED
assert_contains "$(body .message)" "waking 'w1'" "the wake's figures, in the tenant's names"
on a "$KW" api GET /v1/sandboxes/w1 >/dev/null
assert_eq sleeping "$(body .state)" "a wake past maxMemory across nodes wakes nothing"
on b "$KW" api DELETE /v1/sandboxes/w3 >/dev/null
expect_status 200
assert_eq 0 "$(on a "$KW" run_in w1 'echo $?')" "once b's is gone, w1 wakes"

info "the tenants' series of /metrics"
on c "$CELLA_TOKEN" api GET /metrics >"$IT_TMP/metrics"
expect_status 200
assert_eq 5 "$(awk '$1 == "cella_cluster_keys" {print $2}' "$IT_TMP/metrics")" "c's copy holds the five keys"
refused=$(awk '$1 == "cella_cluster_quota_claims_total{result=\"refused\"}" {print $2}' "$IT_TMP/metrics")
[ "${refused:-0}" -ge 2 ] || fail "c's quota refusals since its restart: [$refused], expected >= 2"

info "etcd out of reach: known keys work, a new key is 503"
stop_etcd
assert_eq 200 "$(status_on b "$KA")" "a known key on b"
on b "$KA" api GET /v1/sandboxes -m 60 >/dev/null
assert_eq true "$(body .partial)" "the list is partial"
on b "$CELLA_TOKEN" api POST /v1/keys -m 60 -H 'Content-Type: application/json' \
        --data-binary "{\"tenant\":\"$TA\"}" >/dev/null
expect_status 503 CLUSTER_UNAVAILABLE
on c "$CELLA_TOKEN" api DELETE "/v1/keys/$IDA" -m 60 >/dev/null
expect_status 503 CLUSTER_UNAVAILABLE
assert_eq 200 "$(status_on c "$KA")" "a failed removal changes nothing"
use_daemon a

info "ok"
