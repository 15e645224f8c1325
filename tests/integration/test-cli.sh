#!/bin/bash
# The cella CLI against a real cellad: exec (exit status, stdin/stdout bytes, timeout 124),
# write/read, ls/mkdir/mv/rm, create/info/list/destroy, health; help for every command,
# --version, usage errors (exit 2, usage on stderr), the sandbox-name rule, one
# confirmation line per mutating command and --quiet, duration forms, the sleep settings in
# info and list, and expose's request for clients without *.localhost (curl and Python).
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

# rc_of COMMAND...: its exit status, stdout in $IT_TMP/out and stderr in $IT_TMP/err.
rc_of() {
        set +e
        "$@" >"$IT_TMP/out" 2>"$IT_TMP/err"
        RC=$?
        set -e
}

info "help for every command: cella help CMD, CMD --help, CMD -h"
rc_of "$CLI" --help
assert_eq 0 "$RC" "cella --help"
cmds=$(awk '/^commands:/ { on = 1; next } on && /^  [a-z]/ { print $1 } on && /^$/ { exit }' \
        "$IT_TMP/out")
for want in exec write read ls rm mkdir mv create info list destroy env session context code \
        shell watch start ps logs kill wait git expose ports unexpose image health help version; do
        assert_contains " $(echo $cmds) " " $want " "command list"
done
for cmd in $cmds; do
        rc_of "$CLI" help "$cmd"
        assert_eq 0 "$RC" "cella help $cmd"
        grep -q "^usage: cella $cmd" "$IT_TMP/out" || fail "cella help $cmd: no usage line"
        grep -q '^example:' "$IT_TMP/out" || fail "cella help $cmd: no example"
        cp "$IT_TMP/out" "$IT_TMP/help"
        for flag in --help -h; do
                rc_of "$CLI" "$cmd" "$flag"
                assert_eq 0 "$RC" "cella $cmd $flag"
                cmp -s "$IT_TMP/help" "$IT_TMP/out" || fail "cella $cmd $flag differs from help"
        done
done
rc_of "$CLI" help
assert_eq 0 "$RC" "cella help"
grep -q '^usage: cella' "$IT_TMP/out" || fail "cella help: no usage line"
rc_of "$CLI" help nosuch
assert_eq 2 "$RC" "help for an unknown command"

info "--version, version"
want="cella $(sed -n 's/^#define CELLA_VERSION "\(.*\)"$/\1/p' "$(dirname "$0")/../../include/cella/cella.h")"
rc_of "$CLI" --version
assert_eq "0 $want" "$RC $(cat "$IT_TMP/out")" "cella --version"
rc_of "$CLI" version
assert_eq "0 $want" "$RC $(cat "$IT_TMP/out")" "cella version"

info "usage errors: exit 2, usage on stderr, nothing on stdout"
for args in "nosuch" "ls $S --bogus" "--bogus health" "rm $S" "exec" "wait $S p" \
        "create $S --sleep-after" "help exec extra" "version 2" ""; do
        rc_of "$CLI" $args
        assert_eq 2 "$RC" "cella $args"
        grep -q '^usage: cella' "$IT_TMP/err" || fail "cella $args: no usage on stderr"
        assert_eq "" "$(cat "$IT_TMP/out")" "cella $args: stdout"
done
rc_of "$CLI" nosuch
assert_contains "$(cat "$IT_TMP/err")" "unknown command 'nosuch'"
rc_of "$CLI" ls "$S" --bogus
assert_contains "$(cat "$IT_TMP/err")" "unknown option '--bogus'"

info "a bad sandbox name: the rule, exit 2, no request"
for bad in My_Box box- "$(printf 'a%.0s' $(seq 64))" 'a b' default pool-1; do
        rc_of "$CLI" exec "$bad" true
        assert_eq 2 "$RC" "exec '$bad'"
        assert_contains "$(cat "$IT_TMP/err")" "invalid sandbox name" "'$bad'"
        assert_not_contains "$(cat "$IT_TMP/err")" normalizeId "'$bad'"
done
rc_of "$CLI" info My_Box
assert_contains "$(cat "$IT_TMP/err")" \
        "1-63 characters of lower-case a-z, 0-9 and '-', not starting or ending with '-'"
rc_of "$CLI" session ls Bad.Name
assert_eq 2 "$RC" "the NAME after a subcommand is checked too"
rc_of "$CLI" exec default true
assert_contains "$(cat "$IT_TMP/err")" "reserved"
api GET /v1/sandboxes >/dev/null
assert_eq 0 "$(body '[.sandboxes[].id | select(test("^it-'"$IT_RUN"'-") | not)] | length')" \
        "no sandbox made by a bad name"

info "one confirmation line per mutating command; --quiet silences them"
Q=$(sbx quiet)
# one_line WANT_PREFIX COMMAND...: exactly one line on stdout, starting with WANT_PREFIX,
# and the same command with -q prints nothing (run by quiet_too after undoing it).
one_line() {
        local want=$1
        shift
        rc_of "$CLI" "$@"
        assert_eq 0 "$RC" "cella $*: $(cat "$IT_TMP/err")"
        assert_eq 1 "$(wc -l <"$IT_TMP/out")" "cella $*: one line: $(cat "$IT_TMP/out")"
        assert_contains "$(cat "$IT_TMP/out")" "$want" "cella $*"
}
silent() {
        rc_of "$CLI" -q "$@"
        assert_eq 0 "$RC" "cella -q $*: $(cat "$IT_TMP/err")"
        assert_eq "" "$(cat "$IT_TMP/out")" "cella -q $*"
}
one_line "created sandbox '$Q'" create "$Q" --sleep-after 1h30m
one_line "updated sandbox '$Q'" create "$Q" --label a=b
silent create "$Q" --label a=c
echo data >"$IT_TMP/qdata"
one_line "wrote /workspace/q.txt" write "$Q" /workspace/q.txt <"$IT_TMP/qdata"
silent write "$Q" /workspace/q2.txt <"$IT_TMP/qdata"
one_line "created directory /workspace/d/e" mkdir "$Q" /workspace/d/e -p
silent mkdir "$Q" /workspace/d2 -p
one_line "moved /workspace/q.txt to /workspace/d/q.txt" mv "$Q" /workspace/q.txt /workspace/d/q.txt
silent mv "$Q" /workspace/q2.txt /workspace/d/q2.txt
one_line "removed /workspace/d/q.txt" rm "$Q" /workspace/d/q.txt
silent rm "$Q" /workspace/d -r
one_line "set 1 and unset 1 variables of sandbox '$Q'" env set "$Q" X=1 Y
silent env set "$Q" X=2
one_line qs session create "$Q" --id qs
rc_of "$CLI" -q session create "$Q" --id qs2
assert_eq qs2 "$(cat "$IT_TMP/out")" "session create prints its id with -q too (a result)"
one_line "set 1 and unset 0 variables of session qs" env set "$Q" --session qs A=1
one_line "removed session qs" session rm "$Q" qs
silent session rm "$Q" qs2
"$CLI" start "$Q" --id sl1 sleep 1000 >/dev/null
"$CLI" start "$Q" --id sl2 sleep 1000 >/dev/null
one_line "sl1 killed" kill "$Q" sl1 --signal KILL
silent kill "$Q" sl2 --signal KILL
one_line "unexposed port 8090" unexpose "$Q" 8090
silent unexpose "$Q" 8090
rc_of "$CLI" -q expose "$Q" 8090
assert_eq 1 "$(wc -l <"$IT_TMP/out")" "expose -q: the URL only"
assert_contains "$(cat "$IT_TMP/out")" "http://8090-$Q-" "expose -q prints the URL"
"$CLI" unexpose "$Q" 8090 >/dev/null
silent destroy "$Q"
one_line "sandbox '$Q' did not exist" destroy "$Q"
Q2=$(sbx quiet2)
"$CLI" -q create "$Q2" >/dev/null
one_line "destroyed sandbox '$Q2'" destroy "$Q2"
left=$(wait_empty sandbox_cgroups "$Q2") || fail "cgroups left after cella destroy: $left"

info "durations: one grammar for --timeout and --sleep-after"
D=$(sbx dur)
for form in "90:90" "30s:30" "10m:600" "1h:3600" "1h30m:5400" "2d:172800" "1m30s:90"; do
        "$CLI" -q create "$D" --sleep-after "${form%%:*}" || fail "--sleep-after ${form%%:*}"
        assert_eq "${form#*:}" "$("$CLI" info "$D" --json | jq .sleepAfter)" \
                "--sleep-after ${form%%:*}"
done
for bad in 1500ms 500ms 31d ten 1s1m 1.5s -1s ""; do
        rc_of "$CLI" create "$D" --sleep-after "$bad"
        assert_eq 2 "$RC" "--sleep-after '$bad'"
        assert_contains "$(cat "$IT_TMP/err")" "--sleep-after takes" "--sleep-after '$bad'"
done
rc_of "$CLI" exec "$D" --timeout 1s sleep 30
assert_eq 124 "$RC" "--timeout 1s"
rc_of "$CLI" exec "$D" --timeout 1500ms sleep 30
assert_eq 124 "$RC" "--timeout 1500ms"
rc_of "$CLI" exec "$D" --timeout 1m 'echo in-time'
assert_eq "0 in-time" "$RC $(cat "$IT_TMP/out")" "--timeout 1m"
for bad in 0 12x 8d 1h-1m; do
        rc_of "$CLI" exec "$D" --timeout "$bad" true
        assert_eq 2 "$RC" "--timeout '$bad'"
        assert_contains "$(cat "$IT_TMP/err")" "--timeout takes" "--timeout '$bad'"
done
"$CLI" start "$D" --id w sleep 1000 >/dev/null
rc_of "$CLI" wait "$D" w --log never --timeout 300ms
assert_eq 124 "$RC" "wait --timeout 300ms"
assert_eq 1 "$("$CLI" kill "$D" --all --json | jq .killed)" "kill --all --json"
rc_of "$CLI" session create "$D" --id ts --timeout 1s
"$CLI" exec "$D" --session ts 'sleep 30' >/dev/null 2>&1 && fail "session --timeout 1s not applied"

info "sleep settings, state and last activity in info and list"
"$CLI" -q create "$D" --sleep-after 1h30m
out=$("$CLI" info "$D")
assert_contains "$out" "state:         running"
assert_contains "$out" "sleep after:   1h30m without activity"
assert_contains "$out" "background processes, sessions and code contexts stop"
assert_contains "$out" "keep alive:    no"
echo "$out" | grep -Eq '^last active:   20[0-9-]+T[0-9:.]+Z \(([0-9a-z]+ ago|just now)\)$' ||
        fail "info: last active: $out"
K=$(sbx keep)
"$CLI" -q create "$K" --keep-alive
assert_contains "$("$CLI" info "$K")" "sleep after:   never (keep alive)"
for list in list ls ps; do
        out=$("$CLI" $list)
        assert_contains "$(echo "$out" | head -1)" "NAME" "$list header"
        assert_contains "$(echo "$out" | head -1)" "SLEEP AFTER" "$list header"
        assert_contains "$(echo "$out" | head -1)" "LAST ACTIVE" "$list header"
        echo "$out" | grep -Eq "^$D +running +1h30m +([0-9a-z]+ ago|just now) +default " ||
                fail "cella $list: no row for $D: $out"
        echo "$out" | grep -Eq "^$K +running +never " || fail "cella $list: no row for $K: $out"
done
"$CLI" -q destroy "$K"

info "expose: the preview URL, then the request that needs no DNS (curl, Python)"
"$CLI" start "$D" --id web -- python3 -m http.server 8080 --directory /workspace >/dev/null
echo preview-ok | "$CLI" -q write "$D" /workspace/index.txt
"$CLI" wait "$D" web --port 8080 --timeout 30s
out=$("$CLI" expose "$D" 8080)
assert_eq 2 "$(echo "$out" | wc -l)" "expose prints two lines"
url=$(echo "$out" | sed -n 1p)
hint=$(echo "$out" | sed -n 2p)
host=${url#http://}
host=${host%%/*}
assert_eq "  without DNS: curl -H 'Host: $host' $CELLA_URL/" "$hint" "the hint"
cmd=${hint#  without DNS: }
assert_eq preview-ok "$(eval "$cmd"index.txt -sS)" "the printed curl command"
got=$(python3 - "$CELLA_URL/index.txt" "$host" <<'PY'
import sys, urllib.request
req = urllib.request.Request(sys.argv[1], headers={"Host": sys.argv[2]})
print(urllib.request.urlopen(req, timeout=30).read().decode().strip())
PY
) || fail "python3 urllib through the Host header"
assert_eq preview-ok "$got" "python3 urllib with the Host header"
assert_eq "$url" "$("$CLI" expose "$D" 8080 --json | jq -r .url)" "expose --json: the URL"
"$CLI" expose "$D" 8080 --json | jq -e . >/dev/null || fail "expose --json is not JSON alone"
out=$("$CLI" ports "$D")
assert_eq "PORT   STATUS  NAME             URL" "$(echo "$out" | head -1)" "ports header unchanged"
assert_contains "$out" "8080   active" "ports row"
assert_eq 8080 "$("$CLI" ports "$D" --json | jq -r '.ports[0].port')" "ports --json"
info "cli: ok"
