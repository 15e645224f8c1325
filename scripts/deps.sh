#!/usr/bin/env bash
# Install what cella needs to build, test and fuzz on Debian 12, with apt-get, and only what
# is missing: a machine that has everything is left alone (no apt-get update, no network).
# Idempotent and non-interactive. Needs root for the install step (or sudo if present).
set -euo pipefail

packages=(
        # toolchain
        build-essential cmake pkg-config clang clang-format libclang-rt-14-dev
        # libraries (headers + static archives for the static agent)
        libuv1-dev libhttp-parser-dev libwslay-dev libjansson-dev libsqlite3-dev
        libseccomp-dev libcap-dev libmnl-dev libnftables-dev libcurl4-openssl-dev libcmocka-dev
        # image import (tar/gzip/zstd/xz layers, sha256 digests) and the WebSocket handshake
        # (SHA-1): libarchive and OpenSSL's libcrypto
        libarchive-dev libssl-dev
        # images and sandboxes
        mmdebstrap bubblewrap uidmap iproute2 procps util-linux
        # the images test builds its tarballs from a static busybox (zstd for a zstd layer)
        busybox-static zstd
        # outbound networking (libnftables) and the network test's view of it
        nftables
        # disk limits: mkfs.ext4 for the per-sandbox disk images
        e2fsprogs
        # memory sleep's host check (decision 0050): `criu check` says whether CRIU can
        # checkpoint here (Debian 12's 3.17 cannot on Linux 6.13 and later; scripts/criu.sh
        # then builds a newer one from Debian's source with the libraries this package brings
        # and these)
        criu protobuf-c-compiler libprotobuf-c-dev libprotobuf-dev protobuf-compiler
        libnl-3-dev libnet1-dev libbsd-dev libaio-dev uuid-dev libgnutls28-dev python3-protobuf
        # the reflinked snapshots' test and bench: an XFS data dir (mkfs.xfs -m reflink=1)
        xfsprogs
        # tests, scripts and the README tour
        curl jq ca-certificates python3 git sqlite3
        # the Python SDK (sdk/python): its install check and its strict type check
        python3-pip python3-setuptools python3-wheel python3-venv mypy
        # integration/metrics parses GET /metrics with a Prometheus text-format parser
        python3-prometheus-client
        # the cluster's store (decision 0055): test-daemon-etcd and integration/cluster start
        # their own etcd members on loopback ports (the package's own service is not used)
        etcd-server
        # integration/cluster-tenants reads what the nodes wrote into etcd with etcdctl
        etcd-client
        # the preview test's browser (headless) and the preview-proxy benchmark
        chromium wrk
)

missing=()
for p in "${packages[@]}"; do
        status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
        [ "$status" = installed ] || missing+=("$p")
done
# Node.js and npm for the TypeScript SDK (sdk/typescript) and its tests: checked by command,
# not by package, since a `node` from elsewhere (e.g. nodesource's nodejs, which bundles npm
# and conflicts with Debian's npm package) is as good as Debian's.
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ ${#missing[@]} -eq 0 ]; then
        # a CRIU that passes its check here (docs/decisions/0050), built once if needed
        exec bash "$here/criu.sh"
fi

echo "deps.sh: installing ${missing[*]}"
sudo=()
if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null || {
                echo "deps.sh: missing packages and not root: ${missing[*]}" >&2
                exit 1
        }
        sudo=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -q
"${sudo[@]}" apt-get install -y -q "${missing[@]}" </dev/null
exec bash "$here/criu.sh"
