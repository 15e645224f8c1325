#!/usr/bin/env python3
"""The include graph of src/ against the layering of docs/architecture.md.

Checks, from the sources alone (every `#include "dir/name.h"` of src/*/*.c and *.h):
  1. layers include only themselves and the layers beneath them
     (common <- runtime <- daemon; common <- agent; common <- client <- mcp <- cli; mcp
     <- daemon (/mcp); the public header include/cella/ for client, mcp and cli);
  2. inside src/daemon and src/agent, modules (a .c with its .h) import each other without a
     cycle: dispatch above, services below;
  3. the dispatchers' own headers are included only by the dispatcher and main
     (daemon/api.h, daemon/api-routes.h; agent/agent.h, agent/dispatch.h);
  4. every quoted include has the form "layer/name.h", rooted at src/: one relative to
     the including file ("../daemon/x.h", "x.h") would get past the build's per-layer
     include scopes (check-scopes.py).
Prints each violation and exits 1 if there is any; ctest runs it as layering/includes.
"""
import os
import re
import sys

ALLOWED = {
    "common": {"common"},
    "runtime": {"common", "runtime"},
    "daemon": {"common", "runtime", "mcp", "daemon"},
    "agent": {"common", "agent"},
    "client": {"common", "client", "cella"},
    "mcp": {"common", "mcp", "cella"},
    "cli": {"common", "mcp", "cli", "cella"},
}
DISPATCHER_HEADERS = {
    "daemon/api": {"daemon/api", "daemon/api-routes", "daemon/main"},
    "daemon/api-routes": {"daemon/api", "daemon/api-routes"},
    "agent/agent": {"agent/agent", "agent/main"},
    "agent/dispatch": {"agent/agent", "agent/dispatch"},
}
ACYCLIC = ("daemon", "agent")
INCLUDE = re.compile(r'\s*#\s*include\s+"([a-z0-9_-]+)/([a-z0-9_.-]+)\.h"')
QUOTED = re.compile(r'\s*#\s*include\s+"([^"]*)"')
UNROOTED = []  # [(where, path)] of quoted includes not of the form "layer/name.h"


def includes(root):
    """{(layer, module): [(line, target layer, target module)]} for src/*/*.[ch]."""
    out = {}
    src = os.path.join(root, "src")
    for layer in sorted(os.listdir(src)):
        d = os.path.join(src, layer)
        if not os.path.isdir(d):
            continue
        for f in sorted(os.listdir(d)):
            if not f.endswith((".c", ".h")):
                continue
            mod = (layer, f.rsplit(".", 1)[0])
            lst = out.setdefault(mod, [])
            with open(os.path.join(d, f), errors="replace") as fh:
                for n, line in enumerate(fh, 1):
                    m = INCLUDE.match(line)
                    q = QUOTED.match(line)
                    if q and (not m or ".." in q.group(1)):
                        UNROOTED.append(("src/%s/%s:%d" % (layer, f, n), q.group(1)))
                    if m:
                        lst.append(("src/%s/%s:%d" % (layer, f, n), m.group(1), m.group(2)))
    return out


def cycles(graph):
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, on, stack, found = {}, {}, set(), [], []
    counter = 0
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in graph:
                    continue
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        found.append(sorted(comp))
    return found


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    inc = includes(root)
    bad = []
    for (layer, mod), lst in sorted(inc.items()):
        for where, tlayer, tmod in lst:
            if layer in ALLOWED and tlayer not in ALLOWED[layer]:
                bad.append("%s: layer %s includes %s/%s.h (allowed: %s)"
                           % (where, layer, tlayer, tmod, ", ".join(sorted(ALLOWED[layer]))))
            key = "%s/%s" % (tlayer, tmod)
            if key in DISPATCHER_HEADERS and "%s/%s" % (layer, mod) not in DISPATCHER_HEADERS[key]:
                bad.append("%s: %s/%s includes the dispatcher's %s.h" % (where, layer, mod, key))
    for where, path in UNROOTED:
        bad.append('%s: #include "%s" is not rooted at src/ ("layer/name.h")' % (where, path))
    for layer in ACYCLIC:
        graph = {}
        for (lay, mod), lst in inc.items():
            if lay == layer:
                graph[mod] = {t for _, tl, t in lst if tl == layer and t != mod}
        for comp in cycles(graph):
            bad.append("src/%s: modules include each other in a cycle: %s" % (layer, " ".join(comp)))
    modules = sum(1 for k in inc if k[0] in ALLOWED)
    edges = sum(len(v) for v in inc.values())
    for b in bad:
        print(b)
    print("%d modules, %d includes: %d violations" % (modules, edges, len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
