#!/bin/bash
# The Python SDK's unittest suites (sdk/python/tests/test_*.py) against a real cellad with
# auth on (CELLA_TOKEN) on a fixed loopback port, with Debian's /usr/bin/python3.
#
# The suites may ask for a daemon restart (sdk/python/tests/harness.py, restart_daemon()):
# Python writes `kill9-restart` as a line to the FIFO $CELLA_CTL/req; this script SIGKILLs
# cellad, starts it again on the same data dir and port (so CELLA_URL stays valid) and
# answers `ok` or `error <message>` on $CELLA_CTL/ack.
# SDK_PY_SUITES (e.g. "test_core test_async") runs some suites only.
. "$(dirname "$0")/lib.sh"

SDK_DIR=$(cd "$(dirname "$0")/../../sdk/python" && pwd)
PY=${CELLA_PYTHON:-/usr/bin/python3}
[ -x "$PY" ] || skip "needs $PY"

start_restartable_cellad "$PY"

cd "$SDK_DIR"
suites=${SDK_PY_SUITES:-}
if [ -z "$suites" ]; then
        suites=$(cd tests && ls test_*.py | sed 's/\.py$//' | tr '\n' ' ')
fi
info "$($PY --version): suites $suites"
mods=()
for s in $suites; do mods+=("tests.$s"); done
CELLA_TEST_PREFIX=$(sbx "") CELLA_CTL=$CTL CELLA_BUILD=$CELLA_BUILD CELLA_URL=$CELLA_URL \
        PYTHONPATH=$SDK_DIR PYTHONDONTWRITEBYTECODE=1 \
        "$PY" -m unittest -v "${mods[@]}" 7<&- 8<&- &
PY_PID=$!

rc=0
serve_restarts "$PY_PID" || rc=$?
PY_PID=
info "python unittest exited with $rc after $RESTARTS daemon restart(s)"
exit $rc
