#!/usr/bin/env python3
"""Writes small random cross-encoder (BertForSequenceClassification) folders and their scores.

usage: ~/.cache/clattn/golden-venv/bin/python tools/gen_crossenc_golden.py [--out DIR]
           [--case NAME ...]

The venv is the one every generator runs from, made by tools/make-golden-venv.sh (torch,
transformers, tokenizers, sentence-transformers at its pinned versions; tests/golden/README.md).
No network, nothing downloaded. --out (default tests/golden/crossenc) receives the cases named by
--case (default all four; tools/check-generators.sh makes one_label and compares it with the
committed folder: the output is deterministic).

Written (each folder removed first):
  tests/golden/crossenc/one_label/      BertForSequenceClassification, num_labels 1: hidden 32,
                                        4 heads, 2 layers, intermediate 64, 64 positions, gelu;
                                        tokenizer_config.json's model_max_length 48 (below the
                                        positions: the pairs are truncated to 48 tokens)
  tests/golden/crossenc/three_labels/   the same sizes, num_labels 3 with id2label
                                        {0: contradiction, 1: entailment, 2: neutral},
                                        model_max_length 64
  tests/golden/crossenc/roberta/        RobertaForSequenceClassification, num_labels 1:
                                        hidden 16, intermediate 32, 4 heads, 2 layers, 66
                                        positions (64 after padding_idx + 1),
                                        type_vocab_size 1, pad_token_id 1, layer_norm_eps
                                        1e-5; the byte-level BPE tokenizer
                                        tests/data/tokenizer/bpe/roberta.json (1501 ids,
                                        RobertaProcessing: <s> a </s></s> b </s>) through
                                        RobertaTokenizerFast, model_max_length 40
  tests/golden/crossenc/modernbert/     ModernBertForSequenceClassification, num_labels 2
                                        (id2label {0: irrelevant, 1: relevant}):
                                        tests/golden/modernbert/basic's sizes (hidden 32, 4
                                        heads, 4 layers, layers 0 and 3 global, intermediate
                                        48, local_attention 16, rope thetas 160000 / 10000, no
                                        linear or norm biases) and its tokenizer.json (byte-
                                        level BPE, 405 ids); classifier_pooling "mean",
                                        classifier_activation "gelu", classifier_bias true;
                                        model_max_length 48; eager attention, the float64 runs
                                        with a float64 softmax (golden_common.py's
                                        float64_softmax)
each a folder as save_pretrained writes it (config.json, model.safetensors with the encoder
under "bert." or "roberta." and the head: bert.pooler.* and classifier.*, or
classifier.dense.* and classifier.out_proj.*; tokenizer.json, tokenizer_config.json,
special_tokens_map.json, vocab.txt for BERT), plus
  pairs.json   {"pairs": [[query, document], ...],
                "max_length": the CrossEncoder's truncation (the tokenizer's model_max_length),
                "input_ids", "token_type_ids": per pair, as the CrossEncoder gives them to its
                  model (tokenizer(queries, documents, truncation="longest_first",
                  max_length=max_length) of the texts stripped, as CrossEncoder's
                  smart_batching_collate_text_only strips them),
                "logits": [count][num_labels], BertForSequenceClassification in float64 (the
                  model cast to double: an exact reference for the float32 library),
                "predict": CrossEncoder(folder).predict(pairs stripped) (float32 torch; the
                  default activation: sigmoid with one label, identity with three). The texts
                  are stripped first (Python's str.strip()), as sentence-transformers' CrossEncoder
                  itself did up to version 3 and as the library does; from version 4 it passes
                  them as they are, which would change the pair with whitespace at its ends
                  through a byte-level BPE (roberta, modernbert),
                "sigmoid", "softmax": float64 torch.sigmoid / torch.softmax(dim=1) of the
                  logits,
                "short": the same for CrossEncoder(folder, max_length=SHORT): "max_length",
                  "input_ids", "token_type_ids", "logits", "predict",
                "identity_config": (one_label) CrossEncoder.predict with config.json's
                  "sbert_ce_default_activation_function": "torch.nn.modules.linear.Identity"
                  (sentence-transformers' own default for such a folder: the logits),
                "rerank": (one_label) {"query", "documents", "ranked": [[index, score], ...]
                  best first (CrossEncoder.rank), "ranked_raw": the same on the float64 logits}
                  (also as plain files for tests/test_rerank.sh: rerank_query.txt,
                  rerank_documents.txt one per line, ranked.tsv and ranked_raw.tsv, lines
                  "index<TAB>score"),
                "cls_logits": (modernbert) the logits with config.json's classifier_pooling
                  "cls" (the head on [CLS] instead of the mean),
                "activation_logits": (modernbert) {name: the logits with config.json's
                  classifier_activation name} for gelu_new, gelu_pytorch_tanh, relu, silu, swish
                  and tanh (transformers' ACT2FN in the head; each differs from the erf gelu's
                  logits by more than 1e-4 somewhere, ten times the test's tolerance, so that
                  the test tells them apart),
                "spaced": (roberta) {"pairs": a pair per character for which Python's
                  str.isspace() is true (SPACES), at both ends of both texts, then all of them
                  at once, then texts of nothing else; "input_ids": the pairs stripped and
                  tokenized as above (max_length 40): the library strips as str.strip() does
                  before its byte-level BPE tokenizer, which would make tokens of them},
                "xlmr_logits": (roberta) the logits of the same folder with config.json's
                  architectures XLMRobertaForSequenceClassification and model_type
                  "xlm-roberta" (transformers' XLM-R classes are copies of RoBERTa's: the
                  script asserts they give the same logits, which the test then expects)}

The weights are random (torch.manual_seed) and larger than transformers' initialisation (a
classifier at std 0.02 scores every pair alike): every parameter ~ N(0, 0.3²) (ModernBERT's
N(0, 0.15²)), LayerNorm weights 1 + N(0, 0.1²), so that scores differ between pairs and a
ranking means something. The vocabulary (VOCAB: letters, digits, a few words) makes
out-of-vocabulary words spell out letter by letter, so pairs of a few words reach the
truncation lengths.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile

import numpy as np
import torch

from golden_common import float64_softmax

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
ROOT = os.path.join(REPO, "tests", "golden", "crossenc")
BPE_TOKENIZER = os.path.join(REPO, "tests", "data", "tokenizer", "bpe", "roberta.json")
MODERNBERT_TOKENIZER = os.path.join(REPO, "tests", "golden", "modernbert", "basic",
                                    "tokenizer.json")

VOCAB = (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + list("abcdefghijklmnopqrstuvwxyz") +
         list("0123456789") + list(".,!?;:'-()") +
         ["##" + c for c in "abcdefghijklmnopqrstuvwxyz"] +
         ["the", "of", "and", "to", "in", "is", "was", "for", "on", "that", "with", "as", "by",
          "at", "from", "it", "an", "be", "this", "are", "cat", "dog", "mat", "##ing", "##ed",
          "what", "where", "who", "how", "paris", "france", "capital", "city", "river", "berlin",
          "germany", "music", "play", "piano", "sleep"])
assert len(VOCAB) == len(set(VOCAB))

SHORT = 16  # the "short" CrossEncoder's max_length

QUERY_A = "what is the capital of france?"
DOCS_A = [
    "paris is the capital of france.",
    "berlin is the capital of germany.",
    "the cat sat on the mat.",
    "France",
    "Paris, a city on the river Seine, is where the French government sits; it has been the "
    "capital for centuries and is known for music, museums and cafés.",
    "",
    "how to play the piano",
    "the capital of france is paris",
]
QUERY_B = "who plays piano in berlin?"
DOCS_B = [
    "a dog was running in the park!",
    "music in berlin: piano, jazz and more",
    "Sleeping cats (and dogs) on mats",
    "?",
    "the river of germany",
    "zebra quick brown fox jumps over the lazy dog 42 times",
]
OTHER_PAIRS = [
    ("", ""),
    ("a", "b"),
    ("Café naïve ZEBRA", "quick brown fox"),
    ("the " * 40 + "end", "short"),
    ("short", "the " * 40 + "end"),
    ("what is this extraordinarily long question about nothing in particular?",
     "an equally verbose answer that keeps going on and on without saying anything"),
    # whitespace at the ends: stripped first (sentence-transformers 3's CrossEncoder did it)
    ("  spaced query ", "\tthe document, spaced\n "),
]

# Every character for which Python's str.isspace() is true (what str.strip() removes), as
# src/text/text_strip.h lists them.
SPACES = [chr(c) for c in range(0x110000) if chr(c).isspace()]
assert SPACES == [chr(c) for c in [*range(0x09, 0x0E), *range(0x1C, 0x21), 0x85, 0xA0, 0x1680,
                                   *range(0x2000, 0x200B), 0x2028, 0x2029, 0x202F, 0x205F,
                                   0x3000]]
SPACED_PAIRS = ([[s + "who plays" + s, s + s + "piano in berlin" + s] for s in SPACES] +
                [["".join(SPACES) + "who plays" + "".join(SPACES),
                  "".join(reversed(SPACES)) + "music" + "".join(SPACES)],
                 ["".join(SPACES), " \u3000"]])

# ModernBERT's classifier_activation values besides "gelu" (transformers' ACT2FN names).
HEAD_ACTIVATIONS = ["gelu_new", "gelu_pytorch_tanh", "relu", "silu", "swish", "tanh"]


def randomise(model, seed, scale):
    torch.manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.lower().endswith("norm.weight"):  # BERT's LayerNorm, ModernBERT's norms
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
            else:
                p.copy_(scale * torch.randn_like(p))


def make_tokenizer(folder, family, model_max_length):
    from tokenizers.implementations import BertWordPieceTokenizer
    from transformers import BertTokenizerFast, RobertaTokenizerFast
    if family == "modernbert":  # as tools/gen_modernbert_golden.py writes its folder
        shutil.copy(MODERNBERT_TOKENIZER, os.path.join(folder, "tokenizer.json"))
        files = {
            "tokenizer_config.json": {
                "clean_up_tokenization_spaces": True, "cls_token": "[CLS]",
                "mask_token": "[MASK]", "model_input_names": ["input_ids", "attention_mask"],
                "model_max_length": model_max_length, "pad_token": "[PAD]", "sep_token": "[SEP]",
                "tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]"},
            "special_tokens_map.json": {
                "cls_token": "[CLS]", "mask_token": "[MASK]", "pad_token": "[PAD]",
                "sep_token": "[SEP]", "unk_token": "[UNK]"},
        }
        for name, content in files.items():
            with open(os.path.join(folder, name), "w") as f:
                json.dump(content, f, indent=2)
                f.write("\n")
        with open(MODERNBERT_TOKENIZER) as f:
            tokenizer = json.load(f)
        return len(tokenizer["model"]["vocab"]) + len(tokenizer["added_tokens"])
    if family == "roberta":
        tok = RobertaTokenizerFast(tokenizer_file=BPE_TOKENIZER, model_max_length=model_max_length)
        tok.save_pretrained(folder)
        for slow in ("vocab.json", "merges.txt"):  # the slow tokenizer's copy of tokenizer.json
            if os.path.exists(os.path.join(folder, slow)):  # (not every transformers writes it)
                os.remove(os.path.join(folder, slow))
        return len(tok)
    bwp = BertWordPieceTokenizer({w: i for i, w in enumerate(VOCAB)}, lowercase=True,
                                 strip_accents=None, clean_text=True, handle_chinese_chars=True)
    tok = BertTokenizerFast(tokenizer_object=bwp._tokenizer, model_max_length=model_max_length,
                            unk_token="[UNK]", sep_token="[SEP]", pad_token="[PAD]",
                            cls_token="[CLS]", mask_token="[MASK]")
    tok.save_pretrained(folder)
    return len(VOCAB)


def make_model(folder, seed, family, vocab_size, num_labels, id2label):
    from transformers import (BertConfig, BertForSequenceClassification, ModernBertConfig,
                              ModernBertForSequenceClassification, RobertaConfig,
                              RobertaForSequenceClassification)
    kwargs = dict(vocab_size=vocab_size, hidden_size=32, num_hidden_layers=2,
                  num_attention_heads=4, intermediate_size=64, hidden_act="gelu")
    if family == "modernbert":
        kwargs = dict(vocab_size=vocab_size, hidden_size=32, num_hidden_layers=4,
                      num_attention_heads=4, intermediate_size=48, hidden_activation="gelu",
                      local_attention=16, global_attn_every_n_layers=3,
                      global_rope_theta=160000.0, local_rope_theta=10000.0,
                      max_position_embeddings=512, pad_token_id=403, bos_token_id=401,
                      eos_token_id=402, cls_token_id=401, sep_token_id=402,
                      classifier_pooling="mean", classifier_activation="gelu",
                      classifier_bias=True,
                      architectures=["ModernBertForSequenceClassification"])
        config_cls, model_cls = ModernBertConfig, ModernBertForSequenceClassification
    elif family == "roberta":  # hidden 16: the vocabulary of 1501 ids is most of the file
        kwargs.update(hidden_size=16, intermediate_size=32, max_position_embeddings=66,
                      type_vocab_size=1, pad_token_id=1, bos_token_id=0, eos_token_id=2, layer_norm_eps=1e-5,
                      architectures=["RobertaForSequenceClassification"])
        config_cls, model_cls = RobertaConfig, RobertaForSequenceClassification
    else:
        kwargs.update(max_position_embeddings=64, type_vocab_size=2, pad_token_id=0,
                      architectures=["BertForSequenceClassification"])
        config_cls, model_cls = BertConfig, BertForSequenceClassification
    if id2label:
        kwargs.update(id2label=id2label, label2id={v: k for k, v in id2label.items()})
    else:
        kwargs.update(num_labels=num_labels)
    config = config_cls(**kwargs)
    model = model_cls._from_config(config, attn_implementation="eager").eval()
    # ModernBERT's four pre-LN layers and normed head amplify float32 rounding: smaller weights
    # keep its logits (and their float32 error) in the others' range
    randomise(model, seed, 0.15 if family == "modernbert" else 0.3)
    model.save_pretrained(folder, safe_serialization=True)
    return model


def stripped(pairs):
    return [[p[0].strip(), p[1].strip()] for p in pairs]


def tokenize(folder, pairs, max_length, strip=True):
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(folder)
    pairs = stripped(pairs) if strip else pairs
    enc = tok([p[0] for p in pairs], [p[1] for p in pairs], truncation="longest_first",
              max_length=max_length, return_token_type_ids=True)
    return enc["input_ids"], enc["token_type_ids"]


def logits64(model, ids, types):
    """Each pair alone (no padding), the model in float64; token types only for a model that
    takes them (ModernBERT's forward has none; RoBERTa's tokenizer gives none, so zeros)."""
    double = model.double()
    takes_types = model.config.model_type == "bert"
    rows = []
    with torch.no_grad(), float64_softmax(torch):
        for i, t in zip(ids, types):
            kwargs = dict(token_type_ids=torch.tensor([t])) if takes_types else {}
            out = double(input_ids=torch.tensor([i]),
                         attention_mask=torch.ones(1, len(i), dtype=torch.int64), **kwargs).logits
            rows.append(out[0].tolist())
    model.float()
    return rows


def predict(folder, pairs, **kwargs):
    """CrossEncoder.predict of the pairs stripped (see the docstring: "predict")."""
    from sentence_transformers import CrossEncoder
    ce = CrossEncoder(folder, device="cpu", model_kwargs={"attn_implementation": "eager"},
                      **kwargs)
    scores = ce.predict(stripped(pairs), batch_size=5, show_progress_bar=False)
    return np.asarray(scores, dtype=np.float32).tolist()


def write_case(root, name, seed, family, num_labels, id2label, model_max_length):
    folder = os.path.join(root, name)
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    vocab_size = make_tokenizer(folder, family, model_max_length)
    model = make_model(folder, seed, family, vocab_size, num_labels, id2label)
    pairs = ([[QUERY_A, d] for d in DOCS_A] + [[QUERY_B, d] for d in DOCS_B] +
             [list(p) for p in OTHER_PAIRS])
    ids, types = tokenize(folder, pairs, model_max_length)
    logits = logits64(model, ids, types)
    assert any(len(i) == model_max_length for i in ids), "no pair is truncated"
    t = torch.tensor(logits, dtype=torch.float64)
    golden = {
        "pairs": pairs,
        "max_length": model_max_length,
        "input_ids": ids,
        "token_type_ids": types,
        "logits": logits,
        "predict": predict(folder, pairs),
        "sigmoid": torch.sigmoid(t).tolist(),
        "softmax": torch.softmax(t, dim=1).tolist(),
    }
    short_ids, short_types = tokenize(folder, pairs, SHORT)
    golden["short"] = {
        "max_length": SHORT,
        "input_ids": short_ids,
        "token_type_ids": short_types,
        "logits": logits64(model, short_ids, short_types),
        "predict": predict(folder, pairs, max_length=SHORT),
    }
    if num_labels == 1 and family == "bert":
        golden["identity_config"] = identity_config_predict(folder, pairs)
        golden["rerank"] = rerank(folder, logits[:len(DOCS_A)])
        write_rerank_files(folder, golden["rerank"])
    if family == "modernbert":
        golden["cls_logits"] = edited_logits(folder, ids, types, classifier_pooling="cls")
        golden["activation_logits"] = {
            act: edited_logits(folder, ids, types, classifier_activation=act)
            for act in HEAD_ACTIVATIONS}
        for act, rows in golden["activation_logits"].items():
            # 1.4e-4 for the tanh forms: ten times tests/test_cross_encoder.c's tolerance
            assert np.abs(np.array(rows) - np.array(logits)).max() > 1e-4, act
    if family == "roberta":
        golden["xlmr_logits"] = edited_logits(folder, ids, types, model_type="xlm-roberta",
                                              architectures=["XLMRobertaForSequenceClassification"])
        assert np.abs(np.array(golden["xlmr_logits"]) - np.array(logits)).max() < 1e-12
        spaced_ids, _ = tokenize(folder, SPACED_PAIRS, model_max_length)
        unstripped_ids, _ = tokenize(folder, SPACED_PAIRS, model_max_length, strip=False)
        assert all(a != b for a, b in zip(spaced_ids, unstripped_ids))  # spaces would be tokens
        golden["spaced"] = {"pairs": SPACED_PAIRS, "input_ids": spaced_ids}
    with open(os.path.join(folder, "pairs.json"), "w", encoding="utf-8") as f:
        json.dump(golden, f, ensure_ascii=False)
        f.write("\n")
    size = sum(os.path.getsize(os.path.join(folder, n)) for n in os.listdir(folder))
    print("%s: %d pairs, %d labels, %d bytes" % (name, len(pairs), num_labels, size))


def identity_config_predict(folder, pairs):
    """CrossEncoder.predict on a copy whose config.json names Identity as the default."""
    copy = folder + ".identity-tmp"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(folder, copy)
    with open(os.path.join(copy, "config.json")) as f:
        config = json.load(f)
    config["sbert_ce_default_activation_function"] = "torch.nn.modules.linear.Identity"
    with open(os.path.join(copy, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    scores = predict(copy, pairs)
    shutil.rmtree(copy)
    return scores


def edited_logits(folder, ids, types, **edits):
    """The logits (float64) of a copy of the folder whose config.json has `edits`."""
    from transformers import AutoModelForSequenceClassification
    with tempfile.TemporaryDirectory() as tmp:
        copy = os.path.join(tmp, "edited")
        shutil.copytree(folder, copy)
        with open(os.path.join(copy, "config.json")) as f:
            config = json.load(f)
        config.update(edits)
        with open(os.path.join(copy, "config.json"), "w") as f:
            json.dump(config, f, indent=2)
        model = AutoModelForSequenceClassification.from_pretrained(
            copy, attn_implementation="eager").eval()
        assert type(model).__name__ == config["architectures"][0]
        return logits64(model, ids, types)


def rerank(folder, logits):
    from sentence_transformers import CrossEncoder
    ce = CrossEncoder(folder, device="cpu")
    ranked = ce.rank(QUERY_A, DOCS_A, batch_size=3, show_progress_bar=False)
    raw = sorted(range(len(DOCS_A)), key=lambda i: -logits[i][0])
    return {
        "query": QUERY_A,
        "documents": DOCS_A,
        "ranked": [[int(r["corpus_id"]), float(r["score"])] for r in ranked],
        "ranked_raw": [[i, logits[i][0]] for i in raw],
    }


def write_rerank_files(folder, ranking):
    """What tests/test_rerank.sh reads without a JSON parser: the query, the documents one per
    line, and each ranking as lines "index<TAB>score"."""
    with open(os.path.join(folder, "rerank_query.txt"), "w", encoding="utf-8") as f:
        f.write(ranking["query"] + "\n")
    with open(os.path.join(folder, "rerank_documents.txt"), "w", encoding="utf-8") as f:
        f.write("".join(d + "\n" for d in ranking["documents"]))
    for key in ("ranked", "ranked_raw"):
        with open(os.path.join(folder, key + ".tsv"), "w") as f:
            f.write("".join("%d\t%.9g\n" % (i, score) for i, score in ranking[key]))


CASES = {  # name: (seed, family, num_labels, id2label, model_max_length)
    "one_label": (2401, "bert", 1, None, 48),
    "three_labels": (2402, "bert", 3, {0: "contradiction", 1: "entailment", 2: "neutral"}, 64),
    "roberta": (2403, "roberta", 1, None, 40),
    "modernbert": (2404, "modernbert", 2, {0: "irrelevant", 1: "relevant"}, 48),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=ROOT)
    ap.add_argument("--case", action="append", choices=sorted(CASES))
    args = ap.parse_args()
    torch.set_num_threads(1)
    os.makedirs(args.out, exist_ok=True)
    for name in args.case or CASES:
        write_case(args.out, name, *CASES[name])


if __name__ == "__main__":
    sys.exit(main())
