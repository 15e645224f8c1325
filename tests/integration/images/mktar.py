#!/usr/bin/env python3
"""Image tarballs for test-images.sh, built from the host's static busybox.

usage: mktar.py KIND OUT [ARG]

KIND: docker (docker save, legacy layout: ID/layer.tar, HEX.json), docker-new (docker save
25+: blobs/sha256/ with OCI layers, legacy dirs as symlinks), oci (OCI image layout, gzip,
xz and zstd layers; gzip for the last without the zstd command), and hostile ones wrapped in a valid OCI layout: traversal, absolute,
symlink-escape (ARG: an absolute host directory), symlink-escape-rel, hardlink-escape,
whiteout-dotdot, bad-digest, truncated, not-tar. For bench/images.sh: tree (ARG: a host
directory; its files in 3 gzip layers of an OCI layout, each layer also written as
OUT.layerN.tar.gz for the tar -x baseline).

Layer 1: busybox and its applets, /data/keep.txt, /data/gone.txt, /opq/old.txt, a char
device (skipped by the import) and a setuid file (its bit dropped). Layer 2 (gzip): deletes
/data/gone.txt (.wh.), makes /opq opaque, adds /opq/new.txt, /data/added.txt and a hard
link /data/hl -> /data/keep.txt. Layer 3 (xz): /hello.txt.
"""
import gzip
import hashlib
import io
import json
import lzma
import os
import shutil
import subprocess
import sys
import tarfile

BUSYBOX = "/bin/busybox"
APPLETS = ("sh ash cat ls echo test [ mkdir rm env pwd id sleep true false printf head tail "
           "tr wc grep sed kill ps mv cp stat touch ln chmod readlink find sort uniq cut "
           "basename dirname date uname hostname mktemp xargs tee expr seq which").split()


def sha(b):
    return hashlib.sha256(b).hexdigest()


def tar_bytes(entries):
    """entries: list of (TarInfo, data or None)."""
    bio = io.BytesIO()
    with tarfile.open(fileobj=bio, mode="w", format=tarfile.PAX_FORMAT) as t:
        for ti, data in entries:
            t.addfile(ti, io.BytesIO(data) if data is not None else None)
    return bio.getvalue()


def ti(name, kind=tarfile.REGTYPE, data=b"", mode=0o644, link=""):
    t = tarfile.TarInfo(name)
    t.type = kind
    t.mode = mode
    t.mtime = 1700000000
    t.uid = t.gid = 0
    t.uname = t.gname = "root"
    if kind == tarfile.REGTYPE:
        t.size = len(data)
    if kind in (tarfile.SYMTYPE, tarfile.LNKTYPE):
        t.linkname = link
    return (t, data if kind == tarfile.REGTYPE else None)


def layer1():
    with open(BUSYBOX, "rb") as f:
        bb = f.read()
    e = [ti("bin/", tarfile.DIRTYPE, mode=0o755), ti("bin/busybox", data=bb, mode=0o755)]
    e += [ti("bin/" + a, tarfile.SYMTYPE, link="busybox") for a in APPLETS]
    e += [ti("etc/", tarfile.DIRTYPE, mode=0o755),
          ti("etc/motd", data=b"busybox image\n"),
          ti("data/", tarfile.DIRTYPE, mode=0o755),
          ti("data/keep.txt", data=b"kept from layer 1\n"),
          ti("data/gone.txt", data=b"deleted by layer 2\n"),
          ti("opq/", tarfile.DIRTYPE, mode=0o755),
          ti("opq/old.txt", data=b"hidden by layer 2\n"),
          ti("opq/sub/", tarfile.DIRTYPE, mode=0o755),
          ti("opq/sub/older.txt", data=b"hidden too\n"),
          ti("bin/suid", data=b"#!/bin/sh\necho suid\n", mode=0o4755)]
    dev = tarfile.TarInfo("dev-evil")
    dev.type = tarfile.CHRTYPE
    dev.devmajor, dev.devminor = 1, 3
    dev.mode = 0o666
    e.append((dev, None))
    return tar_bytes(e)


def layer2():
    return tar_bytes([ti("data/", tarfile.DIRTYPE, mode=0o755),
                      ti("data/.wh.gone.txt"),
                      ti("data/added.txt", data=b"added by layer 2\n"),
                      ti("data/hl", tarfile.LNKTYPE, link="data/keep.txt"),
                      ti("opq/", tarfile.DIRTYPE, mode=0o755),
                      ti("opq/.wh..wh..opq"),
                      ti("opq/new.txt", data=b"new in layer 2\n")])


def layer3():
    return tar_bytes([ti("hello.txt", data=b"hello from layer 3\n")])


def config(diff_ids):
    return json.dumps({
        "architecture": "amd64", "os": "linux",
        "config": {"Env": ["PATH=/bin", "IMG_VAR=from-image"], "WorkingDir": "/",
                   "Cmd": ["sh"]},
        "rootfs": {"type": "layers", "diff_ids": ["sha256:" + sha(d) for d in diff_ids]},
    }).encode()


def write_outer(out, files, links=()):
    with tarfile.open(out, "w") as t:
        for name, data in files:
            t.addfile(ti(name, data=data)[0], io.BytesIO(data))
        for name, target in links:
            t.addfile(ti(name, tarfile.SYMTYPE, link=target)[0])


def docker_legacy(out, layers):
    cfg = config(layers)
    files, names = [], []
    for i, l in enumerate(layers):
        lid = hashlib.sha256(b"id%d" % i + l[:64]).hexdigest()
        files += [(lid + "/VERSION", b"1.0"), (lid + "/json", b'{"id":"%s"}' % lid.encode()),
                  (lid + "/layer.tar", l)]
        names.append(lid + "/layer.tar")
    files.append((sha(cfg) + ".json", cfg))
    files.append(("manifest.json", json.dumps(
        [{"Config": sha(cfg) + ".json", "RepoTags": ["bb:latest"], "Layers": names}]).encode()))
    write_outer(out, files)


def docker_new(out, layers):
    cfg = config(layers)
    files = [("blobs/sha256/" + sha(l), l) for l in layers]
    files.append(("blobs/sha256/" + sha(cfg), cfg))
    files.append(("manifest.json", json.dumps(
        [{"Config": "blobs/sha256/" + sha(cfg), "RepoTags": ["bb:latest"],
          "Layers": ["blobs/sha256/" + sha(l) for l in layers]}]).encode()))
    files.append(("oci-layout", b'{"imageLayoutVersion":"1.0.0"}'))
    links = [(sha(l)[:12] + "/layer.tar", "../blobs/sha256/" + sha(l)) for l in layers]
    write_outer(out, files, links)


def zstd(data):
    """zstd-compressed data (the zstd command), or None without it."""
    if not shutil.which("zstd"):
        return None
    return subprocess.run(["zstd", "-q", "-c"], input=data, stdout=subprocess.PIPE,
                          check=True).stdout


def oci(out, layers, compress=("gzip", "xz", "zstd"), corrupt=False):
    blobs, descs = [], []
    for l, c in zip(layers, compress):
        if c == "zstd" and zstd(b"") is None:
            c = "gzip"
        b = (gzip.compress(l, mtime=0) if c == "gzip" else lzma.compress(l) if c == "xz"
             else zstd(l) if c == "zstd" else l)
        mt = "application/vnd.oci.image.layer.v1.tar" + ("" if c == "none" else "+" + c)
        descs.append({"mediaType": mt, "digest": "sha256:" + sha(b), "size": len(b)})
        if corrupt:
            b = b[:-8] + bytes(8)
        blobs.append(b)
    cfg = config(layers)
    man = json.dumps({"schemaVersion": 2,
                      "mediaType": "application/vnd.oci.image.manifest.v1+json",
                      "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                                 "digest": "sha256:" + sha(cfg), "size": len(cfg)},
                      "layers": descs}).encode()
    idx = json.dumps({"schemaVersion": 2, "manifests": [
        {"mediaType": "application/vnd.oci.image.manifest.v1+json",
         "digest": "sha256:" + sha(man), "size": len(man),
         "platform": {"os": "linux", "architecture": "amd64"}}]}).encode()
    files = [("oci-layout", b'{"imageLayoutVersion":"1.0.0"}'), ("index.json", idx),
             ("blobs/sha256/" + sha(man), man), ("blobs/sha256/" + sha(cfg), cfg)]
    files += [("blobs/sha256/" + d["digest"][7:], b) for d, b in zip(descs, blobs)]
    write_outer(out, files)


def hostile(kind, arg):
    if kind == "traversal":
        return tar_bytes([ti("../../escape-traversal", data=b"x")])
    if kind == "absolute":
        return tar_bytes([ti("/escape-absolute", data=b"x")])
    if kind == "symlink-escape":
        return tar_bytes([ti("esc", tarfile.SYMTYPE, link=arg),
                          ti("esc/pwned", data=b"written through a symlink\n")])
    if kind == "symlink-escape-rel":
        return tar_bytes([ti("a/", tarfile.DIRTYPE, mode=0o755),
                          ti("a/esc", tarfile.SYMTYPE, link="../../../../../../../.."),
                          ti("a/esc/tmp/pwned-rel", data=b"x")])
    if kind == "hardlink-escape":
        return tar_bytes([ti("hl", tarfile.LNKTYPE, link="../../../../etc/passwd")])
    if kind == "whiteout-dotdot":
        return tar_bytes([ti("data/", tarfile.DIRTYPE, mode=0o755), ti("data/.wh..")])
    raise SystemExit("unknown kind " + kind)


def tree_layers(src):
    """The files under src (as usr/lib/NAME/...) spread over 3 uncompressed layer tars."""
    bios = [io.BytesIO() for _ in range(3)]
    tars = [tarfile.open(fileobj=b, mode="w", format=tarfile.PAX_FORMAT) for b in bios]
    base = "usr/lib/" + os.path.basename(src.rstrip("/"))
    i = 0
    for root, dirs, files in os.walk(src):
        dirs.sort()
        rel = os.path.relpath(root, src)
        arc = base if rel == "." else base + "/" + rel
        for t in tars:
            t.add(root, arcname=arc, recursive=False)
        for f in sorted(files):
            tars[i % 3].add(os.path.join(root, f), arcname=arc + "/" + f, recursive=False)
            i += 1
    for t in tars:
        t.close()
    return [b.getvalue() for b in bios]


def main():
    kind, out = sys.argv[1], sys.argv[2]
    arg = sys.argv[3] if len(sys.argv) > 3 else ""
    layers = [layer1(), layer2(), layer3()] if kind != "tree" else []
    if kind == "docker":
        docker_legacy(out, layers)
    elif kind == "docker-new":
        docker_new(out, layers)
    elif kind == "oci":
        oci(out, layers)
    elif kind == "bad-digest":
        oci(out, layers, compress=("gzip", "xz", "gzip"), corrupt=True)
    elif kind == "truncated":
        docker_legacy(out, layers)
        size = os.path.getsize(out)
        with open(out, "r+b") as f:
            f.truncate(size // 2)
    elif kind == "tree":
        tl = tree_layers(arg)
        oci(out, tl, compress=("gzip", "gzip", "gzip"))
        for n, l in enumerate(tl):
            with open("%s.layer%d.tar.gz" % (out, n), "wb") as f:
                f.write(gzip.compress(l, mtime=0))
    elif kind == "not-tar":
        with open(out, "wb") as f:
            f.write(os.urandom(4096))
    else:
        oci(out, [layers[0], hostile(kind, arg)], compress=("gzip", "none"))


if __name__ == "__main__":
    main()
