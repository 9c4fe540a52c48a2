"""clattn.sdpa against PyTorch's scaled_dot_product_attention (tests/golden/python, by
tools/gen_python_golden.py), MultiheadAttention against nn.MultiheadAttention and
Encoder.from_file against nn.TransformerEncoder (tests/golden/mha_*, enc_*, by
tools/gen_golden.py): committed files, so no PyTorch is needed here."""

import json

import numpy as np
import pytest

import clattn
from conftest import GOLDEN

TOLERANCE = 1e-5


def sdpa_cases(golden):
    meta = json.loads((golden / "python" / "cases.json").read_text())
    return meta["cases"]


@pytest.fixture(scope="module")
def sdpa_arrays(golden):
    with np.load(golden / "python" / "sdpa.npz") as data:
        return {name: data[name] for name in data.files}


@pytest.mark.parametrize("name", sorted(sdpa_cases(GOLDEN)))
def test_sdpa(name, golden, sdpa_arrays):
    kwargs = dict(sdpa_cases(golden)[name])
    mask_kind = kwargs.pop("mask")
    a = {key.split(".", 1)[1]: value for key, value in sdpa_arrays.items()
         if key.split(".", 1)[0] == name}
    mask = a.get("mask")
    if mask_kind == "bool":
        assert mask.dtype == np.bool_  # PyTorch's polarity: True = attend
    got = clattn.sdpa(a["q"], a["k"], a["v"], attn_mask=mask, **kwargs)
    assert got.shape == a["out"].shape and got.dtype == np.float32
    assert np.abs(got - a["out"]).max() <= TOLERANCE


def test_sdpa_inputs(sdpa_arrays):
    q, k, v = (sdpa_arrays[f"none.{x}"] for x in "qkv")
    want = clattn.sdpa(q, k, v)
    # float64 and non-contiguous inputs are converted
    assert clattn.sdpa(q.astype(np.float64), k, v).tobytes() == want.tobytes()
    k_strided = np.asfortranarray(k)
    assert clattn.sdpa(q, k_strided, v).tobytes() == want.tobytes()
    with pytest.raises(ValueError, match="attn_mask and is_causal"):
        clattn.sdpa(q, k, v, attn_mask=np.ones((5, 7), bool), is_causal=True)
    with pytest.raises(ValueError, match="attn_mask of shape"):
        clattn.sdpa(q, k, v, attn_mask=np.ones((4, 7), bool))
    with pytest.raises(TypeError, match="query"):
        clattn.sdpa("q", k, v)
    with pytest.raises(clattn.Error, match="sdpa"):
        clattn.sdpa(q, k[..., :4], v)  # d_k of q and k differ: the library's message


def mha_case_names(golden):
    return sorted(p.parent.name for p in golden.glob("mha_*/meta.json")
                  if json.loads(p.read_text())["kind"] == "mha")


@pytest.mark.parametrize("name", mha_case_names(GOLDEN))
def test_multihead_attention(name, golden):
    folder = golden / name
    meta = json.loads((folder / "meta.json").read_text())
    arrays = {f[:-4]: np.load(folder / f) for f in meta["arrays"]}
    layer = clattn.MultiheadAttention(meta["embed_dim"], meta["num_heads"], bias=meta["bias"],
                                      kdim=meta["kdim"], vdim=meta["vdim"])
    layer.load_state_dict({n: arrays[n] for n in (
        "in_proj_weight", "q_proj_weight", "k_proj_weight", "v_proj_weight", "in_proj_bias",
        "out_proj_weight", "out_proj_bias") if n in arrays})
    query = arrays["query"]
    key = None if meta["self_attention"] else arrays["key"]
    value = None if meta["self_attention"] else arrays["value"]
    out, weights = layer(query, key, value, key_padding_mask=arrays.get("key_padding_mask"),
                         attn_mask=arrays.get("attn_mask"), is_causal=meta["causal"],
                         need_weights=meta["need_weights"],
                         average_attn_weights=meta["average_attn_weights"])
    tolerance = meta["tolerance"]
    assert np.abs(out - arrays["out"]).max() <= tolerance
    if meta["need_weights"]:
        assert np.abs(weights - arrays["attn_weights"]).max() <= tolerance


def encoder_case_names(golden):
    names = []
    for p in golden.glob("enc_*/meta.json"):
        meta = json.loads(p.read_text())
        if meta["kind"] == "encoder" and meta.get("module") == "TransformerEncoder":
            names.append(p.parent.name)
    return sorted(names)


@pytest.mark.parametrize("name", encoder_case_names(GOLDEN))
def test_encoder_from_file(name, golden):
    folder = golden / name
    meta = json.loads((folder / "meta.json").read_text())
    encoder = clattn.Encoder.from_file(folder / meta["model"])
    padding = (np.load(folder / "key_padding_mask.npy") if meta["key_padding_mask"]
               else None)
    if meta["input"] == "tokens":
        out = encoder.forward_tokens(np.load(folder / "tokens.npy"),
                                     src_key_padding_mask=padding, is_causal=meta["causal"])
    else:
        out = encoder(np.load(folder / "input.npy"), src_key_padding_mask=padding,
                      is_causal=meta["causal"])
    assert np.abs(out - np.load(folder / "out.npy")).max() <= meta["tolerance"]
