#!/bin/bash
# Load: LOAD_SECONDS (60) of `exec true` at saturation from 32 clients over 20 sandboxes,
# then LOAD_SECONDS of mixed traffic (exec, file PUT and GET compared, background process
# start and kill, GETs through preview URLs, one execStream per sandbox for the whole
# run) from the same 32 clients: no operation may fail, and cellad's resident memory at
# the end of the mixed run may not exceed what it was a quarter into it by more than
# LOAD_RSS_SLACK_KB (32 MiB: room for the allocator's arenas of 32 concurrent requests,
# far below one leaked buffer per operation, which would be ~hundreds of MiB here).
# Latencies are printed (tests/helpers/load-client.c), never judged; docs/reliability.md
# has figures from a run.
. "$(dirname "$0")/lib.sh"

SECONDS_EACH=${LOAD_SECONDS:-60}
CLIENTS=32
SANDBOXES=20
RSS_SLACK_KB=${LOAD_RSS_SLACK_KB:-32768}
LOAD=$CELLA_BUILD/tests/load-client
[ -x "$LOAD" ] || skip "no $LOAD"

start_cellad --pool 0
PREFIX=$(sbx load-)

info "creating $SANDBOXES sandboxes"
seq 0 $((SANDBOXES - 1)) | xargs -P 8 -I{} curl -sS -f -o /dev/null -X PUT \
        "$CELLA_URL/v1/sandboxes/${PREFIX}{}" -H 'Content-Type: application/json' \
        -d '{"keepAlive":true,"network":"none"}' || fail "creating the sandboxes"
for i in $(seq 0 $((SANDBOXES - 1))); do
        assert_eq running "$(api GET "/v1/sandboxes/$PREFIX$i" | jq -r .state)" "sandbox $i"
done

figure() { # LINE KEY -> the value of KEY=
        echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"
}

info "exec at saturation: $CLIENTS clients, $SANDBOXES sandboxes, $SECONDS_EACH s"
out=$("$LOAD" "$CELLA_URL" "$PREFIX" $SANDBOXES $CLIENTS "$SECONDS_EACH" "$CELLAD_PID" exec) ||
        fail "load-client exec failed"
info "$out"
assert_eq 0 "$(figure "$out" errors)" "errors under exec load"
[ "$(figure "$out" ops)" -gt 0 ] || fail "no exec completed"
api GET /v1/health >/dev/null
expect_status 200

info "mixed traffic: servers, preview URLs and a stream session in every sandbox"
for i in $(seq 0 $((SANDBOXES - 1))); do
        api_json POST "/v1/sandboxes/$PREFIX$i/processes" \
                '{"command":"python3 -m http.server 8000 --directory /workspace","processId":"web"}'
        expect_status 200
        api_json POST "/v1/sandboxes/$PREFIX$i/sessions" '{"id":"load-stream"}'
        expect_status 201
done
for i in $(seq 0 $((SANDBOXES - 1))); do
        api_json POST "/v1/sandboxes/$PREFIX$i/processes/web/waitForPort" '{"port":8000,"timeout":60000}'
        expect_status 200
        api_json POST "/v1/sandboxes/$PREFIX$i/ports" '{"port":8000}'
        expect_status 201
done

info "mixed load: $CLIENTS clients, $SANDBOXES sandboxes, $SECONDS_EACH s"
out=$("$LOAD" "$CELLA_URL" "$PREFIX" $SANDBOXES $CLIENTS "$SECONDS_EACH" "$CELLAD_PID" mixed) ||
        fail "load-client mixed failed"
info "$out"
assert_eq 0 "$(figure "$out" errors)" "errors under mixed load"
assert_eq 0 "$(figure "$out" stream_errors)" "execStream errors under mixed load"
for op in exec file process preview; do
        [ "$(figure "$out" "${op}_n")" -gt 0 ] || fail "no $op operation completed"
done
[ "$(figure "$out" stream_lines)" -gt $((SANDBOXES * SECONDS_EACH)) ] ||
        fail "the streams delivered $(figure "$out" stream_lines) lines"
start=$(figure "$out" rss_start_kb) end=$(figure "$out" rss_end_kb)
info "cellad RSS: $start KiB a quarter in, $end KiB at the end, $(figure "$out" rss_max_kb) KiB at most"
[ "$end" -le $((start + RSS_SLACK_KB)) ] ||
        fail "cellad RSS grew from $start to $end KiB under steady mixed load"
api GET /v1/health >/dev/null
expect_status 200
info "load OK"
