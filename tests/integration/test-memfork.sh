#!/usr/bin/env bash
# Memory fork (docs/decisions/0050-memory-sleep.md, "memory fork"): POST /fork {"name",
# "memory": true} makes a child that has the parent's processes as well as its files.
# Where the CRIU cellad runs can checkpoint a sandbox here (elsewhere: skipped; the 501 of
# such a host is integration/memsleep's):
# * a parent running a python http.server (a background process) and a code context
#   holding x = 41 is forked with its memory: 201, the child's SandboxInfo with its
#   snapshot and forkedWithMemory; the parent runs on throughout;
# * in the child the server answers (an exec's request to 127.0.0.1, and through a port
#   the child exposes, its own preview URL), x + 1 is 42 and executionCount goes on, its
#   hostname is its own name, its address is its own (not the parent's), and its
#   processes run under its own host uids (their uid_map and status read from the host);
# * parent and child are independent: x = 0 in the child leaves 41 in the parent, a file
#   written in the child is not in the parent, the parent still answers exec, a session
#   and its code context;
# * a failed restore (a stand-in CRIU whose restore fails) is 500 MEMORY_FORK_FAILED with
#   CRIU's reason, leaves no child and no snapshot, and the parent running and answering;
# * `cella fork --memory` makes such a child too;
# * the parent destroyed, the child works on.
source "$(dirname "$0")/lib.sh"

start_cellad

CRIU_BIN=criu
[ -x /var/cache/cella/criu/criu ] && CRIU_BIN=/var/cache/cella/criu/criu
api GET /v1/health >/dev/null
[ "$(body .memorySleep.available)" = true ] ||
        skip "memory sleep unavailable here: $(body .memorySleep.reason)"

P=8765
A=$(sbx parent)
info "the parent: a python http.server and a code context"
api_json PUT "/v1/sandboxes/$A" '{}'
expect_status 201
run_in "$A" 'echo kept >/workspace/kept.txt; echo page >/workspace/index.html' >/dev/null
api_json POST "/v1/sandboxes/$A/processes" \
        "{\"command\":\"cd /workspace && exec python3 -m http.server $P\",\"processId\":\"web\"}"
expect_status 200
api_json POST "/v1/sandboxes/$A/processes/web/waitForPort" "{\"port\":$P,\"timeout\":30000}"
expect_status 200
api GET "/v1/sandboxes/$A/processes/web" >/dev/null
WEBPID=$(body .pid)
api_json POST "/v1/sandboxes/$A/contexts" '{"language":"python"}'
expect_status 201
CTX=$(body .id)
api_json POST "/v1/sandboxes/$A/code" "{\"code\":\"x = 41\\nx + 1\",\"contextId\":\"$CTX\"}"
expect_status 200
assert_eq 42 "$(body '.results[0].text')" "the parent's variable"
api_json POST "/v1/sandboxes/$A/sessions" '{"id":"s1"}'
expect_status 201
api_json POST "/v1/sandboxes/$A/exec" '{"command":"cd /tmp","sessionId":"s1"}'
expect_status 200
# a file of /tmp (the writable layer: the child's snapshot) and one of /dev/shm (the /dev
# tmpfs: the parent's dump)
run_in "$A" 'echo p-tmp >/tmp/from-parent; echo p-shm >/dev/shm/from-parent' >/dev/null
APIDS_BEFORE=$(sandbox_pids "$A" | sort | tr '\n' ' ')
AADDR=$(run_in "$A" 'ip -4 -o addr show dev eth0' | awk '{print $4}')
[ -n "$AADDR" ] || fail "the parent has no address"

info "fork with memory: the child's SandboxInfo"
api GET /v1/snapshots >/dev/null
snaps=$(body '.snapshots | length')
C=$(sbx child)
api_json POST "/v1/sandboxes/$A/fork" "{\"name\":\"$C\",\"memory\":true}"
expect_status 201
assert_eq "$C" "$(body .id)" "the child's name"
assert_eq true "$(body .forkedWithMemory)" "forkedWithMemory"
assert_eq running "$(body .state)" "the child runs"
[ "$(body .snapshot)" != null ] || fail "the child has no snapshot: $(body)"
api GET /v1/snapshots >/dev/null
assert_eq $((snaps + 1)) "$(body '.snapshots | length')" "one snapshot: the child's files"
api GET "/v1/sandboxes/$A" >/dev/null
assert_eq running "$(body .state)" "the parent runs on"
assert_eq "$APIDS_BEFORE" "$(sandbox_pids "$A" | sort | tr '\n' ' ')" "the parent's processes are the same"
assert_contains "$(cat "$CELLAD_LOG")" "sandbox '$A': memory fork's dump" "the dump in cellad's log"

info "the child: the server, the context's variable, its own name and address"
api GET "/v1/sandboxes/$C/processes/web" >/dev/null
expect_status 200
assert_eq running "$(body .status)" "the background server is there"
assert_eq "$WEBPID" "$(body .pid)" "with its pid (inside the sandbox)"
assert_eq page "$(run_in "$C" "python3 -c 'import urllib.request as u; print(u.urlopen(\"http://127.0.0.1:$P/index.html\").read().decode().strip())'")" \
        "the server through an exec"
api_json POST "/v1/sandboxes/$C/code" "{\"code\":\"x + 1\",\"contextId\":\"$CTX\"}"
expect_status 200
assert_eq 42 "$(body '.results[0].text')" "the context's variable in the child"
assert_eq 2 "$(body .executionCount)" "the same interpreter's count goes on"
assert_eq "$C" "$(run_in "$C" 'hostname')" "the child's hostname"
assert_eq "p-tmp p-shm" "$(run_in "$C" 'echo $(cat /tmp/from-parent /dev/shm/from-parent)')" \
        "the parent's files of /tmp and /dev/shm in the child"
CADDR=$(run_in "$C" 'ip -4 -o addr show dev eth0' | awk '{print $4}')
[ -n "$CADDR" ] || fail "the child has no address"
assert_ne "$AADDR" "$CADDR" "the child's address is its own"
api_json POST "/v1/sandboxes/$C/ports" "{\"port\":$P}"
expect_status 201
TOKEN=$(body .url | sed -E "s#^http://$P-$C-([a-z0-9_]+)\..*#\1#")
HOSTPORT=${CELLA_URL#http://}
code=$(curl -sS -o "$IT_TMP/pv" -w '%{http_code}' -H "Host: $P-$C-$TOKEN.localhost:${HOSTPORT##*:}" \
        "$CELLA_URL/index.html")
assert_eq 200 "$code" "the child's own preview URL"
assert_eq page "$(cat "$IT_TMP/pv")" "its page"

info "the child's processes run under its own host uids"
ASLOT=$(sandbox_slot "$A")
CSLOT=$(sandbox_slot "$C")
assert_ne "$ASLOT" "$CSLOT" "its own slot"
APIDS=$(sandbox_pids "$A")
CPIDS=$(sandbox_pids "$C")
abase=
for p in $APIDS; do
        abase=$(awk 'NR == 1 {print $2}' "/proc/$p/uid_map" 2>/dev/null) && [ -n "$abase" ] && break
done
[ -n "$abase" ] || fail "no uid map of the parent"
n=0
for p in $CPIDS; do
        m=$(awk 'NR == 1 {print $1, $2, $3}' "/proc/$p/uid_map" 2>/dev/null) || continue
        [ -n "$m" ] || continue
        set -- $m
        assert_eq 0 "$1" "the child's map starts at root"
        assert_ne "$abase" "$2" "the child's map is not the parent's"
        uid=$(awk '/^Uid:/ {print $3}' "/proc/$p/status" 2>/dev/null) || continue
        [ -n "$uid" ] || continue
        [ "$uid" -ge "$2" ] && [ "$uid" -lt $(($2 + $3)) ] ||
                fail "pid $p of the child runs as host uid $uid, outside its range $2+$3"
        [ "$uid" -lt "$abase" ] || [ "$uid" -ge $((abase + 65536)) ] ||
                fail "pid $p of the child runs as host uid $uid, the parent's"
        n=$((n + 1))
done
[ "$n" -ge 3 ] || fail "only $n processes of the child looked at"
c1=$(echo "$CPIDS" | head -1)
cbase=$(awk 'NR == 1 {print $2}' "/proc/$c1/uid_map")
assert_eq "$cbase" "$(stat -c %u "/proc/$c1/root/workspace/kept.txt")" \
        "the parent's files are the child's root's (host uid $cbase)"

info "parent and child are independent"
api_json POST "/v1/sandboxes/$C/code" "{\"code\":\"x = 0\\nx\",\"contextId\":\"$CTX\"}"
expect_status 200
assert_eq 0 "$(body '.results[0].text')" "x = 0 in the child"
api_json POST "/v1/sandboxes/$A/code" "{\"code\":\"x\",\"contextId\":\"$CTX\"}"
expect_status 200
assert_eq 41 "$(body '.results[0].text')" "the parent keeps 41"
assert_eq 2 "$(body .executionCount)" "the parent's own count"
run_in "$C" 'echo child >/workspace/child.txt' >/dev/null
assert_eq no "$(run_in "$A" 'cat /workspace/child.txt 2>/dev/null || echo no')" \
        "a file of the child is not the parent's"
assert_eq kept "$(run_in "$C" 'cat /workspace/kept.txt')" "the child has the parent's files"
api_json POST "/v1/sandboxes/$C/exec" '{"command":"pwd; cd /workspace","sessionId":"s1"}'
expect_status 200
assert_eq /tmp "$(body .stdout | tr -d '\n')" "the child has the parent's session, in its directory"
api_json POST "/v1/sandboxes/$A/exec" '{"command":"echo $((40 + 2)); pwd","sessionId":"s1"}'
expect_status 200
assert_eq "42/tmp" "$(body .stdout | tr -d '\n')" "the parent's session answers, its cd its own"
assert_eq page "$(run_in "$A" "python3 -c 'import urllib.request as u; print(u.urlopen(\"http://127.0.0.1:$P/index.html\").read().decode().strip())'")" \
        "the parent's server answers"
run_in "$A" 'ip -4 -o addr show dev eth0' | grep -q "$AADDR" || fail "the parent lost its address"

info "a failed restore: 500 MEMORY_FORK_FAILED, no child, no snapshot, the parent unharmed"
cat >"$IT_TMP/criu-norestore" <<EOF
#!/bin/sh
[ "\$1" = restore ] && { echo "Error (criu/cr-restore.c:1): stand-in refuses to restore" >&2; exit 1; }
exec $CRIU_BIN "\$@"
EOF
chmod 755 "$IT_TMP/criu-norestore"
export CELLA_CRIU=$IT_TMP/criu-norestore
RESTART_ARGS=(--listen "${CELLA_URL#http://}")
RESTARTS=0
restart_daemon "a criu whose restore fails" || fail "$RESTART_ERR"
unset CELLA_CRIU
api GET /v1/snapshots >/dev/null
snaps=$(body '.snapshots | length')
F=$(sbx failed)
api_json POST "/v1/sandboxes/$A/fork" "{\"name\":\"$F\",\"memory\":true}"
expect_status 500 MEMORY_FORK_FAILED
assert_contains "$(body .message)" "fork with memory: criu restore failed: stand-in refuses to restore" \
        "CRIU's reason"
api GET "/v1/sandboxes/$F" >/dev/null
expect_status 404 SANDBOX_NOT_FOUND
api GET /v1/snapshots >/dev/null
assert_eq "$snaps" "$(body '.snapshots | length')" "no snapshot left"
[ -z "$(ls -d "$IT_TMP"/data/sandboxes/*/memfork-* 2>/dev/null)" ] || fail "images left behind"
api GET "/v1/sandboxes/$A" >/dev/null
assert_eq running "$(body .state)" "the parent runs"
api_json POST "/v1/sandboxes/$A/code" "{\"code\":\"x\",\"contextId\":\"$CTX\"}"
expect_status 200
assert_eq 41 "$(body '.results[0].text')" "the parent's context answers"
assert_eq page "$(run_in "$A" "python3 -c 'import urllib.request as u; print(u.urlopen(\"http://127.0.0.1:$P/index.html\").read().decode().strip())'")" \
        "the parent's server answers"
restart_daemon "the host's criu again" || fail "$RESTART_ERR"

info "the CLI: cella fork --memory"
K=$(sbx cli)
out=$("$CELLA_BUILD/cella" fork "$A" "$K" --memory) || fail "cella fork --memory: $out"
assert_contains "$out" "forked '$A' into '$K'" "its line"
api GET "/v1/sandboxes/$K/processes/web" >/dev/null
expect_status 200
assert_eq running "$(body .status)" "the CLI's child has the server"
api_json POST "/v1/sandboxes/$K/code" "{\"code\":\"x\",\"contextId\":\"$CTX\"}"
expect_status 200
assert_eq 41 "$(body '.results[0].text')" "and the parent's variable of now"
api DELETE "/v1/sandboxes/$K" >/dev/null
expect_status 200

info "the parent destroyed: the child works on"
api DELETE "/v1/sandboxes/$A" >/dev/null
expect_status 200
api_json POST "/v1/sandboxes/$C/code" "{\"code\":\"x + 5\",\"contextId\":\"$CTX\"}"
expect_status 200
assert_eq 5 "$(body '.results[0].text')" "the child's context"
assert_eq page "$(run_in "$C" "python3 -c 'import urllib.request as u; print(u.urlopen(\"http://127.0.0.1:$P/index.html\").read().decode().strip())'")" \
        "the child's server"
assert_eq child "$(run_in "$C" 'cat /workspace/child.txt')" "the child's files"
info "memfork: ok"
