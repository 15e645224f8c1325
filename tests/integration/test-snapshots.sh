#!/bin/bash
# Filesystem snapshots and fork (docs/api.md "Snapshots and fork", decision 0048): a
# sandbox with 100 MiB of files (and a file of its image removed) is snapshotted; sandboxes
# made from the snapshot (PUT fromSnapshot, POST fork) see exactly those files, their writes
# are their own (invisible to the parent, to each other and to the snapshot); 20 sandboxes
# from one snapshot at once; a snapshot taken while a process writes holds every file
# whose checksum was recorded before the call returned; the parent's destroy and a restart
# of cellad keep the snapshot and its sandboxes; a snapshot in use cannot be deleted (409);
# bad input is refused (404 unknown snapshot, 400 bad names) and creates nothing.
. "$(dirname "$0")/lib.sh"
start_cellad

P=$(sbx parent)
info "parent: 100 MiB of files, /etc/issue removed"
run_in "$P" 'mkdir -p /workspace/data && for i in $(seq 1 10); do
        head -c 10485760 /dev/urandom >/workspace/data/f$i; done &&
        cd /workspace/data && sha256sum f* >/workspace/sums && rm -f /etc/issue &&
        echo parent-v1 >/workspace/who && echo ok' >/dev/null
sums=$(run_in "$P" 'cat /workspace/sums')

info "snapshot"
take_snapshot "$P" base
assert_eq base "$(body .name)" "snapshot name"
assert_eq "$P" "$(body .sandbox)" "snapshot's sandbox"
assert_eq default "$(body .image)" "snapshot's image"
[ "$(body .sizeBytes)" -ge 104857600 ] || fail "sizeBytes $(body .sizeBytes) < 100 MiB"
case "$SNAP" in snap-????????????????) ;; *) fail "snapshot id '$SNAP'" ;; esac
[ -d "$IT_TMP/data/snapshots/$SNAP/layer" ] || fail "no layer of $SNAP in the data dir"
# the parent runs on (thawed)
assert_eq parent-v1 "$(run_in "$P" 'cat /workspace/who')" "parent after the snapshot"
api GET "/v1/snapshots/base" >/dev/null
expect_status 200
assert_eq "$SNAP" "$(body .snapshotId)" "get by name"
api GET "/v1/snapshots/$SNAP" >/dev/null
expect_status 200
assert_eq 1 "$(api GET "/v1/snapshots" | jq '.snapshots | length')" "list"
assert_eq "$SNAP" "$(api GET "/v1/sandboxes/$P/snapshots" | jq -r '.snapshots[0].snapshotId')" \
        "list of the sandbox"

info "a sandbox from the snapshot"
C=$(sbx child)
api_json PUT "/v1/sandboxes/$C" "{\"fromSnapshot\":\"$SNAP\"}"
expect_status 201
assert_eq "$SNAP" "$(body .snapshot)" "SandboxInfo.snapshot"
assert_eq "$sums" "$(run_in "$C" 'cd /workspace/data && sha256sum f*')" "child's files"
assert_eq gone "$(run_in "$C" '[ -e /etc/issue ] && echo there || echo gone')" \
        "a file the parent removed"
assert_eq "$C" "$(run_in "$C" 'cat /etc/hostname')" "child's own hostname"
assert_eq 0 "$(run_in "$C" 'stat -c %u /workspace/data/f1')" "owner inside the child"
assert_mountinfo_hides "$C" child
# PUT again: the same snapshot is an update, another one (or one for a plain sandbox) 400
api_json PUT "/v1/sandboxes/$C" "{\"fromSnapshot\":\"base\"}"
expect_status 200

info "writes are each sandbox's own"
run_in "$C" 'echo child >/workspace/who; echo new >/workspace/data/f1; rm /workspace/data/f2' >/dev/null
run_in "$P" 'echo parent-v2 >/workspace/who' >/dev/null
assert_eq parent-v2 "$(run_in "$P" 'cat /workspace/who')" "parent's write"
assert_eq child "$(run_in "$C" 'cat /workspace/who')" "child's write"
assert_eq "$(echo "$sums" | grep -E '  f[12]$')" "$(run_in "$P" 'cd /workspace/data && sha256sum f1 f2')" \
        "parent's files after the child's writes"
C2=$(sbx child2)
api_json PUT "/v1/sandboxes/$C2" '{"fromSnapshot":"base"}'
expect_status 201
assert_eq parent-v1 "$(run_in "$C2" 'cat /workspace/who')" "the snapshot after both wrote"
assert_eq "$sums" "$(run_in "$C2" 'cd /workspace/data && sha256sum f*')" "snapshot's files"

info "fork"
F=$(sbx fork)
api_json POST "/v1/sandboxes/$P/fork" "{\"name\":\"$F\"}"
expect_status 201
FSNAP=$(body .snapshot)
[ -n "$FSNAP" ] && [ "$FSNAP" != null ] || fail "fork has no snapshot: $(body)"
assert_eq parent-v2 "$(run_in "$F" 'cat /workspace/who')" "fork sees the parent's files now"
run_in "$F" 'echo forked >/workspace/who' >/dev/null
assert_eq parent-v2 "$(run_in "$P" 'cat /workspace/who')" "parent after the fork's write"

info "20 sandboxes from one snapshot at once"
create_many_from_snapshot base 20
for i in $(seq 1 20); do
        n=$(sbx "many$i")
        assert_eq "$(echo "$sums" | grep '  f10$')" "$(run_in "$n" 'cd /workspace/data && sha256sum f10')" \
                "files of many$i"
done
assert_eq 22 "$(api GET /v1/sandboxes | jq "[.sandboxes[] | select(.snapshot == \"$SNAP\")] | length")" \
        "sandboxes made from the snapshot"

info "snapshot during heavy writes"
W=$(sbx writer)
start_writer "$W"
snapshot_writer "$W" "$(sbx writer-copy)"
info "snapshots of one sandbox at once (while it writes): one after the other, each whole"
pids=
for i in 1 2 3 4; do
        curl -sS -o "$IT_TMP/cs$i" -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
                --data-binary '{}' "$CELLA_URL/v1/sandboxes/$W/snapshots" >"$IT_TMP/cs$i.status" &
        pids="$pids $!"
done
for p in $pids; do wait "$p" || fail "a concurrent snapshot failed"; done
for i in 1 2 3 4; do
        assert_eq 201 "$(cat "$IT_TMP/cs$i.status")" "snapshot $i of 4 at once: $(cat "$IT_TMP/cs$i")"
done
CC=$(sbx writer-at-once)
api_json PUT "/v1/sandboxes/$CC" "{\"fromSnapshot\":\"$(jq -r .snapshotId "$IT_TMP/cs4")\"}"
expect_status 201
run_in "$CC" 'cd /workspace/w && sha256sum -c --quiet sums && echo consistent' >"$IT_TMP/check" ||
        true
assert_eq consistent "$(cat "$IT_TMP/check")" "checksums in a snapshot taken beside three others"
api DELETE "/v1/sandboxes/$CC" >/dev/null
for i in 1 2 3 4; do
        api DELETE "/v1/snapshots/$(jq -r .snapshotId "$IT_TMP/cs$i")" >/dev/null
        expect_status 200
done
# the writer was thawed: it goes on
writer_goes_on "$W" "$WRITTEN"

info "destroy of the parent keeps its children and the snapshot"
api DELETE "/v1/sandboxes/$P" >/dev/null
expect_status 200
assert_eq "$sums" "$(run_in "$C2" 'cd /workspace/data && sha256sum f*')" "child after the parent's destroy"
assert_eq forked "$(run_in "$F" 'cat /workspace/who')" "fork after the parent's destroy"

info "disk accounting counts the snapshot once"
snapbytes=$(api GET /v1/health | jq .disk.snapshotBytes)
wbytes=$(api GET "/v1/snapshots/$WSNAP" | jq .sizeBytes)
[ "$snapbytes" -ge $((104857600 * 2 + wbytes)) ] && [ "$snapbytes" -lt $((104857600 * 3)) ] ||
        fail "snapshotBytes $snapbytes: not base + fork + writer counted once each"

info "restart of cellad"
kill9_cellad
# what a capture cut short by the stop would leave
mkdir -p "$IT_TMP/data/snapshots/.partial-snap-00000000deadbeef/layer/workspace"
echo half >"$IT_TMP/data/snapshots/.partial-snap-00000000deadbeef/layer/workspace/x"
start_cellad
[ ! -e "$IT_TMP/data/snapshots/.partial-snap-00000000deadbeef" ] || fail "a partial capture was left"
assert_eq 3 "$(api GET /v1/snapshots | jq '.snapshots | length')" "snapshots after the restart"
api GET "/v1/sandboxes/$C2" >/dev/null
expect_status 200
assert_eq "$SNAP" "$(body .snapshot)" "child's snapshot after the restart"
assert_eq "$sums" "$(run_in "$C2" 'cd /workspace/data && sha256sum f*')" "child after the restart"
api DELETE "/v1/sandboxes/$C2" >/dev/null
C3=$(sbx child3)
api_json PUT "/v1/sandboxes/$C3" '{"fromSnapshot":"base"}'
expect_status 201
assert_eq "$sums" "$(run_in "$C3" 'cd /workspace/data && sha256sum f*')" "new child after the restart"

info "a lost registry is rebuilt with the snapshots and what sandboxes were made from"
kill9_cellad
rm -f "$IT_TMP/data/cella.db" "$IT_TMP/data/cella.db-wal" "$IT_TMP/data/cella.db-shm"
start_cellad
grep -q "snapshots rebuilt from their files" "$CELLAD_LOG" || fail "no snapshot rebuilt: $(cat "$CELLAD_LOG")"
assert_eq 3 "$(api GET /v1/snapshots | jq '.snapshots | length')" "snapshots after the rebuild"
assert_eq base "$(api GET "/v1/snapshots/$SNAP" | jq -r .name)" "the snapshot's name after the rebuild"
api GET "/v1/sandboxes/$C3" >/dev/null
expect_status 200
assert_eq "$SNAP" "$(body .snapshot)" "a child's snapshot after the rebuild"
assert_eq "$sums" "$(run_in "$C3" 'cd /workspace/data && sha256sum f*')" "a child after the rebuild"

info "a snapshot in use is not deleted"
api DELETE "/v1/snapshots/base" >/dev/null
expect_status 409 SNAPSHOT_IN_USE
api GET "/v1/snapshots/base" >/dev/null
expect_status 200

info "bad input"
api GET "/v1/snapshots/snap-0000000000000000" >/dev/null
expect_status 404 SNAPSHOT_NOT_FOUND
api DELETE "/v1/snapshots/nope" >/dev/null
expect_status 404 SNAPSHOT_NOT_FOUND
X=$(sbx never)
api_json PUT "/v1/sandboxes/$X" '{"fromSnapshot":"nope"}'
expect_status 404 SNAPSHOT_NOT_FOUND
api_json PUT "/v1/sandboxes/$X" '{"fromSnapshot":"../etc"}'
expect_status 400 VALIDATION_FAILED
api_json PUT "/v1/sandboxes/$X" '{"fromSnapshot":"base","image":"other"}'
expect_status 400 VALIDATION_FAILED
api_json PUT "/v1/sandboxes/$F" '{"fromSnapshot":"base"}'
expect_status 400 VALIDATION_FAILED
api GET "/v1/sandboxes/$X" >/dev/null
expect_status 404 SANDBOX_NOT_FOUND
api_json POST "/v1/sandboxes/$C3/snapshots" '{"name":"Bad Name"}'
expect_status 400 VALIDATION_FAILED
api_json POST "/v1/sandboxes/$C3/snapshots" '{"name":"base"}'
expect_status 400 VALIDATION_FAILED
api_json POST "/v1/sandboxes/$C3/snapshots" '{"nom":"x"}'
expect_status 400 VALIDATION_FAILED
api_json POST "/v1/sandboxes/$X/snapshots" '{}'
expect_status 404 SANDBOX_NOT_FOUND
api_json POST "/v1/sandboxes/$C3/fork" '{"name":"-bad-"}'
expect_status 400 INVALID_SANDBOX_NAME
api_json POST "/v1/sandboxes/$C3/fork" '{}'
expect_status 400 VALIDATION_FAILED
api_json POST "/v1/sandboxes/$C3/fork" "{\"name\":\"$F\"}"
expect_status 400 VALIDATION_FAILED
assert_eq 3 "$(api GET /v1/snapshots | jq '.snapshots | length')" "bad input made no snapshot"


info "the CLI: snapshot create|ls|rm, fork"
CLI=$CELLA_BUILD/cella
out=$("$CLI" snapshot create "$C3" --name cli-snap)
case "$out" in "snapshot snap-"*" (cli-snap) of '$C3': "*" bytes") ;; *) fail "snapshot create said '$out'" ;; esac
"$CLI" snapshot ls "$C3" | grep -q " cli-snap " || fail "cella snapshot ls $C3: $("$CLI" snapshot ls "$C3")"
assert_eq 4 "$("$CLI" snapshot ls --json | jq '.snapshots | length')" "cella snapshot ls --json"
# a fork of a sandbox made from a snapshot: its layer goes over the snapshot's
run_in "$C3" 'rm /workspace/data/f3; echo c3 >/workspace/who' >/dev/null
CF=$(sbx cli-fork)
out=$("$CLI" fork "$C3" "$CF")
case "$out" in "forked '$C3' into '$CF' (snapshot snap-"*")") ;; *) fail "fork said '$out'" ;; esac
assert_eq "$(echo "$sums" | grep -v '  f3$')" "$(run_in "$CF" 'cd /workspace/data && sha256sum f*')" \
        "files of a fork of a sandbox made from a snapshot"
assert_eq c3 "$(run_in "$CF" 'cat /workspace/who')" "its parent's own write"
if "$CLI" snapshot rm base 2>"$IT_TMP/err"; then fail "cella snapshot rm of a used snapshot succeeded"; fi
assert_contains "$(cat "$IT_TMP/err")" SNAPSHOT_IN_USE "cella snapshot rm's error"
assert_eq "deleted snapshot 'cli-snap'" "$("$CLI" snapshot rm cli-snap)" "cella snapshot rm"
CFSNAP=$(api GET "/v1/sandboxes/$CF" | jq -r .snapshot)
api DELETE "/v1/sandboxes/$C3" >/dev/null
api DELETE "/v1/sandboxes/$CF" >/dev/null
# the fork's snapshot lies over base: base stays while it does
api DELETE "/v1/snapshots/base" >/dev/null
expect_status 409 SNAPSHOT_IN_USE
api DELETE "/v1/snapshots/$CFSNAP" >/dev/null
expect_status 200

info "the last user gone, the snapshot is deleted with its files"
for i in $(seq 1 20); do api DELETE "/v1/sandboxes/$(sbx "many$i")" >/dev/null; done
api DELETE "/v1/sandboxes/$C" >/dev/null
api DELETE "/v1/snapshots/base" >/dev/null
expect_status 200
assert_eq "$SNAP" "$(body .snapshotId)" "DELETE by name answers the id"
[ ! -e "$IT_TMP/data/snapshots/$SNAP" ] || fail "files of $SNAP left"
api GET "/v1/snapshots/base" >/dev/null
expect_status 404 SNAPSHOT_NOT_FOUND
info "snapshots: ok"
