#!/bin/bash
# The code interpreter runners (src/agent/runners/) run directly in the default image, the
# way cella-init starts them, driven by tests/runners/runner-driver.py over fd 3/fd 4.
#
# The image is only read: a private mount namespace gets a read-only bind of its rootfs,
# with /proc, and tmpfs on /tmp, /root and /workspace (the writable places a sandbox has).
# Exit 77 (skipped) without root or without the image.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../../src/agent/runners" && pwd)
rootfs=${CELLA_IMAGES:-/var/lib/cella/images}/default/rootfs

if [ "$(id -u)" != 0 ]; then
  echo "skipped: needs root (chroot, mount namespace)"
  exit 77
fi
if [ ! -x "$rootfs/usr/bin/python3" ] || [ ! -x "$rootfs/usr/bin/node" ]; then
  echo "skipped: no default image at $rootfs"
  exit 77
fi

view=$(mktemp -d /tmp/cella-runners.XXXXXX)
trap 'rmdir "$view"' EXIT

# Everything mounted here lives and dies with the namespace: nothing to unmount afterwards.
unshare --mount --propagation private bash -euc '
  rootfs=$1 view=$2 here=$3 src=$4
  mount --bind "$rootfs" "$view"
  mount -o remount,bind,ro "$view"
  mount -t proc proc "$view/proc"
  for dir in tmp root workspace; do
    mount -t tmpfs -o size=64m,mode=0755 tmpfs "$view/$dir"
  done
  chmod 1777 "$view/tmp"
  exec python3 "$here/runner-driver.py" "$view" "$src"
' runners "$rootfs" "$view" "$here" "$src"
