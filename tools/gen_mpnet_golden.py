#!/usr/bin/env python3
"""Writes MPNet reference files: small random MPNet models with transformers' outputs, and the
real all-mpnet-base-v2's sentence embeddings from sentence-transformers.

usage: ~/.cache/clattn/golden-venv/bin/python tools/gen_mpnet_golden.py [--small]
           [--real DIR] [--case NAME ...] [--out DIR]

With neither --small nor --real both parts are written (--real's DIR defaults to
${CLATTN_MODEL_CACHE:-~/.cache/clattn}/all-mpnet-base-v2, what
`tools/fetch-model.sh --model all-mpnet-base-v2` unpacks); --case limits --small to the cases
named; --out (default tests/golden) receives mpnet/ and mpnet_real/.

The environment: the venv every generator runs from, made by tools/make-golden-venv.sh (torch,
transformers, sentence-transformers, numpy at its pinned versions; tests/golden/README.md). The
committed files were made with torch 1.13, transformers 4.40.2 and sentence-transformers 2.7.0:
the venv's versions give the same small folders but for the versions and float32 errors that
meta.json records (mpnet_real's float32 embeddings move by about 1e-7).
No network here: HF_HUB_OFFLINE is set and every small model is built from an MPNetConfig.

--small writes tests/golden/mpnet/<case>/ for each case below (the folder removed first):
  config.json, model.safetensors   model.save_pretrained(folder, safe_serialization=True):
                      transformers' own names (MPNetModel: embeddings.*, encoder.layer.N.attention.
                      attn.{q,k,v,o}, attention.LayerNorm, intermediate.dense, output.dense,
                      output.LayerNorm, encoder.relative_attention_bias.weight, pooler.*;
                      MPNetForMaskedLM: the same under "mpnet." plus lm_head.*), float32
  input_ids.npy       int64 [B, N]: <s> (0) ... </s> (2), right-padded with <pad> (1), the ids
                      between drawn from 5 .. vocab_size - 1
  attention_mask.npy  int64 [B, N]: 1 real token, 0 padding
  last_hidden_state.npy  float32 [B, N, hidden]: MPNetModel.from_pretrained(folder).double()
                      (eval, no_grad) on input_ids and attention_mask, in float64 from the stored
                      float32 weights, rounded at the end; every position kept (padded positions
                      too: their RoBERTa position is padding_idx 1)
  mean_pooled.npy, mean_pooled_normalized.npy  float32 [B, hidden]: sentence-transformers' masked
                      mean sum(h·mask) / max(sum(mask), 1e-9), and it L2-normalised (eps 1e-12),
                      in float64
  meta.json           sizes, versions, tolerance (1e-5, absolute, for every stored output; the
                      script asserts that transformers' own float32 pass is 5x closer),
                      float32_torch_max_abs_err (what that float32 pass is off by)
The weights: MPNet's initialisation with initializer_range 0.2 (so that attention is not nearly
uniform), LayerNorm weights 1 + N(0, 0.1²) and biases N(0, 0.1²), and the relative attention
bias table N(0, 1) (its default N(0, 0.2²) would hide a wrong bucket), all under
torch.manual_seed(<seed of the case>).
Also tests/golden/mpnet/buckets.json: transformers' MPNetEncoder.relative_position_bucket
(32 buckets, max_distance 128) for every relative position -600 .. 600.

--real writes tests/golden/mpnet_real/:
  texts.txt           varied texts, one per line (no line breaks inside)
  ids.txt             each text's ids as `embed --tokenize` prints them (a JSON array per line):
                      the fast tokenizer with the model's truncation (max_seq_length 384)
  embeddings.npy      float32 [texts, 768]: SentenceTransformer(DIR).encode(texts) (float32 as
                      sentence-transformers runs it; MPNet, mean pooling, L2 normalisation)
  meta.json           versions and float64_max_abs_diff: the same texts through the model in
                      float64 against the float32 rows (how far float32 itself is from exact)
"""
import argparse
import json
import os
import shutil
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import MPNetConfig, MPNetForMaskedLM, MPNetModel  # noqa: E402
from transformers.models.mpnet.modeling_mpnet import MPNetEncoder  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(HERE, "..", "tests", "golden")

# name: (seed, description, config overrides, model class, row lengths (real tokens with <s>, </s>))
CASES = {
    "basic": (2201, "MPNetModel, gelu, three rows right-padded to 12 tokens.",
              dict(), MPNetModel, [12, 7, 3]),
    "long": (2202, "MPNetModel, 150 and 97 tokens: relative distances past max_distance 128 "
                   "(every bucket branch), padding.",
             dict(max_position_embeddings=160), MPNetModel, [150, 97]),
    "masked_lm": (2203, "MPNetForMaskedLM (tensors under \"mpnet.\", lm_head.* to ignore), "
                        "gelu_new, layer_norm_eps 1e-5, one row of 20 and one of 9.",
                  dict(hidden_act="gelu_new", layer_norm_eps=1e-5), MPNetForMaskedLM, [20, 9]),
}

REAL_TEXTS = [
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
    "A man is riding a horse.",
    "A woman is playing violin.",
    "Two men pushed carts through the woods.",
    "A man is riding a white horse on an enclosed ground.",
    "A monkey is playing drums.",
    "Someone in a gorilla costume is playing a set of drums.",
    "",
    "hello",
    "The quick brown fox jumps over the lazy dog!",
    "Héllo wörld, naïve café: ÀÉÎÕÜ — accents are kept by this tokenizer.",
    "東京は日本の首都です。北京是中国的首都。",
    "Emoji 🙂🚀 and symbols © ® ™ ± ∞ ≠",
    "<s> special tokens </s> in the <mask> text <pad>",
    "numbers 3.14159, 2,718 and 1e-5; code: printf(\"%d\\n\", x);",
    "Supercalifragilisticexpialidocious antidisestablishmentarianism",
    "Paris is the capital of France. Berlin is the capital of Germany. " * 4,
    " ".join("word%d" % i for i in range(400)),  # truncated at 384 tokens
]


def small_config(**overrides):
    c = dict(vocab_size=57, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
             intermediate_size=37, max_position_embeddings=40, hidden_act="gelu",
             layer_norm_eps=1e-12, initializer_range=0.2, relative_attention_num_buckets=32,
             pad_token_id=1, bos_token_id=0, eos_token_id=2)
    c.update(overrides)
    return MPNetConfig(**c)


def make_inputs(rng, lengths, vocab):
    n = max(lengths)
    ids = np.ones((len(lengths), n), dtype=np.int64)  # <pad>
    mask = np.zeros((len(lengths), n), dtype=np.int64)
    for b, length in enumerate(lengths):
        ids[b, 0] = 0
        ids[b, 1:length - 1] = rng.randint(5, vocab, size=length - 2)
        ids[b, length - 1] = 2
        mask[b, :length] = 1
    return ids, mask


def pooled(h, mask):
    m = mask[:, :, None].astype(np.float64)
    mean = (h * m).sum(1) / np.maximum(m.sum(1), 1e-9)
    norm = mean / np.maximum(np.linalg.norm(mean, axis=1, keepdims=True), 1e-12)
    return mean, norm


def write_small(golden, names):
    root = os.path.join(golden, "mpnet")
    os.makedirs(root, exist_ok=True)
    torch.set_num_threads(1)
    for name, (seed, description, overrides, cls, lengths) in CASES.items():
        if names and name not in names:
            continue
        folder = os.path.join(root, name)
        shutil.rmtree(folder, ignore_errors=True)
        torch.manual_seed(seed)
        config = small_config(**overrides)
        model = cls(config).eval()
        with torch.no_grad():
            for mod in model.modules():
                if isinstance(mod, torch.nn.LayerNorm):
                    mod.weight.add_(torch.randn_like(mod.weight) * 0.1)
                    mod.bias.copy_(torch.randn_like(mod.bias) * 0.1)
            base = model.mpnet if cls is MPNetForMaskedLM else model
            base.encoder.relative_attention_bias.weight.normal_(0.0, 1.0)
        model.save_pretrained(folder, safe_serialization=True)
        rng = np.random.RandomState(seed)
        ids, mask = make_inputs(rng, lengths, config.vocab_size)
        ref = MPNetModel.from_pretrained(folder).eval()
        with torch.no_grad():
            h32 = ref(input_ids=torch.from_numpy(ids),
                      attention_mask=torch.from_numpy(mask)).last_hidden_state.numpy()
            h64 = ref.double()(input_ids=torch.from_numpy(ids),
                               attention_mask=torch.from_numpy(mask)).last_hidden_state.numpy()
        mean, norm = pooled(h64, mask)
        tol = 1e-5  # absolute, on outputs of magnitude up to ~5 (max_abs_last_hidden_state)
        err32 = float(np.abs(h32 - h64).max())
        assert err32 * 5 <= tol, (name, err32, tol)
        np.save(os.path.join(folder, "input_ids.npy"), ids)
        np.save(os.path.join(folder, "attention_mask.npy"), mask)
        np.save(os.path.join(folder, "last_hidden_state.npy"), h64.astype(np.float32))
        np.save(os.path.join(folder, "mean_pooled.npy"), mean.astype(np.float32))
        np.save(os.path.join(folder, "mean_pooled_normalized.npy"), norm.astype(np.float32))
        meta = dict(kind="mpnet", description=description, torch_version=torch.__version__,
                    transformers_version=transformers.__version__,
                    model_class=cls.__name__, hidden_size=config.hidden_size,
                    num_layers=config.num_hidden_layers, heads=config.num_attention_heads,
                    intermediate=config.intermediate_size, hidden_act=config.hidden_act,
                    layer_norm_eps=config.layer_norm_eps,
                    max_position_embeddings=config.max_position_embeddings,
                    vocab_size=config.vocab_size, batch=len(lengths), seq=int(ids.shape[1]),
                    lengths=lengths, seed=seed, tolerance=tol,
                    float32_torch_max_abs_err=err32,
                    max_abs_last_hidden_state=float(np.abs(h64).max()))
        with open(os.path.join(folder, "meta.json"), "w") as f:
            json.dump(meta, f, indent=2)
            f.write("\n")
        print("%s: tolerance %g, float32 torch off by %.2e" % (name, tol, err32))
    rel = torch.arange(-600, 601)
    buckets = MPNetEncoder.relative_position_bucket(rel, num_buckets=32, max_distance=128)
    with open(os.path.join(root, "buckets.json"), "w") as f:
        json.dump(dict(first_relative_position=-600, num_buckets=32, max_distance=128,
                       torch_version=torch.__version__,
                       transformers_version=transformers.__version__,
                       buckets=[int(b) for b in buckets]), f)
        f.write("\n")


def write_real(golden, model_dir):
    import sentence_transformers
    from sentence_transformers import SentenceTransformer
    out = os.path.join(golden, "mpnet_real")
    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(2)
    st = SentenceTransformer(model_dir, device="cpu")
    emb = st.encode(REAL_TEXTS, batch_size=8, convert_to_numpy=True)
    tok = st.tokenizer
    with open(os.path.join(out, "texts.txt"), "w", encoding="utf-8") as f:
        for t in REAL_TEXTS:
            assert "\n" not in t and "\r" not in t
            f.write(t + "\n")
    with open(os.path.join(out, "ids.txt"), "w") as f:
        for t in REAL_TEXTS:
            ids = tok(t, truncation=True, max_length=st.max_seq_length)["input_ids"]
            f.write(json.dumps(ids) + "\n")
    np.save(os.path.join(out, "embeddings.npy"), emb.astype(np.float32))
    st.double()
    emb64 = st.encode(REAL_TEXTS, batch_size=8, convert_to_numpy=True)
    meta = dict(model="all-mpnet-base-v2 (tools/fetch-model.sh --model all-mpnet-base-v2)",
                texts=len(REAL_TEXTS), max_seq_length=st.max_seq_length,
                torch_version=torch.__version__, transformers_version=transformers.__version__,
                sentence_transformers_version=sentence_transformers.__version__,
                float64_max_abs_diff=float(np.abs(emb64 - emb).max()))
    with open(os.path.join(out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")
    print("real: %d texts, float32 vs float64 %.2e" % (len(REAL_TEXTS),
                                                       meta["float64_max_abs_diff"]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--real", nargs="?", const="", default=None)
    ap.add_argument("--case", action="append", choices=sorted(CASES))
    ap.add_argument("--out", default=GOLDEN)
    a = ap.parse_args()
    both = not a.small and a.real is None
    if a.small or both:
        write_small(a.out, a.case)
    if a.real is not None or both:
        cache = os.environ.get("CLATTN_MODEL_CACHE",
                               os.path.join(os.path.expanduser("~"), ".cache", "clattn"))
        write_real(a.out, a.real or os.path.join(cache, "all-mpnet-base-v2"))


if __name__ == "__main__":
    sys.exit(main())
