#!/bin/bash
# exec over HTTP: byte-exact output, exit codes, stderr, env/cwd, SSE order, timeouts kill
# the whole process tree.
. "$(dirname "$0")/lib.sh"
start_cellad

S=$(sbx exec)

info "byte-exact output, trailing newline kept"
sx "$S" "printf 'a\\0b\\n'"
expect_status 200
assert_eq 0 "$(exit_code)" "exit code"
if [ "$(body '.stdoutEncoding // ""')" = base64 ]; then
        got=$(body .stdout | base64 -d | od -An -c | tr -s ' ')
else
        got=$(jq -j .stdout <"$IT_TMP/body" | od -An -c | tr -s ' ')
fi
assert_eq "$(printf 'a\0b\n' | od -An -c | tr -s ' ')" "$got" "NUL and newline"
# Plain text: the JSON string is exactly the bytes, trailing newline included.
sx "$S" "printf 'x\\n\\n'"
assert_eq '"x\n\n"' "$(jq -c .stdout <"$IT_TMP/body")" "trailing newlines"
assert_eq "null" "$(body .stdoutEncoding)" "no encoding for UTF-8 output"
# Non-UTF-8 bytes come back base64 and intact.
sx "$S" "printf '\\377\\376\\001'"
assert_eq base64 "$(body .stdoutEncoding)" "stdoutEncoding"
assert_eq "$(printf '\377\376\001' | base64)" "$(body .stdout)" "binary stdout"
# UTF-8 text is passed as is.
assert_eq "héllo ☃" "$(run_in "$S" "printf 'héllo ☃'")" "utf-8"

info "exit codes and stderr"
for code in 0 1 2 42 255; do
        sx "$S" "(exit $code)"
        expect_status 200
        assert_eq "$code" "$(exit_code)" "exit $code"
        [ "$code" = 0 ] && want=true || want=false
        assert_eq "$want" "$(body .success)" "success for exit $code"
done
sx "$S" 'echo out; echo err >&2; false'
assert_eq 1 "$(exit_code)"
assert_eq out "$(body .stdout)" "stdout"
assert_eq err "$(body .stderr)" "stderr"
sx "$S" 'sh -c "kill -9 \$\$"'
expect_status 200
assert_eq 137 "$(exit_code)" "killed by a signal"
# In the default session `exit` ends the shell: 410 with its code and the output so far.
sx "$S" 'echo out; echo err >&2; exit 3'
expect_status 410 SESSION_TERMINATED
assert_eq 3 "$(body .context.exitCode)" "exit code of the ended shell"
assert_eq out "$(body .context.stdout)" "stdout before exit"
assert_eq err "$(body .context.stderr)" "stderr before exit"
assert_eq /workspace "$(run_in "$S" pwd)" "a fresh shell after exit"

info "sessionless sandbox (enableDefaultSession: false): each command a fresh shell"
L=$(sbx nosession)
api_json PUT "/v1/sandboxes/$L" '{"enableDefaultSession":false}'
expect_status 201
assert_eq false "$(body .enableDefaultSession)" "reported"
for code in 0 42 255; do
        sx "$L" "exit $code"
        expect_status 200
        assert_eq "$code" "$(exit_code)" "sessionless exit $code"
done
sx "$L" 'kill -9 $$'
expect_status 200
assert_eq 137 "$(exit_code)" "sessionless shell killed by a signal"
sx "$L" 'cd /tmp; export X=1'
assert_eq "/workspace|" "$(run_in "$L" 'printf "%s|%s" "$PWD" "$X"')" "nothing persists"

info "env and cwd"
api_json POST "/v1/sandboxes/$S/exec" '{"command":"echo $FOO; pwd","env":{"FOO":"bar baz"},"cwd":"/tmp"}'
expect_status 200
assert_eq "bar baz
/tmp" "$(body .stdout)" "env and cwd"
assert_eq /workspace "$(run_in "$S" pwd)" "default cwd"
api_json PUT "/v1/sandboxes/$(sbx envbox)" '{"env":{"STAGE":"dev"}}'
expect_status 201
assert_eq dev "$(run_in "$(sbx envbox)" 'echo $STAGE')" "sandbox env"

info "large output"
sx "$S" 'head -c 3000000 /dev/zero | tr "\0" x'
expect_status 200
assert_eq 3000000 "$(jq -j .stdout <"$IT_TMP/body" | wc -c)" "3 MB of output"

info "SSE: start, stdout..., complete, in order"
curl -sS -N -X POST -H 'Accept: text/event-stream' -H 'Content-Type: application/json' \
        --data-binary '{"command":"echo one; sleep 0.2; echo two >&2; sleep 0.2; echo three; (exit 7)"}' \
        "$CELLA_URL/v1/sandboxes/$S/exec" >"$IT_TMP/sse" || fail "SSE request failed"
grep '^data: ' "$IT_TMP/sse" | sed 's/^data: //' >"$IT_TMP/events"
types=$(jq -r .type <"$IT_TMP/events" | tr '\n' ' ')
case "$types" in
"start "*" complete ") ;;
*) fail "SSE event order: $types" ;;
esac
assert_eq "one
three
." "$(jq -j 'select(.type=="stdout") | .data' <"$IT_TMP/events"; echo .)" "SSE stdout"
assert_eq "two" "$(jq -j 'select(.type=="stderr") | .data' <"$IT_TMP/events")" "SSE stderr"
assert_eq 7 "$(jq -r 'select(.type=="complete") | .exitCode' <"$IT_TMP/events")" "SSE exitCode"
# SESSION_TERMINATED as an SSE error event with the shell's exit code.
curl -sS -N -X POST -H 'Accept: text/event-stream' -H 'Content-Type: application/json' \
        --data-binary '{"command":"echo bye; exit 9"}' \
        "$CELLA_URL/v1/sandboxes/$S/exec" >"$IT_TMP/sse" || fail "SSE request failed"
last=$(grep '^data: ' "$IT_TMP/sse" | tail -n 1 | sed 's/^data: //')
assert_eq "error SESSION_TERMINATED 9" "$(echo "$last" | jq -r '"\(.type) \(.code) \(.exitCode)"')" \
        "SSE session end"
assert_eq bye "$(grep '^data: ' "$IT_TMP/sse" | sed 's/^data: //' | jq -j 'select(.type=="stdout") | .data' | tr -d '\n')" \
        "SSE output before the shell ended"
# "one" was sent before "three" (order of output is kept)
assert_eq "one three" "$(jq -r 'select(.type=="stdout") | .data' <"$IT_TMP/events" | tr -s '\n' ' ' | sed 's/ $//')" \
        "SSE stdout order"
# Every event line is followed by an empty line (framing)
assert_eq "$(grep -c '^data: ' "$IT_TMP/sse")" "$(grep -c '^$' "$IT_TMP/sse")" "SSE framing"

info "timeout kills the whole tree"
sx "$S" 'sleep 300 & echo started; sleep 300' 1000
expect_status 408 COMMAND_TIMEOUT
assert_eq started "$(body .context.stdout)" "output so far"
left=
for i in $(seq 1 50); do
        left=$(run_in "$S" 'ps -eo args= | grep "^sleep 300" || true')
        [ -z "$left" ] && break
        sleep 0.2
done
assert_eq "" "$left" "background sleep survived the timeout"
# SSE timeout: an error event with COMMAND_TIMEOUT.
curl -sS -N -X POST -H 'Accept: text/event-stream' -H 'Content-Type: application/json' \
        --data-binary '{"command":"echo a; sleep 300","timeout":1000}' \
        "$CELLA_URL/v1/sandboxes/$S/exec" >"$IT_TMP/sse" || fail "SSE request failed"
last=$(grep '^data: ' "$IT_TMP/sse" | tail -n 1 | sed 's/^data: //')
assert_eq error "$(echo "$last" | jq -r .type)" "SSE timeout event"
assert_eq COMMAND_TIMEOUT "$(echo "$last" | jq -r .code)" "SSE timeout code"

info "client disconnect cancels the command"
curl -sS -N -m 1 -X POST -H 'Accept: text/event-stream' -H 'Content-Type: application/json' \
        --data-binary '{"command":"sleep 301"}' "$CELLA_URL/v1/sandboxes/$S/exec" \
        >/dev/null 2>&1 || true
left=
for i in $(seq 1 50); do
        left=$(run_in "$S" 'ps -eo args= | grep "^sleep 301" || true')
        [ -z "$left" ] && break
        sleep 0.2
done
assert_eq "" "$left" "command survived its client's disconnect"

info "concurrent commands in one sandbox"
cpids=
for i in 1 2 3 4; do
        curl -sS -X POST --data-binary "{\"command\":\"sleep 0.5; echo $i\"}" \
                "$CELLA_URL/v1/sandboxes/$S/exec" >"$IT_TMP/c$i" &
        cpids="$cpids $!"
done
for p in $cpids; do
        wait "$p" || fail "concurrent curl failed"
done
for i in 1 2 3 4; do
        assert_eq "$i" "$(jq -r .stdout <"$IT_TMP/c$i")" "concurrent command $i"
done
