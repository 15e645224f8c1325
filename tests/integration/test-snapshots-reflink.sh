#!/bin/bash
# Snapshots and fork on a data dir with reflinks (docs/decisions/0051): cellad's data dir is
# an XFS filesystem (mkfs.xfs -m reflink=1) that this test makes in a sparse file on a loop
# device and mounts, so a snapshot of a sandbox with a disk is a reflinked clone of its
# disk image that its children mount read-only. A sandbox with 1 GiB of files is forked:
# both see the files, writes in one are invisible to the other and to the snapshot; 100
# sandboxes from one snapshot at once; a snapshot during heavy writes is consistent
# (checksums); the parent's destroy keeps its children; a restart of cellad keeps all;
# snapshots of sandboxes made from a clone (clone over clone, and a copy path's layer
# under a clone) work, with owners right; the filesystem is unmounted and its loop device
# released at the end (lib.sh's checks then find nothing of the run).
. "$(dirname "$0")/lib.sh"

command -v mkfs.xfs >/dev/null || skip "no mkfs.xfs (install xfsprogs: scripts/deps.sh)"
grep -qw xfs /proc/filesystems || modprobe xfs 2>/dev/null || true
grep -qw xfs /proc/filesystems || skip "the kernel has no XFS"

XFS_IMG=$IT_TMP/xfs.img
XFS_LOOP=
truncate -s 24G "$XFS_IMG"
mkfs.xfs -q -m reflink=1 "$XFS_IMG"
XFS_LOOP=$(losetup --find --show "$XFS_IMG")
mkdir -p "$IT_TMP/data"
mount -t xfs "$XFS_LOOP" "$IT_TMP/data"

# Once the daemons are gone: the sandboxes' and snapshots' loop devices go with their last
# mount (autoclear), then the filesystem is unmounted and its device released. A mount
# namespace that another process of the host copied while the filesystem was mounted
# keeps it (and its device) until that process ends: bounded wait, then lib.sh's check.
it_unmount_hook() {
        local i
        for i in $(seq 1 100); do
                [ -z "$(snapshot_loops)" ] && break
                sleep 0.1
        done
        umount "$IT_TMP/data" || umount -l "$IT_TMP/data"
        [ -n "$XFS_LOOP" ] || return 0
        losetup -d "$XFS_LOOP"
        for i in $(seq 1 600); do
                grep -qF "$XFS_IMG" "/sys/block/${XFS_LOOP#/dev/}/loop/backing_file" 2>/dev/null ||
                        return 0
                sleep 0.1
        done
}

# Loop devices bound to a file of the data dir (the sandboxes' disks, the snapshots' clones).
snapshot_loops() {
        local f
        for f in /sys/block/loop*/loop/backing_file; do
                grep -qF "$IT_TMP/data/" "$f" 2>/dev/null && echo "${f%/loop/backing_file}"
        done
        return 0
}

start_cellad
api GET /v1/health >/dev/null
assert_eq true "$(body .disk.reflink)" "/v1/health .disk.reflink on XFS"
assert_eq clone "$(body .disk.snapshotMethod)" "/v1/health .disk.snapshotMethod"
grep -q "data dir has reflinks" "$CELLAD_LOG" || fail "cellad did not log the reflink probe"
"$CELLA_BUILD/cellad" --check --data-dir "$IT_TMP/data" >"$IT_TMP/check" 2>&1 ||
        fail "cellad --check: $(cat "$IT_TMP/check")"
assert_contains "$(cat "$IT_TMP/check")" "data dir has reflinks" "cellad --check"

P=$(sbx parent)
info "parent: 1 GiB of files, /etc/issue removed, a file of a user's own"
run_in "$P" 'mkdir -p /workspace/data && for i in $(seq 1 16); do
        head -c 67108864 /dev/urandom >/workspace/data/f$i; done &&
        cd /workspace/data && sha256sum f* >/workspace/sums && rm -f /etc/issue &&
        echo parent-v1 >/workspace/who && mkdir /home/u && echo mine >/home/u/f &&
        chown -R 1000:1001 /home/u && ln -s /etc/passwd /workspace/link &&
        mkdir /workspace/bin && cp /bin/true /workspace/bin/mytrue &&
        printf "#!/bin/sh\necho hello from the parent\n" >/workspace/bin/hello &&
        chmod +x /workspace/bin/hello && echo ok' >/dev/null
sums=$(run_in "$P" 'cat /workspace/sums')

info "snapshot: a clone of the parent's disk"
take_snapshot "$P" base
assert_eq clone "$(body .method)" "snapshot method on XFS"
[ "$(body .sizeBytes)" -ge 1073741824 ] || fail "sizeBytes $(body .sizeBytes) < 1 GiB"
[ -f "$IT_TMP/data/snapshots/$SNAP/layer/disk.img" ] || fail "no disk clone of $SNAP"
assert_eq parent-v1 "$(run_in "$P" 'cat /workspace/who')" "parent after the snapshot"
run_in "$P" 'echo still-writable >/workspace/w && cat /workspace/w' >"$IT_TMP/w"
assert_eq still-writable "$(cat "$IT_TMP/w")" "the parent's filesystem is thawed"

info "fork of the 1 GiB sandbox"
F=$(sbx fork)
api_json POST "/v1/sandboxes/$P/fork" "{\"name\":\"$F\"}"
expect_status 201
FSNAP=$(body .snapshot)
assert_eq clone "$(api GET "/v1/snapshots/$FSNAP" | jq -r .method)" "the fork's snapshot"
assert_eq "$sums" "$(run_in "$F" 'cd /workspace/data && sha256sum f*')" "fork's files"
assert_eq gone "$(run_in "$F" '[ -e /etc/issue ] && echo there || echo gone')" \
        "a file the parent removed"
assert_eq "$F" "$(run_in "$F" 'cat /etc/hostname')" "fork's own hostname"
assert_eq "0 0" "$(run_in "$F" 'stat -c "%u %g" /workspace/data/f1')" "root's file in the fork"
assert_eq "1000 1001 mine" "$(run_in "$F" 'stat -c "%u %g" /home/u/f; cat /home/u/f' | tr '\n' ' ' |
        sed 's/ $//')" "a user's file in the fork"
assert_eq /etc/passwd "$(run_in "$F" 'readlink /workspace/link')" "a symlink in the fork"
assert_eq "hello from the parent ran" "$(run_in "$F" '/workspace/bin/hello && /workspace/bin/mytrue &&
        echo ran' | tr '\n' ' ' | sed 's/ $//')" "programs of the parent run in the fork"
assert_mountinfo_hides "$F" fork

info "writes are each sandbox's own"
run_in "$F" 'echo fork >/workspace/who; echo new >/workspace/data/f1; rm /workspace/data/f2;
        echo x >/home/u/f' >/dev/null
run_in "$P" 'echo parent-v2 >/workspace/who; echo p >/workspace/data/f3' >/dev/null
assert_eq parent-v2 "$(run_in "$P" 'cat /workspace/who')" "parent's write"
assert_eq fork "$(run_in "$F" 'cat /workspace/who')" "fork's write"
assert_eq "$(echo "$sums" | grep -E '  f[12]$')" \
        "$(run_in "$P" 'cd /workspace/data && sha256sum f1 f2')" "parent's files after the fork's writes"
assert_eq "$(echo "$sums" | grep -E '  f3$')" \
        "$(run_in "$F" 'cd /workspace/data && sha256sum f3')" "fork's file after the parent's write"
C=$(sbx child)
api_json PUT "/v1/sandboxes/$C" '{"fromSnapshot":"base"}'
expect_status 201
assert_eq parent-v1 "$(run_in "$C" 'cat /workspace/who')" "the snapshot after both wrote"
assert_eq "$sums" "$(run_in "$C" 'cd /workspace/data && sha256sum f*')" "snapshot's files"
assert_eq mine "$(run_in "$C" 'cat /home/u/f')" "the snapshot's file the fork changed"
out=$(run_in "$C" 'touch /workspace/data/f1 2>&1 && echo writable')
assert_eq writable "$out" "a child writes over the snapshot's files (its own upper layer)"

info "100 sandboxes from one snapshot at once"
create_many_from_snapshot base 100
f16=$(echo "$sums" | grep '  f16$')
for i in $(seq 1 100); do
        n=$(sbx "many$i")
        assert_eq "$f16 $n" "$(run_in "$n" 'cd /workspace/data && sha256sum f16; echo $i >/workspace/who;
                cat /etc/hostname' | tr '\n' ' ' | sed 's/ $//')" "files of many$i"
done
# one loop device (and one superblock) for the snapshot, however many sandboxes use it
clone_img=$IT_TMP/data/snapshots/$SNAP/layer/disk.img
nloops=$(grep -lF "$clone_img" /sys/block/loop*/loop/backing_file 2>/dev/null | wc -l)
assert_eq 1 "$nloops" "loop devices on the snapshot's clone"
grep -q '^1$' "$(dirname "$(grep -lF "$clone_img" /sys/block/loop*/loop/backing_file | head -1)")/../ro" ||
        fail "the snapshot's loop device is not read-only"
for i in $(seq 1 100); do api DELETE "/v1/sandboxes/$(sbx "many$i")" >/dev/null; done

info "snapshot during heavy writes"
W=$(sbx writer)
start_writer "$W"
for round in 1 2 3; do
        snapshot_writer "$W" "$(sbx "writer-copy$round")" clone
done
writer_goes_on "$W" "$WRITTEN"

info "snapshots of sandboxes made from snapshots"
# the fork (made from a clone) is cloned in turn: its layer over the parent's
api_json POST "/v1/sandboxes/$F/snapshots" '{"name":"over-clone"}'
expect_status 201
assert_eq clone "$(body .method)" "a snapshot of a sandbox made from a clone"
G=$(sbx grandchild)
api_json PUT "/v1/sandboxes/$G" '{"fromSnapshot":"over-clone"}'
expect_status 201
assert_eq fork "$(run_in "$G" 'cat /workspace/who')" "the middle sandbox's write"
assert_eq gone "$(run_in "$G" '[ -e /workspace/data/f2 ] && echo there || echo gone')" \
        "a file the middle sandbox removed"
assert_eq "$(echo "$sums" | grep -E '  f(1[0-6]|[3-9])$')" \
        "$(run_in "$G" 'cd /workspace/data && sha256sum f1[0-6] f[3-9]')" \
        "the first snapshot's files under the second"
assert_eq "1000 1001 x" "$(run_in "$G" 'stat -c "%u %g" /home/u/f; cat /home/u/f' | tr '\n' ' ' |
        sed 's/ $//')" "a user's file changed by the middle sandbox"
run_in "$G" 'echo g >/workspace/g' >/dev/null

info "destroy of the parent keeps its children"
api DELETE "/v1/sandboxes/$P" >/dev/null
expect_status 200
assert_eq "$sums" "$(run_in "$C" 'cd /workspace/data && sha256sum f*')" "child after the parent's destroy"
assert_eq fork "$(run_in "$F" 'cat /workspace/who')" "fork after the parent's destroy"
C2=$(sbx child2)
api_json PUT "/v1/sandboxes/$C2" '{"fromSnapshot":"base"}'
expect_status 201
assert_eq "$sums" "$(run_in "$C2" 'cd /workspace/data && sha256sum f*')" \
        "a new child after the parent's destroy"

info "disk accounting counts each clone once"
snapbytes=$(api GET /v1/health | jq .disk.snapshotBytes)
sum=$(api GET /v1/snapshots | jq '[.snapshots[].sizeBytes] | add')
assert_eq "$sum" "$snapbytes" "snapshotBytes is the sum of the snapshots' sizes"

info "restart of cellad"
kill9_cellad
start_cellad
nsnaps=$(api GET /v1/snapshots | jq '.snapshots | length')
assert_eq 6 "$nsnaps" "snapshots after the restart"
assert_eq "$sums" "$(run_in "$C" 'cd /workspace/data && sha256sum f*')" "child after the restart"
assert_eq g "$(run_in "$G" 'cat /workspace/g')" "grandchild after the restart"
C3=$(sbx child3)
api_json PUT "/v1/sandboxes/$C3" '{"fromSnapshot":"base"}'
expect_status 201
assert_eq "$sums" "$(run_in "$C3" 'cd /workspace/data && sha256sum f*')" "new child after the restart"
nloops=$(grep -lF "$clone_img" /sys/block/loop*/loop/backing_file 2>/dev/null | wc -l)
assert_eq 1 "$nloops" "loop devices on the snapshot's clone after the restart"

info "a lost registry is rebuilt with the clones"
kill9_cellad
rm -f "$IT_TMP/data/cella.db" "$IT_TMP/data/cella.db-wal" "$IT_TMP/data/cella.db-shm"
start_cellad
assert_eq "$nsnaps" "$(api GET /v1/snapshots | jq '.snapshots | length')" "snapshots after the rebuild"
assert_eq clone "$(api GET /v1/snapshots/over-clone | jq -r .method)" "method after the rebuild"
G2=$(sbx grandchild2)
api_json PUT "/v1/sandboxes/$G2" '{"fromSnapshot":"over-clone"}'
expect_status 201
assert_eq "1000 1001 x" "$(run_in "$G2" 'stat -c "%u %g" /home/u/f; cat /home/u/f' | tr '\n' ' ' |
        sed 's/ $//')" "owners through both clones after the rebuild"

info "layers of both kinds in one chain"
# without disk images a sandbox's layer is copied (file by file, each cloned on XFS)
kill9_cellad
start_cellad --disk-quota off
api GET /v1/health >/dev/null
assert_eq copy "$(body .disk.snapshotMethod)" "snapshotMethod with --disk-quota off"
N=$(sbx nodisk)
api_json PUT "/v1/sandboxes/$N" '{"fromSnapshot":"base"}'
expect_status 201
run_in "$N" 'echo n >/workspace/n && chown 1000:1001 /workspace/n && rm /workspace/data/f4 &&
        echo ok' >/dev/null
api_json POST "/v1/sandboxes/$N/snapshots" '{"name":"copy-over-clone"}'
expect_status 201
assert_eq copy "$(body .method)" "a snapshot of a sandbox without a disk"
[ -d "$IT_TMP/data/snapshots/$(body .snapshotId)/layer/workspace" ] || fail "no copied layer"
kill9_cellad
start_cellad
M=$(sbx mixed)
api_json PUT "/v1/sandboxes/$M" '{"fromSnapshot":"copy-over-clone"}'
expect_status 201
run_in "$M" 'echo m >/workspace/m' >/dev/null
api_json POST "/v1/sandboxes/$M/snapshots" '{"name":"clone-over-copy"}'
expect_status 201
assert_eq clone "$(body .method)" "a snapshot of a sandbox made from a copy"
Q=$(sbx mixed-child)
api_json PUT "/v1/sandboxes/$Q" '{"fromSnapshot":"clone-over-copy"}'
expect_status 201
assert_eq "m n gone 1000 1000" "$(run_in "$Q" 'cat /workspace/m /workspace/n;
        [ -e /workspace/data/f4 ] && echo there || echo gone; stat -c %u /workspace/n /home/u/f' |
        tr '\n' ' ' | sed 's/ $//')" "three layers of two kinds"
assert_eq "$(echo "$sums" | grep '  f5$')" "$(run_in "$Q" 'cd /workspace/data && sha256sum f5')" \
        "the clone at the bottom of the chain"
for s in "$Q" "$M" "$N"; do api DELETE "/v1/sandboxes/$s" >/dev/null; done
for s in clone-over-copy copy-over-clone; do
        api DELETE "/v1/snapshots/$s" >/dev/null
        expect_status 200
done

info "a snapshot in use is not deleted; unused ones go with their files"
api DELETE "/v1/snapshots/base" >/dev/null
expect_status 409 SNAPSHOT_IN_USE
api DELETE "/v1/sandboxes/$G" >/dev/null
api DELETE "/v1/sandboxes/$G2" >/dev/null
api DELETE "/v1/snapshots/over-clone" >/dev/null
expect_status 200
[ ! -e "$IT_TMP/data/snapshots/$(body .snapshotId)" ] || fail "files of over-clone left"
info "snapshots-reflink: ok"
