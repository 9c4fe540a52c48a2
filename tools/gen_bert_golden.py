#!/usr/bin/env python3
"""Writes small, randomly initialised Hugging Face BERT model folders and their reference outputs.

usage: ~/.cache/clattn/golden-venv/bin/python tools/gen_bert_golden.py [--out DIR]
           [--case NAME ...]

The venv is the one every generator runs from, made by tools/make-golden-venv.sh (torch,
transformers, sentence-transformers, numpy at its pinned versions; tests/golden/README.md). The
committed files were made with torch 1.13, transformers 4.40.2 and sentence-transformers 2.7.0:
the venv's versions give the same files but for the versions they record, config.json's
"torch_dtype" (now "dtype") and a few float32 errors in meta.json. No network: HF_HUB_OFFLINE is
set and every model is built from a BertConfig here, never downloaded. DIR defaults to
tests/golden/bert next to this script's parent; each case directory DIR/<case>/ is removed and
rewritten, and DIR/README.md is rewritten with the versions used (only when every case is
written: --case writes the cases named, and the error cases when gelu and single are among them).
Deterministic: float32 weights
drawn after torch.manual_seed(<fixed per-case seed>), torch.set_num_threads(1), eval() mode,
no_grad(); inputs drawn from numpy.random.RandomState(<same seed>).

Each reference case directory holds:

  config.json         exactly what BertConfig.save_pretrained writes (via model.save_pretrained)
  model.safetensors   model.save_pretrained(folder, safe_serialization=True): Hugging Face's own
                      tensor names and layout, float32 ("F32") tensors, header __metadata__
                      {"format": "pt"}. transformers 4.40 registers embeddings.position_ids and
                      embeddings.token_type_ids as non-persistent buffers, so neither is in the
                      file (meta "position_ids_in_file" records what was found). BertModel and
                      BertForPreTraining have a pooler (pooler.dense.*), which the file holds.
  input_ids.npy       int64 [B, N]; padded positions hold 0 (pad_token_id)
  token_type_ids.npy  int64 [B, N]; 0 for the first part of each row's real tokens, 1 for the
                      rest (a sentence pair), 0 at padding
  attention_mask.npy  int64 [B, N]; 1 = real token, 0 = padding, right padding
  last_hidden_state.npy  float32 [B, N, hidden]: BertModel.from_pretrained(folder) (the "bert."
                      prefix stripped by transformers for the prefixed case), .double(), eval(),
                      called with input_ids, token_type_ids and attention_mask; computed in
                      float64 from the stored float32 weights and rounded to float32 at the end.
                      Every position is kept: at padded positions it is whatever BERT computes
                      (padded queries still attend to the real keys).
  mean_pooled.npy     float32 [B, hidden]: sentence-transformers' masked mean, in float64:
                      sum(h * mask) / clamp(sum(mask), min=1e-9)
  mean_pooled_normalized.npy  float32 [B, hidden]: torch.nn.functional.normalize(mean, p=2,
                      dim=1, eps=1e-12) in float64
  cls_pooled.npy      float32 [B, hidden]: h[:, 0] (the hidden state, not the pooler output)
  meta.json           see below

Error cases (no reference arrays): bad_model_type (gelu's config.json with model_type "gpt2",
gelu's model.safetensors) and truncated (single's config.json, its model.safetensors cut in the
middle of the tensor data). Their meta.json has "kind": "bert_error" and "expect".

meta.json (kind "bert"): description, torch_version, transformers_version,
sentence_transformers_version, model_class (what was saved), hidden_size, num_layers, heads,
intermediate, hidden_act, layer_norm_eps, max_position_embeddings, type_vocab_size, vocab_size,
batch, seq, name_prefix ("" or "bert."), position_ids_in_file, token_type_ids_buffer_in_file,
pooler_in_file, extra_tensors (names in the file that are not part of the encoder/pooler and must
be ignored), tensors (every tensor in model.safetensors: dtype and shape), tolerance (max abs error
suggested for a float32 implementation, applied to every stored output), tolerance_rule,
float32_torch_max_abs_err (what PyTorch's own float32 forward pass is off by, per output),
numpy_check_max_abs_diff (independent float64 NumPy BERT vs transformers), pooling_check (the
sentence-transformers Pooling/Normalize modules vs the formulas above), arrays (file -> dtype,
shape).

Tolerance: tolerance = 1e-5 * max(1, max|last_hidden_state|), rounded up to one significant
digit. BERT's outputs are LayerNorm outputs whose magnitude is set by the random gamma/beta, and
float32 rounding error grows with that magnitude (relative precision ~6e-8 per operation, a few
hundred operations deep through 2 layers); 1e-5 relative leaves a margin of about 10x or more over
what PyTorch's own float32 forward pass achieves, which the script asserts (float32 error <=
tolerance / 4) for every stored output.

Cross-checks before writing: (1) every case with hidden_act gelu/gelu_new/relu (all of them) is
recomputed by an independent float64 NumPy BERT that reads model.safetensors with its own parser
(F32 and I64) and config.json, and must agree with transformers to 1e-10; (2) the pooled outputs
equal sentence-transformers' Pooling(mean) and Normalize modules run on the float64 hidden states;
(3) the weights reloaded by from_pretrained equal the ones that were saved.
"""
import argparse
import json
import math
import os
import re
import shutil
import struct

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402
import sentence_transformers  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import transformers  # noqa: E402
from sentence_transformers.models import Normalize, Pooling  # noqa: E402
from transformers import BertConfig, BertForPreTraining, BertModel  # noqa: E402

DEFAULT_OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                           "tests", "golden", "bert")
NUMPY_CHECK = 1e-10   # float64 NumPy BERT vs transformers in float64
INIT_STD = 0.2        # initializer_range: weights large enough that every part matters

CASES = [
    # name, seed, model class, config overrides, (B, N), lengths of the real tokens per row
    dict(name="gelu", seed=101, cls=BertModel, hidden=48, inter=96, act="gelu", eps=1e-12,
         batch=3, seq=9, lengths=[9, 6, 3],
         description="BertModel, exact (erf) GELU, layer_norm_eps 1e-12, two rows right-padded."),
    dict(name="gelu_new", seed=202, cls=BertModel, hidden=32, inter=128, act="gelu_new", eps=1e-5,
         batch=2, seq=12, lengths=[12, 7],
         description="BertModel, gelu_new (tanh approximation), layer_norm_eps 1e-5."),
    dict(name="relu", seed=303, cls=BertModel, hidden=64, inter=64, act="relu", eps=1e-12,
         batch=2, seq=5, lengths=[4, 5],
         description="BertModel, ReLU feed-forward, first row padded by one token."),
    dict(name="prefixed", seed=404, cls=BertForPreTraining, hidden=32, inter=64, act="gelu",
         eps=1e-12, batch=2, seq=8, lengths=[8, 5],
         description="BertForPreTraining saved as is: tensor names carry the 'bert.' prefix and the "
                     "file also holds bert.pooler.* and the cls.* heads (to be ignored); the "
                     "references are the bert submodule's last_hidden_state."),
    dict(name="single", seed=505, cls=BertModel, hidden=32, inter=64, act="gelu", eps=1e-12,
         batch=1, seq=1, lengths=[1],
         description="BertModel, one sequence of one token (B 1, N 1)."),
]
COMMON = dict(num_hidden_layers=2, num_attention_heads=4, vocab_size=100,
              max_position_embeddings=64, type_vocab_size=2, initializer_range=INIT_STD)


# ---------------------------------------------------------------------------------------------
# model construction and the transformers reference
# ---------------------------------------------------------------------------------------------

def make_config(case):
    return BertConfig(hidden_size=case["hidden"], intermediate_size=case["inter"],
                      hidden_act=case["act"], layer_norm_eps=case["eps"], **COMMON)


def randomise(model):
    """After HF's init (normal(0, initializer_range) weights, zero biases, LayerNorm 1/0), also
    draws every Linear bias and LayerNorm weight/bias so that a missing bias or LayerNorm shows."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.Linear) and m.bias is not None:
                m.bias.normal_(0.0, 0.1)
            elif isinstance(m, torch.nn.LayerNorm):
                m.weight.copy_(1.0 + 0.2 * torch.randn_like(m.weight))
                m.bias.normal_(0.0, 0.1)
        # BertForPreTraining: the MLM decoder bias is a separate parameter, zero by default.
        if hasattr(model, "cls"):
            model.cls.predictions.bias.normal_(0.0, 0.1)


def make_inputs(case, rng, vocab):
    B, N = case["batch"], case["seq"]
    lengths = case["lengths"]
    assert len(lengths) == B and max(lengths) == N and all(1 <= n <= N for n in lengths)
    ids = np.zeros((B, N), np.int64)
    types = np.zeros((B, N), np.int64)
    mask = np.zeros((B, N), np.int64)
    for b, n in enumerate(lengths):
        ids[b, :n] = rng.randint(1, vocab, size=n)
        mask[b, :n] = 1
        first = (n + 1) // 2          # sentence pair: the second part has token type 1
        types[b, first:n] = 1
    if B > 1:
        assert (mask == 0).any(), "at least one row must be padded"
        assert (types == 1).any()
    return ids, types, mask


def hf_forward(model, ids, types, mask):
    with torch.no_grad():
        out = model(input_ids=torch.from_numpy(ids), token_type_ids=torch.from_numpy(types),
                    attention_mask=torch.from_numpy(mask))
    return out.last_hidden_state


def pool(h, mask):
    """float64 pooling as the brief (and sentence-transformers 2.7) defines it."""
    m = torch.from_numpy(mask).to(h.dtype).unsqueeze(-1)
    mean = (h * m).sum(1) / torch.clamp(m.sum(1), min=1e-9)
    return mean, F.normalize(mean, p=2, dim=1, eps=1e-12), h[:, 0]


# ---------------------------------------------------------------------------------------------
# independent float64 NumPy BERT
# ---------------------------------------------------------------------------------------------

def read_safetensors(path):
    """Own parser: returns ({name: array (F32 -> float64, I64 -> int64)}, {name: (dtype, shape)},
    metadata). Strict: data offsets contiguous from 0 to the end of the file."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    assert 8 + n <= len(blob), n
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    metadata = header.pop("__metadata__", None)
    data = blob[8 + n:]
    kinds = {"F32": ("<f4", 4), "I64": ("<i8", 8), "F16": ("<f2", 2)}
    tensors, info, pos = {}, {}, 0
    for name, t in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        begin, end = t["data_offsets"]
        np_dt, size = kinds[t["dtype"]]
        count = int(np.prod(t["shape"], dtype=np.int64))
        assert begin == pos and end - begin == count * size, (name, t)
        a = np.frombuffer(data[begin:end], np_dt).reshape(t["shape"])
        tensors[name] = a.astype(np.float64) if t["dtype"] != "I64" else a.astype(np.int64)
        info[name] = (t["dtype"], list(t["shape"]))
        pos = end
    assert pos == len(data), "trailing bytes after the last tensor"
    return tensors, info, metadata


_erf = np.frompyfunc(math.erf, 1, 1)


def np_act(x, name):
    if name == "gelu":
        return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)).astype(np.float64))
    if name == "gelu_new":
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))
    if name == "relu":
        return np.maximum(x, 0.0)
    raise ValueError(name)


def np_layer_norm(x, w, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def numpy_bert(folder, ids, types, mask):
    """last_hidden_state [B,N,H] in float64 from config.json and model.safetensors only."""
    with open(os.path.join(folder, "config.json")) as f:
        cfg = json.load(f)
    t, _, _ = read_safetensors(os.path.join(folder, "model.safetensors"))
    pre = "bert." if "bert.embeddings.word_embeddings.weight" in t else ""

    def W(name):
        return t[pre + name]

    H, nh, eps = cfg["hidden_size"], cfg["num_attention_heads"], cfg["layer_norm_eps"]
    D = H // nh
    B, N = ids.shape
    x = (W("embeddings.word_embeddings.weight")[ids]
         + W("embeddings.position_embeddings.weight")[np.arange(N)][None]
         + W("embeddings.token_type_embeddings.weight")[types])
    x = np_layer_norm(x, W("embeddings.LayerNorm.weight"), W("embeddings.LayerNorm.bias"), eps)
    # HF: extended mask = (1 - mask) * finfo(dtype).min, added to the scaled scores
    add = (1.0 - mask.astype(np.float64))[:, None, None, :] * np.finfo(np.float64).min

    def lin(v, name):
        return v @ W(name + ".weight").T + W(name + ".bias")

    def heads(v):
        return v.reshape(B, N, nh, D).transpose(0, 2, 1, 3)

    for i in range(cfg["num_hidden_layers"]):
        p = "encoder.layer.%d." % i
        q = heads(lin(x, p + "attention.self.query"))
        k = heads(lin(x, p + "attention.self.key"))
        v = heads(lin(x, p + "attention.self.value"))
        s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(D) + add
        s = np.exp(s - s.max(-1, keepdims=True))
        s = s / s.sum(-1, keepdims=True)
        ctx = (s @ v).transpose(0, 2, 1, 3).reshape(B, N, H)
        x = np_layer_norm(lin(ctx, p + "attention.output.dense") + x,
                          W(p + "attention.output.LayerNorm.weight"),
                          W(p + "attention.output.LayerNorm.bias"), eps)
        f = np_act(lin(x, p + "intermediate.dense"), cfg["hidden_act"])
        x = np_layer_norm(lin(f, p + "output.dense") + x, W(p + "output.LayerNorm.weight"),
                          W(p + "output.LayerNorm.bias"), eps)
    return x


# ---------------------------------------------------------------------------------------------
# writing
# ---------------------------------------------------------------------------------------------

def write_meta(path, meta):
    text = json.dumps(meta, indent=2)
    text = re.sub(r'("shape": )\[([\d,\s]*)\]',
                  lambda m: m.group(1) + "[" + ", ".join(m.group(2).replace(",", " ").split()) + "]",
                  text)
    with open(path, "w") as f:
        f.write(text + "\n")


def round_up_1sig(x):
    e = math.floor(math.log10(x))
    m = math.ceil(x / 10 ** e - 1e-9)
    return float("%de%d" % (m, e)) if m < 10 else float("1e%d" % (e + 1))


def gen_case(case, root):
    torch.manual_seed(case["seed"])
    rng = np.random.RandomState(case["seed"])
    config = make_config(case)
    model = case["cls"](config)
    randomise(model)
    model.eval()
    bert = model.bert if hasattr(model, "bert") else model

    d = os.path.join(root, case["name"])
    if os.path.isdir(d):
        shutil.rmtree(d)
    model.save_pretrained(d, safe_serialization=True)
    files = sorted(os.listdir(d))
    assert files == ["config.json", "model.safetensors"], files

    # (3) reload the folder as transformers would and check it holds the saved weights
    ref = BertModel.from_pretrained(d)
    ref.eval()
    saved = bert.state_dict()
    for k, v in ref.state_dict().items():
        assert torch.equal(v, saved[k]), k
    ids, types, mask = make_inputs(case, rng, config.vocab_size)

    h32 = hf_forward(ref, ids, types, mask)                 # float32 PyTorch, for the tolerance
    ref.double()
    h = hf_forward(ref, ids, types, mask)                   # float64 reference
    assert h.dtype == torch.float64
    mean, mean_n, cls_p = pool(h, mask)

    # (2) sentence-transformers' own modules on the float64 hidden states
    feats = {"token_embeddings": h, "attention_mask": torch.from_numpy(mask)}
    st = Pooling(config.hidden_size, pooling_mode="mean")(dict(feats))["sentence_embedding"]
    st_n = Normalize()({"sentence_embedding": st})["sentence_embedding"]
    pool_diff = max(float((st - mean).abs().max()), float((st_n - mean_n).abs().max()))
    assert st.dtype == torch.float64 and pool_diff <= 1e-15, pool_diff

    # (1) independent NumPy BERT
    h_np = numpy_bert(d, ids, types, mask)
    np_diff = float(np.abs(h_np - h.numpy()).max())
    assert np_diff <= NUMPY_CHECK, (case["name"], np_diff)

    outs = {"last_hidden_state": h, "mean_pooled": mean, "mean_pooled_normalized": mean_n,
            "cls_pooled": cls_p}
    m32, mn32, c32 = pool(h32.double(), mask)
    outs32 = {"last_hidden_state": h32.double(), "mean_pooled": m32,
              "mean_pooled_normalized": mn32, "cls_pooled": c32}
    max_abs = float(h.abs().max())
    tol = round_up_1sig(1e-5 * max(1.0, max_abs))
    err32 = {k: float((outs32[k] - outs[k]).abs().max()) for k in outs}
    assert max(err32.values()) <= tol / 4, (case["name"], err32, tol)

    _, info, st_meta = read_safetensors(os.path.join(d, "model.safetensors"))
    prefix = "bert." if case["cls"] is not BertModel else ""
    assert all(n.startswith(prefix) or n.startswith("cls.") for n in info)
    core = re.compile(r"^%s(embeddings|encoder|pooler)\." % re.escape(prefix))
    extra = sorted(n for n in info if not core.match(n))

    arrays = {"input_ids": ids, "token_type_ids": types, "attention_mask": mask}
    arrays.update({k: np.ascontiguousarray(v.numpy().astype(np.float32)) for k, v in outs.items()})
    meta = {
        "kind": "bert",
        "description": case["description"],
        "torch_version": torch.__version__,
        "transformers_version": transformers.__version__,
        "sentence_transformers_version": sentence_transformers.__version__,
        "model_class": case["cls"].__name__,
        "hidden_size": config.hidden_size,
        "num_layers": config.num_hidden_layers,
        "heads": config.num_attention_heads,
        "intermediate": config.intermediate_size,
        "hidden_act": config.hidden_act,
        "layer_norm_eps": config.layer_norm_eps,
        "max_position_embeddings": config.max_position_embeddings,
        "type_vocab_size": config.type_vocab_size,
        "vocab_size": config.vocab_size,
        "batch": case["batch"],
        "seq": case["seq"],
        "name_prefix": prefix,
        "position_ids_in_file": (prefix + "embeddings.position_ids") in info,
        "token_type_ids_buffer_in_file": (prefix + "embeddings.token_type_ids") in info,
        "pooler_in_file": (prefix + "pooler.dense.weight") in info,
        "extra_tensors": extra,
        "safetensors_metadata": st_meta,
        "tensors": {n: {"dtype": dt, "shape": sh} for n, (dt, sh) in sorted(info.items())},
        "tolerance": tol,
        "tolerance_rule": "1e-5 * max(1, max|last_hidden_state|) rounded up to one significant "
                          "digit; applies to every stored float output",
        "max_abs_last_hidden_state": max_abs,
        "float32_torch_max_abs_err": err32,
        "numpy_check_max_abs_diff": np_diff,
        "pooling_check_max_abs_diff": pool_diff,
        "arrays": {},
    }
    for k in sorted(arrays):
        a = arrays[k]
        assert a.flags["C_CONTIGUOUS"] and a.dtype in (np.float32, np.int64)
        np.save(os.path.join(d, k + ".npy"), a)
        meta["arrays"][k + ".npy"] = {"dtype": str(a.dtype), "shape": list(a.shape)}
    write_meta(os.path.join(d, "meta.json"), meta)
    print("%-10s B=%d N=%-2d hidden=%-2d act=%-8s tol=%g f32err=%.2g numpy=%.2g pooler=%s "
          "position_ids=%s extra=%d" % (case["name"], case["batch"], case["seq"],
                                        config.hidden_size, config.hidden_act, tol,
                                        max(err32.values()), np_diff, meta["pooler_in_file"],
                                        meta["position_ids_in_file"], len(extra)))
    return meta


def gen_errors(root):
    # bad_model_type: gelu's folder with model_type "gpt2" in config.json
    d = os.path.join(root, "bad_model_type")
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    src = os.path.join(root, "gelu")
    with open(os.path.join(src, "config.json")) as f:
        text = f.read()
    new = text.replace('"model_type": "bert"', '"model_type": "gpt2"')
    assert new != text and json.loads(new)["model_type"] == "gpt2"
    with open(os.path.join(d, "config.json"), "w") as f:
        f.write(new)
    shutil.copyfile(os.path.join(src, "model.safetensors"), os.path.join(d, "model.safetensors"))
    write_meta(os.path.join(d, "meta.json"), {
        "kind": "bert_error",
        "description": "gelu's config.json and model.safetensors, model_type changed to \"gpt2\".",
        "expect": "loading fails: model_type is not a BERT-family type"})

    # truncated: single's folder with model.safetensors cut in the middle of the tensor data
    d = os.path.join(root, "truncated")
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    src = os.path.join(root, "single")
    shutil.copyfile(os.path.join(src, "config.json"), os.path.join(d, "config.json"))
    with open(os.path.join(src, "model.safetensors"), "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    data_len = len(blob) - 8 - n
    cut = 8 + n + data_len // 2
    with open(os.path.join(d, "model.safetensors"), "wb") as f:
        f.write(blob[:cut])
    write_meta(os.path.join(d, "meta.json"), {
        "kind": "bert_error",
        "description": "single's config.json; model.safetensors is single's file cut after %d of "
                       "its %d bytes (header intact, %d of %d data bytes)."
                       % (cut, len(blob), data_len // 2, data_len),
        "expect": "loading fails: tensor data offsets run past the end of the file",
        "original_size": len(blob), "truncated_size": cut})
    print("bad_model_type, truncated (cut at %d of %d bytes)" % (cut, len(blob)))


def write_readme(root, metas):
    rows = "\n".join("| `%s` | %s | %s | %d | %d | %d | %d | %s | %s | %g |" % (
        m["name"], m["model_class"], m["hidden_act"], m["hidden_size"], m["intermediate"],
        m["batch"], m["seq"], "yes" if m["pooler_in_file"] else "no",
        "yes" if m["position_ids_in_file"] else "no", m["tolerance"]) for m in metas)
    text = """# Hugging Face BERT golden folders

Produced by `tools/gen_bert_golden.py` (run from the venv of `tools/make-golden-venv.sh`; its
docstring gives the full format) with torch %s, transformers %s, sentence-transformers %s and
numpy %s, offline: each
case is a `BertConfig` (2 layers, 4 heads, vocab 100, max_position_embeddings 64,
type_vocab_size 2, initializer_range %g, then every Linear bias and LayerNorm weight/bias
re-drawn) built under a fixed seed and written by `save_pretrained(folder,
safe_serialization=True)`, so `config.json` and `model.safetensors` are exactly what
transformers writes (float32; `embeddings.position_ids` is a non-persistent buffer in this
version and is not in the files). The folder is reloaded with `BertModel.from_pretrained`,
converted to float64 (`.double()`, eval) and run on the stored `input_ids`, `token_type_ids`
and `attention_mask` (int64, right padding); `last_hidden_state` (every position, padded ones
included), sentence-transformers' masked `mean_pooled`, its L2 `mean_pooled_normalized` and
`cls_pooled` (`h[:, 0]`) are computed in float64 and stored as float32. Every case is checked
against an independent float64 NumPy BERT reading the files with its own parser (agreement
within 1e-10, recorded in `meta.json` as `numpy_check_max_abs_diff`) and against
sentence-transformers' Pooling/Normalize modules; `meta.json`'s `tolerance` is
1e-5 * max(1, max|last_hidden_state|) rounded up, at least 4x what PyTorch's own float32
forward pass is off by (`float32_torch_max_abs_err`). `bad_model_type` (model_type "gpt2")
and `truncated` (model.safetensors cut in the middle of the data) are for error tests.

| case | saved class | act | hidden | inter | B | N | pooler in file | position_ids in file | tolerance |
|---|---|---|---|---|---|---|---|---|---|
%s
""" % (torch.__version__, transformers.__version__, sentence_transformers.__version__,
       np.__version__, INIT_STD, rows)
    with open(os.path.join(root, "README.md"), "w") as f:
        f.write(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=DEFAULT_OUT)
    ap.add_argument("--case", action="append", choices=[c["name"] for c in CASES])
    args = ap.parse_args()
    torch.set_num_threads(1)
    transformers.logging.set_verbosity_error()
    os.makedirs(args.out, exist_ok=True)
    metas = []
    for case in CASES:
        if args.case and case["name"] not in args.case:
            continue
        m = gen_case(case, args.out)
        m["name"] = case["name"]
        metas.append(m)
    if not args.case or {"gelu", "single"} <= set(args.case):
        gen_errors(args.out)
    if not args.case:
        write_readme(args.out, metas)


if __name__ == "__main__":
    main()
