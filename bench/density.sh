#!/bin/bash
# Density benchmark (docs/decisions/0060): one cellad (its own data dir, --pool 0,
# --max-sandboxes N, a network range with a /30 for each of them) holds N idle sandboxes
# with their default session (keepAlive, so none sleeps while the others are made). It
# records:
#   * each create's latency (PUT to its 201) and later each destroy's (DELETE to its 204)
#     by position: p50/p95 per tenth of N (per 1,000 at N=10000);
#   * host memory per sandbox: MemAvailable before and after, divided by N; the sandboxes'
#     cgroup memory (v1 memory.usage_in_bytes of the daemon's parent) and the kernel's
#     slab growth (Slab, SUnreclaim of /proc/meminfo) per sandbox;
#   * cellad's RSS and descriptor count with N sandboxes;
#   * the event loop's latency with N sandboxes: GET /v1/health round trips, p50/p99;
#   * `echo` answered by every sandbox (an exec each), p50/p99;
# then destroys them all and checks that nothing is left: no cgroup below the daemon's
# parent, no mount and no loop device of its data dir, no host veth of its prefix, no nft
# element of its table. Everything made is removed at exit, on failure too.
# Usage: bench/density.sh (env: BUILD, IMAGES, N (10000), P (parallel requests, 4),
# NETWORK ("none", the default sandbox's, or "outbound": a veth each), RANGE (a range with
# N /30s: 10.214.0.0/16 holds 16384), KEEP (a dir for the raw samples), WRITE (1: the figures into docs/performance.md;
# default 1 when N=10000)). Needs root. Raises kernel.pid_max to 5 N + 8192 for the run
# when it is lower, and puts it back at exit.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$src/build}
IMAGES=${IMAGES:-/var/lib/cella/images}
N=${N:-10000}
P=${P:-4}
NETWORK=${NETWORK:-none}
RANGE=${RANGE:-10.214.0.0/16}
WRITE=${WRITE:-$([ "$N" = 10000 ] && echo 1 || echo 0)}
cmake --build "$BUILD" --target cellad cella-init >/dev/null

tmp=$(mktemp -d /tmp/cella-density.XXXXXX)
cellad_pid=
url=
cgparent=
ifprefix=
pid_max0=
cleanup() {
        local rc=$?
        if [ -n "$cellad_pid" ] && kill -0 "$cellad_pid" 2>/dev/null; then
                # whatever is still there (a failed run): destroyed P at a time
                curl -sS "$url/v1/sandboxes" 2>/dev/null | jq -r '.sandboxes[].id' 2>/dev/null |
                        xargs -r -P "$P" -I{} curl -sS -o /dev/null -X DELETE "$url/v1/sandboxes/{}" ||
                        true
                kill -TERM "$cellad_pid" 2>/dev/null || true
                wait "$cellad_pid" 2>/dev/null || true
        fi
        rm -rf "$tmp"
        # kernel.pid_max as it was before the run
        if [ -n "$pid_max0" ]; then echo "$pid_max0" >/proc/sys/kernel/pid_max || true; fi
        exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# kernel.pid_max for the run only (put back at exit): N idle sandboxes with their default
# session take 4 tasks each (cella-init, its shell, its disk's jbd2 thread and loop worker),
# a command a fifth, beside the host's own
pid_need=$((5 * N + 8192))
if [ "$(cat /proc/sys/kernel/pid_max)" -lt "$pid_need" ]; then
        pid_max0=$(cat /proc/sys/kernel/pid_max)
        echo "$pid_need" >/proc/sys/kernel/pid_max
        echo "kernel.pid_max $pid_max0 -> $pid_need for this run" >&2
fi

meminfo() { awk -v k="$1:" '$1 == k {printf "%.0f\n", $2 * 1024}' /proc/meminfo; }
# pct P: the P-th percentile of the numbers on stdin
pct() { sort -n | awk -v p="$1" '{a[NR]=$1} END {i=int(NR*p/100+0.999); if (i<1) i=1; print a[i]}'; }
# by_position FILE: "| from-to | p50 | p95 |" per tenth of FILE's "index ms" lines
by_position() {
        local step=$(((N + 9) / 10)) from to slice=$1.slice
        for ((from = 1; from <= N; from += step)); do
                to=$((from + step - 1))
                [ "$to" -gt "$N" ] && to=$N
                awk -v a="$from" -v b="$to" '$1 >= a && $1 <= b {print $2}' "$1" >"$slice"
                echo "| $from–$to | $(pct 50 <"$slice") | $(pct 95 <"$slice") |"
        done
}
name() { printf 'dn%05d' "$1"; }

load=$(cut -d' ' -f1 /proc/loadavg)
avail0=$(meminfo MemAvailable) slab0=$(meminfo Slab) sunrec0=$(meminfo SUnreclaim)
stack0=$(meminfo KernelStack) pt0=$(meminfo PageTables)
slabs() { awk 'NR > 2 {print $1, $3 * $4}' /proc/slabinfo | sort; }
slabs >"$tmp/slab0"
"$BUILD/cellad" --listen 127.0.0.1:0 --data-dir "$tmp/data" --images "$IMAGES" --pool 0 \
        --max-sandboxes "$N" --network-range "$RANGE" --log-level info >"$tmp/log" 2>&1 &
cellad_pid=$!
for _ in $(seq 1 300); do
        url=$(grep -o 'http://127\.0\.0\.1:[0-9]*' "$tmp/log" | head -n 1) || true
        [ -n "$url" ] && break
        kill -0 "$cellad_pid" 2>/dev/null || break
        sleep 0.1
done
[ -n "$url" ] || { cat "$tmp/log" >&2; exit 1; }
cgparent=$(grep -o "sandbox cgroups under '[^']*'" "$tmp/log" | tail -n 1 | cut -d"'" -f2)
ifprefix=$(grep -o 'interfaces cn[0-9a-f]*\*' "$tmp/log" | tail -n 1 | sed 's/interfaces //; s/\*//') || true
rss0=$(awk '/^VmRSS:/ {print $2}' "/proc/$cellad_pid/status")

# KEEP=DIR: the raw samples are copied there as each phase ends (a long run that fails
# late still leaves them)
keep() { [ -z "${KEEP:-}" ] || { mkdir -p "$KEEP" && cp "$@" "$KEEP/"; }; }

# one request per line of stdin ("index"), P at a time: "index ms code" lines on stdout;
# with STOP (a file), none once it exists (the memory guard stops the creates only)
timed() { # METHOD BODY [STOP]
        xargs -P "$P" -I{} sh -c 'i={}; n=$(printf "dn%05d" "$i"); [ -n "$5" ] && [ -e "$5" ] && exit 0;
                curl -sS -o /dev/null -w "$i %{time_total} %{http_code}\n" -X "$1" \
                        -H "Content-Type: application/json" ${2:+--data-binary "$2"} \
                        "$3/v1/sandboxes/$n$4"' _ "$1" "$2" "$url" "" "${3:-}" |
                awk '{printf "%d %.2f %s\n", $1, $2 * 1000, $3}'
}

# The memory guard: on a host shared with other work the creates stop when MemAvailable
# falls below MIN_AVAIL_MIB (3072) plus 0.6 MiB per sandbox made (the shell the echo phase
# starts in each), and the rest of the bench runs on the sandboxes made (the figures then
# say how many of N). The destroys are never stopped.
N_ASKED=$N
(
        while kill -0 "$cellad_pid" 2>/dev/null && [ ! -e "$tmp/creates-done" ]; do
                made=$(find "$tmp/data/sandboxes" -mindepth 1 -maxdepth 1 ! -name '.*' | wc -l)
                if [ "$(meminfo MemAvailable)" -lt $(((${MIN_AVAIL_MIB:-3072} + made * 6 / 10) * 1048576)) ]; then
                        echo "MemAvailable below ${MIN_AVAIL_MIB:-3072} MiB and the shells' 0.6 MiB each: no more creates" >&2
                        touch "$tmp/stop"
                        break
                fi
                sleep 1
        done
) &
echo "creating $N sandboxes ($P at a time, network $NETWORK)" >&2
seq 1 "$N" | timed PUT "{\"keepAlive\":true,\"network\":\"$NETWORK\"}" "$tmp/stop" >"$tmp/create"
touch "$tmp/creates-done"
keep "$tmp/create"
bad=$(awk '$3 != 201' "$tmp/create" | wc -l)
[ "$bad" = 0 ] || { echo "$bad creates failed:" >&2; awk '$3 != 201' "$tmp/create" | head >&2; exit 1; }
# the sandboxes made (all N, or those made before the guard stopped the creates)
awk '{print $1}' "$tmp/create" | sort -n >"$tmp/made"
if [ -e "$tmp/stop" ]; then
        N=$(wc -l <"$tmp/made")
        echo "stopped by the memory guard at $N of $N_ASKED" >&2
fi

# the default sessions have started (an exec in each below); let the memory settle
echo "echo in every sandbox" >&2
# (one write per answer: lines of parallel requests never interleave)
xargs -P "$P" -I{} sh -c 'n=$(printf "dn%05d" {});
        r=$(curl -sS -w " {} %{http_code} %{time_total}" -X POST -H "Content-Type: application/json" \
                --data-binary "{\"command\":\"echo ok-$n\"}" "$1/v1/sandboxes/$n/exec" | tr -d "\n");
        printf "%s\n" "$r"' _ "$url" <"$tmp/made" >"$tmp/echo"
good=$(grep -c '"stdout":"ok-dn[0-9]*\\n"' "$tmp/echo" || true)
if [ "$good" != "$N" ]; then
        echo "only $good of $N sandboxes answered echo" >&2
        grep -v '"stdout":"ok-' "$tmp/echo" | head >&2
        grep -v 'status=20[014]' "$tmp/log" | tail -n 20 >&2
        exit 1
fi
awk '{printf "%.2f\n", $NF * 1000}' "$tmp/echo" >"$tmp/echo.ms"
keep "$tmp/echo.ms"
sleep 5
avail1=$(meminfo MemAvailable) slab1=$(meminfo Slab) sunrec1=$(meminfo SUnreclaim)
stack1=$(meminfo KernelStack) pt1=$(meminfo PageTables)
slabs >"$tmp/slab1"
# the slab caches that grew most, KiB per sandbox
top_slabs=$(join "$tmp/slab0" "$tmp/slab1" | awk -v n="$N" '{printf "%s %.0f\n", $1, ($3 - $2) / n / 1024}' |
        sort -k2 -rn | head -n 6 | awk '{printf "%s%s %s", (NR > 1 ? ", " : ""), $1, $2}')
cgmem=$(cat "/sys/fs/cgroup/memory/$cgparent/memory.usage_in_bytes" 2>/dev/null || echo 0)
rss1=$(awk '/^VmRSS:/ {print $2}' "/proc/$cellad_pid/status")
fds1=$(find "/proc/$cellad_pid/fd" -mindepth 1 -maxdepth 1 | wc -l)
cgroups1=$(find "/sys/fs/cgroup/memory/$cgparent" -mindepth 1 -maxdepth 1 -type d | wc -l)
echo "health round trips" >&2
for _ in $(seq 1 500); do
        curl -sS -o /dev/null -w '%{time_total}\n' "$url/v1/health"
done | awk '{printf "%.3f\n", $1 * 1000}' >"$tmp/health"
echo "avail $avail0 $avail1 slab $slab0 $slab1 sunreclaim $sunrec0 $sunrec1 cgmem $cgmem" \
        "rss $rss0 $rss1 fds $fds1 cgroups $cgroups1" >"$tmp/host"
keep "$tmp/health" "$tmp/host"

echo "destroying $N sandboxes" >&2
timed DELETE "" <"$tmp/made" >"$tmp/destroy"
keep "$tmp/destroy"
bad=$(awk '$3 != 204 && $3 != 200' "$tmp/destroy" | wc -l)
[ "$bad" = 0 ] || { echo "$bad destroys failed" >&2; exit 1; }

# nothing left of them
left=$(curl -sS "$url/v1/sandboxes" | jq '.sandboxes | length')
[ "$left" = 0 ] || { echo "LEFT: $left sandboxes listed" >&2; exit 1; }
for c in /sys/fs/cgroup/*/"$cgparent"; do
        n=$(find "$c" -mindepth 1 -type d 2>/dev/null | wc -l)
        [ "$n" = 0 ] || { echo "LEFT: $n cgroups below $c" >&2; exit 1; }
done
n=$(grep -c " $tmp/" /proc/self/mountinfo || true)
[ "$n" = 0 ] || { echo "LEFT: $n mounts below $tmp" >&2; exit 1; }
# (the disk spare made ahead, decision 0014, stays while cellad runs: disk-templates/)
n=$(losetup -a 2>/dev/null | grep "$tmp/" | grep -vc "$tmp/data/disk-templates/" || true)
[ "$n" = 0 ] || { echo "LEFT: $n loop devices on $tmp" >&2; losetup -a | grep "$tmp/" >&2; exit 1; }
if [ -n "$ifprefix" ]; then
        n=$(ip -o link show 2>/dev/null | grep -c ": $ifprefix[0-9]*@" || true)
        [ "$n" = 0 ] || { echo "LEFT: $n veths $ifprefix*" >&2; exit 1; }
fi
if command -v nft >/dev/null && nft list table inet "$cgparent" >/dev/null 2>&1; then
        n=$(nft -j list table inet "$cgparent" | jq '[.nftables[] | .set? // empty | .elem? // [] | length] | add // 0')
        [ "$n" = 0 ] || { echo "LEFT: $n nft set elements in inet $cgparent" >&2; exit 1; }
fi
echo "nothing left" >&2

mib() { awk -v b="$1" 'BEGIN {printf "%.2f", b / 1048576}'; }
per() { awk -v b="$1" -v n="$N" 'BEGIN {printf "%.2f", b / n / 1048576}'; }
{
        [ "$N" = "$N_ASKED" ] || echo "The run was for $N_ASKED; the memory guard stopped the creates at $N" \
                "(MemAvailable below ${MIN_AVAIL_MIB:-3072} MiB and 0.6 MiB per sandbox made) and the rest ran on those $N."
        echo "Measured $(date -u '+%Y-%m-%d %H:%M UTC') on $(nproc) CPUs (load average $load" \
                "at the start), kernel $(uname -r), $(awk '/^MemTotal:/ {printf "%.0f", $2 / 1048576}' /proc/meminfo) GiB:" \
                "$N sandboxes (network \"$NETWORK\", keepAlive, their default session), $P requests at a time."
        echo
        echo "| with $N sandboxes | figure |"
        echo "|---|---|"
        echo "| host memory per sandbox (MemAvailable before − after, / N) | $(per $((avail0 - avail1))) MiB |"
        echo "| the sandboxes' cgroup memory per sandbox (memory.usage_in_bytes / N) | $(per "$cgmem") MiB |"
        echo "| kernel slab growth per sandbox (Slab; SUnreclaim) | $(per $((slab1 - slab0))) MiB; $(per $((sunrec1 - sunrec0))) MiB |"
        echo "| kernel stacks; page tables per sandbox | $(per $((stack1 - stack0))) MiB; $(per $((pt1 - pt0))) MiB |"
        echo "| slab caches that grew most (KiB per sandbox) | $top_slabs |"
        echo "| cellad RSS (alone; with N) | $(mib $((rss0 * 1024))) MiB; $(mib $((rss1 * 1024))) MiB |"
        echo "| cellad descriptors with N | $fds1 |"
        echo "| sandbox cgroups (memory controller) | $cgroups1 |"
        echo "| GET /v1/health round trip p50 / p99 (500) | $(pct 50 <"$tmp/health") / $(pct 99 <"$tmp/health") ms |"
        echo "| \`echo\` in every sandbox p50 / p99 ($N, all answered) | $(pct 50 <"$tmp/echo.ms") / $(pct 99 <"$tmp/echo.ms") ms |"
        echo
        echo "| sandboxes (by position) | create p50 (ms) | create p95 (ms) | destroy p50 (ms) | destroy p95 (ms) |"
        echo "|---|---|---|---|---|"
        paste -d'|' <(by_position "$tmp/create") <(by_position "$tmp/destroy" | cut -d'|' -f3-) |
                sed 's/||/|/'
        echo
        echo "After the destroys: no sandbox, cgroup, mount, loop device (but the disk spare made" \
                "ahead, decision 0014), veth or nft element left."
} >"$tmp/figures"
cat "$tmp/figures"
if [ "$WRITE" = 1 ]; then
        doc=$src/docs/performance.md
        {
                sed -n "1,/<!-- BEGIN DENSITY FIGURES -->/p" "$doc"
                echo
                cat "$tmp/figures"
                echo
                sed -n "/<!-- END DENSITY FIGURES -->/,\$p" "$doc"
        } >"$tmp/doc"
        cp "$tmp/doc" "$doc"
        echo "updated $doc" >&2
fi
