#!/usr/bin/env python3
"""Writes tests/golden/python/: PyTorch's torch.nn.functional.scaled_dot_product_attention on
small random inputs, one case per kind of mask, for tests/python/test_attention.py (clattn.sdpa).

Needs torch >= 2.1 (scaled_dot_product_attention with scale= and enable_gqa needs 2.5; the GQA
case is left out with an older torch): ~/.cache/clattn/infinity-venv/bin/python
tools/gen_python_golden.py. Deterministic; rewrites the folder.

Files: cases.json (name -> the call's keyword arguments, "mask": null | "bool" | "float", and
torch's version), sdpa.npz (for each case NAME: NAME.q, NAME.k, NAME.v, NAME.mask when there
is one, NAME.out; float32, the boolean masks as numpy bool with PyTorch's polarity, True =
attend).
"""

import argparse
import json
import pathlib

import numpy as np
import torch
import torch.nn.functional as F


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(pathlib.Path(__file__).resolve().parents[1]
                                             / "tests" / "golden" / "python"))
    args = parser.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(25)

    def randn(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    def bool_mask(shape):
        mask = rng.random(shape) < 0.6
        mask[..., 0] = True  # every query attends to one key at least (no NaN rows)
        return mask

    B, H, L, S, E, Ev = 2, 3, 5, 7, 8, 6
    cases = {
        # name: (q shape, k shape, v shape, mask or None, kwargs)
        "none": ((B, H, L, E), (B, H, S, E), (B, H, S, Ev), None, {}),
        "self_square": ((B, H, L, E), (B, H, L, E), (B, H, L, Ev), None, {}),
        "bool_2d": ((B, H, L, E), (B, H, S, E), (B, H, S, Ev), bool_mask((L, S)), {}),
        "bool_4d_broadcast": ((B, H, L, E), (B, H, S, E), (B, H, S, Ev),
                              bool_mask((B, 1, L, S)), {}),
        "float_2d": ((B, H, L, E), (B, H, S, E), (B, H, S, Ev), randn(L, S), {}),
        "float_4d": ((B, H, L, E), (B, H, S, E), (B, H, S, Ev), randn(B, H, L, S), {}),
        "float_neg_inf": ((B, H, L, E), (B, H, S, E), (B, H, S, Ev),
                          np.where(bool_mask((L, S)), 0.0, -np.inf).astype(np.float32), {}),
        "causal_square": ((B, H, L, E), (B, H, L, E), (B, H, L, Ev), None, {"is_causal": True}),
        "causal_more_keys": ((B, H, L, E), (B, H, S, E), (B, H, S, Ev), None,
                             {"is_causal": True}),
        "scale": ((B, H, L, E), (B, H, S, E), (B, H, S, Ev), randn(L, S), {"scale": 0.37}),
        "three_dims": ((H, L, E), (H, S, E), (H, S, Ev), bool_mask((H, L, S)), {}),
        "two_dims": ((L, E), (S, E), (S, Ev), None, {}),
        "five_dims": ((2, B, H, L, E), (2, B, H, S, E), (2, B, H, S, Ev),
                      bool_mask((B, 1, L, S)), {}),
        "gqa": ((B, 6, L, E), (B, 2, S, E), (B, 2, S, Ev), None, {"enable_gqa": True}),
        "gqa_causal_scale": ((B, 4, L, E), (B, 1, L, E), (B, 1, L, Ev), None,
                             {"enable_gqa": True, "is_causal": True, "scale": 0.5}),
    }
    meta = {"torch": torch.__version__, "cases": {}}
    arrays = {}
    for name, (q_shape, k_shape, v_shape, mask, kwargs) in cases.items():
        if kwargs.get("enable_gqa") and "enable_gqa" not in \
                F.scaled_dot_product_attention.__doc__:
            print(f"skip {name}: torch {torch.__version__} has no enable_gqa")
            continue
        q, k, v = randn(*q_shape), randn(*k_shape), randn(*v_shape)
        with torch.no_grad():
            result = F.scaled_dot_product_attention(
                torch.from_numpy(q).double(), torch.from_numpy(k).double(),
                torch.from_numpy(v).double(),
                attn_mask=None if mask is None else (
                    torch.from_numpy(mask) if mask.dtype == np.bool_
                    else torch.from_numpy(mask).double()),
                **kwargs)
        assert torch.isfinite(result).all(), name
        arrays.update({f"{name}.q": q, f"{name}.k": k, f"{name}.v": v,
                       f"{name}.out": result.float().numpy()})
        if mask is not None:
            arrays[f"{name}.mask"] = mask
        meta["cases"][name] = dict(kwargs, mask=None if mask is None else (
            "bool" if mask.dtype == np.bool_ else "float"))
    np.savez_compressed(out / "sdpa.npz", **arrays)
    (out / "cases.json").write_text(json.dumps(meta, indent=1) + "\n")
    print(f"wrote {len(meta['cases'])} cases to {out}")


if __name__ == "__main__":
    main()
