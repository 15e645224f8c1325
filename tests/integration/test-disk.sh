#!/bin/bash
# Disk limits enforced by the kernel: each sandbox's upper layer (so /workspace) is in its
# own sparse ext4 image. With --disk-limit-override 64M (instead of lite's 2 GB, to keep
# the bytes written small): dd past the limit fails with ENOSPC, a raw upload past it
# answers 507 NO_SPACE, the inode limit holds, the sandbox keeps working once a file is
# deleted, another sandbox is unaffected, the limit survives a SIGKILLed cellad (for a
# reattached sandbox and for one restarted from its image), and destroy releases the loop
# device and the image. With --disk-quota off, a sandbox that has an image keeps using it
# and a new one gets none.
. "$(dirname "$0")/lib.sh"

"$CELLA_BUILD/cellad" --check >"$IT_TMP/check" 2>&1 || fail "cellad --check: $(cat "$IT_TMP/check")"
grep -q "disk limits enforced" "$IT_TMP/check" || skip "disk limits not enforceable here: $(cat "$IT_TMP/check")"

info "option errors"
if "$CELLA_BUILD/cellad" --disk-quota maybe --check >/dev/null 2>&1; then
        fail "--disk-quota maybe accepted"
fi
if "$CELLA_BUILD/cellad" --disk-limit-override 1M --check >/dev/null 2>&1; then
        fail "--disk-limit-override below the minimum accepted"
fi

start_cellad --disk-quota required --disk-limit-override 64M
grep -q "disk limits enforced" "$CELLAD_LOG" || fail "no startup line about disk limits"

A=$(sbx full)
B=$(sbx other)
LIMIT=$((64 * 1024 * 1024))

# image_of NAME: the sandbox's disk image on the host
image_of() {
        echo "$IT_TMP/data/sandboxes/s$(sandbox_slot "$1")/disk.img"
}

info "a lite sandbox gets a $LIMIT-byte disk"
api_json PUT "/v1/sandboxes/$A" '{"instanceType":"lite"}'
expect_status 201
assert_eq "$LIMIT" "$(body .disk.limitBytes)" "disk.limitBytes"
[ "$(body .disk.usedBytes)" -lt $((8 * 1024 * 1024)) ] || fail "new disk uses $(body .disk.usedBytes) bytes"
size=$(run_in "$A" 'df -B1 --output=size / | tail -1 | tr -d " "')
[ "$size" -le "$LIMIT" ] && [ "$size" -gt $((LIMIT / 2)) ] || fail "df size of / is $size"
assert_contains "$("$CELLA_BUILD/cella" info "$A")" "of 64.0 MiB used" "cella info"
assert_eq "$(run_in "$A" 'df -B1 --output=size / | tail -1')" \
        "$(run_in "$A" 'df -B1 --output=size /workspace | tail -1')" "/ and /workspace: one disk"

info "dd past the limit: No space left on device"
sx "$A" 'dd if=/dev/zero of=/workspace/big bs=1M count=100 2>&1; echo rc=$?'
expect_status 200
assert_contains "$(body .stdout)" "No space left on device" "dd output"
assert_contains "$(body .stdout)" "rc=1" "dd exit status"
used=$(api GET "/v1/sandboxes/$A" | jq -r .disk.usedBytes)
[ "$used" -gt $((LIMIT / 2)) ] && [ "$used" -le "$LIMIT" ] || fail "usedBytes $used after filling"
# What the image occupies on the host is bounded by the limit too.
host=$(($(stat -c %b "$(image_of "$A")") * 512))
[ "$host" -le "$LIMIT" ] || fail "image occupies $host bytes on the host"

info "another sandbox is unaffected"
assert_eq ok "$(run_in "$B" 'dd if=/dev/zero of=/workspace/ten bs=1M count=10 2>/dev/null && echo ok')" \
        "write in the other sandbox"
assert_eq $((10 * 1024 * 1024)) "$(run_in "$B" 'stat -c %s /workspace/ten')" "its file size"

info "an upload past the limit answers 507 NO_SPACE"
head -c $((16 * 1024 * 1024)) /dev/zero >"$IT_TMP/sixteen"
api PUT "/v1/sandboxes/$A/files?path=/workspace/up.bin" --data-binary @"$IT_TMP/sixteen" >/dev/null
expect_status 507 NO_SPACE

info "deleting frees the space; the sandbox keeps working"
run_in "$A" 'rm -f /workspace/big /workspace/up.bin' >/dev/null
api PUT "/v1/sandboxes/$A/files?path=/workspace/up.bin" --data-binary @"$IT_TMP/sixteen" >/dev/null
expect_status 200
assert_eq ok "$(run_in "$A" 'echo small >/workspace/small && cat /workspace/small >/dev/null && echo ok')" \
        "small write after freeing"
run_in "$A" 'rm -f /workspace/up.bin' >/dev/null

info "the inode limit (disk limit / 16 KiB = 4096 inodes)"
sx "$A" 'mkdir -p /workspace/n && cd /workspace/n && seq -f f%g 1 5000 | xargs touch 2>&1 | tail -1; ls | wc -l'
expect_status 200
assert_contains "$(body .stdout)" "No space left on device" "touch output"
n=$(jq -j .stdout <"$IT_TMP/body" | tail -n 1)
[ "$n" -lt 4096 ] && [ "$n" -gt 3000 ] || fail "$n files made under a 4096-inode limit"
run_in "$A" 'rm -rf /workspace/n' >/dev/null

info "SIGKILL cellad; kill $B's PID 1 while no daemon runs"
run_in "$B" 'echo still >/workspace/b.txt' >/dev/null
kill -KILL "$CELLAD_PID"
wait "$CELLAD_PID" 2>/dev/null || true
CELLAD_PID=
for p in $(sandbox_pids "$B"); do kill -KILL "$p" 2>/dev/null || true; done
for i in $(seq 1 50); do [ -z "$(sandbox_pids "$B")" ] && break; sleep 0.1; done
start_cellad --disk-quota required --disk-limit-override 64M
grep -q "sandbox '$A' reattached" "$CELLAD_LOG" || fail "$A not reattached"

info "the limit holds for the reattached sandbox"
sx "$A" 'dd if=/dev/zero of=/workspace/big bs=1M count=100 2>&1; rm -f /workspace/big'
assert_contains "$(body .stdout)" "No space left on device" "dd after the restart"

info "and for the one started again from its image"
assert_eq still "$(run_in "$B" 'cat /workspace/b.txt')" "file kept in the image"
sx "$B" 'dd if=/dev/zero of=/workspace/big bs=1M count=100 2>&1; rm -f /workspace/big'
assert_contains "$(body .stdout)" "No space left on device" "dd in the restarted sandbox"
# One loop device per running sandbox image, never two for one image.
n=$(grep -lF "$(image_of "$B")" /sys/block/loop*/loop/backing_file 2>/dev/null | wc -l)
assert_eq 1 "$n" "loop devices bound to $B's image"

info "destroy releases the loop device and removes the image"
api DELETE "/v1/sandboxes/$A" >/dev/null
expect_status 200
[ ! -e "$(image_of "$A")" ] || fail "image of $A left after destroy"
wait_empty sh -c "grep -lF '$(image_of "$A")' /sys/block/loop*/loop/backing_file 2>/dev/null" >/dev/null ||
        fail "loop device of $A left after destroy"

info "--disk-quota off: a sandbox with an image keeps it, a new one gets none"
kill -KILL "$CELLAD_PID"
wait "$CELLAD_PID" 2>/dev/null || true
CELLAD_PID=
start_cellad --disk-quota off
grep -q "disk limits off" "$CELLAD_LOG" || fail "no startup line about disk limits being off"
sx "$B" 'dd if=/dev/zero of=/workspace/big bs=1M count=100 2>&1; rm -f /workspace/big'
assert_contains "$(body .stdout)" "No space left on device" "dd in $B with disk limits off"
C=$(sbx nolimit)
api_json PUT "/v1/sandboxes/$C" '{"instanceType":"lite"}'
expect_status 201
assert_eq null "$(body .disk)" "disk of a sandbox made with disk limits off"
[ ! -e "$(image_of "$C")" ] || fail "image made with disk limits off"
# Its layers are directories of the data dir: the mount table inside shows none of it.
mi=$(run_in "$C" 'cat /proc/self/mountinfo')
assert_contains "$mi" "upperdir=/upper," "upper layer by its path in a detached tree"
assert_not_contains "$mi" "$IT_TMP" "data dir in the mount table of $C"

info "disk: ok"
