#!/bin/bash
# The MCP server (docs/mcp.md) driven by the official MCP TypeScript SDK client
# (@modelcontextprotocol/sdk, installed in tests/mcp by scripts/sdk-deps.sh with npm ci
# from the committed lock file): tests/mcp/mcp.test.js over stdio (`cella mcp` spawned by
# the client) and over Streamable HTTP (cellad's /mcp; plus its sessions and Last-Event-ID
# resumption by hand) against a real cellad with auth on. MCP_TRANSPORTS picks them
# (default both). Skips (77) without node or without tests/mcp/node_modules (make sdk).
. "$(dirname "$0")/lib.sh"

MCP_DIR=$(cd "$(dirname "$0")/../mcp" && pwd)
command -v node >/dev/null || skip "needs node"
[ -d "$MCP_DIR/node_modules/@modelcontextprotocol/sdk" ] || skip "no $MCP_DIR/node_modules (run make sdk)"
[ -x "$CELLA_BUILD/cella" ] || skip "no cella in $CELLA_BUILD"

CELLA_TOKEN=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
export CELLA_TOKEN
start_cellad

MCP_SANDBOX=$(sbx mcp)
export MCP_SANDBOX CELLA_BUILD
export MCP_TRANSPORTS=${MCP_TRANSPORTS:-stdio http}
info "node --test tests/mcp/mcp.test.js over: $MCP_TRANSPORTS"
(cd "$MCP_DIR" && node --test --test-reporter=spec mcp.test.js) || fail "MCP suite failed"

# Idle sessions end: cellad again with CELLA_MCP_IDLE_TIMEOUT_MS (read by cellad for tests
# only; the limit is 30 min) at 2 s. A session without requests ends (404, as after
# DELETE); one whose GET stream is open does not, however long the stream lasts.
info "/mcp: idle sessions end, sessions with an open stream stay"
stop_cellad
CELLA_MCP_IDLE_TIMEOUT_MS=2000 start_cellad
mcp_post() { # SESSION BODY: status on stdout, headers in $IT_TMP/mcp-h
        curl -sS -D "$IT_TMP/mcp-h" -o "$IT_TMP/mcp-b" -w '%{http_code}' \
                -H "Authorization: Bearer $CELLA_TOKEN" -H 'Content-Type: application/json' \
                -H 'Accept: application/json, text/event-stream' \
                ${1:+-H "Mcp-Session-Id: $1"} -H 'MCP-Protocol-Version: 2025-11-25' \
                -d "$2" "$CELLA_URL/mcp"
}
MCP_INIT='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"idle","version":"1"}}}'
MCP_LIST='{"jsonrpc":"2.0","id":2,"method":"tools/list"}'
mcp_session() {
        assert_eq 200 "$(mcp_post "" "$MCP_INIT")" "initialize"
        grep -i '^mcp-session-id:' "$IT_TMP/mcp-h" | tr -d '\r' | awk '{print $2}'
}
IDLE=$(mcp_session)
KEPT=$(mcp_session)
[ -n "$IDLE" ] && [ -n "$KEPT" ] || fail "no session ids"
assert_eq 200 "$(mcp_post "$IDLE" "$MCP_LIST")" "a fresh session answers"
# KEPT's stream stays open 6 s (curl ends it: 28 is its timeout) while IDLE idles
curl -sS -N --max-time 6 -o /dev/null -H "Authorization: Bearer $CELLA_TOKEN" \
        -H 'Accept: text/event-stream' -H "Mcp-Session-Id: $KEPT" "$CELLA_URL/mcp" || true
assert_eq 200 "$(mcp_post "$KEPT" "$MCP_LIST")" "a session whose stream was open is kept"
# IDLE had no request for those 6 s: ended (a bounded wait, each try 3 s after the last)
st=
for i in $(seq 1 20); do
        st=$(mcp_post "$IDLE" "$MCP_LIST")
        [ "$st" = 404 ] && break
        sleep 3
done
assert_eq 404 "$st" "an idle session ends"
assert_contains "$(cat "$IT_TMP/mcp-b")" "initialize again"
