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

CELLA_TOKEN=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
export CELLA_TOKEN

# A fixed port, so that a restarted daemon has the same URL. (Another process could take
# it between this probe and cellad's bind: then start_cellad fails, and so does the test.)
PORT=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
CELLAD_ARGS=(--listen "127.0.0.1:$PORT") # the last --listen wins over lib.sh's 127.0.0.1:0

CTL=$IT_TMP/ctl
mkdir "$CTL"
mkfifo "$CTL/req" "$CTL/ack"
# Both FIFOs stay open read-write here (fds 7 and 8) for the whole run: node's opens never
# block, reads here never see EOF between requests, and an answer waits in the FIFO until
# node reads it. cellad and node get neither fd.
exec 7<>"$CTL/req" 8<>"$CTL/ack"

start_cellad "${CELLAD_ARGS[@]}" 7<&- 8<&-
[ "$CELLA_URL" = "http://127.0.0.1:$PORT" ] || fail "cellad at $CELLA_URL, not on port $PORT"

RESTARTS=0
# restart_daemon: SIGKILL cellad, start it again on the same data dir and port. Runs in this
# shell (CELLAD_PID must be the new daemon's for lib.sh's cleanup). Sets RESTART_ERR and
# returns 1 on what it can recover from; start_cellad's own failures (cellad not ready)
# end the test, since nothing can go on without a daemon.
restart_daemon() {
        local url=$CELLA_URL
        RESTART_ERR=
        RESTARTS=$((RESTARTS + 1))
        info "restart $RESTARTS ($1): SIGKILL cellad $CELLAD_PID"
        if [ -n "$CELLAD_PID" ]; then
                kill -KILL "$CELLAD_PID" 2>/dev/null || true
                wait "$CELLAD_PID" 2>/dev/null || true
        fi
        CELLAD_PID=
        cp "$CELLAD_LOG" "$IT_TMP/cellad.log.$RESTARTS" # start_cellad truncates the log
        start_cellad "${CELLAD_ARGS[@]}" 7<&- 8<&-
        if [ "$CELLA_URL" != "$url" ]; then
                RESTART_ERR="daemon came back at $CELLA_URL instead of $url"
                return 1
        fi
}

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

# Serve restart requests while the suites run (a 1 s read timeout to notice their end).
while kill -0 "$PY_PID" 2>/dev/null; do
        line=
        read -r -t 1 -u 7 line || continue
        case "$line" in
        restart | kill9-restart)
                if restart_daemon "$line"; then
                        echo ok >&8
                else
                        info "restart failed: $RESTART_ERR"
                        echo "error $RESTART_ERR" >&8
                fi
                ;;
        '') ;;
        *) echo "error unknown request '$line'" >&8 ;;
        esac
done
rc=0
wait "$PY_PID" || rc=$?
PY_PID=
info "python unittest exited with $rc after $RESTARTS daemon restart(s)"
exit $rc
