#!/usr/bin/env bash
# Build the web console (console/: Vite + TypeScript, docs/console.md) into console/dist,
# which cellad serves at /console/: `npm ci` when node_modules is missing or older than
# package.json / package-lock.json (a stamp file in node_modules records the last
# successful install), then `npm run build` (tsc --noEmit, vite build) when a source is
# newer than the last build. The same node_modules holds playwright-core, which
# tests/integration/test-console.sh drives Debian's chromium with. Nothing here touches the
# network unless the lock file changed or node_modules is gone; cellad never needs it.
# Called by `make console` (and so by `make`, `make run` and `make test`).
set -euo pipefail

dir=${CONSOLE_DIR:-$(cd "$(dirname "$0")/../console" && pwd)}
[ -f "$dir/package.json" ] || { echo "console-deps.sh: no package.json in $dir" >&2; exit 1; }
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
        echo "console-deps.sh: node/npm missing (scripts/deps.sh installs them); no console" >&2
        exit 0
fi
. "$(dirname "$0")/lib-npm.sh"
npm_ci_stale "$dir" console-deps.sh
cd "$dir"

built=dist/.cella-build.stamp
if [ ! -f "$built" ] || [ -n "$(find src index.html vite.config.ts tsconfig.json package-lock.json \
        -newer "$built" -print -quit)" ]; then
        echo "console-deps.sh: npm run build (console/dist)"
        npm run --silent build
        touch "$built"
fi
