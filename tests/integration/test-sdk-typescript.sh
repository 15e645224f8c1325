#!/bin/bash
# The TypeScript SDK's node:test suites (sdk/typescript/test/*.test.ts, compiled by
# `make sdk` / scripts/sdk-deps.sh into sdk/typescript/build-test/test/) against a real
# cellad with auth on (CELLA_TOKEN) on a fixed loopback port.
#
# The suites may ask for a daemon restart (sdk/typescript/test/harness.ts,
# restartDaemon()): node writes `restart` or `kill9-restart` as a line to the FIFO
# $CELLA_CTL/req; this script SIGKILLs cellad, starts it again on the same data dir and
# port (so CELLA_URL stays valid) and answers `ok` or `error <message>` on $CELLA_CTL/ack.
# SDK_TS_SUITES (e.g. "snapshots errors") runs some suites only. Skips (77) without node
# or without a compiled suite.
. "$(dirname "$0")/lib.sh"

SDK_DIR=$(cd "$(dirname "$0")/../../sdk/typescript" && pwd)
command -v node >/dev/null || skip "needs node"
[ -d "$SDK_DIR/build-test/test" ] || skip "no $SDK_DIR/build-test/test (run make sdk)"
shopt -s nullglob
suites=("$SDK_DIR"/build-test/test/*.test.js)
shopt -u nullglob
if [ -n "${SDK_TS_SUITES:-}" ]; then
        suites=()
        for s in $SDK_TS_SUITES; do suites+=("$SDK_DIR/build-test/test/$s.test.js"); done
fi
[ ${#suites[@]} -gt 0 ] || skip "no *.test.js in $SDK_DIR/build-test/test (run make sdk)"
command -v python3 >/dev/null || skip "needs python3"

start_restartable_cellad python3

cd "$SDK_DIR"
node_args=(--test)
help=$(node --help 2>/dev/null || true)
case "$help" in *--test-concurrency*) node_args+=(--test-concurrency=1) ;; esac
case "$help" in *--test-reporter=*) node_args+=(--test-reporter=spec) ;; esac
info "node $(node --version): ${#suites[@]} suite(s): ${suites[*]##*/}"
CELLA_TEST_PREFIX=$(sbx "") CELLA_CTL=$CTL CELLA_BUILD=$CELLA_BUILD CELLA_URL=$CELLA_URL \
        node "${node_args[@]}" "${suites[@]}" 7<&- 8<&- &
NODE_PID=$!

rc=0
serve_restarts "$NODE_PID" || rc=$?
NODE_PID=
info "node --test exited with $rc after $RESTARTS daemon restart(s)"
exit $rc
