#!/usr/bin/env bash
# Prepare the TypeScript SDK (sdk/typescript) for its tests: `npm ci` when node_modules is
# missing or older than package.json / package-lock.json (a stamp file in node_modules
# records the last successful install), then `npm run build` (tsc: dist/) and
# `npm run build:test` (tsc: build-test/, what tests/integration/test-sdk-typescript.sh
# runs). Nothing here touches the network unless the lock file changed or node_modules is
# gone. Then the same npm ci for tests/mcp (the MCP protocol tests) and tests/s3 (the S3
# server of the backup tests). Called by `make sdk`
# and `make test`.
set -euo pipefail

sdk=${SDK_DIR:-$(cd "$(dirname "$0")/../sdk/typescript" && pwd)}
mcp=${MCP_TEST_DIR:-$(cd "$(dirname "$0")/../tests/mcp" && pwd)}
s3=${S3_TEST_DIR:-$(cd "$(dirname "$0")/../tests/s3" && pwd)}
[ -f "$sdk/package.json" ] || { echo "sdk-deps.sh: no package.json in $sdk" >&2; exit 1; }
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
        echo "sdk-deps.sh: node/npm missing (scripts/deps.sh installs them); SDK tests will skip" >&2
        exit 0
fi
. "$(dirname "$0")/lib-npm.sh"
npm_ci_stale "$sdk" sdk-deps.sh
cd "$sdk"

echo "sdk-deps.sh: npm run build && npm run build:test"
npm run --silent build
npm run --silent build:test

# The MCP server's protocol tests (tests/mcp: the official MCP TypeScript SDK's client,
# pinned by its lock file; tests/integration/test-mcp.sh runs them) and the S3 server the
# backup store's tests run (tests/s3: @20minutes/s3rver, pinned by its lock file;
# tests/integration/test-backups-s3.sh): npm ci the same way.
for dir in "$mcp" "$s3"; do
        npm_ci_stale "$dir" sdk-deps.sh
done
