#!/usr/bin/env bash
# Build a cella image with mmdebstrap into IMAGES_DIR/NAME/rootfs.
# Usage: build-image.sh IMAGES_DIR [NAME] [--force] [PACKAGE...]
# The image is built in a temporary directory next to the target and renamed
# into place only when complete, so a half-built image is never used.
# NAME "default" has its own package list; any other name gets cella's base set.
# PACKAGEs are added to either (Debian package names, checked again here).
set -euo pipefail
images=${1:?usage: build-image.sh IMAGES_DIR [NAME] [--force] [PACKAGE...]}
name=${2:-default}
force=${3:-}
shift $(($# < 3 ? $# : 3))
case "$name" in
'' | .* | -* | */* | *[!a-z0-9._-]*) echo "bad image name '$name'" >&2; exit 2 ;;
esac
dest="$images/$name"
case "$name" in
# The code interpreter needs python3 with numpy, pandas and matplotlib, nodejs and
# TypeScript's compiler (node-typescript), all from Debian's archive.
default) pkgs="bash,coreutils,procps,python3,nodejs,git,curl,ca-certificates,jq,less,findutils,grep,sed,tar,gzip,xz-utils,iproute2,netbase,python3-numpy,python3-pandas,python3-matplotlib,python3-pil,node-typescript" ;;
# cella's base set: what sessions, exec and the file API expect of an image.
*) pkgs="bash,coreutils,procps,ca-certificates,findutils,grep,sed,tar,gzip,netbase" ;;
esac
# The image's environment (image.json "env", "K=V" strings under every sandbox's own env,
# as an imported image's config Env): python's output unbuffered, so a background server's
# log lines reach waitForLog and `cella wait --log` as they are printed.
case "$name" in
default) envjson='["PYTHONUNBUFFERED=1"]' ;;
*) envjson='[]' ;;
esac
extra=()
for p in "$@"; do
        [[ "$p" =~ ^[a-z0-9][a-z0-9+.-]*$ ]] && [ ${#p} -le 100 ] ||
                { echo "bad package name '$p'" >&2; exit 2; }
        pkgs="$pkgs,$p"
        extra+=("$p")
done
# .spec records what the image was built from: a changed package list rebuilds it.
spec="bookworm minbase $pkgs"
if [ -f "$dest/.complete" ] && [ "$force" != "--force" ] &&
        [ "$(cat "$dest/.spec" 2>/dev/null)" = "$spec" ]; then
        # The environment is metadata: an image built before it changed gets it without a
        # rebuild (image.json replaced whole, by rename).
        if ! jq -e --argjson env "$envjson" '(.env // []) == $env' "$dest/image.json" >/dev/null 2>&1; then
                jq --argjson env "$envjson" '.env = $env' "$dest/image.json" >"$dest/.image.json.tmp" &&
                        mv "$dest/.image.json.tmp" "$dest/image.json"
                echo "image '$name': environment set to $envjson"
        fi
        echo "image '$name' present at $dest"
        exit 0
fi
command -v mmdebstrap >/dev/null || { echo "mmdebstrap missing: run scripts/deps.sh" >&2; exit 2; }
mkdir -p "$images"
tmp=$(mktemp -d "$images/.build-$name.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# The default image: about two minutes on 2 CPUs with a nearby mirror, 1.4 GB (README).
echo "building image '$name' with mmdebstrap (bookworm; once: about two minutes and 1.4 GB for the default image)..."
mmdebstrap --mode=root --variant=minbase --include="$pkgs" \
        --dpkgopt='path-exclude=/usr/share/man/*' \
        --dpkgopt='path-exclude=/usr/share/doc/*' \
        --dpkgopt='path-exclude=/usr/share/locale/*' \
        --customize-hook='mkdir -p "$1/workspace" && chmod 0755 "$1/workspace"' \
        --customize-hook='rm -f "$1/etc/resolv.conf" "$1/etc/hostname"' \
        --customize-hook='apt-get clean -o RootDir="$1" || true' \
        bookworm "$tmp/rootfs" \
        "deb http://deb.debian.org/debian bookworm main" \
        "deb http://deb.debian.org/debian bookworm-updates main" \
        "deb http://deb.debian.org/debian-security bookworm-security main"
echo "$spec" > "$tmp/.spec"
size=$(du -sb "$tmp/rootfs" | cut -f1)
{
        printf '{"source":"build","sizeBytes":%s,"packages":[' "$size"
        sep=
        for p in "${extra[@]}"; do printf '%s"%s"' "$sep" "$p"; sep=,; done
        printf '],"env":%s}\n' "$envjson"
} > "$tmp/image.json"
date -u +%Y-%m-%dT%H:%M:%SZ > "$tmp/.complete"
rm -rf "$dest"
mv "$tmp" "$dest"
trap - EXIT
echo "image '$name' ready at $dest ($(du -sh "$dest/rootfs" | cut -f1))"
