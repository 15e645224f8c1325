#!/usr/bin/env bash
# A CRIU that can checkpoint a sandbox on this host, for memory sleep (docs/decisions/0050).
#
# Debian 12's criu (3.17) fails `criu check` on Linux 6.13 and later (the vDSO's
# [vvar_vclock]); CRIU 4.1 passes it, but on Linux 6.16 and later it cannot dump any TCP
# or UDP socket (it asks every socket for SO_PASSCRED, which those kernels answer only for
# unix and netlink sockets: "Can't get 1:16 opt: Operation not supported"), which CRIU 4.2
# fixed. So a CRIU is good here when `criu check` passes and its version is at least 4.1,
# or 4.2 on Linux 6.16 and later.
#
# When neither the criu on PATH nor an already built one is good, this builds one, once,
# from Debian's own source package into $CELLA_CRIU_CACHE (default /var/cache/cella/criu):
# criu-VERSION/criu, with the link criu -> criu-VERSION/criu that cellad looks for. The
# source is the orig tarball of the first suite of $CELLA_CRIU_SUITES (default "trixie
# sid") whose criu is recent enough, read through a private apt state (the system's
# sources stay bookworm-only; apt verifies each suite's InRelease with the installed
# debian-archive-keyring), and its SHA-256 is checked against that signed Sources index
# before anything is unpacked.
#
# Idempotent and quiet: a host with a good CRIU is left alone (no network). Called by
# scripts/deps.sh; needs root (or sudo) only when it builds. A failure is one line on stderr
# and leaves cellad falling back to files sleep: it never fails the caller (exit 0),
# unless CELLA_CRIU_STRICT=1.
set -euo pipefail

cache=${CELLA_CRIU_CACHE:-/var/cache/cella/criu}
strict=${CELLA_CRIU_STRICT:-0}
suites=${CELLA_CRIU_SUITES:-trixie sid}

# ver_ge A B: version A >= B (dpkg's ordering)
ver_ge() { dpkg --compare-versions "$1" ge "$2"; }

kernel=$(uname -r)
kernel=${kernel%%-*}
min=4.1
ver_ge "$kernel" 6.16 && min=4.2

# good BIN: its check passes and it is at least $min
good() {
        local v
        [ -x "$1" ] || return 1
        v=$("$1" --version 2>/dev/null | sed -n 's/^Version: //p' | head -1)
        [ -n "$v" ] && ver_ge "$v" "$min" && "$1" check >/dev/null 2>&1
}

if good "$cache/criu"; then
        exit 0
fi
if command -v criu >/dev/null && good "$(command -v criu)"; then
        exit 0
fi

fail() {
        echo "criu.sh: $*; memory sleep falls back to files sleep (docs/decisions/0050)" >&2
        [ "$strict" = 1 ] && exit 1
        exit 0
}

if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null || fail "not root, cannot build CRIU into $cache"
        exec sudo CELLA_CRIU_CACHE="$cache" CELLA_CRIU_STRICT="$strict" \
                CELLA_CRIU_SUITES="$suites" bash "$0"
fi
mkdir -p "$cache"
work=$(mktemp -d "$cache/build.XXXXXX")
trap 'rm -rf "$work"' EXIT

# What building CRIU needs (Debian's Build-Depends of criu, less the documentation and the
# Python bindings); scripts/deps.sh installs them, this only fills what is missing.
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

have=$(criu --version 2>/dev/null | sed -n 's/^Version: //p' | head -1 || true)
echo "criu.sh: no CRIU of at least $min that passes its check here (PATH's: ${have:-none}); building one from Debian's source into $cache"

# The orig tarball's line ('URI' name size SHA256:hash) from the first suite with a CRIU
# of at least $min.
line='' version=''
for suite in $suites; do
        st="$work/apt-$suite"
        mkdir -p "$st"/{lists/partial,cache/archives/partial}
        echo "deb-src http://deb.debian.org/debian $suite main" >"$st/sources.list"
        apt_opts=(-o "Dir::Etc::SourceList=$st/sources.list" -o Dir::Etc::SourceParts=/dev/null
                -o "Dir::State::Lists=$st/lists" -o "Dir::Cache=$st/cache")
        if ! apt-get "${apt_opts[@]}" -q update >"$work/apt-update.log" 2>&1; then
                echo "criu.sh: apt-get update of $suite's sources failed: $(tail -1 "$work/apt-update.log")" >&2
                continue
        fi
        l=$(apt-get "${apt_opts[@]}" source --print-uris criu 2>/dev/null |
                grep -E "^'[^']*/criu_[0-9][0-9.]*\.orig\.tar\.xz' " | head -1 || true)
        [ -n "$l" ] || continue
        v=$(echo "$l" | awk '{print $2}')
        v=${v#criu_}
        v=${v%.orig.tar.xz}
        if ver_ge "$v" "$min"; then
                line=$l version=$v
                break
        fi
        echo "criu.sh: $suite has criu $v, older than $min"
done
[ -n "$line" ] || fail "no suite of '$suites' has a criu of at least $min"
uri=$(echo "$line" | awk '{print $1}' | tr -d "'")
name=$(echo "$line" | awk '{print $2}')
sha=$(echo "$line" | awk '{print $4}' | sed -n 's/^SHA256://p')
[ -n "$sha" ] || fail "no SHA-256 for $name in the signed Sources index"

curl -fsSL --retry 3 -o "$work/$name" "$uri" || fail "download of $uri failed"
echo "$sha  $work/$name" | sha256sum -c --quiet - >/dev/null 2>&1 ||
        fail "$name does not match the SHA-256 of the signed Sources index ($sha)"
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
