#!/usr/bin/env python3
"""Writes the small .safetensors fixtures of tests/test_safetensors.c into tests/data/safetensors.

usage: ~/.cache/clattn/golden-venv/bin/python tools/gen_safetensors_fixtures.py [--out DIR]

(any Python with numpy and torch; the venv of tools/make-golden-venv.sh, from which every
generator runs, has them). The
`safetensors` package is not needed: the files are laid out by hand here the way its reference
writer (safetensors 0.3, `serialize` in safetensors/src/tensor.rs) lays them out: tensors sorted by
dtype (widest first in the reference's Dtype order) then by name, data contiguous in that order,
the JSON header compact with "__metadata__" first and the tensors in data order, padded with
spaces to a multiple of 8 bytes.

Each F16/BF16 tensor has an F32 twin named "<name>_as_f32" holding torch's own conversion of it
(tensor.float()), so the tests compare the library's conversion with torch's, value for value.
The output is deterministic; tests/test_safetensors.c repeats a few of the values, so change both
together.
"""
import argparse
import json
import os
import struct

import numpy as np
import torch

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data",
                   "safetensors")

# The reference's Dtype enum order (increasing alignment); the writer sorts by it, descending.
DTYPE_ORDER = ["BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3", "I16", "U16", "F16", "BF16", "I32",
               "U32", "F32", "F64", "I64", "U64"]
TORCH_DTYPES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
                torch.float64: "F64", torch.int64: "I64"}


def tensor_bytes(t):
    """The tensor's elements in C order, little-endian (bf16 through its int16 bit pattern)."""
    t = t.contiguous()
    if t.dtype in (torch.float16, torch.bfloat16):
        t = t.view(torch.int16)
    return t.numpy().astype(t.numpy().dtype.newbyteorder("<"), copy=False).tobytes()


def save(name, tensors, metadata=None):
    order = sorted(tensors, key=lambda n: (-DTYPE_ORDER.index(TORCH_DTYPES[tensors[n].dtype]), n))
    header, data, offset = {}, b"", 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for n in order:
        t = tensors[n]
        raw = tensor_bytes(t)
        header[n] = {"dtype": TORCH_DTYPES[t.dtype], "shape": list(t.shape),
                     "data_offsets": [offset, offset + len(raw)]}
        data += raw
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


def from_bits(bits, dtype):
    return torch.tensor(np.array(bits, dtype=np.uint16).view(np.int16)).view(dtype)


def main():
    os.makedirs(OUT, exist_ok=True)
    gen = torch.Generator().manual_seed(7)

    save("f32_torch.safetensors", {
        "weight": torch.tensor([[0.0, -1.5, 3.25], [1e-40, float("inf"), -0.0]]),
        "bias": torch.tensor([0.1, -2.0, 1e30, 7.0]),
        "scalar": torch.tensor(2.5),
        "empty": torch.zeros(0, 4),
    }, metadata={"format": "pt", "source": "gen_safetensors_fixtures.py"})

    # Zeros, the smallest and largest subnormals, the smallest normal, 1, -2, the largest
    # finite value, infinities, 1/3 rounded, a quiet NaN, then four random values.
    half_bits = [0x0000, 0x8000, 0x0001, 0x03FF, 0x0400, 0x3C00, 0xC000, 0x7BFF,
                 0x7C00, 0xFC00, 0x3555, 0x7E00]
    half = torch.cat([from_bits(half_bits, torch.float16),
                      torch.randn(4, generator=gen).half()]).reshape(4, 4)
    save("f16_torch.safetensors", {
        "half": half,
        "half_as_f32": half.float(),
        "empty": torch.zeros(0, 3, dtype=torch.float16),
    })

    # 1, -5, the smallest subnormal, infinity, the most negative finite value, a quiet NaN, then
    # random values; and a 0-d tensor.
    bf16_bits = [0x3F80, 0xC0A0, 0x0001, 0x7F80, 0xFF7F, 0x7FC0]
    bf16 = torch.cat([from_bits(bf16_bits, torch.bfloat16),
                      torch.randn(6, generator=gen).bfloat16()]).reshape(3, 4)
    scalar = torch.tensor(-0.333984375, dtype=torch.bfloat16)
    save("bf16_torch.safetensors", {
        "bf16": bf16,
        "bf16_as_f32": bf16.float(),
        "scalar": scalar,
        "scalar_as_f32": scalar.float(),
    })

    # Dtypes the library does not convert; the reference puts the I64 tensor first.
    save("unsupported_torch.safetensors", {
        "x": torch.tensor([1.0, 2.0], dtype=torch.float64),
        "ids": torch.tensor([1, 2, 3], dtype=torch.int64),
    })


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=OUT,
                    help="the folder written (default tests/data/safetensors)")
    OUT = ap.parse_args().out
    main()
