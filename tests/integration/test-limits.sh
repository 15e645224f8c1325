#!/bin/bash
# Resource limits: a memory bomb is killed while the daemon and another sandbox keep
# working; a fork bomb stops at the pids limit and the sandbox is still usable and
# destroyable; a classic fork bomb left running in a session is ended by deleting the
# session, and the sandbox answers again, within bounds, round after round.
. "$(dirname "$0")/lib.sh"
start_cellad

BOMB=$(sbx mem)
OTHER=$(sbx other)
FORK=$(sbx fork)

api_json PUT "/v1/sandboxes/$BOMB" '{"instanceType":"lite"}'
expect_status 201
assert_eq lite "$(body .instanceType)" "instance type"
assert_eq hi "$(run_in "$OTHER" 'echo hi')" "other sandbox"

info "the sandbox's PID 1 is in each of its cgroups (v1 ones joined by the start's child)"
ncg=0
pid1=""
for cg in $(sandbox_cgroups "$OTHER"); do
        ncg=$((ncg + 1))
        procs=$(cat "$cg/cgroup.procs")
        [ -n "$procs" ] || fail "no process in $cg"
        # Its PID 1 (the agent): the process whose last NSpid is 1.
        if [ -z "$pid1" ]; then
                for p in $procs; do
                        awk '$1 == "NSpid:" && $NF == 1 {f = 1} END {exit !f}' \
                                "/proc/$p/status" 2>/dev/null && pid1=$p
                done
                [ -n "$pid1" ] || fail "no PID 1 among the processes of $cg"
        fi
        echo "$procs" | grep -qx "$pid1" || fail "PID 1 ($pid1) not in $cg"
done
[ "$ncg" -ge 1 ] || fail "no cgroup found for $OTHER"
if [ -d /sys/fs/cgroup/memory ] && [ ! -f /sys/fs/cgroup/cgroup.controllers ]; then
        [ "$ncg" -ge 4 ] || fail "hybrid host: $ncg cgroup dirs for $OTHER (v2 + memory, pids, cpu expected)"
fi

info "memory bomb (lite: 256 MiB) is killed"
# Allocate and touch 64 MiB at a time, up to 2 GiB: far beyond the limit.
sx "$BOMB" 'python3 -c "
import sys
chunks = []
for i in range(32):
    chunks.append(bytearray(64 << 20))
    for j in range(0, 64 << 20, 4096):
        chunks[-1][j] = 1
print(\"survived\")
"' 120000
expect_status 200
code=$(exit_code)
assert_ne 0 "$code" "memory bomb exit code"
assert_not_contains "$(body .stdout)" survived "memory bomb survived"
info "memory bomb exit code $code"
# The daemon and the other sandbox are fine, and so is the bombed sandbox.
api GET /v1/health >/dev/null
expect_status 200
assert_eq hi "$(run_in "$OTHER" 'echo hi')" "other sandbox after the memory bomb"
assert_eq ok "$(run_in "$BOMB" 'echo ok')" "bombed sandbox after the memory bomb"

info "fork bomb stops at the pids limit"
# A bounded fork bomb: every process forks twice and sleeps; without a pids limit it would
# reach 2^13 processes. The command is killed by the timeout at the latest.
sx "$FORK" 'b() { b & b & sleep 20; }; b 2>/dev/null; true' 8000
case "$API_STATUS" in
200 | 408) ;;
*) fail "fork bomb: HTTP $API_STATUS $(body)" ;;
esac
# While it is running (or after the timeout), the sandbox's pid count never exceeds its
# limit, as the host sees it.
for cg in $(sandbox_cgroups "$FORK"); do
        if [ -f "$cg/pids.max" ] && [ -f "$cg/pids.current" ]; then
                max=$(cat "$cg/pids.max")
                cur=$(cat "$cg/pids.current")
                info "pids.current=$cur pids.max=$max ($cg)"
                assert_ne max "$max" "no pids limit on $cg"
                [ "$cur" -le "$max" ] || fail "pids.current $cur > pids.max $max"
                if [ -f "$cg/pids.events" ]; then
                        hits=$(awk '$1 == "max" {print $2}' "$cg/pids.events")
                        info "pids.events: max $hits"
                        [ "${hits:-0}" -gt 0 ] || fail "the fork bomb never reached pids.max"
                fi
        fi
done
n=0
for p in $(sandbox_pids "$FORK"); do n=$((n + 1)); done
[ "$n" -lt 8192 ] || fail "fork bomb reached $n processes"
info "sandbox holds $n processes after the bomb"

# Recovery: the timeout killed the tree, the sandbox answers again, and destroy works.
ok=
for i in $(seq 1 30); do
        sx "$FORK" 'echo alive' 10000
        if [ "$API_STATUS" = 200 ] && [ "$(body .stdout)" = alive ]; then
                ok=1
                break
        fi
        sleep 1
done
[ -n "$ok" ] || fail "sandbox did not recover after the fork bomb: HTTP $API_STATUS $(body)"
assert_eq hi "$(run_in "$OTHER" 'echo hi')" "other sandbox after the fork bomb"
info "a fork bomb in a session: deleting the session and the next exec answer within 20 s (3 rounds)"
# :(){ :|:& };: returns at once and runs on in the background at the pids limit, every
# process forking as fast as it can while the agent shares the sandbox's CPU with it.
for round in 1 2 3; do
        api_json POST "/v1/sandboxes/$FORK/sessions" '{"id":"bomb"}'
        expect_status 201
        req=$(jq -cn --arg c ':(){ :|:& };: 2>/dev/null' '{command:$c, sessionId:"bomb", timeout:5000}')
        api_json POST "/v1/sandboxes/$FORK/exec" "$req" --max-time 20
        case "$API_STATUS" in
        200 | 408) ;;
        *) fail "fork bomb round $round: HTTP $API_STATUS $(body)" ;;
        esac
        # let it fill the pids limit
        for cg in $(sandbox_cgroups "$FORK"); do
                [ -f "$cg/pids.current" ] || continue
                for i in $(seq 1 30); do
                        [ "$(cat "$cg/pids.current")" -ge "$(cat "$cg/pids.max")" ] && break
                        sleep 0.1
                done
                info "round $round: pids.current=$(cat "$cg/pids.current") of $(cat "$cg/pids.max")"
        done
        t0=$(date +%s%N)
        api DELETE "/v1/sandboxes/$FORK/sessions/bomb" --max-time 20 >/dev/null
        [ "$API_STATUS" = 200 ] || fail "round $round: delete the bombed session: HTTP $API_STATUS"
        t1=$(date +%s%N)
        req=$(jq -cn --arg s "after$round" '{command:"echo alive", sessionId:$s}')
        api_json POST "/v1/sandboxes/$FORK/sessions" "{\"id\":\"after$round\"}" --max-time 20
        expect_status 201
        api_json POST "/v1/sandboxes/$FORK/exec" "$req" --max-time 20
        [ "$API_STATUS" = 200 ] || fail "round $round: exec after the bomb: HTTP $API_STATUS $(body)"
        assert_eq alive "$(body .stdout | tr -d '\n')" "round $round: exec after the bomb"
        t2=$(date +%s%N)
        info "round $round: delete $(((t1 - t0) / 1000000)) ms, new session and exec $(((t2 - t1) / 1000000)) ms"
done

api DELETE "/v1/sandboxes/$FORK" >/dev/null
expect_status 200
assert_eq true "$(body .destroyed)" "destroyed"
left=$(wait_empty sandbox_pids "$FORK") || fail "processes of $FORK left after destroy: $left"
left=$(wait_empty sandbox_cgroups "$FORK") || fail "cgroups of $FORK left after destroy: $left"
