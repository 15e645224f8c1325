#!/bin/bash
# Density (docs/decisions/0060): DENSITY_N (300) idle sandboxes with their default session
# on one daemon, made four at a time: every one created, every one answers `echo` with its
# own name, cellad holds one descriptor per sandbox and no more (no pidfd), and after they are all
# destroyed nothing of them is left (cgroups, loop devices, descriptors; lib.sh's exit
# checks the rest). --max-sandboxes beyond the most is refused; cellad --check names the
# kernel limits a count needs and chooses several blocks of host uids for it (unit
# runtime-host-claim has the choice of blocks itself).
. "$(dirname "$0")/lib.sh"
N=${DENSITY_N:-300}
P=4

# --max-sandboxes: at most CELLA_UID_SLOTS_MAX (16384)
out=$("$CELLA_BUILD/cellad" --data-dir "$IT_TMP/refused" --max-sandboxes 16385 --check 2>&1) &&
        fail "--max-sandboxes 16385 accepted"
assert_contains "$out" "max-sandboxes" "the refusal names the option"
assert_contains "$out" "1 to 16384" "and what it takes"
[ ! -e "$IT_TMP/refused" ] || fail "a refused --max-sandboxes made a data dir"

# --check: the kernel limits 10,000 sandboxes need, each named with its value, and three
# blocks of 4096 uid slots' host uids in a row; on a host where other daemons hold blocks
# here and there there may be no three free in a row: then it says so
rc=0
out=$("$CELLA_BUILD/cellad" --data-dir "$IT_TMP/check" --max-sandboxes 10000 --check 2>&1) || rc=$?
assert_contains "$out" "kernel limits for --max-sandboxes 10000:"
for k in kernel.pid_max user.max_user_namespaces user.max_net_namespaces \
        net.ipv4.neigh.default.gc_thresh3 "descriptors (RLIMIT_NOFILE)"; do
        assert_contains "$out" "  $k" "--check names $k"
done
assert_contains "$out" "kernel.pid_max = $(sysctl -n kernel.pid_max)" "with its value"
if [ "$rc" = 0 ]; then
        uids=$(echo "$out" | grep -o 'sandbox host uids 0x[0-9a-f]*-0x[0-9a-f]*' | tail -n 1)
        first=$(($(echo "$uids" | sed 's/.*uids \(0x[0-9a-f]*\)-.*/\1/')))
        last=$(($(echo "$uids" | sed 's/.*-\(0x[0-9a-f]*\)$/\1/')))
        assert_eq $((3 * 4096 * 65536)) $((last - first + 1)) "host uids of 10,000: 3 blocks"
else
        assert_contains "$out" "no free block of host uids" "a refused claim says why"
        assert_contains "$out" "give --uid-base"
        info "no three free blocks of host uids in a row on this host now"
fi
rm -rf "$IT_TMP/check"

start_cellad --pool 0
fds() { find "/proc/$CELLAD_PID/fd" -mindepth 1 -maxdepth 1 | wc -l; }
fds0=$(fds)
names=()
for i in $(seq 1 "$N"); do names+=("$(sbx "d$i")"); done

info "creating $N sandboxes, $P at a time"
printf '%s\n' "${names[@]}" | xargs -P "$P" -I{} sh -c \
        'curl -sS -o /dev/null -w "{} %{http_code}\n" -X PUT -H "Content-Type: application/json" \
                --data-binary "{\"keepAlive\":true}" "$1/v1/sandboxes/{}"' _ "$CELLA_URL" \
        >"$IT_TMP/created"
assert_eq "$N" "$(grep -c ' 201$' "$IT_TMP/created")" "every create answered 201"
api GET /v1/sandboxes >/dev/null
assert_eq "$N" "$(body '.sandboxes | length')" "every sandbox listed"
assert_eq "$N" "$(body '[.sandboxes[] | select(.state == "running")] | length')" \
        "every sandbox running"

info "echo in each"
printf '%s\n' "${names[@]}" | xargs -P "$P" -I{} sh -c \
        'r=$(curl -sS -X POST -H "Content-Type: application/json" \
                --data-binary "{\"command\":\"echo hi-\$(hostname)\"}" "$1/v1/sandboxes/{}/exec" |
                jq -r ".exitCode, .stdout" | tr "\n" " "); printf "%s %s\n" {} "$r"' _ "$CELLA_URL" \
        >"$IT_TMP/echoed"
bad=$(awk '$2 != "0" || $3 != "hi-" $1' "$IT_TMP/echoed" | head -n 5)
[ -z "$bad" ] || fail "sandboxes that did not answer echo with their name: $bad"
assert_eq "$N" "$(wc -l <"$IT_TMP/echoed")" "every sandbox answered"

# one descriptor per sandbox (its agent link, whose end watches its PID 1's exit: no
# pidfd is held while it idles), none per request
fds1=$(fds)
[ "$fds1" -le $((fds0 + N + 8)) ] ||
        fail "cellad holds $fds1 descriptors with $N sandboxes ($fds0 before): more than 1 each"
[ "$fds1" -ge $((fds0 + N)) ] || fail "cellad holds $fds1 descriptors: fewer than one per sandbox?"
pidfds=$(find "/proc/$CELLAD_PID/fd" -mindepth 1 -maxdepth 1 -lname 'anon_inode:*pidfd*' | wc -l)
[ "$pidfds" -le 8 ] || fail "cellad holds $pidfds pidfds with $N idle sandboxes"
# their cgroups, each its own
cgs=$(find "/sys/fs/cgroup/memory/$IT_CGPARENT" -mindepth 1 -maxdepth 1 -type d -name 's*' | wc -l)
assert_eq "$N" "$cgs" "a memory cgroup per sandbox"

info "a PID 1 killed from the host: seen by its agent link's end, reaped, stopped; restarted"
K=${names[0]}
P1=
for p in $(sandbox_pids "$K"); do
        grep -qs '^NSpid:.*[[:space:]]1$' "/proc/$p/status" && P1=$p && break
done
[ -n "$P1" ] || fail "no PID 1 of $K"
kill -KILL "$P1"
state() { api GET "/v1/sandboxes/$K" | jq -r .state; }
not_stopped() { [ "$(state)" = stopped ] || echo "$K is $(state)"; }
wait_empty not_stopped >/dev/null || fail "$K is $(state) after its PID 1 was killed"
zombies() { ps -eo ppid=,stat=,pid= | awk -v p="$CELLAD_PID" '$1 == p && $2 ~ /^Z/'; }
left=$(wait_empty zombies) || fail "cellad did not reap the killed PID 1: $left"
[ "$(fds)" -le $((fds1 - 1)) ] || fail "cellad holds $(fds) descriptors ($fds1 before the kill)"
assert_eq "hi-$K" "$(run_in "$K" 'echo hi-$(hostname)')" "the killed one runs again"
[ "$(fds)" -le "$fds1" ] || fail "cellad holds $(fds) descriptors after the restart ($fds1 before)"

info "destroying them"
printf '%s\n' "${names[@]}" | xargs -P "$P" -I{} curl -sS -o /dev/null -w '%{http_code}\n' \
        -X DELETE "$CELLA_URL/v1/sandboxes/{}" >"$IT_TMP/destroyed"
assert_eq "$N" "$(grep -c '^200$' "$IT_TMP/destroyed")" "every destroy answered 200"
api GET /v1/sandboxes >/dev/null
assert_eq 0 "$(body '.sandboxes | length')" "none listed"
below() { find /sys/fs/cgroup/*/"$IT_CGPARENT" -mindepth 1 -type d 2>/dev/null || true; }
wait_empty below >/dev/null || fail "cgroups left: $(below | head -n 5)"
# (but the disk spare made ahead, decision 0014, while the daemon runs)
disks() { run_loops | grep -v "$IT_TMP/data/disk-templates/" || true; }
wait_empty disks >/dev/null || fail "loop devices left: $(disks | head -n 5)"
# (each removed on the thread pool after its DELETE, renamed aside first)
dirs() { find "$IT_TMP/data/sandboxes" -mindepth 1 -maxdepth 1 | head -n 5; }
wait_empty dirs >/dev/null || fail "sandbox directories left: $(dirs)"
fds2=$(fds)
[ "$fds2" -le $((fds0 + 8)) ] || fail "cellad holds $fds2 descriptors after the destroys ($fds0 before)"

# A memory wake's PID 1 is CRIU's restore of it, with its listening socket made again in
# it: its link's other end is PID 1's too, so no pidfd is held after the wake (where this
# host can checkpoint; decision 0060).
api GET /v1/health >/dev/null
if [ "$(body .memorySleep.available)" = true ]; then
        info "after a memory wake the link watches the restored PID 1: no pidfd held"
        W=$(sbx wake)
        api_json PUT "/v1/sandboxes/$W" '{"sleepMode":"memory"}' >/dev/null
        run_in "$W" 'echo up' >/dev/null
        api POST "/v1/sandboxes/$W/sleep" >/dev/null
        expect_status 200
        assert_eq woke "$(run_in "$W" 'echo woke')" "the woken sandbox answers"
        grep -q "sandbox '$W' woke from its memory checkpoint" "$CELLAD_LOG" ||
                fail "$W did not wake from its memory checkpoint"
        pidfds=$(find "/proc/$CELLAD_PID/fd" -mindepth 1 -maxdepth 1 -lname 'anon_inode:*pidfd*' | wc -l)
        assert_eq 0 "$pidfds" "pidfds held by cellad after a memory wake"
        api DELETE "/v1/sandboxes/$W" >/dev/null
fi
info "density: ok ($N sandboxes; cellad descriptors $fds0, $fds1 with them, $fds2 after)"
