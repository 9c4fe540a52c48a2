#!/usr/bin/env python3
"""Writes the dequantisation goldens of tests/test_quant.c into tests/golden/quant: for each of
ggml's weight types the library runs, a few blocks of random raw bytes and their float32 values
as gguf-py (PyPI gguf, gguf.quants.dequantize, which follows ggml's reference code) computes them.

usage: ~/.cache/clattn/golden-venv/bin/python tools/gen_quant_golden.py [--out DIR]

For each type NAME (ggml's name: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_K, q5_K, q6_K):
  NAME.bin   the raw blocks (16 blocks of a quantised type; 64 f32, 256 f16 or bf16 values)
  NAME.f32   their values, float32 little-endian, in order
and meta.json: each type's ggml number, element count and bytes.

The bytes are random (numpy's PCG64, a fixed seed per type), except every f16 scale field (d, m,
dmin), which is overwritten by a finite f16 drawn from special values (±0, the smallest and
largest subnormals, the smallest normal, 65504, ±1) and random finite bit patterns, of both signs;
the K-quants' packed 6-bit scales and minimums stay random bytes, so every path of their
unpacking is taken. f16 data elements are the special values, then random bit patterns but for
signalling NaNs (a hardware conversion quiets them, numpy's software one does not: gguf-py's
result would depend on the CPU); bf16 and f32 data are every bit pattern, NaNs included (gguf-py
only moves their bits). The output is deterministic.
"""
import argparse
import importlib.metadata
import json
import os

import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType
from gguf.quants import dequantize

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "golden", "quant")

BLOCKS = 16  # blocks per quantised type

# name -> (GGMLQuantizationType, byte offsets of the f16 scale fields in a block, elements when
# the type is a plain float type with blocks of one element)
TYPES = {
    "f32": (GGMLQuantizationType.F32, (), 64),
    "f16": (GGMLQuantizationType.F16, (), 256),
    "bf16": (GGMLQuantizationType.BF16, (), 256),
    "q8_0": (GGMLQuantizationType.Q8_0, (0,), None),
    "q4_0": (GGMLQuantizationType.Q4_0, (0,), None),
    "q4_1": (GGMLQuantizationType.Q4_1, (0, 2), None),
    "q5_0": (GGMLQuantizationType.Q5_0, (0,), None),
    "q5_1": (GGMLQuantizationType.Q5_1, (0, 2), None),
    "q4_K": (GGMLQuantizationType.Q4_K, (0, 2), None),
    "q5_K": (GGMLQuantizationType.Q5_K, (0, 2), None),
    "q6_K": (GGMLQuantizationType.Q6_K, (208,), None),
}

SPECIAL_F16 = [0x0000, 0x8000, 0x0001, 0x83FF, 0x03FF, 0x8001, 0x0400, 0x7BFF, 0xFBFF, 0x3C00,
               0xBC00]


def finite_f16(rng, count):
    """count f16 bit patterns: the special ones first (as many as fit), then random finite
    ones."""
    bits = list(SPECIAL_F16[:count])
    while len(bits) < count:
        b = int(rng.integers(0, 1 << 16))
        if (b >> 10) & 0x1F != 0x1F:  # not inf or NaN
            bits.append(b)
    order = rng.permutation(count)
    return [bits[i] for i in order]


def raw_blocks(name, seed):
    qtype, scale_offsets, elements = TYPES[name]
    block_elements, block_bytes = GGML_QUANT_SIZES[qtype]
    rng = np.random.default_rng(seed)
    if elements is not None:
        assert block_elements == 1
        raw = rng.integers(0, 256, size=elements * block_bytes, dtype=np.uint8)
        if name == "f16":
            h = raw.view("<u2").copy()
            signalling = ((h & 0x7C00) == 0x7C00) & ((h & 0x03FF) != 0) & ((h & 0x0200) == 0)
            h[signalling] |= 0x0200  # quiet NaN, same payload otherwise
            h[:len(SPECIAL_F16)] = SPECIAL_F16
            raw = h.view(np.uint8)
        return qtype, elements, raw.reshape(-1)
    raw = rng.integers(0, 256, size=(BLOCKS, block_bytes), dtype=np.uint8)
    fields = finite_f16(rng, BLOCKS * len(scale_offsets))
    k = 0
    for b in range(BLOCKS):
        for off in scale_offsets:
            raw[b, off:off + 2] = np.array([fields[k]], dtype="<u2").view(np.uint8)
            k += 1
    return qtype, BLOCKS * block_elements, raw.reshape(-1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=OUT, help="output folder (default tests/golden/quant)")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    meta = {"gguf_version": importlib.metadata.version("gguf"), "types": {}}
    for seed, name in enumerate(TYPES):
        qtype, elements, raw = raw_blocks(name, 35_000 + seed)
        values = np.ascontiguousarray(dequantize(raw, qtype), dtype=np.float32).reshape(-1)
        assert values.dtype == np.float32 and values.size == elements, name
        with open(os.path.join(args.out, name + ".bin"), "wb") as f:
            f.write(raw.tobytes())
        with open(os.path.join(args.out, name + ".f32"), "wb") as f:
            f.write(values.astype("<f4").tobytes())
        meta["types"][name] = {"ggml_type": int(qtype), "elements": int(elements),
                               "bytes": int(raw.size)}
    with open(os.path.join(args.out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
