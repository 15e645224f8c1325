# Integration test library: sourced by tests/integration/test-*.sh.
#
# Starts a real cellad on an ephemeral loopback port with a fresh temp data dir and the
# shared image dir, exports CELLA_URL, and installs an EXIT trap that destroys every
# sandbox of this daemon, stops it, removes the temp dir and verifies that nothing of this
# run is left: no process in a cgroup below this daemon's cgroup parent, no process whose
# uid is in the sandbox ranges (>= 0x10000000) under this daemon, no cgroup directory
# /sys/fs/cgroup/*/<parent> or below it (warm-pool sandboxes included), no mount below the
# temp dir, no loop device bound to a file below it (a sandbox's disk image), no host end of
# a sandbox veth of this daemon (interfaces <prefix><slot>, prefix from its log) and no nft
# table of it once it stopped.
#
# Each run gets its own --network-range (a /18 of 10.128.0.0/9, held by a lock file in
# /tmp/cella-it-net/ while the run lives), so that runs side by side never share sandbox
# addresses; never one of 10.213.0.0/16, the first range a daemon started without
# --network-range takes (test-two-daemons.sh starts such daemons). The lock goes only after
# the data dir is removed: until then the daemon's claim (/run/cella/instances/<parent>,
# docs/decisions/0033-instance-claims.md) still holds the range, and a daemon given it would
# refuse to start. Host uids are not given: each daemon claims a block of its own (all
# >= 0x10000000), and the claim file goes at exit. A test may define it_cleanup_hook, called
# first at exit (its own namespaces), and it_unmount_hook, called once its daemons are
# stopped and before the checks (a filesystem of its own that the data dir is on).
#
# Sandboxes' cgroups are named by uid slot (s<slot>) below a cgroup parent that belongs to
# the daemon's data dir (cellad logs it at start: "sandbox cgroups under 'NAME'"); a
# sandbox's slot is found in the daemon's log ("sandbox 'NAME' ... (slot N").
#
# Environment: CELLA_BUILD (build dir, set by CMake), CELLA_IMAGES (default
# /var/lib/cella/images). Exit code 77 means "skipped" (ctest SKIP_RETURN_CODE).
#
# Sandbox names made with `sbx NAME` carry a per-run prefix, so that runs never collide
# with each other or with other users of the machine.

set -eu

IT_NAME=$(basename "$0" .sh)
CELLA_BUILD=${CELLA_BUILD:-$(cd "$(dirname "$0")/../../build" 2>/dev/null && pwd || echo build)}
CELLA_IMAGES=${CELLA_IMAGES:-/var/lib/cella/images}
SANDBOX_UID_MIN=268435456 # 0x10000000

skip() {
        echo "SKIP: $*" >&2
        exit 77
}

fail() {
        echo "FAIL: $*" >&2
        exit 1
}

info() {
        echo "-- $*" >&2
}

[ -x "$CELLA_BUILD/cellad" ] || skip "no cellad in $CELLA_BUILD"
[ -d "$CELLA_IMAGES/default/rootfs" ] || skip "no default image in $CELLA_IMAGES"
[ "$(id -u)" = 0 ] || skip "needs root"
command -v curl >/dev/null || skip "needs curl"
command -v jq >/dev/null || skip "needs jq"

IT_TMP=$(mktemp -d /tmp/cella-it.XXXXXX)
# Who owns the dir, for tests/helpers/reap-leftovers.sh after a run killed before its cleanup.
echo $$ >"$IT_TMP/owner"
# Per-run sandbox name prefix: lower case letters and digits only.
IT_RUN=$(head -c 64 /dev/urandom | tr -dc 'a-z0-9' | head -c 6)
[ ${#IT_RUN} -eq 6 ] || IT_RUN=r$$
CELLAD_PID=
CELLAD_LOG=$IT_TMP/cellad.log
IT_CGPARENT= # this daemon's cgroup parent directory name, from its log
IT_IFPREFIX= # this daemon's host veth name prefix, from its log
IT_NETRANGE= # this run's --network-range
IT_NETLOCK=
IT_NETINDEX= # its index (0-511), for other per-run addresses
IT_RANGE=    # the network range the daemon uses (its log)
IT_UID_FIRST= # its block of host uids (its log)
IT_UID_LAST=
IT_FAILED_CLEANUP=0
IT_CELLADS= # pids of every cellad start_cellad started

sbx() {
        echo "it-$IT_RUN-$1"
}

# ---- assertions ----
assert_eq() { # expected actual [message]
        if [ "$1" != "$2" ]; then
                fail "${3:-assert_eq}: expected [$1], got [$2]"
        fi
}

assert_ne() { # unexpected actual [message]
        if [ "$1" = "$2" ]; then
                fail "${3:-assert_ne}: got [$2]"
        fi
}

assert_contains() { # haystack needle [message]
        case "$1" in
        *"$2"*) ;;
        *) fail "${3:-assert_contains}: [$2] not in [$1]" ;;
        esac
}

assert_not_contains() { # haystack needle [message]
        case "$1" in
        *"$2"*) fail "${3:-assert_not_contains}: [$2] found in [$1]" ;;
        *) ;;
        esac
}

# ---- HTTP ----
# api METHOD PATH [curl args...]: prints the body, then sets API_STATUS. Writes the body to
# $IT_TMP/body too. PATH is relative to CELLA_URL (e.g. /v1/health).
API_STATUS=
api() {
        local method=$1 path=$2
        shift 2
        local auth=()
        if [ -n "${CELLA_TOKEN:-}" ]; then
                auth=(-H "Authorization: Bearer $CELLA_TOKEN")
        fi
        API_STATUS=$(curl -sS -o "$IT_TMP/body" -w '%{http_code}' -X "$method" \
                "${auth[@]}" "$@" "$CELLA_URL$path") || API_STATUS=000
        cat "$IT_TMP/body"
}

# api_json METHOD PATH JSON: api with a JSON body; body in $IT_TMP/body, status in
# API_STATUS (call it without a command substitution to keep API_STATUS).
api_json() {
        api "$1" "$2" -H 'Content-Type: application/json' --data-binary "$3" >/dev/null
}

# body [jq filter]: the last answer's body, or a field of it.
body() {
        if [ $# -eq 0 ]; then
                cat "$IT_TMP/body"
        else
                jq -r "$1" <"$IT_TMP/body"
        fi
}

# expect_status STATUS [CODE]: the last answer had this status (and error code).
expect_status() {
        if [ "$API_STATUS" != "$1" ]; then
                fail "expected HTTP $1, got $API_STATUS: $(head -c 600 "$IT_TMP/body")"
        fi
        if [ $# -ge 2 ]; then
                local code
                code=$(jq -r .code <"$IT_TMP/body" 2>/dev/null || echo "(not JSON)")
                assert_eq "$2" "$code" "error code"
                assert_eq "$1" "$(jq -r .httpStatus <"$IT_TMP/body")" "httpStatus field"
        fi
}

# sx NAME COMMAND [TIMEOUT_MS]: exec COMMAND (a shell command line) in sandbox NAME, JSON
# answer in $IT_TMP/body; status in API_STATUS.
sx() {
        local req
        if [ $# -ge 3 ]; then
                req=$(jq -cn --arg c "$2" --argjson t "$3" '{command:$c, timeout:$t}')
        else
                req=$(jq -cn --arg c "$2" '{command:$c}')
        fi
        api_json POST "/v1/sandboxes/$1/exec" "$req"
}

# run_in NAME COMMAND: exec, require HTTP 200, print stdout (decoded).
run_in() {
        sx "$1" "$2"
        expect_status 200
        if [ "$(body '.stdoutEncoding // ""')" = base64 ]; then
                body .stdout | base64 -d
        else
                jq -j .stdout <"$IT_TMP/body"
        fi
}

# exit_code: exitCode of the last exec.
exit_code() {
        body .exitCode
}

# ---- leak checks ----
# Pids of processes that belong to this run: in a cgroup below this daemon's cgroup
# parent, or with a sandbox-range uid and a descendant of our cellad.
run_pids() {
        local p uid
        for p in /proc/[0-9]*; do
                p=${p#/proc/}
                if [ -n "$IT_CGPARENT" ] && grep -qs "/$IT_CGPARENT/" "/proc/$p/cgroup"; then
                        echo "$p"
                        continue
                fi
                uid=$(awk '/^Uid:/ {print $2}' "/proc/$p/status" 2>/dev/null) || continue
                [ -n "$uid" ] || continue
                if [ "$uid" -ge "$SANDBOX_UID_MIN" ] && descends_from_cellad "$p"; then
                        echo "$p"
                fi
        done
}

descends_from_cellad() {
        local p=$1 n=0
        [ -n "$CELLAD_PID" ] || return 1
        while [ "$p" -gt 1 ] && [ $n -lt 64 ]; do
                [ "$p" = "$CELLAD_PID" ] && return 0
                p=$(awk '/^PPid:/ {print $2}' "/proc/$p/status" 2>/dev/null) || return 1
                [ -n "$p" ] || return 1
                n=$((n + 1))
        done
        return 1
}

# cgroup directories of this run (any hierarchy, v1 or v2): the daemon's cgroup parent,
# which a cleanly stopped daemon removes, and anything below it.
run_cgroups() {
        [ -n "$IT_CGPARENT" ] || return 0
        find /sys/fs/cgroup -maxdepth 5 -type d \( -name "$IT_CGPARENT" -o \
                -path "*/$IT_CGPARENT/*" \) 2>/dev/null || true
}

# sandbox_slot NAME: the uid slot the daemon last logged for sandbox NAME (empty if none).
sandbox_slot() {
        grep -o "sandbox '$1' [a-z ]*(slot [0-9]*" "$CELLAD_LOG" 2>/dev/null | tail -n 1 |
                grep -o '[0-9]*$' || true
}

# cgroup directories of one sandbox (by its slot)
sandbox_cgroups() {
        local slot
        slot=$(sandbox_slot "$1")
        [ -n "$slot" ] && [ -n "$IT_CGPARENT" ] || return 0
        find /sys/fs/cgroup -maxdepth 5 -type d -path "*/$IT_CGPARENT/s$slot" 2>/dev/null || true
}

# pids of one sandbox (by cgroup membership)
sandbox_pids() {
        local p slot
        slot=$(sandbox_slot "$1")
        [ -n "$slot" ] && [ -n "$IT_CGPARENT" ] || return 0
        for p in /proc/[0-9]*; do
                p=${p#/proc/}
                if grep -qs "/$IT_CGPARENT/s$slot\(/\|\$\)" "/proc/$p/cgroup"; then
                        echo "$p"
                fi
        done
}

# wait_pool_ready N: poll /v1/health (10 s at most) until the warm pool holds N sandboxes
# ready (their default session has run a first command).
wait_pool_ready() {
        local i ready=
        for i in $(seq 1 100); do
                ready=$(api GET /v1/health | jq -r '.pool.ready' 2>/dev/null) || true
                [ "$ready" = "$1" ] && return 0
                sleep 0.1
        done
        fail "warm pool: expected $1 ready, have [$ready]"
}

run_mounts() {
        grep -F "$IT_TMP" /proc/self/mountinfo || true
}

# wait_state NAME STATE [SECONDS]: poll GET /v1/sandboxes/NAME (every 0.2 s, SECONDS at most,
# 30 by default) until its state is STATE; the test fails after that. The last answer stays
# in $IT_TMP/body.
wait_state() {
        local i secs=${3:-30}
        for i in $(seq 1 $((secs * 5))); do
                api GET "/v1/sandboxes/$1" >/dev/null
                [ "$(body .state)" = "$2" ] && return 0
                sleep 0.2
        done
        fail "$1 is not $2 after $secs s: $(body)"
}

# wait_sleeping NAME [SECONDS]: wait_state NAME sleeping.
wait_sleeping() {
        wait_state "$1" sleeping "${2:-30}"
}

# ---- snapshots ----
# take_snapshot NAME SNAPSHOT: POST a snapshot of sandbox NAME named SNAPSHOT (201); sets SNAP
# (its id); the answer stays in $IT_TMP/body.
take_snapshot() {
        api_json POST "/v1/sandboxes/$1/snapshots" "{\"name\":\"$2\"}"
        expect_status 201
        SNAP=$(body .snapshotId)
}

# create_many_from_snapshot SNAPSHOT N: PUT the sandboxes many1..manyN from SNAPSHOT all at
# once; each must answer 201.
create_many_from_snapshot() {
        local i n pids=
        for i in $(seq 1 "$2"); do
                n=$(sbx "many$i")
                curl -sS -o "$IT_TMP/many$i" -w '%{http_code}' -X PUT \
                        -H 'Content-Type: application/json' --data-binary "{\"fromSnapshot\":\"$1\"}" \
                        "$CELLA_URL/v1/sandboxes/$n" >"$IT_TMP/many$i.status" &
                pids="$pids $!"
        done
        for i in $pids; do wait "$i" || fail "a concurrent create failed"; done
        for i in $(seq 1 "$2"); do
                assert_eq 201 "$(cat "$IT_TMP/many$i.status")" "create $i: $(cat "$IT_TMP/many$i")"
        done
}

# assert_mountinfo_hides NAME WHO: the mount tables seen in sandbox NAME name neither the
# test's temp dir (cellad's data dir) nor the snapshots' dir.
assert_mountinfo_hides() {
        local mi
        mi=$(run_in "$1" 'cat /proc/self/mountinfo /proc/1/mountinfo')
        assert_not_contains "$mi" "$IT_TMP" "the $2's mountinfo names the data dir"
        assert_not_contains "$mi" snapshots "the $2's mountinfo names the snapshots dir"
}

# start_writer NAME: in sandbox NAME, a loop writes files of 256 KiB in /workspace/w (each
# renamed into place, then its checksum appended to sums); returns once 20 are recorded
# (20 s at most).
start_writer() {
        local i
        run_in "$1" 'mkdir -p /workspace/w && cd /workspace/w && (i=0; while [ $i -lt 100000 ]; do
                i=$((i+1)); head -c 262144 /dev/urandom >$i.tmp && mv $i.tmp $i && sha256sum $i >>sums;
                done) </dev/null >/dev/null 2>&1 & echo started' >/dev/null
        for i in $(seq 1 200); do
                [ "$(run_in "$1" 'wc -l </workspace/w/sums 2>/dev/null || echo 0')" -ge 20 ] && return 0
                sleep 0.1
        done
        fail "the writer in $1 recorded fewer than 20 files"
}

# snapshot_writer NAME COPY [METHOD]: snapshot the writer NAME (no name given: the snapshot
# is named by its id; made by METHOD when given), make the sandbox COPY from it, and check
# that COPY holds at least 20 files, each with the checksum recorded for it. Sets WSNAP (the
# snapshot's id) and WRITTEN (the files in it).
snapshot_writer() {
        api_json POST "/v1/sandboxes/$1/snapshots" '{}'
        expect_status 201
        WSNAP=$(body .snapshotId)
        assert_eq "$WSNAP" "$(body .name)" "a snapshot without a name is named by its id"
        [ -z "${3:-}" ] || assert_eq "$3" "$(body .method)" "a snapshot during writes"
        api_json PUT "/v1/sandboxes/$2" "{\"fromSnapshot\":\"$WSNAP\"}"
        expect_status 201
        WRITTEN=$(run_in "$2" 'wc -l </workspace/w/sums')
        [ "$WRITTEN" -ge 20 ] || fail "only $WRITTEN files recorded in the snapshot"
        run_in "$2" 'cd /workspace/w && sha256sum -c --quiet sums && echo consistent' \
                >"$IT_TMP/check" || true
        assert_eq consistent "$(cat "$IT_TMP/check")" "checksums of $WRITTEN files in $WSNAP"
}

# writer_goes_on NAME N: the writer NAME records more than N files (it was thawed after
# the snapshot; 10 s at most), then it is stopped.
writer_goes_on() {
        local i m
        for i in $(seq 1 100); do
                m=$(run_in "$1" 'wc -l </workspace/w/sums')
                [ "$m" -gt "$2" ] && break
                sleep 0.1
        done
        [ "$m" -gt "$2" ] || fail "the writer stopped after the snapshot ($m files)"
        run_in "$1" 'kill -9 -1 2>/dev/null; echo' >/dev/null || true
}

# Loop devices bound to a file below the temp dir (sandbox disk images).
run_loops() {
        local f
        for f in /sys/block/loop*/loop/backing_file; do
                [ -r "$f" ] || continue
                if grep -qF "$IT_TMP/" "$f" 2>/dev/null; then
                        echo "${f%/loop/backing_file}: $(cat "$f")"
                fi
        done
}

# ---- network range of this run ----
# it_net_range: pick a /18 no live run holds (a file per index with its owner's pid).
it_net_range() {
        [ -n "$IT_NETRANGE" ] && return 0
        mkdir -p /tmp/cella-it-net
        local i f owner
        for i in $(seq 0 511); do
                # 10.213.0.0/16: the automatic choice of daemons without --network-range
                [ $i -ge 340 ] && [ $i -le 343 ] && continue
                f=/tmp/cella-it-net/$i
                if (
                        flock -x 9
                        owner=$(cat "$f" 2>/dev/null) || owner=
                        if [ -n "$owner" ] && kill -0 "$owner" 2>/dev/null; then exit 1; fi
                        echo $$ >"$f"
                ) 9>/tmp/cella-it-net/.lock; then
                        IT_NETLOCK=$f
                        IT_NETINDEX=$i
                        IT_NETRANGE=10.$((128 + i / 4)).$((i % 4 * 64)).0/18
                        return 0
                fi
        done
        fail "no free network range in /tmp/cella-it-net"
}

# run_links: host ends of this daemon's sandbox veths.
run_links() {
        [ -n "$IT_IFPREFIX" ] || return 0
        ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' |
                grep "^$IT_IFPREFIX" || true
}

# ---- daemon ----
# start_cellad [extra cellad args]: starts cellad, waits for its ready line (30 s at most),
# exports CELLA_URL. The environment (e.g. CELLA_TOKEN) is passed on. With IT_AUTO_NETRANGE
# set, no --network-range is given: the daemon chooses. With IT_CELLAD_WRAP set (a command
# and its arguments, e.g. "nsenter --net=/run/netns/N"), cellad runs under it (it must exec
# cellad: CELLAD_PID is cellad's). Sets IT_CGPARENT, IT_IFPREFIX,
# IT_RANGE (the range it uses) and IT_UID_FIRST, IT_UID_LAST (its block of host uids).
start_cellad() {
        mkdir -p "$IT_TMP/data"
        : >"$CELLAD_LOG"
        it_net_range
        local netarg=(--network-range "$IT_NETRANGE")
        case " $* " in *" --network-range "*) netarg=() ;; esac
        [ -n "${IT_AUTO_NETRANGE:-}" ] && netarg=()
        ${IT_CELLAD_WRAP:-} "$CELLA_BUILD/cellad" --listen 127.0.0.1:0 --data-dir "$IT_TMP/data" \
                --images "$CELLA_IMAGES" "${netarg[@]}" "$@" >>"$CELLAD_LOG" 2>&1 &
        CELLAD_PID=$!
        IT_CELLADS="$IT_CELLADS $CELLAD_PID"
        local i url=
        for i in $(seq 1 300); do
                url=$(grep -o 'cellad listening on http://[0-9.]*:[0-9]*' "$CELLAD_LOG" |
                        head -n 1 | sed 's/^cellad listening on //') || true
                [ -n "$url" ] && break
                if ! kill -0 "$CELLAD_PID" 2>/dev/null; then
                        cat "$CELLAD_LOG" >&2
                        CELLAD_PID=
                        fail "cellad exited before it was ready"
                fi
                sleep 0.1
        done
        [ -n "$url" ] || fail "cellad not ready after 30 s: $(cat "$CELLAD_LOG")"
        IT_CGPARENT=$(grep -o "sandbox cgroups under '[^']*'" "$CELLAD_LOG" | tail -n 1 |
                sed "s/^sandbox cgroups under '//; s/'\$//")
        [ -n "$IT_CGPARENT" ] || fail "cellad did not log its cgroup parent"
        IT_IFPREFIX=$(grep -o 'interfaces cn[0-9a-f]*\*' "$CELLAD_LOG" | tail -n 1 |
                sed 's/^interfaces //; s/\*$//') || true
        local claim
        claim=$(grep -o "sandbox network range [0-9./]* .*sandbox host uids 0x[0-9a-f]*-0x[0-9a-f]*" \
                "$CELLAD_LOG" | tail -n 1) || true
        [ -n "$claim" ] || fail "cellad did not log its network range and host uids"
        IT_RANGE=$(echo "$claim" | sed 's/^sandbox network range \([0-9./]*\) .*/\1/')
        IT_UID_FIRST=$(($(echo "$claim" | sed 's/.*host uids \(0x[0-9a-f]*\)-.*/\1/')))
        IT_UID_LAST=$(($(echo "$claim" | sed 's/.*host uids 0x[0-9a-f]*-\(0x[0-9a-f]*\)$/\1/')))
        export CELLA_URL=$url
        info "cellad $CELLAD_PID at $CELLA_URL (run $IT_RUN)"
}

# ---- a daemon a client's test suite may restart ----
# start_restartable_cellad PY: cellad with auth on (exports CELLA_TOKEN) on a fixed loopback
# port (PY, a python3, finds a free one), so that a restarted daemon has the same URL.
# (Another process could take the port between the probe and cellad's bind: then
# start_cellad fails, and so does the test.) Makes the FIFOs $CTL/req and $CTL/ack, open
# read-write here (fds 7 and 8) for the whole run: the suite's opens never block, reads here
# never see EOF between requests, and an answer waits in the FIFO until the suite reads it.
# cellad and the suite get neither fd (run the suite with 7<&- 8<&-). Serve them with
# serve_restarts.
start_restartable_cellad() {
        CELLA_TOKEN=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
        export CELLA_TOKEN
        local port
        port=$("$1" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
        RESTART_ARGS=(--listen "127.0.0.1:$port") # the last --listen wins over 127.0.0.1:0
        CTL=$IT_TMP/ctl
        mkdir "$CTL"
        mkfifo "$CTL/req" "$CTL/ack"
        exec 7<>"$CTL/req" 8<>"$CTL/ack"
        RESTARTS=0
        start_cellad "${RESTART_ARGS[@]}" 7<&- 8<&-
        [ "$CELLA_URL" = "http://127.0.0.1:$port" ] || fail "cellad at $CELLA_URL, not on port $port"
}

# kill9_cellad: SIGKILL cellad and reap it (a crash; start_cellad starts it again).
kill9_cellad() {
        kill -KILL "$CELLAD_PID"
        wait "$CELLAD_PID" 2>/dev/null || true
        CELLAD_PID=
}

# restart_daemon WHY: SIGKILL cellad, start it again on the same data dir and port. Runs in
# the test's shell (CELLAD_PID must be the new daemon's for the cleanup). Sets RESTART_ERR
# and returns 1 on what it can recover from; start_cellad's own failures (cellad not ready)
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
        start_cellad "${RESTART_ARGS[@]}" 7<&- 8<&-
        if [ "$CELLA_URL" != "$url" ]; then
                RESTART_ERR="daemon came back at $CELLA_URL instead of $url"
                return 1
        fi
}

# serve_restarts PID: while the suite PID runs, answer each `restart` or `kill9-restart`
# line on $CTL/req with `ok` or `error <message>` on $CTL/ack (a 1 s read timeout to notice
# its end); then returns the suite's exit status.
serve_restarts() {
        local pid=$1 line rc=0
        while kill -0 "$pid" 2>/dev/null; do
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
        wait "$pid" || rc=$?
        return $rc
}

# stop_cellad: destroy every sandbox of this daemon, then SIGTERM it (SIGKILL after 20 s).
stop_cellad() {
        [ -n "$CELLAD_PID" ] || return 0
        local ids id
        # a tenant's sandbox is reached by the admin with ?tenant= (docs/tenants.md)
        ids=$(api GET /v1/sandboxes 2>/dev/null |
                jq -r '.sandboxes[] | .id + (if .tenant then "?tenant=" + .tenant else "" end)' \
                        2>/dev/null) || true
        for id in $ids; do
                api DELETE "/v1/sandboxes/$id" >/dev/null 2>&1 || true
        done
        kill -TERM "$CELLAD_PID" 2>/dev/null || true
        local i
        for i in $(seq 1 200); do
                kill -0 "$CELLAD_PID" 2>/dev/null || break
                sleep 0.1
        done
        if kill -0 "$CELLAD_PID" 2>/dev/null; then
                echo "cellad did not stop on SIGTERM within 20 s" >&2
                IT_FAILED_CLEANUP=1
                kill -KILL "$CELLAD_PID" 2>/dev/null || true
        fi
        wait "$CELLAD_PID" 2>/dev/null || true
        CELLAD_PID_OLD=$CELLAD_PID
        CELLAD_PID=
}

# Poll (up to 10 s) until CMD prints nothing; prints what is left on failure.
wait_empty() {
        local i out=
        for i in $(seq 1 100); do
                out=$("$@")
                [ -z "$out" ] && return 0
                sleep 0.1
        done
        echo "$out"
        return 1
}

it_cleanup() {
        local rc=$? left
        set +e
        trap - EXIT INT TERM
        # Our own background jobs (curl streams, etc.)
        local j
        for j in $(jobs -p); do
                # daemons are stopped below (a test's second one by its hook)
                case " $IT_CELLADS " in *" $j "*) continue ;; esac
                kill "$j" 2>/dev/null
        done
        if declare -F it_cleanup_hook >/dev/null; then
                it_cleanup_hook
        fi
        # Earlier daemons of the run that are still there (the hook stopped its own).
        for j in $(jobs -p); do
                [ "$j" != "$CELLAD_PID" ] && kill "$j" 2>/dev/null
        done
        local cellad=$CELLAD_PID
        stop_cellad
        CELLAD_PID=$cellad # for descends_from_cellad while the pids are still there
        if left=$(wait_empty run_pids); then :; else
                echo "LEAK: processes of this run left after cellad stopped:" >&2
                for j in $left; do
                        ps -o pid,ppid,uid,args -p "$j" >&2
                        kill -KILL "$j" 2>/dev/null
                done
                IT_FAILED_CLEANUP=1
        fi
        CELLAD_PID=
        if declare -F it_unmount_hook >/dev/null; then
                it_unmount_hook
        fi
        if left=$(wait_empty run_cgroups); then :; else
                echo "LEAK: cgroups of this run left: $left" >&2
                for j in $left; do
                        find "$j" -depth -type d -exec rmdir {} \; 2>/dev/null
                done
                IT_FAILED_CLEANUP=1
        fi
        if left=$(wait_empty run_links); then :; else
                echo "LEAK: sandbox veths of this run left: $left" >&2
                IT_FAILED_CLEANUP=1
        fi
        if [ -n "$IT_IFPREFIX" ] && [ -n "$IT_CGPARENT" ] && command -v nft >/dev/null &&
                nft list table inet "$IT_CGPARENT" >/dev/null 2>&1; then
                echo "LEAK: nft table inet $IT_CGPARENT left after the daemon stopped" >&2
                nft delete table inet "$IT_CGPARENT" 2>/dev/null
                IT_FAILED_CLEANUP=1
        fi
        if left=$(wait_empty run_loops); then :; else
                echo "LEAK: loop devices bound below $IT_TMP: $left" >&2
                IT_FAILED_CLEANUP=1
        fi
        left=$(run_mounts)
        if [ -n "$left" ]; then
                echo "LEAK: mounts left below $IT_TMP: $left" >&2
                IT_FAILED_CLEANUP=1
                grep -F "$IT_TMP" /proc/self/mountinfo | awk '{print $5}' | sort -r |
                        while read -r m; do umount -l "$m"; done
        fi
        if [ $rc -ne 0 ] && [ $rc -ne 77 ] && [ -s "$CELLAD_LOG" ]; then
                echo "---- cellad log (last 60 lines) ----" >&2
                tail -n 60 "$CELLAD_LOG" >&2
        fi
        rm -rf "$IT_TMP"
        if [ -e "$IT_TMP" ]; then
                echo "LEAK: could not remove $IT_TMP" >&2
                IT_FAILED_CLEANUP=1
        fi
        # The daemon's claim on its range and uids (kept while its data dir exists).
        [ -n "$IT_CGPARENT" ] && rm -f "/run/cella/instances/$IT_CGPARENT"
        [ -n "$IT_NETLOCK" ] && rm -f "$IT_NETLOCK"
        if [ $rc -eq 0 ] && [ $IT_FAILED_CLEANUP -ne 0 ]; then
                rc=1
        fi
        if [ $rc -eq 0 ]; then
                echo "PASS: $IT_NAME" >&2
        fi
        exit $rc
}
trap it_cleanup EXIT
trap 'exit 130' INT TERM
