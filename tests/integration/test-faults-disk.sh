#!/bin/bash
# Faults: the data directory's filesystem full (a tmpfs of FAULTS_DISK_SIZE, 160M, mounted
# by the test as the data dir and filled from the host). Creating a sandbox, writing a
# file, exposing a port and setting env each either work or answer 507 with a clear
# message (INSUFFICIENT_STORAGE for cellad's own writes, NO_SPACE for a sandbox's disk),
# never 500, never a crash; what answered 507 did not happen (the API does not show it,
# nor does it come back after a restart); the registry passes PRAGMA integrity_check; once
# the space is back everything works again, and a restart finds what was made since. A
# cellad SIGKILLed and started while the disk is full reattaches its sandboxes.
. "$(dirname "$0")/lib.sh"
command -v sqlite3 >/dev/null || skip "needs sqlite3 (scripts/deps.sh)"

DATA=$IT_TMP/data
mkdir -p "$DATA"
mount -t tmpfs -o size="${FAULTS_DISK_SIZE:-160M}",mode=0700 cella-faults "$DATA" ||
        skip "cannot mount a tmpfs"
it_cleanup_hook() {
        stop_cellad
        umount "$DATA" 2>/dev/null || umount -l "$DATA"
}

start_cellad --pool 1 --disk-limit-override 64M
A=$(sbx a)
B=$(sbx b)
api_json PUT "/v1/sandboxes/$A" '{"keepAlive":true,"env":{"BEFORE":"1"}}'
expect_status 201
run_in "$A" 'echo kept >/workspace/kept.txt' >/dev/null
api_json POST "/v1/sandboxes/$A/processes" '{"command":"sleep 100000","processId":"bg"}'
expect_status 200
wait_pool_ready 1

info "filling $DATA"
dd if=/dev/zero of="$DATA/fill" bs=1M 2>/dev/null || true
dd if=/dev/zero of="$DATA/fill-tail" bs=4k 2>/dev/null || true
assert_eq 0 "$(df --output=avail -B1 "$DATA" | tail -n 1 | tr -d ' ')" "free bytes after the fill"

# either STEP: the last answer is a success, or 507 with a code and a message.
either() {
        case "$API_STATUS" in
        2??) info "$1: $API_STATUS" ;;
        507)
                assert_contains "INSUFFICIENT_STORAGE NO_SPACE" "$(body .code)" "$1: code"
                assert_eq 507 "$(body .httpStatus)" "$1: httpStatus"
                [ -n "$(body .message)" ] || fail "$1: 507 without a message"
                info "$1: 507 $(body .code): $(body .message)"
                ;;
        *) fail "$1: HTTP $API_STATUS: $(head -c 400 "$IT_TMP/body")" ;;
        esac
}

api_json PUT "/v1/sandboxes/$B" '{"labels":{"made":"full"}}'
either "create a sandbox"
created=$API_STATUS
api_json PUT "/v1/sandboxes/$(sbx c)" '{"network":"none"}'
either "create a sandbox (not from the pool)"
created_c=$API_STATUS
head -c 1048576 /dev/urandom >"$IT_TMP/blob"
api PUT "/v1/sandboxes/$A/files?path=/workspace/blob" --data-binary "@$IT_TMP/blob" >/dev/null
either "write a file"
api_json POST "/v1/sandboxes/$A/ports" '{"port":8000}'
either "expose a port"
exposed=$API_STATUS
api_json POST "/v1/sandboxes/$A/env" '{"vars":{"FULL":"1"}}'
either "set env"
env_set=$API_STATUS
api_json PUT "/v1/sandboxes/$A" '{"labels":{"full":"1"}}'
either "update a sandbox"
labelled=$API_STATUS
# The registry's -wal has room for small records left from before the fill; a large one
# needs new blocks.
{ printf '{"vars":{"BIG":"'; head -c 1500000 /dev/zero | tr '\0' x; printf '"}}'; } >"$IT_TMP/big.json"
api POST "/v1/sandboxes/$A/env" -H 'Content-Type: application/json' \
        --data-binary "@$IT_TMP/big.json" >/dev/null
expect_status 507 INSUFFICIENT_STORAGE
info "set a large env: 507 $(body .message)"
kill -0 "$CELLAD_PID" || fail "cellad died on a full disk"
assert_eq kept "$(run_in "$A" 'cat /workspace/kept.txt')" "exec and a read on a full disk"

info "what answered 507 did not happen"
api GET "/v1/sandboxes/$A" >/dev/null
expect_status 200
[ "$env_set" = 200 ] || assert_eq null "$(body .env.FULL)" "env that answered $env_set"
assert_eq null "$(body .env.BIG)" "env that answered 507"
[ "$labelled" = 200 ] || assert_eq null "$(body .labels.full)" "labels that answered $labelled"
api GET "/v1/sandboxes/$A/ports" >/dev/null
[ "$exposed" = 201 ] || assert_eq 0 "$(body '.ports | length')" "port that answered $exposed"
api GET "/v1/sandboxes/$B" >/dev/null
[ "$created" = 201 ] || expect_status 404 SANDBOX_NOT_FOUND
api GET /v1/health >/dev/null
expect_status 200
assert_eq ok "$(sqlite3 "$DATA/cella.db" 'PRAGMA integrity_check')" "registry on a full disk"

info "cellad SIGKILLed and started again on the full disk"
kill -KILL "$CELLAD_PID"
wait "$CELLAD_PID" 2>/dev/null || true
CELLAD_PID=
start_cellad --pool 1 --disk-limit-override 64M
grep -q "sandbox '$A' reattached" "$CELLAD_LOG" || fail "$A not reattached on a full disk"
api GET "/v1/sandboxes/$A/processes/bg" >/dev/null
assert_eq running "$(body .status)" "background process of $A on a full disk"
api_json PUT "/v1/sandboxes/$B" '{}'
either "create a sandbox after the restart"

info "space back"
rm -f "$DATA/fill" "$DATA/fill-tail"
api_json PUT "/v1/sandboxes/$B" '{"labels":{"made":"after"}}'
[ "$API_STATUS" = 200 ] || expect_status 201
api_json PUT "/v1/sandboxes/$(sbx c)" '{"network":"none"}'
[ "$API_STATUS" = 200 ] || expect_status 201
api PUT "/v1/sandboxes/$A/files?path=/workspace/blob" --data-binary "@$IT_TMP/blob" >/dev/null
expect_status 200
api_json POST "/v1/sandboxes/$A/ports" '{"port":8000}'
[ "$API_STATUS" = 200 ] || expect_status 201
api_json POST "/v1/sandboxes/$A/env" '{"vars":{"AFTER":"1"}}'
expect_status 200
assert_eq after "$(run_in "$B" 'echo after')" "exec in the sandbox made after"

info "restart: the registry holds what was made"
kill -TERM "$CELLAD_PID"
wait "$CELLAD_PID" 2>/dev/null || true
CELLAD_PID=
assert_eq ok "$(sqlite3 "$DATA/cella.db" 'PRAGMA integrity_check')" "registry after the stop"
start_cellad --pool 1 --disk-limit-override 64M
! grep -q 'registry: rebuilt' "$CELLAD_LOG" || fail "the registry was rebuilt"
api GET "/v1/sandboxes/$A" >/dev/null
assert_eq "running 1 1" "$(body '"\(.state) \(.env.BEFORE) \(.env.AFTER)"')" "sandbox $A"
api GET "/v1/sandboxes/$A/ports" >/dev/null
assert_eq 8000 "$(body '.ports[].port')" "exposed port"
api GET "/v1/sandboxes/$B" >/dev/null
assert_eq after "$(body .labels.made)" "sandbox $B"
assert_eq "$(sha256sum <"$IT_TMP/blob" | cut -d' ' -f1)" \
        "$(curl -sS -f "$CELLA_URL/v1/sandboxes/$A/files?path=/workspace/blob" | sha256sum |
                cut -d' ' -f1)" "file written after the space came back"
api GET "/v1/sandboxes/$A/processes/bg" >/dev/null
assert_eq running "$(body .status)" "background process of $A"
info "disk full: ok"
