#!/bin/bash
# The warm pool (--pool N): new names are claims of sandboxes built ahead, named at claim
# (hostname, /etc/hostname, /etc/hosts), isolated from each other; the pool refills; a
# SIGKILLed daemon leaves nothing behind its successor cannot remove; --pool 0 and
# --max-sandboxes behave as before.
. "$(dirname "$0")/lib.sh"

TICKS=$(getconf CLK_TCK)

# uptime_ticks: clock ticks since boot now (the clock of /proc/PID/stat's start time).
uptime_ticks() {
        awk -v hz="$TICKS" '{printf "%d\n", $1 * hz}' /proc/uptime
}

# pid1_start NAME: start time (ticks since boot) of the sandbox's PID 1, seen inside it.
pid1_start() {
        run_in "$1" "sed 's/.*) //' /proc/1/stat | cut -d' ' -f20"
}

health() { # health FIELD
        api GET /v1/health | jq -r "$1"
}

start_cellad --pool 2
wait_pool_ready 2
assert_eq 2 "$(health .pool.size)" "pool size"
assert_eq 0 "$(health .pool.claims)" "no claim yet"

# ---- a new name is a claim: its PID 1 predates the request ----
A=$(sbx a)
before=$(uptime_ticks)
before_iso=$(date -u +%Y-%m-%dT%H:%M:%S)
sleep 0.05
started=$(pid1_start "$A")
# The pool was full before $before was read and the request comes 5 ticks later, so a
# sandbox built for the request would have started after $before.
[ "$started" -le "$before" ] ||
        fail "sandbox $A was built for the request (PID 1 started at $started, request at $before)"
assert_eq 1 "$(health .pool.claims)" "one claim"
assert_contains "$(cat "$CELLAD_LOG")" "sandbox '$A' claimed from the pool" "claim logged"

# ---- named at claim ----
assert_eq "$A" "$(run_in "$A" 'hostname')" "hostname"
assert_eq "$A" "$(run_in "$A" 'cat /proc/sys/kernel/hostname')" "kernel hostname"
assert_eq "$A" "$(run_in "$A" 'printf %s "$HOSTNAME"')" "HOSTNAME of a command"
assert_eq "$A" "$(run_in "$A" 'cat /etc/hostname')" "/etc/hostname"
assert_contains "$(run_in "$A" 'cat /etc/hosts')" "127.0.0.1 localhost $A" "/etc/hosts"
assert_not_contains "$(run_in "$A" 'cat /etc/hosts /etc/hostname')" "pool-" "no pool name left"
api GET "/v1/sandboxes/$A" >/dev/null
expect_status 200
assert_eq running "$(body .state)" "state"
created=$(body .createdAt)
[[ "$created" > "$before_iso" ]] || fail "createdAt $created is not the claim time (after $before_iso)"

# ---- pool sandboxes are not listed and not counted ----
api GET /v1/sandboxes >/dev/null
assert_eq "$A" "$(body '[.sandboxes[].id] | join(",")')" "only the user sandbox is listed"
assert_eq 1 "$(health .sandboxes)" "health counts user sandboxes"

# ---- the pool refills ----
wait_pool_ready 2
assert_eq 3 "$(health .pool.builds)" "one build after the claim"

# ---- env and labels given with the name are applied at claim ----
# A pool sandbox's default session starts with the image's env; a claim sets the variables
# it is given over it (one of the image's own too, when it has any) and keeps the others.
img_var=$(jq -r '(.env // [])[0] // "" | split("=")[0]' "$CELLA_IMAGES/default/image.json")
img_val=$(jq -r '(.env // [])[0] // "" | split("=")[1:] | join("=")' \
        "$CELLA_IMAGES/default/image.json")
B=$(sbx b)
if [ -n "$img_var" ]; then
        assert_eq "$img_val" "$(run_in "$A" "printf %s \"\$$img_var\"")" "the image's env at claim"
        api_json PUT "/v1/sandboxes/$B" \
                "{\"env\":{\"STAGE\":\"claimed\",\"$img_var\":\"given-$img_val\"},\"labels\":{\"team\":\"pool\"}}"
else
        api_json PUT "/v1/sandboxes/$B" '{"env":{"STAGE":"claimed"},"labels":{"team":"pool"}}'
fi
expect_status 201
assert_eq pool "$(body .labels.team)" "labels"
assert_eq 2 "$(health .pool.claims)" "PUT with env and labels is a claim"
assert_eq claimed "$(run_in "$B" 'printf %s "$STAGE"')" "env"
[ -z "$img_var" ] ||
        assert_eq "given-$img_val" "$(run_in "$B" "printf %s \"\$$img_var\"")" \
                "a variable of the image's env given at claim"
assert_eq "$B" "$(run_in "$B" 'hostname')" "hostname of the second claim"

# ---- another instance type is a build ----
L=$(sbx lite)
api_json PUT "/v1/sandboxes/$L" '{"instanceType":"lite"}'
expect_status 201
assert_eq 2 "$(health .pool.claims)" "another instance type is not a claim"
assert_contains "$(cat "$CELLAD_LOG")" "sandbox '$L' started" "built"
assert_eq "$L" "$(run_in "$L" 'hostname')" "hostname of a built sandbox"

# ---- two claimed sandboxes are isolated from each other ----
assert_ne "$(sandbox_slot "$A")" "$(sandbox_slot "$B")" "distinct slots"
run_in "$A" 'echo secret-a >/workspace/a.txt; echo t >/tmp/a.tmp; (sleep 300 >/dev/null 2>&1 &); true' >/dev/null
assert_eq "no no" "$(run_in "$B" 'for f in /workspace/a.txt /tmp/a.tmp; do [ -e $f ] && printf yes || printf no; [ $f = /tmp/a.tmp ] || printf " "; done')" \
        "files of A are not in B"
assert_contains "$(run_in "$A" 'cat /proc/[0-9]*/cmdline | tr "\0" " "')" "sleep 300" "A runs sleep"
assert_not_contains "$(run_in "$B" 'cat /proc/[0-9]*/cmdline | tr "\0" " "')" "sleep 300" \
        "B does not see A's processes"
uid_a=$(awk '{print $2}' "/proc/$(sandbox_pids "$A" | head -n 1)/uid_map")
uid_b=$(awk '{print $2}' "/proc/$(sandbox_pids "$B" | head -n 1)/uid_map")
assert_ne "$uid_a" "$uid_b" "distinct host uid ranges"

# ---- destroy of a claimed sandbox leaves nothing ----
slot_b=$(sandbox_slot "$B")
[ -n "$(sandbox_cgroups "$B")" ] || fail "no cgroup found for $B"
api DELETE "/v1/sandboxes/$B" >/dev/null
expect_status 200
left=$(wait_empty sandbox_pids "$B") || fail "processes of $B left: $left"
left=$(wait_empty sandbox_cgroups "$B") || fail "cgroups of $B left: $left"
[ ! -e "$IT_TMP/data/sandboxes/s$slot_b" ] || fail "directory of $B left"

# ---- a second daemon on the same data dir refuses to start (it would sweep the pool) ----
if "$CELLA_BUILD/cellad" --listen 127.0.0.1:0 --data-dir "$IT_TMP/data" --images "$CELLA_IMAGES" \
        >"$IT_TMP/second.log" 2>&1; then
        fail "a second cellad started on the same data dir"
fi
assert_contains "$(cat "$IT_TMP/second.log")" "another cellad uses the data directory" "refused"
assert_eq 2 "$(health .pool.ready)" "the first daemon's pool is intact"
assert_eq "$A" "$(run_in "$A" 'hostname')" "the first daemon's sandbox is intact"

# ---- SIGKILL with pool sandboxes present; the next daemon removes them ----
wait_pool_ready 2
pool_pids=
for d in "$IT_TMP"/data/sandboxes/s*; do
        slot=${d##*/s}
        [ "$slot" = "$(sandbox_slot "$A")" ] || [ "$slot" = "$(sandbox_slot "$L")" ] && continue
        pool_pids="$pool_pids $(grep -ls "/$IT_CGPARENT/s$slot\$" /proc/[0-9]*/cgroup | cut -d/ -f3 | xargs)"
done
[ -n "$(echo $pool_pids)" ] || fail "no pool sandbox processes found"
kill -KILL "$CELLAD_PID"
wait "$CELLAD_PID" 2>/dev/null || true
CELLAD_PID=
info "cellad killed with pool sandboxes running (pids$pool_pids)"
start_cellad --pool 2
for p in $pool_pids; do
        [ ! -e "/proc/$p" ] || [ "$(awk '/^State:/ {print $2}' "/proc/$p/status" 2>/dev/null)" = Z ] ||
                fail "process $p of an earlier pool sandbox survived the restart"
done
assert_contains "$(cat "$CELLAD_LOG")" "removing leftover sandbox" "leftovers removed"
assert_contains "$(cat "$CELLAD_LOG")" "sandbox '$A' reattached" "claimed sandbox reattached"
assert_eq "$A" "$(run_in "$A" 'hostname')" "hostname after restart"
assert_eq secret-a "$(run_in "$A" 'cat /workspace/a.txt')" "files after restart"
wait_pool_ready 2
C=$(sbx c)
assert_eq "$C" "$(run_in "$C" 'hostname')" "claim after restart"
assert_eq 1 "$(health .pool.claims)" "the restarted daemon claims"
# Nothing on disk but the user sandboxes and the pool.
assert_eq 5 "$(ls "$IT_TMP/data/sandboxes" | wc -l)" "directories: A, L, C and a pool of 2"

# ---- a claim that was answered is committed: SIGKILL right after its answer ----
# The claim's record is written with the other claims of its loop turn, and always before
# any answer is queued (decision 0059): the daemon that answered 201 may die at once.
wait_pool_ready 2
K=$(sbx k)
api_json PUT "/v1/sandboxes/$K" '{"labels":{"when":"killed"}}'
expect_status 201
kill -KILL "$CELLAD_PID"
wait "$CELLAD_PID" 2>/dev/null || true
CELLAD_PID=
start_cellad --pool 2
assert_contains "$(cat "$CELLAD_LOG")" "sandbox '$K' reattached" "claim answered just before SIGKILL"
assert_eq "$K" "$(run_in "$K" 'hostname')" "its hostname after the restart"
api GET "/v1/sandboxes/$K" >/dev/null
assert_eq killed "$(body .labels.when)" "its labels after the restart"
api DELETE "/v1/sandboxes/$K" >/dev/null
expect_status 200

# ---- a name shorter than the pool's: its /etc files hold it alone ----
# They are rewritten in place and cut to their length (no O_TRUNC, decision 0059): nothing
# of the longer "pool-N" text is left behind the short one.
wait_pool_ready 2
api_json PUT "/v1/sandboxes/x" '{}'
expect_status 201
assert_eq 1 "$(health .pool.claims)" "a short name is a claim"
assert_eq x "$(run_in x 'cat /etc/hostname')" "/etc/hostname of a short name"
assert_eq "$(printf '127.0.0.1 localhost x\n::1 localhost')" "$(run_in x 'cat /etc/hosts')" \
        "/etc/hosts of a short name"
assert_eq x "$(run_in x 'hostname')" "hostname of a short name"
api DELETE "/v1/sandboxes/x" >/dev/null
expect_status 200

# ---- the first command of an exec on a new name has the name and the env ----
# The claim sends the default session its SETENV before it writes the name, and the command
# after it (decision 0059): the command sees HOSTNAME, the kernel hostname and the /etc
# files of the new name, and the image's env its shell started with.
wait_pool_ready 2
claims=$(health .pool.claims)
F=$(sbx first-command-of-a-longer-name)
names='printf "%s|%s|%s" "$HOSTNAME" "$(hostname)" "$(cat /etc/hostname)"'
assert_eq "$F|$F|$F|$F" "$(run_in "$F" "$names; sed -n '1s/.* /|/p' /etc/hosts | tr -d '\n'")" \
        "the name in the first command of a claim"
assert_eq $((claims + 1)) "$(health .pool.claims)" "an exec on a new name is a claim"
# A name longer than the pool's is written over it, with no cut: nothing else in the files.
assert_eq "$(printf '127.0.0.1 localhost %s\n::1 localhost' "$F")" \
        "$(run_in "$F" 'cat /etc/hosts')" "/etc/hosts of a longer name"
assert_eq "$F" "$(run_in "$F" 'cat /etc/hostname')" "/etc/hostname of a longer name"
if [ -n "$img_var" ]; then
        assert_eq "$img_val" "$(run_in "$F" "printf %s \"\$$img_var\"")" "the image's env"
fi
api DELETE "/v1/sandboxes/$F" >/dev/null
expect_status 200

# ---- a claim whose name step fails: the pool sandbox goes, the name is built ----
# Each pool sandbox's /etc/hostname is removed from the host, so that a claim cannot write
# it (the claim rewrites the file the start made, it creates none): the claim fails after
# its SETENV was sent, the pool sandbox is removed with it, and the request is served by a
# sandbox built for it.
wait_pool_ready 2
claims=$(health .pool.claims)
for p in $(pgrep -P "$CELLAD_PID" -x cella-init); do
        case "$(cat "/proc/$p/root/etc/hostname" 2>/dev/null)" in
        pool-*)
                rm -f "/proc/$p/root/etc/hostname"
                ;;
        esac
done
N=$(sbx name-step-fails)
assert_eq "$N|$N|$N" "$(run_in "$N" "$names")" "the name of a sandbox built after a failed claim"
assert_eq "$claims" "$(health .pool.claims)" "a failed claim is not counted"
assert_contains "$(cat "$CELLAD_LOG")" "sandbox '$N': claim failed" "the failed claim is logged"
assert_contains "$(cat "$CELLAD_LOG")" "sandbox '$N' started" "the name is built"
api DELETE "/v1/sandboxes/$N" >/dev/null
expect_status 200

# ---- --max-sandboxes: pool and user sandboxes stay within it ----
stop_cellad
start_cellad --pool 2 --max-sandboxes 2
wait_pool_ready 2
D=$(sbx d)
E=$(sbx e)
assert_eq d "$(run_in "$D" 'echo d')" "first sandbox"
assert_eq e "$(run_in "$E" 'echo e')" "second sandbox"
sx "$(sbx f)" 'echo f'
expect_status 429 SANDBOX_LIMIT_REACHED
wait_pool_ready 0
api DELETE "/v1/sandboxes/$E" >/dev/null
wait_pool_ready 1

# ---- --pool 0: every new name is a build ----
stop_cellad
start_cellad --pool 0
assert_eq 0 "$(health .pool.size)" "no pool"
G=$(sbx g)
assert_eq "$G" "$(run_in "$G" 'hostname')" "built without a pool"
assert_eq 0 "$(health .pool.claims)" "no claim"
assert_eq 0 "$(health .pool.builds)" "no pool build"
assert_contains "$(cat "$CELLAD_LOG")" "sandbox '$G' started" "built"
info "pool: ok"
