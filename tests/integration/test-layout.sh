#!/bin/bash
# Registries from before slot naming (sandboxes/<name>/, cgroups named by sandbox name)
# are moved to the slot layout (sandboxes/s<slot>/, cgroups s<slot>) at start: files kept,
# each sandbox starts again on its next use, nothing of the old layout is left. One old
# sandbox is named like another's slot id ("s0"), the case that needs two passes.
. "$(dirname "$0")/lib.sh"
command -v sqlite3 >/dev/null || skip "needs sqlite3"

start_cellad --pool 0
X=$(sbx x)
Y=s0 # a valid sandbox name that is also a slot id
assert_eq "" "$(run_in "$X" 'echo file-of-x >/workspace/f')" "write in X"
assert_eq "" "$(run_in "$Y" 'echo file-of-y >/workspace/f')" "write in Y"
slot_x=$(sandbox_slot "$X")
slot_y=$(sandbox_slot "$Y")
assert_eq "0 1" "$slot_x $slot_y" "slots in order of creation"
# Stop the daemon without destroying anything: its sandboxes keep running.
kill -TERM "$CELLAD_PID"
wait "$CELLAD_PID" 2>/dev/null || true
CELLAD_PID=

# Turn the data dir into the old layout: containers gone, directories named by sandbox
# name, no layout mark; and an old-style cgroup named by a sandbox name.
for s in s0 s1; do
        for d in $(find /sys/fs/cgroup -maxdepth 3 -type d -path "*/$IT_CGPARENT/$s"); do
                [ -e "$d/cgroup.kill" ] && echo 1 >"$d/cgroup.kill"
        done
done
wait_empty run_pids >/dev/null || fail "could not stop the sandboxes"
for d in $(find /sys/fs/cgroup -maxdepth 4 -type d -path "*/$IT_CGPARENT/*" | sort -r); do
        rmdir "$d"
done
D=$IT_TMP/data/sandboxes
mv "$D/s0" "$D/$X"
mv "$D/s1" "$D/s0"
sqlite3 "$IT_TMP/data/cella.db" "DELETE FROM meta WHERE key = 'layout'"
mkdir -p "/sys/fs/cgroup/unified/$IT_CGPARENT/$X"

start_cellad --pool 0
assert_contains "$(cat "$CELLAD_LOG")" "sandboxes are named by slot from now on" "migrated"
assert_eq "s0 s1" "$(ls "$D" | sort | xargs)" "directories by slot"
assert_eq "" "$(find /sys/fs/cgroup -maxdepth 3 -type d -path "*/$IT_CGPARENT/$X")" \
        "old cgroup removed"
assert_eq file-of-x "$(run_in "$X" 'cat /workspace/f')" "X's files"
assert_eq file-of-y "$(run_in "$Y" 'cat /workspace/f')" "Y's files"
assert_eq "$X" "$(run_in "$X" hostname)" "X's hostname"
assert_eq "$Y" "$(run_in "$Y" hostname)" "Y's hostname"
assert_eq slot "$(sqlite3 "$IT_TMP/data/cella.db" "SELECT value FROM meta WHERE key = 'layout'")" \
        "layout marked"
info "layout: ok"
