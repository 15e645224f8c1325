#!/bin/bash
# Two daemons on one host, neither given --network-range: each claims a network range and a
# block of host uids of its own (docs/decisions/0033-instance-claims.md), so that outbound
# sandboxes of both reach a test "internet" at the same time (this test's own network
# namespace with a server, as in test-network.sh) and their sandboxes never share a host
# uid. A range or uid base given explicitly that overlaps another daemon's, or an address
# of the host, is refused with a message naming it; cellad --check says what a data dir
# would use; a restarted daemon keeps its range and uids. lib.sh checks daemon A at exit,
# the hook below daemon B.
. "$(dirname "$0")/lib.sh"
command -v ip >/dev/null || skip "needs ip (iproute2)"
command -v python3 >/dev/null || skip "needs python3"
. "$(dirname "$0")/lib-daemons.sh"

NS=it-$IT_RUN-inet
HOSTIF=it${IT_RUN}h
NSIF=it${IT_RUN}n
it_cleanup_hook() {
        [ -n "${SRV_PID:-}" ] && kill "$SRV_PID" 2>/dev/null
        ip netns pids "$NS" 2>/dev/null | xargs -r kill -KILL 2>/dev/null
        ip netns del "$NS" 2>/dev/null
        ip link del "$HOSTIF" 2>/dev/null
        [ -n "${D[B.log]:-}" ] || return 0
        # Daemon B as lib.sh does it for A: stopped, nothing of it left.
        stop_daemon B
        use_daemon A
        return 0
}

# overlap CIDR CIDR: exit 0 when the two share an address.
overlap() {
        python3 -c 'import ipaddress, sys
a, b = (ipaddress.ip_network(x) for x in sys.argv[1:])
sys.exit(0 if a.overlaps(b) else 1)' "$1" "$2"
}

info "two daemons without --network-range"
IT_AUTO_NETRANGE=1 start_cellad --pool 0
save_daemon A
CELLAD_LOG=$IT_TMP/cellad-b.log
CELLAD_PID=
IT_AUTO_NETRANGE=1 start_cellad --pool 0 --data-dir "$IT_TMP/data-b"
save_daemon B
use_daemon A
grep -q "network: outbound available" "${D[A.log]}" ||
        skip "outbound networking unavailable here: $(grep -o 'network: [^;]*' "${D[A.log]}" | head -n 1)"
info "A: ${D[A.range]}, uids ${D[A.uid0]}-${D[A.uid1]}; B: ${D[B.range]}, uids ${D[B.uid0]}-${D[B.uid1]}"
grep -q "sandbox network range ${D[A.range]} (chosen" "${D[A.log]}" || fail "A's range not chosen by A"
grep -q "sandbox network range ${D[B.range]} (chosen" "${D[B.log]}" || fail "B's range not chosen by B"
overlap "${D[A.range]}" "${D[B.range]}" && fail "the ranges of A and B overlap"
[ "${D[A.uid1]}" -lt "${D[B.uid0]}" ] || [ "${D[B.uid1]}" -lt "${D[A.uid0]}" ] ||
        fail "the uid blocks of A and B overlap"
[ "${D[A.uid0]}" -ge "$SANDBOX_UID_MIN" ] && [ "${D[B.uid0]}" -ge "$SANDBOX_UID_MIN" ] ||
        fail "a uid block below $SANDBOX_UID_MIN"
# A third data dir would get yet another range (the choice skips both claims).
"$CELLA_BUILD/cellad" --check --data-dir "$IT_TMP/data-c" >"$IT_TMP/check" 2>&1 ||
        fail "cellad --check: $(cat "$IT_TMP/check")"
c_range=$(grep -o 'sandbox network range [0-9./]*' "$IT_TMP/check" | awk '{print $4}')
[ -n "$c_range" ] || fail "cellad --check does not say its range: $(cat "$IT_TMP/check")"
overlap "$c_range" "${D[A.range]}" && fail "--check would take A's range ($c_range)"
overlap "$c_range" "${D[B.range]}" && fail "--check would take B's range ($c_range)"
[ ! -e "$IT_TMP/data-c/instance" ] || fail "cellad --check wrote a record"
# ... and for A's data dir, what A uses.
"$CELLA_BUILD/cellad" --check --data-dir "$IT_TMP/data" >"$IT_TMP/check" 2>&1 ||
        fail "cellad --check of A's data dir: $(cat "$IT_TMP/check")"
assert_contains "$(cat "$IT_TMP/check")" "sandbox network range ${D[A.range]} (recorded" "--check of A"

info "the test's internet"
k=$((IT_NETINDEX % 64))
HOST_SIDE=198.51.100.$((k * 4 + 1))
INET=198.51.100.$((k * 4 + 2))
ip netns add "$NS"
ip link add "$HOSTIF" type veth peer name "$NSIF" netns "$NS"
ip addr add "$HOST_SIDE/30" dev "$HOSTIF"
ip link set "$HOSTIF" up
ip -n "$NS" link set lo up
ip -n "$NS" addr add "$INET/30" dev "$NSIF"
ip -n "$NS" link set "$NSIF" up
ip -n "$NS" route add default via "$HOST_SIDE"
echo hello >"$IT_TMP/hello"
ip netns exec "$NS" python3 -m http.server 8080 --bind 0.0.0.0 --directory "$IT_TMP" \
        >/dev/null 2>&1 &
SRV_PID=$!
for i in $(seq 1 50); do
        curl -s -o /dev/null --connect-timeout 1 "http://$INET:8080/hello" && break
        sleep 0.1
done
curl -s -o /dev/null --connect-timeout 1 "http://$INET:8080/hello" || fail "test server not up"

info "a sandbox in each, outbound at the same time"
SA=$(sbx a)
SB=$(sbx b)
use_daemon A
api_json PUT "/v1/sandboxes/$SA" '{}'
expect_status 201
a_addr=$(body .networkAddress)
use_daemon B
api_json PUT "/v1/sandboxes/$SB" '{}'
expect_status 201
b_addr=$(body .networkAddress)
overlap "$a_addr/32" "${D[A.range]}" || fail "A's sandbox address $a_addr not in ${D[A.range]}"
overlap "$b_addr/32" "${D[B.range]}" || fail "B's sandbox address $b_addr not in ${D[B.range]}"
# 20 GETs from each, both running at once; every one answered.
loop='n=0; for i in $(seq 1 20); do
        [ "$(curl -s -m 4 --connect-timeout 2 http://'$INET':8080/hello)" = hello ] && n=$((n + 1)); done; echo $n'
req=$(jq -cn --arg c "$loop" '{command:$c, timeout:120000}')
for d in A B; do
        use_daemon $d
        box=$SA
        [ $d = B ] && box=$SB
        curl -sS -o "$IT_TMP/out-$d" -H 'Content-Type: application/json' --data-binary "$req" \
                "$CELLA_URL/v1/sandboxes/$box/exec" &
        eval "P_$d=\$!"
done
wait "$P_A" || fail "exec in A's sandbox failed"
wait "$P_B" || fail "exec in B's sandbox failed"
assert_eq 20 "$(jq -r .stdout <"$IT_TMP/out-A" | tr -d '\n')" "GETs answered from A's sandbox"
assert_eq 20 "$(jq -r .stdout <"$IT_TMP/out-B" | tr -d '\n')" "GETs answered from B's sandbox"

info "their PID 1s run as host uids of disjoint blocks"
uid_of_pid1() { # daemon sandbox: host uid of the sandbox's PID 1 (its pid there is 1)
        use_daemon "$1"
        local p
        for p in $(sandbox_pids "$2"); do
                if awk '/^NSpid:/ {exit !($NF == 1)}' "/proc/$p/status" 2>/dev/null; then
                        awk '/^Uid:/ {print $2}' "/proc/$p/status"
                        return 0
                fi
        done
}
ua=$(uid_of_pid1 A "$SA")
ub=$(uid_of_pid1 B "$SB")
[ -n "$ua" ] && [ -n "$ub" ] || fail "PID 1 of a sandbox not found on the host ($ua, $ub)"
assert_ne "$ua" "$ub" "host uid of both PID 1s"
[ "$ua" -ge "${D[A.uid0]}" ] && [ "$ua" -le "${D[A.uid1]}" ] || fail "A's PID 1 runs as $ua"
[ "$ub" -ge "${D[B.uid0]}" ] && [ "$ub" -le "${D[B.uid1]}" ] || fail "B's PID 1 runs as $ub"
for d in A B; do
        use_daemon $d
        box=$SA
        [ $d = B ] && box=$SB
        read -r _ first count <<<"$(run_in "$box" 'cat /proc/self/uid_map')"
        [ "$first" -ge "${D[$d.uid0]}" ] && [ $((first + count - 1)) -le "${D[$d.uid1]}" ] ||
                fail "uid map of $d's sandbox ($first+$count) outside its block"
done

info "an explicit range or uid base that overlaps is refused, naming what it overlaps"
refused() { # expected-text cellad-args...
        local want=$1 rc=0
        shift
        timeout 30 "$CELLA_BUILD/cellad" --listen 127.0.0.1:0 --data-dir "$IT_TMP/data-c" \
                --images "$CELLA_IMAGES" --pool 0 "$@" >"$IT_TMP/refused" 2>&1 || rc=$?
        [ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "cellad $* started (rc $rc): $(cat "$IT_TMP/refused")"
        assert_contains "$(cat "$IT_TMP/refused")" "$want" "refusal of cellad $*"
}
refused "--network-range ${D[A.range]} overlaps cella instance '${D[A.cg]}'" \
        --network-range "${D[A.range]}"
wider=$(python3 -c 'import ipaddress, sys; print(ipaddress.ip_network(sys.argv[1]).supernet())' \
        "${D[A.range]}")
# (it may hold B's range too, when A and B got neighbouring ones: either is named)
refused "--network-range $wider overlaps cella instance 'cella-" --network-range "$wider"
refused "--network-range 198.51.100.0/24 overlaps address $HOST_SIDE/30 on $HOSTIF" \
        --network-range 198.51.100.0/24
refused "overlap cella instance '${D[B.cg]}'" --uid-base "${D[B.uid0]}"
refused "give another --uid-base" --uid-base $((D[B.uid0] + 65536 * 4000)) \
        --network-range "$IT_NETRANGE"
# --check says the same and claims nothing.
if "$CELLA_BUILD/cellad" --check --data-dir "$IT_TMP/data-c" --network-range "${D[B.range]}" \
        >"$IT_TMP/check" 2>&1; then
        fail "cellad --check accepted B's range"
fi
assert_contains "$(cat "$IT_TMP/check")" "overlaps cella instance '${D[B.cg]}'" "--check refusal"
[ ! -e "$IT_TMP/data-c/instance" ] || fail "a refused daemon wrote a record"

info "a restarted daemon keeps its range and uids; its sandbox its network"
use_daemon A
kill -TERM "$CELLAD_PID"
wait "$CELLAD_PID" 2>/dev/null || true
CELLAD_PID=
IT_AUTO_NETRANGE=1 start_cellad --pool 0
assert_eq "${D[A.range]}" "$IT_RANGE" "A's range after a restart"
assert_eq "${D[A.uid0]}" "$IT_UID_FIRST" "A's uids after a restart"
grep -q "sandbox network range $IT_RANGE (recorded" "$CELLAD_LOG" || fail "A did not reuse its record"
save_daemon A
assert_eq hello "$(run_in "$SA" "curl -s -m 4 http://$INET:8080/hello")" "A's sandbox after the restart"
assert_eq "$ua" "$(uid_of_pid1 A "$SA")" "A's sandbox's PID 1 after the restart"
use_daemon A
info "two daemons: ok"
