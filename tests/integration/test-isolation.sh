#!/bin/bash
# Isolation: PID 1, user namespace mapping, host files, network, mounts, nested
# namespaces, seccomp, capabilities, and one sandbox against another.
. "$(dirname "$0")/lib.sh"
start_cellad

A=$(sbx a)
B=$(sbx b)

info "PID 1 is cella-init, host processes invisible"
out=$(run_in "$A" 'tr "\0" " " </proc/1/cmdline; echo; ps -eo pid=,comm= | wc -l; ps -eo comm=')
assert_contains "$(echo "$out" | head -n 1)" cella-init "PID 1 cmdline"
# Its name too (it runs from /run/.cella/cella-init; never from a memfd, whose name would
# be "memfd:cella-ini").
assert_eq cella-init "$(run_in "$A" 'cat /proc/1/comm')" "/proc/1/comm"
assert_eq "cella-init cella-init" "$(run_in "$A" 'ps -p 1 -o comm=,args=' | tr -s ' ')" \
        "ps -p 1 -o comm=,args="
assert_not_contains "$(run_in "$A" 'ps -eo comm=,args=')" "memfd:" "ps names a memfd"
info "the agent's executable: a read-only bind of cellad's copy the tenant cannot replace"
assert_eq "700 0" "$(run_in "$A" 'stat -c "%a %u" /run/.cella')" "the agent's dir"
for cmd in 'cp /bin/true /run/.cella/cella-init' 'echo x >>/run/.cella/cella-init' \
        'rm -f /run/.cella/cella-init' 'mv /run/.cella/cella-init /run/.cella/x' \
        'umount /run/.cella/cella-init' 'umount -l /run/.cella/cella-init' \
        'mount -t tmpfs none /run/.cella' 'chmod u+w /run/.cella/cella-init'; do
        sx "$A" "$cmd"
        expect_status 200
        assert_ne 0 "$(exit_code)" "the tenant's [$cmd] succeeded"
done
# Still the agent's binary, read-only, the same bytes as the build's.
assert_eq "$(sha256sum <"$CELLA_BUILD/cella-init" | cut -d' ' -f1)" \
        "$(run_in "$A" 'sha256sum </run/.cella/cella-init' | cut -d' ' -f1)" "the agent's bytes"
assert_contains "$(run_in "$A" "awk '\$5 == \"/run/.cella/cella-init\" {print \$4, \$6}' /proc/self/mountinfo")" \
        "/cella-init ro," "the agent's bind mount"
# Inside: cella-init, the shell, ps (and maybe wc); never the host's daemons.
nproc_inside=$(echo "$out" | sed -n 2p)
[ "$nproc_inside" -le 5 ] || fail "sandbox sees $nproc_inside processes: $out"
assert_not_contains "$out" cellad "host cellad visible"
assert_not_contains "$out" systemd "host systemd visible"
# The host's own PID 1 and this test's shell pid are not in the sandbox's /proc.
assert_eq 1 "$(run_in "$A" "test -e /proc/$$ && echo 1; ls /proc | grep -c '^[0-9]' | awk '{print (\$1 < 8)}'")" \
        "host pid visible or too many pids"

info "root inside is an unprivileged uid outside"
map=$(run_in "$A" 'cat /proc/self/uid_map')
read -r inside outside count <<<"$map"
assert_eq 0 "$inside" "uid_map inside start"
[ "$outside" -ge "$SANDBOX_UID_MIN" ] || fail "uid 0 maps to host uid $outside"
[ "$count" -le 65536 ] || fail "uid map too wide: $map"
# ... in the block of host uids this daemon claimed (test-two-daemons.sh: blocks differ)
[ "$outside" -ge "$IT_UID_FIRST" ] && [ $((outside + count - 1)) -le "$IT_UID_LAST" ] ||
        fail "uid map $map outside the daemon's block $IT_UID_FIRST-$IT_UID_LAST"
assert_eq 1 "$(echo "$map" | wc -l)" "one uid_map line"
gmap=$(run_in "$A" 'cat /proc/self/gid_map')
read -r ginside goutside gcount <<<"$gmap"
[ "$goutside" -ge "$SANDBOX_UID_MIN" ] || fail "gid 0 maps to host gid $goutside"
# On the host, every process of the sandbox runs with a uid of that range.
pids=$(sandbox_pids "$A")
[ -n "$pids" ] || fail "no host process found in the cgroup of $A"
for p in $pids; do
        u=$(awk '/^Uid:/ {print $2}' "/proc/$p/status" 2>/dev/null) || continue
        [ -z "$u" ] && continue
        [ "$u" -ge "$outside" ] && [ "$u" -lt $((outside + count)) ] ||
                fail "sandbox process $p runs as host uid $u (range $outside+$count)"
done
# Sandboxes get disjoint ranges.
map_b=$(run_in "$B" 'cat /proc/self/uid_map')
read -r _ outside_b _ <<<"$map_b"
assert_ne "$outside" "$outside_b" "A and B share a uid range"

info "host files invisible"
src=$(cd "$(dirname "$0")/../.." && pwd)
printf 'host-secret-%s\n' "$IT_RUN" >"$IT_TMP/host-secret"
for p in "$src" "$src/CMakeLists.txt" /work /var/lib/cella "$IT_TMP" "$IT_TMP/host-secret" \
        "$CELLA_BUILD/cellad" "$IT_TMP/data"; do
        sx "$A" "cat '$p' 2>/dev/null || ls -A '$p' 2>/dev/null | head -n 3"
        expect_status 200
        assert_eq "" "$(body .stdout)" "host path $p visible in the sandbox"
done
# /root exists in the image: it must be the image's, not the host's.
assert_eq "$(ls -A "$CELLA_IMAGES/default/rootfs/root" | sort | tr '\n' ' ')" \
        "$(run_in "$A" 'ls -A /root | sort | tr "\n" " "')" "/root is not the image's"
out=$(run_in "$A" "grep -rl 'host-secret-$IT_RUN' / --exclude-dir=proc --exclude-dir=sys --exclude-dir=sessions 2>/dev/null | head -n 3; true")
assert_eq "" "$out" "host file content found inside"

info "the mount tables show nothing of the host's file layout"
# Overlay layers given by descriptor are shown by their path: from a detached tree they
# read "/upper", not the data dir; a loop device's backing file (a sandbox's disk image)
# is hidden with the rest of /sys/devices/virtual/block.
slot_a=$(sandbox_slot "$A")
[ -n "$slot_a" ] || fail "no slot logged for $A"
tables=$(run_in "$A" 'for f in /proc/self/mountinfo /proc/mounts /proc/self/mountstats \
        /proc/1/mountinfo /proc/1/mounts; do echo "== $f"; cat "$f"; done;
        echo "== backing files"; cat /sys/block/*/loop/backing_file \
        /sys/class/block/*/loop/backing_file /sys/devices/virtual/block/*/loop/backing_file \
        2>/dev/null; true')
assert_contains "$tables" "== /proc/self/mountstats" "mount tables read"
assert_contains "$tables" " / " "the root in the mount tables"
for p in "$IT_TMP" "$CELLA_IMAGES" "$(readlink -f "$CELLA_IMAGES")" /var/lib/cella /tmp/cella-it \
        "$IT_CGPARENT" "$IT_CGPARENT/s$slot_a" "/s$slot_a/" "sandboxes/" "disk.img" upperdir=/tmp \
        lowerdir=/var; do
        assert_not_contains "$tables" "$p" "host path in the sandbox's mount tables"
done
# Every mount's root (field 4) within its filesystem: nothing but what the sandbox has.
roots=$(run_in "$A" "awk '{print \$4}' /proc/self/mountinfo | sort -u | tr '\n' ' '")
for r in $roots; do
        case "$r" in
        / | /null | /zero | /full | /random | /urandom | /tty | /sys | /irq | /bus | /sysrq-trigger) ;;
        /cella-init) ;; # the agent's executable, bound from cellad's private tmpfs
        # the block devices' mask: a removed directory of the sandbox's own /dev tmpfs
        "/.cella-empty//deleted") ;;
        *) fail "a mount's root reveals [$r]: $roots" ;;
        esac
done
info "the block devices' mask: empty, read-only, its directory reachable by no path"
assert_eq "" "$(run_in "$A" 'ls -A /sys/devices/virtual/block')" "the mask is empty"
for try in 'mkdir /sys/devices/virtual/block/x' 'touch /sys/devices/virtual/block/y' \
        'mount -o remount,rw /sys/devices/virtual/block' 'umount /sys/devices/virtual/block' \
        'umount -l /sys/devices/virtual/block' 'ls -d /dev/.cella-empty'; do
        sx "$A" "$try"
        expect_status 200
        assert_ne 0 "$(exit_code)" "$try"
done
assert_eq "" "$(run_in "$A" 'ls -A /sys/devices/virtual/block')" "the mask is still empty"
# /dev/shm is a directory of /dev's tmpfs, /tmp one of the sandbox's own files
assert_eq "1777 $(run_in "$A" 'stat -c %d /dev')" "$(run_in "$A" 'stat -c "%a %d" /dev/shm')" \
        "/dev/shm: 1777, on /dev's filesystem"
assert_eq "1777 $(run_in "$A" 'stat -c %d /')" "$(run_in "$A" 'stat -c "%a %d" /tmp')" \
        "/tmp: 1777, on the writable layer"
# The same for a sandbox without a disk image (its layers in the data dir itself) is in
# test-disk.sh.

info "network none: only lo (outbound: test-network.sh)"
NONE=$(sbx none)
api_json PUT "/v1/sandboxes/$NONE" '{"network":"none"}' >/dev/null
expect_status 201
assert_eq "lo" "$(run_in "$NONE" 'ls /sys/class/net')" "network interfaces"
assert_eq "lo" "$(run_in "$NONE" "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '")" "/proc/net/dev"
sx "$NONE" 'curl -sS -m 5 http://1.1.1.1/ >/dev/null 2>&1'
expect_status 200
assert_ne 0 "$(exit_code)" "outside network reachable"
# The daemon's loopback port is not reachable from inside (own network namespace).
port=${CELLA_URL##*:}
sx "$A" "curl -sS -m 5 http://127.0.0.1:$port/v1/health"
expect_status 200
assert_ne 0 "$(exit_code)" "cellad reachable from inside"

info "mount, unshare, chroot escapes refused"
sx "$A" 'mount -t tmpfs none /mnt'
assert_ne 0 "$(exit_code)" "mount tmpfs succeeded"
sx "$A" 'unshare -U true'
assert_ne 0 "$(exit_code)" "unshare -U succeeded"
sx "$A" 'unshare -m true'
assert_ne 0 "$(exit_code)" "unshare -m succeeded"
sx "$A" 'mknod /tmp/sda b 8 0'
assert_ne 0 "$(exit_code)" "mknod block device succeeded"
sx "$A" 'echo 1 > /proc/sys/kernel/sysrq'
assert_ne 0 "$(exit_code)" "write to /proc/sys succeeded"

info "seccomp refuses keyctl, bpf, add_key, unshare, ptrace of pid 1"
cat >"$IT_TMP/sc.py" <<'EOF'
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
# x86_64 numbers; aarch64 numbers in the second column.
import platform
nr = {"keyctl": (250, 219), "bpf": (321, 280), "add_key": (248, 217),
      "kexec_load": (246, 104), "open_by_handle_at": (304, 265),
      "init_module": (175, 105)}
col = 0 if platform.machine() == "x86_64" else 1
out = []
for name, n in sorted(nr.items()):
    r = libc.syscall(n[col], 0, 0, 0, 0, 0)
    e = ctypes.get_errno()
    out.append("%s=%d/%d" % (name, r, e))
print(" ".join(out))
EOF
api PUT "/v1/sandboxes/$A/files?path=/tmp/sc.py" --data-binary @"$IT_TMP/sc.py" >/dev/null
expect_status 200
out=$(run_in "$A" 'python3 /tmp/sc.py')
for name in add_key bpf init_module kexec_load keyctl open_by_handle_at; do
        v=$(echo "$out" | tr ' ' '\n' | grep "^$name=")
        case "$v" in
        "$name=-1/1" | "$name=-1/38") ;; # EPERM or ENOSYS
        *) fail "seccomp: $v (expected -1/EPERM or -1/ENOSYS): $out" ;;
        esac
done

info "capabilities reduced"
caps=$(run_in "$A" 'grep ^Cap /proc/self/status')
eff=$(echo "$caps" | awk '/^CapEff/ {print $2}')
bnd=$(echo "$caps" | awk '/^CapBnd/ {print $2}')
# CAP_SYS_ADMIN (21), CAP_SYS_MODULE (16), CAP_SYS_PTRACE (19), CAP_SYS_RAWIO (17),
# CAP_MAC_ADMIN (33), CAP_SYS_BOOT (22), CAP_NET_ADMIN (12), CAP_BPF (39) are gone.
for bit in 12 16 17 19 21 22 33 39; do
        for set in "$eff" "$bnd"; do
                [ $((0x$set >> bit & 1)) -eq 0 ] || fail "capability bit $bit present: $caps"
        done
done
# no_new_privs is set
assert_contains "$(run_in "$A" 'grep NoNewPrivs /proc/self/status')" "1" "NoNewPrivs"

info "one sandbox cannot see another's files or processes"
secret="secret-$IT_RUN-$RANDOM$RANDOM"
run_in "$A" "mkdir -p /workspace/s && echo $secret > /workspace/s/file-$IT_RUN && echo $secret > /tmp/t && \
        (sleep 300 >/dev/null 2>&1 &) ; echo ok" >/dev/null
# (sessions/ holds the sandbox's own session scripts, this very command among them)
out=$(run_in "$B" "grep -rl '$secret' / --exclude-dir=proc --exclude-dir=sys --exclude-dir=sessions 2>/dev/null | head; \
        find / -xdev -name 'file-$IT_RUN' 2>/dev/null | head; true")
assert_eq "" "$out" "B found A's secret"
out=$(run_in "$B" 'ps -eo args=')
assert_not_contains "$out" "sleep 300" "B sees A's processes"
# A's sleep is there (so the check above was meaningful)
assert_contains "$(run_in "$A" 'ps -eo args=')" "sleep 300" "A's background sleep"
# and A still has its file
assert_eq "$secret" "$(run_in "$A" "cat /workspace/s/file-$IT_RUN")" "A's file"

info "hostname is the sandbox name"
assert_eq "$A" "$(run_in "$A" 'hostname')" "hostname"
