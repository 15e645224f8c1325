#!/bin/bash
# Background processes over HTTP: start/list/get/logs, custom ids, byte-exact logs, the
# event stream, kill of whole trees (daemonized and orphaned children included), the
# SIGTERM grace, custom signals, kill all, every status, waitForLog/Port/Exit with their
# timeouts and exited-before-ready, bad input, and processes that outlive a SIGKILLed
# cellad with their logs.
. "$(dirname "$0")/lib.sh"
start_cellad

S=$(sbx proc)
P=/v1/sandboxes/$S/processes

# pstart JSON: start a process, require 200; prints its id.
pstart() {
        api_json POST "$P" "$1"
        expect_status 200
        body .id
}

# pwait ID: waitForExit, require 200.
pwait() {
        api_json POST "$P/$1/waitForExit" '{"timeout":30000}'
        expect_status 200
}

# sandbox_sleepers PATTERN: how many processes in the sandbox run a command line matching
# PATTERN (read from /proc inside the sandbox).
sandbox_count() {
        run_in "$S" "for p in /proc/[0-9]*; do tr '\\0' ' ' <\$p/cmdline 2>/dev/null; echo; done | grep -c -- '$1' || true"
}

info "start, list, get, logs"
id=$(pstart '{"command":"echo hello; echo oops >&2; exit 0"}')
assert_eq proc-1 "$id" "generated id"
assert_eq running "$(body .status)" "status at start"
pid=$(body .pid)
[ "$pid" -gt 1 ] || fail "pid $pid"
[ -n "$(body .startTime)" ] || fail "no startTime"
pwait "$id"
assert_eq completed "$(body .status)" "status after exit"
assert_eq 0 "$(body .exitCode)" "exit code"
[ -n "$(body .endTime)" ] || fail "no endTime"
api GET "$P" >/dev/null
expect_status 200
assert_eq "$id" "$(body '.processes[0].id')" "listed"
api GET "$P/$id" >/dev/null
expect_status 200
assert_eq "$pid" "$(body .pid)" "get by id"
api GET "$P/$pid" >/dev/null
expect_status 200
assert_eq "$id" "$(body .id)" "get by pid"
api GET "$P/$id/logs" >/dev/null
expect_status 200
assert_eq "hello" "$(body .stdout)" "stdout"
assert_eq "oops" "$(body .stderr)" "stderr"
assert_eq "$id" "$(body .processId)" "processId"

info "custom id, duplicate id"
id=$(pstart '{"command":"sleep 30","processId":"web.1"}')
assert_eq web.1 "$id" "custom id"
api_json POST "$P" '{"command":"true","processId":"web.1"}'
expect_status 409 PROCESS_ALREADY_EXISTS
api DELETE "$P/web.1" >/dev/null
expect_status 200
assert_eq killed "$(body .status)" "killed"

info "logs are byte-exact, binary included"
id=$(pstart '{"command":"printf '"'"'a\\377\\000b\\n'"'"'; printf '"'"'x\\ny'"'"' >&2"}')
pwait "$id"
api GET "$P/$id/logs" >/dev/null
assert_eq base64 "$(body .stdoutEncoding)" "stdout encoding"
assert_eq "$(printf 'a\377\000b\n' | base64)" "$(body .stdout)" "binary stdout"
assert_eq '"x\ny"' "$(jq -c .stderr <"$IT_TMP/body")" "stderr without trailing newline"

info "env, cwd, sandbox env"
api_json PUT "/v1/sandboxes/$S" '{"env":{"STAGE":"dev"}}'
id=$(pstart '{"command":"echo $FOO $STAGE; pwd","env":{"FOO":"bar"},"cwd":"/tmp"}')
pwait "$id"
api GET "$P/$id/logs" >/dev/null
assert_eq "bar dev
/tmp" "$(body .stdout)" "env and cwd"

info "stream: existing output, then live output, then exit"
id=$(pstart '{"command":"echo first; while [ ! -e /tmp/go ]; do sleep 0.05; done; echo second >&2; exit 3"}')
api_json POST "$P/$id/waitForLog" '{"pattern":"first"}'
expect_status 200
curl -sS -N "$CELLA_URL$P/$id/stream" >"$IT_TMP/stream" &
spid=$!
for i in $(seq 1 100); do grep -q first "$IT_TMP/stream" && break; sleep 0.05; done
grep -q first "$IT_TMP/stream" || fail "existing output not streamed: $(cat "$IT_TMP/stream")"
grep -q second "$IT_TMP/stream" && fail "second before it was written"
run_in "$S" 'touch /tmp/go' >/dev/null
wait $spid
events=$(sed -n 's/^data: //p' "$IT_TMP/stream" | jq -c '[.type, (.data // .exitCode)]' | tr '\n' ' ')
assert_eq '["stdout","first\n"] ["stderr","second\n"] ["exit",3] ' "$events" "stream events"
assert_eq failed "$(sed -n 's/^data: //p' "$IT_TMP/stream" | tail -n 1 | jq -r .status)" "exit status"
api GET "$P/$id/stream" -H 'Accept: text/event-stream' >/dev/null
assert_eq 3 "$(grep -c '^data: ' "$IT_TMP/body")" "stream of a finished process"

info "kill reaches the whole tree: 3 levels, a daemon, an orphan"
id=$(pstart '{"command":"bash -c \"bash -c \\\"sleep 1001 & wait\\\" & wait\" & setsid bash -c \"sleep 1002\" </dev/null >/dev/null 2>&1 & (sleep 1003 &) ; wait"}')
for i in $(seq 1 100); do [ "$(sandbox_count '^sleep 100[123] $')" = 3 ] && break; sleep 0.1; done
assert_eq 3 "$(sandbox_count '^sleep 100[123] $')" "three sleeps running"
api DELETE "$P/$id" >/dev/null
expect_status 200
assert_eq killed "$(body .status)" "status"
assert_eq 0 "$(sandbox_count '^sleep 100[123] $')" "nothing of the tree left"

info "SIGTERM ignored: SIGKILL after the grace"
id=$(pstart '{"command":"trap \"\" TERM; echo armed; while true; do sleep 0.1; done"}')
api_json POST "$P/$id/waitForLog" '{"pattern":"armed"}'
api DELETE "$P/$id" >/dev/null
expect_status 200
assert_eq killed "$(body .status)" "status"
assert_eq 9 "$(body .signal)" "ended by SIGKILL"

info "custom signal"
id=$(pstart '{"command":"trap \"echo got INT; exit 7\" INT; echo armed; while true; do sleep 0.1; done"}')
api_json POST "$P/$id/waitForLog" '{"pattern":"armed"}'
api DELETE "$P/$id?signal=SIGINT" >/dev/null
expect_status 200
assert_eq killed "$(body .status)" "status"
assert_eq 7 "$(body .exitCode)" "its own exit code"
api GET "$P/$id/logs" >/dev/null
assert_contains "$(body .stdout)" "got INT" "trap ran"
id=$(pstart '{"command":"trap \"exit 9\" USR1; echo armed; while true; do sleep 0.1; done"}')
api_json POST "$P/$id/waitForLog" '{"pattern":"armed"}'
api_json DELETE "$P/$id" '{"signal":"USR1"}'
expect_status 200
assert_eq 9 "$(body .exitCode)" "signal from the JSON body"

info "kill all"
for n in 1 2 3; do pstart '{"command":"sleep 1000"}' >/dev/null; done
api DELETE "$P" >/dev/null
expect_status 200
assert_eq 3 "$(body .killed)" "killed count"
for i in $(seq 1 100); do
        [ "$(api GET "$P" | jq '[.processes[] | select(.status == "running")] | length')" = 0 ] && break
        sleep 0.1
done
assert_eq 0 "$(api GET "$P" | jq '[.processes[] | select(.status == "running")] | length')" "none running"

info "statuses"
id=$(pstart '{"command":"exit 3"}')
pwait "$id"
assert_eq failed "$(body .status)" "failed"
assert_eq 3 "$(body .exitCode)" "failed exit code"
api_json POST "$P" '{"command":"true","cwd":"/does/not/exist"}'
expect_status 200
assert_eq error "$(body .status)" "error status"
assert_contains "$(body .error)" "/does/not/exist" "error message"

info "waitForLog"
id=$(pstart '{"command":"echo early; echo listening on 8080 >&2; sleep 1000"}')
api_json POST "$P/$id/waitForLog" '{"pattern":"listening on","timeout":10000}'
expect_status 200
assert_eq "listening on 8080" "$(body .line)" "substring line"
assert_eq stderr "$(body .stream)" "stream"
api_json POST "$P/$id/waitForLog" '{"pattern":"^ear?ly$","regex":true}'
expect_status 200
assert_eq early "$(body .line)" "regex, output before the wait"
assert_eq stdout "$(body .stream)" "stdout"
api_json POST "$P/$id/waitForLog" '{"pattern":"never","timeout":300}'
expect_status 408 PROCESS_READY_TIMEOUT
api_json POST "$P/$id/waitForLog" '{"pattern":"(","regex":true}'
expect_status 400 VALIDATION_FAILED
api DELETE "$P/$id" >/dev/null
id=$(pstart '{"command":"echo bye"}')
api_json POST "$P/$id/waitForLog" '{"pattern":"never"}'
expect_status 409 PROCESS_EXITED_BEFORE_READY

info "the default image's environment: python's output is unbuffered"
assert_eq 1 "$(run_in "$S" 'printf %s "$PYTHONUNBUFFERED"')" "PYTHONUNBUFFERED in the default image"
# python's http.server logs each request to stderr while it runs: with block-buffered
# output the line would wait in python's buffer until the process ended.
id=$(pstart '{"command":"exec python3 -m http.server 8124 --bind 127.0.0.1","cwd":"/tmp"}')
api_json POST "$P/$id/waitForPort" '{"port":8124,"timeout":20000}'
expect_status 200
run_in "$S" 'curl -s -o /dev/null http://127.0.0.1:8124/unbuffered-probe' >/dev/null
api_json POST "$P/$id/waitForLog" '{"pattern":"GET /unbuffered-probe","timeout":10000}'
expect_status 200
id2=$(pstart '{"command":"python3 -c \"import time; print(\u0027py-ready\u0027); time.sleep(1000)\""}')
api_json POST "$P/$id2/waitForLog" '{"pattern":"py-ready","timeout":10000}'
expect_status 200
assert_eq py-ready "$(body .line)" "a print() reaches the log while python runs"
api DELETE "$P/$id" >/dev/null
api DELETE "$P/$id2" >/dev/null

info "waitForPort"
id=$(pstart '{"command":"sleep 0.5; exec python3 -m http.server 8123 --bind 127.0.0.1","cwd":"/tmp"}')
api_json POST "$P/$id/waitForPort" '{"port":8123,"timeout":20000}'
expect_status 200
assert_eq 8123 "$(body .port)" "tcp ready"
api_json POST "$P/$id/waitForPort" '{"port":8123,"mode":"http","path":"/","status":{"min":200,"max":299}}'
expect_status 200
api_json POST "$P/$id/waitForPort" '{"port":8123,"mode":"http","path":"/missing","status":200,"timeout":500,"interval":100}'
expect_status 408 PROCESS_READY_TIMEOUT
api_json POST "$P/$id/waitForPort" '{"port":8124,"timeout":400,"interval":50}'
expect_status 408 PROCESS_READY_TIMEOUT
api DELETE "$P/$id" >/dev/null
id=$(pstart '{"command":"sleep 0.2"}')
api_json POST "$P/$id/waitForPort" '{"port":8125}'
expect_status 409 PROCESS_EXITED_BEFORE_READY

info "waitForExit"
id=$(pstart '{"command":"sleep 0.3; exit 4"}')
api_json POST "$P/$id/waitForExit" '{}'
expect_status 200
assert_eq 4 "$(body .exitCode)" "exit code"
id=$(pstart '{"command":"sleep 0.2"}')
api POST "$P/$id/waitForExit" >/dev/null
expect_status 200
assert_eq completed "$(body .status)" "waitForExit without a body"
id=$(pstart '{"command":"sleep 1000"}')
api_json POST "$P/$id/waitForExit" '{"timeout":200}'
expect_status 408 PROCESS_READY_TIMEOUT
api DELETE "$P/$id" >/dev/null

info "bad input"
api GET "$P/nope" >/dev/null
expect_status 404 PROCESS_NOT_FOUND
api GET "$P/99999/logs" >/dev/null
expect_status 404 PROCESS_NOT_FOUND
api_json POST "$P" '{"command":'
expect_status 400 VALIDATION_FAILED
api_json POST "$P" '{"command":"true","bogus":1}'
expect_status 400 VALIDATION_FAILED
api_json POST "$P" '{"command":"true","processId":"a/b"}'
expect_status 400 VALIDATION_FAILED
api DELETE "$P/proc-1?signal=SIGNOPE" >/dev/null
expect_status 400 VALIDATION_FAILED
api_json POST "$P/proc-1/waitForPort" '{"port":70000}'
expect_status 400 INVALID_PORT
api GET "$P/bad%20id" >/dev/null
expect_status 400 VALIDATION_FAILED
api PUT "$P" >/dev/null
expect_status 405 METHOD_NOT_ALLOWED
B=$(sbx notmade)
api_json POST "/v1/sandboxes/$B/processes" '{"command":'
api GET "/v1/sandboxes/$B" >/dev/null
expect_status 404 SANDBOX_NOT_FOUND

info "CLI"
CLI=$CELLA_BUILD/cella
id=$("$CLI" start "$S" --id cli-web --env GREETING=hi -- 'echo $GREETING from cli; sleep 0.3; echo done >&2; exit 5')
assert_eq cli-web "$id" "cella start prints the id"
"$CLI" ps "$S" | grep -q '^cli-web ' || fail "cella ps does not list cli-web"
[ "$("$CLI" ps "$S" --json | jq -r '.processes[] | select(.id == "cli-web") | .command')" != "" ] ||
        fail "cella ps --json"
assert_eq "hi from cli" "$("$CLI" wait "$S" cli-web --log 'from c[l]i' --regex)" "cella wait --log"
set +e
"$CLI" wait "$S" cli-web --exit
rc=$?
"$CLI" wait "$S" cli-web --log never --timeout 300 2>/dev/null
rc_log=$?
set -e
assert_eq 5 "$rc" "cella wait --exit gives the exit code"
assert_eq 1 "$rc_log" "wait on an ended process"
assert_eq "hi from cli" "$("$CLI" logs "$S" cli-web 2>/dev/null)" "cella logs stdout"
assert_eq "done" "$("$CLI" logs "$S" cli-web 2>&1 >/dev/null)" "cella logs stderr"
"$CLI" start "$S" --id cli-follow 'for i in 1 2 3; do echo line $i; sleep 0.1; done' >/dev/null
assert_eq "line 1
line 2
line 3" "$("$CLI" logs "$S" cli-follow -f)" "cella logs -f"
"$CLI" start "$S" --id cli-sleep sleep 1000 >/dev/null
set +e
"$CLI" wait "$S" cli-sleep --port 8200 --timeout 300 2>/dev/null
rc=$?
set -e
assert_eq 124 "$rc" "cella wait timeout exit status"
assert_eq "cli-sleep killed" "$("$CLI" kill "$S" cli-sleep --signal KILL)" "cella kill"
"$CLI" start "$S" sleep 1000 >/dev/null
"$CLI" start "$S" sleep 1001 >/dev/null
assert_eq 2 "$("$CLI" kill "$S" --all)" "cella kill --all"
set +e
"$CLI" kill "$S" nope 2>/dev/null
rc=$?
set -e
assert_eq 1 "$rc" "unknown process"

info "processes survive a SIGKILLed cellad"
id=$(pstart '{"command":"i=0; while true; do echo tick $i; i=$((i+1)); sleep 0.1; done","processId":"survivor"}')
api_json POST "$P/survivor/waitForLog" '{"pattern":"tick 3"}'
expect_status 200
kill -KILL "$CELLAD_PID"
wait "$CELLAD_PID" 2>/dev/null || true
CELLAD_PID=
start_cellad
api GET "$P/survivor" >/dev/null
expect_status 200
assert_eq running "$(body .status)" "still running after the restart"
api GET "$P" >/dev/null
assert_contains "$(body '[.processes[].id] | join(" ")')" survivor "listed"
api GET "$P/survivor/logs" >/dev/null
assert_contains "$(body .stdout)" "tick 0
tick 1" "logs from before the restart"
api_json POST "$P/survivor/waitForLog" '{"pattern":"tick 40","timeout":20000}'
expect_status 200
timeout 5 curl -sS -N "$CELLA_URL$P/survivor/stream" >"$IT_TMP/stream" || true
assert_contains "$(cat "$IT_TMP/stream")" '"data":"tick 0\n"' "stream after the restart"
api DELETE "$P/survivor" >/dev/null
assert_eq killed "$(body .status)" "killed after the restart"
info "processes: ok"
