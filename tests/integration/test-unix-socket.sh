#!/bin/bash
# The API on a unix socket (cellad --listen unix:PATH, decision 0061): the socket's mode
# (0660 unless --unix-mode) and group; a client on it needs no token where TCP needs one,
# a tenant's key still scopes it, a wrong key is refused, a foreign Host or Origin is
# refused; exec (buffered and SSE), byte-exact round trips of a 40 MiB file by curl
# --unix-socket and by the CLI (CELLA_URL=unix:PATH and unix:///PATH), a missing file and a
# path that cannot be one refused with the API's codes, an upload past the disk's limit
# answered 507 NO_SPACE with the target kept and no temporary file left; the bad option
# values refused before the start; the socket removed when cellad stops.
. "$(dirname "$0")/lib.sh"

info "bad values refused before the start"
for bad in "--listen unix:relative.sock" "--unix-mode 0600" \
        "--listen unix:$IT_TMP/x.sock --unix-mode 999" \
        "--listen unix:$IT_TMP/x.sock --unix-group no-such-group-here" \
        "--listen unix:$IT_TMP/x.sock --cluster etcd=http://127.0.0.1:1 --node n --advertise http://127.0.0.1:1"; do
        # shellcheck disable=SC2086
        rc=0
        "$CELLA_BUILD/cellad" $bad --data-dir "$IT_TMP/nodata" >"$IT_TMP/bad.out" 2>&1 || rc=$?
        assert_eq 2 "$rc" "cellad $bad: $(cat "$IT_TMP/bad.out")"
done
[ ! -e "$IT_TMP/x.sock" ] || fail "a refused start made the socket"

SOCK=$IT_TMP/cellad.sock
CELLA_TOKEN=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
export CELLA_TOKEN
start_cellad --listen "unix:$SOCK" --disk-quota required --disk-limit-override 64M
assert_contains "$(cat "$CELLAD_LOG")" "cellad listening on unix:$SOCK" "the ready line"
assert_eq "socket 660 0" "$(stat -c '%F %a %g' "$SOCK")" "the socket's type, mode and group"

# U METHOD PATH [curl args...]: over the socket, without a token; body in $IT_TMP/ubody,
# status in U_STATUS
U_STATUS=
U() {
        local method=$1 path=$2
        shift 2
        U_STATUS=$(curl -sS --unix-socket "$SOCK" -o "$IT_TMP/ubody" -w '%{http_code}' \
                -X "$method" "$@" "http://localhost$path") || U_STATUS=000
}
ubody() { jq -r "$1" <"$IT_TMP/ubody"; }

info "no token over the socket; TCP still needs one"
unset_token=$CELLA_TOKEN
CELLA_TOKEN= api GET /v1/sandboxes >/dev/null
expect_status 401 UNAUTHORIZED
U GET /v1/sandboxes
assert_eq 200 "$U_STATUS" "list over the socket: $(cat "$IT_TMP/ubody")"
U GET /v1/sandboxes -H 'Authorization: Bearer not-the-token'
assert_eq 200 "$U_STATUS" "a bearer that is no tenant key is the admin's over the socket"
CELLA_TOKEN=$unset_token

info "foreign Host and Origin refused over the socket"
U GET /v1/sandboxes -H 'Host: evil.example'
assert_eq 403 "$U_STATUS" "foreign Host"
assert_eq PERMISSION_DENIED "$(ubody .code)" "foreign Host's code"
U GET /v1/sandboxes -H 'Origin: http://evil.example'
assert_eq 403 "$U_STATUS" "foreign Origin"

info "a tenant's key over the socket is the tenant; a wrong key is refused"
S=$(sbx usock)
U PUT "/v1/sandboxes/$S" -H 'Content-Type: application/json' -d '{}'
assert_eq 201 "$U_STATUS" "create over the socket: $(cat "$IT_TMP/ubody")"
api_json POST /v1/keys '{"tenant":"usock"}'
expect_status 201
KEY=$(body .key)
U GET "/v1/sandboxes/$S" -H "Authorization: Bearer $KEY"
assert_eq 404 "$U_STATUS" "the admin's sandbox is not the tenant's"
U GET /v1/sandboxes -H "Authorization: Bearer $KEY"
assert_eq 200 "$U_STATUS" "the tenant's list"
assert_eq 0 "$(ubody '.sandboxes | length')" "the tenant sees none of the admin's"
U GET /v1/sandboxes -H "Authorization: Bearer ${KEY%?}x"
assert_eq 401 "$U_STATUS" "a wrong key"

info "exec, buffered and SSE, over the socket"
U POST "/v1/sandboxes/$S/exec" -H 'Content-Type: application/json' -d '{"command":"echo hi; (exit 3)"}'
assert_eq 200 "$U_STATUS" "exec"
assert_eq "hi" "$(ubody .stdout | tr -d '\n')" "exec stdout"
assert_eq 3 "$(ubody .exitCode)" "exec exit code"
curl -sS -N --unix-socket "$SOCK" -H 'Accept: text/event-stream' -H 'Content-Type: application/json' \
        -d '{"command":"for i in 1 2 3; do echo line$i; done"}' \
        "http://localhost/v1/sandboxes/$S/exec" >"$IT_TMP/sse" || fail "SSE exec"
for i in 1 2 3; do assert_contains "$(cat "$IT_TMP/sse")" "line$i" "SSE event $i"; done
assert_contains "$(cat "$IT_TMP/sse")" '"exitCode":0' "SSE exit event"

info "40 MiB round trips over the socket: curl and the CLI"
head -c $((40 * 1024 * 1024)) /dev/urandom >"$IT_TMP/big"
want=$(md5sum <"$IT_TMP/big" | cut -d' ' -f1)
U PUT "/v1/sandboxes/$S/files?path=/workspace/a/big.bin" -T "$IT_TMP/big"
assert_eq 200 "$U_STATUS" "curl -T over the socket: $(cat "$IT_TMP/ubody")"
assert_eq $((40 * 1024 * 1024)) "$(ubody .size)" "the upload's size"
curl -sS -f --unix-socket "$SOCK" -o "$IT_TMP/back" \
        "http://localhost/v1/sandboxes/$S/files?path=/workspace/a/big.bin" || fail "curl -o"
assert_eq "$want" "$(md5sum <"$IT_TMP/back" | cut -d' ' -f1)" "curl -o over the socket"
assert_eq "$want" "$(run_in "$S" 'md5sum </workspace/a/big.bin | cut -d" " -f1; rm /workspace/a/big.bin')" \
        "md5 inside"
rm -f "$IT_TMP/back"
CELLA_URL=unix:$SOCK CELLA_TOKEN= "$CELLA_BUILD/cella" write "$S" /workspace/b.bin <"$IT_TMP/big" \
        >/dev/null || fail "cella write over the socket"
CELLA_URL=unix://$SOCK CELLA_TOKEN= "$CELLA_BUILD/cella" read "$S" /workspace/b.bin >"$IT_TMP/back" ||
        fail "cella read over the socket (unix:// form)"
assert_eq "$want" "$(md5sum <"$IT_TMP/back" | cut -d' ' -f1)" "cella write then read"
rm -f "$IT_TMP/back"
"$CELLA_BUILD/cella" --url "unix:$SOCK" ls "$S" /workspace >"$IT_TMP/ls" || fail "cella ls --url unix:"
assert_contains "$(cat "$IT_TMP/ls")" "b.bin" "cella ls over the socket"
rc=0
CELLA_URL=unix:relative.sock "$CELLA_BUILD/cella" ls >/dev/null 2>&1 || rc=$?
assert_ne 0 "$rc" "a relative unix: URL"

info "refused paths keep the API's codes over the socket"
rc=0
CELLA_URL=unix:$SOCK "$CELLA_BUILD/cella" read "$S" /workspace/missing >"$IT_TMP/back" \
        2>"$IT_TMP/err" || rc=$?
assert_ne 0 "$rc" "cella read of a missing file"
assert_contains "$(cat "$IT_TMP/err")" FILE_NOT_FOUND "cella read's error"
assert_eq 0 "$(stat -c %s "$IT_TMP/back")" "nothing written for a missing file"
U PUT "/v1/sandboxes/$S/files?path=/workspace/a" --data-binary x
assert_eq 400 "$U_STATUS" "an upload over a directory"
assert_eq IS_DIRECTORY "$(ubody .code)" "its code"
U GET "/v1/sandboxes/$S/files?path=/workspace/a"
assert_eq 400 "$U_STATUS" "a download of a directory"

info "an upload past the disk's limit: 507 NO_SPACE, the target kept, no temporary file"
run_in "$S" 'rm -f /workspace/b.bin; echo keep >/workspace/t.txt' >/dev/null
before=$(run_in "$S" 'ls -A /workspace | tr "\n" " "')
head -c $((80 * 1024 * 1024)) /dev/zero >"$IT_TMP/eighty"
rc=0
CELLA_URL=unix:$SOCK "$CELLA_BUILD/cella" write "$S" /workspace/t.txt <"$IT_TMP/eighty" \
        >/dev/null 2>"$IT_TMP/err" || rc=$?
assert_ne 0 "$rc" "cella write past the limit"
assert_contains "$(cat "$IT_TMP/err")" NO_SPACE "cella write's error"
U PUT "/v1/sandboxes/$S/files?path=/workspace/t.txt" -T "$IT_TMP/eighty"
assert_eq 507 "$U_STATUS" "curl -T past the limit"
assert_eq NO_SPACE "$(ubody .code)" "its code"
assert_eq keep "$(run_in "$S" 'cat /workspace/t.txt')" "the target is unchanged"
assert_eq "$before" "$(run_in "$S" 'ls -A /workspace | tr "\n" " "')" "no temporary file left"

info "the socket goes when cellad stops"
U DELETE "/v1/sandboxes/$S"
assert_eq 200 "$U_STATUS" "delete over the socket"
kill -TERM "$CELLAD_PID"
wait "$CELLAD_PID" 2>/dev/null || true
CELLAD_PID=
[ ! -e "$SOCK" ] || fail "the socket is left after cellad stopped"
info "unix socket: ok"
