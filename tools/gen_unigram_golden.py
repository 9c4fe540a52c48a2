#!/usr/bin/env python3
"""Writes the Unigram tokenizer's golden files from Hugging Face's fast tokenizer.

usage: ~/.cache/clattn/golden-venv/bin/python tools/gen_unigram_golden.py [--out DIR]
           [--tokenizer-only | --from-tokenizer FILE]

Needs tokenizers, transformers, protobuf and sentencepiece: the venv every generator runs from,
made by tools/make-golden-venv.sh (tests/golden/README.md; sentencepiece 0.2.3: another version
trains another vocabulary). The committed files were made with tokenizers 0.19.1 and
transformers 4.40.2. Offline: nothing is downloaded. --out (default tests/golden/unigram)
receives the files; --tokenizer-only writes tokenizer.json.gz alone (steps 1 and 2: seconds).

1. Trains a small SentencePiece Unigram model (byte_fallback, SentencePiece's built-in
   nmt_nfkc normalisation rule, character coverage below 1 so that rare characters take the
   byte fallback) on a multilingual corpus written here (Latin, Cyrillic, Greek, CJK, kana,
   Hangul, Arabic, Hebrew, Devanagari, Thai, emoji, combining marks).
2. Converts it as transformers converts XLM-RoBERTa's sentencepiece.bpe.model
   (XLMRobertaTokenizerFast(vocab_file=...): <s> <pad> </s> <unk> first, <mask> last, these
   five as added special tokens (<mask> with lstrip),
   normalizer Sequence[Precompiled(nmt_nfkc charsmap), Strip(right), Replace(" {2,}", "▁")],
   pre_tokenizer Metaspace, post_processor TemplateProcessing <s> $A </s>), with
   "byte_fallback" set true in the model (the converter drops it).
3. Writes under tests/golden/unigram/:
   tokenizer.json.gz  that tokenizer (gzip: the charsmap alone is 317 KB of base64);
   golden.json.gz     {"variants": [{"name", "normalizer", "pre_tokenizer", "post_processor",
                      "byte_fallback"}...] (null members: the base tokenizer's; a
                      {"type": "Precompiled"} without its charsmap: the base charsmap),
                      "texts": [3000 random strings + hand-picked ones],
                      "ids": {variant: [[ids of text i]...]} (with the special tokens),
                      "codepoints": {variant: {"alone"|"after_a": [hex FNV-1a 64 of each
                      block of 256 code points]}},
                      "small": a hand-made vocabulary's "tokenizer" (tokenizer.json),
                      "variants" (unk_id, byte_fallback), "texts" and "ids" (null where
                      Hugging Face fails: no unk_id)}.
   A code point block's hash runs over the ids of each code point of the block in order (the
   text chr(cp) alone, or "a" + chr(cp)), surrogates skipped: FNV-1a 64 over each id as 4
   bytes little-endian, then 4 bytes 0xFF after each code point's ids.
The files are deterministic: running the tool again gives the same bytes.

With --from-tokenizer FILE --out DIR it skips the training and writes DIR/tokenizer.json.gz
(FILE) and DIR/golden.json.gz for that tokenizer.json as it is (one variant "as_is", the same
texts, every code point; no hand-made vocabulary), e.g. for a real model's tokenizer; then
`CLATTN_UNIGRAM_GOLDEN=DIR build/tests/test_tokenizer_unigram` compares with them.
"""
import argparse
import copy
import gzip
import json
import os
import random
import sys
import tempfile

import sentencepiece as spm
import tokenizers
import tokenizers.models
import tokenizers.pre_tokenizers
import tokenizers.processors
import transformers
from tokenizers import Tokenizer
from transformers import XLMRobertaTokenizerFast

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "tests", "golden", "unigram")
SEED = 20261202
RANDOM_COUNT = 3000

WORDS = {
    "latin": "the quick brown fox jumps over lazy dog tokenizer unigram sentence piece model "
             "multilingual retrieval reranker embedding vector search language über straße "
             "café naïve résumé façade garçon niño año señor coração ação português français "
             "deutsch español italiano città perché così jour déjà être Œuvre Ærø Øresund "
             "Łódź Kraków żółw źdźbło Brno příliš žluťoučký kůň úpěl ďábelské ódy Tiếng Việt "
             "người nhiều được học sinh İstanbul ığdır şehir çiçek öğrenci",
    "cyrillic": "привет мир как дела хорошо спасибо большое язык модель токенизатор поиск "
                "Москва Київ українська мова їжак ґанок Беларусь ўсход сербски ђак љубав њива "
                "ћерка џеп ёлка Ёж",
    "greek": "καλημέρα κόσμε γλώσσα μοντέλο ελληνικά Αθήνα ἀρχή ὁ λόγος ᾠδή",
    "cjk": "你好世界 中文分词 语言模型 检索 重新排序 北京 上海 漢字 東京 日本語 今日は "
           "ありがとう ございます カタカナ ひらがな 한국어 안녕하세요 서울 감사합니다",
    "arabic": "مرحبا بالعالم اللغة العربية نموذج البحث القاهرة السلام عليكم كتاب مدرسة "
              "שלום עולם עברית ספר",
    "indic": "नमस्ते दुनिया हिन्दी भाषा मॉडल खोज भारत क्षत्रिय ज्ञान श्री বাংলা ভাষা தமிழ் "
             "తెలుగు ગુજરાતી ਪੰਜਾਬੀ",
    "thai": "สวัสดีครับ ภาษาไทย กรุงเทพ ขอบคุณ",
    "emoji": "😀 😂 👍 👍🏽 ❤️ 🇫🇷 🇯🇵 👨‍👩‍👧 🏳️‍🌈 ✨ 🔥 🎉 ☕ ⚽",
    "symbols": "1 2 3 42 2026 3.14 100% $5 €10 £ ¥ © ® ™ ½ ² ³ ① ② Ⅻ ﬁ ﬂ Ｈｅｌｌｏ ｶﾀｶﾅ "
               "… — – « » „ “ ” ‘ ’ · • ° ± × ÷ → ⇒ ∞ ≈ ≠ ≤ ≥ 𝐀𝐁𝐂 𝔄 ℌ ℍ Å K",
}

# Code point ranges the random strings draw single characters from.
RANGES = [
    (0x20, 0x7E), (0xA0, 0xFF), (0x100, 0x24F), (0x250, 0x2AF), (0x300, 0x36F),
    (0x370, 0x3FF), (0x400, 0x4FF), (0x530, 0x58F), (0x590, 0x5FF), (0x600, 0x6FF),
    (0x900, 0x97F), (0x980, 0x9FF), (0xE00, 0xE7F), (0x10A0, 0x10FF), (0x1100, 0x11FF),
    (0x1E00, 0x1EFF), (0x2000, 0x206F), (0x2070, 0x209F), (0x20A0, 0x20CF), (0x2100, 0x214F),
    (0x2150, 0x218F), (0x2190, 0x21FF), (0x2200, 0x22FF), (0x2460, 0x24FF), (0x2E80, 0x2EFF),
    (0x2F00, 0x2FDF), (0x3000, 0x303F), (0x3040, 0x30FF), (0x3130, 0x318F), (0x3200, 0x33FF),
    (0x4E00, 0x9FFF), (0xAC00, 0xD7A3), (0xF900, 0xFAFF), (0xFB00, 0xFB4F), (0xFE00, 0xFE0F),
    (0xFE30, 0xFE4F), (0xFF00, 0xFFEF), (0xFFF0, 0xFFFF), (0x10000, 0x1007F),
    (0x1D400, 0x1D7FF), (0x1F000, 0x1F02F), (0x1F100, 0x1F1FF), (0x1F300, 0x1F5FF),
    (0x1F600, 0x1F64F), (0x1F900, 0x1F9FF), (0x20000, 0x2A6DF), (0xE0000, 0xE007F),
    (0xF0000, 0xF00FF), (0x0, 0x1F), (0x7F, 0x9F),
]
WHITESPACE = [" ", "  ", "   ", "\t", "\n", "\r\n", "\u00a0", "\u3000", "\u2009", "\u200b",
              "\u2028", " \t ", "\u200d", "\ufeff"]
MARKS = ["\u0301", "\u0300", "\u0308", "\u0327", "\u030c", "\u0323", "\u0302", "\u0303",
         "\u0307", "\u20e3", "\ufe0f", "\u093c", "\u094d", "\u0651", "\u05bc", "\u3099"]
SPECIAL = ["<s>", "</s>", "<mask>", "<pad>", "<unk>", "▁", "▁▁", "<0x41>"]


def corpus(rng):
    """About 3000 lines mixing the word lists (the training text)."""
    lists = {k: v.split() for k, v in WORDS.items()}
    lines = []
    for _ in range(3000):
        kind = rng.choice(list(lists))
        words = [rng.choice(lists[kind]) for _ in range(rng.randint(3, 12))]
        if rng.random() < 0.2:
            other = rng.choice(list(lists))
            words.insert(rng.randint(0, len(words)), rng.choice(lists[other]))
        lines.append(" ".join(words))
    return lines


def random_text(rng):
    lists = [w.split() for w in WORDS.values()]
    parts = []
    for _ in range(rng.randint(0, 8)):
        r = rng.random()
        if r < 0.35:
            parts.append(rng.choice(rng.choice(lists)))
        elif r < 0.55:
            lo, hi = rng.choice(RANGES)
            cp = rng.randint(lo, hi)
            parts.append(chr(cp))
        elif r < 0.7:
            parts.append(rng.choice(WHITESPACE))
        elif r < 0.82:
            base = rng.choice("aeiouAEIOUnczsyα" + "иеж" + "क")
            parts.append(base + "".join(rng.choice(MARKS) for _ in range(rng.randint(1, 3))))
        elif r < 0.9:
            parts.append(rng.choice(SPECIAL))
        else:
            w = rng.choice(rng.choice(lists))
            parts.append(w.upper() if rng.random() < 0.5 else w[::-1])
        if rng.random() < 0.5:
            parts.append(" ")
    return "".join(parts)


HAND = [
    "", " ", "  ", "a", " a", "a ", "  a  b  ", "hello world", "Hello, World!",
    "e\u0301", "E\u0301\u0301", "\uff21\u0301", "ﬁne ﬂow", "Ｈｅｌｌｏ　Ｗｏｒｌｄ", "①②③",
    "𝐀𝐁𝐂 𝔄𝔅", "™\x1eg", "a\r\nb", "a\x00b", "tab\tsep", "line\nbreak", "nbsp\u00a0here",
    "zero\u200bwidth", "<s>hello</s>", "hello<mask>world", "hello <mask> world",
    "<unk>", "▁", "▁hello", "hello▁world", "▁▁x", "x▁", "👨‍👩‍👧 family", "🇫🇷🇯🇵",
    "👍🏽👍", "❤️", "क्षत्रिय", "नमस्ते", "한국어 안녕하세요", "\u1100\u1161\u11a8",
    "你好世界", "مرحبا بالعالم", "שָׁלוֹם", "Tiếng Việt", "İstanbul", "ǅemal", "ß ẞ",
    "x" * 300, "ab" * 200, "\U0010ffff", "\U000e0041", "\ufffd", "\U0001d11e",
]

VARIANTS = [
    # The converter's tokenizer as it is (with byte fallback).
    {"name": "xlmr"},
    # Older conversions on the Hub: Precompiled alone, WhitespaceSplit + Metaspace, no byte
    # fallback (unknown characters become <unk>), RobertaProcessing.
    {"name": "xlmr_old",
     "normalizer": {"type": "Precompiled"},
     "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
         {"type": "WhitespaceSplit"},
         {"type": "Metaspace", "replacement": "▁", "add_prefix_space": True}]},
     "post_processor": {"type": "RobertaProcessing", "sep": ["</s>", 2], "cls": ["<s>", 0],
                        "trim_offsets": True, "add_prefix_space": True},
     "byte_fallback": False},
    # prepend_scheme first, no split (one word per piece), literal Replace.
    {"name": "first_nosplit",
     "normalizer": {"type": "Sequence", "normalizers": [
         {"type": "Replace", "pattern": {"String": "ab"}, "content": "X"},
         {"type": "Precompiled"},
         {"type": "Strip", "strip_left": True, "strip_right": True}]},
     "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first",
                       "split": False}},
    # prepend_scheme never, another replacement character, no normaliser.
    {"name": "never_noneorm",
     "normalizer": None,
     "pre_tokenizer": {"type": "Metaspace", "replacement": "_", "prepend_scheme": "never",
                       "split": True}},
]


def fnv_update(h, data):
    for b in data:
        h ^= b
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def codepoint_hashes(tok, prefix):
    blocks = []
    batch_texts, owners = [], []
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        batch_texts.append(prefix + chr(cp))
        owners.append(cp >> 8)
    encs = tok.encode_batch(batch_texts)
    hashes = {}
    for owner, enc in zip(owners, encs):
        h = hashes.get(owner, 0xCBF29CE484222325)
        for i in enc.ids:
            h = fnv_update(h, i.to_bytes(4, "little"))
        hashes[owner] = fnv_update(h, b"\xff\xff\xff\xff")
    for block in range(0x1100):
        blocks.append("%016x" % hashes[block] if block in hashes else None)
    return blocks


def find_charsmap(n):
    """The first precompiled_charsmap in a normalizer (of a Sequence or not), or None."""
    if isinstance(n, dict):
        if n.get("type") == "Precompiled" and "precompiled_charsmap" in n:
            return n["precompiled_charsmap"]
        n = list(n.values())
    if isinstance(n, list):
        for x in n:
            found = find_charsmap(x)
            if found:
                return found
    return None


def variant_json(base, v):
    j = copy.deepcopy(base)
    charsmap = find_charsmap(base.get("normalizer"))

    def fill(n):
        if isinstance(n, dict):
            if n.get("type") == "Precompiled" and "precompiled_charsmap" not in n:
                n["precompiled_charsmap"] = charsmap
            for x in n.values():
                fill(x)
        elif isinstance(n, list):
            for x in n:
                fill(x)
        return n

    for key in ("normalizer", "pre_tokenizer", "post_processor"):
        if key in v:
            j[key] = fill(copy.deepcopy(v[key]))
    if "byte_fallback" in v:
        j["model"]["byte_fallback"] = v["byte_fallback"]
    return j


# A hand-made Unigram vocabulary for the rules the trained one cannot reach: ties between
# paths of equal score (the first found wins), the unknown-character penalty (lowest score - 10)
# against a long piece, byte fallback with some <0xXX> pieces missing (then one <unk>), a null
# unk_id (an error when a character has no piece).
SMALL_VOCAB = [("<s>", 0.0), ("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0), ("▁", -2.0),
               ("a", -1.0), ("b", -1.0), ("ab", -2.0), ("c", -3.0), ("▁a", -2.5),
               ("xa", -30.0), ("zzz", -25.0), ("bc", -4.0), ("abc", -6.0), ("<0x78>", 0.0),
               ("<0xC3>", 0.0), ("<0x61>", 0.0), ("z", -7.0), ("é", -9.5),
               # "xcz" (the lowest score, -30) against <unk> + "cz": -40 + 5 < -30 with the
               # penalty 10; another penalty (1: -31 + 5) would choose <unk> + "cz".
               ("xcz", -30.0), ("cz", 5.0),
               # "▁k" + "m" = "▁km" exactly as correctly rounded doubles, but serde_json (which
               # the crate reads the scores with) reads "▁km"'s score one unit in the last
               # place lower: Hugging Face segments the word "▁km" as ▁k, m.
               ("▁k", -1.5), ("m", -2.4563765620777724), ("▁km", -3.9563765620777724)]
SMALL_TEXTS = ["", "a", "ab", "abc", "abab", "xa", "x", "xx", "xax", "é", "éé", "è", "èè",
               "ñ", "ñx", "a b", "<s>ab</s>", "zzzz", "bcbc", "q", "qq a qq", "▁ab", "xé", "xcz",
               "xczxcz", "qcz", "km", "kmkm", "a km"]
SMALL_VARIANTS = [
    {"name": "fallback", "unk_id": 3, "byte_fallback": True},
    {"name": "unk", "unk_id": 3, "byte_fallback": False},
    {"name": "no_unk", "unk_id": None, "byte_fallback": False},
    {"name": "no_unk_fallback", "unk_id": None, "byte_fallback": True},
]


def small(rng):
    """The hand-made tokenizer.json and its variants' ids (null: Hugging Face fails)."""
    texts = SMALL_TEXTS + ["".join(rng.choice("abcxzéèñ q") for _ in range(rng.randint(0, 10)))
                           for _ in range(500)]
    doc = {"texts": texts, "variants": SMALL_VARIANTS, "ids": {}}
    for v in SMALL_VARIANTS:
        tok = Tokenizer(tokenizers.models.Unigram(SMALL_VOCAB, v["unk_id"], v["byte_fallback"]))
        tok.pre_tokenizer = tokenizers.pre_tokenizers.Metaspace()
        tok.post_processor = tokenizers.processors.TemplateProcessing(
            single="<s> $A </s>", special_tokens=[("<s>", 0), ("</s>", 2)])
        tok.add_special_tokens(["<s>", "<pad>", "</s>", "<unk>"])
        # The file as written from the vocabulary above, and the ids of the tokenizer loaded
        # from it (serde_json reads the scores: "▁km" one unit lower).
        if v["name"] == "fallback":
            doc["tokenizer"] = json.loads(tok.to_str())
        tok = Tokenizer.from_str(tok.to_str())
        out = []
        for t in texts:
            try:
                out.append(tok.encode(t).ids)
            except Exception:  # the crate's MissingUnkId
                out.append(None)
        doc["ids"][v["name"]] = out
    return doc


def write_gz(path, obj):
    raw = json.dumps(obj, ensure_ascii=False, indent=None, separators=(",", ":"))
    with open(path, "wb") as fh:
        # mtime 0: the same bytes on every run.
        with gzip.GzipFile(filename="", mode="wb", fileobj=fh, mtime=0) as gz:
            gz.write(raw.encode("utf-8"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=OUT)
    how = ap.add_mutually_exclusive_group()
    how.add_argument("--tokenizer-only", action="store_true")
    # an existing tokenizer.json (a real model's), as it is: one variant "as_is", no hand-made
    # vocabulary. The test reads them with CLATTN_UNIGRAM_GOLDEN=DIR.
    how.add_argument("--from-tokenizer", metavar="FILE")
    a = ap.parse_args()
    rng = random.Random(SEED)
    out, variants, from_file = a.out, VARIANTS, a.from_tokenizer
    if from_file:
        variants = [{"name": "as_is"}]
    os.makedirs(out, exist_ok=True)
    if from_file:
        with open(from_file, encoding="utf-8") as fh:
            base = json.load(fh)
        corpus(rng)  # the same random texts as the committed files
    else:
        base = trained(rng)
    if a.tokenizer_only:
        write_gz(os.path.join(out, "tokenizer.json.gz"), base)
        return
    texts = HAND + [random_text(rng) for _ in range(RANDOM_COUNT)]
    ids, cps = {}, {}
    for v in variants:
        tok = Tokenizer.from_str(json.dumps(variant_json(base, v)))
        ids[v["name"]] = [e.ids for e in tok.encode_batch(texts)]
        if v["name"] in ("xlmr", "xlmr_old", "as_is"):
            cps[v["name"]] = {"alone": codepoint_hashes(tok, ""),
                              "after_a": codepoint_hashes(tok, "a")}
        print(v["name"], "done", file=sys.stderr)

    doc = {
        "tokenizers": tokenizers.__version__, "transformers": transformers.__version__,
        "sentencepiece": spm.__version__, "seed": SEED,
        "variants": variants, "texts": texts, "ids": ids, "codepoints": cps,
    }
    if not from_file:
        doc["small"] = small(rng)
    for name, obj in (("tokenizer.json.gz", base), ("golden.json.gz", doc)):
        write_gz(os.path.join(out, name), obj)
    print("wrote", out, file=sys.stderr)


def trained(rng):
    """The trained tokenizer.json (step 1 and 2 above)."""
    with tempfile.TemporaryDirectory() as tmp:
        text = os.path.join(tmp, "corpus.txt")
        with open(text, "w", encoding="utf-8") as fh:
            fh.write("\n".join(corpus(rng)) + "\n")
        prefix = os.path.join(tmp, "sp")
        spm.SentencePieceTrainer.train(
            input=text, model_prefix=prefix, model_type="unigram", vocab_size=1200,
            byte_fallback=True, character_coverage=0.995, normalization_rule_name="nmt_nfkc",
            num_threads=1, hard_vocab_limit=False, seed_sentencepiece_size=100000,
            minloglevel=2)
        fast = XLMRobertaTokenizerFast(vocab_file=prefix + ".model")
        base = json.loads(fast.backend_tokenizer.to_str())
    base["model"]["byte_fallback"] = True
    return base


if __name__ == "__main__":
    main()
