#!/usr/bin/env python3
"""Checks that src/ obeys the module layers of docs/ARCHITECTURE.md.

A file depends on another when it calls a function defined there or includes its header. Every
src/ file belongs to one layer (LAYERS below, lowest first); a source file may depend on files of
its own layer or lower ones, never on a higher layer (a header may include the types it needs from
any layer), and the dependency graph between files must have no cycle. Prints each violation and exits 1; prints a summary and exits 0 when there is none.

usage: check_layers.py SRC_DIR [--graph]
"""
import os
import re
import sys

# Lowest first. Files of one layer may call each other but must not form a cycle.
LAYERS = [
    ("leaf", ["sizes.h", "constants.h"]),
    # The context's state: one struct whose parts each module owns (their types come from the
    # modules' headers); any file may read the fields of the part it owns.
    ("state", ["context_internal.h", "tensor_internal.h"]),
    ("diagnostics", ["errors.h", "error.c", "log.c"]),
    ("device", ["device.h", "device.c", "shape.h", "shape.c", "file_io.h", "file_io.c",
                "kernels.h", "program.c", "tuning.h", "tuning.c"]),
    ("runtime", ["buffers.h", "buffers.c", "launch.h", "launch.c", "stats.c",
                 "gemm_cpu.h", "gemm_cpu.c", "gemm.h", "gemm.c", "fused_cache.h", "fused_cache.c", "positional_table.h",
                 "positional_table.c", "context.c"]),
    ("tensors", ["tensor.c"]),
    ("operations", ["elementwise.h", "elementwise.c", "positional.h", "positional.c",
                    "attention_internal.h", "attention_args.c", "attention.c", "attention_views.c",
                    "attention_unfused.c", "fused_attention.c", "pooling.h", "pooling.c", "linear.h", "linear.c"]),
    ("layers", ["sdpa.c", "mha_internal.h", "mha.c", "mha_weights.c", "layer_weights.h",
                "layer_weights.c", "decoder_internal.h", "decoder.c", "decoder_state.c", "decoder_weights.c", "encoder_internal.h",
                "encoder.c", "encoder_weights.c", "counts.c", "presets.c"]),
    ("files", ["npy.c", "safetensors.c", "model_file.c"]),
    ("text", ["tokenizer_internal.h", "tokenizer.c", "tokenizer_load.c", "tokenizer_vocab.c",
              "tokenizer_normalize.c", "tokenizer_added.c", "tokenizer_wordpiece.c",
              "tokenizer_utf8.c"]),
    ("models", ["hf_model.h", "hf_model.c", "sentence_model.c", "transformer_internal.h",
                "transformer.c", "generate.c"]),
]

DEFINITION = re.compile(r"\b([A-Za-z_]\w*)\s*\(([^;{}()]|\([^;{}()]*\))*\)\s*\{")
KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "do"}
CALL = re.compile(r"\b(clattn_\w+)\s*\(")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


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
    layer_of = {}
    for rank, (name, files) in enumerate(LAYERS):
        for f in files:
            layer_of[f] = (rank, name)
    files = sorted(f for f in os.listdir(src) if f.endswith((".c", ".h")))
    problems = [f"{f}: not assigned to a layer in tools/check_layers.py" for f in files
                if f not in layer_of]
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
        for m in INCLUDE.finditer(raw):
            target = os.path.basename(m.group(1))
            if target in edges and target != f:
                edges[f].setdefault(target, f"includes {target}")
        for body in bodies(code):
            for m in CALL.finditer(body):
                target = defined.get(m.group(1))
                if target and target != f:
                    edges[f].setdefault(target, f"calls {m.group(1)}")
    for f in files:
        for target, why in sorted(edges[f].items()):
            if f.endswith(".h") and why.startswith("includes"):
                continue  # a header includes the types it needs; only cycles count there
            if f in layer_of and target in layer_of and layer_of[target][0] > layer_of[f][0]:
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
    print(f"check_layers: {len(files)} files, {count} dependencies, no cycle, every dependency "
          f"points down")
    return 0


if __name__ == "__main__":
    sys.exit(main())
