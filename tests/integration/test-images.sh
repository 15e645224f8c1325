#!/usr/bin/env bash
# Images: import of docker save (legacy and 25+ layouts) and OCI layout tarballs made here
# from the host's static busybox (layers applied in order, whiteouts and opaque
# directories, digests checked), exec and sessions in the imported image (no bash, no
# libc), the image's Env as the sandbox's base environment, ls/rm (409 in use, 404),
# hostile tarballs (400, nothing written outside, nothing left behind), the 413 limit,
# and the build route's validation, 409 on a second build and its SSE progress with a
# fake --image-builder; names real-* go to the real scripts/build-image.sh: one small
# mmdebstrap build (base set + busybox-static, about a minute) when the Debian archive is
# reachable (CELLA_IT_NO_MMDEBSTRAP=1 skips it).
#
# This daemon's --images is a temp dir in which `default` is a symlink to the shared
# default image: nothing is written to the shared image dir.
. "$(dirname "$0")/lib.sh"

command -v python3 >/dev/null || skip "needs python3"
[ -x /bin/busybox ] || skip "needs busybox-static (/bin/busybox)"
file -b /bin/busybox 2>/dev/null | grep -q static || ldd /bin/busybox 2>&1 | grep -q "not a dynamic" ||
        skip "/bin/busybox is not static"

MKTAR="$(dirname "$0")/images/mktar.py"
SHARED_IMAGES=$CELLA_IMAGES
CELLA_IMAGES=$IT_TMP/images
mkdir -p "$CELLA_IMAGES"
ln -s "$SHARED_IMAGES/default" "$CELLA_IMAGES/default"
OUTSIDE=$IT_TMP/outside
mkdir -p "$OUTSIDE"

# A fake builder: prints progress lines, then fails for the name "broken", waits for the
# file $IT_TMP/release for "slow" (so that a second build sees 409; 60 s at most), else
# makes a complete (tiny) image.
BUILDER=$IT_TMP/fake-builder.sh
REAL_BUILDER=$(cd "$(dirname "$0")/../.." && pwd)/scripts/build-image.sh
cat >"$BUILDER" <<EOF
#!/bin/sh
case "\$2" in real-*) exec "$REAL_BUILDER" "\$@" ;; esac
EOF
echo "release=$IT_TMP/release" >>"$BUILDER"
cat >>"$BUILDER" <<'EOF'
images=$1 name=$2
shift 3
echo "fake build of $name: $*"
echo "progress to stderr" >&2
[ "$name" = broken ] && { echo "failing on purpose" >&2; exit 3; }
if [ "$name" = slow ]; then
        i=0
        while [ ! -e "$release" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
fi
mkdir -p "$images/$name/rootfs" && echo "fake $*" >"$images/$name/.spec" &&
        printf '{"source":"build","packages":[]}\n' >"$images/$name/image.json" &&
        date >"$images/$name/.complete"
echo done
EOF
chmod +x "$BUILDER"

start_cellad --pool 0 --image-builder "$BUILDER" --image-import-max 16M

# import IMAGE FILE [QUERY]: POST the tarball; status in API_STATUS, answer in body.
import() {
        api POST "/v1/images/$1/import${3:-}" -H 'Content-Type: application/x-tar' \
                --data-binary "@$2" >/dev/null
}

# Nothing of an import is left in the images dir but the images named (a deleted tree and
# an upload's temp file are removed in a work thread: polled, 10 s at most).
images_dir_is() {
        local got
        for _ in $(seq 1 100); do
                got=$(cd "$CELLA_IMAGES" && ls -A | sort | tr '\n' ' ')
                [ "$got" = "$1" ] && return 0
                sleep 0.1
        done
        assert_eq "$1" "$got" "images dir content"
}

# ---- docker save (legacy layout), OCI layout, docker save 25+ ----
python3 "$MKTAR" docker "$IT_TMP/docker.tar"
python3 "$MKTAR" oci "$IT_TMP/oci.tar"
python3 "$MKTAR" docker-new "$IT_TMP/docker-new.tar"

import bbdocker "$IT_TMP/docker.tar"
expect_status 201
assert_eq 3 "$(body .layers)" "docker layers"
assert_eq 1 "$(body .skippedDevices)" "the char device is skipped"
import bboci "$IT_TMP/oci.tar"
expect_status 201
import bbnew "$IT_TMP/docker-new.tar"
expect_status 201
images_dir_is "bbdocker bbnew bboci default "
# the tarball itself compressed (docker save | gzip)
gzip -c "$IT_TMP/docker.tar" >"$IT_TMP/docker.tar.gz"
import bbgz "$IT_TMP/docker.tar.gz"
expect_status 201
api DELETE /v1/images/bbgz >/dev/null
expect_status 200
images_dir_is "bbdocker bbnew bboci default "

# A name that exists: 409 unless replace=true.
import bboci "$IT_TMP/oci.tar"
expect_status 409 IMAGE_EXISTS
import bboci "$IT_TMP/oci.tar" "?replace=true"
expect_status 201
images_dir_is "bbdocker bbnew bboci default "

api GET /v1/images >/dev/null
expect_status 200
assert_eq import "$(body '.images[] | select(.name=="bboci") | .source')" "source of an import"
assert_eq build "$(body '.images[] | select(.name=="default") | .source')" "source of a build"
[ "$(body '.images[] | select(.name=="bboci") | .sizeBytes')" -gt 1000000 ] ||
        fail "sizeBytes of an import: $(body)"

for img in bbdocker bboci bbnew; do
        s=$(sbx "s$img")
        api_json PUT "/v1/sandboxes/$s" "{\"image\":\"$img\"}"
        expect_status 201
        assert_eq "$img" "$(body .image)" "image of $s"
        # exec goes through the default session: busybox sh, no bash in this image
        assert_eq "kept from layer 1" "$(run_in "$s" 'cat /data/keep.txt')" "$img: layer 1 file"
        assert_eq "added by layer 2" "$(run_in "$s" 'cat /data/added.txt')" "$img: layer 2 file"
        assert_eq "hello from layer 3" "$(run_in "$s" 'cat /hello.txt')" "$img: layer 3 file"
        assert_eq "gone" "$(run_in "$s" 'test -e /data/gone.txt && echo there || echo gone')" \
                "$img: whiteout"
        assert_eq "new.txt" "$(run_in "$s" 'ls /opq')" "$img: opaque dir lost lower contents"
        assert_eq "kept from layer 1" "$(run_in "$s" 'cat /data/hl')" "$img: hard link"
        assert_eq "2" "$(run_in "$s" 'stat -c %h /data/keep.txt')" "$img: hard link count"
        # setuid is dropped; the device node was skipped
        assert_eq "755" "$(run_in "$s" 'stat -c %a /bin/suid')" "$img: setuid dropped"
        assert_eq "no" "$(run_in "$s" 'test -e /dev-evil && echo yes || echo no')" "$img: device"
        # the image's Env is the sandbox's base environment
        assert_eq "from-image" "$(run_in "$s" 'echo $IMG_VAR')" "$img: image Env"
        assert_eq "/bin" "$(run_in "$s" 'echo $PATH')" "$img: image PATH"
        # the runtime's mount points exist though the image has none
        run_in "$s" 'test -d /proc/self && test -d /tmp && test -d /workspace && test -e /dev/null && cat /etc/hostname' >/dev/null
        assert_eq 0 "$(exit_code)" "$img: mount points"
done

# sessions: a named session keeps its state (cwd, variables) in busy box sh
s=$(sbx sbboci)
api_json POST "/v1/sandboxes/$s/sessions" '{"id":"sh1"}'
expect_status 201
api_json POST "/v1/sandboxes/$s/exec" '{"command":"cd /data && X=42","sessionId":"sh1"}'
expect_status 200
api_json POST "/v1/sandboxes/$s/exec" '{"command":"echo $X $(pwd)","sessionId":"sh1"}'
expect_status 200
assert_eq "42 /data" "$(jq -j .stdout <"$IT_TMP/body" | tr -d '\n')" "session state in sh"
api_json POST "/v1/sandboxes/$s/exec" '{"command":"busybox sh -c \"exit 7\"","sessionId":"sh1"}'
expect_status 200
assert_eq 7 "$(exit_code)" "exit code through a sh session"
# files API in the image
api_json POST "/v1/sandboxes/$s/files/write" '{"path":"/workspace/f.txt","content":"hi"}'
expect_status 200
assert_eq hi "$(run_in "$s" 'cat /workspace/f.txt')" "file written in the image"
# the image itself is untouched (the sandbox writes to its upper layer)
[ ! -e "$CELLA_IMAGES/bboci/rootfs/workspace" ] || fail "the runtime wrote into the image"

# ---- rm: in use, not found, default, then after destroy ----
api DELETE /v1/images/bboci >/dev/null
expect_status 409 IMAGE_IN_USE
api DELETE /v1/images/default >/dev/null
expect_status 409 IMAGE_IN_USE
api DELETE /v1/images/nosuch >/dev/null
expect_status 404 IMAGE_NOT_FOUND
api DELETE "/v1/images/..bad" >/dev/null
expect_status 400 VALIDATION_FAILED
for img in bbdocker bboci bbnew; do
        api DELETE "/v1/sandboxes/$(sbx "s$img")" >/dev/null
        expect_status 200
done
api DELETE /v1/images/bboci >/dev/null
expect_status 200
assert_eq true "$(body .deleted)" "deleted"
api DELETE /v1/images/bboci >/dev/null
expect_status 404 IMAGE_NOT_FOUND
[ -L "$SHARED_IMAGES/default" ] || [ -d "$SHARED_IMAGES/default/rootfs" ] ||
        fail "the shared default image is gone"

# An unknown image at creation: 404, and no sandbox is left.
s=$(sbx nosuchimage)
api_json PUT "/v1/sandboxes/$s" '{"image":"nosuch"}'
expect_status 404 IMAGE_NOT_FOUND
api GET "/v1/sandboxes/$s" >/dev/null
expect_status 404 SANDBOX_NOT_FOUND

# ---- hostile tarballs: 400, nothing outside, nothing left ----
for kind in traversal absolute symlink-escape symlink-escape-rel hardlink-escape \
        whiteout-dotdot bad-digest truncated not-tar; do
        python3 "$MKTAR" "$kind" "$IT_TMP/$kind.tar" "$OUTSIDE"
        import "h$kind" "$IT_TMP/$kind.tar"
        expect_status 400 INVALID_IMAGE
        info "$kind: $(body .message)"
        assert_eq "" "$(ls -A "$OUTSIDE")" "$kind: nothing written outside"
        [ ! -e "$IT_TMP/escape-traversal" ] && [ ! -e /escape-absolute ] &&
                [ ! -e "$CELLA_IMAGES/../escape-traversal" ] && [ ! -e /tmp/pwned-rel ] ||
                fail "$kind: a file escaped"
        images_dir_is "bbdocker bbnew default "
done
api POST /v1/images/empty/import --data-binary '' >/dev/null
expect_status 400 INVALID_IMAGE

# ---- limits: over --image-import-max (16M), declared and streamed ----
head -c $((17 * 1024 * 1024)) /dev/zero >"$IT_TMP/big.bin"
import big "$IT_TMP/big.bin"
expect_status 413 PAYLOAD_TOO_LARGE
api POST /v1/images/big/import -H 'Transfer-Encoding: chunked' --data-binary "@$IT_TMP/big.bin" \
        >/dev/null
expect_status 413 PAYLOAD_TOO_LARGE
images_dir_is "bbdocker bbnew default "

# ---- build: validation, progress (SSE), errors, 409 while building ----
api_json POST /v1/images/x1/build '{"packages":["Bad_Name"]}'
expect_status 400 VALIDATION_FAILED
api_json POST /v1/images/x1/build '{"packages":["-rf"]}'
expect_status 400 VALIDATION_FAILED
api_json POST /v1/images/x1/build '{"packages":"busybox"}'
expect_status 400 VALIDATION_FAILED
api_json POST /v1/images/x1/build "{\"packages\":$(seq 1 65 | jq -R . | jq -cs 'map("p" + .)')}"
expect_status 400 VALIDATION_FAILED
api_json POST /v1/images/x1/build '{"other":1}'
expect_status 400 VALIDATION_FAILED
api_json POST /v1/images/x1/build '{"packages":["busybox-static","libc6"]}'
expect_status 200
grep -q '"type":"log".*fake build of x1: busybox-static libc6' "$IT_TMP/body" ||
        fail "no progress line: $(body)"
grep -q '"progress to stderr"' "$IT_TMP/body" || fail "no stderr line: $(body)"
grep -q '"type":"complete"' "$IT_TMP/body" || fail "no complete event: $(body)"
api GET /v1/images >/dev/null
assert_eq build "$(body '.images[] | select(.name=="x1") | .source')" "built image listed"
api_json POST /v1/images/broken/build '{}'
expect_status 200
grep -q '"type":"error"' "$IT_TMP/body" || fail "no error event: $(body)"
grep -q 'failing on purpose' "$IT_TMP/body" || fail "no error output: $(body)"
# a second build of a name being built: 409
curl -sS -X POST "$CELLA_URL/v1/images/slow/build" -o "$IT_TMP/slow.out" &
slow=$!
for _ in $(seq 1 300); do
        grep -q 'fake build of slow' "$CELLAD_LOG" "$IT_TMP/slow.out" 2>/dev/null && break
        grep -q 'building image slow' "$CELLAD_LOG" && break
        sleep 0.1
done
api_json POST /v1/images/slow/build '{}'
expect_status 409 IMAGE_BUSY
import slow "$IT_TMP/oci.tar"
expect_status 409 IMAGE_BUSY
touch "$IT_TMP/release"
wait "$slow"
grep -q '"type":"complete"' "$IT_TMP/slow.out" || fail "slow build: $(cat "$IT_TMP/slow.out")"

# ---- one real build (mmdebstrap), when the archive is reachable ----
if [ "${CELLA_IT_NO_MMDEBSTRAP:-0}" = 1 ]; then
        info "real build skipped (CELLA_IT_NO_MMDEBSTRAP=1)"
elif ! command -v mmdebstrap >/dev/null ||
        ! curl -sfI -m 10 http://deb.debian.org/debian/dists/bookworm/Release >/dev/null; then
        info "real build skipped: mmdebstrap or the Debian archive is not available"
else
        api_json POST /v1/images/real-mini/build '{"packages":["busybox-static"]}'
        expect_status 200
        grep -q '"type":"complete"' "$IT_TMP/body" || fail "real build: $(tail -c 2000 "$IT_TMP/body")"
        grep -q 'mmdebstrap' "$IT_TMP/body" || fail "real build: no progress lines"
        api GET /v1/images >/dev/null
        assert_eq '["busybox-static"]' "$(jq -c '.images[] | select(.name=="real-mini") | .packages' "$IT_TMP/body")" \
                "packages of the built image"
        s=$(sbx sreal)
        api_json PUT "/v1/sandboxes/$s" '{"image":"real-mini"}'
        expect_status 201
        assert_eq "hi" "$(run_in "$s" 'busybox echo hi')" "busybox-static in the built image"
        assert_eq "bash" "$(run_in "$s" 'basename "$BASH"')" "the base set has bash"
        api DELETE "/v1/sandboxes/$s" >/dev/null
        api DELETE /v1/images/real-mini >/dev/null
        expect_status 200
fi

# ---- the CLI ----
CLI="$CELLA_BUILD/cella"
out=$("$CLI" --url "$CELLA_URL" image import clioci "$IT_TMP/oci.tar" 2>&1) ||
        fail "cella image import: $out"
out=$("$CLI" --url "$CELLA_URL" image ls 2>&1)
assert_contains "$out" clioci
assert_contains "$out" import
out=$("$CLI" --url "$CELLA_URL" image build clibuilt --package busybox-static 2>&1) ||
        fail "cella image build: $out"
assert_contains "$out" "fake build of clibuilt: busybox-static"
out=$("$CLI" --url "$CELLA_URL" image rm clioci 2>&1) || fail "cella image rm: $out"
if out=$("$CLI" --url "$CELLA_URL" image rm clioci 2>&1); then
        fail "cella image rm of a missing image succeeded"
fi
assert_contains "$out" IMAGE_NOT_FOUND

info "images ok"
