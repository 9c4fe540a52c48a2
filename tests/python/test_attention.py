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


def sdpa_meta(golden):
    return json.loads((golden / "python" / "cases.json").read_text())


def sdpa_cases(golden):
    return sdpa_meta(golden)["cases"]


@pytest.fixture(scope="module")
def sdpa_arrays(golden):
    with np.load(golden / "python" / "sdpa.npz") as data:
        return {name: data[name] for name in data.files}


@pytest.mark.parametrize("name", sorted(sdpa_cases(GOLDEN)))
def test_sdpa(name, golden, sdpa_arrays):
    """Every mask kind, leading dimensions that broadcast (5-D, 6-D, ranks that differ, GQA),
    float64 and float16 inputs (the result in their dtype), zero-size inputs, scales that are 0
    in float32 (0.0, 1e-50, -1e-50, 1e-46: the C API's 0 means the default): PyTorch's shape,
    dtype and values."""
    kwargs = dict(sdpa_cases(golden)[name])
    mask_kind = kwargs.pop("mask")
    tolerance = kwargs.pop("tolerance", TOLERANCE)
    a = {key.split(".", 1)[1]: value for key, value in sdpa_arrays.items()
         if key.split(".", 1)[0] == name}
    mask = a.get("mask")
    if mask_kind == "bool":
        assert mask.dtype == np.bool_  # PyTorch's polarity: True = attend
    got = clattn.sdpa(a["q"], a["k"], a["v"], attn_mask=mask, **kwargs)
    assert got.shape == a["out"].shape and got.dtype == a["q"].dtype
    if got.size:
        assert np.abs(got.astype(np.float64) - a["out"]).max() <= tolerance


@pytest.mark.parametrize("name", sorted(sdpa_meta(GOLDEN)["refused"]))
def test_sdpa_refused(name, golden):
    """The shapes PyTorch refuses (its error is in the golden): a ValueError naming them."""
    case = sdpa_meta(golden)["refused"][name]
    q, k, v = (np.zeros(case[x], np.float32) for x in ("query", "key", "value"))
    mask = None if case["mask"] is None else np.zeros(case["mask"], np.float32)
    with pytest.raises(ValueError) as info:
        clattn.sdpa(q, k, v, attn_mask=mask, **case["kwargs"])
    message = str(info.value)
    named = [tuple(case["mask"])] if mask is not None else [q.shape, k.shape, v.shape]
    assert any(str(shape) in message for shape in named), message


def test_sdpa_inputs(sdpa_arrays):
    q, k, v = (sdpa_arrays[f"none.{x}"] for x in "qkv")
    want = clattn.sdpa(q, k, v)
    # float64 gives float64 (computed in float32: the same values)
    got64 = clattn.sdpa(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64))
    assert got64.dtype == np.float64 and got64.astype(np.float32).tobytes() == want.tobytes()
    # non-contiguous inputs are converted
    k_strided = np.asfortranarray(k)
    assert clattn.sdpa(q, k_strided, v).tobytes() == want.tobytes()
    # lists of floats are float64, as np.asarray makes them
    assert clattn.sdpa(q.tolist(), k.tolist(), v.tolist()).dtype == np.float64
    with pytest.raises(ValueError, match="attn_mask and is_causal"):
        clattn.sdpa(q, k, v, attn_mask=np.ones((5, 7), bool), is_causal=True)
    with pytest.raises(ValueError, match=r"attn_mask of shape \(4, 7\)"):
        clattn.sdpa(q, k, v, attn_mask=np.ones((4, 7), bool))
    with pytest.raises(TypeError, match="query"):
        clattn.sdpa("q", k, v)
    # integers and bools are refused, as PyTorch refuses them
    for bad in (q.astype(np.int64), q > 0, q.astype(np.complex64)):
        with pytest.raises(TypeError, match=f"query must be .*not dtype {bad.dtype}"):
            clattn.sdpa(bad, k, v)
    with pytest.raises(TypeError, match="value must be"):
        clattn.sdpa(q, k, np.ones(v.shape, np.int32))
    with pytest.raises(TypeError, match="attn_mask must be bool or floating"):
        clattn.sdpa(q, k, v, attn_mask=np.ones((5, 7), np.int64))
    with pytest.raises(ValueError, match=r"query \(2, 3, 5, 8\), key \(2, 3, 7, 4\)"):
        clattn.sdpa(q, k[..., :4], v)  # d_k of q and k differ
    # a scale the device's float32 cannot hold: a ValueError naming it (not the library's
    # clattn.Error); one that rounds to 0 there is PyTorch's 0 (test_sdpa's scale_* cases)
    for scale in (10 ** 400, 1e39, -1e39, np.float64(1e39), np.inf, -np.inf, np.nan):
        with pytest.raises(ValueError, match="scale must be finite in float32"):
            clattn.sdpa(q, k, v, scale=scale)
    for scale in ("0.5", True, [0.5]):
        with pytest.raises(TypeError, match="scale"):
            clattn.sdpa(q, k, v, scale=scale)
    assert clattn.sdpa(q, k, v, scale=np.float16(0.25)).tobytes() == \
        clattn.sdpa(q, k, v, scale=0.25).tobytes()


@pytest.mark.parametrize("call", sdpa_meta(GOLDEN)["dtypes"],
                         ids=lambda c: "-".join(str(c[x]) for x in ("query", "key", "value",
                                                                     "mask")))
def test_sdpa_dtypes(call):
    """The dtypes PyTorch takes together (one for query, key and value; a floating mask of
    float32 or the query's dtype) give its result dtype; the others a TypeError naming them."""
    L, S, E, Ev = 3, 4, 2, 5
    q, k, v = (np.ones(shape, call[x]) for shape, x in (((L, E), "query"), ((S, E), "key"),
                                                         ((S, Ev), "value")))
    mask = None if call["mask"] is None else np.ones((L, S), call["mask"])
    if "out" in call:
        got = clattn.sdpa(q, k, v, attn_mask=mask)
        assert got.dtype == call["out"]
        assert np.abs(got.astype(np.float64) - 1).max() == 0  # every row of value is ones
    else:
        with pytest.raises(TypeError) as info:
            clattn.sdpa(q, k, v, attn_mask=mask)
        named = {call[x] for x in ("query", "key", "value")}
        named |= {call["mask"]} if "attn_mask" in str(info.value) else set()
        assert all(dtype in str(info.value) for dtype in named), str(info.value)


def test_sdpa_shapes_without_the_device():
    """The broadcasting plan alone: the issue's two 5-D calls."""
    from clattn import _sdpa_shapes
    shape = (2, 1, 1, 4, 8), (1, 2, 1, 4, 8), (1, 2, 1, 4, 8)
    assert _sdpa_shapes.plan(*shape, None, False).out_shape == (2, 2, 1, 4, 8)
    with pytest.raises(ValueError, match=r"query \(2, 3, 1, 4, 8\) and key \(3, 2, 1, 4, 8\)"):
        _sdpa_shapes.plan((2, 3, 1, 4, 8), (3, 2, 1, 4, 8), (3, 2, 1, 4, 8), None, False)


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
