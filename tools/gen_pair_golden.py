#!/usr/bin/env python3
"""Writes the golden files of pair encoding (clattn_tokenizer_encode_pair) from Hugging Face.

usage: ~/.cache/clattn/golden-venv/bin/python tools/gen_pair_golden.py [--retrain] [--out DIR]

Needs tokenizers, transformers and sentencepiece (the modules of tools/gen_bpe_golden.py and
tools/gen_unigram_golden.py are imported for their random text generators): the venv every
generator runs from, made by tools/make-golden-venv.sh (tests/golden/README.md). The committed
files were made with tokenizers 0.19.1 and transformers 4.40.2; the venv's versions give the same
pairs and ids. Offline: nothing is downloaded. --out (default tests/golden/tokenizer_pair)
receives the files below; wordpiece.json is copied there from tests/golden/tokenizer_pair unless
--retrain trains it anew.

Every expected encoding is Hugging Face's: the tokenizer loaded with tokenizers'
Tokenizer.from_str, padding off, enable_truncation(max_length, strategy="longest_first")
(or no_truncation() where max_length is null), then encode(a, b): its ids and type_ids. That is
what transformers' tok(a, b, truncation="longest_first", max_length=max_length) gives (checked
below on a sample through PreTrainedTokenizerFast).

Writes, under tests/golden/tokenizer_pair/:
  wordpiece.json  a small WordPiece tokenizer (BERT's layout: BertNormalizer, BertPreTokenizer,
                  [PAD] [UNK] [CLS] [SEP] [MASK], TemplateProcessing "[CLS] $A [SEP]" and the pair
                  "[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1") trained on gen_bpe_golden.py's multilingual
                  corpus; trained only when absent or with --retrain (WordPieceTrainer breaks ties
                  in hash order);
  vocab.txt       its vocabulary, one token a line (BertTokenizerFast's vocab_file);
  pairs.json.gz   {"tokenizers", "transformers", "seed", "sets": [{"name", "tokenizer" (a path
                  from tests/, or "minilm": the real all-MiniLM-L6-v2, found as the C tests find
                  it), "overrides" (absent: the file as it is; else members of tokenizer.json
                  to put in place of the file's: "post_processor", "pre_tokenizer"),
                  "added" (the pair's special tokens, Hugging Face's added_tokens(true)),
                  "cases": [{"a", "b", "max_length" (null: no truncation), "ids",
                  "type_ids"}]}]}.
The sets: the WordPiece tokenizer with its template, with BertProcessing, with a template of
unusual pieces (B before A, a special token of two ids, type ids 2 and 3), and with an empty pair
template (tests/data/tokenizer/tokenizer.json's: nothing at all); its vocab.txt
(BertTokenizerFast's own template); the byte-level BPE tests/data/tokenizer/bpe/roberta.json
(RobertaProcessing); the Unigram tests/golden/unigram/tokenizer.json.gz (XLM-R's
TemplateProcessing), with RobertaProcessing, and with Metaspace's prepend_scheme "first" (each
text of a pair gets its own prefix); the real all-MiniLM-L6-v2 when
${CLATTN_MODEL_CACHE:-~/.cache/clattn}/all-MiniLM-L6-v2 exists (the C test skips that set when
the model is absent). Texts are seeded random multilingual strings (the WordPiece ones without
the code points of tests/tokenizer_unicode_diffs.h, where the library documents a difference),
some pairs of equal texts or with an empty side; max_length is drawn relative to the pair's
special tokens: the smallest valid (nothing of either text is kept), tiny budgets, budgets
around the untruncated length, odd and even ones, long ones and null. The files are
deterministic: running the tool again gives the same bytes.
"""
import argparse
import copy
import gzip
import json
import os
import random
import re
import shutil
import sys

import tokenizers
import transformers
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
from transformers import BertTokenizerFast, PreTrainedTokenizerFast

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gen_bpe_golden  # noqa: E402  (the corpus and random texts of the BPE goldens)
import gen_unigram_golden  # noqa: E402  (the random texts of the Unigram goldens)

TESTS = os.path.join(HERE, "..", "tests")
OUT = os.path.join(TESTS, "golden", "tokenizer_pair")
SEED = 20261203

WORDPIECE_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def train_wordpiece():
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(vocab_size=1200, min_frequency=2, show_progress=False,
                                        special_tokens=WORDPIECE_SPECIALS)
    tok.train_from_iterator(gen_bpe_golden.corpus_lines(), trainer=trainer)
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    return tok


def known_differences():
    """The code point ranges of tests/tokenizer_unicode_diffs.h (WordPiece's documented
    Unicode-version differences)."""
    with open(os.path.join(TESTS, "tokenizer_unicode_diffs.h"), encoding="utf-8") as fh:
        text = fh.read()
    return [(int(a, 16), int(b, 16))
            for a, b in re.findall(r"\{0x([0-9A-Fa-f]+), 0x([0-9A-Fa-f]+)\}", text)]


def wordpiece_text(rng, diffs):
    """gen_bpe_golden's random text with BERT's special tokens mixed in, without a code point
    of the documented differences."""
    while True:
        text = gen_bpe_golden.random_text(rng)
        if rng.random() < 0.1:
            at = rng.randint(0, len(text))
            text = text[:at] + rng.choice(["[SEP]", "[CLS]", " [MASK] ", "[sep]"]) + text[at:]
        if not any(lo <= ord(c) <= hi for c in text for lo, hi in diffs):
            return text


def budgets(rng, added, untruncated):
    """A max_length: the smallest (the special tokens only), a tiny budget, one around the
    untruncated length, a small or a long one, or None (no truncation)."""
    r = rng.random()
    if r < 0.08:
        return max(added, 1)  # (0 would be the C function's "the tokenizer's default")
    if r < 0.25:
        return added + rng.randint(1, 4)
    if r < 0.45:
        return max(added, 1, untruncated + rng.randint(-3, 2))
    if r < 0.75:
        return added + rng.randint(5, 40)
    if r < 0.9:
        return added + rng.randint(41, 200)
    return None


def make_pairs(rng, make_text, count):
    pairs = []
    for i in range(count):
        a, b = make_text(), make_text()
        r = rng.random()
        if r < 0.1:
            b = a  # equal lengths: odd budgets give the extra id to B
        elif r < 0.14:
            a = ""
        elif r < 0.18:
            b = ""
        elif r < 0.3:
            # A long side and a short one.
            a = " ".join(make_text() for _ in range(4))
        pairs.append((a, b))
    return pairs


def encode_cases(tok, pairs, rng):
    tok.no_padding()
    added = tok.num_special_tokens_to_add(True)
    cases = []
    for a, b in pairs:
        tok.no_truncation()
        untruncated = len(tok.encode(a, b).ids)
        max_length = budgets(rng, added, untruncated)
        if a == b and untruncated >= added + 2 and rng.random() < 0.6:
            # Equal lengths n and an odd budget under 2n: halves, the odd id to B.
            n = (untruncated - added) // 2
            max_length = added + rng.randrange(1, 2 * n, 2)
        if max_length is None:
            tok.no_truncation()
        else:
            tok.enable_truncation(max_length, strategy="longest_first")
        e = tok.encode(a, b)
        cases.append({"a": a, "b": b, "max_length": max_length, "ids": e.ids,
                      "type_ids": e.type_ids})
    tok.no_truncation()
    return added, cases


def check_with_transformers(tok, cases):
    """transformers' call on the same tokenizer gives the same encodings (a sample). Batched,
    as sentence-transformers' CrossEncoder calls it: a single call tok(a, "") takes the empty
    text_pair for none and encodes `a` alone (transformers 4.40's encode_plus tests
    `if text_pair`), the batch keeps the pair, as tokenizers' encode(a, "") does."""
    fast = PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(tok.to_str()))
    for c in cases[:80]:
        if c["max_length"] is None:
            got = fast([c["a"]], [c["b"]])
        else:
            got = fast([c["a"]], [c["b"]], truncation="longest_first",
                       max_length=c["max_length"])
        assert got["input_ids"][0] == c["ids"], (c, got)
        assert got["token_type_ids"][0] == c["type_ids"], (c, got)


def with_overrides(tok, overrides):
    data = json.loads(tok.to_str())
    data.update(copy.deepcopy(overrides))
    return Tokenizer.from_str(json.dumps(data))


def read_unigram():
    path = os.path.join(TESTS, "golden", "unigram", "tokenizer.json.gz")
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return Tokenizer.from_str(fh.read())


def minilm_dir():
    cache = os.environ.get("CLATTN_MODEL_CACHE", os.path.expanduser("~/.cache/clattn"))
    return os.path.join(cache, "all-MiniLM-L6-v2")


# A template of unusual pieces: B before A, [SEP] twice, a special token of two ids, type ids
# other than 0 and 1 (Hugging Face applies any such template).
CUSTOM_PAIR = {
    "type": "TemplateProcessing",
    "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
               {"Sequence": {"id": "A", "type_id": 0}},
               {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
    "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 2}},
             {"Sequence": {"id": "B", "type_id": 1}},
             {"SpecialToken": {"id": "[SEP]", "type_id": 0}},
             {"SpecialToken": {"id": "[QA]", "type_id": 3}},
             {"Sequence": {"id": "A", "type_id": 3}},
             {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
    "special_tokens": {
        "[CLS]": {"id": "[CLS]", "ids": [2], "tokens": ["[CLS]"]},
        "[SEP]": {"id": "[SEP]", "ids": [3], "tokens": ["[SEP]"]},
        "[QA]": {"id": "[QA]", "ids": [4, 0], "tokens": ["[MASK]", "[PAD]"]}},
}

EMPTY_PAIR = {
    "type": "TemplateProcessing",
    "single": CUSTOM_PAIR["single"],
    "pair": [],
    "special_tokens": {k: v for k, v in CUSTOM_PAIR["special_tokens"].items() if k != "[QA]"},
}


def main():
    global OUT
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--retrain", action="store_true")
    ap.add_argument("--out", default=OUT)
    a = ap.parse_args()
    committed = os.path.join(OUT, "wordpiece.json")
    OUT = a.out
    os.makedirs(OUT, exist_ok=True)
    wp_path = os.path.join(OUT, "wordpiece.json")
    if a.retrain or not os.path.exists(committed):
        train_wordpiece().save(wp_path, pretty=False)
    elif os.path.abspath(committed) != os.path.abspath(wp_path):
        shutil.copyfile(committed, wp_path)
    wordpiece = Tokenizer.from_file(wp_path)
    assert [wordpiece.id_to_token(i) for i in range(5)] == WORDPIECE_SPECIALS
    vocab = sorted(wordpiece.get_vocab().items(), key=lambda kv: kv[1])
    assert [i for _, i in vocab] == list(range(len(vocab)))
    vocab_txt = os.path.join(OUT, "vocab.txt")
    with open(vocab_txt, "w", encoding="utf-8", newline="\n") as fh:
        fh.write("".join(t + "\n" for t, _ in vocab))
    vocab_tok = BertTokenizerFast(vocab_file=vocab_txt).backend_tokenizer

    rng = random.Random(SEED)
    diffs = known_differences()
    wp_pairs = make_pairs(rng, lambda: wordpiece_text(rng, diffs), 400)
    bpe_pairs = make_pairs(rng, lambda: gen_bpe_golden.random_text(rng), 300)
    uni_pairs = make_pairs(rng, lambda: gen_unigram_golden.random_text(rng), 360)

    rel = lambda *p: "/".join(p)  # noqa: E731  (paths from tests/, as the C test joins them)
    bert_processing = {"type": "BertProcessing", "sep": ["[SEP]", 3], "cls": ["[CLS]", 2]}
    roberta_processing = {"type": "RobertaProcessing", "sep": ["</s>", 2], "cls": ["<s>", 0],
                          "trim_offsets": True, "add_prefix_space": True}
    roberta = Tokenizer.from_file(os.path.join(TESTS, "data", "tokenizer", "bpe",
                                               "roberta.json"))
    unigram = read_unigram()
    sets = [
        ("wordpiece", rel("golden", "tokenizer_pair", "wordpiece.json"), None, wordpiece,
         wp_pairs[:250]),
        ("wordpiece_bert_processing", rel("golden", "tokenizer_pair", "wordpiece.json"),
         {"post_processor": bert_processing}, wordpiece, wp_pairs[250:320]),
        ("wordpiece_custom_template", rel("golden", "tokenizer_pair", "wordpiece.json"),
         {"post_processor": CUSTOM_PAIR}, wordpiece, wp_pairs[320:370]),
        ("wordpiece_empty_template", rel("golden", "tokenizer_pair", "wordpiece.json"),
         {"post_processor": EMPTY_PAIR}, wordpiece, wp_pairs[370:380]),
        ("vocab_txt", rel("golden", "tokenizer_pair", "vocab.txt"), None, vocab_tok,
         wp_pairs[380:400] + wp_pairs[:60]),
        ("roberta", rel("data", "tokenizer", "bpe", "roberta.json"), None, roberta, bpe_pairs),
        ("xlmr", rel("golden", "unigram", "tokenizer.json.gz"), None, unigram,
         uni_pairs[:220]),
        ("xlmr_roberta_processing", rel("golden", "unigram", "tokenizer.json.gz"),
         {"post_processor": roberta_processing}, unigram, uni_pairs[220:300]),
        # Metaspace "first": each text of the pair starts with its own "▁".
        ("xlmr_metaspace_first", rel("golden", "unigram", "tokenizer.json.gz"),
         {"pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581",
                            "prepend_scheme": "first", "split": True}}, unigram,
         uni_pairs[300:]),
    ]
    if os.path.isdir(minilm_dir()):
        minilm = Tokenizer.from_file(os.path.join(minilm_dir(), "tokenizer.json"))
        sets.append(("minilm", "minilm", None, minilm, wp_pairs[:120]))
    else:
        print("no all-MiniLM-L6-v2 at", minilm_dir(), "(tools/fetch-model.sh): its set is left "
              "out", file=sys.stderr)

    out_sets = []
    for name, path, overrides, tok, pairs in sets:
        if overrides is not None:
            tok = with_overrides(tok, overrides)
        added, cases = encode_cases(tok, pairs, rng)
        check_with_transformers(tok, cases)
        entry = {"name": name, "tokenizer": path, "added": added, "cases": cases}
        if overrides is not None:
            entry["overrides"] = copy.deepcopy(overrides)
        out_sets.append(entry)
        print(name, len(cases), "pairs", file=sys.stderr)
    doc = {"tokenizers": tokenizers.__version__, "transformers": transformers.__version__,
           "seed": SEED, "sets": out_sets}
    raw = json.dumps(doc, ensure_ascii=False, separators=(",", ":"))
    with open(os.path.join(OUT, "pairs.json.gz"), "wb") as fh:
        # mtime 0: the same bytes on every run.
        with gzip.GzipFile(filename="", mode="wb", fileobj=fh, mtime=0) as gz:
            gz.write(raw.encode("utf-8"))


if __name__ == "__main__":
    main()
