#!/bin/bash
# The cella CLI against a real cellad: exec (exit status, stdin/stdout bytes, timeout 124),
# write/read, ls/mkdir/mv/rm, create/info/list/destroy, health.
. "$(dirname "$0")/lib.sh"
start_cellad
CLI=$CELLA_BUILD/cella
[ -x "$CLI" ] || fail "no $CLI"

S=$(sbx cli)

info "health"
"$CLI" health >"$IT_TMP/out" || fail "cella health failed"

info "exec: output bytes and exit status"
# COMMAND words are joined with spaces into one shell command line (like ssh).
"$CLI" exec "$S" "printf 'a\\0b\\n'" >"$IT_TMP/out" || fail "cella exec failed"
assert_eq "$(printf 'a\0b\n' | od -An -c)" "$(od -An -c <"$IT_TMP/out")" "exec bytes"
set +e
"$CLI" exec "$S" 'echo err >&2; exit 42' 2>"$IT_TMP/err" >"$IT_TMP/out"
rc=$?
set -e
assert_eq 42 "$rc" "exit status passed through"
assert_eq err "$(cat "$IT_TMP/err")" "stderr"
assert_eq "" "$(cat "$IT_TMP/out")" "stdout"
set +e
"$CLI" exec "$S" --timeout 1000 sleep 30 >/dev/null 2>&1
rc=$?
set -e
assert_eq 124 "$rc" "timeout exit status"
assert_eq "/tmp
v" "$("$CLI" exec "$S" --cwd /tmp --env K=v 'pwd; echo $K')" "cwd and env"

info "write/read"
head -c 300000 /dev/urandom >"$IT_TMP/blob"
"$CLI" write "$S" /workspace/blob <"$IT_TMP/blob" || fail "cella write"
"$CLI" read "$S" /workspace/blob >"$IT_TMP/back" || fail "cella read"
cmp "$IT_TMP/blob" "$IT_TMP/back" || fail "write/read round trip differs"

info "mkdir, ls, mv, rm"
"$CLI" mkdir "$S" /workspace/d/e -p || fail "cella mkdir -p"
"$CLI" mv "$S" /workspace/blob /workspace/d/e/blob2 || fail "cella mv"
assert_contains "$("$CLI" ls "$S" /workspace/d -r)" blob2 "ls -r"
"$CLI" ls "$S" /workspace/d -r --json | jq -e . >/dev/null || fail "ls --json is not JSON"
"$CLI" rm "$S" /workspace/d -r || fail "cella rm -r"
set +e
"$CLI" read "$S" /workspace/d/e/blob2 >/dev/null 2>&1
rc=$?
set -e
assert_ne 0 "$rc" "read of a removed file"

info "create, info, list, destroy"
C=$(sbx created)
"$CLI" create "$C" --env A=1 >/dev/null || fail "cella create"
assert_eq "$C" "$("$CLI" info "$C" --json | jq -r .id)" "info --json"
assert_contains "$("$CLI" list --json | jq -r '.sandboxes[].id' 2>/dev/null ||
        "$CLI" list --json | jq -r '.[].id')" "$C" "list --json"
assert_eq 1 "$("$CLI" exec "$C" 'echo $A')" "create --env"
"$CLI" destroy "$C" >/dev/null || fail "cella destroy"
left=$(wait_empty sandbox_cgroups "$C") || fail "cgroups left after cella destroy: $left"
set +e
"$CLI" info "$C" >/dev/null 2>&1
rc=$?
set -e
assert_ne 0 "$rc" "info of a destroyed sandbox"

info "a wrong CELLA_URL fails cleanly"
set +e
CELLA_URL=http://127.0.0.1:1 "$CLI" health >/dev/null 2>&1
rc=$?
set -e
assert_ne 0 "$rc" "health against a closed port"
