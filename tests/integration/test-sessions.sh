#!/bin/bash
# Sessions: persistent shell state, isolation between sessions, one command at a time in a
# session and sessions in parallel, byte-exact output, SESSION_TERMINATED and recovery,
# env semantics (sandbox and session, set/unset/empty, per-command override not kept),
# commandTimeoutMs and per-command timeouts that stop the command and keep the session,
# 409/404/400 answers, delete, the CLI, and sessions across a cellad SIGKILL.
. "$(dirname "$0")/lib.sh"
start_cellad

S=$(sbx sess)

# sxs SANDBOX SESSION COMMAND [TIMEOUT]: exec in a session.
sxs() {
        local req
        if [ $# -ge 4 ]; then
                req=$(jq -cn --arg c "$3" --arg s "$2" --argjson t "$4" \
                        '{command:$c, sessionId:$s, timeout:$t}')
        else
                req=$(jq -cn --arg c "$3" --arg s "$2" '{command:$c, sessionId:$s}')
        fi
        api_json POST "/v1/sandboxes/$1/exec" "$req"
}
# ins SANDBOX SESSION COMMAND: exec in a session, require 200, print stdout.
ins() {
        sxs "$1" "$2" "$3"
        expect_status 200
        jq -j .stdout <"$IT_TMP/body"
}

info "the default session keeps cd, export, functions and aliases"
run_in "$S" 'cd /tmp && export GREETING=hi && f() { echo "f:$1"; } && alias ll="echo aliased"' >/dev/null
assert_eq "/tmp hi f:x aliased" "$(run_in "$S" 'echo $(pwd) $GREETING $(f x) $(ll)')" "state kept"

info "named sessions: create, state, isolation from each other"
api_json POST "/v1/sandboxes/$S/sessions" '{"id":"one","cwd":"/etc","env":{"WHO":"one"}}'
expect_status 201
assert_eq "one /etc true" "$(body '"\(.id) \(.cwd) \(.success)"')" "SessionInfo"
api_json POST "/v1/sandboxes/$S/sessions" '{"id":"two"}'
expect_status 201
api_json POST "/v1/sandboxes/$S/sessions" '{"id":"two"}'
expect_status 409 SESSION_ALREADY_EXISTS
api_json POST "/v1/sandboxes/$S/sessions" '{}'
expect_status 201
gen=$(body .id)
assert_ne "" "$gen" "generated id"
assert_eq "/etc one" "$(ins "$S" one 'echo $(pwd) $WHO')" "session cwd and env"
ins "$S" one 'cd /usr; export ONLY_ONE=1; g() { echo g; }' >/dev/null
assert_eq "/workspace||none" "$(ins "$S" two 'printf "%s|%s|" "$PWD" "$ONLY_ONE"; type g >/dev/null 2>&1 && echo g || echo none')" \
        "sessions do not share state"
assert_eq "/usr 1 g" "$(ins "$S" one 'echo $(pwd) $ONLY_ONE $(g)')" "session one kept its state"
api GET "/v1/sandboxes/$S/sessions" >/dev/null
expect_status 200
assert_eq "$(printf '%s\n' default "$gen" one two | sort | tr '\n' ' ')" \
        "$(body '.sessions[].id' | sort | tr '\n' ' ')" "list"
api GET "/v1/sandboxes/$S/sessions/one" >/dev/null
expect_status 200
assert_eq "one /usr" "$(body '"\(.id) \(.cwd)"')" "get shows the live cwd"
api GET "/v1/sandboxes/$S/sessions/nope" >/dev/null
expect_status 404 SESSION_NOT_FOUND
sxs "$S" nope 'echo x'
expect_status 404 SESSION_NOT_FOUND

info "byte-exact output in a session"
sxs "$S" one "printf 'a\\0b'"
assert_eq '"a\u0000b"' "$(jq -c .stdout <"$IT_TMP/body")" "NUL kept, no newline added"
sxs "$S" one "printf '\\377x'"
assert_eq "$(printf '\377x' | base64)" "$(body .stdout)" "binary output"
assert_eq base64 "$(body .stdoutEncoding)" "encoding"

info "one command at a time in a session: 5 concurrent increments give 1..5"
ins "$S" two 'n=0' >/dev/null
pids=
for i in 1 2 3 4 5; do
        curl -sS -X POST --data-binary '{"command":"n=$((n+1)); echo $n","sessionId":"two"}' \
                "$CELLA_URL/v1/sandboxes/$S/exec" >"$IT_TMP/inc$i" &
        pids="$pids $!"
done
for p in $pids; do wait "$p" || fail "concurrent exec failed"; done
assert_eq "1 2 3 4 5" "$(cat "$IT_TMP"/inc* | jq -j .stdout | sort -n | tr '\n' ' ' | sed 's/ $//')" \
        "serialized increments"

info "different sessions run in parallel"
# `one` waits for a file that only `two` creates: if sessions were serialized, the wait
# would run into its timeout.
ins "$S" one 'rm -f /tmp/flag-par' >/dev/null
curl -sS -X POST --data-binary '{"command":"while [ ! -e /tmp/flag-par ]; do sleep 0.05; done; echo seen","sessionId":"one","timeout":20000}' \
        "$CELLA_URL/v1/sandboxes/$S/exec" >"$IT_TMP/par" &
waiter=$!
ins "$S" two 'touch /tmp/flag-par' >/dev/null
wait "$waiter" || fail "waiting exec failed"
assert_eq seen "$(jq -r .stdout <"$IT_TMP/par")" "parallel sessions"

info "exit ends the shell: 410 SESSION_TERMINATED, then a fresh shell"
ins "$S" one 'cd /var; export GONE=1' >/dev/null
sxs "$S" one 'echo last; exit 3'
expect_status 410 SESSION_TERMINATED
assert_eq "3 last" "$(body '"\(.context.exitCode) \(.context.stdout)"' | tr -d '\n')" "exit code and output"
assert_eq "/etc one -" "$(ins "$S" one 'echo $(pwd) $WHO ${GONE:--}')" "fresh shell with the session's own cwd and env"

info "env: sandbox-wide and per session; set, empty, unset; per-command override not kept"
api_json POST "/v1/sandboxes/$S/env" '{"vars":{"SB":"all","EMPTY":""}}'
expect_status 200
assert_eq "all|set" "$(ins "$S" two 'printf "%s|%s" "$SB" "${EMPTY+set}"')" "sandbox env reaches a live session"
assert_eq "all" "$(run_in "$S" 'printf %s "$SB"')" "and the default session"
api_json POST "/v1/sandboxes/$S/sessions/two/env" '{"vars":{"MINE":"two","SB":"mine"}}'
expect_status 200
assert_eq "two mine" "$(ins "$S" two 'echo $MINE $SB')" "session env"
assert_eq "all" "$(run_in "$S" 'echo ${MINE-}$SB')" "other sessions unaffected"
api_json POST "/v1/sandboxes/$S/env" '{"vars":{"MINE":null},"sessionId":"two"}'
expect_status 200
assert_eq "unset" "$(ins "$S" two 'echo ${MINE-unset}')" "null unsets (sessionId in the body)"
api_json POST "/v1/sandboxes/$S/exec" '{"command":"echo $SB $(pwd)","sessionId":"two","env":{"SB":"cmd"},"cwd":"/opt"}'
expect_status 200
assert_eq "cmd /opt" "$(body .stdout | tr -d '\n')" "per-command env and cwd"
assert_eq "mine /workspace" "$(ins "$S" two 'echo $SB $(pwd)')" "per-command env and cwd not kept"
api_json POST "/v1/sandboxes/$S/exec" '{"command":"pwd","sessionId":"two","cwd":"/does-not-exist"}'
expect_status 404 FILE_NOT_FOUND
api_json POST "/v1/sandboxes/$S/sessions/two/env" '{"vars":{"BAD-NAME":"x"}}'
expect_status 400 VALIDATION_FAILED
api_json POST "/v1/sandboxes/$S/sessions/nope/env" '{"vars":{"A":"x"}}'
expect_status 404 SESSION_NOT_FOUND

info "timeouts: commandTimeoutMs by default, per-command wins; the session stays usable"
api_json POST "/v1/sandboxes/$S/sessions" '{"id":"slow","commandTimeoutMs":700}'
expect_status 201
ins "$S" slow 'cd /srv; export KEEP=yes' >/dev/null
sxs "$S" slow 'echo before; sleep 300 & sleep 300; echo after'
expect_status 408 COMMAND_TIMEOUT
assert_eq 700 "$(body .context.timeout)" "the session's timeout applied"
assert_eq before "$(body .context.stdout | tr -d '\n')" "output before the timeout, nothing after"
left=
for i in $(seq 1 50); do
        left=$(ins "$S" slow 'ps -eo args= | grep "^sleep 300" || true')
        [ -z "$left" ] && break
        sleep 0.1
done
assert_eq "" "$left" "what the command started was killed"
assert_eq "/srv yes" "$(ins "$S" slow 'echo $(pwd) $KEEP')" "state kept after the timeout"
sxs "$S" slow 'sleep 1.5; echo done' 5000
expect_status 200
assert_eq done "$(body .stdout | tr -d '\n')" "per-command timeout wins over commandTimeoutMs"
sxs "$S" slow 'while :; do :; done' 500
expect_status 408 COMMAND_TIMEOUT
assert_eq "/srv yes" "$(ins "$S" slow 'echo $(pwd) $KEEP')" "a builtin loop is stopped, the shell kept"

info "bash's messages name no file of the agent's (timed out, killed, syntax error, not found)"
for sid in default msgs; do
        sxs "$S" $sid 'sleep 10' 500
        expect_status 408 COMMAND_TIMEOUT
        assert_not_contains "$(body)" /run/cella "timed-out command's answer ($sid)"
        sxs "$S" $sid 'if'
        assert_contains "$(body .stderr)" "syntax error" "syntax error reported ($sid)"
        assert_contains "$(body .stderr)" "bash: line " "syntax error names bash ($sid)"
        assert_not_contains "$(body)" /run/cella "syntax error's answer ($sid)"
        sxs "$S" $sid 'bash -c "kill -KILL \$\$"; echo after'
        expect_status 200
        assert_contains "$(body .stderr)" "Killed" "a killed child reported ($sid)"
        assert_contains "$(body .stderr)" "bash: line 1: " "its message names bash ($sid)"
        assert_not_contains "$(body)" /run/cella "killed child's answer ($sid)"
        sxs "$S" $sid 'no-such-command-here'
        assert_eq "bash: line 1: no-such-command-here: command not found" \
                "$(body .stderr | tr -d '\n')" "command not found ($sid)"
        # a function defined by one command and failing in another
        sxs "$S" $sid 'fails() { no-such-command-either; }'
        sxs "$S" $sid 'fails'
        assert_not_contains "$(body)" /run/cella "a function's message ($sid)"
        assert_contains "$(body .stderr)" "bash: line 1: no-such-command-either" "function ($sid)"
        # streamed too: the SSE events carry no path either
        req=$(jq -cn --arg c 'if' --arg s "$sid" '{command:$c, sessionId:$s}')
        out=$(curl -sN -H 'Content-Type: application/json' -H 'Accept: text/event-stream' \
                --data-binary "$req" \
                "$CELLA_URL/v1/sandboxes/$S/exec")
        assert_contains "$out" "syntax error" "streamed syntax error ($sid)"
        assert_not_contains "$out" /run/cella "streamed syntax error ($sid)"
        api_json POST "/v1/sandboxes/$S/sessions" '{"id":"msgs"}'
done

info "delete: kills the shell and what it started; later calls are 404"
ins "$S" "$gen" 'sleep 302 >/dev/null 2>&1 & echo started' >/dev/null
api DELETE "/v1/sandboxes/$S/sessions/$gen" >/dev/null
expect_status 200
left=
for i in $(seq 1 50); do
        left=$(run_in "$S" 'ps -eo args= | grep "^sleep 302" || true')
        [ -z "$left" ] && break
        sleep 0.1
done
assert_eq "" "$left" "the session's processes are gone"
api DELETE "/v1/sandboxes/$S/sessions/$gen" >/dev/null
expect_status 404 SESSION_NOT_FOUND
sxs "$S" "$gen" 'echo x'
expect_status 404 SESSION_NOT_FOUND
api_json POST "/v1/sandboxes/$S/sessions" "{\"id\":\"$gen\"}"
expect_status 201
assert_eq /workspace "$(ins "$S" "$gen" pwd)" "the id can be used again"

info "background processes started in a session: its cwd and env; deleting it kills them"
api_json POST "/v1/sandboxes/$S/sessions" '{"id":"bg","cwd":"/srv","env":{"BGVAR":"from-session"}}'
expect_status 201
ins "$S" bg 'cd /opt' >/dev/null
api_json POST "/v1/sandboxes/$S/processes" '{"command":"echo \"$BGVAR $PWD\"; exec sleep 303","processId":"inbg","sessionId":"bg"}'
expect_status 200
assert_eq bg "$(body .sessionId)" "sessionId in ProcessInfo"
api_json POST "/v1/sandboxes/$S/processes/inbg/waitForLog" '{"pattern":"from-session","timeout":20000}'
expect_status 200
assert_eq "from-session /opt" "$(body .line)" "the session's env and current directory"
api_json POST "/v1/sandboxes/$S/processes" '{"command":"exec sleep 304","processId":"outside"}'
expect_status 200
api DELETE "/v1/sandboxes/$S/sessions/bg" >/dev/null
expect_status 200
api_json POST "/v1/sandboxes/$S/processes/inbg/waitForExit" '{"timeout":20000}'
expect_status 200
assert_eq killed "$(body .status)" "the session's process was killed with it"
api GET "/v1/sandboxes/$S/processes/outside" >/dev/null
assert_eq running "$(body .status)" "a process of no session lives on"
api DELETE "/v1/sandboxes/$S/processes/outside" >/dev/null
expect_status 200
api_json POST "/v1/sandboxes/$S/processes" '{"command":"true","sessionId":"gone"}'
expect_status 404 SESSION_NOT_FOUND

info "bad input"
api_json POST "/v1/sandboxes/$S/sessions" '{"id":"../x"}'
expect_status 400 VALIDATION_FAILED
api_json POST "/v1/sandboxes/$S/sessions" '{"id":"ok","bogus":1}'
expect_status 400 VALIDATION_FAILED
api_json POST "/v1/sandboxes/$S/sessions" '{"commandTimeoutMs":-1}'
expect_status 400 VALIDATION_FAILED
api_json POST "/v1/sandboxes/$S/sessions" '{"id":'
expect_status 400
api_json POST "/v1/sandboxes/$S/exec" '{"command":"true","sessionId":"a/b"}'
expect_status 400 VALIDATION_FAILED
api PUT "/v1/sandboxes/$S/sessions" >/dev/null
expect_status 405 METHOD_NOT_ALLOWED
api GET "/v1/sandboxes/$S/sessions/$(printf 'x%.0s' $(seq 1 70))" >/dev/null
expect_status 400 VALIDATION_FAILED

info "CLI: session create/ls/rm, exec --session, env set --session"
CLI=$CELLA_BUILD/cella
assert_eq cli "$("$CLI" session create "$S" --id cli --cwd /tmp --env A=1)" "cella session create"
assert_eq "/tmp 1" "$("$CLI" exec "$S" --session cli 'echo $(pwd) $A')" "cella exec --session"
"$CLI" env set "$S" --session cli A=2 B=3 || fail "cella env set --session"
assert_eq "2 3" "$("$CLI" exec "$S" --session cli 'echo $A $B')" "session env from the CLI"
"$CLI" session ls "$S" | grep -q '^cli ' || fail "cella session ls"
assert_eq cli "$("$CLI" session ls "$S" --json | jq -r '.sessions[] | select(.id=="cli") | .id')" "--json"
set +e
"$CLI" exec "$S" --session cli 'exit 5'
rc=$?
set -e
assert_eq 5 "$rc" "the ended shell's code is the CLI's exit status"
"$CLI" session rm "$S" cli || fail "cella session rm"
set +e
"$CLI" session rm "$S" cli 2>"$IT_TMP/err"
rc=$?
set -e
assert_eq 1 "$rc" "removing it again fails"
assert_contains "$(cat "$IT_TMP/err")" SESSION_NOT_FOUND "CLI error code"

info "a timeout, a client gone and a cellad killed stop the command, not what earlier commands left running"
api_json POST "/v1/sandboxes/$S/sessions" '{"id":"bg"}'
expect_status 201
# a server as a background job of the shell, and a sleep orphaned by a subshell
ins "$S" bg 'cd /tmp && python3 -m http.server 8765 >/dev/null 2>&1 & echo $! >/tmp/srv.pid
(sleep 1000 >/dev/null 2>&1 & echo $! >/tmp/sl.pid)' >/dev/null
# alive: both pids live and the server answers (it may still be starting the first time)
alive() {
        run_in "$S" 'for i in $(seq 1 50); do
                if python3 -c "import urllib.request as u; u.urlopen(\"http://127.0.0.1:8765/\", timeout=2)" 2>/dev/null; then break; fi
                sleep 0.1
        done
        kill -0 $(cat /tmp/srv.pid) && kill -0 $(cat /tmp/sl.pid) &&
        python3 -c "import urllib.request as u; print(u.urlopen(\"http://127.0.0.1:8765/\", timeout=5).status)"' 2>/dev/null || true
}
# gone PATTERN: no process of the sandbox runs the command line PATTERN (10 s at most)
gone() {
        local i left=
        for i in $(seq 1 100); do
                left=$(run_in "$S" "ps -eo args= | grep -x '$1' || true")
                [ -z "$left" ] && return 0
                sleep 0.1
        done
        fail "still running: $left"
}
assert_eq 200 "$(alive)" "background jobs before"
sxs "$S" bg 'sleep 5; echo never' 500
expect_status 408 COMMAND_TIMEOUT
gone "sleep 5"
assert_eq 200 "$(alive)" "background jobs after a timeout"
req=$(jq -cn '{command:"sleep 30", sessionId:"bg"}')
curl -sN --max-time 1 -H 'Content-Type: application/json' -H 'Accept: text/event-stream' \
        --data-binary "$req" "$CELLA_URL/v1/sandboxes/$S/exec" >/dev/null 2>&1 || true
gone "sleep 30"
assert_eq 200 "$(alive)" "background jobs after the client went away"
req=$(jq -cn '{command:"sleep 31", sessionId:"bg"}')
curl -sN -H 'Content-Type: application/json' -H 'Accept: text/event-stream' \
        --data-binary "$req" "$CELLA_URL/v1/sandboxes/$S/exec" >/dev/null 2>&1 &
streamer=$!
for i in $(seq 1 50); do
        [ -n "$(run_in "$S" "ps -eo args= | grep -x 'sleep 31' || true")" ] && break
        sleep 0.1
done
kill -KILL "$CELLAD_PID"
wait "$CELLAD_PID" 2>/dev/null || true
CELLAD_PID=
wait "$streamer" 2>/dev/null || true
start_cellad
gone "sleep 31"
assert_eq 200 "$(alive)" "background jobs after cellad was killed"
assert_eq ok "$(ins "$S" bg 'echo ok')" "the session after all three"
# a shell that exits leaves the session's background jobs running; the next shell goes on
ins "$S" bg 'sleep 501 >/dev/null 2>&1 &' >/dev/null
sxs "$S" bg 'exit 4'
expect_status 410 SESSION_TERMINATED
assert_eq 200 "$(alive)" "background jobs after the shell exited"
assert_eq "sleep 501" "$(run_in "$S" "ps -eo args= | grep -x 'sleep 501' || true")" "its own job too"
assert_eq ok "$(ins "$S" bg 'echo ok')" "a new shell after exit"
api DELETE "/v1/sandboxes/$S/sessions/bg" >/dev/null
expect_status 200
gone "python3 -m http.server 8765"
gone "sleep 1000"
gone "sleep 501"

info "sessions outlive a cellad SIGKILL"
ins "$S" one 'cd /opt; export SURVIVE=yes' >/dev/null
kill -KILL "$CELLAD_PID"
wait "$CELLAD_PID" 2>/dev/null || true
CELLAD_PID=
start_cellad
assert_eq "/opt yes" "$(ins "$S" one 'echo $(pwd) $SURVIVE')" "session state after the restart"
info "sessions: ok"
