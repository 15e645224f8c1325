#!/bin/bash
# Idle sleep: after sleepAfter without activity a sandbox's processes stop and its memory
# is freed, its files stay; the next operation wakes it with them. A running command is
# activity; keepAlive disables sleep; GET does not wake.
. "$(dirname "$0")/lib.sh"
start_cellad

S=$(sbx nap)
K=$(sbx awake)
api_json PUT "/v1/sandboxes/$S" '{"sleepAfter":"2s"}'
expect_status 201
assert_eq 2 "$(body .sleepAfter)" "sleepAfter in seconds"
api_json PUT "/v1/sandboxes/$K" '{"sleepAfter":1,"keepAlive":true}'
expect_status 201
assert_eq true "$(body .keepAlive)" "keepAlive"

api_json PUT "/v1/sandboxes/$S" '{"sleepAfter":"2x"}'
expect_status 400 VALIDATION_FAILED

info "a command longer than sleepAfter is activity"
assert_eq done "$(run_in "$S" 'echo kept >/workspace/k.txt; sleep 3.5; echo done')" \
        "long command finished"
api GET "/v1/sandboxes/$S" >/dev/null
assert_eq running "$(body .state)" "running right after a long command"

info "idle: sleeps"
for i in $(seq 1 60); do
        api GET "/v1/sandboxes/$S" >/dev/null
        [ "$(body .state)" = sleeping ] && break
        sleep 0.2
done
assert_eq sleeping "$(body .state)" "state after sleepAfter idle"
assert_eq "" "$(sandbox_pids "$S")" "no process of a sleeping sandbox"
assert_eq "" "$(sandbox_cgroups "$S")" "no cgroup of a sleeping sandbox"
sleep 1
api GET "/v1/sandboxes/$S" >/dev/null
assert_eq sleeping "$(body .state)" "GET does not wake"

info "wakes with its files"
assert_eq kept "$(run_in "$S" 'cat /workspace/k.txt')" "file after wake"
api GET "/v1/sandboxes/$S" >/dev/null
assert_eq running "$(body .state)" "state after wake"

info "keepAlive: never sleeps"
run_in "$K" true >/dev/null
sleep 2.5
api GET "/v1/sandboxes/$K" >/dev/null
assert_eq running "$(body .state)" "keepAlive sandbox still running"
[ -n "$(sandbox_pids "$K")" ] || fail "keepAlive sandbox lost its processes"
info "sleep: ok"
