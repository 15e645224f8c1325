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
