#!/usr/bin/env bash
# A CRIU that can checkpoint on this host, for memory sleep (docs/decisions/0050).
#
# Debian 12's criu (3.17) fails `criu check` on Linux 6.13 and later (the vDSO's
# [vvar_vclock]). When neither the criu on PATH nor an already built one passes its check,
# this builds CRIU from Debian trixie's own source package, once, into
# $CELLA_CRIU_CACHE (default /var/cache/cella/criu): criu-VERSION/criu, with the link
# criu -> criu-VERSION/criu that cellad looks for. The source is the orig tarball listed in
# trixie's Sources index, read through a private apt state (the system's sources stay
# bookworm-only; apt verifies trixie's InRelease with the installed debian-archive-keyring),
# and its SHA-256 is checked against that signed index before anything is unpacked.
#
# Idempotent and quiet: a host whose CRIU already passes its check is left alone (no
# network). Called by scripts/deps.sh; needs root (as deps.sh) only when it builds. A
# failure here is reported and leaves cellad falling back to files sleep: it never fails
# the caller (exit 0), unless CELLA_CRIU_STRICT=1.
set -euo pipefail

cache=${CELLA_CRIU_CACHE:-/var/cache/cella/criu}
strict=${CELLA_CRIU_STRICT:-0}

passes() { [ -x "$1" ] && "$1" check >/dev/null 2>&1; }

if passes "$cache/criu"; then
        exit 0
fi
if command -v criu >/dev/null && passes "$(command -v criu)"; then
        exit 0
fi

fail() {
        echo "criu.sh: $*; memory sleep falls back to files sleep (docs/decisions/0050)" >&2
        [ "$strict" = 1 ] && exit 1
        exit 0
}

if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null || fail "not root, cannot build CRIU into $cache"
        exec sudo CELLA_CRIU_CACHE="$cache" CELLA_CRIU_STRICT="$strict" bash "$0"
fi
mkdir -p "$cache"
work=$(mktemp -d "$cache/build.XXXXXX")
trap 'rm -rf "$work"' EXIT

# What building CRIU needs beyond scripts/deps.sh's list (Debian's Build-Depends of criu,
# less the documentation and the Python bindings).
build_deps=(protobuf-c-compiler libprotobuf-c-dev libprotobuf-dev protobuf-compiler
        libnl-3-dev libnet1-dev libbsd-dev libaio-dev uuid-dev libcap-dev libnftables-dev
        libgnutls28-dev pkg-config python3-protobuf build-essential curl xz-utils)
missing=()
for p in "${build_deps[@]}"; do
        status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
        [ "$status" = installed ] || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
        echo "criu.sh: installing ${missing[*]}"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" </dev/null >/dev/null ||
                fail "apt-get install ${missing[*]} failed"
fi

echo "criu.sh: $(criu --version 2>/dev/null | head -1 || echo 'no criu') fails its check here; building CRIU from Debian trixie's source into $cache"
apt_state="$work/apt"
mkdir -p "$apt_state"/{lists/partial,cache/archives/partial}
echo 'deb-src http://deb.debian.org/debian trixie main' >"$apt_state/sources.list"
apt_opts=(-o "Dir::Etc::SourceList=$apt_state/sources.list" -o Dir::Etc::SourceParts=/dev/null
        -o "Dir::State::Lists=$apt_state/lists" -o "Dir::Cache=$apt_state/cache")
apt-get "${apt_opts[@]}" -q update >"$work/apt-update.log" 2>&1 ||
        fail "apt-get update of trixie's sources failed: $(tail -1 "$work/apt-update.log")"
# 'URI' name size SHA256:hash, one line per file of the source package, from the signed index
line=$(apt-get "${apt_opts[@]}" source --print-uris criu 2>/dev/null | grep -E "^'[^']*/criu_[0-9.]+\.orig\.tar\.xz' " | head -1) ||
        fail "trixie's Sources index lists no criu orig tarball"
uri=$(echo "$line" | awk '{print $1}' | tr -d "'")
name=$(echo "$line" | awk '{print $2}')
sha=$(echo "$line" | awk '{print $4}' | sed -n 's/^SHA256://p')
version=${name#criu_}
version=${version%.orig.tar.xz}
[ -n "$sha" ] && [ -n "$version" ] || fail "no SHA-256 for $name in trixie's Sources index"
case "$version" in
3.* | 4.0*) fail "trixie's criu is $version, older than 4.1" ;;
esac

curl -fsSL --retry 3 -o "$work/$name" "$uri" || fail "download of $uri failed"
echo "$sha  $work/$name" | sha256sum -c --quiet - >/dev/null 2>&1 ||
        fail "$name does not match the SHA-256 of trixie's signed Sources index ($sha)"
tar -xf "$work/$name" -C "$work"
src="$work/criu-$version"
[ -d "$src" ] || fail "$name has no criu-$version directory"
make -C "$src" -j"$(nproc)" criu >"$work/build.log" 2>&1 ||
        fail "make criu failed: $(tail -3 "$work/build.log" | tr '\n' ' ')"
"$src/criu/criu" check >"$work/check.log" 2>&1 ||
        fail "the built criu $version fails its check too: $(grep -m1 Error "$work/check.log" || tail -1 "$work/check.log")"

mkdir -p "$cache/criu-$version"
install -m 0755 "$src/criu/criu" "$cache/criu-$version/criu.new"
mv -f "$cache/criu-$version/criu.new" "$cache/criu-$version/criu"
ln -sfn "criu-$version/criu" "$cache/criu.new"
mv -Tf "$cache/criu.new" "$cache/criu"
echo "criu.sh: $cache/criu is CRIU $version: $("$cache/criu" check 2>&1 | tail -1)"
