#!/bin/bash
# A hostile tenant: escapes tried from inside sandbox A, each case naming the mechanism
# that stops it, then resource attacks from A while a second sandbox B answers `echo`.
# (More escape classes, with the same mechanisms, are in test-isolation.sh and
# test-network.sh; docs/reliability.md lists them all.)
#
# B's `echo` round trip is measured idle and during each attack and written to
# $CELLA_HOSTILE_FIGURES (default $IT_TMP/figures) as "attack p50 p99 max" in ms; the test
# asserts only that every echo answers (curl --max-time 30), never a time: figures go to
# docs/reliability.md.
. "$(dirname "$0")/lib.sh"
HOSTPID=
SRVPID=
SOCKPID=
it_cleanup_hook() { # the host-side processes this test starts
        for p in $HOSTPID $SRVPID $SOCKPID; do kill "$p" 2>/dev/null || true; done
}
start_cellad --pool 0 --disk-limit-override 2G

A=$(sbx attacker)
B=$(sbx bystander)
FIG=${CELLA_HOSTILE_FIGURES:-$IT_TMP/figures}
: >"$FIG"
api_json PUT "/v1/sandboxes/$A" '{}'
expect_status 201
api_json PUT "/v1/sandboxes/$B" '{}'
expect_status 201

# case NAME MECHANISM: announce a case.
case_() {
        info "$1 (stopped by: $2)"
}

# refused COMMAND WHAT: the command fails inside A.
refused() {
        sx "$A" "$1"
        expect_status 200
        assert_ne 0 "$(exit_code)" "$2 succeeded: $(body .stdout) $(body .stderr)"
}

# ---- escapes ----
MARK=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
echo "host-secret-$MARK" >"$IT_TMP/host-secret"
chmod 0644 "$IT_TMP/host-secret"

case_ "host files through symlinks, /proc/*/root and the files API" \
        "mount namespace with pivot_root; the files API resolves inside the sandbox root"
run_in "$A" "ln -sfn / /workspace/rootlink; ln -sfn $IT_TMP/host-secret /workspace/secretlink" >/dev/null
for p in "/workspace/rootlink$IT_TMP/host-secret" /workspace/secretlink \
        "/proc/1/root$IT_TMP/host-secret" "/proc/self/root$IT_TMP/host-secret" \
        "$IT_TMP/host-secret" "/workspace/../..$IT_TMP/host-secret"; do
        out=$(run_in "$A" "cat '$p' 2>&1; true")
        assert_not_contains "$out" "host-secret-$MARK" "exec cat $p"
        api GET "/v1/sandboxes/$A/files?path=$(jq -rn --arg p "$p" '$p|@uri')" >/dev/null
        assert_not_contains "$(body)" "host-secret-$MARK" "files API $p"
done
# every process's root, as the sandbox sees them
out=$(run_in "$A" "for r in /proc/[0-9]*/root; do cat \$r$IT_TMP/host-secret 2>/dev/null; done; true")
assert_not_contains "$out" "host-secret-$MARK" "cat through every /proc/PID/root"

case_ "host processes" "PID namespace: host pids do not exist inside"
sleep 1000 &
HOSTPID=$!
out=$(run_in "$A" "ls /proc | grep -c '^[0-9]' ; kill -9 $HOSTPID 2>&1; echo rc=\$?")
kill -0 "$HOSTPID" || fail "a host process was killed from inside"
kill "$HOSTPID"
wait "$HOSTPID" 2>/dev/null || true
n=$(echo "$out" | head -1)
[ "$n" -lt 50 ] || fail "the sandbox sees $n processes"

case_ "host loopback services" "network namespace: the sandbox's 127.0.0.1 is its own"
python3 -m http.server 0 --bind 127.0.0.1 >"$IT_TMP/hostsrv.log" 2>&1 &
SRVPID=$!
port=
for i in $(seq 1 50); do
        port=$(ss -ltnp 2>/dev/null | awk -v p="pid=$SRVPID," 'index($0, p) { split($4, a, ":"); print a[2]; exit }')
        [ -n "$port" ] && break
        sleep 0.1
done
[ -n "$port" ] || fail "host test server did not start"
curl -s -o /dev/null --max-time 5 "http://127.0.0.1:$port/" || fail "host test server does not answer"
out=$(run_in "$A" "curl -s -o /dev/null -w '%{http_code}' --max-time 3 http://127.0.0.1:$port/; true")
assert_eq 000 "$out" "sandbox reached the host's loopback service"
cport=${CELLA_URL##*:}
out=$(run_in "$A" "curl -s -o /dev/null -w '%{http_code}' --max-time 3 http://127.0.0.1:$cport/v1/health; true")
assert_eq 000 "$out" "sandbox reached cellad on the host's loopback"
kill "$SRVPID"
wait "$SRVPID" 2>/dev/null || true

case_ "another sandbox's files and processes" \
        "separate mount and PID namespaces and disks; the API names one sandbox per request"
run_in "$B" "echo b-private > /workspace/b.txt; (sleep 4242 >/dev/null 2>&1 &); echo" >/dev/null
assert_eq 1 "$(run_in "$B" "for p in /proc/[0-9]*; do tr '\\0' ' ' <\$p/cmdline 2>/dev/null; echo; done | grep -c '^sleep 4242'; true")" "B's process in B"
out=$(run_in "$A" "cat /workspace/b.txt 2>&1; for p in /proc/[0-9]*; do tr '\\0' ' ' <\$p/cmdline 2>/dev/null; echo; done | grep -c '^sleep 4242'; true")
assert_not_contains "$out" "b-private" "A read B's file"
assert_eq 0 "$(echo "$out" | tail -1)" "A sees B's process"

case_ "mount, nested user namespaces" "no capabilities in the host's user namespace; seccomp refuses unshare/setns"
refused 'mount -t tmpfs none /mnt' "mount"
refused 'unshare -Ur true' "a nested user namespace"
refused 'mount --bind / /mnt' "bind mount"

case_ "kernel keyring, bpf, perf, kexec, modules" "seccomp (EPERM)"
cat >"$IT_TMP/sc.py" <<'EOF'
import ctypes, platform
libc = ctypes.CDLL(None, use_errno=True)
nr = {"keyctl": (250, 219), "add_key": (248, 217), "request_key": (249, 218),
      "bpf": (321, 280), "perf_event_open": (298, 241), "kexec_load": (246, 104),
      "kexec_file_load": (320, 294), "init_module": (175, 105), "finit_module": (313, 273),
      "open_by_handle_at": (304, 265)}
col = 0 if platform.machine() == "x86_64" else 1
for name, n in sorted(nr.items()):
    r = libc.syscall(n[col], 0, 0, 0, 0, 0)
    print("%s %d %d" % (name, r, ctypes.get_errno()))
EOF
api PUT "/v1/sandboxes/$A/files?path=/tmp/sc.py" --data-binary @"$IT_TMP/sc.py" >/dev/null
expect_status 200
run_in "$A" 'python3 /tmp/sc.py' >"$IT_TMP/sc.out"
while read -r name r e; do
        [ "$r" = -1 ] && { [ "$e" = 1 ] || [ "$e" = 38 ]; } ||
                fail "syscall $name answered $r errno $e (expected -1 EPERM/ENOSYS)"
done <"$IT_TMP/sc.out"
[ "$(wc -l <"$IT_TMP/sc.out")" -eq 10 ] || fail "syscall probe: $(cat "$IT_TMP/sc.out")"

case_ "ptrace of PID 1" "seccomp refuses ptrace of pid 1; PID 1 is not dumpable"
out=$(run_in "$A" 'python3 -c "
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
print(libc.ptrace(16, 1, 0, 0), ctypes.get_errno())"')
assert_ne "0" "${out%% *}" "PTRACE_ATTACH to pid 1 succeeded"
refused 'cat /proc/1/environ' "reading PID 1's environment"

case_ "writes to /proc/sys and /sys" "/proc/sys read-only, /sys read-only, no CAP_SYS_ADMIN"
refused 'echo 1 > /proc/sys/kernel/sysrq' "write to /proc/sys"
refused 'echo 1 > /proc/sysrq-trigger' "write to /proc/sysrq-trigger"
refused 'echo 1500 > /sys/class/net/lo/mtu' "write to /sys"

case_ "the host's cgroups" "cgroup namespace: the sandbox's own subtree is its root; no mount of another hierarchy"
out=$(run_in "$A" 'cat /proc/self/cgroup /proc/1/cgroup')
[ -n "$IT_CGPARENT" ] && assert_not_contains "$out" "$IT_CGPARENT" "host cgroup names inside"
refused 'mount -t cgroup -o pids none /mnt' "mounting a cgroup v1 hierarchy"
refused 'mount -t cgroup2 none /mnt' "mounting the cgroup2 hierarchy again"

# ---- resource attacks while B answers ----
# echo_times N LABEL: N echo round trips to B; every one must answer 200 with "x"; their
# p50/p99/max go to $FIG.
echo_times() {
        local n=$1 label=$2 i auth=()
        [ -n "${CELLA_TOKEN:-}" ] && auth=(-H "Authorization: Bearer $CELLA_TOKEN")
        : >"$IT_TMP/times"
        for i in $(seq 1 "$n"); do
                curl -sS -o "$IT_TMP/echo" -w '%{http_code} %{time_total}\n' --max-time 30 \
                        "${auth[@]}" -H 'Content-Type: application/json' \
                        -d '{"command":"echo x"}' "$CELLA_URL/v1/sandboxes/$B/exec" \
                        >>"$IT_TMP/times" || fail "$label: echo in $B failed"
                assert_eq "x" "$(jq -r .stdout <"$IT_TMP/echo" | tr -d '\n')" "$label: echo output"
        done
        awk '$1 != 200 { bad++ } END { exit bad > 0 }' "$IT_TMP/times" ||
                fail "$label: echo in $B: $(grep -v '^200' "$IT_TMP/times" | head -3)"
        awk '{ print $2 * 1000 }' "$IT_TMP/times" | sort -n |
                awk -v l="$label" '{ v[NR] = $1 } END {
                        p50 = v[int((NR + 1) / 2)]; i = int(NR * 0.99 + 0.999); if (i > NR) i = NR
                        printf "%s %.2f %.2f %.2f\n", l, p50, v[i], v[NR] }' >>"$FIG"
        info "$(tail -1 "$FIG")"
}

# attack NAME MECHANISM COMMAND [SAMPLES]: COMMAND as a background process in A, B's
# echo measured while it runs, then the process and all it started killed.
attack() {
        local name=$1 mech=$2 cmd=$3 samples=${4:-100} id
        case_ "$name" "$mech"
        api_json POST "/v1/sandboxes/$A/processes" "$(jq -cn --arg c "$cmd" '{command:$c}')"
        expect_status 200
        id=$(body .id)
        sleep 1 # let it get going
        echo_times "$samples" "$name"
        api DELETE "/v1/sandboxes/$A/processes/$id" >/dev/null
        expect_status 200
        # A is usable again afterwards
        sx "$A" 'pkill -9 -f attack-marker 2>/dev/null; echo alive' 60000
        expect_status 200
        assert_eq alive "$(body .stdout | tr -d '\n')" "$A after $name"
}

echo_times 100 idle
attack "fork bomb" "pids cgroup (pids.max $(grep -o 'PIDS_MAX [0-9]*' "$(dirname "$0")/../../src/common/limits.h" | awk '{print $2}'))" \
        ': attack-marker; b() { b | b & }; b'
attack "memory bomb" "memory cgroup: the OOM killer inside the sandbox's cgroup" \
        ': attack-marker; while true; do python3 -c "l = []
while True: l.append(bytearray(64 << 20))"; done'
attack "disk fill" "the sandbox's own sparse disk image (ENOSPC at its limit)" \
        ': attack-marker; while true; do dd if=/dev/zero of=/workspace/fill bs=1M count=4096 2>/dev/null; rm -f /workspace/fill; done'
attack "10 GiB output flood" "a process log keeps 64 MiB on the sandbox's disk (logTruncated past it); the agent reads under the cpu cgroup" \
        ': attack-marker; head -c 10G /dev/zero'
attack "100,000 files" "the disk image's inode limit (131,072 at 2 GiB; 100,000 fit) and the cpu cgroup" \
        ': attack-marker; mkdir -p /workspace/many && cd /workspace/many && seq 1 100000 | xargs touch; sleep 1000'
attack "10,000 processes" "pids cgroup" \
        ': attack-marker; for i in $(seq 1 10000); do sleep 1000 & done 2>/dev/null; wait'
attack "CPU hog" "cpu cgroup share (cpu.shares / cpu quota of the instance type)" \
        ': attack-marker; for i in 1 2 3 4; do (while :; do :; done) & done; wait'

run_in "$A" 'rm -rf /workspace/many /workspace/fill; echo' >/dev/null
info "figures (ms): $(tr '\n' ';' <"$FIG")"

# ---- the agent's socket path ----
# The agent listens at /run/.cella/agent.sock inside the sandbox, a path its root may
# change; cellad connects to it again after a restart. A host socket that records every
# connection, and both sandboxes' paths pointed at it: by an absolute symlink (A) and
# through a magic link of the sandbox's /proc (B).
case_ "cellad led to a host socket by the agent socket's path" \
        "cellad resolves the path inside the sandbox's root (openat2 RESOLVE_IN_ROOT, no magic links)"
HOSTSOCK=$IT_TMP/host-agent.sock
HITS=$IT_TMP/host-agent.hits
: >"$HITS"
python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen(16)
while True:
    c, _ = s.accept()
    with open(sys.argv[2], "a") as f:
        f.write("hit\n")
    c.close()' "$HOSTSOCK" "$HITS" &
SOCKPID=$!
for _ in $(seq 1 100); do [ -S "$HOSTSOCK" ] && break; sleep 0.1; done
# the listener counts: a connection from the host is recorded
python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).connect(sys.argv[1])' "$HOSTSOCK"
for _ in $(seq 1 100); do [ -s "$HITS" ] && break; sleep 0.1; done
assert_eq 1 "$(wc -l <"$HITS")" "the host socket's own check"
: >"$HITS"
# The sandbox's root reaches the socket, but the agent takes only cellad's connections (a
# peer outside its pid namespace): a tenant's would replace cellad's.
out=$(run_in "$A" "python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.settimeout(20); s.connect(\"/run/.cella/agent.sock\"); print(\"read\", len(s.recv(4096)))'")
assert_eq "read 0" "$out" "a tenant's connection to the agent (closed before any frame)"
assert_eq still "$(run_in "$A" 'echo still')" "cellad's connection after the tenant's try"
run_in "$A" "rm -f /run/.cella/agent.sock && ln -s $HOSTSOCK /run/.cella/agent.sock && echo" >/dev/null
run_in "$B" "rm -f /run/.cella/agent.sock && ln -s /proc/1/root/../../..$HOSTSOCK /run/.cella/agent.sock && echo" >/dev/null
assert_eq "$HOSTSOCK" "$(run_in "$A" 'readlink /run/.cella/agent.sock')" "A's planted symlink"
info "cellad killed and started again: it connects to both agents afresh"
kill -KILL "$CELLAD_PID"
wait "$CELLAD_PID" 2>/dev/null || true
CELLAD_PID=
cp "$CELLAD_LOG" "$IT_TMP/cellad.log.before-restart"
start_cellad --pool 0 --disk-limit-override 2G
# Neither reattached (their agents are unreachable): both were stopped, and start again
# from their files on their next use, with a fresh /run.
for x in "$A" "$B"; do
        sx "$x" 'echo back; readlink /run/.cella/agent.sock || echo no-link' 60000
        expect_status 200
        assert_eq "back no-link" "$(body .stdout | xargs)" "$x after the restart"
done
for x in "$A" "$B"; do
        assert_contains "$(cat "$CELLAD_LOG")" "sandbox '$x' not reattached: the sandbox's agent socket" \
                "$x's broken agent path, said"
done
sleep 1 # a late connection would be recorded by now
assert_eq 0 "$(wc -l <"$HITS")" "connections cellad made to the host socket"
info "hostile-tenant: ok"
