#!/bin/bash
# Faults: the registry (DATA/cella.db) deleted, overwritten with garbage, or truncated to
# half while cellad is down and its sandboxes run. Each time cellad starts, keeps what was
# there as cella.db.corrupt-<time> (never deletes it), logs what it found, and rebuilds the
# registry from the sandboxes' identity files (docs/decisions/0035-registry-rebuild.md):
# the running sandboxes are listed and reattached (background process under the same pid,
# files intact), a sandbox whose PID 1 died meanwhile comes back stopped with its files,
# warm-pool sandboxes are removed, and the API says nothing false: what the identity file
# keeps (image, instance type, createdAt, network, sleepAfter, keepAlive) is as it was,
# what only the registry held (env, labels, exposed ports) is reported empty, and the old
# preview URL no longer opens anything. The rebuild time is printed, never judged.
. "$(dirname "$0")/lib.sh"
command -v sqlite3 >/dev/null || skip "needs sqlite3 (scripts/deps.sh)"

DB=$IT_TMP/data/cella.db
start_cellad --pool 2
wait_pool_ready 2
A=$(sbx keep)
B=$(sbx other)
C=$(sbx dies)
api_json PUT "/v1/sandboxes/$A" \
        '{"keepAlive":true,"sleepAfter":"2h","env":{"SECRET":"s1"},"labels":{"team":"x"},"network":"none"}'
expect_status 201
created_a=$(body .createdAt)
api_json POST "/v1/sandboxes/$A/processes" '{"command":"sleep 100000","processId":"bg"}'
expect_status 200
pid_a=$(body .pid)
head -c 300000 /dev/urandom >"$IT_TMP/blob"
sha_a=$(sha256sum <"$IT_TMP/blob" | cut -d' ' -f1)
api PUT "/v1/sandboxes/$A/files?path=/workspace/blob" --data-binary "@$IT_TMP/blob" >/dev/null
expect_status 200
api_json POST "/v1/sandboxes/$A/ports" '{"port":8000}'
expect_status 201
preview_host=$(body .url | sed 's|^http://||; s|[:/].*||')
api_json POST "/v1/sandboxes/$A/processes" \
        '{"command":"python3 -m http.server 8000 --directory /workspace","processId":"web"}'
expect_status 200
api_json POST "/v1/sandboxes/$A/processes/web/waitForPort" '{"port":8000,"timeout":60000}'
expect_status 200
# preview_status: the status of GET /blob through the old preview URL.
preview_status() {
        curl -sS -o /dev/null -w '%{http_code}' -H "X-Forwarded-Host: $preview_host" \
                "$CELLA_URL/blob" || true
}
assert_eq 200 "$(preview_status)" "preview URL before"
run_in "$B" 'echo b >/workspace/b.txt' >/dev/null
run_in "$C" 'echo c >/workspace/c.txt' >/dev/null

# check_rebuilt CASE: after a restart on a lost registry, everything above holds.
check_rebuilt() {
        local line
        line=$(grep -o 'registry: rebuilt from .*' "$CELLAD_LOG" || true)
        [ -n "$line" ] || fail "$1: no rebuild logged: $(cat "$CELLAD_LOG")"
        info "$1: $line"
        assert_contains "$line" "from 3 identity files" "$1: sandboxes rebuilt"
        api GET /v1/sandboxes >/dev/null
        expect_status 200
        assert_eq "$(printf '%s\n' "$A" "$B" "$C" | sort | tr '\n' ' ')" \
                "$(body '.sandboxes[].id' | sort | tr '\n' ' ')" "$1: listed"
        assert_eq 0 "$(body '[.sandboxes[].id | select(startswith("pool-"))] | length')" \
                "$1: pool sandboxes listed"
        api GET "/v1/sandboxes/$A" >/dev/null
        expect_status 200
        assert_eq running "$(body .state)" "$1: state of $A"
        assert_eq "$created_a" "$(body .createdAt)" "$1: createdAt of $A"
        assert_eq "true 7200 none default" \
                "$(body '"\(.keepAlive) \(.sleepAfter) \(.network) \(.image)"')" \
                "$1: options of $A"
        assert_eq '{} {}' "$(body '"\(.env | tojson) \(.labels | tojson)"')" "$1: env, labels of $A"
        api GET "/v1/sandboxes/$A/ports" >/dev/null
        expect_status 200
        assert_eq 0 "$(body '.ports | length')" "$1: exposed ports of $A"
        assert_eq 404 "$(preview_status)" "$1: the old preview URL"
        api GET "/v1/sandboxes/$A/processes/bg" >/dev/null
        expect_status 200
        assert_eq "$pid_a running" "$(body '"\(.pid) \(.status)"')" "$1: background process of $A"
        assert_eq "$sha_a" "$(curl -sS -f "$CELLA_URL/v1/sandboxes/$A/files?path=/workspace/blob" |
                sha256sum | cut -d' ' -f1)" "$1: file of $A"
        api GET "/v1/sandboxes/$B" >/dev/null
        assert_eq running "$(body .state)" "$1: state of $B"
        assert_eq b "$(run_in "$B" 'cat /workspace/b.txt')" "$1: file of $B"
        assert_eq c "$(run_in "$C" 'cat /workspace/c.txt')" "$1: file of $C"
        # The registry works: a change is kept over a plain restart.
        api_json POST "/v1/sandboxes/$B/env" '{"vars":{"AFTER":"1"}}'
        expect_status 200
        [ "$(sqlite3 "$DB" 'PRAGMA integrity_check')" = ok ] || fail "$1: registry not sound"
}

# down HOW: stop cellad (KILL or TERM) with the sandboxes running; C's PID 1 is killed.
down() {
        sandbox_pids "$C" >"$IT_TMP/c.pids"
        kill -"$1" "$CELLAD_PID"
        wait "$CELLAD_PID" 2>/dev/null || true
        CELLAD_PID=
        for p in $(cat "$IT_TMP/c.pids"); do kill -KILL "$p" 2>/dev/null || true; done
        for i in $(seq 1 50); do [ -z "$(sandbox_pids "$C")" ] && break; sleep 0.1; done
}

info "registry deleted while cellad is down (its -wal left behind)"
down KILL
[ -e "$DB-wal" ] || fail "no -wal after SIGKILL: the case is not the one meant"
rm "$DB"
start_cellad --pool 2
ls "$IT_TMP/data"/cella.db.corrupt-*-wal >/dev/null 2>&1 || fail "the stale -wal was not kept"
check_rebuilt deleted
api_json PUT "/v1/sandboxes/$A" '{"labels":{"team":"x"}}' # for the next case
expect_status 200

info "registry overwritten with garbage"
down TERM
head -c 65536 /dev/urandom >"$DB"
cp "$DB" "$IT_TMP/garbage"
rm -f "$IT_TMP/data"/cella.db.corrupt-*
start_cellad --pool 2
grep -q "registry $DB is damaged" "$CELLAD_LOG" || fail "damage not logged"
kept=$(ls "$IT_TMP/data"/cella.db.corrupt-* | grep -v -- '-wal$\|-shm$' | head -n 1)
[ -n "$kept" ] && cmp -s "$kept" "$IT_TMP/garbage" || fail "the damaged registry was not kept as it was"
check_rebuilt garbage

info "registry truncated to half"
down TERM
[ ! -e "$DB-wal" ] || [ ! -s "$DB-wal" ] || fail "-wal left after SIGTERM"
size=$(stat -c %s "$DB")
truncate -s $((size / 2)) "$DB"
cp "$DB" "$IT_TMP/half"
rm -f "$IT_TMP/data"/cella.db.corrupt-*
start_cellad --pool 2
grep -q "registry $DB is damaged" "$CELLAD_LOG" || fail "damage of the truncated registry not logged"
kept=$(ls "$IT_TMP/data"/cella.db.corrupt-* | grep -v -- '-wal$\|-shm$' | head -n 1)
[ -n "$kept" ] && cmp -s "$kept" "$IT_TMP/half" || fail "the truncated registry was not kept as it was"
check_rebuilt truncated

info "a plain restart on the rebuilt registry keeps what was set since"
down TERM
start_cellad --pool 2
! grep -q 'registry: rebuilt' "$CELLAD_LOG" || fail "rebuilt again from a sound registry"
api GET "/v1/sandboxes/$B" >/dev/null
assert_eq 1 "$(body .env.AFTER)" "env set after the rebuild"
assert_eq c "$(run_in "$C" 'cat /workspace/c.txt')" "file of $C"
info "registry faults: ok"
