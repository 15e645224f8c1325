#!/bin/bash
# Files: raw binary round trip (5 MiB by sha256), downloads from the host (md5, symlinks
# out of the sandbox and swapped under the downloads, special files, rights, a
# PID 1 killed under a download, a sleeping sandbox), JSON read/write utf-8 and base64,
# list/mkdir/mv/rm/exists and their errors; names that are not UTF-8 (pathEncoding=base64)
# and paths that cannot be one.
. "$(dirname "$0")/lib.sh"
start_cellad

S=$(sbx files)
F=/v1/sandboxes/$S/files

info "5 MiB binary write/read round trip"
head -c $((5 * 1024 * 1024)) /dev/urandom >"$IT_TMP/big"
api PUT "$F?path=/workspace/big.bin" --data-binary @"$IT_TMP/big" >/dev/null
expect_status 200
assert_eq $((5 * 1024 * 1024)) "$(body .size)" "written size"
want=$(sha256sum <"$IT_TMP/big" | cut -d' ' -f1)
curl -sS -o "$IT_TMP/back" "$CELLA_URL$F?path=/workspace/big.bin" || fail "GET file"
assert_eq "$want" "$(sha256sum <"$IT_TMP/back" | cut -d' ' -f1)" "read back sha256"
assert_eq "$want" "$(run_in "$S" 'sha256sum /workspace/big.bin | cut -d" " -f1')" \
        "sha256 inside"
# mode
api PUT "$F?path=run.sh&mode=0755" --data-binary $'#!/bin/sh\necho ran\n' >/dev/null
expect_status 200
assert_eq ran "$(run_in "$S" './run.sh')" "executable written with mode"

info "JSON write/read utf-8 and base64"
api_json POST "$F/write" '{"path":"/workspace/t.txt","content":"héllo\nwörld ☃\n"}'
expect_status 200
api_json POST "$F/read" '{"path":"/workspace/t.txt"}'
expect_status 200
assert_eq '"héllo\nwörld ☃\n"' "$(jq -c .content <"$IT_TMP/body")" "utf-8 content"
assert_eq false "$(body .isBinary)" "isBinary"
b64=$(printf '\000\001\377binary' | base64)
api_json POST "$F/write" "{\"path\":\"/workspace/b.bin\",\"content\":\"$b64\",\"encoding\":\"base64\"}"
expect_status 200
assert_eq 9 "$(body .size)" "base64 written size"
api_json POST "$F/read" '{"path":"/workspace/b.bin","encoding":"base64"}'
expect_status 200
assert_eq "$b64" "$(body .content)" "base64 content"
assert_eq base64 "$(body .encoding)" "encoding"
assert_eq "0001ff" "$(run_in "$S" 'head -c 3 /workspace/b.bin | od -An -tx1 | tr -d " \n"')" \
        "bytes inside"

info "mkdir, exists, list, move, delete"
api_json POST "$F/mkdir" '{"path":"/workspace/a/b/c","recursive":true}'
expect_status 200
api_json POST "$F/mkdir" '{"path":"/workspace/x/y"}'
assert_ne 200 "$API_STATUS" "mkdir without recursive of a missing parent"
api GET "$F/exists?path=/workspace/a/b/c" >/dev/null
expect_status 200
assert_eq true "$(body .exists)" "exists"
api GET "$F/exists?path=/workspace/nope" >/dev/null
expect_status 200
assert_eq false "$(body .exists)" "exists (missing)"
api PUT "$F?path=/workspace/a/.hidden" --data-binary x >/dev/null
api PUT "$F?path=/workspace/a/b/f.txt" --data-binary hello >/dev/null
api GET "$F/list?path=/workspace/a" >/dev/null
expect_status 200
assert_eq "b" "$(body '[.files[].name] | sort | join(",")')" "list without hidden"
api GET "$F/list?path=/workspace/a&includeHidden=true&recursive=true" >/dev/null
expect_status 200
names=$(body '[.files[].name] | sort | join(",")')
assert_contains "$names" ".hidden" "hidden listed"
assert_contains "$names" "f.txt" "recursive listing"
assert_eq 5 "$(body '.files[] | select(.name=="f.txt") | .size')" "FileInfo size"
assert_eq file "$(body '.files[] | select(.name=="f.txt") | .type')" "FileInfo type"
assert_eq "$(body '.files | length')" "$(body .count)" "count"
api_json POST "$F/move" '{"from":"/workspace/a/b/f.txt","to":"/workspace/g.txt"}'
expect_status 200
assert_eq hello "$(run_in "$S" 'cat /workspace/g.txt; test -e /workspace/a/b/f.txt || echo')" \
        "moved"
api DELETE "$F?path=/workspace/g.txt" >/dev/null
expect_status 200
api DELETE "$F?path=/workspace/a" >/dev/null
assert_ne 200 "$API_STATUS" "non-recursive delete of a directory"
api DELETE "$F?path=/workspace/a&recursive=true" >/dev/null
expect_status 200
assert_eq gone "$(run_in "$S" 'test -e /workspace/a || test -e /workspace/g.txt || echo gone')" \
        "deleted"

info "errors"
api GET "$F?path=/workspace/missing" >/dev/null
expect_status 404 FILE_NOT_FOUND
api_json POST "$F/read" '{"path":"/workspace/missing"}'
expect_status 404 FILE_NOT_FOUND
api DELETE "$F?path=/workspace/missing" >/dev/null
expect_status 404 FILE_NOT_FOUND
api_json POST "$F/move" '{"from":"/workspace/missing","to":"/workspace/z"}'
expect_status 404 FILE_NOT_FOUND
api GET "$F/list?path=/workspace/missing" >/dev/null
expect_status 404 FILE_NOT_FOUND
api_json POST "$F/read" '{"path":"/workspace/t.txt","encoding":"latin1"}'
expect_status 400 VALIDATION_FAILED
api_json POST "$F/write" '{"path":"/workspace/x","content":"!!!","encoding":"base64"}'
expect_status 400
api_json POST "$F/read" '{"nopath":1}'
expect_status 400 VALIDATION_FAILED
# Path traversal stays inside the sandbox: ../../ resolves within its root.
api GET "$F?path=../../../../etc/hostname" >/dev/null
if [ "$API_STATUS" = 200 ]; then
        assert_eq "$S" "$(body)" "../ escaped the sandbox"
fi
# A symlink to a host path resolves inside the sandbox.
run_in "$S" 'ln -sf /proc/1/root/etc/hostname /workspace/l; ln -sf / /workspace/root' >/dev/null
api GET "$F?path=/workspace/root/etc/hostname" >/dev/null
if [ "$API_STATUS" = 200 ]; then
        assert_eq "$S" "$(body)" "symlink escaped the sandbox"
fi

info "names that are not UTF-8: listed, readable, deletable through pathEncoding=base64"
# urlb64 BYTES...: printf-style bytes as standard base64, percent-encoded for a query
urlb64() {
        printf "$@" | base64 -w0 | sed 's/+/%2B/g; s/\//%2F/g; s/=/%3D/g'
}
run_in "$S" "mkdir -p /workspace/nu/d\$'\\376' && printf x >/workspace/nu/inv\$'\\377'name &&
        printf y >/workspace/nu/d\$'\\376'/f && printf z >/workspace/nu/plain" >/dev/null
api GET "$F/list?path=/workspace/nu" >/dev/null
expect_status 200
assert_eq 3 "$(body .count)" "every file is listed"
assert_eq "inv�name" "$(body '.files[] | select(.nameEncoding) | select(.type=="file") | .name')" \
        "name for display"
assert_eq "$(printf 'inv\377name' | base64)" \
        "$(body '.files[] | select(.name=="inv�name") | .nameBase64')" "raw name"
assert_eq "$(printf '/workspace/nu/inv\377name' | base64)" \
        "$(body '.files[] | select(.name=="inv�name") | .absolutePathBase64')" "raw path"
assert_eq null "$(body '.files[] | select(.name=="plain") | .nameEncoding')" "UTF-8 names as before"
api GET "$F/list?path=/workspace/nu&recursive=true" >/dev/null
expect_status 200
assert_eq 4 "$(body .count)" "recursive listing"
# a valid name below a directory whose name is not: its paths need the bytes
assert_eq "$(printf 'd\376/f' | base64)" \
        "$(body '.files[] | select(.name=="f") | .relativePathBase64')" "relativePath bytes"
assert_eq base64 "$(body '.files[] | select(.name=="f") | .nameEncoding')" "flag on f"
# read, exists, write, delete by the bytes
p=$(body '.files[] | select(.name=="inv�name") | .absolutePathBase64' |
        sed 's/+/%2B/g; s/\//%2F/g; s/=/%3D/g')
api GET "$F?path=$p&pathEncoding=base64" >/dev/null
expect_status 200
assert_eq x "$(body)" "read by raw path"
api GET "$F/exists?path=$p&pathEncoding=base64" >/dev/null
expect_status 200
assert_eq true "$(body .exists)" "exists by raw path"
assert_eq "/workspace/nu/inv�name" "$(body .path)" "path for display"
assert_eq "$(printf '/workspace/nu/inv\377name' | base64)" "$(body .pathBase64)" "pathBase64"
# URL-safe base64 without padding, and relative to /workspace
api GET "$F?path=$(printf 'nu/inv\377name' | base64 -w0 | tr '+/' '-_' | tr -d =)&pathEncoding=base64" \
        >/dev/null
expect_status 200
assert_eq x "$(body)" "URL-safe base64"
api PUT "$F?path=$(urlb64 'nu/new\375')&pathEncoding=base64" --data-binary 'w' >/dev/null
expect_status 200
assert_eq "$(printf '/workspace/nu/new\375' | base64)" "$(body .pathBase64)" "PUT answer"
assert_eq w "$(run_in "$S" "cat /workspace/nu/new\$'\\375'")" "written by raw path"
api DELETE "$F?path=$p&pathEncoding=base64" >/dev/null
expect_status 200
api DELETE "$F?path=$(urlb64 '/workspace/nu/d\376')&pathEncoding=base64&recursive=true" >/dev/null
expect_status 200
assert_eq "new� plain" "$(api GET "$F/list?path=nu" | jq -r '[.files[].name] | sort | join(" ")')" \
        "after the deletes"
# an error about such a path is still JSON
api GET "$F?path=$(urlb64 '/workspace/nu/gone\377')&pathEncoding=base64" >/dev/null
expect_status 404 FILE_NOT_FOUND
assert_contains "$(body .message)" "gone?"

info "what cannot be a path: 400"
for q in 'bad%FF' 'a%E6%97' '%C0%AF'; do
        api PUT "$F?path=$q" --data-binary 'x' >/dev/null
        expect_status 400 VALIDATION_FAILED
        api GET "$F?path=$q" >/dev/null
        expect_status 400 VALIDATION_FAILED
        api GET "$F/exists?path=$q" >/dev/null
        expect_status 400 VALIDATION_FAILED
        api DELETE "$F?path=$q" >/dev/null
        expect_status 400 VALIDATION_FAILED
done
# a malformed query string is refused before routing
for q in 'a%00b' 'bad%zz' 'bad%F'; do
        api GET "$F?path=$q" >/dev/null
        expect_status 400 BAD_REQUEST
done
api GET "$F?path=$(urlb64 '/a\000b')&pathEncoding=base64" >/dev/null
expect_status 400 VALIDATION_FAILED
api GET "$F?path=no*t-base64&pathEncoding=base64" >/dev/null
expect_status 400 VALIDATION_FAILED
api GET "$F?path=a&pathEncoding=latin1" >/dev/null
expect_status 400 VALIDATION_FAILED

info "downloads from the host (decision 0061): the sandbox's own files, never the host's"
pid1() { # the host pid of sandbox $1's PID 1 (cella-init)
        local p
        for p in $(sandbox_pids "$1"); do
                if grep -qs '^NSpid:.*[[:space:]]1$' "/proc/$p/status"; then
                        echo "$p"
                        return
                fi
        done
}
md5() { md5sum <"$1" | cut -d' ' -f1; }
get() { # PATH OUT [curl options]: the raw GET of PATH into OUT; prints the status
        local q=$1 out=$2
        shift 2
        local st
        st=$(curl -sS -o "$out" -w '%{http_code}' "$@" "$CELLA_URL$F?path=$q" 2>/dev/null) || true
        echo "${st:-000}"
}
P1=$(pid1 "$S")
[ -n "$P1" ] || fail "no PID 1 of $S"
head -c $((3 * 1024 * 1024 + 17)) /dev/urandom >"$IT_TMP/fast"
api PUT "$F?path=/workspace/fast.bin" --data-binary @"$IT_TMP/fast" >/dev/null
expect_status 200
# With the agent stopped only cellad itself can answer: the file comes from the host.
kill -STOP "$P1"
st=$(get /workspace/fast.bin "$IT_TMP/fast.back" -D "$IT_TMP/fast.head" --max-time 30)
kill -CONT "$P1"
assert_eq 200 "$st" "host-side download with the agent stopped"
assert_eq "$(md5 "$IT_TMP/fast")" "$(md5 "$IT_TMP/fast.back")" "host-side download md5"
assert_contains "$(tr -d '\r' <"$IT_TMP/fast.head")" "Content-Length: $((3 * 1024 * 1024 + 17))"
assert_contains "$(tr -d '\r' <"$IT_TMP/fast.head")" "Content-Type: application/octet-stream"
assert_eq 200 "$(get /workspace/t.txt "$IT_TMP/t.back" -D "$IT_TMP/t.head")" "a text file"
assert_contains "$(tr -d '\r' <"$IT_TMP/t.head")" "Content-Type: text/plain; charset=utf-8"
assert_eq "$(run_in "$S" 'md5sum </workspace/t.txt | cut -d" " -f1')" "$(md5 "$IT_TMP/t.back")" \
        "text file md5"
st=$(curl -sS -o /dev/null -I -w '%{http_code} %header{content-length}' \
        "$CELLA_URL$F?path=/workspace/fast.bin") || fail "HEAD"
assert_eq "200 $((3 * 1024 * 1024 + 17))" "$st" "HEAD: the length, no body"
api PUT "$F?path=/workspace/empty" --data-binary '' >/dev/null
st=$(curl -sS -o "$IT_TMP/e.back" -w '%{http_code} %{size_download}' \
        "$CELLA_URL$F?path=/workspace/empty") || fail "GET an empty file"
assert_eq "200 0" "$st" "an empty file"

# The host path has the rights of the sandbox's root without its capabilities, never
# more: a file of mode 0000 (and one of another owner, 0600) only the agent reads (with
# the agent stopped, no answer comes), and the agent's answer is the file.
run_in "$S" 'echo root-only >/workspace/m000 && chmod 000 /workspace/m000 &&
        echo other-owner >/workspace/o600 && chown 1000:1000 /workspace/o600 &&
        chmod 600 /workspace/o600' >/dev/null
for q in m000 o600; do
        kill -STOP "$P1"
        st=$(get "/workspace/$q" "$IT_TMP/q.back" --max-time 3)
        kill -CONT "$P1"
        assert_eq 000 "$st" "$q is not read from the host"
        api GET "$F?path=/workspace/$q" >/dev/null
        expect_status 200
done
assert_eq other-owner "$(body)" "the agent reads it"

# A marker on the host, at a path that does not exist inside the sandbox.
MARK="host-marker-$RANDOM$RANDOM"
mkdir -p "$IT_TMP/hostdir"
echo "$MARK" >"$IT_TMP/hostdir/marker"
chmod 0644 "$IT_TMP/hostdir/marker"
chmod 0755 "$IT_TMP" "$IT_TMP/hostdir"
run_in "$S" "mkdir -p /workspace/d && echo sandbox-own >/workspace/d/marker &&
        ln -sfn /etc/shadow /workspace/l-shadow &&
        ln -sfn ../../../../../../etc/hostname /workspace/l-up &&
        ln -sfn /proc/1/root/etc/passwd /workspace/l-proc &&
        ln -sfn /proc/self/root/etc/passwd /workspace/l-self &&
        ln -sfn '$IT_TMP/hostdir/marker' /workspace/l-host &&
        ln -sfn ../../../../..'$IT_TMP/hostdir' /workspace/l-hostdir &&
        mkfifo /workspace/fifo && ln -sfn /dev/null /workspace/l-null" >/dev/null
for l in l-shadow:/etc/shadow l-up:/etc/hostname l-proc:/etc/passwd l-self:/etc/passwd; do
        st=$(get "/workspace/${l%%:*}" "$IT_TMP/l.back")
        assert_eq 200 "$st" "${l%%:*}"
        assert_eq "$(run_in "$S" "md5sum <${l#*:} | cut -d' ' -f1")" "$(md5 "$IT_TMP/l.back")" \
                "${l%%:*} is the sandbox's ${l#*:}"
done
assert_ne "$(md5 /etc/shadow)" "$(md5 "$IT_TMP/l.back")" "not the host's file"
# out of the sandbox: not found; not regular files: the agent's answers, as before
for c in "/workspace/l-host 404 FILE_NOT_FOUND" "/workspace/l-hostdir/marker 404 FILE_NOT_FOUND" \
        "/proc/$P1/root$IT_TMP/hostdir/marker 404 FILE_NOT_FOUND" \
        "/workspace/d 400 IS_DIRECTORY" "/workspace/fifo 400 VALIDATION_FAILED" \
        "/workspace/l-null 400 VALIDATION_FAILED" "/dev/null 400 VALIDATION_FAILED" \
        "/workspace/nope 404 FILE_NOT_FOUND"; do
        read -r path st code <<<"$c"
        api GET "$F?path=$path" >/dev/null
        expect_status "$st" "$code"
done
# /dev/shm is on a mount of its own (the /dev tmpfs): the agent reads it; /tmp is a
# directory of the writable layer
run_in "$S" 'echo in-shm >/dev/shm/x; echo in-tmp >/tmp/x' >/dev/null
assert_eq in-shm "$(api GET "$F?path=/dev/shm/x")" "a file on another mount"
assert_eq in-tmp "$(api GET "$F?path=/tmp/x")" "a file of /tmp"

info "symlinks swapped in a loop while 200 downloads run: never a host byte"
run_in "$S" "ln -sfn /workspace/d /workspace/sw && ln -sfn /workspace/d/marker /workspace/swf" \
        >/dev/null
jq -cn --arg h "$IT_TMP/hostdir" '{command: ("end=$(($(date +%s) + 120)); while [ $(date +%s) -lt $end ] && [ ! -e /workspace/stop ]; do ln -sfn " + $h + " /workspace/sw; ln -sfn ../../../../..\($h)/marker /workspace/swf; ln -sfn /workspace/d /workspace/sw; ln -sfn /workspace/d/marker /workspace/swf; ln -sfn /proc/1/root\($h) /workspace/sw; done"), timeout: 150000}' \
        >"$IT_TMP/swap.json"
curl -sS -o "$IT_TMP/swap.out" -H 'Content-Type: application/json' \
        --data-binary @"$IT_TMP/swap.json" "$CELLA_URL/v1/sandboxes/$S/exec" &
swapper=$!
sleep 1
own=0
for i in $(seq 1 100); do
        for q in /workspace/sw/marker /workspace/swf; do
                st=$(get "$q" "$IT_TMP/sw.back")
                if grep -q "$MARK" "$IT_TMP/sw.back"; then
                        touch "/proc/$P1/root/workspace/stop"
                        fail "a download of $q gave the host's marker"
                fi
                case $st in
                200) assert_eq sandbox-own "$(cat "$IT_TMP/sw.back")" "$q"
                        own=$((own + 1)) ;;
                404 | 400) ;;
                *) fail "$q: HTTP $st: $(head -c 300 "$IT_TMP/sw.back")" ;;
                esac
        done
done
run_in "$S" 'touch /workspace/stop' >/dev/null
wait "$swapper" || fail "the swapping command"
[ "$own" -gt 0 ] || fail "no download found the sandbox's own file"
info "swapped: $own of 200 downloads were the sandbox's file, none the host's"

info "the sandbox's PID 1 exits under a download from the host: the download is cut"
head -c $((32 * 1024 * 1024)) /dev/urandom >"$IT_TMP/slow"
api PUT "$F?path=/workspace/slow.bin" --data-binary @"$IT_TMP/slow" >/dev/null
expect_status 200
curl -sS --limit-rate 1M -o "$IT_TMP/slow.back" "$CELLA_URL$F?path=/workspace/slow.bin" \
        2>/dev/null &
slow=$!
for _ in $(seq 1 100); do
        [ -s "$IT_TMP/slow.back" ] && break
        sleep 0.1
done
[ -s "$IT_TMP/slow.back" ] || fail "the slow download did not begin"
kill -KILL "$P1"
rc=0
wait "$slow" || rc=$?
assert_eq 18 "$rc" "curl: a partial file (the connection closed before Content-Length)"
[ "$(stat -c %s "$IT_TMP/slow.back")" -lt $((32 * 1024 * 1024)) ] || fail "not cut"
cmp -s -n "$(stat -c %s "$IT_TMP/slow.back")" "$IT_TMP/slow" "$IT_TMP/slow.back" ||
        fail "the bytes before the cut are not the file's"
assert_eq "$(md5 "$IT_TMP/slow")" "$(api GET "$F?path=/workspace/slow.bin" | md5sum | cut -d' ' -f1)" \
        "whole again once the sandbox runs again"
P1=$(pid1 "$S")

info "a sleeping sandbox wakes for a download"
Z=$(sbx files-sleep)
api_json PUT "/v1/sandboxes/$Z" '{"sleepAfter":"2s"}'
api PUT "/v1/sandboxes/$Z/files?path=/workspace/z.bin" --data-binary @"$IT_TMP/fast" >/dev/null
expect_status 200
wait_sleeping "$Z"
st=$(curl -sS -o "$IT_TMP/z.back" -w '%{http_code}' \
        "$CELLA_URL/v1/sandboxes/$Z/files?path=/workspace/z.bin") || st=000
assert_eq 200 "$st" "download from a sleeping sandbox"
assert_eq "$(md5 "$IT_TMP/fast")" "$(md5 "$IT_TMP/z.back")" "after its wake"
api GET "/v1/sandboxes/$Z" >/dev/null
assert_eq running "$(body .state)" "woken"
api DELETE "/v1/sandboxes/$Z" >/dev/null
info "files: ok"
