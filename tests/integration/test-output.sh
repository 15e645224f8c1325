#!/bin/bash
# The raw form of exec (Accept: application/octet-stream): stdout as the body byte for byte
# (binary, invalid UTF-8, a large stream), stderr and the end in trailers (exit code, a
# session's end, a timeout), errors before the body as JSON; the CLI and libcella on it; a
# client that leaves early stops the command and leaves nothing; a client that does not
# read holds the command back (cellad's memory stays bounded); the SSE stream keeps a
# UTF-8 character split across the pipe's writes whole; large output (with and without a
# default session) keeps every byte with stderr between, for a client that pauses and a
# command that exits with output unread.
. "$(dirname "$0")/lib.sh"
start_cellad

S=$(sbx out)
CLI=$CELLA_BUILD/cella

# raw CMD [curl args...]: POST .../exec with the raw form; body in $IT_TMP/raw, headers and
# trailers in $IT_TMP/hdr; status in API_STATUS.
raw() {
        local cmd=$1
        shift
        API_STATUS=$(curl -sS -N -o "$IT_TMP/raw" -D "$IT_TMP/hdr" -w '%{http_code}' \
                -H 'Accept: application/octet-stream' -H 'Content-Type: application/json' \
                "$@" --data-binary "$(jq -cn --arg c "$cmd" '{command:$c}')" \
                "$CELLA_URL/v1/sandboxes/$S/exec") || API_STATUS=000
}
# hdr NAME: the value of header or trailer NAME of the last raw answer (one a line when it
# comes more than once: Cella-Stderr).
hdr() {
        tr -d '\r' <"$IT_TMP/hdr" | awk -v n="$1" 'BEGIN {IGNORECASE = 1}
                index(tolower($0), tolower(n) ": ") == 1 {print substr($0, length(n) + 3)}'
}

run_in "$S" true >/dev/null

info "stdout as the body, byte-exact; stderr and the exit code in trailers"
raw "printf 'a\\0b\\377\\376\\n'; echo oops >&2; (exit 7)"
[ "$API_STATUS" = 200 ] || fail "raw exec: HTTP $API_STATUS"
assert_eq "$(printf 'a\0b\377\376\n' | od -An -tx1)" "$(od -An -tx1 <"$IT_TMP/raw")" "binary stdout"
assert_eq 7 "$(hdr Cella-Exit-Code)" "exit code trailer"
assert_eq "oops" "$(hdr Cella-Stderr | tr -d "\n" | base64 -d)" "stderr trailer"
assert_contains "$(hdr Content-Type)" "application/octet-stream" "content type"
assert_eq "" "$(hdr Cella-Error-Code)" "no error"
[ "$(hdr Cella-Pid)" -gt 0 ] || fail "no Cella-Pid header"

info "a large binary stream arrives whole (sha256 on both sides)"
run_in "$S" 'head -c 50000000 /dev/urandom > /tmp/r.bin' >/dev/null
want=$(run_in "$S" 'sha256sum < /tmp/r.bin | cut -d" " -f1')
raw 'cat /tmp/r.bin'
assert_eq 0 "$(hdr Cella-Exit-Code)" "cat's exit"
assert_eq 50000000 "$(stat -c %s "$IT_TMP/raw")" "bytes"
assert_eq "$want" "$(sha256sum <"$IT_TMP/raw" | cut -d' ' -f1)" "sha256"
cp "$IT_TMP/raw" "$IT_TMP/r.bin"

info "stderr beyond the trailer's limit is cut and says so"
raw 'head -c 100000 /dev/zero | tr "\0" e >&2; echo done'
assert_eq done "$(cat "$IT_TMP/raw")" "stdout"
assert_eq 65536 "$(hdr Cella-Stderr | tr -d "\n" | base64 -d | wc -c)" "stderr kept"
assert_eq true "$(hdr Cella-Stderr-Truncated)" "truncated"

info "a timeout and a session's end come as error trailers"
API_STATUS=$(curl -sS -N -o "$IT_TMP/raw" -D "$IT_TMP/hdr" -w '%{http_code}' \
        -H 'Accept: application/octet-stream' -d '{"command":"echo before; sleep 30","timeout":800}' \
        "$CELLA_URL/v1/sandboxes/$S/exec")
assert_eq 200 "$API_STATUS" "a timeout's status (the body had begun)"
assert_eq before "$(cat "$IT_TMP/raw")" "output before the timeout"
assert_eq COMMAND_TIMEOUT "$(hdr Cella-Error-Code)" "timeout trailer"
raw 'echo last; exit 3'
assert_eq last "$(cat "$IT_TMP/raw")" "output before the shell's end"
assert_eq SESSION_TERMINATED "$(hdr Cella-Error-Code)" "session's end"
assert_eq 3 "$(hdr Cella-Exit-Code)" "the shell's exit code"

info "errors before the body are the usual JSON answers"
API_STATUS=$(curl -sS -o "$IT_TMP/body" -w '%{http_code}' -H 'Accept: application/octet-stream' \
        -d '{"command":""}' "$CELLA_URL/v1/sandboxes/$S/exec")
expect_status 400 VALIDATION_FAILED
API_STATUS=$(curl -sS -o "$IT_TMP/body" -w '%{http_code}' -H 'Accept: application/octet-stream' \
        -d '{"command":"true","sessionId":"nosuch"}' "$CELLA_URL/v1/sandboxes/$S/exec")
expect_status 404 SESSION_NOT_FOUND
API_STATUS=$(curl -sS -0 -o "$IT_TMP/body" -w '%{http_code}' -H 'Accept: application/octet-stream' \
        -d '{"command":"true"}' "$CELLA_URL/v1/sandboxes/$S/exec")
expect_status 400 VALIDATION_FAILED
assert_contains "$(body .message)" "HTTP/1.1" "HTTP/1.0 refused with the reason"

info "a slow client gets all a command wrote before it ended (held for credit, not dropped)"
run_in "$S" 'head -c 12000000 /tmp/r.bin > /tmp/s.bin' >/dev/null
raw 'cat /tmp/s.bin' --limit-rate 2M
assert_eq 0 "$(hdr Cella-Exit-Code)" "slow cat's exit"
assert_eq "$(head -c 12000000 "$IT_TMP/r.bin" | sha256sum)" "$(sha256sum <"$IT_TMP/raw")" \
        "the slow client's bytes"
API_STATUS=$(curl -sS -N -o "$IT_TMP/sse" -w '%{http_code}' --limit-rate 1M \
        -H 'Accept: text/event-stream' -d '{"command":"head -c 3000000 /dev/zero"}' \
        "$CELLA_URL/v1/sandboxes/$S/exec")
assert_eq 3000000 "$(sed -n 's/^data: //p' "$IT_TMP/sse" |
        jq -j 'select(.type == "stdout") | .data' | wc -c)" "the slow SSE client's bytes"

info "the CLI: stdout straight through, stderr, exit status"
"$CLI" exec "$S" "head -c 3000000 /tmp/r.bin; echo to-err >&2; (exit 5)" >"$IT_TMP/cli.out" \
        2>"$IT_TMP/cli.err" && rc=0 || rc=$?
assert_eq 5 "$rc" "cella exec's status"
assert_eq "$(head -c 3000000 "$IT_TMP/r.bin" | sha256sum)" "$(sha256sum <"$IT_TMP/cli.out")" \
        "cella exec's stdout"
assert_eq to-err "$(cat "$IT_TMP/cli.err")" "cella exec's stderr"

info "a client that leaves early stops the command and leaves nothing behind"
timeout 20 curl -sS -N -H 'Accept: application/octet-stream' \
        -d '{"command":"yes early-leaver"}' "$CELLA_URL/v1/sandboxes/$S/exec" 2>/dev/null |
        head -c 100000 >/dev/null || true
gone=
for _ in $(seq 1 100); do
        if [ -z "$(run_in "$S" 'ps -eo comm= | grep -x yes || true')" ]; then
                gone=1
                break
        fi
        sleep 0.2
done
[ -n "$gone" ] || fail "the command outlived its client"
assert_eq ok "$(run_in "$S" 'echo ok')" "the session goes on"

info "a client that does not read holds the command back; cellad's memory stays bounded"
# in a session of its own: the default session stays free for the checks
api_json POST "/v1/sandboxes/$S/sessions" '{"id":"bulk"}'
expect_status 201
base_kb=$(awk '/^VmRSS/ {print $2}' "/proc/$CELLAD_PID/status")
exec {slow}< <(curl -sS -N -H 'Accept: application/octet-stream' --limit-rate 100k \
        -d '{"command":"head -c 2000000000 /dev/zero; echo end","sessionId":"bulk"}' \
        "$CELLA_URL/v1/sandboxes/$S/exec")
sleep 5
rss_kb=$(awk '/^VmRSS/ {print $2}' "/proc/$CELLAD_PID/status")
info "cellad VmRSS $base_kb kB before, $rss_kb kB with a stalled 2 GB stream"
[ $((rss_kb - base_kb)) -lt $((64 * 1024)) ] || fail "cellad grew by $((rss_kb - base_kb)) kB"
# the command has not written what the client has not taken: it is still running
assert_ne "" "$(run_in "$S" 'ps -eo comm= | grep -x head || true')" "the writer is held back"
exec {slow}<&-
for _ in $(seq 1 100); do
        [ -z "$(run_in "$S" 'ps -eo comm= | grep -x head || true')" ] && break
        sleep 0.2
done
assert_eq "" "$(run_in "$S" 'ps -eo comm= | grep -x head || true')" "the held command ends with its client"

info "SSE: a character split across the pipe's writes stays whole"
API_STATUS=$(curl -sS -N -o "$IT_TMP/sse" -w '%{http_code}' -H 'Accept: text/event-stream' \
        -d "{\"command\":\"printf '\\\\342\\\\230'; sleep 0.3; printf '\\\\203 ok'\"}" \
        "$CELLA_URL/v1/sandboxes/$S/exec")
assert_eq 200 "$API_STATUS" "sse status"
got=$(sed -n 's/^data: //p' "$IT_TMP/sse" | jq -j 'select(.type == "stdout") | .data')
assert_eq "☃ ok" "$got" "the snowman arrives whole"
assert_eq "" "$(sed -n 's/^data: //p' "$IT_TMP/sse" | jq -r 'select(.encoding) | .encoding')" \
        "no base64 for a split character"

info "large output on both paths: interleaved stderr, a paused client, an exit with output unread"
# In the default session (the command's stdout is a FIFO) and in a sandbox without one
# (its pipe): every form carries every byte in order, with stderr between (decision 0058,
# fourth profile).
NS=$(sbx nosession)
api_json PUT "/v1/sandboxes/$NS" '{"enableDefaultSession":false}'
expect_status 201
for box in "$S" "$NS"; do
        run_in "$box" 'head -c 50000000 /dev/urandom > /tmp/m.bin' >/dev/null
        sum=$(run_in "$box" 'head -c 41943040 /tmp/m.bin | md5sum | cut -d" " -f1')
        # 40 MiB of binary in 1 MiB writes, a line of stderr after each
        mixed='for i in $(seq 0 39); do dd if=/tmp/m.bin bs=1M skip=$i count=1 status=none; echo "e$i" >&2; done'
        API_STATUS=$(curl -sS -N -o "$IT_TMP/raw" -D "$IT_TMP/hdr" -w '%{http_code}' \
                -H 'Accept: application/octet-stream' \
                --data-binary "$(jq -cn --arg c "$mixed" '{command:$c}')" \
                "$CELLA_URL/v1/sandboxes/$box/exec")
        assert_eq 200 "$API_STATUS" "$box: raw status"
        assert_eq "$sum" "$(md5sum <"$IT_TMP/raw" | cut -d' ' -f1)" "$box: raw binary with stderr"
        assert_eq "$(seq 0 39 | sed 's/^/e/')" "$(hdr Cella-Stderr | tr -d "\n" | base64 -d)" \
                "$box: the stderr lines, in order"
        assert_eq 0 "$(hdr Cella-Exit-Code)" "$box: exit"
        # SSE, text: 64 MiB of `tr` output with stderr between
        text='for i in $(seq 1 16); do head -c 4194304 /dev/zero | tr "\0" x; echo "t$i" >&2; done'
        API_STATUS=$(curl -sS -N -o "$IT_TMP/sse" -w '%{http_code}' -H 'Accept: text/event-stream' \
                --data-binary "$(jq -cn --arg c "$text" '{command:$c}')" \
                "$CELLA_URL/v1/sandboxes/$box/exec")
        assert_eq 200 "$API_STATUS" "$box: sse status"
        sed -n 's/^data: //p' "$IT_TMP/sse" >"$IT_TMP/events"
        assert_eq "$(head -c 67108864 /dev/zero | tr '\0' x | md5sum)" \
                "$(jq -j 'select(.type == "stdout") | .data' "$IT_TMP/events" | md5sum)" \
                "$box: SSE text"
        assert_eq "$(seq 1 16 | sed 's/^/t/')" \
                "$(jq -j 'select(.type == "stderr") | .data' "$IT_TMP/events")" "$box: SSE stderr"
        assert_eq 0 "$(jq -r 'select(.type == "complete") | .exitCode' "$IT_TMP/events")" "$box: SSE exit"
        # buffered: 8 MB of text and stderr in one answer
        api_json POST "/v1/sandboxes/$box/exec" \
                '{"command":"head -c 8000000 /dev/zero | tr \"\\0\" y; echo end >&2"}'
        expect_status 200
        assert_eq "$(head -c 8000000 /dev/zero | tr '\0' y | md5sum)" \
                "$(body .stdout | tr -d '\n' | md5sum)" "$box: buffered stdout"
        assert_eq end "$(body .stderr)" "$box: buffered stderr"
        # a client that stops reading after 1 MiB for 3 s, then reads on (the command waits
        # for credit meanwhile, its output in the pipe); the command exits while the last
        # frames are still unread, with stderr and a code of its own
        exec {paused}< <(curl -sS -N -H 'Accept: application/octet-stream' \
                --data-binary "$(jq -cn '{command:"cat /tmp/m.bin; echo bye >&2; exit 4"}')" \
                "$CELLA_URL/v1/sandboxes/$box/exec")
        dd bs=1M count=1 iflag=fullblock status=none <&$paused >"$IT_TMP/paused"
        sleep 3
        cat <&$paused >>"$IT_TMP/paused"
        exec {paused}<&-
        assert_eq "$(run_in "$box" 'md5sum < /tmp/m.bin | cut -d" " -f1')" \
                "$(md5sum <"$IT_TMP/paused" | cut -d' ' -f1)" "$box: a paused client's bytes"
        # the CLI on the same path, slow, to the end: stderr and the exit status after it
        "$CLI" exec "$box" 'cat /tmp/m.bin; echo bye >&2; exit 4' >"$IT_TMP/cli.out" \
                2>"$IT_TMP/cli.err" && rc=0 || rc=$?
        assert_eq 4 "$rc" "$box: cella exec's status"
        assert_eq bye "$(cat "$IT_TMP/cli.err")" "$box: cella exec's stderr"
        assert_eq "$(md5sum <"$IT_TMP/paused" | cut -d' ' -f1)" \
                "$(md5sum <"$IT_TMP/cli.out" | cut -d' ' -f1)" "$box: cella exec's stdout"
done
api DELETE "/v1/sandboxes/$NS"
expect_status 200

info "output: ok"
