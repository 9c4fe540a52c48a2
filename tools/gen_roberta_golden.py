#!/usr/bin/env python3
"""Writes RoBERTa and XLM-RoBERTa reference files: small random models as sentence-transformers
folders, sentence-transformers' embeddings through them, and transformers' hidden states.

usage: ~/.cache/clattn/golden-venv/bin/python tools/gen_roberta_golden.py [--out DIR]
           [--case roberta|xlmr|masked_lm ...]

The venv every generator runs from, made by tools/make-golden-venv.sh (torch, transformers,
sentence-transformers, tokenizers at its pinned versions; tests/golden/README.md). The committed
files were made with torch 1.13, transformers 4.40.2, sentence-transformers 2.7.0 and tokenizers
0.19.1 (the tokenizers the library was made equal to): the venv's versions give the same ids,
weights and embeddings (to 1e-7), and bookkeeping of their own in tokenizer_config.json and
config_sentence_transformers.json (extra_special_tokens, clean_up_tokenization_spaces, prompts,
similarity_fn_name), which the library does not read. Offline: every model is built from a
config here, the tokenizers are the repository's own trained ones. --out (default
tests/golden/roberta) receives the cases named by --case (default all): roberta (with
roberta_padded), xlmr (with xlmr_left_padded), masked_lm.

Writes under tests/golden/roberta/ (each folder removed first; the files are deterministic):
  roberta/   a sentence-transformers folder (modules.json: Transformer, Pooling mean; no
             Normalize): RobertaModel (model_type "roberta", hidden 32, 2 layers, 4 heads,
             intermediate 64, max_position_embeddings 130, type_vocab_size 1, pad_token_id 1,
             layer_norm_eps 1e-5, pooler.* kept for the loader to skip), saved by
             save_pretrained (model.safetensors, float32); the tokenizer
             tests/data/tokenizer/bpe/roberta.json (byte-level BPE, RobertaProcessing, 1501 ids)
             through RobertaTokenizerFast.save_pretrained (tokenizer.json, tokenizer_config.json
             with model_max_length 128, special_tokens_map.json); sentence_bert_config.json
             max_seq_length 48
  xlmr/      the same for XLMRobertaModel (model_type "xlm-roberta", 839 ids) with CLS pooling
             and Normalize, max_seq_length 40. Its tokenizer is tests/golden/unigram's
             (SentencePiece Unigram in XLM-R's layout: Precompiled nmt_nfkc, Metaspace,
             TemplateProcessing <s> $A </s>) through XLMRobertaTokenizerFast: tokenizer.json is
             NOT stored here (340 KB, the charsmap); the tests copy the folder and unpack
             tests/golden/unigram/tokenizer.json.gz into it (the script checks that the saved
             tokenizer.json is that file's content, as JSON, its scores to 12 digits)
  each of them also holds:
    texts.txt        TEXTS below, one per line
    ids.txt          each text's ids as `embed --tokenize` prints them: the folder's fast
                     tokenizer with sentence-transformers' truncation (max_seq_length)
    embeddings.npy   float32 [texts, 32]: SentenceTransformer(folder).encode(texts,
                     batch_size=8) with the model in float64 (batches of 8 neighbours by length:
                     padding inside batches), rounded at the end
    texts_spaced.txt, embeddings_spaced.npy  SPACED below (texts with whitespace at the ends,
                     which sentence-transformers strips) and their embeddings, as above
    embeddings_max_length.npy  the same from a copy of the folder without
                     sentence_bert_config.json: sentence-transformers then truncates at
                     min(max_position_embeddings, model_max_length) = 128 tokens, which reach
                     the last row of the position table (padding_idx + 128 = 129)
    meta.json        versions, sizes, max_seq_length, tolerance (1e-5) and what sentence-
                     transformers' own float32 pass is off by (float32_max_abs_err; asserted 5x
                     below the tolerance)
  raw encoder cases (hf_golden_run_case, tests/common/hf_golden.h): input_ids.npy,
  attention_mask.npy (int64 [B, N]), last_hidden_state.npy (float32 [B, N, 32]: transformers'
  model in float64 on the stored float32 weights, every position kept, padding too),
  mean_pooled.npy, mean_pooled_normalized.npy (masked mean, and it L2-normalised), meta.json:
    roberta_padded    roberta/'s model (meta model_from), three texts' ids right-padded
    xlmr_left_padded  xlmr/'s model, three texts' ids LEFT-padded: the real tokens' positions
                      still start at padding_idx + 1 (create_position_ids_from_input_ids counts
                      non-padding ids), which an offset by column would get wrong
    masked_lm         a folder of its own: RobertaForMaskedLM (tensors under "roberta.",
                      lm_head.* to skip), pad_token_id 3 (so padding_idx comes from the config),
                      hidden_act gelu_new, max_position_embeddings 40; one row of 36 tokens (the
                      longest the table allows: rows up to 3 + 36 = 39), and one of 12 holding
                      the padding id 3 twice as real tokens (attended, but reading position row
                      3 and not counted)
The weights: the family's initialisation with initializer_range 0.2 (attention not nearly
uniform), LayerNorm weights 1 + N(0, 0.1²) and biases N(0, 0.1²), and the rows transformers
zeroes at padding_idx (word and position tables) drawn N(0, 0.2²) like the others, so that a
token reading the wrong position row shows; all under torch.manual_seed(<seed>).
"""
import argparse
import gzip
import json
import os
import shutil
import sys
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402
import sentence_transformers  # noqa: E402
import tokenizers  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from sentence_transformers import SentenceTransformer, models  # noqa: E402
from tokenizers import AddedToken  # noqa: E402
from golden_common import pooled  # noqa: E402
from transformers import (RobertaConfig, RobertaForMaskedLM, RobertaModel,  # noqa: E402
                          RobertaTokenizerFast, XLMRobertaConfig, XLMRobertaModel,
                          XLMRobertaTokenizerFast)

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.join(HERE, "..")
ROOT = os.path.join(REPO, "tests", "golden", "roberta")
BPE_TOKENIZER = os.path.join(REPO, "tests", "data", "tokenizer", "bpe", "roberta.json")
UNIGRAM_TOKENIZER = os.path.join(REPO, "tests", "golden", "unigram", "tokenizer.json.gz")
TOLERANCE = 1e-5
MAX_POSITIONS = 130  # max_position_embeddings: 128 tokens after padding_idx + 1

# Multilingual texts: short and long (cut at max_seq_length, and some at 128), special tokens
# typed in the text (<pad> is tokenized as the padding id and attended: its position is
# padding_idx's row), an empty text (<s> </s> alone), emoji and combining marks, whitespace runs
# inside a text. None begins or ends with whitespace: sentence-transformers strips every text
# (str.strip() in Transformer.tokenize) before tokenizing, the library does not, and a
# byte-level BPE gives other ids for " x" than for "x".
TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "hello",
    "",
    "Café naïve résumé façade Über straße ÆØÅ œuvre São Paulo Zürich Kraków Ångström.",
    "Français: l'été dernier, nous sommes allés à la plage; c'était très agréable.",
    "Deutsch: Die Straßenbahn fährt über die Brücke, während Müller Äpfel kauft.",
    "Русский: Съешь же ещё этих мягких французских булок, да выпей чаю. Привет, мир!",
    "中文：我们在北京学习自然语言处理。今天天气很好，我们去公园散步吧！",
    "日本語：東京は日本の首都です。ひらがなとカタカナ、漢字を使います。",
    "한국어: 안녕하세요, 세계! 서울은 대한민국의 수도입니다.",
    "العربية: مرحبا بالعالم! اللغة العربية جميلة جدا.",
    "हिन्दी: नमस्ते दुनिया! भारत की राजधानी नई दिल्ली है।",
    "Emoji 😀 👍🏽 🇫🇷 and symbols © ® ™ ± ∞ ≠ ½ ² ﬁ Ｈｅｌｌｏ",
    "special tokens <s> and </s> and <mask> in the <pad> text <unk> <extra>",
    "numbers 12345 and 3.14159; code: for (int i = 0; i < n; i++) { sum += x[i]; }",
    "Ελληνικά: Γειά σου κόσμε! עברית: שלום עולם!",
    "runs   of  spaces,\ttabs\t\tand\u00a0no-break\u3000spaces inside",
    ("Paris is the capital of France. Berlin is the capital of Germany. " * 3).strip(),
    " ".join("word%d" % i for i in range(60)),
    ("Los niños comieron paella en la playa; ¿dónde está la biblioteca? ¡Qué día! " * 6).strip(),
]


assert all(t == t.strip() for t in TEXTS)
# Texts with whitespace at either end (no newline: one text per line), Python's isspace kinds.
SPACED = [" " + TEXTS[0] + "  ", "\t" + TEXTS[2], TEXTS[6] + "\u3000",
          "\u00a0 " + TEXTS[1] + " \u2003\u205f", "\x0b\x0c" + TEXTS[3] + "\u2028"]


def init_weights(model, seed, pad):
    """Perturbs the family's initialisation (see the docstring); `pad` is padding_idx."""
    with torch.no_grad():
        for mod in model.modules():
            if isinstance(mod, torch.nn.LayerNorm):
                mod.weight.add_(torch.randn_like(mod.weight) * 0.1)
                mod.bias.copy_(torch.randn_like(mod.bias) * 0.1)
        base = model.roberta if hasattr(model, "roberta") else model
        emb = base.embeddings
        emb.word_embeddings.weight[pad].normal_(0.0, 0.2)
        emb.position_embeddings.weight[pad].normal_(0.0, 0.2)


def small_config(cls, seed, **overrides):
    c = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
             max_position_embeddings=MAX_POSITIONS, type_vocab_size=1, hidden_act="gelu",
             layer_norm_eps=1e-5, initializer_range=0.2, pad_token_id=1, bos_token_id=0,
             eos_token_id=2)
    c.update(overrides)
    torch.manual_seed(seed)
    return cls(**c)


def write_json(path, value):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f, indent=2, ensure_ascii=False)
        f.write("\n")


def versions():
    return dict(torch_version=torch.__version__, transformers_version=transformers.__version__,
                sentence_transformers_version=sentence_transformers.__version__,
                tokenizers_version=tokenizers.__version__)


def drop_name_or_path(folder):
    """config.json without "_name_or_path" (this machine's path, after a reload)."""
    path = os.path.join(folder, "config.json")
    with open(path, encoding="utf-8") as f:
        config = json.load(f)
    config.pop("_name_or_path", None)
    write_json(path, config)


def encode(folder, texts):
    """sentence-transformers' embeddings of texts through folder: float64 and float32 runs."""
    st = SentenceTransformer(folder, device="cpu")
    e32 = st.encode(texts, batch_size=8, convert_to_numpy=True)
    st.double()
    e64 = st.encode(texts, batch_size=8, convert_to_numpy=True).astype(np.float64)
    return st, e64, float(np.abs(e32.astype(np.float64) - e64).max())


def write_st_folder(name, seed, model_cls, config_cls, tokenizer, pooling, normalize,
                    max_seq_length, vocab_size):
    """A sentence-transformers folder tests/golden/roberta/<name> and its embeddings."""
    folder = os.path.join(ROOT, name)
    shutil.rmtree(folder, ignore_errors=True)
    config = small_config(config_cls, seed, vocab_size=vocab_size)
    model = model_cls(config).eval()
    init_weights(model, seed, config.pad_token_id)
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    # tokenizer_args: the tokenizer's own model_max_length, which sentence-transformers 3 and
    # later would otherwise set to max_seq_length in the saved tokenizer_config.json
    modules = [models.Transformer(folder, max_seq_length=max_seq_length,
                                  tokenizer_args={"model_max_length": tokenizer.model_max_length}),
               models.Pooling(config.hidden_size, pooling_mode=pooling)]
    if normalize:
        modules.append(models.Normalize())
    SentenceTransformer(modules=modules, device="cpu").save(folder)
    for extra in ("README.md", "vocab.json", "merges.txt"):  # not read by either side
        if os.path.exists(os.path.join(folder, extra)):
            os.remove(os.path.join(folder, extra))
    drop_name_or_path(folder)

    st, e64, err32 = encode(folder, TEXTS)
    assert st.max_seq_length == max_seq_length, st.max_seq_length
    assert err32 * 5 <= TOLERANCE, (name, err32)
    with open(os.path.join(folder, "texts.txt"), "w", encoding="utf-8") as f:
        f.write("".join(t + "\n" for t in TEXTS))
    lines = [json.dumps(st.tokenizer(t, truncation=True, max_length=max_seq_length)["input_ids"])
             for t in TEXTS]
    assert any(len(json.loads(line)) == max_seq_length for line in lines)
    with open(os.path.join(folder, "ids.txt"), "w") as f:
        f.write("".join(line + "\n" for line in lines))
    np.save(os.path.join(folder, "embeddings.npy"), e64.astype(np.float32))
    # Whitespace at the ends: sentence-transformers strips it (Python's str.strip()) before
    # tokenizing, which byte-level BPE and Metaspace would otherwise turn into tokens.
    _, e64_spaced, _ = encode(folder, SPACED)
    with open(os.path.join(folder, "texts_spaced.txt"), "w", encoding="utf-8") as f:
        f.write("".join(t + "\n" for t in SPACED))
    np.save(os.path.join(folder, "embeddings_spaced.npy"), e64_spaced.astype(np.float32))

    with tempfile.TemporaryDirectory() as tmp:  # without sentence_bert_config.json
        copy = os.path.join(tmp, name)
        shutil.copytree(folder, copy)
        os.remove(os.path.join(copy, "sentence_bert_config.json"))
        st_full, e64_full, err32_full = encode(copy, TEXTS)
        assert st_full.max_seq_length == MAX_POSITIONS - 2, st_full.max_seq_length
        longest = max(len(st_full.tokenizer(t, truncation=True, max_length=MAX_POSITIONS - 2)
                          ["input_ids"]) for t in TEXTS)
        assert longest == MAX_POSITIONS - 2, longest
        assert err32_full * 5 <= TOLERANCE, (name, err32_full)
    np.save(os.path.join(folder, "embeddings_max_length.npy"), e64_full.astype(np.float32))
    meta = dict(kind="roberta_sentence", model_type=config.model_type,
                model_class=model_cls.__name__, hidden_size=config.hidden_size,
                num_layers=config.num_hidden_layers, heads=config.num_attention_heads,
                vocab_size=config.vocab_size, max_position_embeddings=MAX_POSITIONS,
                pad_token_id=config.pad_token_id, layer_norm_eps=config.layer_norm_eps,
                pooling=pooling, normalize=normalize, max_seq_length=max_seq_length,
                max_seq_length_without_st_config=MAX_POSITIONS - 2, texts=len(TEXTS),
                batch_size=8, seed=seed, tolerance=TOLERANCE,
                float32_max_abs_err=max(err32, err32_full), **versions())
    write_json(os.path.join(folder, "meta.json"), meta)
    print("%s: %d texts, sentence-transformers float32 off by %.2e"
          % (name, len(TEXTS), meta["float32_max_abs_err"]))
    return folder, st.tokenizer


def write_raw_case(name, description, model_dir, model_cls, ids, mask, seed, meta_extra):
    """Hidden states of model_dir's model (float64) on ids / mask into tests/golden/roberta/name
    (the model's files too when model_dir is that folder)."""
    folder = os.path.join(ROOT, name)
    os.makedirs(folder, exist_ok=True)
    ref = model_cls.from_pretrained(model_dir).eval()
    base = ref.roberta if hasattr(ref, "roberta") else ref
    with torch.no_grad():
        h32 = base(input_ids=torch.from_numpy(ids),
                   attention_mask=torch.from_numpy(mask)).last_hidden_state.numpy()
        base = base.double()
        h64 = base(input_ids=torch.from_numpy(ids),
                   attention_mask=torch.from_numpy(mask)).last_hidden_state.numpy()
    err32 = float(np.abs(h32 - h64).max())
    assert err32 * 5 <= TOLERANCE, (name, err32)
    mean, norm = pooled(h64, mask)
    np.save(os.path.join(folder, "input_ids.npy"), ids)
    np.save(os.path.join(folder, "attention_mask.npy"), mask)
    np.save(os.path.join(folder, "last_hidden_state.npy"), h64.astype(np.float32))
    np.save(os.path.join(folder, "mean_pooled.npy"), mean.astype(np.float32))
    np.save(os.path.join(folder, "mean_pooled_normalized.npy"), norm.astype(np.float32))
    c = base.config
    meta = dict(kind="roberta", description=description, model_class=model_cls.__name__,
                model_type=c.model_type, hidden_size=c.hidden_size,
                num_layers=c.num_hidden_layers, heads=c.num_attention_heads,
                intermediate=c.intermediate_size, hidden_act=c.hidden_act,
                layer_norm_eps=c.layer_norm_eps, max_position_embeddings=c.max_position_embeddings,
                pad_token_id=c.pad_token_id, type_vocab_size=c.type_vocab_size,
                vocab_size=c.vocab_size, batch=int(ids.shape[0]), seq=int(ids.shape[1]),
                lengths=[int(n) for n in mask.sum(1)], seed=seed, tolerance=TOLERANCE,
                float32_torch_max_abs_err=err32,
                max_abs_last_hidden_state=float(np.abs(h64).max()), **versions())
    meta.update(meta_extra)
    write_json(os.path.join(folder, "meta.json"), meta)
    print("%s: tolerance %g, float32 torch off by %.2e" % (name, TOLERANCE, err32))


def rounded(value):
    """value with its floats to 12 digits (tokenizers writes a score back 1 ulp apart)."""
    if isinstance(value, float):
        return float("%.12g" % value)
    if isinstance(value, list):
        return [rounded(v) for v in value]
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    return value


def padded(rows, pad, left):
    """int64 ids and attention mask [len(rows), longest], padded with `pad` on one side."""
    n = max(len(r) for r in rows)
    ids = np.full((len(rows), n), pad, dtype=np.int64)
    mask = np.zeros((len(rows), n), dtype=np.int64)
    for b, r in enumerate(rows):
        at = n - len(r) if left else 0
        ids[b, at:at + len(r)] = r
        mask[b, at:at + len(r)] = 1
    return ids, mask


def main():
    global ROOT
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=ROOT)
    ap.add_argument("--case", action="append", choices=["roberta", "xlmr", "masked_lm"])
    a = ap.parse_args()
    ROOT = a.out
    torch.set_num_threads(1)
    os.makedirs(ROOT, exist_ok=True)
    if not a.case or "roberta" in a.case:
        write_roberta()
    if not a.case or "xlmr" in a.case:
        write_xlmr()
    if not a.case or "masked_lm" in a.case:
        write_masked_lm()


def write_roberta():
    bpe = RobertaTokenizerFast(tokenizer_file=BPE_TOKENIZER, model_max_length=MAX_POSITIONS - 2)
    roberta_dir, roberta_tok = write_st_folder(
        "roberta", 2301, RobertaModel, RobertaConfig, bpe, "mean", False, 48, len(bpe))
    texts = [TEXTS[0], TEXTS[13], TEXTS[1]]
    rows = [roberta_tok(t)["input_ids"] for t in texts]
    ids, mask = padded(rows, roberta_tok.pad_token_id, left=False)
    write_raw_case("roberta_padded", "roberta/'s RobertaModel on three texts' ids, right-padded "
                   "(the second holds <pad> as a real token).", roberta_dir, RobertaModel, ids,
                   mask, 2301, dict(model_from="roberta"))


def write_xlmr():
    with tempfile.TemporaryDirectory() as tmp:
        unigram_json = os.path.join(tmp, "tokenizer.json")
        with gzip.open(UNIGRAM_TOKENIZER, "rb") as src, open(unigram_json, "wb") as dst:
            dst.write(src.read())
        # <mask> as the file has it (XLMRobertaTokenizerFast's default is normalized false)
        mask = AddedToken("<mask>", lstrip=True, rstrip=False, normalized=True, special=True)
        unigram = XLMRobertaTokenizerFast(tokenizer_file=unigram_json, mask_token=mask,
                                          model_max_length=MAX_POSITIONS - 2)
        xlmr_dir, xlmr_tok = write_st_folder(
            "xlmr", 2302, XLMRobertaModel, XLMRobertaConfig, unigram, "cls", True, 40,
            len(unigram))
        with open(unigram_json, encoding="utf-8") as f:
            original = json.load(f)
    saved = os.path.join(xlmr_dir, "tokenizer.json")
    with open(saved, encoding="utf-8") as f:
        assert rounded(json.load(f)) == rounded(original), "XLMRobertaTokenizerFast changed it"
    os.remove(saved)  # the tests unpack tests/golden/unigram/tokenizer.json.gz instead
    texts = [TEXTS[6], TEXTS[2], TEXTS[12]]
    rows = [xlmr_tok(t)["input_ids"] for t in texts]
    ids, mask = padded(rows, xlmr_tok.pad_token_id, left=True)
    write_raw_case("xlmr_left_padded", "xlmr/'s XLMRobertaModel on three texts' ids, "
                   "left-padded: positions count non-padding ids, not columns.", xlmr_dir,
                   XLMRobertaModel, ids, mask, 2302, dict(model_from="xlmr"))


def write_masked_lm():
    folder = os.path.join(ROOT, "masked_lm")
    shutil.rmtree(folder, ignore_errors=True)
    config = small_config(RobertaConfig, 2303, vocab_size=60, pad_token_id=3,
                          hidden_act="gelu_new", max_position_embeddings=40,
                          layer_norm_eps=1e-12)
    model = RobertaForMaskedLM(config).eval()
    init_weights(model, 2303, 3)
    model.save_pretrained(folder, safe_serialization=True)
    rng = np.random.RandomState(2303)
    rows = []
    for length in (36, 12):
        rows.append([0] + [int(i) for i in rng.randint(5, 60, size=length - 2)] + [2])
    rows[1][3] = rows[1][7] = 3  # the padding id as a real token: row 3, not counted
    ids, mask = padded(rows, 3, left=False)
    write_raw_case("masked_lm", "RobertaForMaskedLM (tensors under \"roberta.\", lm_head.* to "
                   "skip), pad_token_id 3, gelu_new, layer_norm_eps 1e-12, 40 positions: a row "
                   "of 36 tokens (up to the last row, 39), and one of 12 holding id 3 twice.",
                   folder, RobertaForMaskedLM, ids, mask, 2303, {})


if __name__ == "__main__":
    sys.exit(main())
