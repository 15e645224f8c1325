#!/bin/bash
# Files: raw binary round trip (5 MiB by sha256), JSON read/write utf-8 and base64,
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
info "files: ok"
