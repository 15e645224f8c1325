#!/bin/bash
# The code interpreter (decision 0021): an idle sandbox starts no interpreter; persistence
# in a context (python, javascript), isolation between contexts, a context's cwd and env,
# serialized runs (5 concurrent increments give 1..5), parallel creation of 3 python and 3
# javascript contexts, rich results (matplotlib PNG, DataFrame HTML, a PNG larger than the
# stream window), bounded memory for a chatty run read by a slow client, errors (python,
# javascript), top-level await, TypeScript, output streamed as it happens (SSE), timeouts
# that interrupt and keep the context, a client going away, code ignoring SIGINT, a killed
# interpreter (CONTEXT_DEAD, then delete and recreate), forged events on the runner's
# pipe, a missing interpreter, contexts gone after a sleep and kept across a cellad
# restart, delete then 404, validation, and the `cella code` / `cella context` CLI.
. "$(dirname "$0")/lib.sh"
start_cellad

S=$(sbx code)
C=/v1/sandboxes/$S

# code JSON: POST /code; body in $IT_TMP/body, status in API_STATUS.
code() {
        api_json POST "$C/code" "$1"
}

# run_code CODE [CONTEXT]: JSON request for CODE (in CONTEXT).
run_req() {
        if [ $# -ge 2 ]; then
                jq -cn --arg c "$1" --arg x "$2" '{code:$c, contextId:$x}'
        else
                jq -cn --arg c "$1" '{code:$c}'
        fi
}

# main_text: the text of the last answer's main result.
main_text() {
        body '[.results[] | select(.isMainResult)][0].text // ""'
}

# new_context LANG: create a context, print its id.
new_context() {
        api_json POST "$C/contexts" "{\"language\":\"$1\"}"
        expect_status 201
        assert_eq "$1" "$(body .language)" "language of the new context"
        body .id
}

# ---- an idle sandbox starts no interpreter ----
procs=$(run_in "$S" "ps -eo comm=")
assert_not_contains "$procs" python3 "interpreter in an idle sandbox"
assert_not_contains "$procs" node "interpreter in an idle sandbox"

# ---- persistence in the default python context ----
code "$(run_req 'x = 41')"
expect_status 200
code "$(run_req 'x + 1')"
expect_status 200
assert_eq 42 "$(main_text)" "python default context keeps x"
assert_eq 2 "$(body .executionCount)" "execution count"
code '{"code":"print(\"out\")\nimport sys\nprint(\"err\", file=sys.stderr)"}'
expect_status 200
assert_eq "out" "$(body '.logs.stdout | join("")' | tr -d '\n')" "stdout in logs"
assert_eq "err" "$(body '.logs.stderr | join("")' | tr -d '\n')" "stderr in logs"

# ---- contexts: create, list, isolation ----
A=$(new_context python)
B=$(new_context python)
assert_ne "$A" "$B" "context ids"
case "$A" in ctx-*) ;; *) fail "context id [$A] is not ctx-..." ;; esac
assert_eq /workspace "$(body .cwd)" "default cwd"
code "$(run_req 'v = "in A"' "$A")"
expect_status 200
code "$(run_req 'v' "$B")"
expect_status 200
assert_eq NameError "$(body .error.name)" "B does not see A's variable"
code "$(run_req 'v' "$A")"
assert_eq "'in A'" "$(main_text)" "A keeps its variable"
api GET "$C/contexts" >/dev/null
expect_status 200
assert_contains "$(body '[.contexts[].id] | join(" ")')" "$A" "A listed"
assert_contains "$(body '[.contexts[].id] | join(" ")')" "$B" "B listed"

# cwd and env of a context
api_json POST "$C/contexts" '{"language":"python","cwd":"/tmp","env":{"CELLA_CTX_VAR":"v1"}}'
expect_status 201
E=$(body .id)
assert_eq /tmp "$(body .cwd)" "cwd of the context"
code "$(run_req 'import os; (os.getcwd(), os.environ["CELLA_CTX_VAR"])' "$E")"
assert_eq "('/tmp', 'v1')" "$(main_text)" "cwd and env applied"

# ---- serialization: 5 concurrent increments in one context give 1..5 ----
code "$(run_req 'n = 0' "$A")"
expect_status 200
pids=()
for i in 1 2 3 4 5; do
        curl -sS -X POST -H 'Content-Type: application/json' \
                --data-binary "$(run_req 'import time; n += 1; time.sleep(0.05); n' "$A")" \
                "$CELLA_URL$C/code" >"$IT_TMP/inc.$i" &
        pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
got=$(for i in 1 2 3 4 5; do
        jq -r '[.results[] | select(.isMainResult)][0].text' <"$IT_TMP/inc.$i"
done | sort -n | tr '\n' ' ')
assert_eq "1 2 3 4 5 " "$got" "concurrent increments"

# ---- parallel creation: 3 python and 3 javascript contexts at once ----
pids=()
for i in 1 2 3; do
        for l in python javascript; do
                curl -sS -o "$IT_TMP/par.$l.$i" -w '%{http_code}' -X POST \
                        -H 'Content-Type: application/json' --data-binary "{\"language\":\"$l\"}" \
                        "$CELLA_URL$C/contexts" >"$IT_TMP/par.$l.$i.status" &
                pids+=($!)
        done
done
for p in "${pids[@]}"; do wait "$p"; done
for i in 1 2 3; do
        for l in python javascript; do
                assert_eq 201 "$(cat "$IT_TMP/par.$l.$i.status")" \
                        "parallel create $l $i: $(cat "$IT_TMP/par.$l.$i")"
                id=$(jq -r .id <"$IT_TMP/par.$l.$i")
                code "$(run_req '6 * 7' "$id")"
                expect_status 200
                assert_eq 42 "$(main_text)" "parallel context $l $i usable"
        done
done
ids=$(for i in 1 2 3; do for l in python javascript; do jq -r .id <"$IT_TMP/par.$l.$i"; done; done |
        sort -u | wc -l)
assert_eq 6 "$ids" "six distinct context ids"

# ---- rich results ----
code '{"code":"import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()"}'
expect_status 200
body '[.results[] | select(.png)][0].png' | base64 -d >"$IT_TMP/fig.png" 2>/dev/null ||
        fail "no decodable png: $(head -c 400 "$IT_TMP/body")"
assert_eq "89504e470d0a1a0a" "$(head -c 8 "$IT_TMP/fig.png" | od -An -tx1 | tr -d ' \n')" \
        "PNG signature"
code '{"code":"import pandas as pd\npd.DataFrame({\"a\": [1, 2], \"b\": [3, 4]})"}'
expect_status 200
assert_contains "$(body '[.results[] | select(.isMainResult)][0].html // ""')" "<table" \
        "DataFrame as HTML"

# ---- large results and chatty output: memory stays bounded ----
pid1() {
        local p
        for p in $(sandbox_pids "$S"); do
                if grep -qs '^NSpid:.*[[:space:]]1$' "/proc/$p/status"; then
                        echo "$p"
                        return
                fi
        done
}
rss_kib() {
        awk '/^VmRSS/ {print $2}' "/proc/$1/status"
}
P1=$(pid1)
[ -n "$P1" ] || fail "no PID 1 of $S"
base_agent=$(rss_kib "$P1")
big=$'import numpy as np, matplotlib.pyplot as plt\nplt.figure(figsize=(12, 12), dpi=120)\nplt.imshow(np.random.rand(800, 800))\nplt.show()'
code "$(run_req "$big")"
expect_status 200
len=$(body '[.results[] | select(.png)][0].png | length')
[ "$len" -gt 2000000 ] || fail "expected a PNG larger than the stream window, got $len bytes"
body '[.results[] | select(.png)][0].png' | base64 -d | head -c 8 | od -An -tx1 | tr -d ' \n' |
        grep -q 89504e470d0a1a0a || fail "large PNG does not decode"
curl -sS -N -H 'Accept: text/event-stream' -H 'Content-Type: application/json' \
        --data-binary "$(run_req "$big")" "$CELLA_URL$C/code" >"$IT_TMP/big.sse"
grep '"type":"result"' "$IT_TMP/big.sse" | head -n 1 | sed 's/^data: //' | jq -r .png |
        base64 -d | head -c 8 | od -An -tx1 | tr -d ' \n' | grep -q 89504e470d0a1a0a ||
        fail "large PNG over SSE does not decode"
after=$(rss_kib "$P1")
[ $((after - base_agent)) -lt 16384 ] ||
        fail "agent memory grew from $base_agent to $after KiB after large results"
chatty='import sys
for i in range(40):
    sys.stdout.write("x" * 1000000)'
curl -sS -N --limit-rate 8M -H 'Accept: text/event-stream' -H 'Content-Type: application/json' \
        --data-binary "$(run_req "$chatty")" "$CELLA_URL$C/code" >"$IT_TMP/chatty.sse" &
CP=$!
max_agent=0
max_cellad=0
base_cellad=$(rss_kib "$CELLAD_PID")
while kill -0 "$CP" 2>/dev/null; do
        a=$(rss_kib "$P1")
        d=$(rss_kib "$CELLAD_PID")
        [ "$a" -gt "$max_agent" ] && max_agent=$a
        [ "$d" -gt "$max_cellad" ] && max_cellad=$d
        sleep 0.2
done
wait "$CP" || fail "chatty stream failed"
got=$(grep '^data:' "$IT_TMP/chatty.sse" | sed 's/^data: //' |
        jq -j 'select(.type == "stdout") | .text' | wc -c)
assert_eq 40000000 "$got" "bytes of a chatty run read by a slow client"
[ $((max_agent - base_agent)) -lt 32768 ] ||
        fail "agent memory grew from $base_agent to $max_agent KiB for 40 MB of output"
# (a sanitizer build's cellad keeps freed memory in quarantine: its RSS says nothing)
if ! ldd "$CELLA_BUILD/cellad" 2>/dev/null | grep -q libasan; then
        [ $((max_cellad - base_cellad)) -lt 32768 ] ||
                fail "cellad memory grew from $base_cellad to $max_cellad KiB for 40 MB of output"
fi

# ---- errors ----
code '{"code":"def f():\n    raise ValueError(\"bad value\")\nf()"}'
expect_status 200
assert_eq ValueError "$(body .error.name)" "python error name"
assert_eq "bad value" "$(body .error.message)" "python error message"
assert_contains "$(body '.error.traceback | join("\n")')" "ValueError" "python traceback"

# ---- javascript and typescript ----
J=$(new_context javascript)
code "$(run_req 'let jv = 20; const jc = 1;' "$J")"
expect_status 200
code "$(run_req 'jv + jc + 1' "$J")"
expect_status 200
assert_eq 22 "$(main_text)" "javascript declarations persist"
code "$(run_req 'await new Promise((r) => setTimeout(() => r(5), 20))' "$J")"
expect_status 200
assert_eq 5 "$(main_text)" "top-level await"
code "$(run_req 'throw new TypeError("js bad")' "$J")"
expect_status 200
assert_eq TypeError "$(body .error.name)" "javascript error name"
assert_eq "js bad" "$(body .error.message)" "javascript error message"
code '{"code":"console.log(\"from default js\"); 3","language":"javascript"}'
expect_status 200
assert_eq 3 "$(main_text)" "default javascript context"
assert_contains "$(body '.logs.stdout | join("")')" "from default js" "console.log to stdout"
T=$(new_context typescript)
code "$(run_req 'const tn: number = 21; tn * 2' "$T")"
expect_status 200
assert_eq 42 "$(main_text)" "typescript run"
code "$(run_req 'tn' "$A")"
assert_eq NameError "$(body .error.name)" "languages do not share state"
code "$(run_req '1' "$T")"
code '{"code":"1","contextId":"'"$T"'","language":"python"}'
expect_status 400 VALIDATION_FAILED

# ---- streaming: events as they happen ----
curl -sS -N -H 'Accept: text/event-stream' -H 'Content-Type: application/json' \
        --data-binary "$(run_req $'import time\nfor i in range(3):\n    print("line", i)\n    time.sleep(0.3)\n"end"' "$A")" \
        "$CELLA_URL$C/code" | while IFS= read -r l; do
        case "$l" in data:*) echo "$(date +%s.%N) ${l#data: }" ;; esac
done >"$IT_TMP/sse"
first_out=$(grep -n '"type":"stdout"' "$IT_TMP/sse" | head -n 1 | cut -d: -f1)
result=$(grep -n '"type":"result"' "$IT_TMP/sse" | head -n 1 | cut -d: -f1)
complete=$(grep -n '"type":"execution_complete"' "$IT_TMP/sse" | head -n 1 | cut -d: -f1)
[ -n "$first_out" ] && [ -n "$result" ] && [ -n "$complete" ] ||
        fail "stream lacks events: $(cat "$IT_TMP/sse")"
[ "$first_out" -lt "$result" ] && [ "$result" -lt "$complete" ] ||
        fail "events out of order: $(cat "$IT_TMP/sse")"
outs=$(grep -c '"type":"stdout"' "$IT_TMP/sse")
[ "$outs" -ge 3 ] || fail "expected separate stdout events, got $outs: $(cat "$IT_TMP/sse")"
t_first=$(sed -n "${first_out}p" "$IT_TMP/sse" | cut -d' ' -f1)
t_done=$(sed -n "${complete}p" "$IT_TMP/sse" | cut -d' ' -f1)
awk -v a="$t_first" -v b="$t_done" 'BEGIN { exit !(b - a > 0.2) }' ||
        fail "the first line arrived with the completion (buffered?): $(cat "$IT_TMP/sse")"

# ---- timeout interrupts; the context survives ----
code "$(jq -cn --arg x "$A" '{code:"kept = 7\nimport time\ntime.sleep(60)", contextId:$x, timeout:500}')"
expect_status 200
assert_eq true "$(body .timedOut)" "timedOut"
assert_eq KeyboardInterrupt "$(body .error.name)" "interrupted run's error"
code "$(run_req 'kept' "$A")"
expect_status 200
assert_eq 7 "$(main_text)" "context survives the interrupt"

# ---- the client going away interrupts the run ----
curl -sS -N -H 'Accept: text/event-stream' -H 'Content-Type: application/json' \
        --data-binary "$(run_req $'import time\nprint("started", flush=True)\ntime.sleep(60)\nfinished = True' "$A")" \
        "$CELLA_URL$C/code" >"$IT_TMP/abort.sse" 2>/dev/null &
CURL_PID=$!
for i in $(seq 300); do
        grep -q '"started' "$IT_TMP/abort.sse" && break
        sleep 0.1
done
grep -q '"started' "$IT_TMP/abort.sse" || fail "the run to abort did not start"
kill "$CURL_PID"
wait "$CURL_PID" 2>/dev/null || true
code "$(run_req "'finished' in globals()" "$A")"
expect_status 200
assert_eq False "$(main_text)" "the abandoned run was interrupted"

# ---- user code writing to the runner's event pipe: bad lines, another run's id, unknown
# types, a forged result are ignored or taken as the run's own; the run completes ----
H=$(new_context python)
forge=$'import os, stat\nfds = [int(f) for f in os.listdir("/proc/self/fd") if int(f) >= 100]\nfor fd in fds:\n    try:\n        if stat.S_ISFIFO(os.fstat(fd).st_mode) and os.get_blocking(fd) is not None:\n            os.write(fd, b\'not json\\n{"type":"done","id":999}\\n{"type":"weird"}\\n{"type":"result","id":1,"result":{"text":"forged","evil":1}}\\n{"type":"error","id":1,"name":7}\\n\')\n    except OSError:\n        pass\n"survived"'
code "$(run_req "$forge" "$H")"
expect_status 200
assert_eq "'survived'" "$(main_text)" "run completes despite forged events"
assert_not_contains "$(body)" '"evil"' "unknown result keys dropped"
code "$(run_req '2 + 2' "$H")"
expect_status 200
assert_eq 4 "$(main_text)" "context usable after forged events"

# ---- a sandbox without the interpreter: 501 naming the language ----
N=$(sbx code-nopy)
api_json PUT "/v1/sandboxes/$N" '{"env":{"PATH":"/nowhere"}}'
[ "$API_STATUS" = 201 ] || [ "$API_STATUS" = 200 ] || fail "create $N: $(body)"
api_json POST "/v1/sandboxes/$N/contexts" '{"language":"python"}'
expect_status 501 INTERPRETER_NOT_FOUND
assert_contains "$(body .message)" "Python" "the language is named"
api DELETE "/v1/sandboxes/$N" >/dev/null

# ---- code that ignores the interrupt: killed after the grace period, context dead ----
G=$(new_context python)
code "$(jq -cn --arg x "$G" '{code:"import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(120)", contextId:$x, timeout:300}')"
expect_status 410 CONTEXT_DEAD
assert_contains "$(body .message)" "interrupt" "the reason names the interrupt"
api DELETE "$C/contexts/$G" >/dev/null
expect_status 200

# ---- a killed interpreter: CONTEXT_DEAD, delete, recreate ----
K=$(new_context python)
code "$(run_req 'import os; os.kill(os.getpid(), 9)' "$K")"
expect_status 410 CONTEXT_DEAD
code "$(run_req '1 + 1' "$K")"
expect_status 410 CONTEXT_DEAD
api GET "$C/contexts" >/dev/null
assert_eq dead "$(body '.contexts[] | select(.id == "'"$K"'") | .status')" \
        "listed as dead"
api DELETE "$C/contexts/$K" >/dev/null
expect_status 200
K2=$(new_context python)
code "$(run_req '1 + 1' "$K2")"
expect_status 200
assert_eq 2 "$(main_text)" "recreated context works"

# ---- deleting a context kills its interpreter ----
before=$(run_in "$S" 'pgrep -c -x python3 || true')
D=$(new_context python)
code "$(run_req '1' "$D")"
api DELETE "$C/contexts/$D" >/dev/null
expect_status 200
for i in $(seq 100); do
        now=$(run_in "$S" 'pgrep -c -x python3 || true')
        [ "$now" -le "$before" ] && break
        sleep 0.1
done
[ "$now" -le "$before" ] || fail "python3 processes: $before before, $now after the delete"

# ---- delete, then 404 ----
api DELETE "$C/contexts/$B" >/dev/null
expect_status 200
api DELETE "$C/contexts/$B" >/dev/null
expect_status 404 CONTEXT_NOT_FOUND
code "$(run_req '1' "$B")"
expect_status 404 CONTEXT_NOT_FOUND
code "$(run_req '1' "no-such-context")"
expect_status 404 CONTEXT_NOT_FOUND

# ---- contexts end with the sandbox's processes: after a sleep, CONTEXT_NOT_FOUND ----
Z=$(sbx code-nap)
api_json PUT "/v1/sandboxes/$Z" '{"sleepAfter":"2s"}'
expect_status 201
api_json POST "/v1/sandboxes/$Z/contexts" '{"language":"python"}'
expect_status 201
ZC=$(body .id)
api_json POST "/v1/sandboxes/$Z/code" "$(jq -cn --arg x "$ZC" '{code:"import time\ntime.sleep(3)\nz = 5", contextId:$x}')"
expect_status 200
for i in $(seq 1 100); do
        api GET "/v1/sandboxes/$Z" >/dev/null
        [ "$(body .state)" = sleeping ] && break
        sleep 0.2
done
assert_eq sleeping "$(body .state)" "the sandbox went to sleep"
api_json POST "/v1/sandboxes/$Z/code" "$(run_req 'z' "$ZC")"
expect_status 404 CONTEXT_NOT_FOUND
api_json POST "/v1/sandboxes/$Z/code" "$(run_req '1 + 2')"
expect_status 200
assert_eq 3 "$(main_text)" "a new default context after the wake"
api DELETE "/v1/sandboxes/$Z" >/dev/null

# ---- validation ----
api_json POST "$C/contexts" '{"language":"cobol"}'
expect_status 400 VALIDATION_FAILED
api_json POST "$C/contexts" '{"language":"python","bogus":1}'
expect_status 400 VALIDATION_FAILED
api_json POST "$C/contexts" '{"language":"python","cwd":"relative"}'
expect_status 400 VALIDATION_FAILED
code '{"code":1}'
expect_status 400 VALIDATION_FAILED
code '{"code":"1","contextId":"../x"}'
expect_status 400 VALIDATION_FAILED
code '{"code":"1","timeout":-1}'
expect_status 400 VALIDATION_FAILED
code '{}'
expect_status 400 VALIDATION_FAILED
api PUT "$C/contexts" >/dev/null
expect_status 405 METHOD_NOT_ALLOWED
api_json POST "$C/contexts" '{"language":"python","cwd":"/no/such/dir"}'
[ "$API_STATUS" -ge 400 ] || fail "a context in a missing cwd was created: $(body)"

# ---- a runner's source is in no command line: it arrives on stdin, which runs find empty ----
node_ctx=$(new_context javascript)
code "$(run_req '1' "$node_ctx")"
expect_status 200
for p in $(run_in "$S" 'pgrep -x python3; pgrep -x node'); do
        cmd=$(run_in "$S" "tr '\\0' ' ' </proc/$p/cmdline")
        [ ${#cmd} -lt 64 ] || fail "runner $p has a long command line (${#cmd} bytes): ${cmd:0:200}"
        assert_not_contains "$cmd" "import" "runner $p command line"
        assert_not_contains "$cmd" "require" "runner $p command line"
        info "runner $p: $cmd"
done
assert_contains "$(run_in "$S" 'ps -eo args=')" "python3 -u -I -" "python runner in ps"
assert_contains "$(run_in "$S" 'ps -eo args=')" "node -" "node runner in ps"
code "$(run_req 'import sys; len(sys.stdin.read())')"
expect_status 200
assert_eq 0 "$(main_text)" "python run's stdin"
code "$(run_req "require('fs').readFileSync(0).length" "$node_ctx")"
expect_status 200
assert_eq 0 "$(main_text)" "javascript run's stdin"
api DELETE "$C/contexts/$node_ctx" >/dev/null
expect_status 200

# ---- interpreters run in cgroups of their own, inside the sandbox ----
cgs=$(run_in "$S" 'for p in $(pgrep -x python3); do cat /proc/$p/cgroup; done' | sort -u)
assert_contains "$cgs" "/code-" "runner cgroups"

# ---- a cellad restart keeps the contexts (they live in the reattached sandbox's agent) ----
kill -KILL "$CELLAD_PID"
wait "$CELLAD_PID" 2>/dev/null || true
CELLAD_PID=
start_cellad
code "$(run_req 'kept' "$A")"
expect_status 200
assert_eq 7 "$(main_text)" "context state after a cellad restart"

# ---- CLI ----
CLI=$CELLA_BUILD/cella
out=$("$CLI" code "$S" 'print("cli out"); 40 + 2') || fail "cella code failed: $out"
assert_contains "$out" "cli out" "cella code stdout"
assert_contains "$out" "42" "cella code result"
if out=$("$CLI" code "$S" 'raise RuntimeError("cli boom")' 2>"$IT_TMP/cli.err"); then
        fail "cella code exited 0 on an error"
fi
assert_contains "$(cat "$IT_TMP/cli.err")" "RuntimeError" "traceback on stderr"
out=$(echo 'console.log("js via stdin")' | "$CLI" code "$S" --lang javascript -) ||
        fail "cella code --lang javascript failed"
assert_contains "$out" "js via stdin" "cella code from stdin"
mkdir -p "$IT_TMP/figs"
out=$("$CLI" code "$S" --out-dir "$IT_TMP/figs" \
        'import matplotlib.pyplot as plt; plt.plot([1, 2]); plt.show()') ||
        fail "cella code --out-dir failed: $out"
png=$(find "$IT_TMP/figs" -name '*.png' | head -n 1)
[ -n "$png" ] || fail "no png written to --out-dir: $out"
assert_contains "$out" "$png" "png path printed"
X=$("$CLI" context create "$S" --lang python --cwd /tmp) || fail "cella context create"
"$CLI" code "$S" --context "$X" 'import os; os.getcwd()' | grep -q /tmp ||
        fail "cella code --context"
"$CLI" context ls "$S" | grep -q "$X" || fail "cella context ls lacks $X"
"$CLI" context rm "$S" "$X" || fail "cella context rm"
if "$CLI" context rm "$S" "$X" 2>/dev/null; then
        fail "cella context rm of a removed context succeeded"
fi
out=$("$CLI" code "$S" --json '1 + 1') || fail "cella code --json"
assert_eq 2 "$(echo "$out" | jq -r '.results[0].text')" "cella code --json"
if "$CLI" code "$S" --timeout 300 'import time; time.sleep(30)' >/dev/null 2>&1; then
        fail "a timed-out run exited 0"
fi

info "code interpreter ok"
