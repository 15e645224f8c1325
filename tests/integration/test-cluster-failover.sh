#!/bin/bash
# Failover, stale copies and drain of a cluster (docs/cluster.md, decision 0057): three
# cellad nodes on a three-member etcd, all on loopback ports of this run, sharing one backup
# store on a real S3 server (tests/s3). Checks: a node killed with SIGKILL has its names
# served again by the others once its lease lapses (the time from the kill to the first
# answer is printed), each with the files of its latest backup and `restoredFrom` where one
# was made, empty where none was (a tenant's too); the killed node restarted on its data dir
# destroys its copies of names taken meanwhile and re-claims the names still free; a name
# destroyed on purpose starts empty again; POST /v1/cluster/drain moves a node's sandboxes
# (files intact on the node that serves them next) and the draining node places no new
# names; `cellad --drain` does it and stops the node; the series of /metrics parse.
# With IT_FAILOVER_ROUNDS=N (bench/cluster-failover.sh) the kill is repeated N times and
# each failover time in ms is appended to IT_FAILOVER_TIMES.
. "$(dirname "$0")/lib.sh"
command -v etcd >/dev/null || skip "needs etcd (Debian's etcd-server)"
command -v python3 >/dev/null || skip "needs python3"
PY=
for p in python3 /usr/bin/python3; do
        if "$p" -c 'import prometheus_client' 2>/dev/null; then
                PY=$p
                break
        fi
done
[ -n "$PY" ] || skip "needs python3-prometheus-client (scripts/deps.sh)"
. "$(dirname "$0")/lib-daemons.sh"

CELLA_TOKEN=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
export CELLA_TOKEN
ROUNDS=${IT_FAILOVER_ROUNDS:-1}

now_ms() {
        echo $(($(date +%s%N) / 1000000))
}

# ---- the shared backup store: a real S3 server ----
start_s3
STORE="s3://cella-it/failover?endpoint=http://127.0.0.1:$S3PORT&region=us-east-1"

# ---- etcd: three members ----
declare -A E
ETCD_INITIAL=
for m in 1 2 3; do
        E[$m.client]=$(free_port)
        E[$m.peer]=$(free_port)
        ETCD_INITIAL+="${ETCD_INITIAL:+,}e$m=http://127.0.0.1:${E[$m.peer]}"
done
ETCD_ENDPOINTS=http://127.0.0.1:${E[1.client]},http://127.0.0.1:${E[2.client]},http://127.0.0.1:${E[3.client]}
for m in 1 2 3; do
        etcd --name "e$m" --data-dir "$IT_TMP/etcd$m" \
                --listen-client-urls "http://127.0.0.1:${E[$m.client]}" \
                --advertise-client-urls "http://127.0.0.1:${E[$m.client]}" \
                --listen-peer-urls "http://127.0.0.1:${E[$m.peer]}" \
                --initial-advertise-peer-urls "http://127.0.0.1:${E[$m.peer]}" \
                --initial-cluster "$ETCD_INITIAL" --initial-cluster-state new \
                --initial-cluster-token "cella-it-$IT_RUN" >>"$IT_TMP/etcd$m.log" 2>&1 &
        E[$m.pid]=$!
done
etcd_ok() {
        curl -sf -m 3 -X POST -d '{"key":"eA=="}' "http://127.0.0.1:${E[$1.client]}/v3/kv/range" >/dev/null
}
for i in $(seq 1 300); do
        etcd_ok 1 && etcd_ok 2 && etcd_ok 3 && break
        sleep 0.1
done
etcd_ok 1 || fail "etcd not up after 30 s: $(tail -n 5 "$IT_TMP/etcd1.log")"

# ---- cellad nodes (as test-cluster.sh starts them, with the shared store) ----
start_node() { # NAME INDEX [ARGS]: a node on a fixed port (its advertise URL), its own data dir
        local n=$1 i=$2
        shift 2
        local port=${D[$n.port]:-$(free_port)}
        D[$n.port]=$port
        CELLAD_LOG=$IT_TMP/cellad-$n.log
        [ -s "$CELLAD_LOG" ] && cat "$CELLAD_LOG" >>"$IT_TMP/cellad-$n.log.old"
        CELLAD_PID=
        start_cellad --pool 0 --data-dir "$IT_TMP/data-$n" --listen "127.0.0.1:$port" \
                --network-range "$(subrange "$i")" --cluster "etcd=$ETCD_ENDPOINTS" --node "$n" \
                --advertise "http://127.0.0.1:$port" --backup-store "$STORE" "$@"
        save_daemon "$n"
}
it_cleanup_hook() {
        for n in b c; do stop_daemon $n; done
        use_daemon a
        for m in 1 2 3; do
                kill -KILL "${E[$m.pid]}" 2>/dev/null
                wait "${E[$m.pid]}" 2>/dev/null
        done
        return 0
}
owner_of() { # NAME [QUERY]: the node owning NAME in the cluster's list seen from a
        CELLA_URL=${D[a.url]} api GET "/v1/sandboxes${2:-}" | jq -r ".sandboxes[] | select(.id == \"$1\") | .node"
}
# served_by NODE PATH: PUT PATH on NODE until it answers 200 or 201 (60 s at most: the
# owner's lease lapses within 5 s); FO_MS: the ms from $T_KILL to that answer.
served_by() {
        local t
        use_daemon "$1"
        for i in $(seq 1 600); do
                api PUT "$2" -m 60 >/dev/null
                if [ "$API_STATUS" = 200 ] || [ "$API_STATUS" = 201 ]; then
                        t=$(now_ms)
                        FO_MS=$((t - T_KILL))
                        return 0
                fi
                sleep 0.1
        done
        fail "PUT $2 on node $1 not served 60 s after the kill: $API_STATUS $(body)"
}
metric() { # NODE SERIES: its value in NODE's /metrics
        CELLA_URL=${D[$1.url]} api GET /metrics | awk -v s="$2" '$1 == s {print $2}'
}

it_net_range
start_node c 2
start_node b 1
start_node a 0
wait_nodes a a,b,c
wait_nodes c a,b,c
info "three nodes on etcd $ETCD_ENDPOINTS, backups in $STORE"

info "node c's sandboxes: one backed up, one not, a tenant's backed up, one left alone"
P=$(sbx p) Q=$(sbx q) T=$(sbx t) R=$(sbx r)
use_daemon c
for n in "$P" "$Q" "$R"; do
        api PUT "/v1/sandboxes/$n" >/dev/null
        expect_status 201
done
run_in "$P" 'mkdir -p /workspace/app && echo "precious $RANDOM" >/workspace/app/data.txt && head -c 300000 /dev/urandom >/workspace/app/blob && sha256sum /workspace/app/blob | cut -d" " -f1 >/workspace/app/blob.sum' >/dev/null
P_DATA=$(run_in "$P" 'cat /workspace/app/data.txt')
P_SUM=$(run_in "$P" 'cat /workspace/app/blob.sum')
api_json POST "/v1/sandboxes/$P/backups" '{"dir":"/workspace","name":"before-failover"}'
expect_status 201
P_BACKUP=$(body .id)
P_BACKUP_AT=$(body .createdAt)
run_in "$P" 'echo after >/workspace/app/later.txt' >/dev/null # after the backup: lost
run_in "$Q" 'echo unsaved >/workspace/q.txt' >/dev/null
api PUT "/v1/sandboxes/$T?tenant=acme" >/dev/null
expect_status 201
api_json POST "/v1/sandboxes/$T/exec?tenant=acme" '{"command":"echo acme-data >/workspace/t.txt"}'
expect_status 200
api_json POST "/v1/sandboxes/$T/backups?tenant=acme" '{"dir":"/workspace"}'
expect_status 201
T_BACKUP=$(body .id)
assert_eq "c" "$(owner_of "$P")" "P on c"
# G's backup deleted from the store, H's archive damaged in it
G=$(sbx g) H=$(sbx h)
for n in "$G" "$H"; do
        api PUT "/v1/sandboxes/$n" >/dev/null
        expect_status 201
        run_in "$n" 'echo mine >/workspace/mine.txt' >/dev/null
        api_json POST "/v1/sandboxes/$n/backups" '{"dir":"/workspace"}'
        expect_status 201
done
H_BACKUP=$(body .id)
api GET /v1/backups >/dev/null
G_BACKUP=$(body ".backups[] | select(.sandbox == \"$G\") | .id")
api DELETE "/v1/backups/$G_BACKUP" >/dev/null
expect_status 200
# s3rver keeps an object's bytes in <dir>/<bucket>/<key>._S3rver_object
archive=$(find "$IT_TMP/s3" -type f -path "*$H_BACKUP/archive.tar.zst._S3rver_object")
[ -n "$archive" ] || fail "H's archive not found in the S3 server's directory"
printf 'damaged' | dd of="$archive" bs=1 seek=20 conv=notrunc status=none

info "node c killed: its names are served by a and b once its lease lapses"
kill -KILL "${D[c.pid]}"
T_KILL=$(now_ms)
wait "${D[c.pid]}" 2>/dev/null || true
served_by a "/v1/sandboxes/$P"
info "failover time: kill -9 of c -> first answer for its name on a: $FO_MS ms (lease TTL 5 s)"
[ -n "${IT_FAILOVER_TIMES:-}" ] && echo "$FO_MS" >>"$IT_FAILOVER_TIMES"
expect_status 201
assert_eq "$P_BACKUP" "$(body .restoredFrom.backupId)" "restoredFrom names the latest backup"
assert_eq "$P_BACKUP_AT" "$(body .restoredFrom.createdAt)" "restoredFrom says when it was made"
assert_eq "/workspace" "$(body .restoredFrom.dir)" "restoredFrom's dir"
use_daemon a
assert_eq "$P_DATA" "$(run_in "$P" 'cat /workspace/app/data.txt')" "P's file restored on a"
assert_eq "$P_SUM" "$(run_in "$P" 'sha256sum /workspace/app/blob | cut -d" " -f1')" "P's blob intact"
assert_eq "no" "$(run_in "$P" 'test -e /workspace/app/later.txt && echo yes || echo no')" "what came after the backup is not there"
api GET "/v1/sandboxes/$P" >/dev/null
assert_eq "$P_BACKUP" "$(body .restoredFrom.backupId)" "GET says restoredFrom too"
assert_eq "a" "$(owner_of "$P")" "P is a's now"
served_by b "/v1/sandboxes/$Q"
info "Q served by b $FO_MS ms after the kill"
assert_eq "null" "$(body .restoredFrom)" "no backup: no restoredFrom"
use_daemon b
assert_eq "no" "$(run_in "$Q" 'test -e /workspace/q.txt && echo yes || echo no')" "no backup: empty"
served_by b "/v1/sandboxes/$T?tenant=acme"
assert_eq "$T_BACKUP" "$(body .restoredFrom.backupId)" "a tenant's sandbox restored"
api_json POST "/v1/sandboxes/$T/exec?tenant=acme" '{"command":"cat /workspace/t.txt"}'
expect_status 200
assert_eq "acme-data" "$(body .stdout | tr -d '\n')" "the tenant's file restored"

served_by a "/v1/sandboxes/$G"
assert_eq "null" "$(body .restoredFrom)" "a backup gone from the store: no restoredFrom"
use_daemon a
assert_eq "no" "$(run_in "$G" 'test -e /workspace/mine.txt && echo yes || echo no')" "and empty"
use_daemon a
api PUT "/v1/sandboxes/$H" >/dev/null
expect_status 500 BACKUP_RESTORE_FAILED
assert_contains "$(body .message)" "$H_BACKUP" "the failed restore names the backup"
api GET "/v1/sandboxes/$H" >/dev/null
expect_status 404 SANDBOX_NOT_FOUND
assert_eq "" "$(owner_of "$H")" "the name is given back"
api PUT "/v1/sandboxes/$H" >/dev/null
expect_status 500 BACKUP_RESTORE_FAILED # the backup still recorded: tried again

info "node c back on its data dir: its stale copies go, its free names stay"
start_node c 2
wait_nodes a a,b,c
use_daemon c
for i in $(seq 1 300); do
        [ "$(metric c cella_cluster_stale_copies_destroyed_total)" = 4 ] && break
        sleep 0.1
done
assert_eq "4" "$(metric c cella_cluster_stale_copies_destroyed_total)" "c destroyed P, Q, T and G here"
assert_contains "$(cat "${D[c.log]}")" "sandbox '$P' is owned by node 'a': the stale copy here is destroyed" "logged"
api GET "/v1/sandboxes/$P" >/dev/null
expect_status 404 SANDBOX_NOT_FOUND
api GET "/v1/sandboxes/$R" >/dev/null
expect_status 200
for i in $(seq 1 100); do
        [ "$(owner_of "$R")" = c ] && break
        sleep 0.1
done
assert_eq "c" "$(owner_of "$R")" "c re-claimed the name still free"
assert_eq "c" "$(owner_of "$H")" "and the one whose restore failed, with its files"
assert_eq "mine" "$(run_in "$H" 'cat /workspace/mine.txt')" "H's own copy serves"
use_daemon a
assert_eq "$P_DATA" "$(run_in "$P" 'cat /workspace/app/data.txt')" "a's P untouched"

info "a name destroyed on purpose starts empty"
api DELETE "/v1/sandboxes/$P" >/dev/null
expect_status 200
use_daemon b
api PUT "/v1/sandboxes/$P" >/dev/null
expect_status 201
assert_eq "null" "$(body .restoredFrom)" "no restoredFrom after a destroy"
assert_eq "no" "$(run_in "$P" 'test -e /workspace/app/data.txt && echo yes || echo no')" "empty"
api DELETE "/v1/sandboxes/$P" >/dev/null

info "drain of node b: its sandboxes move, it places no new names"
M=$(sbx m)
api PUT "/v1/sandboxes/$M" >/dev/null
expect_status 201
run_in "$M" 'mkdir -p /workspace/src && echo "moved $RANDOM" >/workspace/src/main.c' >/dev/null
M_DATA=$(run_in "$M" 'cat /workspace/src/main.c')
api_json POST /v1/cluster/drain '{"stop":1}'
expect_status 400 VALIDATION_FAILED
CELLA_TOKEN=$(CELLA_URL=${D[b.url]} api_json POST /v1/keys '{"tenant":"acme"}' && body .key) \
        api_json POST /v1/cluster/drain '{}'
expect_status 403 PERMISSION_DENIED
api_json POST /v1/cluster/drain '{}'
expect_status 200
info "drain of b: $(jq -c '{drained: [.drained[].id], failed, durationMs}' <"$IT_TMP/body")"
assert_eq "0" "$(body '.failed | length')" "nothing failed"
assert_eq "false" "$(body .stopping)" "b keeps running"
M_BACKUP=$(body ".drained[] | select(.id == \"$M\") | .backupId")
[ -n "$M_BACKUP" ] || fail "M not in the drain's answer: $(body)"
assert_eq "acme" "$(body ".drained[] | select(.id == \"$T\") | .tenant")" "the tenant's sandbox drained"
api GET "/v1/sandboxes/$M" >/dev/null
expect_status 404 SANDBOX_NOT_FOUND
assert_eq "true" "$(CELLA_URL=${D[a.url]} api GET /v1/cluster/nodes | jq -r '.nodes[] | select(.node == "b") | .draining')" "b's record says draining"
assert_eq "1" "$(metric b cella_cluster_draining)" "the draining gauge"
api PUT "/v1/sandboxes/$(sbx new)" >/dev/null
expect_status 503 CLUSTER_UNAVAILABLE
assert_contains "$(body .message)" "draining" "the refusal says why"
use_daemon a
api PUT "/v1/sandboxes/$M" >/dev/null
expect_status 201
assert_eq "$M_BACKUP" "$(body .restoredFrom.backupId)" "M restored from the drain's backup"
assert_eq "$M_DATA" "$(run_in "$M" 'cat /workspace/src/main.c')" "M's files intact on a"
api PUT "/v1/sandboxes/$T?tenant=acme" >/dev/null
expect_status 201
api_json POST "/v1/sandboxes/$T/exec?tenant=acme" '{"command":"cat /workspace/t.txt"}'
assert_eq "acme-data" "$(body .stdout | tr -d '\n')" "the tenant's files moved twice"

info "cellad --drain: node c hands R over and stops"
out=$(CELLA_TOKEN=$CELLA_TOKEN "$CELLA_BUILD/cellad" --drain --listen "127.0.0.1:${D[c.port]}" 2>"$IT_TMP/drain.err") ||
        fail "cellad --drain failed: $out $(cat "$IT_TMP/drain.err")"
assert_eq "true" "$(echo "$out" | jq -r .stopping)" "the node stops"
R_BACKUP=$(echo "$out" | jq -r ".drained[] | select(.id == \"$R\") | .backupId")
for i in $(seq 1 100); do
        kill -0 "${D[c.pid]}" 2>/dev/null || break
        sleep 0.1
done
kill -0 "${D[c.pid]}" 2>/dev/null && fail "c still runs after cellad --drain"
wait "${D[c.pid]}" 2>/dev/null || true
wait_nodes a a,b
use_daemon a
api PUT "/v1/sandboxes/$R" >/dev/null
expect_status 201
assert_eq "$R_BACKUP" "$(body .restoredFrom.backupId)" "R restored on a"

info "/metrics: the failover's series"
api GET /metrics >"$IT_TMP/metrics"
expect_status 200
"$PY" - "$IT_TMP/metrics" <<'EOF' || fail "/metrics does not parse or lacks the failover series"
import sys
from prometheus_client.parser import text_string_to_metric_families
fams = {f.name: f for f in text_string_to_metric_families(open(sys.argv[1]).read())}
r = {s.labels["result"]: s.value for s in fams["cella_cluster_failover_restores"].samples}
assert r["restored"] >= 3, r  # P, M, R (T went to b)
assert r["failed"] == 2, r  # H, twice
assert r["fresh"] >= 1, r  # G
assert fams["cella_cluster_draining"].samples[0].value == 0
assert fams["cella_cluster_stale_copies_destroyed"].samples[0].value == 0
EOF

info "backups on a schedule: node c with --cluster-backup-every 1s"
start_node c 2 --cluster-backup-every 1s
wait_nodes a a,b,c
use_daemon c
S=$(sbx s)
api PUT "/v1/sandboxes/$S" >/dev/null
expect_status 201
run_in "$S" 'echo "scheduled $RANDOM" >/workspace/s.txt' >/dev/null
S_DATA=$(run_in "$S" 'cat /workspace/s.txt')
auto_ok() { metric c 'cella_cluster_scheduled_backups_total{result="ok"}'; }
# wait_auto N: until N scheduled backups were made (30 s at most)
wait_auto() {
        for i in $(seq 1 300); do
                [ "$(auto_ok)" -ge "$1" ] && return 0
                sleep 0.1
        done
        grep -E 'backup|cluster' "${D[c.log]}" | tail -n 20 >&2
        fail "not $1 scheduled backups of $S within 30 s: $(auto_ok) ok, $(metric c 'cella_cluster_scheduled_backups_total{result="error"}') failed"
}
# Activity during a scheduled backup is not seen by the schedule (the backup's own touches
# hide it: decision 0057), so the write may fall in the first one. An exec, a backup, an
# exec, a backup: the second exec came when none was running (the first exec's backup had
# ended, and nothing touched the sandbox since), so the last backup began after the write.
for k in 1 2; do
        n=$(auto_ok)
        run_in "$S" 'true' >/dev/null
        wait_auto $((n + 1))
done
# the sandbox idle since: no more backups of it, and one kept (each replaced the one before)
autos() { api GET /v1/backups | jq -r "[.backups[] | select(.sandbox == \"$S\" and .name == \"auto\")] | length"; }
for i in $(seq 1 100); do
        [ "$(autos)" = 1 ] && break
        sleep 0.1
done
assert_eq "1" "$(autos)" "one scheduled backup of $S kept"
# idle (a backup is no activity): three more periods make no backup of it
n=$(auto_ok)
sleep 3.5
assert_eq "$n" "$(auto_ok)" "an idle sandbox is not backed up again"
S_BACKUP=$(api GET /v1/backups | jq -r "[.backups[] | select(.sandbox == \"$S\" and .name == \"auto\")][0].id")
kill -KILL "${D[c.pid]}"
T_KILL=$(now_ms)
wait "${D[c.pid]}" 2>/dev/null || true
served_by a "/v1/sandboxes/$S"
info "a sandbox backed up on a schedule served by a $FO_MS ms after the kill"
assert_eq "$S_BACKUP" "$(body .restoredFrom.backupId)" "restored from the scheduled backup"
assert_eq "$S_DATA" "$(run_in "$S" 'cat /workspace/s.txt')" "its file restored"
start_node c 2
for i in $(seq 1 300); do
        [ "$(metric c cella_cluster_stale_copies_destroyed_total)" = 1 ] && break
        sleep 0.1
done
assert_eq "1" "$(metric c cella_cluster_stale_copies_destroyed_total)" "c's copy of $S destroyed"
stop_daemon c
D[c.log]=
use_daemon a

# ---- more rounds: the failover time alone (bench/cluster-failover.sh) ----
for round in $(seq 2 "$ROUNDS"); do
        victim=c
        start_node c 2
        wait_nodes a a,b,c
        use_daemon c
        X=$(sbx "x$round")
        api PUT "/v1/sandboxes/$X" >/dev/null
        expect_status 201
        api_json POST "/v1/sandboxes/$X/backups" '{"dir":"/workspace"}'
        expect_status 201
        kill -KILL "${D[$victim.pid]}"
        T_KILL=$(now_ms)
        wait "${D[$victim.pid]}" 2>/dev/null || true
        served_by a "/v1/sandboxes/$X"
        info "round $round: failover time $FO_MS ms"
        [ -n "${IT_FAILOVER_TIMES:-}" ] && echo "$FO_MS" >>"$IT_FAILOVER_TIMES"
        assert_ne "null" "$(body .restoredFrom.backupId)" "round $round restored"
        # c back: its stale copy goes before the next round
        start_node c 2
        for i in $(seq 1 300); do
                [ "$(metric c cella_cluster_stale_copies_destroyed_total)" = 1 ] && break
                sleep 0.1
        done
        assert_eq "1" "$(metric c cella_cluster_stale_copies_destroyed_total)" "round $round: c's stale copy destroyed"
        stop_daemon c
        D[c.log]=
        use_daemon a
        api DELETE "/v1/sandboxes/$X" >/dev/null
done

info "ok"
