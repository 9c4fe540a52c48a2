#!/usr/bin/env python3
"""Trains small byte-level BPE tokenizers offline and writes their golden files.

usage: ~/.cache/clattn/golden-venv/bin/python tools/gen_bpe_golden.py [--retrain]
           [--out DIR] [--only random|unicode|nfc ...]

Needs the `tokenizers` package (nothing else, no network): the venv every generator runs from,
made by tools/make-golden-venv.sh (tests/golden/README.md), and Debian's libutf8proc2. The
committed files were made with tokenizers 0.19.1, the version the library's tokenizers follow.
The venv's tokenizers 0.22.1 gives the same random.json and nfc.json (but the version they
record); its unicode.json differs where Unicode 16 assigned letters and digits that Unicode 15
(the library's PCRE2 and utf8proc) leaves unassigned: its ByteLevel regex (\p{L}, \p{N}) reads
the newer tables, so the pre-tokens of those code points differ. Keep the committed unicode.json
(tests/test_tokenizer_bpe.c checks the library against it). --out (default
tests/golden/tokenizer_bpe) receives the files named by --only (default all three; random.json
alone needs only the NFC differences of the code points its texts hold). The two
tokenizers are trained only when their files are absent or with --retrain (BpeTrainer breaks
ties between equally frequent pairs in hash order, so a new training may number suffix.json's
tokens differently); the golden files are computed from the tokenizer files as they are, and
running the tool again gives the same bytes.

Writes, under tests/data/tokenizer/bpe/:
  roberta.json  a RoBERTa-style tokenizer (BPE, ByteLevel pre-tokeniser without a prefix space,
                RobertaProcessing <s> A </s>, added tokens <s> <pad> </s> <unk> <mask> with
                <mask> lstrip, and a normalized non-special added token "<extra>" with rstrip),
                trained on the multilingual CORPUS below (1500 ids);
  suffix.json   a BPE with continuing_subword_prefix "##", end_of_word_suffix "</w>", unk_token
                "<unk>" with fuse_unk and an alphabet of the corpus's bytes only (so unknown
                bytes occur), ByteLevel with a prefix space, TemplateProcessing <s> $A </s>;
and under tests/golden/tokenizer_bpe/:
  random.json   for roberta.json: ~3000 seeded random multilingual texts (Latin, Cyrillic, CJK,
                Arabic, Devanagari, emoji, combining marks, whitespace runs, contractions,
                special tokens) and samples of every Unicode block, with their ids; and for
                variants of roberta.json (add_prefix_space true, use_regex false, ignore_merges
                true, the normalizer NFC) and for suffix.json, a few hundred texts each (the NFC
                ones that hold a code point of nfc.json's "differ" are marked "known_diff");
  unicode.json  every code point (but surrogates) through the ByteLevel regex: the pre-tokens
                of the probe text PROBE(c), as lengths in characters, as runs of code points
                with the same lengths; and the FNV-1a hash of roberta.json's ids of the text of
                each block of 256 code points (CHUNK_TEXT), so that the C test covers every code
                point end to end in a few kilobytes;
  nfc.json      every code point (but surrogates) through the normalizer NFC: the code points
                where Hugging Face's NFC (Unicode 8.0 tables) and utf8proc's (the library's,
                Debian 12's utf8proc 2.8: Unicode 15.0; called here through ctypes) differ on
                the probe NFC_PROBE(c), with Hugging Face's result ("differ"), and the FNV-1a
                hash of Hugging Face's NFC (as UTF-32LE) of the probes of every other code point,
                by blocks of 256.
"""
import argparse
import ctypes
import json
import os
import random
import unicodedata

import tokenizers
from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers
from tokenizers import processors
from tokenizers import trainers

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "tests", "data", "tokenizer", "bpe")
GOLDEN = os.path.join(HERE, "..", "tests", "golden", "tokenizer_bpe")
SEED = 20261202

CORPUS = """
The quick brown fox jumps over the lazy dog. It's a dog's life, isn't it? We're sure they'll
say we've done what I'd have done: tokenizers split words, numbers like 12345 and 3.14159, and
punctuation!!! -- (brackets) [square] {curly} <angle> "quotes" 'single' `back` @user #tag $5 %20
Hello, world! HELLO WORLD. hello world? The the THE. Running runner runs ran; reading readers.
    Indented code: for (int i = 0; i < n; i++) { sum += x[i] * y[i]; }  // comment
	tab	separated	values
multiple   spaces    and     newlines


and trailing spaces   
Café naïve résumé façade Über straße ÆØÅ œuvre São Paulo Zürich Kraków Ångström señor año.
Français: l'été dernier, nous sommes allés à la plage; c'était très agréable et reposant.
Deutsch: Die Straßenbahn fährt über die Brücke, während Müller Äpfel und Öl kauft.
Español: ¿Dónde está la biblioteca? ¡Qué día tan bonito! El niño comió paella.
Русский: Съешь же ещё этих мягких французских булок, да выпей чаю. Привет, мир! Москва.
Українська: Гей, хлопці, вставаймо! Їжак їсть ґрунт. Білорусь: Беларусь.
中文：我们在北京学习自然语言处理。今天天气很好，我们去公园散步吧！人工智能。
日本語：東京は日本の首都です。ひらがなとカタカナ、漢字を使います。ありがとうございます。
한국어: 안녕하세요, 세계! 서울은 대한민국의 수도입니다. 감사합니다.
العربية: مرحبا بالعالم! اللغة العربية جميلة جدا. القاهرة عاصمة مصر. شكرا لكم.
हिन्दी: नमस्ते दुनिया! भारत की राजधानी नई दिल्ली है। धन्यवाद। संस्कृत भाषा।
Ελληνικά: Γειά σου κόσμε! Η Αθήνα είναι η πρωτεύουσα της Ελλάδας.
עברית: שלום עולם! ירושלים היא עיר עתיקה.
ไทย: สวัสดีชาวโลก ภาษาไทยสวยงาม
Emoji: 😀 😃 😄 😁 😆 😅 🤣 😂 🙂 🙃 😉 😊 👍🏽 👩‍💻 🇫🇷 🇯🇵 ❤️ ✨ 🎉 🚀 🐍 🦀
Combining marks: e\u0301 a\u0300 o\u0308 n\u0303 c\u0327 s\u030c z\u0307 i\u0302 u\u0304 A\u030a
Zalgo: Z\u0351\u0364a\u0352l\u0368g\u0315o\u0310 t\u0357e\u0352x\u0363t
Whitespace: a\u00a0b\u2002c\u2003d\u3000e\u2028f\u2029g\u202fh\u205fi\u1680j\u0085k\u000bl\u000cm
Zero width: a\u200bb\u200cc\u200dd\u2060e\ufefff soft\u00adhyphen
Numbers: ١٢٣ ४५६ 一二三 ⅠⅡⅢ ½ ¾ ² ³ 0x1F 1e10 -42 +7 3,000,000 2026-12-02 12:34:56
Symbols: © ® ™ € £ ¥ ₹ ° ± × ÷ → ← ↑ ↓ ∀ ∃ ∈ ∑ ∏ √ ∞ ≈ ≠ ≤ ≥ ♠ ♣ ♥ ♦ ★ ☆ ☃
"""

SPECIALS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]


def corpus_lines():
    lines = CORPUS.split("\n")
    # Repeat with small changes so that merges have frequencies to rank.
    out = []
    for k in range(6):
        for line in lines:
            out.append(line if k % 2 == 0 else line.lower())
            out.append(" ".join(line.split(" ")[::-1]) if k % 3 == 0 else line.upper())
    return out


def train_roberta():
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=1500, min_frequency=2, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[AddedToken(t, lstrip=(t == "<mask>"), normalized=False, special=True)
                        for t in SPECIALS])
    tok.train_from_iterator(corpus_lines(), trainer=trainer)
    tok.add_tokens([AddedToken("<extra>", rstrip=True, normalized=True)])
    tok.post_processor = processors.RobertaProcessing(
        ("</s>", tok.token_to_id("</s>")), ("<s>", tok.token_to_id("<s>")))
    return tok


def train_suffix():
    tok = Tokenizer(models.BPE(unk_token="<unk>", continuing_subword_prefix="##",
                               end_of_word_suffix="</w>", fuse_unk=True))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    trainer = trainers.BpeTrainer(
        vocab_size=600, min_frequency=2, show_progress=False,
        continuing_subword_prefix="##", end_of_word_suffix="</w>",
        special_tokens=[AddedToken(t, normalized=False, special=True) for t in SPECIALS])
    tok.train_from_iterator(corpus_lines(), trainer=trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", special_tokens=[("<s>", tok.token_to_id("<s>")),
                                               ("</s>", tok.token_to_id("</s>"))])
    return tok


WORDS = sorted(set(w for w in CORPUS.split() if w))


def random_text(rng):
    pools = [
        (20, lambda: rng.choice(WORDS)),
        (12, lambda: rng.choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")),
        (12, lambda: " "),
        (3, lambda: " " * rng.randint(2, 6)),
        (6, lambda: rng.choice("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")),
        (4, lambda: rng.choice(["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'x"])),
        (6, lambda: chr(rng.randint(0xC0, 0x17F))),
        (4, lambda: chr(rng.randint(0x300, 0x36F))),
        (3, lambda: chr(rng.randint(0x391, 0x3C9))),
        (5, lambda: chr(rng.randint(0x410, 0x44F))),
        (5, lambda: chr(rng.randint(0x4E00, 0x9FFF))),
        (1, lambda: chr(rng.randint(0x20000, 0x2A6DF))),
        (3, lambda: chr(rng.randint(0x3041, 0x30FF))),
        (3, lambda: chr(rng.randint(0xAC00, 0xD7A3))),
        (4, lambda: chr(rng.randint(0x1F300, 0x1F64F))),
        (1, lambda: rng.choice(["👍🏽", "👩‍💻", "🇫🇷", "❤️", "1️⃣"])),
        (4, lambda: chr(rng.randint(0x600, 0x6FF))),
        (4, lambda: chr(rng.randint(0x900, 0x97F))),
        (3, lambda: rng.choice("‘’“”–—…·•¡¿«»、。！？（）【】")),
        (4, lambda: rng.choice("\t\n\r\u00a0\u2002\u2003\u3000\u2028\u2029\u202f\u205f\u1680"
                               "\u0085\u000b\u000c\u180e\u001c")),
        (2, lambda: rng.choice("\x00\x01\x07\x1b\x7f\u200b\u200c\u200d\u2060\ufeff"
                               "\ufffd\ue000\u00ad")),
        (2, lambda: rng.choice(SPECIALS + ["<extra>", "<S>", "<mask", " <mask>", "<extra> "])),
        (2, lambda: chr(rng.randint(0x2000, 0x2BFF))),
        (1, lambda: chr(rng.randint(0xFF00, 0xFFEF))),
        (1, lambda: chr(rng.randint(0x80, 0x10FFFF))),
    ]
    weights = [w for w, _ in pools]
    n = rng.choice([0, 1, 2, 3, 5, 8, 13, 20, 30, 40])
    parts = []
    for _ in range(n):
        _, make = rng.choices(pools, weights=weights)[0]
        parts.append(make())
        if rng.random() < 0.2:
            parts.append(" ")
    return clean("".join(parts))


def clean(s):
    return "".join(c for c in s if not 0xD800 <= ord(c) <= 0xDFFF)


def block_samples(rng):
    """Texts of code points from every block of 128 code points that has an assigned one."""
    texts = []
    for lo in range(0, 0x110000, 128):
        cps = [c for c in range(lo, lo + 128) if not 0xD800 <= c <= 0xDFFF]
        assigned = [c for c in cps if unicodedata.category(chr(c)) != "Cn"]
        if not assigned:
            continue
        pick = rng.sample(assigned, min(4, len(assigned)))
        seps = ["", " ", "a", "1", "'s ", "  "]
        texts.append("".join(chr(c) + rng.choice(seps) for c in pick))
    return texts


HAND = [
    "", " ", "  ", "\n", "Hello world", " Hello world", "Hello  world", "Hello world ",
    "It's a dog's life, isn't it? We're sure they'll say we've done what I'd do.",
    "IT'S A DOG'S LIFE", "1234567890 3.14159", "   leading spaces", "trailing spaces   ",
    "tab\tnewline\ncr\r\n", "a\u00a0b \u3000c", "<s>Hello</s>", "Hello <mask> world",
    "Hello<mask>world", "Hello   <mask>", "<mask>", " <mask> ", "<extra>   x", "x<extra>y",
    "<pad><unk></s><s>", "Café naïve résumé", "中文：我们在北京学习", "😀👩‍💻🇫🇷",
    "مرحبا بالعالم", "नमस्ते दुनिया", "Съешь же ещё этих", "e\u0301 a\u0300",
    "\u180e\u180e a", "\u0085\u0085", "x\u000b\u000cy", "a\u200bb", "\x00\x01",
    "The quick brown fox jumps over the lazy dog. " * 12,
]

# Every code point c through the regex: this probe's pre-tokens show whether c is a letter, a
# digit, whitespace, or none of these, and how it sits with a space, letters, digits and
# apostrophes.
PROBE = "x{c}1{c} {c}{c}!{c}\u3000{c}'s{c}a"
CHUNK = 256


def probe(c):
    return PROBE.format(c=c)


def chunk_text(lo):
    return " ".join(chr(c) + "a" for c in range(lo, lo + CHUNK) if not 0xD800 <= c <= 0xDFFF)


def fnv1a(ids):
    h = 0x811C9DC5
    for i in ids:
        for b in int(i).to_bytes(4, "little"):
            h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return h


def piece_lengths(pre, text):
    return [e - s for _, (s, e) in pre.pre_tokenize_str(text)]


def unicode_table(tok):
    pre = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    runs = []
    kinds = {}
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        lengths = tuple(piece_lengths(pre, probe(chr(cp))))
        k = kinds.setdefault(lengths, len(kinds))
        if runs and runs[-1][2] == k and runs[-1][1] == cp - 1:
            runs[-1][1] = cp
        else:
            runs.append([cp, cp, k])
    by_index = [list(x) for x, _ in sorted(kinds.items(), key=lambda kv: kv[1])]
    chunks = []
    los = list(range(0, 0x110000, CHUNK))
    texts = [chunk_text(lo) for lo in los]
    encodings = tok.encode_batch(texts)
    for lo, e in zip(los, encodings):
        chunks.append(fnv1a(e.ids))
    return dict(probe=PROBE, chunk=CHUNK, kinds=by_index, runs=runs, chunk_fnv1a=chunks)


def variant(tok, **pre):
    data = json.loads(tok.to_str())
    model = pre.pop("model", {})
    normalizer = pre.pop("normalizer", None)
    data["pre_tokenizer"].update(pre)
    data["model"].update(model)
    changes = dict(pre_tokenizer=pre, model=model)
    if normalizer:
        data["normalizer"] = normalizer
        changes["normalizer"] = normalizer
    return Tokenizer.from_str(json.dumps(data)), changes


# utf8proc's NFC, the library's (Debian 12: libutf8proc2, utf8proc 2.8, Unicode 15.0).
_UTF8PROC = ctypes.CDLL("libutf8proc.so.2")
_UTF8PROC.utf8proc_NFC.restype = ctypes.c_void_p
_UTF8PROC.utf8proc_NFC.argtypes = [ctypes.c_char_p]
_LIBC = ctypes.CDLL(None)
_LIBC.free.argtypes = [ctypes.c_void_p]


def utf8proc_nfc(text):
    p = _UTF8PROC.utf8proc_NFC(text.encode("utf-8"))
    out = ctypes.string_at(p).decode("utf-8")
    _LIBC.free(p)
    return out


# Every code point c through NFC: alone (its decomposition); after a mark of class 240 and
# before one of class 1 (any combining class but 0 moves one of them), between marks of classes
# 220 and 230; and as its canonical decomposition (Python's, Unicode 14.0) after a letter (the
# compositions that rebuild it).
NFC_PROBE = "{c} x\u0345{c} {c}\u0334 a\u0316{c}\u0301 x{d}{c}\u0301"


def nfc_probe(cp):
    c = chr(cp)
    return NFC_PROBE.format(c=c, d=unicodedata.normalize("NFD", c))


def utf32_fnv1a(text):
    return fnv1a(ord(c) for c in text)


def nfc_differ(cps):
    """[code point, Hugging Face's NFC of its probe] for each of cps (ascending) whose probe
    Hugging Face's NFC and utf8proc's make different."""
    hf = normalizers.NFC()
    differ = []
    for cp in cps:
        if 0xD800 <= cp <= 0xDFFF:
            continue
        text = nfc_probe(cp)
        theirs = hf.normalize_str(text)
        if theirs != utf8proc_nfc(text):
            differ.append([cp, theirs])
    return differ


def nfc_table():
    hf = normalizers.NFC()
    differ = nfc_differ(range(1, 0x110000))
    skip = set(cp for cp, _ in differ)
    chunks = []
    for lo in range(0, 0x110000, CHUNK):
        text = "".join(nfc_probe(cp) for cp in range(lo, lo + CHUNK)
                       if cp not in skip and not 0xD800 <= cp <= 0xDFFF)
        chunks.append(utf32_fnv1a(hf.normalize_str(text)))
    return dict(probe=NFC_PROBE, chunk=CHUNK, differ=differ, chunk_fnv1a=chunks)


def cases(tok, texts):
    return [{"text": t, "ids": e.ids} for t, e in zip(texts, tok.encode_batch(texts))]


def write(path, obj):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--retrain", action="store_true")
    ap.add_argument("--out", default=GOLDEN)
    ap.add_argument("--only", action="append", choices=["random", "unicode", "nfc"])
    a = ap.parse_args()
    wanted = set(a.only or ["random", "unicode", "nfc"])
    os.makedirs(DATA, exist_ok=True)
    for name, train in [("roberta.json", train_roberta), ("suffix.json", train_suffix)]:
        if a.retrain or not os.path.exists(os.path.join(DATA, name)):
            train().save(os.path.join(DATA, name), pretty=False)
    # Read them back, as the C side does.
    roberta = Tokenizer.from_file(os.path.join(DATA, "roberta.json"))
    suffix = Tokenizer.from_file(os.path.join(DATA, "suffix.json"))

    rng = random.Random(SEED)
    texts = HAND + [random_text(rng) for _ in range(3000)]
    small = [random_text(rng) for _ in range(200)] + HAND
    sets = [dict(name="roberta", file="roberta.json", changes=None, cases=cases(roberta, texts))]
    for name, pre in [("prefix_space", dict(add_prefix_space=True)),
                      ("no_regex", dict(use_regex=False)),
                      ("ignore_merges", dict(model=dict(ignore_merges=True)))]:
        tok, changes = variant(roberta, **pre)
        sets.append(dict(name=name, file="roberta.json", changes=changes,
                         cases=cases(tok, small)))
    nfc = nfc_table() if "nfc" in wanted else None
    tok, changes = variant(roberta, normalizer={"type": "NFC"})
    nfc_texts = small + [random_text(rng) + "e\u0301a\u0316\u0301" + random_text(rng)
                         for _ in range(100)]
    differ = nfc["differ"] if nfc else nfc_differ(sorted(set(map(ord, "".join(nfc_texts))) -
                                                         {0}))  # (as nfc_table: from 1)
    known = set(chr(cp) for cp, _ in differ)
    nfc_cases = cases(tok, nfc_texts)
    for case in nfc_cases:
        if any(c in known for c in case["text"]):
            case["known_diff"] = True
    sets.append(dict(name="nfc", file="roberta.json", changes=changes, cases=nfc_cases))
    sets.append(dict(name="suffix", file="suffix.json", changes=None, cases=cases(suffix, small)))
    versions = dict(tokenizers=tokenizers.__version__, unicode=unicodedata.unidata_version)
    if "random" in wanted:
        write(os.path.join(a.out, "random.json"), dict(versions, seed=SEED, sets=sets))
    if "unicode" in wanted:
        write(os.path.join(a.out, "unicode.json"), dict(versions, **unicode_table(roberta)))
    if nfc:
        write(os.path.join(a.out, "nfc.json"), dict(versions, **nfc))


if __name__ == "__main__":
    main()
