#!/usr/bin/env python3
"""Writes tests/data/precision/corpus.txt: the texts tests/test_precision.c embeds at each
precision (clattn_precision) to compare with float32 — 300 texts of mixed lengths from
bench/embed_bench.py's generator (the benchmark's corpus, another seed), one per line.

usage: ~/.cache/clattn/golden-venv/bin/python tools/gen_precision_corpus.py [--count N]
           [--out FILE]

(any Python 3 runs it: it needs nothing beyond bench/embed_bench.py's generator; the venv of
tools/make-golden-venv.sh, from which every generator runs, does. Deterministic: a count N gives
the committed file's first N lines.)
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "bench"))
import embed_bench  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--count", type=int, default=300)
    ap.add_argument("--out", default=os.path.join(HERE, "..", "tests", "data", "precision",
                                                  "corpus.txt"))
    a = ap.parse_args()
    texts = embed_bench.make_corpus(a.count, seed=20261202)
    with open(a.out, "w", encoding="utf-8", newline="\n") as f:
        for t in texts:
            assert "\n" not in t
            f.write(t + "\n")
    print(f"{a.out}: {len(texts)} texts")


if __name__ == "__main__":
    main()
