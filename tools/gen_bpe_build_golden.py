#!/usr/bin/env python3
"""Writes a small hand-made byte-level BPE tokenizer and Hugging Face's ids of texts through it.

usage: ~/.cache/clattn/golden-venv/bin/python tools/gen_bpe_build_golden.py [--out DIR]

Needs the `tokenizers` package (no network): the venv every generator runs from
(tools/make-golden-venv.sh). tests/test_tokenizer_build.c builds the same tokenizer from plain C
arrays through the library's BPE builder (no JSON) and checks that its ids equal those of the
tokenizer.json written here, loaded by the library, and the ids written here by tokenizers.

The tokenizer: a vocabulary of GPT-2's 256 byte characters (ids 0..255, in byte order), then
the token of each merge of MERGES below in order (ids 256 and up; a token two merges make is
listed once), no normaliser, no added tokens, no post-processor. MERGES is copied in
tests/test_tokenizer_build.c: change both together.

Writes, under --out (default tests/golden/tokenizer_build/):
  tokenizer.json  the ByteLevel pre-tokeniser without a prefix space, with GPT-2's regex;
  variant.json    the same with a prefix space, without the regex and with ignore_merges;
  ids.json        TEXTS (fixed) and seeded random texts, with each file's ids of each text.
"""
import argparse
import json
import os
import random

import tokenizers
from tokenizers import Tokenizer, decoders, models, pre_tokenizers

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(HERE, "..", "tests", "golden", "tokenizer_build")
SEED = 20261206

# GPT-2's characters: "\u0120" (Ġ) is the space, "\u010a" (Ċ) the newline; "é" is "Ã©",
# "中" is "ä¸Ń". "abc" is made by two merges; "Ġher" by none ("h" "e" merge before "e" "r"),
# so that only ignore_merges gives it.
MERGES = [
    ("\u0120", "t"), ("h", "e"), ("\u0120t", "he"), ("\u0120", "a"), ("i", "n"), ("e", "r"),
    ("o", "n"), ("\u0120a", "n"), ("\u0120an", "d"), ("in", "g"), ("r", "e"), ("a", "t"),
    ("\u0120", "s"), ("e", "n"), ("o", "r"), ("\u0120", "c"), ("a", "b"), ("ab", "c"),
    ("b", "c"), ("a", "bc"), ("\u0120", "\u0120"), ("\u0120\u0120", "\u0120\u0120"),
    ("\u010a", "\u010a"), ("'", "s"), ("1", "2"), ("12", "3"), ("\u00c3", "\u00a9"),
    ("\u00e4", "\u00b8"), ("\u00e4\u00b8", "\u0143"), ("\u0120c", "at"), ("\u0120s", "at"),
    ("\u0120the", "re"), ("\u0120", "the"), ("t", "he"), ("h", "er"), ("\u0120", "her"),
]

TEXTS = [
    "", " ", "the cat sat on the mat", "There and then, the cats are there.",
    "  two  spaces   three    four", "it's the cat's hat", "abc abcabc bcab a b c",
    "caf\u00e9 \u4e2d\u6587 123 12312 4567", "hello\nworld\n\n\tthe end", "\U0001F642 ok",
    "the", "\u0120the", "THE AND And and", "x" * 40, "her", " her", "her her",
]

ALPHABET = ["the", "he", "and", "ab", "bc", "abc", "cat", "sat", "re", "ing", "er", "on",
            " ", " ", " ", "  ", "\n", "\t", "'s", "123", "12", "\u00e9", "\u4e2d", "\U0001F642",
            "T", "x", ",", ".", "!"]


def byte_characters():
    """GPT-2's bytes_to_unicode, as a list indexed by byte."""
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) +
                 list(range(0xAE, 0x100)))
    table, n = [], 0
    for b in range(256):
        if b in printable:
            table.append(chr(b))
        else:
            table.append(chr(256 + n))
            n += 1
    return table


def vocabulary():
    tokens = byte_characters()
    for a, b in MERGES:
        if a + b not in tokens:
            tokens.append(a + b)
    return {t: i for i, t in enumerate(tokens)}


def make(add_prefix_space, use_regex, ignore_merges):
    tok = Tokenizer(models.BPE(vocab=vocabulary(), merges=list(MERGES),
                               ignore_merges=ignore_merges))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space,
                                                 use_regex=use_regex)
    tok.decoder = decoders.ByteLevel()
    return tok


def texts():
    rng = random.Random(SEED)
    out = list(TEXTS)
    for _ in range(150):
        out.append("".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 24))))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=GOLDEN)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    files = {"tokenizer.json": make(False, True, False), "variant.json": make(True, False, True)}
    all_texts = texts()
    ids = {}
    for name, tok in files.items():
        tok.save(os.path.join(args.out, name), pretty=True)
        # What the library reads, to be sure the file says what the test assumes.
        saved = Tokenizer.from_file(os.path.join(args.out, name))
        ids[name] = [saved.encode(t).ids for t in all_texts]
        assert ids[name] == [tok.encode(t).ids for t in all_texts]
    with open(os.path.join(args.out, "ids.json"), "w", encoding="utf-8") as f:
        json.dump({"tokenizers": tokenizers.__version__, "seed": SEED, "texts": all_texts,
                   "ids": ids}, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {len(all_texts)} texts' ids for {len(files)} tokenizers to {args.out}")


if __name__ == "__main__":
    main()
