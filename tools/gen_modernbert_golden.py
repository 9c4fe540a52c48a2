#!/usr/bin/env python3
"""Writes small random ModernBERT model folders and their reference outputs (Hugging Face
transformers' ModernBertModel and sentence-transformers).

usage: ~/.cache/clattn/golden-venv/bin/python tools/gen_modernbert_golden.py [--out DIR]
           [--case NAME ...]

(the venv every generator runs from, made by tools/make-golden-venv.sh: torch, transformers with
models/modernbert, sentence-transformers, tokenizers at its pinned versions; tests/golden/README.md.
The committed files were made with transformers 4.57.6, sentence-transformers 3.4.1 and the
tokenizer trained by tokenizers 0.19.1, the version libclattn's tokenizers follow; tokenizers
0.22.1 trains the same vocabulary and merges (it writes each merge as a pair ["a", "b"] where
0.19.1 wrote "a b", which the library reads alike) and gives the same ids. --case writes the
cases named (default both; basic is always written: the other cases take its vocabulary). No
network, nothing downloaded.)

What transformers' modeling_modernbert.py computes (ModernBertModel, eager attention, which pads
as the library does: the masks below are additive finfo.min):
  embeddings:  norm(tok_embeddings(ids))            LayerNorm(eps norm_eps, bias if norm_bias),
                                                    no position table
  layer i:     h = h + attn(attn_norm(h))           attn_norm is nn.Identity in layer 0
               h = h + mlp(mlp_norm(h))
  attn:        qkv = Wqkv(x).view(B, N, 3, heads, d); RoPE (rotate_half, cos/sin from float32
               angles p · base^(-2k/d)) on q and k; softmax(q·kᵀ/√d + mask)·v; Wo
               layer i % global_attn_every_n_layers == 0: global, base global_rope_theta;
               otherwise local: base local_rope_theta (null: global_rope_theta) and keys
               |i - j| > local_attention // 2 masked (sliding_window_mask)
  mlp:         input, gate = Wi(x).chunk(2); Wo(act(input) · gate)
               act = ACT2FN[hidden_activation]
  final_norm after the last layer.
Padding: a padded query whose window holds no real key gets, in transformers, a uniform average
of every value (all its scores are finfo.min); libclattn gives it zero attention. Neither reaches
a real token, so the cases below pad rows so that every window holds a real key (the script
asserts it) and the sentence embeddings pool over real tokens only. The script also asserts that
each row of a padded batch equals the row run alone (transformers unpads with flash attention;
eager attention with a mask must agree).

Written (each case folder removed first), under tests/golden/modernbert/:
  basic/   a sentence-transformers folder of a ModernBertModel (model.safetensors with
           ModernBertModel's names, config.json as save_pretrained writes it): hidden 32, 4
           heads, 4 layers (layers 0 and 3 global, 1 and 2 local), intermediate 48, gelu, no
           linear or norm biases (ModernBERT-base's choices), local_attention 16 so that the
           windows matter on short texts, global_rope_theta 160000, local_rope_theta 10000;
           tokenizer.json: byte-level BPE (NFC, ByteLevel, [CLS] $A [SEP] TemplateProcessing,
           [UNK] [CLS] [SEP] [PAD] [MASK] after the learned vocabulary, as ModernBERT's), trained
           with `tokenizers` on the texts below; modules.json (Transformer, Pooling, Normalize),
           1_Pooling/config.json (mean), sentence_bert_config.json (max_seq_length 64),
           tokenizer_config.json (PreTrainedTokenizerFast, model_input_names without token types)
             texts.txt       the texts, one a line
             ids.txt         each text's ids as `embed --tokenize` prints them (tokenizers,
                             truncated to 64); sentence-transformers' are those of the text
                             without leading and trailing whitespace (str.strip(), asserted)
             embeddings.npy  float32 [texts, 32]: SentenceTransformer.encode of the texts in
                             float64 (mean pooling, normalised), rounded to float32
           (Every float64 run keeps the attention's softmax in float64: see
           golden_common.float64_softmax.)
           and the encoder-level files of every case:
             input_ids.npy, attention_mask.npy   int64 [B, N]: [CLS] random ids [SEP], right-padded
             last_hidden_state.npy               float32 [B, N, hidden]: ModernBertModel in float64
                                                 from the stored float32 weights, every position
             mean_pooled.npy, mean_pooled_normalized.npy   float32 [B, hidden]: masked mean (and
                                                 it L2-normalised), in float64
             meta.json       sizes, tolerance 1e-5, float32_torch_max_abs_err (transformers in
                             float32 against float64)
  long/    a ModernBertForMaskedLM's file (names under "model.", plus head.* and decoder.bias, to
           be skipped): hidden 32, 4 heads, 3 layers (0 and 2 global, 1 local), intermediate 40,
           gelu_pytorch_tanh, attention_bias, mlp_bias and norm_bias true, the default
           local_attention 128 with rows of 300 and 240 tokens, local_rope_theta null (the local
           layer uses global_rope_theta); the encoder-level files only.
"""
import argparse
import json
import os
import shutil
import sys

from golden_common import float64_softmax, pooled, write_json_files

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(HERE, "..", "tests", "golden", "modernbert")

ST_MAX_SEQ_LENGTH = 64
SPECIAL_TOKENS = ["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"]
ST_TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "ModernBERT alternates global attention with a sliding window of local attention.",
    "Hello, world!",
    "Rotary position embeddings rotate queries and keys by angles that grow with the "
    "position; the global layers use a base of 160000 and the local ones 10000.",
    "Ünïcödé: naïve café, Straße, Ελληνικά, русский, 日本語のテキスト, 😀🚀.",
    "   leading and trailing spaces   ",
    "Numbers 1234567890 and symbols #@$%^&*() are split by the byte-level pre-tokenizer.",
    "a",
    "",
    "Sentence embeddings are the mean of the last hidden states over the real tokens, "
    "normalised to unit length, so that the cosine similarity of two texts is the dot product "
    "of their vectors; this text is long enough to be truncated to sixty-four tokens.",
    "Local attention lets each token see only its neighbours.",
    "Global layers see every token of the sequence.",
    "The tokenizer merges frequent byte pairs into longer tokens.",
    "It's a test, isn't it? We'll see: they're here, I'd say.",
    "Padding tokens are masked out of every attention.",
    "Short.",
    "café Café CAFÉ",
    "The quick brown fox jumps over the lazy dog. The quick brown fox jumps again and again, "
    "over and over.",
    "e = mc^2, a^2 + b^2 = c^2",
    "Tabs\tand\u00a0non-breaking spaces.",
]
# Text the tokenizer learns its merges from (besides the texts above).
EXTRA_CORPUS = [
    "the of and to in is that for it as with was on be by this are at from or an",
    "attention window layer global local token embedding rotary position sequence model",
    "sentence transformers mean pooling normalised vector similarity cosine dot product",
]
VOCAB_SIZE = 400  # learned (bytes and merges); the special tokens come after


# ---- the tokenizer ----

def train_tokenizer(folder):
    import tokenizers
    from tokenizers import Tokenizer, decoders, normalizers, pre_tokenizers, processors, trainers
    from tokenizers.models import BPE
    tok = Tokenizer(BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, min_frequency=1, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=[])
    tok.train_from_iterator(ST_TEXTS + EXTRA_CORPUS, trainer)
    tok.add_special_tokens(SPECIAL_TOKENS)
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0", pair="[CLS]:0 $A:0 [SEP]:0 $B:0 [SEP]:0",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)])
    tok.save(os.path.join(folder, "tokenizer.json"))
    tok.enable_truncation(ST_MAX_SEQ_LENGTH)
    with open(os.path.join(folder, "ids.txt"), "w") as f:
        for t in ST_TEXTS:
            f.write(json.dumps(tok.encode(t).ids) + "\n")
    # sentence-transformers strips each text (Transformer.tokenize: str(s).strip()) first
    with open(os.path.join(folder, "ids_stripped.json"), "w") as f:
        json.dump([tok.encode(t.strip()).ids for t in ST_TEXTS], f)
    return tokenizers.__version__


# ---- models and references ----

def randomize(model, torch, nn):
    with torch.no_grad():
        for mod in model.modules():
            if isinstance(mod, nn.Linear):
                mod.weight.normal_(0.0, 0.2)
                if mod.bias is not None:
                    mod.bias.normal_(0.0, 0.2)
            elif isinstance(mod, nn.Embedding):
                mod.weight.normal_(0.0, 1.0)
            elif isinstance(mod, nn.LayerNorm):
                mod.weight.copy_(1.0 + 0.1 * torch.randn_like(mod.weight))
                if mod.bias is not None:
                    mod.bias.copy_(0.1 * torch.randn_like(mod.bias))


def make_inputs(np, rng, lengths, low, high, cls_id, sep_id, pad_id):
    n = max(lengths)
    ids = np.full((len(lengths), n), pad_id, dtype=np.int64)
    mask = np.zeros((len(lengths), n), dtype=np.int64)
    for b, length in enumerate(lengths):
        ids[b, 0] = cls_id
        ids[b, 1:length - 1] = rng.randint(low, high, size=length - 2)
        ids[b, length - 1] = sep_id
        mask[b, :length] = 1
    return ids, mask


CASES = {
    "basic": dict(
        seed=2311, masked_lm=False, lengths=[40, 33, 32],
        config=dict(hidden_size=32, num_attention_heads=4, num_hidden_layers=4,
                    intermediate_size=48, local_attention=16, global_attn_every_n_layers=3),
        description="ModernBERT-base's choices (gelu, no linear or norm biases, global every 3 "
                    "layers, rope bases 160000 / 10000) at hidden 32, 4 heads, 4 layers, "
                    "local_attention 16; a sentence-transformers folder; three rows "
                    "right-padded to 40 tokens."),
    "long": dict(
        seed=2312, masked_lm=True, lengths=[300, 240, 237],
        config=dict(hidden_size=32, num_attention_heads=4, num_hidden_layers=3,
                    intermediate_size=40, global_attn_every_n_layers=2,
                    hidden_activation="gelu_pytorch_tanh", attention_bias=True, mlp_bias=True,
                    norm_bias=True, local_rope_theta=None),
        description="A ModernBertForMaskedLM file (model. prefix, head.*, decoder.bias) at hidden "
                    "32, 4 heads, 3 layers (global every 2), gelu_pytorch_tanh, every bias, "
                    "local_rope_theta null, the default local_attention 128 over rows of 300, "
                    "240 and 237 tokens."),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=GOLDEN)
    ap.add_argument("--case", action="append", choices=sorted(CASES))
    a = ap.parse_args()

    import numpy as np
    import torch
    import transformers
    import sentence_transformers
    from torch import nn
    from transformers import ModernBertConfig, ModernBertForMaskedLM, ModernBertModel
    torch.set_num_threads(1)

    basic = os.path.join(a.out, "basic")
    for name in CASES:
        shutil.rmtree(os.path.join(a.out, name), ignore_errors=True)
    os.makedirs(basic)
    tokenizers_version = train_tokenizer(basic)
    with open(os.path.join(basic, "tokenizer.json")) as f:
        vocab = json.load(f)["model"]["vocab"]
    learned = len(vocab)
    special = {t: learned + i for i, t in enumerate(SPECIAL_TOKENS)}
    vocab_size = learned + len(SPECIAL_TOKENS)

    for name, case in CASES.items():
        if a.case and name not in a.case and name != "basic":
            continue
        folder = os.path.join(a.out, name)
        os.makedirs(folder, exist_ok=True)
        config = ModernBertConfig(
            vocab_size=vocab_size, pad_token_id=special["[PAD]"], bos_token_id=special["[CLS]"],
            eos_token_id=special["[SEP]"], cls_token_id=special["[CLS]"],
            sep_token_id=special["[SEP]"], **case["config"])
        cls = ModernBertForMaskedLM if case["masked_lm"] else ModernBertModel
        model = cls._from_config(config, attn_implementation="eager").eval()
        # Seeded after the model's own initialisation, whose use of the generator changes with
        # torch's version: randomize draws every weight, the same ones with any torch.
        torch.manual_seed(case["seed"])
        randomize(model, torch, nn)
        model.save_pretrained(folder, safe_serialization=True)
        encoder = model.model if case["masked_lm"] else model
        # The reference: float64 from the stored float32 weights.
        encoder = encoder.to(torch.float64)
        cfg = encoder.config
        ids, mask = make_inputs(np, np.random.RandomState(case["seed"]), case["lengths"], 0,
                                learned, special["[CLS]"], special["[SEP]"], special["[PAD]"])
        half = cfg.local_attention // 2
        for length in case["lengths"]:  # every padded query's window holds a real key
            assert max(ids.shape[1] - 1 - (length - 1), 0) <= half, (name, length)

        def run(dtype, ids=ids, mask=mask):
            m = encoder.to(dtype)
            with torch.no_grad(), float64_softmax(torch):
                out = m(input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask))
            encoder.to(torch.float64)
            return out.last_hidden_state.numpy().astype(np.float64)

        h64 = run(torch.float64)
        h32 = run(torch.float32)
        for b, length in enumerate(case["lengths"]):  # padding changes no real token
            alone = run(torch.float64, ids[b:b + 1, :length], mask[b:b + 1, :length])
            assert np.abs(alone[0] - h64[b, :length]).max() < 1e-12, (name, b)
        mean, norm = pooled(h64, mask)
        np.save(os.path.join(folder, "input_ids.npy"), ids)
        np.save(os.path.join(folder, "attention_mask.npy"), mask)
        np.save(os.path.join(folder, "last_hidden_state.npy"), h64.astype(np.float32))
        np.save(os.path.join(folder, "mean_pooled.npy"), mean.astype(np.float32))
        np.save(os.path.join(folder, "mean_pooled_normalized.npy"), norm.astype(np.float32))
        err32 = float(np.abs(h32 - h64).max())
        layer_kinds = ["global" if i % cfg.global_attn_every_n_layers == 0 else "local"
                       for i in range(cfg.num_hidden_layers)]
        meta = dict(kind="modernbert", description=case["description"],
                    reference="tools/gen_modernbert_golden.py: transformers %s ModernBertModel "
                              "(eager attention) in float64" % transformers.__version__,
                    model_from=None, file_prefix="model." if case["masked_lm"] else "",
                    torch_version=torch.__version__,
                    transformers_version=transformers.__version__,
                    hidden_size=cfg.hidden_size, heads=cfg.num_attention_heads,
                    num_layers=cfg.num_hidden_layers, intermediate_size=cfg.intermediate_size,
                    vocab_size=cfg.vocab_size, hidden_activation=cfg.hidden_activation,
                    norm_eps=cfg.norm_eps, norm_bias=cfg.norm_bias,
                    attention_bias=cfg.attention_bias, mlp_bias=cfg.mlp_bias,
                    global_rope_theta=cfg.global_rope_theta,
                    local_rope_theta=cfg.local_rope_theta,
                    global_attn_every_n_layers=cfg.global_attn_every_n_layers,
                    local_attention=cfg.local_attention, layer_kinds=layer_kinds,
                    max_position_embeddings=cfg.max_position_embeddings,
                    batch=int(ids.shape[0]), seq=int(ids.shape[1]), lengths=case["lengths"],
                    seed=case["seed"], tolerance=1e-5, float32_torch_max_abs_err=err32,
                    max_abs_last_hidden_state=float(np.abs(h64).max()))
        if name == "basic":
            meta.update(write_sentence_transformers(folder, np, torch, sentence_transformers,
                                                    transformers, cfg.hidden_size,
                                                    tokenizers_version))
        with open(os.path.join(folder, "meta.json"), "w") as f:
            json.dump(meta, f, indent=2, ensure_ascii=False)
            f.write("\n")
        print("%-6s float32 transformers off by %.2e%s" % (
            name, err32, ", sentence-transformers float32 off by %.2e" %
            meta["st_float32_max_abs_err"] if name == "basic" else ""))
    return 0


def write_sentence_transformers(folder, np, torch, sentence_transformers, transformers, hidden,
                                tokenizers_version):
    """Makes folder a sentence-transformers folder; its texts' embeddings."""
    os.makedirs(os.path.join(folder, "1_Pooling"))
    files = {
        "modules.json": [
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling",
             "type": "sentence_transformers.models.Pooling"},
            {"idx": 2, "name": "2", "path": "2_Normalize",
             "type": "sentence_transformers.models.Normalize"}],
        "1_Pooling/config.json": {
            "word_embedding_dimension": hidden, "pooling_mode_cls_token": False,
            "pooling_mode_mean_tokens": True, "pooling_mode_max_tokens": False,
            "pooling_mode_mean_sqrt_len_tokens": False, "pooling_mode_weightedmean_tokens": False,
            "pooling_mode_lasttoken": False, "include_prompt": True},
        "sentence_bert_config.json": {"max_seq_length": ST_MAX_SEQ_LENGTH,
                                      "do_lower_case": False},
        "config_sentence_transformers.json": {
            "__version__": {"sentence_transformers": sentence_transformers.__version__,
                            "transformers": transformers.__version__,
                            "pytorch": torch.__version__},
            "prompts": {}, "default_prompt_name": None, "similarity_fn_name": "cosine"},
        "tokenizer_config.json": {
            "clean_up_tokenization_spaces": True, "cls_token": "[CLS]", "mask_token": "[MASK]",
            "model_input_names": ["input_ids", "attention_mask"],
            "model_max_length": 8192, "pad_token": "[PAD]", "sep_token": "[SEP]",
            "tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]"},
        "special_tokens_map.json": {
            "cls_token": "[CLS]", "mask_token": "[MASK]", "pad_token": "[PAD]",
            "sep_token": "[SEP]", "unk_token": "[UNK]"},
    }
    write_json_files(folder, files)
    with open(os.path.join(folder, "texts.txt"), "w", encoding="utf-8") as f:
        for t in ST_TEXTS:
            assert "\n" not in t and "\r" not in t
            f.write(t + "\n")

    from sentence_transformers import SentenceTransformer
    st = SentenceTransformer(folder, device="cpu",
                             model_kwargs={"attn_implementation": "eager"})
    assert st.max_seq_length == ST_MAX_SEQ_LENGTH
    with open(os.path.join(folder, "ids_stripped.json")) as f:
        want = json.load(f)
    os.remove(os.path.join(folder, "ids_stripped.json"))
    features = st.tokenize(ST_TEXTS)
    for i, row in enumerate(features["input_ids"].tolist()):
        real = int(features["attention_mask"][i].sum())
        assert row[:real] == want[i], (i, row[:real], want[i])
    assert max(len(w) for w in want) == ST_MAX_SEQ_LENGTH  # one text is truncated
    e32 = st.encode(ST_TEXTS, convert_to_numpy=True).astype(np.float64)
    st.to(torch.float64)
    with float64_softmax(torch):
        e64 = st.encode(ST_TEXTS, convert_to_numpy=True)
    assert np.isfinite(e64).all()
    assert e64.dtype == np.float64, e64.dtype
    np.save(os.path.join(folder, "embeddings.npy"), e64.astype(np.float32))
    return dict(tokenizers_version=tokenizers_version,
                sentence_transformers_version=sentence_transformers.__version__,
                texts=len(ST_TEXTS), max_seq_length=ST_MAX_SEQ_LENGTH,
                st_float32_max_abs_err=float(np.abs(e32 - e64).max()))


if __name__ == "__main__":
    sys.exit(main())
