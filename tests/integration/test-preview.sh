#!/bin/bash
# Exposed ports and preview URLs: a node server inside a sandbox (tests/integration/preview/
# server.js) reached through its preview URL and through /ws/{port}: request and response
# bodies streamed, 307 with two Set-Cookie, SSE events before the response ends, WebSocket
# echo (several at once), the target named by X-Forwarded-Host instead of Host (HTTP and
# WebSocket), wrong token / unexposed 404, unexpose, stale after sleep (410, does not wake),
# tokens survive a cellad restart, with auth on: no bearer token needed and Authorization
# never reaching the app (preview URL, X-Forwarded-Host, /ws/{port}), and a page in
# headless Chromium that talks WebSocket through the preview URL.
. "$(dirname "$0")/lib.sh"
HERE=$(cd "$(dirname "$0")" && pwd)
start_cellad

S=$(sbx prev)
P=8080
# S stays awake (keepAlive); the stale-after-sleep part uses its own sandbox.
api_json PUT "/v1/sandboxes/$S" '{"keepAlive":true}'
expect_status 201

start_server() { # start_server SANDBOX ID: the test server on port $P, waited for
        api PUT "/v1/sandboxes/$1/files?path=/workspace/server.js" \
                --data-binary @"$HERE/preview/server.js" >/dev/null
        expect_status 200
        api_json POST "/v1/sandboxes/$1/processes" \
                "{\"command\":\"node /workspace/server.js $P\",\"processId\":\"$2\"}"
        expect_status 200
        api_json POST "/v1/sandboxes/$1/processes/$2/waitForPort" "{\"port\":$P,\"timeout\":30000}"
        expect_status 200
}

info "ports API validation"
api_json POST "/v1/sandboxes/$S/ports" '{"port":80}'
expect_status 400 INVALID_PORT
api_json POST "/v1/sandboxes/$S/ports" '{"port":3000}'
expect_status 400 INVALID_PORT
api_json POST "/v1/sandboxes/$S/ports" '{"port":8080,"token":"Bad-Token"}'
expect_status 400 VALIDATION_FAILED
api_json POST "/v1/sandboxes/$S/ports" '{"port":"8080"}'
expect_status 400 INVALID_PORT

info "expose"
api_json POST "/v1/sandboxes/$S/ports" "{\"port\":$P,\"name\":\"web\"}"
expect_status 201
URL=$(body .url)
TOKEN=$(echo "$URL" | sed -E "s#^http://$P-$S-([a-z0-9_]+)\.localhost:[0-9]+/\$#\1#")
assert_eq 16 "${#TOKEN}" "generated token length ($URL)"
assert_eq web "$(body .name)" "port name"
api_json POST "/v1/sandboxes/$S/ports" "{\"port\":$P}"
expect_status 200
assert_eq "$URL" "$(body .url)" "re-exposing keeps the URL"
api_json POST "/v1/sandboxes/$S/ports" "{\"port\":$P,\"token\":\"other_other_othe\"}"
expect_status 409 PORT_ALREADY_EXPOSED
api GET "/v1/sandboxes/$S/ports" >/dev/null
expect_status 200
assert_eq "$P active" "$(body '.ports[] | "\(.port) \(.status)"')" "GET /ports"

HOSTPORT=${CELLA_URL#http://}
DPORT=${HOSTPORT##*:}
PHOST="$P-$S-$TOKEN.localhost:$DPORT"
pv() { # pv PATH [curl args]: through the preview URL; body in $IT_TMP/pv, status printed
        local path=$1
        shift
        curl -sS -o "$IT_TMP/pv" -w '%{http_code}' -H "Host: $PHOST" "$@" "$CELLA_URL$path"
}

xpv() { # xpv FORWARDED_HOST PATH [curl args]: to the API's address and Host, the target in
        # X-Forwarded-Host (as a proxy written with fetch sends it); as pv
        local xfh=$1 path=$2
        shift 2
        curl -sS -o "$IT_TMP/pv" -w '%{http_code}' -H "X-Forwarded-Host: $xfh" "$@" \
                "$CELLA_URL$path"
}
seen() { # seen NAME: the values of header NAME the app saw in the last pv/xpv (/echo), by ','
        jq -r --arg n "$1" '.raw | [range(0; length; 2) as $i |
                select(.[$i] | ascii_downcase == $n) | .[$i + 1]] | join(",")' "$IT_TMP/pv"
}
ws_seen() { # ws_seen NAME: the same from a wsclient.py --seen output on stdin
        sed -n 's/^seen //p' | jq -r --arg n "$1" '[range(0; length; 2) as $i |
                select(.[$i] | ascii_downcase == $n) | .[$i + 1]] | join(",")'
}

info "connection refused inside the sandbox: 502"
assert_eq 502 "$(pv /echo)" "nothing listening"
assert_eq BAD_GATEWAY "$(jq -r .code "$IT_TMP/pv")" "502 code"

start_server "$S" web1

info "HTTP through the preview URL"
assert_eq 200 "$(pv '/echo?x=1' -X PATCH -H 'X-Test: yes')" "PATCH echo"
assert_eq PATCH "$(jq -r .method "$IT_TMP/pv")" "method"
assert_eq "/echo?x=1" "$(jq -r .url "$IT_TMP/pv")" "target passed unchanged"
assert_eq yes "$(jq -r '.headers["x-test"]' "$IT_TMP/pv")" "header passed"
assert_eq "$PHOST" "$(jq -r '.headers["x-forwarded-host"]' "$IT_TMP/pv")" "X-Forwarded-Host"
assert_eq 127.0.0.1 "$(jq -r '.headers["x-forwarded-for"]' "$IT_TMP/pv")" "X-Forwarded-For"
assert_eq http "$(jq -r '.headers["x-forwarded-proto"]' "$IT_TMP/pv")" "X-Forwarded-Proto"
assert_eq 200 "$(curl -sS -o /dev/null -w '%{http_code}' "http://$PHOST/echo" \
        --resolve "$P-$S-$TOKEN.localhost:$DPORT:127.0.0.1")" "--resolve like a browser"

info "X-Forwarded-Host names the preview target when the Host is not a preview host"
assert_eq 200 "$(xpv "$PHOST" '/echo/some/path?x=1' -X POST -d hello)" "X-Forwarded-Host form"
assert_eq "POST /echo/some/path?x=1 5" "$(jq -r '"\(.method) \(.url) \(.length)"' "$IT_TMP/pv")" \
        "request passed"
assert_eq "$PHOST" "$(seen host)" "the app sees Host = the preview host, once"
assert_eq "$PHOST" "$(seen x-forwarded-host)" "one X-Forwarded-Host, the preview host"
assert_eq 127.0.0.1 "$(seen x-forwarded-for)" "X-Forwarded-For"
assert_eq 200 "$(xpv "$PHOST, proxy.example:8443" /echo -H 'X-Forwarded-For: 203.0.113.7')" \
        "a list: the first host is the client's"
assert_eq "$PHOST" "$(seen x-forwarded-host)" "X-Forwarded-Host of a list"
assert_eq "203.0.113.7, 127.0.0.1" "$(seen x-forwarded-for)" "X-Forwarded-For appended"
assert_eq 200 "$(pv /echo -H "X-Forwarded-Host: $P-$S-wrongtoken.localhost")" \
        "a preview Host wins over X-Forwarded-Host"
assert_eq "$PHOST" "$(seen x-forwarded-host)" "the client's X-Forwarded-Host replaced"
assert_eq 404 "$(xpv "$P-$S-wrongtoken.localhost:$DPORT" /echo)" "bad token in X-Forwarded-Host"
assert_eq INVALID_TOKEN "$(jq -r .code "$IT_TMP/pv")" "bad token code"
assert_eq 404 "$(xpv "0-$S-$TOKEN.localhost:$DPORT" /echo)" "malformed preview X-Forwarded-Host"
assert_eq INVALID_TOKEN "$(jq -r .code "$IT_TMP/pv")" "malformed code"
api GET "/v1/sandboxes/$S" -H 'X-Forwarded-Host: proxy.example.com:8443' >/dev/null
expect_status 200
assert_eq "$S" "$(body .id)" "a non-preview X-Forwarded-Host: an API call"
api GET "/v1/sandboxes/$S" -H "X-Forwarded-Host: proxy.example.com, $PHOST" >/dev/null
expect_status 200
assert_eq "$S" "$(body .id)" "a preview host not first in X-Forwarded-Host: an API call"

info "request body streamed (8 MiB, chunked and sized)"
head -c $((8 * 1024 * 1024)) /dev/urandom >"$IT_TMP/up"
want=$(sha256sum <"$IT_TMP/up" | cut -d' ' -f1)
assert_eq 200 "$(pv /echo -X POST --data-binary @"$IT_TMP/up")" "sized upload"
assert_eq "$want" "$(jq -r .sha "$IT_TMP/pv")" "sized upload arrived whole"
assert_eq 200 "$(pv /echo -X PUT -H 'Transfer-Encoding: chunked' --data-binary @"$IT_TMP/up")" \
        "chunked upload"
assert_eq "$want" "$(jq -r .sha "$IT_TMP/pv")" "chunked upload arrived whole"

info "streamed response, HEAD"
assert_eq 200 "$(pv /stream)" "stream"
assert_eq "line 4" "$(tail -n 1 "$IT_TMP/pv")" "streamed lines"
assert_eq 200 "$(pv /echo -I)" "HEAD"

info "a response head of more than 256 header lines: 502, the daemon stays responsive"
assert_eq 200 "$(pv '/headers?n=200')" "200 headers pass"
assert_eq 200 "$(curl -sS -D "$IT_TMP/h" -o /dev/null -H "Host: $PHOST" "$CELLA_URL/headers?n=200" \
        -w '%{http_code}')" "200 headers again"
assert_eq 200 "$(grep -ci '^x-h[0-9]*:' "$IT_TMP/h")" "every one of them passed"
assert_eq 502 "$(pv '/headers?n=300')" "300 headers"
assert_eq BAD_GATEWAY "$(jq -r .code "$IT_TMP/pv")" "300 headers: 502 code"
assert_contains "$(jq -r .message "$IT_TMP/pv")" "256 header lines" "300 headers: message"
assert_eq 502 "$(pv '/headers?n=20000')" "20000 headers"
api GET /v1/sandboxes
expect_status 200

info "307 with two Set-Cookie passed unchanged"
curl -sS -D "$IT_TMP/h" -o /dev/null -H "Host: $PHOST" "$CELLA_URL/redirect"
assert_contains "$(head -n 1 "$IT_TMP/h")" " 307" "status 307"
assert_eq 2 "$(grep -ci '^set-cookie:' "$IT_TMP/h")" "two Set-Cookie"
assert_contains "$(cat "$IT_TMP/h")" "b=2; Path=/; HttpOnly" "cookie unchanged"
assert_contains "$(grep -i '^location:' "$IT_TMP/h")" "/echo?from=redirect" "Location unchanged"

info "SSE: events arrive before the response ends"
curl -sS -N -H "Host: $PHOST" "$CELLA_URL/sse" >"$IT_TMP/sse" &
SSE=$!
for i in $(seq 1 100); do grep -q first "$IT_TMP/sse" && break; sleep 0.1; done
assert_contains "$(cat "$IT_TMP/sse")" "data: first" "first event"
kill -0 $SSE 2>/dev/null || fail "SSE response ended before the release"
assert_eq 200 "$(pv /release)" "release"
wait $SSE || fail "SSE curl failed"
assert_contains "$(cat "$IT_TMP/sse")" "data: second" "second event"

info "WebSocket through the preview URL and /ws/{port}, several at once"
WS="python3 $HERE/preview/wsclient.py"
out=$($WS "$HOSTPORT" "$PHOST" /ws one two @big)
assert_eq "HTTP/1.1 101 Switching Protocols|path /ws|echo one|echo two|echo big 200000" \
        "$(echo "$out" | paste -sd'|')" "preview WebSocket"
out=$($WS "$HOSTPORT" "$HOSTPORT" "/v1/sandboxes/$S/ws/$P/chat?room=1" hi)
assert_eq "HTTP/1.1 101 Switching Protocols|path /chat?room=1|echo hi" \
        "$(echo "$out" | paste -sd'|')" "/ws/{port} WebSocket"
pids=()
for i in 1 2 3 4 5; do
        $WS "$HOSTPORT" "$PHOST" /ws "m$i" >"$IT_TMP/ws$i" &
        pids+=($!)
done
for i in 1 2 3 4 5; do
        wait "${pids[$((i - 1))]}" || fail "WebSocket client $i failed"
        assert_contains "$(cat "$IT_TMP/ws$i")" "echo m$i" "concurrent WebSocket $i"
done
api GET "/v1/sandboxes/$S/ws/$P" >/dev/null
expect_status 400 BAD_REQUEST
out=$($WS -H "X-Forwarded-Host: $PHOST" --seen "$HOSTPORT" "$HOSTPORT" /ws xfh)
assert_eq "HTTP/1.1 101 Switching Protocols|path /ws|echo xfh" \
        "$(echo "$out" | grep -v '^seen ' | paste -sd'|')" "WebSocket by X-Forwarded-Host"
assert_eq "$PHOST" "$(echo "$out" | ws_seen host)" "WebSocket: Host = the preview host"
assert_eq "$PHOST" "$(echo "$out" | ws_seen x-forwarded-host)" \
        "WebSocket: one X-Forwarded-Host, the preview host"
out=$($WS -H "X-Forwarded-Host: $P-$S-wrongtoken.localhost" "$HOSTPORT" "$HOSTPORT" /ws) || true
assert_contains "$out" " 404 " "WebSocket with a bad token in X-Forwarded-Host"

info "1024 upgrades held at once through the proxy; one more is 503; a relay whose client left ends"
python3 "$HERE/preview/upgrades.py" "$HOSTPORT" "$PHOST" 1024 >"$IT_TMP/upg"
cat "$IT_TMP/upg" >&2
assert_eq 1024 "$(jq -r .held "$IT_TMP/upg")" "upgrades held"
assert_contains "$(jq -r .over "$IT_TMP/upg")" " 503 " "the upgrade beyond the cap"
assert_eq SANDBOX_UNAVAILABLE "$(jq -r .over_body "$IT_TMP/upg" | jq -r .code)" "its code"
assert_contains "$(jq -r .after "$IT_TMP/upg")" " 101 " "an upgrade once one closed"
assert_eq 200 "$(pv /echo)" "plain requests meanwhile"

info "wrong token, unexposed port: 404 INVALID_TOKEN"
curl -sS -o "$IT_TMP/pv" -w '%{http_code}' -H "Host: $P-$S-wrongtoken.localhost:$DPORT" \
        "$CELLA_URL/echo" >"$IT_TMP/st"
assert_eq 404 "$(cat "$IT_TMP/st")" "wrong token"
assert_eq INVALID_TOKEN "$(jq -r .code "$IT_TMP/pv")" "wrong token code"
curl -sS -o "$IT_TMP/pv" -w '%{http_code}' -H "Host: 8081-$S-$TOKEN.localhost:$DPORT" \
        "$CELLA_URL/echo" >"$IT_TMP/st"
assert_eq 404 "$(cat "$IT_TMP/st")" "unexposed port"
curl -sS -o "$IT_TMP/pv" -w '%{http_code}' -H "Host: 8080-nosuch-$TOKEN.localhost:$DPORT" \
        "$CELLA_URL/echo" >"$IT_TMP/st"
assert_eq 404 "$(cat "$IT_TMP/st")" "no such sandbox"

info "API protections still hold: a preview origin cannot call the API"
api GET /v1/sandboxes -H "Origin: http://$PHOST" >/dev/null
expect_status 403 PERMISSION_DENIED

info "unexpose (idempotent), expose again"
api DELETE "/v1/sandboxes/$S/ports/$P" >/dev/null
expect_status 200
api DELETE "/v1/sandboxes/$S/ports/$P" >/dev/null
expect_status 200
assert_eq 404 "$(pv /echo)" "unexposed: 404"
api_json POST "/v1/sandboxes/$S/ports" "{\"port\":$P,\"token\":\"$TOKEN\"}"
expect_status 201
assert_eq 200 "$(pv /echo)" "exposed again with the same token"

info "CLI: expose, ports, unexpose"
CLI=$CELLA_BUILD/cella
out=$("$CLI" expose "$S" 8081 --name other --token cli_tok_cli_tok_) || fail "cella expose"
assert_eq "http://8081-$S-cli_tok_cli_tok_.localhost:$DPORT/" "$(echo "$out" | head -1)" \
        "cella expose prints the URL"
assert_eq "  without DNS: curl -H 'Host: 8081-$S-cli_tok_cli_tok_.localhost:$DPORT' $CELLA_URL/" \
        "$(echo "$out" | sed -n 2p)" "cella expose prints the request without DNS"
out=$("$CLI" ports "$S") || fail "cella ports"
assert_contains "$out" "8081   active  other" "cella ports lists it"
assert_eq "8080,8081" "$("$CLI" ports "$S" --json | jq -r '[.ports[].port] | join(",")')" \
        "cella ports --json"
"$CLI" unexpose "$S" 8081 || fail "cella unexpose"
"$CLI" unexpose "$S" 8081 || fail "cella unexpose again"
assert_eq 8080 "$("$CLI" ports "$S" --json | jq -r '[.ports[].port] | join(",")')" "unexposed"
"$CLI" expose "$S" 80 2>/dev/null && fail "cella expose 80 accepted"

info "tokens survive a cellad restart (with auth on from here)"
kill -KILL "$CELLAD_PID"
wait "$CELLAD_PID" 2>/dev/null || true
CELLAD_PID=
export CELLA_TOKEN=it-preview-token
start_cellad --preview-listen 127.0.0.1:0
HOSTPORT=${CELLA_URL#http://}
DPORT=${HOSTPORT##*:}
PHOST="$P-$S-$TOKEN.localhost:$DPORT"
assert_eq 200 "$(pv /echo)" "preview URL after restart"

info "--preview-listen: preview URLs only, and their port in the URLs"
PPORT=$(grep -o 'cellad preview URLs on port [0-9]*' "$CELLAD_LOG" | grep -o '[0-9]*$')
[ -n "$PPORT" ] || fail "no preview listener line"
assert_eq 200 "$(curl -sS -o /dev/null -w '%{http_code}' -H "Host: $P-$S-$TOKEN.localhost:$PPORT" \
        "http://127.0.0.1:$PPORT/echo")" "served on the preview listener"
assert_eq 404 "$(curl -sS -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PPORT/v1/health")" \
        "no API on the preview listener"
api GET "/v1/sandboxes/$S/ports" >/dev/null
assert_contains "$(body '.ports[0].url')" ".localhost:$PPORT/" "URLs carry the preview port"
PPHOST="$P-$S-$TOKEN.localhost:$PPORT"
assert_eq 200 "$(curl -sS -o "$IT_TMP/pv" -w '%{http_code}' -H "X-Forwarded-Host: $PPHOST" \
        "http://127.0.0.1:$PPORT/echo")" "X-Forwarded-Host on the preview listener"
assert_eq "$PPHOST" "$(seen host)" "preview listener: Host = the preview host"
assert_eq 404 "$(curl -sS -o /dev/null -w '%{http_code}' \
        -H "X-Forwarded-Host: $P-$S-wrongtoken.localhost:$PPORT" "http://127.0.0.1:$PPORT/echo")" \
        "preview listener: bad token in X-Forwarded-Host"

info "auth on: no bearer token for preview requests; Authorization never reaches the app"
assert_eq 200 "$(pv /echo -H 'Authorization: Bearer x')" "preview URL, Authorization sent"
assert_eq "" "$(seen authorization)" "preview URL: Authorization not forwarded"
assert_eq 200 "$(xpv "$PHOST" /echo -H "Authorization: Bearer $CELLA_TOKEN" -H 'Cookie: app=1')" \
        "X-Forwarded-Host, the API's token sent"
assert_eq "" "$(seen authorization)" "X-Forwarded-Host: Authorization not forwarded"
assert_eq "app=1" "$(seen cookie)" "the app's cookies are"
assert_eq 200 "$(xpv "$PHOST" /echo)" "X-Forwarded-Host needs no bearer token"
assert_eq 401 "$(curl -sS -o "$IT_TMP/pv" -w '%{http_code}' \
        -H 'X-Forwarded-Host: proxy.example.com' "$CELLA_URL/v1/sandboxes/$S")" \
        "a non-preview X-Forwarded-Host is an API call: bearer token needed"
api GET "/v1/sandboxes/$S" -H 'X-Forwarded-Host: proxy.example.com' >/dev/null
expect_status 200
out=$($WS --seen "$HOSTPORT" "$HOSTPORT" "/v1/sandboxes/$S/ws/$P/chat" hi)
assert_contains "$out" "echo hi" "/ws/{port} WebSocket with the API's token"
assert_eq "" "$(echo "$out" | ws_seen authorization)" "/ws/{port}: the API's token not forwarded"
out=$(CELLA_TOKEN= $WS -H 'Authorization: Bearer x' --seen "$HOSTPORT" "$PHOST" /ws hi)
assert_contains "$out" "echo hi" "preview WebSocket with Authorization"
assert_eq "" "$(echo "$out" | ws_seen authorization)" \
        "preview WebSocket: Authorization not forwarded"
out=$(CELLA_TOKEN= $WS -H "X-Forwarded-Host: $PHOST" -H 'Authorization: Bearer x' --seen \
        "$HOSTPORT" "$HOSTPORT" /ws hi)
assert_contains "$out" "echo hi" "X-Forwarded-Host WebSocket with auth on, no bearer token"
assert_eq "" "$(echo "$out" | ws_seen authorization)" \
        "X-Forwarded-Host WebSocket: Authorization not forwarded"

info "Chromium: a page through the preview URL talks WebSocket through it"
command -v chromium >/dev/null || fail "chromium is not installed (scripts/deps.sh installs it)"
{
        prof=$(mktemp -d)
        dom=$(timeout 60 chromium --headless --no-sandbox --disable-gpu \
                --disable-background-networking --disable-component-update --disable-sync \
                --no-first-run --user-data-dir="$prof" --virtual-time-budget=10000 \
                --dump-dom "http://$PHOST/page" 2>/dev/null) || true
        rm -rf "$prof"
        assert_contains "$dom" "echo:hello from the page" "page got its WebSocket echo"
}

info "stale after sleep: 410, and the sandbox is not woken"
S2=$(sbx nap)
api_json PUT "/v1/sandboxes/$S2" '{"sleepAfter":"2s"}'
expect_status 201
start_server "$S2" web1
api_json POST "/v1/sandboxes/$S2/ports" "{\"port\":$P}"
expect_status 201
TOKEN=$(body .url | sed -E "s#^http://$P-$S2-([a-z0-9_]+)\..*#\1#")
PHOST="$P-$S2-$TOKEN.localhost:$DPORT"
assert_eq 200 "$(pv /echo)" "served before it sleeps"
for i in $(seq 1 100); do
        api GET "/v1/sandboxes/$S2" >/dev/null
        [ "$(body .state)" = sleeping ] && break
        sleep 0.2
done
assert_eq sleeping "$(body .state)" "slept"
assert_eq 410 "$(pv /echo)" "sleeping: 410"
assert_eq STALE_PREVIEW_URL "$(jq -r .code "$IT_TMP/pv")" "410 code"
api GET "/v1/sandboxes/$S2" >/dev/null
assert_eq sleeping "$(body .state)" "the proxy did not wake it"
api GET "/v1/sandboxes/$S2/ports" >/dev/null
assert_eq stale "$(body '.ports[0].status')" "listed as stale"
api_json PUT "/v1/sandboxes/$S2" '{"keepAlive":true}'
start_server "$S2" web2
assert_eq 410 "$(pv /echo)" "woken by the API: still stale until exposed again"
api_json POST "/v1/sandboxes/$S2/ports" "{\"port\":$P}"
assert_eq "$P-$S2-$TOKEN" "$(body .url | sed -E 's#^http://([^.]*)\..*#\1#')" "same URL restored"
assert_eq 200 "$(pv /echo)" "exposed again: served"

info "destroy removes the ports"
api DELETE "/v1/sandboxes/$S2" >/dev/null
assert_eq 404 "$(pv /echo)" "destroyed: 404"
api_json PUT "/v1/sandboxes/$S2" '{}'
expect_status 201
assert_eq 404 "$(pv /echo)" "a new sandbox of the same name: the old URL is 404"
