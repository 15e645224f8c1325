#!/usr/bin/env bash
# The web console (docs/console.md) against a real cellad with a token: what cellad serves
# at / and /console/ (redirect, files, headers, refusals), then the browser flow of
# console/test/flow.mjs (playwright-core driving Debian's chromium headless: login, create,
# upload, edit, terminal, process, preview, notebook, destroy; screenshots of each page at
# 1280x800 and 375x667 into $CELLA_BUILD/console-screenshots, checked for layout breakage).
# Skips (77) without chromium, node or the console's build (scripts/console-deps.sh).
. "$(dirname "$0")/lib.sh"

root=$(cd "$(dirname "$0")/../.." && pwd)
console=$root/console
chromium=${CHROMIUM:-/usr/bin/chromium}
[ -x "$chromium" ] || skip "no $chromium (scripts/deps.sh installs it)"
command -v node >/dev/null || skip "no node"
[ -f "$console/dist/index.html" ] && [ -d "$console/node_modules/playwright-core" ] ||
        skip "the console is not built (make console)"

# The images page builds with a fake builder (mmdebstrap's phase lines, then a tiny image)
# and imports a docker save tarball of the host's static busybox (images/mktar.py) into an
# images dir of this run whose `default` is a symlink to the shared default image.
[ -x /bin/busybox ] || skip "needs busybox-static (/bin/busybox) for the import"
SHARED_IMAGES=$CELLA_IMAGES
CELLA_IMAGES=$IT_TMP/images
mkdir -p "$CELLA_IMAGES"
ln -s "$SHARED_IMAGES/default" "$CELLA_IMAGES/default"
python3 "$(dirname "$0")/images/mktar.py" docker "$IT_TMP/import.tar"
BUILDER=$IT_TMP/fake-builder.sh
cat >"$BUILDER" <<'EOF'
#!/bin/sh
images=$1 name=$2
shift 3
echo "fake build of $name: $*"
for phase in "chroot architecture amd64" "downloading packages with apt..." \
        "extracting archives..." "installing essential packages..." "cleaning up..." \
        "success in 0.1 seconds"; do
        echo "I: $phase" >&2
        sleep 0.2
done
mkdir -p "$images/$name/rootfs" &&
        printf '{"source":"build","packages":[]}\n' >"$images/$name/image.json" &&
        date >"$images/$name/.complete"
EOF
chmod +x "$BUILDER"

CELLA_TOKEN=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
export CELLA_TOKEN
start_cellad --console "$console/dist" --image-builder "$BUILDER"

# ---- serving ----
info "/ and /console redirect to /console/"
for p in / /console; do
        head=$(curl -sS -o /dev/null -D - "$CELLA_URL$p")
        assert_contains "$head" "HTTP/1.1 302" "$p"
        assert_contains "$head" "Location: /console/" "$p"
done
info "/console/ is index.html with the console's headers, without a token"
head=$(curl -sS -D - -o "$IT_TMP/index.html" "$CELLA_URL/console/")
assert_contains "$head" "HTTP/1.1 200"
assert_contains "$head" "Content-Type: text/html; charset=utf-8"
assert_contains "$head" "Content-Security-Policy: default-src 'self'; script-src 'self';"
assert_contains "$head" "frame-ancestors 'none'"
assert_contains "$head" "connect-src 'self' ws://${CELLA_URL#http://} wss://${CELLA_URL#http://};"
assert_contains "$head" "X-Content-Type-Options: nosniff"
assert_contains "$head" "Referrer-Policy: no-referrer"
assert_contains "$head" "Cache-Control: no-cache"
assert_not_contains "$(cat "$IT_TMP/index.html")" "<script>" "an inline script"
asset=$(grep -o '/console/assets/index-[A-Za-z0-9_-]*\.js' "$IT_TMP/index.html" | head -n 1)
[ -n "$asset" ] || fail "no script asset in index.html"
head=$(curl -sS -D - -o /dev/null "$CELLA_URL$asset")
assert_contains "$head" "Content-Type: text/javascript; charset=utf-8"
assert_contains "$head" "Cache-Control: public, max-age=31536000, immutable"
head=$(curl -sS -I "$CELLA_URL$asset")
assert_contains "$head" "HTTP/1.1 200" "HEAD"
info "traversal, hidden names, directories and writes are refused"
for p in /console/../../etc/passwd /console/%2e%2e/%2e%2e/etc/passwd /console/assets \
        /console/assets/ /console/.cella-build.stamp /console//etc/passwd; do
        api GET "$p" --path-as-is >/dev/null
        expect_status 404 NOT_FOUND
        assert_not_contains "$(body)" "root:" "$p"
done
api POST /console/index.html >/dev/null
expect_status 405 METHOD_NOT_ALLOWED
info "the API still needs the token; another origin is still refused"
CELLA_TOKEN= api GET /v1/sandboxes >/dev/null
expect_status 401 UNAUTHORIZED
api GET /v1/sandboxes -H "Origin: http://evil.example" >/dev/null
expect_status 403 PERMISSION_DENIED

# ---- the browser flow ----
shots=$CELLA_BUILD/console-screenshots
rm -rf "$shots"
name=$(sbx console)
info "browser flow (sandbox $name, screenshots in $shots)"
CELLA_URL=$CELLA_URL CELLA_TOKEN=$CELLA_TOKEN SANDBOX=$name SHOTS=$shots CHROMIUM=$chromium \
        IMPORT_TAR=$IT_TMP/import.tar node "$console/test/flow.mjs" || fail "the browser flow failed (see above; $shots/failure.png)"
[ -s "$shots/login-1280x800.png" ] || fail "no screenshot of the login form"
for page in sandboxes files terminal processes ports notebook settings snapshots images; do
        for size in 1280x800 375x667; do
                [ -s "$shots/$page-$size.png" ] || fail "no screenshot $page-$size.png"
        done
done
api GET "/v1/sandboxes/$name" >/dev/null
expect_status 404 SANDBOX_NOT_FOUND
info "the image built from the page is there, the one imported and deleted is not"
api GET /v1/images >/dev/null
assert_eq "consolebuild default " "$(body '.images[].name' | sort | tr '\n' ' ')" "images"
info "PASS"
