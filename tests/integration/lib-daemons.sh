# Several daemons in one run: sourced after lib.sh by the tests that start more than lib.sh's
# one cellad (two daemons on a host, the cluster's nodes) or an S3 server. lib.sh's helpers
# (api, sbx, the leak checks) act on the daemon its globals name; use_daemon points them at
# another. lib.sh checks the daemon in use at exit; stop_daemon does the same for the others
# (call it from it_cleanup_hook).

free_port() {
        python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# save_daemon NAME: remember the daemon lib.sh's globals name now (after start_cellad) as
# NAME; use_daemon NAME: point the globals at it again. IT_CURL_NS, the network namespace
# the test's curl runs in while NAME is in use, goes with it (empty: the host's).
declare -A D
save_daemon() {
        D[$1.pid]=$CELLAD_PID D[$1.url]=$CELLA_URL D[$1.log]=$CELLAD_LOG
        D[$1.cg]=$IT_CGPARENT D[$1.if]=$IT_IFPREFIX D[$1.range]=$IT_RANGE
        D[$1.uid0]=$IT_UID_FIRST D[$1.uid1]=$IT_UID_LAST D[$1.ns]=${IT_CURL_NS:-}
}
use_daemon() {
        CELLAD_PID=${D[$1.pid]} CELLA_URL=${D[$1.url]} CELLAD_LOG=${D[$1.log]}
        IT_CGPARENT=${D[$1.cg]} IT_IFPREFIX=${D[$1.if]} IT_RANGE=${D[$1.range]}
        IT_UID_FIRST=${D[$1.uid0]} IT_UID_LAST=${D[$1.uid1]} IT_CURL_NS=${D[$1.ns]}
        export CELLA_URL
}

# subrange N: the Nth /20 of this run's /18 (it_net_range), a range per daemon.
subrange() {
        local base=${IT_NETRANGE%/18}
        local a b c _
        IFS=. read -r a b c _ <<<"$base"
        echo "$a.$b.$((c + $1 * 16)).0/20"
}

# stop_daemon NAME [NETNS]: what lib.sh does for its daemon at exit, for daemon NAME of the
# run: stopped, and none of its processes, cgroups, veths or nft table left (in NETNS too,
# the namespace a node ran in, where its veths and table live). Once per start: a second
# call does nothing.
stop_daemon() {
        [ -n "${D[$1.log]:-}" ] || return 0
        use_daemon "$1"
        local cellad=$CELLAD_PID left ns=${2:-} in_ns=()
        stop_cellad
        CELLAD_PID=$cellad
        left=$(wait_empty run_pids) || { echo "LEAK: processes of daemon $1: $left" >&2; IT_FAILED_CLEANUP=1; }
        CELLAD_PID=
        left=$(wait_empty run_cgroups) || { echo "LEAK: cgroups of daemon $1: $left" >&2; IT_FAILED_CLEANUP=1; }
        left=$(wait_empty run_links) || { echo "LEAK: veths of daemon $1: $left" >&2; IT_FAILED_CLEANUP=1; }
        if [ -n "$ns" ]; then
                in_ns=(nsenter --net="/run/netns/$ns")
                if [ -n "$IT_IFPREFIX" ]; then
                        left=$(ip -n "$ns" -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | grep "^$IT_IFPREFIX" || true)
                        [ -z "$left" ] || { echo "LEAK: veths of daemon $1 in $ns: $left" >&2; IT_FAILED_CLEANUP=1; }
                fi
        fi
        if command -v nft >/dev/null && "${in_ns[@]}" nft list table inet "$IT_CGPARENT" >/dev/null 2>&1; then
                echo "LEAK: nft table inet $IT_CGPARENT of daemon $1" >&2
                IT_FAILED_CLEANUP=1
        fi
        rm -f "/run/cella/instances/$IT_CGPARENT"
        D[$1.log]=
}

# nodes_of NODE: the live cluster nodes NODE lists, sorted, on one line (a,b,c).
nodes_of() {
        CELLA_URL=${D[$1.url]} api GET /v1/cluster/nodes | jq -r '[.nodes[].node] | sort | join(",")'
}
# wait_nodes NODE EXPECTED: until NODE lists EXPECTED (30 s at most).
wait_nodes() {
        local i got=
        for i in $(seq 1 300); do
                got=$(nodes_of "$1" 2>/dev/null) || got=
                [ "$got" = "$2" ] && return 0
                sleep 0.1
        done
        fail "nodes seen from $1: expected [$2], got [$got]"
}

# start_s3: a real S3 server (tests/s3: s3rver, which scripts/sdk-deps.sh installs) on a
# free loopback port with the bucket cella-it, its files in $IT_TMP/s3; sets S3PORT and the
# credentials it takes. Skips the test where node or s3rver is missing. lib.sh's cleanup
# stops it with the run's other background jobs.
start_s3() {
        local dir
        dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/../s3" && pwd)"
        command -v node >/dev/null && [ -d "$dir/node_modules/@20minutes/s3rver" ] ||
                skip "no node or no s3rver (scripts/sdk-deps.sh installs it from tests/s3)"
        mkdir -p "$IT_TMP/s3"
        : >"$IT_TMP/s3.log" # there before the server opens it: read below at once
        node "$dir/server.js" "$IT_TMP/s3" cella-it >"$IT_TMP/s3.log" 2>&1 &
        S3PORT=
        for _ in $(seq 1 150); do
                S3PORT=$(awk '/^listening/ {print $2}' "$IT_TMP/s3.log")
                [ -n "$S3PORT" ] && break
                sleep 0.2
        done
        [ -n "$S3PORT" ] || fail "the S3 server did not start: $(cat "$IT_TMP/s3.log")"
        export AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER
        unset AWS_SESSION_TOKEN
}
