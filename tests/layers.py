#!/usr/bin/env python3
"""weft's layout, checked: which root may include which, no header includes itself through
others, and the floors of the core point only down (docs/design.md, "Layout").

usage: layers.py <source-root>

Every `#include "weft/..."` (or <weft/...>) of every header and of the sources beside them is
resolved against the roots below, in order. It fails when
  - a header includes a header of a root its own root may not reach (the ROOTS table);
  - headers include each other in a cycle (a mutual include, however long);
  - a header of the core includes one of a higher floor, but for the arrows ALLOWED_UP names;
  - an include names no header of any root.
Then it reports the figures the layout is judged by: arrows up per floor, headers over 400
lines, headers that reach Boost (directly or through others), and README.md's length.
"""
import os
import re
import sys

# root -> the roots its headers may include besides their own (the arrows of the Layout picture).
ROOTS = {
    "include": [],
    "transports/inproc": ["include"],
    "transports/sim": ["include"],
    "bootstrap/pmix": ["include"],
    "bootstrap/tcp": ["include", "bootstrap/pmix"],
    "transports/tcp": ["include", "bootstrap/tcp"],
    "transports/shm": ["include", "bootstrap/pmix"],
    "transports/stream": ["include", "transports/shm"],
    "transports/ofi": ["include"],
    "transports/cuda": ["include", "transports/stream"],
    "nonblocking": ["include"],
}

# The core's floors, lowest first: a header may include its own floor and those below.
# A file's floor is that of the longest prefix that matches its path under include/.
FLOORS = [
    ("ground", ["weft/detail/", "weft/error.hpp", "weft/types.hpp", "weft/ops.hpp", "weft/call.hpp",
                "weft/transport.hpp", "weft/memory.hpp", "weft/buffer.hpp", "weft/options.hpp",
                "weft/hosts.hpp", "weft/tiered.hpp", "weft/recorder.hpp", "weft/tuning/"]),
    ("communicator", ["weft/communicator/", "weft/communicator.hpp"]),
    ("algorithms", ["weft/algorithms/"]),
    ("dispatch", ["weft/dispatch/", "weft/collectives.hpp", "weft/recovery.hpp", "weft/weft.hpp"]),
    ("bootstrap", ["weft/bootstrap/"]),
]

# (from, to): arrows up the core keeps, each with its reason in docs/design.md.
ALLOWED_UP = set()

INCLUDE = re.compile(r'^\s*#\s*include\s*[<"](weft/[^">]+)[">]', re.M)
BOOST = re.compile(r'^\s*#\s*include\s*<boost/', re.M)


def floor_of(name):
    best, floor = -1, None
    for index, (_, prefixes) in enumerate(FLOORS):
        for prefix in prefixes:
            if (name == prefix or name.startswith(prefix)) and len(prefix) > best:
                best, floor = len(prefix), index
    return floor


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    source = sys.argv[1]
    headers = {}  # name (weft/...) -> (root, path)
    problems = []
    for root in ROOTS:
        base = os.path.join(source, root)
        for folder, _, files in os.walk(os.path.join(base, "weft")):
            for file in files:
                if file.endswith((".hpp", ".cuh")):
                    path = os.path.join(folder, file)
                    name = os.path.relpath(path, base)
                    if name in headers:
                        problems.append("%s is in two roots: %s and %s" % (name, headers[name][0], root))
                    headers[name] = (root, path)

    edges, boost_direct, lines = {}, set(), {}
    for name, (root, path) in headers.items():
        text = open(path, encoding="utf-8").read()
        lines[name] = text.count("\n")
        if BOOST.search(text):
            boost_direct.add(name)
        edges[name] = []
        for target in INCLUDE.findall(text):
            if target not in headers:
                problems.append("%s includes %s, which no root holds" % (name, target))
                continue
            edges[name].append(target)
            to_root = headers[target][0]
            if to_root != root and to_root not in ROOTS[root]:
                problems.append("%s (%s) includes %s (%s): %s may not reach %s" %
                                (name, root, target, to_root, root, to_root))

    # Cycles: Tarjan's strongly connected components.
    index, low, on_stack, stack, counter, cycles = {}, {}, set(), [], [0], []

    def connect(v):
        work = [(v, iter(edges[v]))]
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        while work:
            node, children = work[-1]
            advanced = False
            for w in children:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(edges[w])))
                    advanced = True
                    break
                if w in on_stack:
                    low[node] = min(low[node], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == node:
                        break
                if len(component) > 1 or node in edges[node]:
                    cycles.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            connect(v)
    for component in cycles:
        problems.append("headers include each other: " + " <-> ".join(component))

    # Floors of the core.
    up = {}
    for name, (root, _) in sorted(headers.items()):
        if root != "include":
            continue
        mine = floor_of(name)
        if mine is None:
            problems.append("%s has no floor (add its folder to FLOORS in tests/layers.py)" % name)
            continue
        for target in edges[name]:
            theirs = floor_of(target)
            if headers[target][0] == "include" and theirs is not None and theirs > mine:
                up.setdefault(FLOORS[mine][0], []).append((name, target))
                if (name, target) not in ALLOWED_UP:
                    problems.append("%s (floor %s) includes %s (floor %s): an arrow up" %
                                    (name, FLOORS[mine][0], target, FLOORS[theirs][0]))

    # Figures.
    reach = {}

    def reaches_boost(v, seen):
        if v in reach:
            return reach[v]
        if v in seen:
            return False
        seen.add(v)
        result = v in boost_direct or any(reaches_boost(w, seen) for w in edges[v])
        reach[v] = result
        return result

    boost_reaching = sorted(v for v in headers if reaches_boost(v, set()))
    long_headers = sorted((n, lines[n]) for n in headers if lines[n] > 400)
    readme = os.path.join(source, "README.md")
    print("roots: %d, headers: %d" % (len(ROOTS), len(headers)))
    print("arrows up in the core: %d%s" % (sum(len(v) for v in up.values()),
          "".join("\n  %s: %s" % (f, ", ".join("%s -> %s" % e for e in v)) for f, v in up.items())))
    print("mutual includes: %d" % len(cycles))
    print("headers over 400 lines: %d%s" % (len(long_headers),
          "".join("\n  %s (%d)" % e for e in long_headers)))
    by_root = {}
    for v in boost_reaching:
        by_root[headers[v][0]] = by_root.get(headers[v][0], 0) + 1
    print("headers that reach Boost: %d (directly: %d; by root: %s)" % (
        len(boost_reaching), len(boost_direct), ", ".join("%s %d" % e for e in sorted(by_root.items()))))
    if os.path.exists(readme):
        print("README.md: %d lines" % open(readme, encoding="utf-8").read().count("\n"))
    for problem in problems:
        print("FAIL " + problem)
    print("layout: %s" % ("%d problems" % len(problems) if problems else "as documented"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
