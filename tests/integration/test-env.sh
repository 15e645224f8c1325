#!/bin/bash
# setEnvVars for the sandbox: strings set (empty too), null unsets, names must be
# identifiers; per-command env wins for that command only; the sandbox env is in the
# registry and survives a daemon restart.
. "$(dirname "$0")/lib.sh"
start_cellad

S=$(sbx envs)
api_json POST "/v1/sandboxes/$S/env" '{"vars":{"GREETING":"hello world","EMPTY":"","DROP":"x"}}'
expect_status 200
assert_eq 'hello world|set-empty|x' \
        "$(run_in "$S" 'printf "%s|%s|%s" "$GREETING" "${EMPTY+set-empty}" "$DROP"')" "set"
api_json POST "/v1/sandboxes/$S/env" '{"vars":{"DROP":null}}'
expect_status 200
assert_eq unset "$(run_in "$S" 'printf "%s" "${DROP-unset}"')" "null unsets"

api_json POST "/v1/sandboxes/$S/exec" '{"command":"printf %s \"$GREETING\"","env":{"GREETING":"per-command"}}'
expect_status 200
assert_eq per-command "$(body .stdout)" "per-command env wins"
assert_eq 'hello world' "$(run_in "$S" 'printf "%s" "$GREETING"')" "and does not persist"

api_json POST "/v1/sandboxes/$S/env" '{"vars":{"BAD-NAME":"x"}}'
expect_status 400 VALIDATION_FAILED
api_json POST "/v1/sandboxes/$S/env" '{"vars":{"A":1}}'
expect_status 400 VALIDATION_FAILED
api_json POST "/v1/sandboxes/$S/env" '{"vars":[]}'
expect_status 400 VALIDATION_FAILED
api GET "/v1/sandboxes/$S/env" >/dev/null
expect_status 405 METHOD_NOT_ALLOWED

info "CLI: cella env set"
"$CELLA_BUILD/cella" env set "$S" CLI_VAR=from-cli >/dev/null || fail "cella env set"
assert_eq from-cli "$(run_in "$S" 'printf %s "$CLI_VAR"')" "set by the CLI"
"$CELLA_BUILD/cella" env set "$S" CLI_VAR >/dev/null || fail "cella env set (unset)"
assert_eq gone "$(run_in "$S" 'printf %s "${CLI_VAR-gone}"')" "unset by the CLI"

info "survives a daemon restart (SIGTERM: sandboxes are kept)"
kill -TERM "$CELLAD_PID"
wait "$CELLAD_PID" 2>/dev/null || true
CELLAD_PID=
start_cellad
assert_eq 'hello world' "$(run_in "$S" 'printf "%s" "$GREETING"')" "env after restart"
info "env: ok"
