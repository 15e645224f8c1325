#!/bin/bash
# Faults: cellad killed with SIGKILL while FAULTS_SANDBOXES (100) sandboxes run, each with a
# background process and a file of random content. A new cellad on the same data dir
# reattaches every one of them: all listed as running, each background process alive under
# the same pid (the agent's process table and the host's /proc agree), each file read back
# through the API with the sha256 it had before the kill. Then the same once more with the
# registry deleted while cellad is down: all of them are rebuilt from their identity files
# and reattached (docs/decisions/0035-registry-rebuild.md). The reattach and rebuild times
# are printed (docs/reliability.md has them), never judged.
. "$(dirname "$0")/lib.sh"

N=${FAULTS_SANDBOXES:-100}
P=8 # requests in flight
start_cellad --pool 0
PREFIX=$(sbx r)
WORK=$IT_TMP/faults
mkdir -p "$WORK"
export CELLA_URL PREFIX WORK

# prepare I: sandbox PREFIX<I> with a background process and /workspace/blob (random).
prepare() {
        local i=$1 name=$PREFIX$1 f=$WORK/$1
        curl -sS -f -o /dev/null -X PUT "$CELLA_URL/v1/sandboxes/$name" \
                -H 'Content-Type: application/json' -d '{"keepAlive":true,"network":"none"}' ||
                { echo "create $name failed" >&2; return 1; }
        curl -sS -f -o "$f.proc" -X POST "$CELLA_URL/v1/sandboxes/$name/processes" \
                -H 'Content-Type: application/json' \
                -d '{"command":"sleep 100000","processId":"bg"}' ||
                { echo "process in $name failed" >&2; return 1; }
        head -c $((16384 + i * 997)) /dev/urandom >"$f.blob"
        sha256sum <"$f.blob" | cut -d' ' -f1 >"$f.sha"
        curl -sS -f -o /dev/null -X PUT --data-binary "@$f.blob" \
                "$CELLA_URL/v1/sandboxes/$name/files?path=/workspace/blob" ||
                { echo "upload to $name failed" >&2; return 1; }
        jq -r .pid <"$f.proc" >"$f.pid"
}

# check I: after the restart, the same process under the same pid, the file unchanged.
check() {
        local name=$PREFIX$1 f=$WORK/$1 pid got
        pid=$(cat "$f.pid")
        curl -sS -f -o "$f.after" "$CELLA_URL/v1/sandboxes/$name/processes/bg" ||
                { echo "$name: process bg lost" >&2; return 1; }
        if [ "$(jq -r .pid <"$f.after")/$(jq -r .status <"$f.after")" != "$pid/running" ]; then
                echo "$name: process bg was pid $pid, now $(cat "$f.after")" >&2
                return 1
        fi
        got=$(curl -sS -f -X POST "$CELLA_URL/v1/sandboxes/$name/exec" \
                -H 'Content-Type: application/json' \
                -d "{\"command\":\"cat /proc/$pid/comm\"}" | jq -r .stdout)
        if [ "$got" != sleep ]; then
                echo "$name: pid $pid is [$got], not the sleep" >&2
                return 1
        fi
        got=$(curl -sS -f "$CELLA_URL/v1/sandboxes/$name/files?path=/workspace/blob" |
                sha256sum | cut -d' ' -f1)
        if [ "$got" != "$(cat "$f.sha")" ]; then
                echo "$name: /workspace/blob sha256 $got, was $(cat "$f.sha")" >&2
                return 1
        fi
}
export -f prepare check

info "$N sandboxes, each with a background process and a random file"
seq 0 $((N - 1)) | xargs -P $P -I{} bash -c 'prepare {}' || fail "preparing the sandboxes"
assert_eq "$N" "$(api GET /v1/sandboxes | jq '[.sandboxes[] | select(.state == "running")] | length')" \
        "running sandboxes before the kill"
# "slot pid" of every process in this daemon's sandboxes' cgroups (one pass over /proc).
all_pids() {
        grep -o "/$IT_CGPARENT/s[0-9]*" /proc/[0-9]*/cgroup 2>/dev/null |
                sed -n 's|^/proc/\([0-9]*\)/cgroup:.*/s\([0-9]*\)$|\2 \1|p' | sort -u
}
before=$(all_pids)
assert_eq "$N" "$(echo "$before" | cut -d' ' -f1 | sort -u | wc -l)" "sandboxes with processes"

info "SIGKILL cellad"
kill -KILL "$CELLAD_PID"
wait "$CELLAD_PID" 2>/dev/null || true
CELLAD_PID=
mv "$CELLAD_LOG" "$IT_TMP/cellad-1.log"

start_cellad --pool 0
reattached=$(grep -c "sandbox '$PREFIX[0-9]*' reattached" "$CELLAD_LOG" || true)
assert_eq "$N" "$reattached" "sandboxes reattached"
line=$(grep -o 'registry: [0-9]* sandboxes, [0-9]* reattached.*' "$CELLAD_LOG" || true)
[ -n "$line" ] || fail "cellad did not log the registry load"
info "$line"
assert_eq "$N" "$(api GET /v1/sandboxes | jq '[.sandboxes[] | select(.state == "running")] | length')" \
        "running sandboxes after the restart"
[ "$before" = "$(all_pids)" ] ||
        fail "host pids changed across the restart: $(diff <(echo "$before") <(all_pids) | head)"
seq 0 $((N - 1)) | xargs -P $P -I{} bash -c 'check {}' || fail "sandboxes after the restart"
before=$(all_pids) # the execs started each sandbox's default session

info "SIGKILL cellad again and delete its registry: rebuilt from the $N identity files"
kill -KILL "$CELLAD_PID"
wait "$CELLAD_PID" 2>/dev/null || true
CELLAD_PID=
mv "$CELLAD_LOG" "$IT_TMP/cellad-2.log"
rm "$IT_TMP/data/cella.db"
start_cellad --pool 0
line=$(grep -o 'registry: rebuilt from .*' "$CELLAD_LOG" || true)
info "$line"
assert_contains "$line" "from $N identity files ($N sandboxes running" "the rebuild"
info "$(grep -o 'registry: [0-9]* sandboxes, [0-9]* reattached.*' "$CELLAD_LOG" || true)"
assert_eq "$N" "$(grep -c "sandbox '$PREFIX[0-9]*' reattached" "$CELLAD_LOG" || true)" \
        "sandboxes reattached after the rebuild"
assert_eq "$N" "$(api GET /v1/sandboxes | jq '[.sandboxes[] | select(.state == "running")] | length')" \
        "running sandboxes after the rebuild"
[ "$before" = "$(all_pids)" ] ||
        fail "host pids changed across the rebuild: $(diff <(echo "$before") <(all_pids) | head)"
seq 0 $((N - 1)) | xargs -P $P -I{} bash -c 'check {}' || fail "sandboxes after the rebuild"
info "restart of $N: ok"
seq 0 $((N - 1)) | xargs -P $P -I{} curl -sS -f -o /dev/null -X DELETE \
        "$CELLA_URL/v1/sandboxes/$PREFIX{}" || fail "destroying the sandboxes"
