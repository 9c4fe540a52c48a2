#!/usr/bin/env python3
"""Golden cases for the linear layers on quantised weights (src/ops/qlinear.c,
tests/test_qlinear.c): y = x · Wᵀ with W [n, k] in a ggml type, dequantised by gguf-py
(gguf.quants.dequantize, the reference of every ggml type), the product in float64.

usage: ~/.cache/clattn/golden-venv/bin/python tools/gen_qlinear_golden.py [--out DIR]
           (default tests/golden/qlinear)
(the venv of tools/make-golden-venv.sh, from which every generator runs: tests/golden/README.md)

gguf-py cannot quantise to every type (not to K-quants), so the weights are random raw blocks:
random bytes with every float16 scale field (d, m, dmin) overwritten by a finite random float16
(and F32/F16/BF16 weights random finite values), so that both sides read the same bytes; a few
float16 values are subnormal (row 1's first block's scales, row 0's first F16 weights).

Files, one folder per type (f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q4_k, q5_k, q6_k):
  w.npy     uint8 [n, row_bytes]: the weight's rows as a GGUF file stores them
  x.npy     float32 [m, k], uniform in [-1, 1)
  y.npy     float64 [m, n]: x · dequantize(w)ᵀ, exact products summed in float64
  yabs.npy  float64 [m, n]: |x| · |dequantize(w)|ᵀ, for the rounding-error bound of the test
  ydq.npy   float64 [m, n] (q4_1, q5_1, q4_k, q5_k only): |x| · |a|ᵀ where a is the weight's
            scaled quantum without its offset (d·q, (d·sc)·q: gguf-py's dequantisation of the
            same blocks with m or dmin zeroed): the kernels decode these types with one fma
            (fma(a, 1, m) style, see cl/qlinear.cl), at most a rounding of |a| from gguf-py's
  meta.json the type, its ggml number, n, k, m, block_elements, block_bytes
n = 38 (not a multiple of the kernels' column tiles), k = two blocks (F32/F16/BF16: 48, three
chunks of 16), m = 70.
"""
import argparse
import json
import os

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf.constants import GGML_QUANT_SIZES
from gguf.quants import dequantize

N, M = 38, 70

# the types whose value is a product plus an offset, and the offset's byte offset in a block
OFFSET_FIELD = {T.Q4_1: 2, T.Q5_1: 2, T.Q4_K: 2, T.Q5_K: 2}

# type name -> (ggml type, byte offsets of float16 scale fields within a block)
TYPES = {
    "f32": (T.F32, []),
    "f16": (T.F16, []),
    "bf16": (T.BF16, []),
    "q4_0": (T.Q4_0, [0]),
    "q4_1": (T.Q4_1, [0, 2]),
    "q5_0": (T.Q5_0, [0]),
    "q5_1": (T.Q5_1, [0, 2]),
    "q8_0": (T.Q8_0, [0]),
    "q4_k": (T.Q4_K, [0, 2]),
    "q5_k": (T.Q5_K, [0, 2]),
    "q6_k": (T.Q6_K, [208]),
}


def random_weight(rng, qtype, scale_offsets, n, k):
    """Raw bytes [n, row_bytes] of a random weight whose scales are finite."""
    if qtype == T.F32:
        return rng.uniform(-1, 1, (n, k)).astype(np.float32).view(np.uint8)
    if qtype == T.F16:
        w = rng.uniform(-1, 1, (n, k)).astype(np.float16)
        # subnormal halves (and a negative zero) exercise the kernels' own conversion
        w[0, :6] = np.array([0x0001, 0x8001, 0x03ff, 0x8200, 0x8000, 0x0400],
                            dtype=np.uint16).view(np.float16)
        return w.view(np.uint8)
    if qtype == T.BF16:
        bits = rng.uniform(-1, 1, (n, k)).astype(np.float32).view(np.uint32) >> 16
        return bits.astype(np.uint16).view(np.uint8)
    block_elements, block_bytes = GGML_QUANT_SIZES[qtype]
    blocks = n * k // block_elements
    raw = rng.integers(0, 256, (blocks, block_bytes), dtype=np.uint8)
    for off in scale_offsets:
        # finite scales of either sign; magnitudes so that the values are of order 1
        scale = rng.uniform(-1, 1, blocks) / (8 if qtype in (T.Q4_K, T.Q5_K, T.Q6_K) else 2)
        if qtype in (T.Q4_K, T.Q5_K, T.Q6_K):
            scale = scale / 32  # times 6-bit (or int8) sub-block scales
        raw[:, off:off + 2] = scale.astype(np.float16).view(np.uint8).reshape(blocks, 2)
        # one block of row 1 with a subnormal scale: the kernels convert float16 themselves
        raw[k // block_elements, off:off + 2] = np.array([0x8200], np.uint16).view(np.uint8)
    return raw.reshape(n, -1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=os.path.join("tests", "golden", "qlinear"))
    args = parser.parse_args()
    for index, (name, (qtype, scale_offsets)) in enumerate(TYPES.items()):
        rng = np.random.default_rng(1000 + index)
        block_elements, block_bytes = GGML_QUANT_SIZES[qtype]
        k = 48 if block_elements == 1 else 2 * block_elements
        w = random_weight(rng, qtype, scale_offsets, N, k)
        wf = dequantize(w, qtype).astype(np.float64)
        assert wf.shape == (N, k) and np.all(np.isfinite(wf)), name
        x = rng.uniform(-1, 1, (M, k)).astype(np.float32)
        xd = x.astype(np.float64)
        y = xd @ wf.T
        yabs = np.abs(xd) @ np.abs(wf).T
        out = os.path.join(args.out, name)
        os.makedirs(out, exist_ok=True)
        np.save(os.path.join(out, "w.npy"), np.ascontiguousarray(w))
        np.save(os.path.join(out, "x.npy"), x)
        np.save(os.path.join(out, "y.npy"), y)
        np.save(os.path.join(out, "yabs.npy"), yabs)
        if qtype in OFFSET_FIELD:
            blocks = w.reshape(-1, block_bytes).copy()
            off = OFFSET_FIELD[qtype]
            blocks[:, off:off + 2] = 0
            a = dequantize(blocks.reshape(w.shape), qtype).astype(np.float64)
            np.save(os.path.join(out, "ydq.npy"), np.abs(xd) @ np.abs(a).T)
        meta = {"type": name, "ggml_type": int(qtype), "n": N, "k": k, "m": M,
                "block_elements": 16 if block_elements == 1 else block_elements,
                "block_bytes": w.shape[1] // (k // (16 if block_elements == 1 else
                                                    block_elements))}
        with open(os.path.join(out, "meta.json"), "w") as f:
            json.dump(meta, f, indent=1, sort_keys=True)
            f.write("\n")
    print("wrote", len(TYPES), "cases to", args.out)


if __name__ == "__main__":
    main()
