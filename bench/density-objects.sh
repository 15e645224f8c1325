#!/bin/bash
# What each kernel object a sandbox is made of costs the host (docs/decisions/0060): C
# (1000) of one kind made alone and held, then the host's MemAvailable, Slab, SUnreclaim
# and the slab caches that grew, each divided by C; then they are removed before the next
# kind. The kinds: a process (`sleep`, the baseline of the kinds that need one to hold
# them), a network namespace (held by a descriptor, its loopback up), a user namespace
# (with a process), a mount namespace with an overlay of the default image (with a
# process), a loop device with the ext4 of a sandbox's disk (cellad's mkfs options,
# runtime/disk.c) mounted, a veth pair, a memory cgroup (v1). Needs root; prints a
# Markdown table. Usage: bench/density-objects.sh (env: C (1000), IMAGE (the default
# image's rootfs), KINDS (a subset, space separated)).
set -euo pipefail
C=${C:-1000}
IMAGE=${IMAGE:-/var/lib/cella/images/default/rootfs}
KINDS=${KINDS:-process netns userns mntns-overlay loop-ext4 veth cgroup}
tmp=$(mktemp -d /tmp/cella-objects.XXXXXX)
pids=()
cleanup() {
        local rc=$? p
        for p in "${pids[@]}" ${holder:-}; do kill -KILL "$p" 2>/dev/null || true; done
        wait 2>/dev/null || true
        for m in $(grep -o " $tmp/[^ ]*" /proc/self/mountinfo | sort -r || true); do umount "$m" 2>/dev/null || true; done
        losetup -a 2>/dev/null | grep "$tmp/" | cut -d: -f1 | xargs -r -n1 losetup -d 2>/dev/null || true
        ip -o link show 2>/dev/null | grep -o ' dob[0-9]*a@' | tr -d ' @' | xargs -r -n1 ip link del 2>/dev/null || true
        rmdir /sys/fs/cgroup/memory/cella-objects/* /sys/fs/cgroup/memory/cella-objects 2>/dev/null || true
        rm -rf "$tmp"
        exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

meminfo() { awk -v k="$1:" '$1 == k {printf "%.0f\n", $2 * 1024}' /proc/meminfo; }
slabs() { awk 'NR > 2 {print $1, $3 * $4}' /proc/slabinfo | sort; }
snap() { # FILE
        echo "$(meminfo MemAvailable) $(meminfo Slab) $(meminfo SUnreclaim) $(meminfo KernelStack) $(meminfo PageTables)" >"$1"
        slabs >"$1.slab"
}
kib() { awk -v b="$1" -v n="$C" 'BEGIN {printf "%.1f", b / n / 1024}'; }

make_process() { for _ in $(seq 1 "$C"); do sleep infinity & pids+=($!); done; }
make_userns() { for _ in $(seq 1 "$C"); do unshare -U sleep infinity & pids+=($!); done; }
make_mntns_overlay() {
        local i
        for i in $(seq 1 "$C"); do
                mkdir -p "$tmp/o$i/up" "$tmp/o$i/work" "$tmp/o$i/root"
                unshare -m --propagation private sh -c \
                        'mount -t overlay overlay -o "lowerdir=$1,upperdir=$2/up,workdir=$2/work" "$2/root" && exec sleep infinity' \
                        _ "$IMAGE" "$tmp/o$i" &
                pids+=($!)
        done
}
make_netns() {
        # one process holds them all by descriptor (python: unshare, then open the ns)
        python3 -c '
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
fds = []
for i in range(int(sys.argv[1])):
    if libc.unshare(0x40000000) != 0:
        raise OSError(ctypes.get_errno(), "unshare")
    os.system("ip link set lo up")
    fds.append(os.open("/proc/thread-self/ns/net", os.O_RDONLY))
print("ready", flush=True)
time.sleep(1e9)' "$C" >"$tmp/netns.out" &
        holder=$!
        for _ in $(seq 1 600); do grep -q ready "$tmp/netns.out" 2>/dev/null && return; sleep 0.5; done
        echo "netns holder not ready" >&2
        exit 1
}
make_loop_ext4() {
        local i dev
        for i in $(seq 1 "$C"); do
                truncate -s 8G "$tmp/d$i.img"
                mkfs.ext4 -q -F -b 4096 -I 256 -m 0 -N 524288 -O ^resize_inode -J size=4 \
                        -E lazy_itable_init=1,lazy_journal_init=1,nodiscard,root_owner=0:0 -- "$tmp/d$i.img"
                dev=$(losetup --find --show --direct-io=on "$tmp/d$i.img")
                mkdir -p "$tmp/m$i"
                mount -t ext4 "$dev" "$tmp/m$i"
        done
}
make_veth() {
        local i
        for i in $(seq 1 "$C"); do echo "link add dob${i}a type veth peer name dob${i}b"; done >"$tmp/veth.batch"
        ip -batch "$tmp/veth.batch"
}
make_cgroup() {
        local i
        mkdir -p /sys/fs/cgroup/memory/cella-objects
        for i in $(seq 1 "$C"); do mkdir /sys/fs/cgroup/memory/cella-objects/c$i; done
}
remove_all() {
        local p
        for p in "${pids[@]}" ${holder:-}; do kill -KILL "$p" 2>/dev/null || true; done
        wait 2>/dev/null || true
        pids=() holder=
        for m in $(grep -o " $tmp/[^ ]*" /proc/self/mountinfo | sort -r || true); do umount "$m"; done
        { losetup -a 2>/dev/null | grep "$tmp/" || true; } | cut -d: -f1 | xargs -r -n1 losetup -d
        { ip -o link show 2>/dev/null | grep -o ' dob[0-9]*a@' || true; } | tr -d ' @' | xargs -r -n1 ip link del
        rmdir /sys/fs/cgroup/memory/cella-objects/c* /sys/fs/cgroup/memory/cella-objects 2>/dev/null || true
        rm -rf "${tmp:?}"/*
}

echo "| $C of (alone) | MemAvailable drop | Slab | SUnreclaim | kernel stacks; page tables | slab caches that grew most |"
echo "|---|---|---|---|---|---|"
for k in $KINDS; do
        sleep 3
        snap "$tmp/.before"
        "make_${k//-/_}"
        sleep 3
        snap "$tmp/.after"
        read -r a0 s0 u0 k0 p0 <"$tmp/.before"
        read -r a1 s1 u1 k1 p1 <"$tmp/.after"
        top=$(join "$tmp/.before.slab" "$tmp/.after.slab" |
                awk -v n="$C" '{d = ($3 - $2) / n / 1024; if (d >= 0.5) printf "%s %.1f\n", $1, d}' |
                sort -k2 -rn | head -n 5 | awk '{printf "%s%s %s", (NR > 1 ? ", " : ""), $1, $2}')
        echo "| $k | $(kib $((a0 - a1))) KiB | $(kib $((s1 - s0))) KiB | $(kib $((u1 - u0))) KiB |" \
                "$(kib $((k1 - k0))); $(kib $((p1 - p0))) KiB | $top |"
        remove_all
done
