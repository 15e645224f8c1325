#!/bin/bash
# Idle sleep: after sleepAfter without activity a sandbox's processes stop and its memory
# is freed, its files stay (/tmp among them; /dev/shm, in memory, does not); the next
# operation wakes it with them. A running command is
# activity; keepAlive disables sleep; GET does not wake. A wait (cella wait, the
# waitForLog/waitForPort/waitForExit routes, a process's /stream) is activity for as long as
# it is open: it outlasts 2x sleepAfter with the sandbox awake, and the sandbox sleeps once
# it is idle again. POST /sleep puts one to sleep now (decision 0063): keepAlive and an
# open stream do not stop it, a sleeping one is answered as it is, a stopped one is 409.
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
assert_eq done "$(run_in "$S" 'echo kept >/workspace/k.txt; echo kept-tmp >/tmp/k.txt; echo gone >/dev/shm/k.txt; sleep 3.5; echo done')" \
        "long command finished"
api GET "/v1/sandboxes/$S" >/dev/null
assert_eq running "$(body .state)" "running right after a long command"

info "idle: sleeps"
wait_sleeping "$S" 12
assert_eq "" "$(sandbox_pids "$S")" "no process of a sleeping sandbox"
assert_eq "" "$(sandbox_cgroups "$S")" "no cgroup of a sleeping sandbox"
sleep 1
api GET "/v1/sandboxes/$S" >/dev/null
assert_eq sleeping "$(body .state)" "GET does not wake"

info "wakes with its files"
assert_eq kept "$(run_in "$S" 'cat /workspace/k.txt')" "file after wake"
# /tmp is of the sandbox's files (the writable layer, decision 0050), /dev/shm of its
# memory (the /dev tmpfs, new at each start)
assert_eq kept-tmp "$(run_in "$S" 'cat /tmp/k.txt')" "a file of /tmp after a files wake"
assert_eq "" "$(run_in "$S" 'ls -A /dev/shm')" "/dev/shm empty after a files wake"
api GET "/v1/sandboxes/$S" >/dev/null
assert_eq running "$(body .state)" "state after wake"

info "keepAlive: never sleeps"
run_in "$K" true >/dev/null
sleep 2.5
api GET "/v1/sandboxes/$K" >/dev/null
assert_eq running "$(body .state)" "keepAlive sandbox still running"
[ -n "$(sandbox_pids "$K")" ] || fail "keepAlive sandbox lost its processes"
info "a wait longer than sleepAfter keeps the sandbox awake"
CLI=$CELLA_BUILD/cella
W=$(sbx waiter)
"$CLI" -q create "$W" --sleep-after 2s || fail "cella create --sleep-after 2s"
# alive ID: the process still runs in this run of the sandbox (a sandbox that slept and
# woke has lost it: 404)
alive() {
        api GET "/v1/sandboxes/$W/processes/$1" >/dev/null
        expect_status 200
        assert_eq running "$(body .status)" "process $1 after the wait"
}
awake() {
        api GET "/v1/sandboxes/$W" >/dev/null
        assert_eq running "$(body .state)" "state after $1"
}
"$CLI" start "$W" --id keeper sleep 1000 >/dev/null
"$CLI" start "$W" --id late -- 'sleep 5; echo ready; sleep 1000' >/dev/null
assert_eq ready "$("$CLI" wait "$W" late --log ready --timeout 60s)" \
        "cella wait --log for a line printed after 2x sleepAfter"
awake "cella wait --log"
alive keeper
alive late

"$CLI" start "$W" --id lateport -- 'sleep 5; exec python3 -m http.server 8123' >/dev/null
api_json POST "/v1/sandboxes/$W/processes/lateport/waitForPort" '{"port":8123,"timeout":60000}'
expect_status 200
awake "waitForPort"
alive keeper

"$CLI" start "$W" --id latelog -- 'sleep 5; echo late-line; sleep 1000' >/dev/null
api_json POST "/v1/sandboxes/$W/processes/latelog/waitForLog" \
        '{"pattern":"late-line","timeout":60000}'
expect_status 200
assert_eq late-line "$(body .line)" "waitForLog"
awake "waitForLog"
alive keeper

"$CLI" start "$W" --id lateexit -- 'sleep 5; exit 3' >/dev/null
api_json POST "/v1/sandboxes/$W/processes/lateexit/waitForExit" '{"timeout":60000}'
expect_status 200
assert_eq 3 "$(body .exitCode)" "waitForExit"
awake "waitForExit"
alive keeper

"$CLI" start "$W" --id latestream -- 'sleep 5; echo streamed' >/dev/null
out=$(curl -sSN --max-time 60 "$CELLA_URL/v1/sandboxes/$W/processes/latestream/stream")
assert_contains "$out" '"type":"exit"' "the process stream to its exit"
awake "a process stream"
alive keeper
"$CLI" wait "$W" keeper --exit --timeout 5s >/dev/null 2>&1 && fail "keeper exited"
awake "cella wait --exit that timed out"

info "idle again: the sandbox sleeps, and its processes are gone"
wait_sleeping "$W"
assert_eq "" "$(sandbox_pids "$W")" "no process of the sleeping sandbox"
api GET "/v1/sandboxes/$W/processes/keeper" >/dev/null
expect_status 404 PROCESS_NOT_FOUND
info "POST /sleep: asleep now, keepAlive and an open stream notwithstanding"
N=$(sbx now)
api_json PUT "/v1/sandboxes/$N" '{"keepAlive":true}'
expect_status 201
run_in "$N" 'echo slept-with-it >/workspace/n.txt; (sleep 1000 &)' >/dev/null
[ -n "$(sandbox_pids "$N")" ] || fail "$N has no process before its sleep"
curl -sSN --max-time 120 -H 'Accept: text/event-stream' -H 'Content-Type: application/json' \
        -d '{"command":"echo streaming; sleep 1000"}' \
        "$CELLA_URL/v1/sandboxes/$N/exec" >"$IT_TMP/stream" 2>&1 &
STREAM=$!
for i in $(seq 1 100); do grep -q streaming "$IT_TMP/stream" && break; sleep 0.1; done
grep -q streaming "$IT_TMP/stream" || fail "the exec stream did not start: $(cat "$IT_TMP/stream")"
api POST "/v1/sandboxes/$N/sleep" >/dev/null
expect_status 200
assert_eq sleeping "$(body .state)" "state in the answer of POST /sleep"
assert_eq "$N" "$(body .id)" "id in the answer of POST /sleep"
assert_eq true "$(body .keepAlive)" "keepAlive kept"
assert_eq "" "$(sandbox_pids "$N")" "no process of a sandbox put to sleep"
assert_eq "" "$(sandbox_cgroups "$N")" "no cgroup of a sandbox put to sleep"
# the stream ends (bounded: curl's own --max-time is the deadline)
wait "$STREAM" || true
assert_not_contains "$(cat "$IT_TMP/stream")" '"exitCode":0' "the stream of a command the sleep ended"
grep -q "sandbox '$N' sleeping on request" "$CELLAD_LOG" || fail "no log line of the sleep"
api GET "/v1/sandboxes/$N" >/dev/null
assert_eq sleeping "$(body .state)" "GET after POST /sleep"

info "POST /sleep of a sleeping sandbox: 200 as it is; {} is a body it takes"
api_json POST "/v1/sandboxes/$N/sleep" '{}'
expect_status 200
assert_eq sleeping "$(body .state)" "state after a second POST /sleep"
api_json POST "/v1/sandboxes/$N/sleep" '{"force":true}'
expect_status 400 VALIDATION_FAILED
api POST "/v1/sandboxes/$(sbx ghost)/sleep" >/dev/null
expect_status 404 SANDBOX_NOT_FOUND
api GET "/v1/sandboxes/$(sbx ghost)" >/dev/null
expect_status 404 SANDBOX_NOT_FOUND

info "the next exec wakes it with its files"
assert_eq slept-with-it "$(run_in "$N" 'cat /workspace/n.txt')" "file after POST /sleep"
api GET "/v1/sandboxes/$N" >/dev/null
assert_eq running "$(body .state)" "state after the wake"

info "POST /sleep of a stopped sandbox: 409 SANDBOX_STOPPED"
for p in $(sandbox_pids "$N"); do kill -KILL "$p" 2>/dev/null || true; done
wait_state "$N" stopped
api POST "/v1/sandboxes/$N/sleep" >/dev/null
expect_status 409 SANDBOX_STOPPED
api GET "/v1/sandboxes/$N" >/dev/null
assert_eq stopped "$(body .state)" "a refused sleep leaves it stopped"
assert_eq slept-with-it "$(run_in "$N" 'cat /workspace/n.txt')" "files of the stopped sandbox"
api POST "/v1/sandboxes/$N/sleep" >/dev/null
expect_status 200
assert_eq sleeping "$(body .state)" "the restarted sandbox sleeps"

info "cella sleep"
run_in "$N" true >/dev/null
assert_eq "sandbox '$N' is sleeping" "$("$CLI" sleep "$N")" "cella sleep's line"
assert_eq "" "$(sandbox_pids "$N")" "no process after cella sleep"
assert_eq sleeping "$("$CLI" sleep "$N" --json | jq -r .state)" "cella sleep --json"
out=$("$CLI" sleep "$(sbx ghost)" 2>&1) && fail "cella sleep of an unknown sandbox succeeded"
assert_contains "$out" SANDBOX_NOT_FOUND "cella sleep of an unknown sandbox"
info "sleep: ok"
