#!/usr/bin/env python3
"""Checks that src/ obeys the layers of docs/ARCHITECTURE.md, which are its folders.

src/ holds one folder per layer; src/meson.build lists them lowest first (`clattn_layers`), and
that list is the order of the layers. A file depends on another when it calls a function defined
there or includes its header ("runtime/tuning.h" from src/, or "tuning.h" beside it). A file may
depend on files of its own folder or of lower ones, never of a higher one; the dependency graph
between files must have no cycle; every .c/.h under src/ must lie in a layer folder; and no
library file includes the umbrella header clattn/clattn.h (each includes the public headers it
uses). Prints each violation and exits 1; prints a summary and exits 0 when there is none.

usage: check_layers.py SRC_DIR [--graph]
"""
import os
import re
import sys

LAYER_LIST = re.compile(r"^clattn_layers\s*=\s*\[([^\]]*)\]", re.M)


def layer_order(src):
    """The layer folders, lowest first, as src/meson.build lists them."""
    with open(os.path.join(src, "meson.build"), encoding="utf-8") as fh:
        m = LAYER_LIST.search(fh.read())
    if not m:
        sys.exit(f"check_layers: {src}/meson.build has no clattn_layers = [...] list")
    return re.findall(r"'([^']+)'", m.group(1))


DEFINITION = re.compile(r"\b([A-Za-z_]\w*)\s*\(([^;{}()]|\([^;{}()]*\))*\)\s*\{")
KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "do"}
CALL = re.compile(r"\b(clattn_\w+)\s*\(")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
UMBRELLA = "clattn/clattn.h"


def strip(text):
    """Removes comments, string and character literals (keeping line structure)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def bodies(code):
    """The bodies of the functions defined in code (calls outside them are declarations)."""
    for m in DEFINITION.finditer(code):
        if m.group(1) in KEYWORDS:
            continue
        depth, i = 1, m.end()
        while i < len(code) and depth:
            depth += {"{": 1, "}": -1}.get(code[i], 0)
            i += 1
        yield code[m.end():i]


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    src = sys.argv[1]
    layers = layer_order(src)
    rank_of = {name: rank for rank, name in enumerate(layers)}
    files, problems = [], []
    for dirpath, dirnames, names in os.walk(src):
        dirnames.sort()
        for n in sorted(names):
            if n.endswith((".c", ".h")):
                rel = os.path.relpath(os.path.join(dirpath, n), src).replace(os.sep, "/")
                folder = rel.split("/")[0] if "/" in rel else ""
                if folder not in rank_of:
                    problems.append(f"{rel}: not in a layer folder (src/meson.build's "
                                    f"clattn_layers: {', '.join(layers)})")
                else:
                    files.append(rel)
    layer_of = {f: (rank_of[f.split("/")[0]], f.split("/")[0]) for f in files}
    texts = {}
    for f in files:
        with open(os.path.join(src, f), encoding="utf-8") as fh:
            raw = fh.read()
        texts[f] = (raw, strip(raw))
    defined = {}
    for f in files:
        for m in DEFINITION.finditer(texts[f][1]):
            if m.group(1).startswith("clattn_"):
                defined.setdefault(m.group(1), f)
    edges = {f: {} for f in files}
    for f in files:
        raw, code = texts[f]
        folder = f.split("/")[0]
        for m in INCLUDE.finditer(raw):
            name = m.group(1)
            if name == UMBRELLA:
                problems.append(f"{f} includes {UMBRELLA}: include the public headers it uses")
                continue
            target = name if name in edges else f"{folder}/{name}"
            if target in edges and target != f:
                edges[f].setdefault(target, f"includes {name}")
        for body in bodies(code):
            for m in CALL.finditer(body):
                target = defined.get(m.group(1))
                if target and target != f:
                    edges[f].setdefault(target, f"calls {m.group(1)}")
    for f in files:
        for target, why in sorted(edges[f].items()):
            if layer_of[target][0] > layer_of[f][0]:
                problems.append(f"{f} ({layer_of[f][1]}) {why} from {target} "
                                f"({layer_of[target][1]}): a lower layer depends on a higher one")
    # Cycles: Tarjan's strongly connected components.
    index, low, stack, on_stack, sccs, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                scc.append(w)
                if w == v:
                    break
            if len(scc) > 1:
                sccs.append(sorted(scc))

    sys.setrecursionlimit(10000)
    for f in files:
        if f not in index:
            visit(f)
    for scc in sccs:
        detail = "; ".join(f"{a} {edges[a][b]} ({b})" for a in scc for b in edges[a] if b in scc)
        problems.append(f"cycle among {', '.join(scc)}: {detail}")
    if "--graph" in sys.argv:
        for f in files:
            print(f"{f}: {', '.join(sorted(edges[f]))}")
    for p in problems:
        print(p)
    if problems:
        print(f"check_layers: {len(problems)} problem(s)")
        return 1
    count = sum(len(e) for e in edges.values())
    print(f"check_layers: {len(files)} files in {len(layers)} layers ({' < '.join(layers)}), "
          f"{count} dependencies, no cycle, every dependency points down")
    return 0


if __name__ == "__main__":
    sys.exit(main())
