#!/bin/bash
# Network modes: an outbound sandbox reaches a test "internet" (a network namespace this test
# makes, with a server on a TEST-NET address) through NAT; a none sandbox has only lo; every
# refused destination (the host's own addresses and services, cellad, other sandboxes,
# private and link-local ranges) is refused; an allowlisted CIDR becomes reachable; it all
# survives a SIGKILL of cellad and a restart of the sandbox. lib.sh checks at exit that no
# veth of the run is left and that the nft table went with the daemon.
. "$(dirname "$0")/lib.sh"
command -v ip >/dev/null || skip "needs ip (iproute2)"
command -v nft >/dev/null || skip "needs nft (nftables)"
command -v python3 >/dev/null || skip "needs python3"

start_cellad
grep -q "network: outbound available" "$CELLAD_LOG" ||
        skip "outbound networking unavailable here: $(grep -o 'network: [^;]*' "$CELLAD_LOG" | head -n 1)"

# ---- the test's own internet ----
k=$((IT_NETINDEX % 64))
NS=it-$IT_RUN-inet
HOSTIF=it${IT_RUN}h
NSIF=it${IT_RUN}n
HOST_SIDE=198.51.100.$((k * 4 + 1))
INET=198.51.100.$((k * 4 + 2))   # the test host
PRIV=172.30.$k.1                 # a private address of the test host (allowlist)
HOSTPORT=$((20000 + IT_NETINDEX)) # a service of the host on every address
SERVER_LOG=$IT_TMP/server.log
it_cleanup_hook() {
        [ -n "${SRV_PID:-}" ] && kill "$SRV_PID" 2>/dev/null
        [ -n "${HOSTSRV_PID:-}" ] && kill "$HOSTSRV_PID" 2>/dev/null
        [ -n "${UDP_PID:-}" ] && kill "$UDP_PID" 2>/dev/null
        ip route del "$PRIV/32" 2>/dev/null
        ip netns pids "$NS" 2>/dev/null | xargs -r kill -KILL 2>/dev/null
        ip netns del "$NS" 2>/dev/null
        ip link del "$HOSTIF" 2>/dev/null
        return 0
}
ip netns add "$NS"
ip link add "$HOSTIF" type veth peer name "$NSIF" netns "$NS"
ip addr add "$HOST_SIDE/30" dev "$HOSTIF"
ip link set "$HOSTIF" up
ip -n "$NS" link set lo up
ip -n "$NS" addr add "$INET/30" dev "$NSIF"
ip -n "$NS" addr add "$PRIV/32" dev lo
ip -n "$NS" link set "$NSIF" up
ip -n "$NS" route add default via "$HOST_SIDE"
ip route add "$PRIV/32" via "$INET"
ip netns exec "$NS" python3 -m http.server 8080 --bind 0.0.0.0 --directory "$IT_TMP" \
        >"$SERVER_LOG" 2>&1 &
SRV_PID=$!
mkdir -p "$IT_TMP/hostsrv"
python3 -m http.server "$HOSTPORT" --bind 0.0.0.0 --directory "$IT_TMP/hostsrv" \
        >/dev/null 2>&1 &
HOSTSRV_PID=$!
for i in $(seq 1 50); do
        curl -s -o /dev/null --connect-timeout 1 "http://$INET:8080/" &&
                curl -s -o /dev/null --connect-timeout 1 "http://127.0.0.1:$HOSTPORT/" && break
        sleep 0.1
done
curl -s -o /dev/null --connect-timeout 1 "http://$INET:8080/" || fail "test server not up"

UPLINK=$(ip -4 -o addr show scope global | awk '{print $4}' | cut -d/ -f1 |
        grep -v "^$HOST_SIDE\$" | head -n 1)
CELLAD_PORT=${CELLA_URL##*:}

# get NAME URL: HTTP status of a GET from inside NAME ("000" when it cannot connect).
get() {
        run_in "$1" "curl -s -o /dev/null -w '%{http_code}' --connect-timeout 2 -m 4 '$2' || true"
}

A=$(sbx out)
B=$(sbx none)
C=$(sbx allow)
api_json PUT "/v1/sandboxes/$A" '{}' >/dev/null
expect_status 201
assert_eq outbound "$(body .network)" "default network"
A_ADDR=$(body .networkAddress)
api_json PUT "/v1/sandboxes/$B" '{"network":"none"}' >/dev/null
expect_status 201
assert_eq none "$(body .network)" "network none"
assert_eq null "$(body .networkAddress)" "no address without network"
api_json PUT "/v1/sandboxes/$C" "{\"network\":\"outbound\",\"networkAllow\":[\"$PRIV/32:8080\"]}" \
        >/dev/null
expect_status 201
assert_eq "[\"$PRIV/32:8080\"]" "$(jq -c .networkAllow <"$IT_TMP/body")" "allowlist kept"
C_ADDR=$(body .networkAddress)
assert_ne "$A_ADDR" "$C_ADDR" "two sandboxes, two addresses"

info "validation"
api_json PUT "/v1/sandboxes/$A" '{"network":"none"}' >/dev/null
expect_status 400
assert_contains "$(body .message)" "destroy it to change the network"
for bad in '"10.0.0.1/8"' '"1.2.3.4:0"' '"::1"' '"1.2.3.4/33"' '"01.2.3.4"' '"1.2.3.4:80x"' 42; do
        api_json PUT "/v1/sandboxes/$(sbx bad)" "{\"networkAllow\":[$bad]}" >/dev/null
        expect_status 400
done
api_json PUT "/v1/sandboxes/$(sbx bad)" '{"network":"all"}' >/dev/null
expect_status 400

info "outbound reaches the test host through NAT"
assert_eq 200 "$(get "$A" "http://$INET:8080/")" "GET from $A"
grep -q "^$HOST_SIDE " "$SERVER_LOG" || fail "the server did not see the host-side address: $(cat "$SERVER_LOG")"
grep -q "^$A_ADDR " "$SERVER_LOG" && fail "the sandbox address reached the server (no NAT)"
resolv=$(run_in "$A" 'cat /etc/resolv.conf')
assert_contains "$resolv" "written by cella"

info "none has only lo and reaches nothing"
assert_eq lo "$(run_in "$B" 'ls /sys/class/net | tr "\n" " " | sed "s/ *$//"')" "interfaces of none"
assert_eq 000 "$(get "$B" "http://$INET:8080/")" "none reaches the test host"

info "refused destinations"
curl -s -o /dev/null --connect-timeout 1 "http://$UPLINK:$HOSTPORT/" || fail "host service not up"
for url in "http://$UPLINK:$HOSTPORT/" "http://$HOST_SIDE:$HOSTPORT/" \
        "http://10.$((k + 128)).0.1:$HOSTPORT/" "http://127.0.0.1:$CELLAD_PORT/v1/health" \
        "http://$UPLINK:$CELLAD_PORT/v1/health" "http://$C_ADDR:8000/" "http://10.1.2.3/" \
        "http://172.16.1.1/" "http://192.168.1.1/" "http://169.254.169.254/" \
        "http://$PRIV:8080/"; do
        assert_eq 000 "$(get "$A" "$url")" "$A reached $url"
done
# The gateway (the veth's host end) is refused like every host address.
gw=$(run_in "$A" "ip route | awk '/^default/ {print \$3}'")
assert_eq 000 "$(get "$A" "http://$gw:$HOSTPORT/")" "$A reached the host through its gateway"

info "two sandboxes cannot reach each other"
run_in "$C" "setsid python3 -m http.server 8000 --bind 0.0.0.0 >/dev/null 2>&1 </dev/null & sleep 0.5; echo" >/dev/null
for i in $(seq 1 30); do
        [ "$(get "$C" "http://127.0.0.1:8000/")" = 200 ] && break
        sleep 0.2
done
assert_eq 200 "$(get "$C" "http://127.0.0.1:8000/")" "server inside $C"
assert_eq 000 "$(get "$A" "http://$C_ADDR:8000/")" "$A reached $C"
assert_eq 000 "$(get "$C" "http://$A_ADDR:22/")" "$C reached $A"

info "allowlist"
assert_eq 200 "$(get "$C" "http://$PRIV:8080/")" "$C to its allowlisted address"
assert_eq 000 "$(get "$A" "http://$PRIV:8080/")" "$A to the same address"
# Changed live on a running sandbox.
api_json PUT "/v1/sandboxes/$A" "{\"networkAllow\":[\"$PRIV/32\"]}" >/dev/null
expect_status 200
assert_eq 200 "$(get "$A" "http://$PRIV:8080/")" "$A after its allowlist changed"
api_json PUT "/v1/sandboxes/$A" '{"networkAllow":[]}' >/dev/null
expect_status 200
assert_eq 000 "$(get "$A" "http://$PRIV:8080/")" "$A after its allowlist emptied"
# A sandbox may send packets with any source address (CAP_NET_RAW in its namespace):
# forged sources go nowhere (strict reverse-path check), neither another sandbox's
# address nor one outside the range (which NAT would not rewrite). UDP to the test host:
# A's own datagram arrives, the forged ones sent before it do not. (Allowlists are keyed
# by interface, so a forged address would not open another sandbox's allowlist either.)
ip netns exec "$NS" python3 -c '
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", 8080))
with open(sys.argv[1], "a", buffering=1) as f:
    while True:
        data, addr = s.recvfrom(2048)
        f.write(addr[0] + " " + data.decode(errors="replace") + "\n")
' "$IT_TMP/udp.log" >/dev/null 2>&1 &
UDP_PID=$!
sleep 0.3
send_udp() { # NAME PAYLOAD [SPOOFED-SOURCE]
        run_in "$1" "python3 -c '
import socket, struct, sys
dst, payload = sys.argv[1], sys.argv[2].encode()
if len(sys.argv) > 3:
    src = sys.argv[3]
    udp = struct.pack(\"!HHHH\", 40000, 8080, 8 + len(payload), 0) + payload
    ip = struct.pack(\"!BBHHHBBH4s4s\", 0x45, 0, 20 + len(udp), 0, 0, 64, 17, 0,
                     socket.inet_aton(src), socket.inet_aton(dst))
    r = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    r.sendto(ip + udp, (dst, 0))
else:
    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(payload, (dst, 8080))
 ' $INET $2 ${3:-} && echo sent"
}
assert_eq sent "$(send_udp "$A" forgedc-$IT_RUN "$C_ADDR")" "datagram forged from C sent"
assert_eq sent "$(send_udp "$A" forgedx-$IT_RUN 198.18.0.99)" "datagram forged from outside sent"
assert_eq sent "$(send_udp "$A" real-$IT_RUN)" "datagram from A sent"
for i in $(seq 1 30); do grep -q "real-$IT_RUN" "$IT_TMP/udp.log" 2>/dev/null && break; sleep 0.1; done
grep -q "^$HOST_SIDE real-$IT_RUN" "$IT_TMP/udp.log" ||
        fail "A's datagram did not arrive through NAT: $(cat "$IT_TMP/udp.log")"
if grep -q "forged" "$IT_TMP/udp.log"; then
        fail "a forged datagram arrived: $(cat "$IT_TMP/udp.log")"
fi
kill "$UDP_PID" 2>/dev/null || true

info "SIGKILL cellad and start again"
kill -KILL "$CELLAD_PID"
wait "$CELLAD_PID" 2>/dev/null || true
CELLAD_PID=
start_cellad
assert_eq 200 "$(get "$A" "http://$INET:8080/")" "$A after the daemon restart"
assert_eq 200 "$(get "$C" "http://$PRIV:8080/")" "$C's allowlist after the daemon restart"
assert_eq 000 "$(get "$A" "http://$UPLINK:$HOSTPORT/")" "$A reached the host after the restart"

info "a sandbox started again gets its network again"
for p in $(sandbox_pids "$A"); do kill -KILL "$p" 2>/dev/null || true; done
for i in $(seq 1 50); do [ -z "$(sandbox_pids "$A")" ] && break; sleep 0.1; done
assert_eq 200 "$(get "$A" "http://$INET:8080/")" "$A after its restart"

info "the CLI"
CLIBOX=$(sbx cli)
"$CELLA_BUILD/cella" create "$CLIBOX" --network outbound --allow "$PRIV/32:8080" >"$IT_TMP/out" ||
        fail "cella create --network failed: $(cat "$IT_TMP/out")"
assert_eq "created sandbox '$CLIBOX'" "$(cat "$IT_TMP/out")" "cella create confirms"
"$CELLA_BUILD/cella" info "$CLIBOX" >"$IT_TMP/out" || fail "cella info failed"
assert_contains "$(cat "$IT_TMP/out")" "network:       outbound 10."
assert_contains "$(cat "$IT_TMP/out")" "network allow: $PRIV/32:8080"
assert_eq 200 "$(get "$CLIBOX" "http://$PRIV:8080/")" "CLI sandbox to its allowlisted address"
if "$CELLA_BUILD/cella" create "$CLIBOX" --network none >"$IT_TMP/out" 2>&1; then
        fail "cella create changed the network of an existing sandbox"
fi
"$CELLA_BUILD/cella" destroy "$CLIBOX" >/dev/null

info "destroy leaves no veth"
for n in "$A" "$B" "$C"; do
        api DELETE "/v1/sandboxes/$n" >/dev/null
        expect_status 200
done
api_json PUT "/v1/sandboxes/$(sbx late)" '{}' >/dev/null # one more, destroyed by lib.sh
info "network: ok"
