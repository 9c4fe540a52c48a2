#!/usr/bin/env python3
"""Writes the golden file of the post-processor's templates (tests/test_tokenizer_template.c)
from Hugging Face's tokenizers.

usage: ~/.cache/clattn/golden-venv/bin/python tools/gen_template_tokenizer_golden.py [--out DIR]

Runs offline in the venv every generator runs from (tools/make-golden-venv.sh; the committed file
was made with tokenizers 0.22.1). Each expected encoding is Hugging Face's own: the base
tokenizer.json with its "post_processor" replaced, loaded with tokenizers' Tokenizer.from_str,
padding off, enable_truncation(max_length) (or no_truncation() where max_length is null), then
encode(a, add_special_tokens=...) or encode(a, b, add_special_tokens=...): ids and type_ids.
A case with "strip" encodes the texts after Python's str.strip() (what sentence-transformers
does, the C flag CLATTN_ENCODE_STRIP).

Writes DIR/cases.json.gz (default tests/golden/tokenizer_template):
  {"tokenizers", "bases": {name: path from tests/}, "variants": [{"name", "base",
   "post_processor" (the JSON put in place of the file's), "added_single", "added_pair" (Hugging
   Face's added_tokens), "cases": [{"a", "b" (absent: one text), "max_length" (null: none),
   "add_special_tokens", "strip", "ids", "type_ids"}]}]}.
The variants: TemplateProcessing with a BOS-only single template (Llama's "<s> $A"), EOS only,
none at all ("$A"), special tokens of several ids at both ends with type ids 2 and 3 per piece, a
single template that repeats $A; BertProcessing and RobertaProcessing (their type ids without the
special tokens); ByteLevel, null, and a Sequence of ByteLevel and a BOS-only TemplateProcessing
(Llama 3's layout); on the small WordPiece tokenizer of tests/golden/tokenizer_pair and the
byte-level BPE tests/data/tokenizer/bpe/roberta.json. The texts are fixed (empty, whitespace
only, special tokens inside, multilingual, long); max_length runs from the special tokens'
number up, and null. The file is deterministic.
"""
import argparse
import gzip
import json
import os
import random

import tokenizers
from tokenizers import Tokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.join(HERE, "..", "tests")
OUT = os.path.join(TESTS, "golden", "tokenizer_template")
SEED = 20261206

BASES = {
    "wordpiece": "golden/tokenizer_pair/wordpiece.json",
    "bpe": "data/tokenizer/bpe/roberta.json",
}

TEXTS = [
    "",
    "   ",
    "hello world",
    "  Hello, World!  ",
    "a [SEP] b",
    "the quick brown fox jumps over the lazy dog again and again and again",
    "\u6771\u4eac is big; \u00e9t\u00e9 caf\u00e9",
    "x",
    "\tnumbers 12345 and 678\n",
    "<s> tokens </s> inside",
]


def seq(name, type_id=0):
    return {"Sequence": {"id": name, "type_id": type_id}}


def special(name, type_id=0):
    return {"SpecialToken": {"id": name, "type_id": type_id}}


def template(single, pair, specials):
    return {"type": "TemplateProcessing", "single": single, "pair": pair,
            "special_tokens": {name: {"id": name, "ids": ids, "tokens": [name] * len(ids)}
                               for name, ids in specials.items()}}


def variants(base, tok):
    """The post-processors tried on one base tokenizer: names of its first and second special
    token stand for BOS and EOS."""
    bos_name, eos_name = ("[CLS]", "[SEP]") if base == "wordpiece" else ("<s>", "</s>")
    bos, eos = tok.token_to_id(bos_name), tok.token_to_id(eos_name)
    specials = {bos_name: [bos], eos_name: [eos]}
    multi = {"[X]": [bos, eos], "[Y]": [eos, bos, eos]}
    llama = template([special(bos_name), seq("A")],
                     [special(bos_name), seq("A"), special(bos_name, 1), seq("B", 1)], specials)
    return [
        ("bos_only", llama),
        ("eos_only", template([seq("A"), special(eos_name)],
                              [seq("A"), special(eos_name), seq("B", 1), special(eos_name, 1)],
                              specials)),
        ("none", template([seq("A")], [seq("A"), seq("B", 1)], specials)),
        ("multi", template([special("[X]", 2), seq("A", 3), special("[Y]", 2)],
                           [special("[Y]"), seq("B", 3), special("[X]", 1), seq("A", 2),
                            special("[Y]", 3)], multi)),
        ("repeat", template([special(bos_name), seq("A"), special(eos_name), seq("A", 1)],
                            [seq("A"), seq("B", 1), seq("A", 2)], specials)),
        ("bert", {"type": "BertProcessing", "sep": [eos_name, eos], "cls": [bos_name, bos]}),
        ("roberta", {"type": "RobertaProcessing", "sep": [eos_name, eos],
                     "cls": [bos_name, bos], "trim_offsets": True, "add_prefix_space": False}),
        ("bytelevel", {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                       "use_regex": True}),
        ("null", None),
        ("sequence", {"type": "Sequence", "processors": [
            {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False,
             "use_regex": True}, llama]}),
    ]


def encode(tok, a, b, max_length, add_special, strip):
    if max_length is None:
        tok.no_truncation()
    else:
        tok.enable_truncation(max_length, strategy="longest_first")
    if strip:
        a = a.strip()
        b = b.strip() if b is not None else None
    enc = tok.encode(a, b, add_special_tokens=add_special) if b is not None else \
        tok.encode(a, add_special_tokens=add_special)
    return enc.ids, enc.type_ids


def cases(tok, rng):
    out = []
    for pair in (False, True):
        added = tok.post_processor.num_special_tokens_to_add(pair) if tok.post_processor else 0
        for add_special in (True, False):
            for i, a in enumerate(TEXTS):
                b = TEXTS[(i * 3 + 1) % len(TEXTS)] if pair else None
                reserved = added if add_special else 0
                for max_length in (None, max(reserved, 1), reserved + rng.randint(1, 12)):
                    strip = rng.random() < 0.3
                    ids, type_ids = encode(tok, a, b, max_length, add_special, strip)
                    case = {"a": a, "max_length": max_length, "add_special_tokens": add_special,
                            "strip": strip, "ids": ids, "type_ids": type_ids}
                    if pair:
                        case["b"] = b
                    out.append(case)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=OUT)
    args = parser.parse_args()
    rng = random.Random(SEED)
    result = {"tokenizers": tokenizers.__version__, "bases": BASES, "variants": []}
    for base, path in BASES.items():
        with open(os.path.join(TESTS, path), encoding="utf-8") as fh:
            original = json.load(fh)
        for name, pp in variants(base, Tokenizer.from_str(json.dumps(original))):
            spec = dict(original)
            spec["post_processor"] = pp
            spec["truncation"] = None
            spec["padding"] = None
            tok = Tokenizer.from_str(json.dumps(spec))
            p = tok.post_processor
            result["variants"].append({
                "name": base + "/" + name, "base": base, "post_processor": pp,
                "added_single": p.num_special_tokens_to_add(False) if p else 0,
                "added_pair": p.num_special_tokens_to_add(True) if p else 0,
                "cases": cases(tok, rng)})
    os.makedirs(args.out, exist_ok=True)
    text = json.dumps(result, ensure_ascii=False, separators=(",", ":")) + "\n"
    with open(os.path.join(args.out, "cases.json.gz"), "wb") as fh:
        # mtime 0 and no file name: the same bytes on every run
        with gzip.GzipFile(filename="", mode="wb", fileobj=fh, mtime=0) as gz:
            gz.write(text.encode("utf-8"))


if __name__ == "__main__":
    main()
