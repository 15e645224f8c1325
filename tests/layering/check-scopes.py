#!/usr/bin/env python3
"""What CMake lets each layer's sources include, against the layering of docs/architecture.md.

Reads BUILD/compile_commands.json. For every source of src/<layer>/ (and the generated
agent sources) it takes the -I/-isystem directories of its compile command and the layers
of src/ reachable through them (a directory that is src/ itself reaches all; one holding
links to src/<l> reaches each l). Checks:
  1. every layer's sources compile with that layer's scope, build/include-scope/<layer>/;
  2. the layers they can reach are exactly the allowed ones (check-includes.py's ALLOWED,
     include/ standing for "cella");
  3. each scope directory holds links to the allowed layers and nothing else.
Prints each violation and exits 1 if there is any; ctest runs it as layering/scopes.
"""
import json
import os
import shlex
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from importlib import import_module  # noqa: E402

ALLOWED = import_module("check-includes").ALLOWED


def include_dirs(args, directory):
    out, i = [], 0
    while i < len(args):
        a = args[i]
        for flag in ("-I", "-isystem", "-iquote"):
            if a == flag and i + 1 < len(args):
                out.append(args[i + 1])
                i += 1
                break
            if a.startswith(flag) and len(a) > len(flag):
                out.append(a[len(flag):])
                break
        i += 1
    return [os.path.realpath(os.path.join(directory, d)) for d in out]


def reachable(dirs, src, include):
    """Layers (and "cella") whose "layer/name.h" resolves through one of dirs."""
    layers = {l for l in os.listdir(src) if os.path.isdir(os.path.join(src, l))}
    got = set()
    for d in dirs:
        if d == include:
            got.add("cella")
        for l in layers | {"cella"}:
            p = os.path.join(d, l)
            if not os.path.isdir(p):
                continue
            real = os.path.realpath(p)
            if real == os.path.join(src, l):
                got.add(l)
            elif l == "cella" and real == os.path.join(include, "cella"):
                got.add("cella")
    return got


def main():
    root = os.path.realpath(sys.argv[1])
    build = os.path.realpath(sys.argv[2])
    src, include = os.path.join(root, "src"), os.path.join(root, "include")
    with open(os.path.join(build, "compile_commands.json")) as f:
        commands = json.load(f)
    bad, seen = [], set()
    for c in commands:
        path = os.path.realpath(os.path.join(c["directory"], c["file"]))
        if path.startswith(src + os.sep):
            layer = os.path.relpath(path, src).split(os.sep)[0]
        elif path.startswith(os.path.join(build, "generated") + os.sep):
            layer = "agent"  # runners.c
        else:
            continue  # tests, fuzz, bench: the wide scope, on purpose
        args = c["arguments"] if "arguments" in c else shlex.split(c["command"])
        dirs = include_dirs(args, c["directory"])
        rel = os.path.relpath(path, root)
        scope = os.path.realpath(os.path.join(build, "include-scope", layer))
        if scope not in dirs:
            bad.append("%s: not compiled with include-scope/%s" % (rel, layer))
        got = reachable(dirs, src, include)
        if got != ALLOWED[layer]:
            extra = sorted(got - ALLOWED[layer])
            missing = sorted(ALLOWED[layer] - got)
            bad.append("%s (%s): reaches %s%s" % (
                rel, layer, ", ".join(sorted(got)) or "nothing",
                (" (not allowed: %s)" % ", ".join(extra) if extra else "")
                + (" (missing: %s)" % ", ".join(missing) if missing else "")))
        seen.add(layer)
    for layer in sorted(seen):
        scope = os.path.join(build, "include-scope", layer)
        links = set(os.listdir(scope)) if os.path.isdir(scope) else set()
        want = ALLOWED[layer] - {"cella"}
        if links != want:
            bad.append("include-scope/%s holds %s, not %s" % (
                layer, ", ".join(sorted(links)), ", ".join(sorted(want))))
    for b in bad:
        print(b)
    if not seen:
        print("no source of src/ in compile_commands.json")
        return 1
    print("%d compile commands of %d layers checked, %d violation(s)" % (
        len([c for c in commands]), len(seen), len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
