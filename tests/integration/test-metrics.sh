#!/bin/bash
# GET /metrics (docs/metrics.md): behind the bearer token; the whole answer parses with
# prometheus_client's text-format parser, every family typed and its histograms well formed
# (cumulative buckets, +Inf equal to _count); after known traffic (a start, N execs with
# known output, a file up and down, a request that fails with a known code, a preview
# request with a wrong token, an unauthenticated scrape) each counter moved by exactly what
# was done; a sandbox that sleeps moves between the state gauges and its wake is a start;
# `cella top --once` prints the sandboxes and the counters, `cella top` refreshes with rates.
. "$(dirname "$0")/lib.sh"

# Debian's python3-prometheus-client is in the system python3 (not in one PATH may find first)
PY=
for p in python3 /usr/bin/python3; do
        if "$p" -c 'import prometheus_client' 2>/dev/null; then
                PY=$p
                break
        fi
done
[ -n "$PY" ] || skip "needs python3-prometheus-client (scripts/deps.sh)"

CELLA_TOKEN=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
export CELLA_TOKEN
# no warm pool: the one start below is the only one
start_cellad --pool 0

# scrape FILE: GET /metrics with the token into FILE; checks status and Content-Type.
scrape() {
        local ct
        ct=$(curl -sS -o "$1" -w '%{http_code} %{content_type}' \
                -H "Authorization: Bearer $CELLA_TOKEN" "$CELLA_URL/metrics")
        assert_eq "200 text/plain; version=0.0.4; charset=utf-8" "$ct" "scrape status and type"
}

# check FILE: parsed by prometheus_client; types, names and histograms checked.
check() {
        "$PY" - "$1" <<'EOF'
import sys
from prometheus_client.parser import text_string_to_metric_families

text = open(sys.argv[1]).read()
assert text.endswith("\n"), "the exposition ends with a newline"
families = list(text_string_to_metric_families(text))
assert len(families) >= 10, len(families)
names = set()
for f in families:
    assert f.type in ("counter", "gauge", "histogram"), (f.name, f.type)
    assert f.documentation, f.name + ": no HELP"
    assert f.name not in names, f.name + " twice"
    names.add(f.name)
    if f.type == "counter":
        for s in f.samples:
            assert s.name.endswith("_total"), s.name
            assert s.value >= 0 and s.value == int(s.value), s
    if f.type != "histogram":
        continue
    series = {}
    for s in f.samples:
        key = tuple(sorted((k, v) for k, v in s.labels.items() if k != "le"))
        series.setdefault(key, {"buckets": [], "sum": None, "count": None})
        if s.name.endswith("_bucket"):
            series[key]["buckets"].append((float(s.labels["le"]), s.value))
        elif s.name.endswith("_sum"):
            series[key]["sum"] = s.value
        elif s.name.endswith("_count"):
            series[key]["count"] = s.value
    assert series, f.name + ": no samples"
    for key, h in series.items():
        b = h["buckets"]
        assert len(b) >= 2 and b[-1][0] == float("inf"), (f.name, b)
        assert [le for le, _ in b] == sorted(le for le, _ in b), (f.name, "le order", b)
        assert all(b[i][1] <= b[i + 1][1] for i in range(len(b) - 1)), (f.name, "cumulative", b)
        assert h["count"] is not None and b[-1][1] == h["count"], (f.name, "+Inf != count")
        assert h["sum"] is not None and h["sum"] >= 0, (f.name, "sum")
for want in ("cella_sandboxes", "cella_sandbox_starts", "cella_sandbox_start_duration_seconds",
             "cella_execs", "cella_exec_duration_seconds", "cella_stream_bytes", "cella_errors",
             "cella_http_requests", "cella_pool_size", "cella_pool_ready",
             "process_start_time_seconds", "cella_uptime_seconds", "cella_http_connections_open",
             "cella_http_connections_accepted"):
    assert want in names, want + " missing"
EOF
}

# value FILE NAME [LABEL=VALUE...]: the sum of NAME's samples with those labels (0: none).
value() {
        "$PY" - "$@" <<'EOF'
import sys
from prometheus_client.parser import text_string_to_metric_families

path, name, want = sys.argv[1], sys.argv[2], dict(a.split("=", 1) for a in sys.argv[3:])
total = 0.0
for f in text_string_to_metric_families(open(path).read()):
    for s in f.samples:
        if s.name == name and all(s.labels.get(k) == v for k, v in want.items()):
            total += s.value
print(int(total) if total == int(total) else total)
EOF
}

# delta NAME [LABELS...]: the value in M1 minus the value in M0.
delta() {
        echo $(($(value "$IT_TMP/m1" "$@") - $(value "$IT_TMP/m0" "$@")))
}

# ---- without the token: 401, counted ----
st=$(curl -sS -o "$IT_TMP/body" -w '%{http_code}' "$CELLA_URL/metrics")
assert_eq 401 "$st" "unauthenticated scrape"
assert_eq UNAUTHORIZED "$(jq -r .code "$IT_TMP/body")" "its code"
st=$(curl -sS -o "$IT_TMP/body" -w '%{http_code}' -H "Authorization: Bearer nope" \
        "$CELLA_URL/metrics")
assert_eq 401 "$st" "scrape with a wrong token"
assert_not_contains "$(cat "$IT_TMP/body")" "cella_" "a refused scrape shows no series"

scrape "$IT_TMP/m0"
check "$IT_TMP/m0"
assert_eq 0 "$(value "$IT_TMP/m0" cella_sandboxes)" "no sandbox yet"
assert_eq 2 "$(value "$IT_TMP/m0" cella_errors_total code=UNAUTHORIZED)" "two refused scrapes"
assert_eq 2 "$(value "$IT_TMP/m0" cella_http_requests_total route=/metrics method=GET status=4xx)" \
        "refused scrapes by route"
start0=$(value "$IT_TMP/m0" process_start_time_seconds)
now=$(date +%s)
# date +%s is cut to the second: a start in this very second is up to 1 s past it
"$PY" -c "import sys; s, n = float('$start0'), $now; sys.exit(0 if n - 120 < s < n + 1 else 1)" ||
        fail "process_start_time_seconds $start0 is not a recent time (now $now)"

# ---- known traffic ----
A=$(sbx a)
N=7
api_json PUT "/v1/sandboxes/$A" '{}'
expect_status 201
for i in $(seq 1 $N); do
        sx "$A" 'printf hello; printf oops >&2'
        expect_status 200
        assert_eq hello "$(body .stdout)"
done
head -c 3000 /dev/urandom >"$IT_TMP/up"
api PUT "/v1/sandboxes/$A/files?path=/workspace/up.bin" --data-binary "@$IT_TMP/up" >/dev/null
expect_status 200
api GET "/v1/sandboxes/$A/files?path=/workspace/up.bin" >/dev/null
expect_status 200
cmp "$IT_TMP/up" "$IT_TMP/body" || fail "downloaded file differs"
api GET "/v1/sandboxes/$(sbx nosuch)" >/dev/null
expect_status 404 SANDBOX_NOT_FOUND
# a preview host with a token that was never given: the preview proxy's 404
st=$(curl -sS -o /dev/null -w '%{http_code}' -H "Host: 8080-$A-aaaaaaaaaaaaaaaa.localhost" \
        "$CELLA_URL/")
assert_eq 404 "$st" "preview request with a wrong token"

scrape "$IT_TMP/m1"
check "$IT_TMP/m1"

assert_eq 1 "$(value "$IT_TMP/m1" cella_sandboxes state=running)" "one running sandbox"
assert_eq 1 "$(value "$IT_TMP/m1" cella_sandboxes)" "one sandbox in all"
assert_eq 1 "$(delta cella_sandbox_starts_total result=ok)" "one start"
assert_eq 0 "$(delta cella_sandbox_starts_total result=error)" "no failed start"
assert_eq 1 "$(delta cella_sandbox_start_duration_seconds_count)" "start histogram count"
assert_eq 1 "$(delta cella_sandbox_start_duration_seconds_bucket le=+Inf)" "start +Inf bucket"
assert_eq $N "$(delta cella_execs_total)" "execs"
assert_eq $N "$(delta cella_exec_duration_seconds_count)" "exec histogram count"
sum=$(value "$IT_TMP/m1" cella_exec_duration_seconds_sum)
"$PY" -c "import sys; sys.exit(0 if float('$sum') > 0 else 1)" || fail "exec duration sum $sum"
assert_eq $((N * 5)) "$(delta cella_stream_bytes_total stream=stdout)" "stdout bytes"
assert_eq $((N * 4)) "$(delta cella_stream_bytes_total stream=stderr)" "stderr bytes"
assert_eq 3000 "$(delta cella_stream_bytes_total stream=upload)" "upload bytes"
assert_eq 3000 "$(delta cella_stream_bytes_total stream=download)" "download bytes"
assert_eq 1 "$(delta cella_errors_total code=SANDBOX_NOT_FOUND)" "the known failure"
assert_eq 1 "$(delta cella_errors_total code=INVALID_TOKEN)" "the preview refusal"
assert_eq 2 "$(delta cella_errors_total)" "no other error"
assert_eq $N "$(delta cella_http_requests_total route=/v1/sandboxes/{id}/exec method=POST \
        status=2xx)" "exec requests"
assert_eq 1 "$(delta cella_http_requests_total route=/v1/sandboxes/{id} method=PUT status=2xx)" \
        "the create"
assert_eq 1 "$(delta cella_http_requests_total route=/v1/sandboxes/{id} method=GET status=4xx)" \
        "the failed GET"
assert_eq 1 "$(delta cella_http_requests_total route=/v1/sandboxes/{id}/files method=PUT \
        status=2xx)" "the upload"
assert_eq 1 "$(delta cella_http_requests_total route=/metrics method=GET status=2xx)" \
        "the first scrape (counted once answered)"
assert_eq $((N + 5)) "$(delta cella_http_requests_total)" "no other request"
assert_eq 1 "$(delta cella_preview_requests_total status=4xx)" "the preview request"
[ "$(value "$IT_TMP/m1" cella_http_connections_accepted_total)" -ge 10 ] ||
        fail "connections accepted: $(value "$IT_TMP/m1" cella_http_connections_accepted_total)"
[ "$(value "$IT_TMP/m1" cella_http_connections_open)" -ge 1 ] || fail "the scrape's connection"

# ---- timeouts: an exec that ends by its timeout is an exec and a COMMAND_TIMEOUT, answered
# as JSON (408) or as the SSE stream's last event ----
scrape "$IT_TMP/t0"
sx "$A" 'sleep 30' 300
expect_status 408 COMMAND_TIMEOUT
curl -sS -N -H "Authorization: Bearer $CELLA_TOKEN" -H 'Accept: text/event-stream' \
        -H 'Content-Type: application/json' -d '{"command":"sleep 30","timeout":300}' \
        "$CELLA_URL/v1/sandboxes/$A/exec" >"$IT_TMP/sse"
assert_contains "$(cat "$IT_TMP/sse")" '"code":"COMMAND_TIMEOUT"' "the SSE stream's timeout event"
scrape "$IT_TMP/t1"
tdelta() {
        echo $(($(value "$IT_TMP/t1" "$@") - $(value "$IT_TMP/t0" "$@")))
}
assert_eq 2 "$(tdelta cella_errors_total code=COMMAND_TIMEOUT)" "two timeouts"
assert_eq 2 "$(tdelta cella_errors_total)" "no other error"
assert_eq 2 "$(tdelta cella_execs_total)" "timed-out commands are execs"
assert_eq 1 "$(tdelta cella_http_requests_total route=/v1/sandboxes/{id}/exec method=POST \
        status=4xx)" "the 408"
assert_eq 1 "$(tdelta cella_http_requests_total route=/v1/sandboxes/{id}/exec method=POST \
        status=2xx)" "the SSE stream (200)"

# HEAD: the headers alone
st=$(curl -sS -I -o "$IT_TMP/head" -w '%{http_code}' -H "Authorization: Bearer $CELLA_TOKEN" \
        "$CELLA_URL/metrics")
assert_eq 200 "$st" "HEAD /metrics"

# ---- cella top --once ----
B=$(sbx b)
api_json PUT "/v1/sandboxes/$B" '{"keepAlive":true}'
expect_status 201
out=$("$CELLA_BUILD/cella" top --once) || fail "cella top --once failed"
echo "$out" >&2
assert_contains "$out" "$A" "top shows $A"
assert_contains "$out" "$B" "top shows $B"
assert_contains "$(echo "$out" | grep -F "$A")" "running" "top shows $A's state"
assert_contains "$out" "sandboxes 2" "top counts the sandboxes"
assert_contains "$out" "execs $((N + 2)) " "top shows the execs (the N, and the two timed out)"
# without the token it fails with the API's answer
CELLA_TOKEN= "$CELLA_BUILD/cella" top --once >"$IT_TMP/top.out" 2>"$IT_TMP/top.err" &&
        fail "cella top without the token succeeded"
assert_contains "$(cat "$IT_TMP/top.err")" "UNAUTHORIZED" "top reports the refusal"
# refreshing: a frame per interval, the later ones with rates
timeout -s INT 3 "$CELLA_BUILD/cella" top --interval 300ms >"$IT_TMP/top.live" 2>&1 || true
frames=$(grep -c '^execs ' "$IT_TMP/top.live" || true)
[ "$frames" -ge 2 ] || fail "cella top refreshed $frames times in 3 s: $(cat "$IT_TMP/top.live")"
assert_contains "$(grep '^execs ' "$IT_TMP/top.live" | tail -n 1)" "/s)" "rates once refreshed"
# --once with an interval is a usage error
"$CELLA_BUILD/cella" top --once --interval 0 >/dev/null 2>&1 && fail "--interval 0 accepted"

# ---- a sleeping sandbox: the state gauge follows, a wake is a start ----
C=$(sbx c)
api_json PUT "/v1/sandboxes/$C" '{"sleepAfter":"1s"}'
expect_status 201
for i in $(seq 1 60); do
        api GET "/v1/sandboxes/$C" >/dev/null
        [ "$(body .state)" = sleeping ] && break
        sleep 0.5
done
assert_eq sleeping "$(body .state)" "C sleeps after 1 s idle"
scrape "$IT_TMP/m2"
check "$IT_TMP/m2"
assert_eq 1 "$(value "$IT_TMP/m2" cella_sandboxes state=sleeping)" "one sleeping sandbox"
assert_eq 2 "$(value "$IT_TMP/m2" cella_sandboxes state=running)" "two running sandboxes"
run_in "$C" 'echo awake' >/dev/null
scrape "$IT_TMP/m3"
assert_eq 0 "$(value "$IT_TMP/m3" cella_sandboxes state=sleeping)" "the exec woke C"
assert_eq 1 "$(($(value "$IT_TMP/m3" cella_sandbox_starts_total result=ok) -
        $(value "$IT_TMP/m2" cella_sandbox_starts_total result=ok)))" "the wake is a start"

info "metrics: ok"
