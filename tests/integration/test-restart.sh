#!/bin/bash
# cellad killed with SIGKILL and started again on the same data dir: a running sandbox is
# reattached (its processes and files are still there and reachable); a sandbox whose PID 1
# died while no daemon ran comes back with its files on its next use.
. "$(dirname "$0")/lib.sh"
start_cellad

A=$(sbx keep)
B=$(sbx dies)
run_in "$A" 'echo kept >/workspace/a.txt; setsid sleep 1000 </dev/null >/dev/null 2>&1 & echo ok' >/dev/null
run_in "$B" 'echo still-here >/workspace/b.txt' >/dev/null
sleeper=$(run_in "$A" 'pgrep -x sleep')
[ -n "$sleeper" ] || fail "no background sleep in $A"

info "SIGKILL cellad"
kill -KILL "$CELLAD_PID"
wait "$CELLAD_PID" 2>/dev/null || true
CELLAD_PID=
[ -n "$(sandbox_pids "$A")" ] || fail "sandbox $A died with the daemon"

info "kill PID 1 of $B while no daemon runs"
for p in $(sandbox_pids "$B"); do kill -KILL "$p" 2>/dev/null || true; done
for i in $(seq 1 50); do [ -z "$(sandbox_pids "$B")" ] && break; sleep 0.1; done

start_cellad
grep -q "sandbox '$A' reattached" "$CELLAD_LOG" || fail "$A not reattached: $(cat "$CELLAD_LOG")"
api GET "/v1/sandboxes/$A" >/dev/null
expect_status 200
assert_eq running "$(body .state)" "state after reattach"
assert_eq kept "$(run_in "$A" 'cat /workspace/a.txt')" "file of the reattached sandbox"
assert_eq "$sleeper" "$(run_in "$A" 'pgrep -x sleep')" "background process survived the restart"

api GET "/v1/sandboxes/$B" >/dev/null
expect_status 200
assert_eq stopped "$(body .state)" "state of the sandbox whose PID 1 died"
assert_eq still-here "$(run_in "$B" 'cat /workspace/b.txt')" "files kept across its restart"

info "the reattached sandbox's PID 1 killed: seen through its agent link's end"
pidfds() { find "/proc/$CELLAD_PID/fd" -mindepth 1 -maxdepth 1 -lname 'anon_inode:*pidfd*' | wc -l; }
assert_eq 0 "$(pidfds)" "pidfds held by cellad with two idle sandboxes (the links watch)"
for p in $(sandbox_pids "$A"); do
        grep -qs '^NSpid:.*[[:space:]]1$' "/proc/$p/status" && kill -KILL "$p"
done
not_stopped() { [ "$(api GET "/v1/sandboxes/$A" | jq -r .state)" = stopped ] || echo running; }
wait_empty not_stopped >/dev/null || fail "$A not stopped after its PID 1 (not cellad's child) was killed"
assert_eq kept "$(run_in "$A" 'cat /workspace/a.txt')" "files kept, the sandbox started again"
info "restart: ok"
