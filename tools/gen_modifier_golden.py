#!/usr/bin/env python3
"""Golden files for the attention score modifiers (clattn_sdpa's ALiBi, relative position bias,
sliding window and soft-capping; include/clattn/attention.h) and rotary embeddings (RoPE),
computed in float64 with PyTorch.

usage: ~/.cache/clattn/golden-venv/bin/python tools/gen_modifier_golden.py [--out DIR]
(the venv of tools/make-golden-venv.sh, from which every generator runs: tests/golden/README.md)

Writes one directory per case under DIR (default tests/golden/modifiers), rewriting it, and the
ALiBi slopes of BLOOM's build_alibi_tensor for a few head counts (alibi_slopes_H<h>.npy).
Deterministic: torch.manual_seed per case, inputs drawn in float32 and the reference computed on
their float64 values:

    q, k = rope(q), rope(k)                          rotary embeddings: transformers' rotate_half
                                                     (GPT-NeoX, Llama) or GPT-J's
                                                     rotate_every_two, on the first rotary_dim
                                                     channels, positions from the offsets
    s = (q · scale) kᵀ                               scale = 1/sqrt(d)
    s = c · tanh(s / c)                              softcap c
    s = s - m_h·|i - j|   (causal: - m_h·(i - j))    alibi_slopes [H] (float32 values)
    s = s + table[bucket(j - i), h]                  relative_bias [num_buckets, H]; the bucket
                                                     exactly as transformers' MPNet computes it
    s = -inf where |i - j| > w/2                     window w
    then the masks (bool attn_mask: -inf where true; additive: added; key_padding_mask bool;
    causal: -inf where j > i), a "safe" softmax (a row with every key masked gives zeros) and
    out = P·v.

Case directory: meta.json {"description", "torch_version", "tolerance", "causal", "window",
"softcap", "relative_max_distance", "attn_mask" (null | "bool" | "additive"), "rope" (null |
{"layout": "half" | "interleaved", "theta", "rotary_dim", "query_offset", "key_offset"}),
"key_padding_mask" (null | "bool"), "arrays" {name: shape}}; q.npy [B,H,Nq,d], k.npy [B,H,Nk,d],
v.npy [B,H,Nk,d], out.npy [B,H,Nq,d], and when used alibi_slopes.npy [H],
relative_bias.npy [num_buckets, H], attn_mask.npy [Nq, Nk] (0/1 or additive, float32),
key_padding_mask.npy [B, Nk] (0/1 float32), weights.npy [B,H,Nq,Nk] (the probabilities; small
cases only). All float32, C order.

Cases "mha_*" are the attention layer (nn.MultiheadAttention's maths, batch_first, self-attention)
with the same modifiers: x.npy [B, N, E], in_proj_weight.npy [3E, E], in_proj_bias.npy [3E],
out_proj_weight.npy [E, E], out_proj_bias.npy [E], out.npy [B, N, E]; meta.json adds
"num_heads"; q, k, v, weights are not stored.
"""
import argparse
import json
import math
import os
import shutil

import numpy as np
import torch

TOL = 1e-5


def bloom_alibi_slopes(num_heads):
    """BLOOM's build_alibi_tensor slopes (transformers.models.bloom.modeling_bloom), float32."""
    closest_power_of_2 = 2 ** math.floor(math.log2(num_heads))
    base = torch.tensor(2 ** (-(2 ** -(math.log2(closest_power_of_2) - 3))), dtype=torch.float32)
    powers = torch.arange(1, 1 + closest_power_of_2, dtype=torch.int32)
    slopes = torch.pow(base, powers)
    if closest_power_of_2 != num_heads:
        extra_base = torch.tensor(2 ** (-(2 ** -(math.log2(2 * closest_power_of_2) - 3))),
                                  dtype=torch.float32)
        num_remaining_heads = min(closest_power_of_2, num_heads - closest_power_of_2)
        extra_powers = torch.arange(1, 1 + 2 * num_remaining_heads, 2, dtype=torch.int32)
        slopes = torch.cat([slopes, torch.pow(extra_base, extra_powers)], dim=0)
    return slopes


def relative_position_bucket(relative_position, num_buckets=32, max_distance=128):
    """transformers' MPNetAttention relative_position_bucket (= T5's, bidirectional=True)."""
    ret = 0
    n = -relative_position
    num_buckets //= 2
    ret += (n < 0).to(torch.long) * num_buckets
    n = torch.abs(n)
    max_exact = num_buckets // 2
    is_small = n < max_exact
    val_if_large = max_exact + (
        torch.log(n.float() / max_exact) / math.log(max_distance / max_exact)
        * (num_buckets - max_exact)).to(torch.long)
    val_if_large = torch.min(val_if_large, torch.full_like(val_if_large, num_buckets - 1))
    ret += torch.where(is_small, n, val_if_large)
    return ret


def rope(x, r, offset):
    """Rotary embeddings in float64 on x [B, H, N, d], positions offset + n (r: the case's
    "rope" dict); transformers' rotate_half layout or GPT-J's rotate_every_two."""
    n, rot = x.shape[2], r["rotary_dim"]
    pos = torch.arange(offset, offset + n, dtype=torch.float64)
    inv_freq = 1.0 / (r["theta"] ** (torch.arange(0, rot, 2, dtype=torch.float64) / rot))
    angle = pos.view(n, 1) * inv_freq.view(1, rot // 2)            # [N, rot/2]
    xr, rest = x[..., :rot], x[..., rot:]
    if r["layout"] == "half":
        cos = torch.cat([angle.cos(), angle.cos()], -1)
        sin = torch.cat([angle.sin(), angle.sin()], -1)
        x1, x2 = xr[..., :rot // 2], xr[..., rot // 2:]
        rotated = xr * cos + torch.cat([-x2, x1], -1) * sin        # rotate_half
    else:
        cos = angle.cos().repeat_interleave(2, -1)
        sin = angle.sin().repeat_interleave(2, -1)
        x1, x2 = xr[..., ::2], xr[..., 1::2]
        rotated = xr * cos + torch.stack((-x2, x1), -1).flatten(-2) * sin  # rotate_every_two
    return torch.cat([rotated, rest], -1)


def reference(q, k, v, c):
    """float64 attention with the case's modifiers and masks; returns (out, weights)."""
    B, H, Nq, d = q.shape
    Nk = k.shape[2]
    q, k, v = q.double(), k.double(), v.double()
    if c.get("rope"):
        q = rope(q, c["rope"], c["rope"]["query_offset"])
        k = rope(k, c["rope"], c["rope"]["key_offset"])
    s = (q * (1.0 / math.sqrt(d))) @ k.transpose(-1, -2)          # [B, H, Nq, Nk]
    i = torch.arange(Nq).view(Nq, 1)
    j = torch.arange(Nk).view(1, Nk)
    if c.get("softcap"):
        s = c["softcap"] * torch.tanh(s / c["softcap"])
    if "alibi_slopes" in c:
        m = c["alibi_slopes"].double().view(1, H, 1, 1)
        dist = (i - j).double() if c["causal"] else (i - j).abs().double()
        s = s - m * dist
    if "relative_bias" in c:
        table = c["relative_bias"].double()                         # [num_buckets, H]
        buckets = relative_position_bucket(j - i, table.shape[0], c["relative_max_distance"])
        s = s + table[buckets].permute(2, 0, 1).unsqueeze(0)        # [1, H, Nq, Nk]
    ignore = torch.zeros(B, H, Nq, Nk, dtype=torch.bool)
    if c.get("window"):
        ignore |= ((i - j).abs() > c["window"] // 2).view(1, 1, Nq, Nk)
    if c["causal"]:
        ignore |= (j > i).view(1, 1, Nq, Nk)
    if c.get("attn_mask") == "bool":
        ignore |= (c["attn_mask_array"] != 0).view(1, 1, Nq, Nk)
    elif c.get("attn_mask") == "additive":
        s = s + c["attn_mask_array"].double().view(1, 1, Nq, Nk)
    if c.get("key_padding_mask") == "bool":
        ignore |= (c["key_padding_mask_array"] != 0).view(B, 1, 1, Nk)
    s = s.masked_fill(ignore, -math.inf)
    row_max = s.amax(-1, keepdim=True)
    dead = row_max == -math.inf
    e = torch.exp(s - torch.where(dead, torch.zeros_like(row_max), row_max))
    total = e.sum(-1, keepdim=True)
    p = torch.where(dead, torch.zeros_like(e), e / torch.where(dead, torch.ones_like(total), total))
    return p @ v, p


def case(out_dir, name, description, seed, B, H, Nq, Nk, d, causal=False, alibi=False,
         relative=None, window=0, softcap=0.0, attn_mask=None, key_padding=False, q_gain=1.0,
         weights=True, rope_params=None):
    torch.manual_seed(seed)
    q = (torch.rand(B, H, Nq, d) * 2 - 1) * q_gain
    k = torch.rand(B, H, Nk, d) * 2 - 1
    v = torch.rand(B, H, Nk, d) * 2 - 1
    c = {"causal": causal, "window": window, "softcap": softcap, "relative_max_distance": 0,
         "attn_mask": attn_mask, "key_padding_mask": "bool" if key_padding else None,
         "rope": rope_params}
    arrays = {"q": q, "k": k, "v": v}
    if alibi:
        c["alibi_slopes"] = arrays["alibi_slopes"] = bloom_alibi_slopes(H)
    if relative:
        num_buckets, max_distance = relative
        c["relative_bias"] = arrays["relative_bias"] = torch.randn(num_buckets, H)
        c["relative_max_distance"] = max_distance
    if attn_mask == "bool":
        c["attn_mask_array"] = arrays["attn_mask"] = (torch.rand(Nq, Nk) < 0.2).float()
    elif attn_mask == "additive":
        c["attn_mask_array"] = arrays["attn_mask"] = torch.randn(Nq, Nk)
    if key_padding:
        lengths = torch.randint(1, Nk + 1, (B,))
        lengths[0] = Nk
        c["key_padding_mask_array"] = arrays["key_padding_mask"] = (
            torch.arange(Nk).view(1, Nk) >= lengths.view(B, 1)).float()
    out, p = reference(q, k, v, c)
    arrays["out"] = out.float()
    if weights:
        arrays["weights"] = p.float()
    path = os.path.join(out_dir, name)
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    for key, t in arrays.items():
        np.save(os.path.join(path, key + ".npy"), np.ascontiguousarray(t.numpy(), dtype="<f4"))
    meta = {"description": description, "torch_version": torch.__version__, "tolerance": TOL,
            "causal": causal, "window": window, "softcap": softcap,
            "relative_max_distance": c["relative_max_distance"], "attn_mask": attn_mask,
            "key_padding_mask": c["key_padding_mask"], "rope": rope_params,
            "arrays": {key: list(t.shape) for key, t in arrays.items()}}
    with open(os.path.join(path, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    print(name, {key: list(t.shape) for key, t in arrays.items()})


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.path.join(here, "..", "tests", "golden", "modifiers"))
    out = parser.parse_args().out
    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(1)
    for h in (1, 3, 6, 8, 12):
        np.save(os.path.join(out, "alibi_slopes_H%d.npy" % h),
                bloom_alibi_slopes(h).numpy().astype("<f4"))
    S = dict(B=2, H=3, Nq=17, Nk=23, d=8)
    case(out, "alibi", "ALiBi, bidirectional", 1, **S, alibi=True)
    case(out, "alibi_causal", "ALiBi, causal (-m·(i - j))", 2, **S, alibi=True, causal=True)
    case(out, "alibi_masks", "ALiBi with a bool attn_mask and key padding", 3, **S, alibi=True,
         attn_mask="bool", key_padding=True)
    case(out, "relative", "relative position buckets 32, max_distance 128", 4, **S,
         relative=(32, 128))
    case(out, "relative_small_buckets", "relative position buckets 8, max_distance 12 (the "
         "logarithmic buckets reached)", 5, **S, relative=(8, 12))
    case(out, "relative_masks_causal", "relative buckets 16 / 20 with an additive attn_mask, key "
         "padding and causal", 6, **S, relative=(16, 20), attn_mask="additive", key_padding=True,
         causal=True)
    case(out, "window", "sliding window w = 6", 7, **S, window=6)
    case(out, "window_causal", "sliding window w = 8, causal (keys i - 4 … i)", 8, **S, window=8,
         causal=True)
    case(out, "window_padding", "sliding window w = 4 with key padding (rows left with no key)",
         9, **S, window=4, key_padding=True)
    case(out, "window_long", "sliding window w = 32 over N = 300: whole key blocks skipped", 10,
         B=1, H=2, Nq=300, Nk=300, d=8, window=32, weights=False)
    case(out, "window_long_causal", "sliding window w = 32 over N = 300, causal, key padding", 11,
         B=2, H=1, Nq=300, Nk=300, d=8, window=32, causal=True, key_padding=True, weights=False)
    case(out, "softcap", "soft-capping c = 2 on scores up to about 8", 12, **S, softcap=2.0,
         q_gain=4.0)
    case(out, "softcap_additive", "soft-capping c = 3 before an additive attn_mask", 13, **S,
         softcap=3.0, q_gain=4.0, attn_mask="additive")
    case(out, "combined", "soft-capping, ALiBi, relative buckets, window 10, bool attn_mask, key "
         "padding", 14, **S, softcap=4.0, q_gain=3.0, alibi=True, relative=(16, 32), window=10,
         attn_mask="bool", key_padding=True)
    case(out, "combined_causal", "soft-capping, ALiBi, relative buckets, window 6, causal", 15,
         **S, softcap=4.0, q_gain=3.0, alibi=True, relative=(32, 128), window=6, causal=True)

    case(out, "rope_half", "RoPE, half-split (GPT-NeoX), all channels, θ 10000", 16, **S,
         rope_params=dict(layout="half", theta=10000.0, rotary_dim=8, query_offset=0,
                          key_offset=0))
    case(out, "rope_interleaved_partial", "RoPE, interleaved (GPT-J), 4 of 8 channels, θ 500, "
         "query positions from 5, keys from 3", 17, **S,
         rope_params=dict(layout="interleaved", theta=500.0, rotary_dim=4, query_offset=5,
                          key_offset=3))
    case(out, "rope_half_partial_causal", "RoPE, half-split, 6 of 8 channels, queries from 6 "
         "(the last 17 of 23 positions), causal, key padding", 18, **S, causal=True,
         key_padding=True, rope_params=dict(layout="half", theta=10000.0, rotary_dim=6,
                                            query_offset=6, key_offset=0))
    case(out, "rope_combined", "RoPE (interleaved, θ 10000) with ALiBi, window 8 and soft-capping",
         19, **S, alibi=True, window=8, softcap=4.0, q_gain=2.0,
         rope_params=dict(layout="interleaved", theta=10000.0, rotary_dim=8, query_offset=2,
                          key_offset=0))

    mha_case(out, "mha_alibi_relative_softcap", "attention layer: soft-capping, ALiBi, relative "
             "buckets 16 / 24, key padding", 20, B=2, N=19, E=12, H=3, softcap=3.0, alibi=True,
             relative=(16, 24), key_padding=True)
    mha_case(out, "mha_window_causal", "attention layer: window 6, causal, additive attn_mask", 21,
             B=2, N=19, E=12, H=3, window=6, causal=True, attn_mask="additive")


def mha_case(out_dir, name, description, seed, B, N, E, H, causal=False, alibi=False,
             relative=None, window=0, softcap=0.0, attn_mask=None, key_padding=False):
    torch.manual_seed(seed)
    d = E // H
    x = torch.rand(B, N, E) * 2 - 1
    w_in = (torch.rand(3 * E, E) * 2 - 1) / math.sqrt(E) * 2
    b_in = torch.rand(3 * E) * 0.2 - 0.1
    w_out = (torch.rand(E, E) * 2 - 1) / math.sqrt(E)
    b_out = torch.rand(E) * 0.2 - 0.1
    c = {"causal": causal, "window": window, "softcap": softcap, "relative_max_distance": 0,
         "attn_mask": attn_mask, "key_padding_mask": "bool" if key_padding else None,
         "rope": None}
    arrays = {"x": x, "in_proj_weight": w_in, "in_proj_bias": b_in, "out_proj_weight": w_out,
              "out_proj_bias": b_out}
    if alibi:
        c["alibi_slopes"] = arrays["alibi_slopes"] = bloom_alibi_slopes(H)
    if relative:
        c["relative_bias"] = arrays["relative_bias"] = torch.randn(relative[0], H)
        c["relative_max_distance"] = relative[1]
    if attn_mask == "additive":
        c["attn_mask_array"] = arrays["attn_mask"] = torch.randn(N, N)
    if key_padding:
        lengths = torch.randint(1, N + 1, (B,))
        lengths[0] = N
        c["key_padding_mask_array"] = arrays["key_padding_mask"] = (
            torch.arange(N).view(1, N) >= lengths.view(B, 1)).float()
    proj = x.double() @ w_in.double().t() + b_in.double()                  # [B, N, 3E]
    heads = [proj[..., i * E:(i + 1) * E].reshape(B, N, H, d).transpose(1, 2) for i in range(3)]
    o, _ = reference(heads[0], heads[1], heads[2], c)                     # [B, H, N, d]
    y = o.transpose(1, 2).reshape(B, N, E) @ w_out.double().t() + b_out.double()
    arrays["out"] = y.float()
    path = os.path.join(out_dir, name)
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    for key, t in arrays.items():
        np.save(os.path.join(path, key + ".npy"), np.ascontiguousarray(t.numpy(), dtype="<f4"))
    meta = {"description": description, "torch_version": torch.__version__, "tolerance": TOL,
            "num_heads": H, "causal": causal, "window": window, "softcap": softcap,
            "relative_max_distance": c["relative_max_distance"], "attn_mask": attn_mask,
            "key_padding_mask": c["key_padding_mask"], "rope": None,
            "arrays": {key: list(t.shape) for key, t in arrays.items()}}
    with open(os.path.join(path, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    print(name, {key: list(t.shape) for key, t in arrays.items()})


if __name__ == "__main__":
    main()
