#!/bin/bash
# Disk promised beyond the host (decision 0036): sandbox disks are sparse images, so the
# daemon counts each image's full size as promised, sets the sum against the size of the
# data dir's filesystem and, past --disk-overcommit (a ratio), warns or refuses new
# sandboxes (507 INSUFFICIENT_STORAGE) under --disk-overcommit-policy. The ratio is chosen here so
# that two 64 MiB disks fit and a third does not, whatever the size of the filesystem
# the test's data dir is on. /v1/health reports the figures; cellad --check the policy.
. "$(dirname "$0")/lib.sh"

"$CELLA_BUILD/cellad" --check >"$IT_TMP/check" 2>&1 || fail "cellad --check: $(cat "$IT_TMP/check")"
grep -q "disk limits enforced" "$IT_TMP/check" || skip "disk limits not enforceable here: $(cat "$IT_TMP/check")"

info "cellad --check names the data dir's filesystem and the policy"
"$CELLA_BUILD/cellad" --check --data-dir "$IT_TMP/nonexistent/data" --disk-overcommit 4 \
        --disk-overcommit-policy refuse >"$IT_TMP/check" 2>&1 || fail "cellad --check with the options"
assert_contains "$(cat "$IT_TMP/check")" "disk: data dir $IT_TMP/nonexistent/data on a filesystem of" "--check line"
assert_contains "$(cat "$IT_TMP/check")" "up to 4.00 x" "--check ratio"
assert_contains "$(cat "$IT_TMP/check")" "refuses new sandboxes" "--check policy"

info "option errors"
for bad in 0 -1 abc 1x 1001 nan ''; do
        if "$CELLA_BUILD/cellad" --disk-overcommit "$bad" --check >"$IT_TMP/err" 2>&1; then
                fail "--disk-overcommit '$bad' accepted"
        fi
        assert_contains "$(cat "$IT_TMP/err")" "bad --disk-overcommit" "error for '$bad'"
done
if "$CELLA_BUILD/cellad" --disk-overcommit-policy maybe --check >"$IT_TMP/err" 2>&1; then
        fail "--disk-overcommit-policy maybe accepted"
fi
assert_contains "$(cat "$IT_TMP/err")" "warn or refuse" "policy error"

MIB64=$((64 * 1024 * 1024))
mkdir -p "$IT_TMP/data"
read -r blocks bsize < <(stat -f -c '%b %S' "$IT_TMP/data")
CAPACITY=$((blocks * bsize))
# Room for 2.5 disks of 64 MiB.
RATIO=$(awk -v c="$CAPACITY" -v d="$MIB64" 'BEGIN { printf "%.15f", 2.5 * d / c }')
info "filesystem of $CAPACITY bytes: --disk-overcommit $RATIO"

ARGS=(--pool 0 --disk-quota required --disk-limit-override 64M --disk-overcommit "$RATIO")

start_cellad "${ARGS[@]}" --disk-overcommit-policy refuse
api GET /v1/health >/dev/null
expect_status 200
assert_eq "$CAPACITY" "$(body .disk.capacityBytes)" "capacityBytes"
assert_eq 0 "$(body .disk.promisedBytes)" "promisedBytes of an empty daemon"
assert_eq refuse "$(body .disk.overcommitPolicy)" "overcommitPolicy"
assert_eq false "$(body .disk.overcommitted)" "overcommitted"
[ "$(body .disk.freeBytes)" -gt 0 ] || fail "freeBytes $(body .disk.freeBytes)"

A=$(sbx one)
B=$(sbx two)
C=$(sbx three)
info "two disks fit, a third is refused with 507 and nothing is made"
api_json PUT "/v1/sandboxes/$A" '{}'
expect_status 201
api_json POST "/v1/sandboxes/$B/exec" '{"command":"echo made"}'
expect_status 200
api GET /v1/health >/dev/null
assert_eq $((2 * MIB64)) "$(body .disk.promisedBytes)" "promisedBytes of two sandboxes"
api_json PUT "/v1/sandboxes/$C" '{}'
expect_status 507 INSUFFICIENT_STORAGE
assert_contains "$(body .message)" "--disk-overcommit" "the refusal names the option"
api_json POST "/v1/sandboxes/$C/exec" '{"command":"echo no"}'
expect_status 507 INSUFFICIENT_STORAGE
api GET /v1/sandboxes >/dev/null
assert_eq 2 "$(body '.sandboxes | length')" "sandboxes after the refusals"
assert_eq 0 "$(grep -c "sandbox '$C'" "$CELLAD_LOG" || true)" "log lines of a sandbox that was refused"

info "a stopped sandbox keeps its promise: after a SIGKILLed daemon, both still count"
kill -KILL "$CELLAD_PID"
wait "$CELLAD_PID" 2>/dev/null || true
CELLAD_PID=
for p in $(sandbox_pids "$B"); do kill -KILL "$p" 2>/dev/null || true; done
for i in $(seq 1 50); do [ -z "$(sandbox_pids "$B")" ] && break; sleep 0.1; done
start_cellad "${ARGS[@]}" --disk-overcommit-policy refuse
api GET /v1/health >/dev/null
assert_eq $((2 * MIB64)) "$(body .disk.promisedBytes)" "promisedBytes after the restart"
api_json PUT "/v1/sandboxes/$C" '{}'
expect_status 507 INSUFFICIENT_STORAGE

info "destroying one makes room"
api DELETE "/v1/sandboxes/$A" >/dev/null
expect_status 200
api_json PUT "/v1/sandboxes/$C" '{}'
expect_status 201
assert_eq "$MIB64" "$(body .disk.limitBytes)" "the new sandbox's disk"

info "policy warn: past the ratio a sandbox is made, the daemon says so"
kill -TERM "$CELLAD_PID"
wait "$CELLAD_PID" 2>/dev/null || true
CELLAD_PID=
start_cellad "${ARGS[@]}"
D=$(sbx four)
api_json PUT "/v1/sandboxes/$D" '{}'
expect_status 201
api GET /v1/health >/dev/null
assert_eq warn "$(body .disk.overcommitPolicy)" "default policy"
assert_eq true "$(body .disk.overcommitted)" "overcommitted"
assert_eq $((3 * MIB64)) "$(body .disk.promisedBytes)" "promisedBytes of three sandboxes"
grep -q "promised to sandboxes, more than" "$CELLAD_LOG" || fail "no warning in the log"
info "and back under it once sandboxes are gone"
api DELETE "/v1/sandboxes/$D" >/dev/null
api DELETE "/v1/sandboxes/$C" >/dev/null
api_json PUT "/v1/sandboxes/$A" '{}'
expect_status 201
api GET /v1/health >/dev/null
assert_eq false "$(body .disk.overcommitted)" "overcommitted after destroys"
grep -q "within .* the data dir's .* again" "$CELLAD_LOG" || fail "no log line when back under the ratio"

info "disk-overcommit: ok"
