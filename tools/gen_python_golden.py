#!/usr/bin/env python3
"""Writes tests/golden/python/: PyTorch's torch.nn.functional.scaled_dot_product_attention on
small random inputs, for tests/python/test_attention.py (clattn.sdpa): one case per kind of
mask; leading dimensions that broadcast (5-D and 6-D, ranks that differ, value's batch, GQA);
float64 and float16 inputs; zero-size inputs; scales that are 0 in float32; the dtypes
PyTorch takes together; and the shapes PyTorch refuses.

Usage: ~/.cache/clattn/golden-venv/bin/python tools/gen_python_golden.py [--out DIR]
(tools/make-golden-venv.sh makes that venv, with the pinned torch). Deterministic; rewrites the
folder. Each group of cases draws from a generator of its own (seeds 25, 33, 34), so that
adding a later group leaves the earlier cases' inputs as they were.

Files: cases.json ("torch": its version; "cases": name -> the call's keyword arguments, "mask":
null | "bool" | "float", and "tolerance" where it is not 1e-5; "refused": name -> the shapes
("query", "key", "value", "mask" or null), the keyword arguments ("kwargs") and torch's
"error" for a call PyTorch refuses; "dtypes": a list of calls, the dtypes of "query", "key",
"value" and "mask" (null: none) with torch's result dtype ("out") or its "error"), sdpa.npz
(for each case NAME: NAME.q, NAME.k, NAME.v, NAME.mask when there is one, NAME.out; the inputs
in the case's dtype (float32 unless the case is about dtypes), out float32 for float32 inputs
and float64 otherwise, computed by torch in float64; the boolean masks as numpy bool with
PyTorch's polarity, True = attend).
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
    meta = {"torch": torch.__version__, "cases": {}, "refused": {}}
    arrays = {}
    has_gqa = "enable_gqa" in F.scaled_dot_product_attention.__doc__

    def reference(q, k, v, mask, kwargs):
        """torch's result in float64 from the inputs' values (None when torch refuses)."""
        with torch.no_grad():
            return F.scaled_dot_product_attention(
                torch.from_numpy(q).double(), torch.from_numpy(k).double(),
                torch.from_numpy(v).double(),
                attn_mask=None if mask is None else (
                    torch.from_numpy(mask) if mask.dtype == np.bool_
                    else torch.from_numpy(mask).double()),
                **kwargs)

    def add(name, q, k, v, mask, kwargs, tolerance=None):
        result = reference(q, k, v, mask, kwargs)
        assert torch.isfinite(result).all(), name
        arrays.update({f"{name}.q": q, f"{name}.k": k, f"{name}.v": v,
                       f"{name}.out": (result.float() if q.dtype == np.float32
                                       else result).numpy()})
        if mask is not None:
            arrays[f"{name}.mask"] = mask
        meta["cases"][name] = dict(kwargs, mask=None if mask is None else (
            "bool" if mask.dtype == np.bool_ else "float"))
        if tolerance is not None:
            meta["cases"][name]["tolerance"] = tolerance

    for name, (q_shape, k_shape, v_shape, mask, kwargs) in cases.items():
        if kwargs.get("enable_gqa") and not has_gqa:
            print(f"skip {name}: torch {torch.__version__} has no enable_gqa")
            continue
        add(name, randn(*q_shape), randn(*k_shape), randn(*v_shape), mask, kwargs)

    # Later cases: their own generator (the inputs of the cases above stay as they were).
    rng = np.random.default_rng(33)

    # Leading dimensions broadcast as torch's matmul broadcasts them: q·kᵀ, then with v.
    broadcast = {
        "five_dims_broadcast": ((2, 1, 1, 4, 8), (1, 2, 1, 4, 8), (1, 2, 1, 4, 8), None, {}),
        "batch_broadcast": ((1, H, L, E), (B, H, S, E), (B, H, S, Ev),
                            randn(B, 1, L, S), {}),
        "heads_broadcast": ((B, 1, L, E), (B, H, S, E), (B, H, S, Ev),
                            bool_mask((H, L, S)), {}),
        "ranks_differ": ((B, H, L, E), (H, S, E), (S, Ev), randn(S), {}),
        "value_broadcast": ((1, H, L, E), (1, H, S, E), (B, H, S, Ev),
                            randn(1, H, L, S), {}),
        "six_dims": ((2, 1, 2, 1, L, E), (1, 3, 1, 2, S, E), (1, 3, 1, 2, S, Ev),
                     bool_mask((3, 1, 1, L, S)), {}),
        "mask_partial_batch": ((2, B, H, L, E), (2, B, H, S, E), (2, B, H, S, Ev),
                               randn(2, 1, H, 1, S), {}),
        "gqa_broadcast": ((2, 1, 6, L, E), (1, 3, 2, S, E), (1, 3, 2, S, Ev), None,
                          {"enable_gqa": True}),
        "gqa_heads_differ": ((6, L, E), (2, S, E), (3, S, Ev), bool_mask((6, L, S)),
                             {"enable_gqa": True}),
        # Zero-size inputs: empty results, zeros without keys, the mean of v when E is 0.
        "empty_queries": ((B, H, 0, E), (B, H, S, E), (B, H, S, Ev), None, {}),
        "empty_batch": ((0, H, L, E), (1, H, S, E), (1, H, S, Ev), None, {}),
        "empty_value_width": ((B, H, L, E), (B, H, S, E), (B, H, S, 0), None, {}),
        "no_keys": ((B, H, L, E), (B, H, 0, E), (B, H, 0, Ev), None, {"is_causal": True}),
        "zero_width": ((B, H, L, 0), (B, H, S, 0), (B, H, S, Ev), randn(L, S), {}),
        "zero_width_causal": ((B, H, L, 0), (B, H, S, 0), (B, H, S, Ev), None,
                              {"is_causal": True}),
    }
    for name, (q_shape, k_shape, v_shape, mask, kwargs) in broadcast.items():
        if kwargs.get("enable_gqa") and not has_gqa:
            print(f"skip {name}: torch {torch.__version__} has no enable_gqa")
            continue
        add(name, randn(*q_shape), randn(*k_shape), randn(*v_shape), mask, kwargs)

    # Floating dtypes other than float32: the result in the inputs' dtype (computed in float32
    # by clattn: float16's own rounding sets its tolerance).
    q, k, v = (rng.standard_normal(s) for s in ((B, H, L, E), (B, H, S, E), (B, H, S, Ev)))
    add("float64", q, k, v, rng.standard_normal((L, S)), {})
    q, k, v = (rng.standard_normal(s).astype(np.float16)
               for s in ((B, H, L, E), (B, H, S, E), (B, H, S, Ev)))
    add("float16", q, k, v, None, {}, tolerance=2e-3)

    # Scales that are 0 in float32 (0.0, and 1e-50 or 1e-46 rounded): every score 0, the
    # softmax of the mask alone (uniform over the keys it leaves). Their own generator.
    rng = np.random.default_rng(34)
    scales = {
        "scale_zero": ((B, H, L, E), (B, H, S, E), (B, H, S, Ev), randn(L, S), {"scale": 0.0}),
        "scale_zero_bool": ((H, L, E), (H, S, E), (H, S, Ev), bool_mask((H, L, S)),
                            {"scale": 0.0}),
        "scale_underflow": ((1, 3, 4), (1, 5, 4), (1, 5, 4), None, {"scale": 1e-50}),
        "scale_negative_underflow": ((B, H, L, E), (B, H, S, E), (B, H, S, Ev), None,
                                     {"scale": -1e-50, "is_causal": True}),
        "scale_tiny": ((2, B, H, L, E), (2, B, H, S, E), (2, B, H, S, Ev),
                       bool_mask((B, 1, L, S)), {"scale": 1e-46}),
    }
    for name, (q_shape, k_shape, v_shape, mask, kwargs) in scales.items():
        add(name, randn(*q_shape), randn(*k_shape), randn(*v_shape), mask, kwargs)
    q, k, v = (rng.standard_normal(s) for s in ((B, H, L, E), (B, H, S, E), (B, H, S, Ev)))
    add("scale_zero_float64", q, k, v, rng.standard_normal((L, S)), {"scale": 0.0})

    # Which dtypes torch takes together: query, key and value of one dtype; a floating mask of
    # float32 or the query's dtype. The test expects a TypeError for the others.
    dtype_calls = [(d, d, d, m) for d in ("float16", "float32", "float64")
                   for m in ("bool", "float16", "float32", "float64")]
    dtype_calls += [("float64", "float32", "float32", None), ("float32", "float64", "float32",
                    None), ("float32", "float32", "float16", None),
                    ("float16", "float16", "float32", "float16")]
    meta["dtypes"] = []
    for q_dtype, k_dtype, v_dtype, mask_dtype in dtype_calls:
        tensors = [torch.zeros(shape, dtype=getattr(torch, dtype)) for shape, dtype in
                   (((L, E), q_dtype), ((S, E), k_dtype), ((S, Ev), v_dtype))]
        mask = None if mask_dtype is None else torch.ones((L, S), dtype=getattr(torch,
                                                                                mask_dtype))
        call = {"query": q_dtype, "key": k_dtype, "value": v_dtype, "mask": mask_dtype}
        try:
            with torch.no_grad():
                result = F.scaled_dot_product_attention(*tensors, attn_mask=mask)
        except RuntimeError as err:
            call["error"] = f"{type(err).__name__}: {str(err).splitlines()[0]}"
        else:
            call["out"] = str(result.dtype).replace("torch.", "")
        meta["dtypes"].append(call)

    # What torch refuses: the test expects a ValueError naming the shapes.
    refused = {
        "five_dims_mismatch": ((2, 3, 1, 4, 8), (3, 2, 1, 4, 8), (3, 2, 1, 4, 8), None, {}),
        "value_batch_mismatch": ((B, H, L, E), (B, H, S, E), (3, H, S, Ev), None, {}),
        "heads_mismatch": ((6, L, E), (2, S, E), (2, S, Ev), None, {}),
        "mask_grows_scores": ((H, L, E), (H, S, E), (H, S, Ev), (B, H, L, S), {}),
        "mask_more_dims": ((B, H, L, E), (B, H, S, E), (B, H, S, Ev), (1, B, H, L, S), {}),
        "mask_value_batch": ((1, H, L, E), (1, H, S, E), (B, H, S, Ev), (B, H, L, S), {}),
        "mask_wrong_size": ((B, H, L, E), (B, H, S, E), (B, H, S, Ev), (3, S), {}),
        "width_mismatch": ((B, H, L, E), (B, H, S, 4), (B, H, S, Ev), None, {}),
        "keys_values_mismatch": ((B, H, L, E), (B, H, S, E), (B, H, S + 1, Ev), None, {}),
        "one_dim": ((E,), (E,), (E,), None, {}),
        "gqa_not_dividing": ((6, L, E), (4, S, E), (4, S, Ev), None, {"enable_gqa": True}),
        "gqa_query_fewer_heads": ((1, L, E), (2, S, E), (2, S, Ev), None,
                                  {"enable_gqa": True}),
        "gqa_two_dims": ((L, E), (S, E), (S, Ev), None, {"enable_gqa": True}),
        # torch 2.9's CPU path for 4-D inputs reads the mask's dimension -2 (other ranks
        # broadcast such a mask: ranks_differ)
        "mask_one_dim_4d": ((B, H, L, E), (B, H, S, E), (B, H, S, Ev), (S,), {}),
        "mask_scalar_4d": ((B, H, L, E), (B, H, S, E), (B, H, S, Ev), (), {}),
    }
    for name, (q_shape, k_shape, v_shape, mask_shape, kwargs) in refused.items():
        if kwargs.get("enable_gqa") and not has_gqa:
            continue
        zeros = [np.zeros(s, np.float32) for s in (q_shape, k_shape, v_shape)]
        mask = None if mask_shape is None else np.zeros(mask_shape, np.float32)
        try:
            reference(*zeros, mask, kwargs)
        except (RuntimeError, IndexError) as err:
            error = f"{type(err).__name__}: {str(err).splitlines()[0]}"
        else:
            raise SystemExit(f"{name}: torch {torch.__version__} accepts it")
        meta["refused"][name] = {"query": q_shape, "key": k_shape, "value": v_shape,
                                 "mask": mask_shape, "kwargs": kwargs, "error": error}

    np.savez_compressed(out / "sdpa.npz", **arrays)
    (out / "cases.json").write_text(json.dumps(meta, indent=1) + "\n")
    print(f"wrote {len(meta['cases'])} cases and {len(meta['refused'])} refused calls to {out}")


if __name__ == "__main__":
    main()
