#!/usr/bin/env python3
"""Writes a base encoder of L identical layers as a safetensors file that `examples/encode
--model` loads, with seeded random weights, using only Python's standard library (no torch, no
numpy: tools/device-check.sh runs it on machines that may have neither).

usage: python3 tools/write_base_layer.py OUT.safetensors [--layers L] [--seed S]

The layer is nn.TransformerEncoderLayer(512, 8, 2048, batch_first=True)'s: relu, post-LN,
LayerNorm eps 1e-5, no positional encoding (bench/peers.py's layer, with other random numbers).
The matrices and biases are uniform in ±1/sqrt(fan_in) (PyTorch's nn.Linear scale), the
LayerNorms weight 1 and bias 0; the L layers are copies of one (as nn.TransformerEncoder copies
its layer), so a 6-layer file costs one layer's random numbers. The file format and the tensor
names are tools/export_torch.py's (see its docstring).
"""
import argparse
import array
import json
import math
import random
import struct
import sys

E, H, F = 512, 8, 2048

# (name, shape, fan_in or None for a LayerNorm's weight (ones) and bias (zeros)), in the
# state_dict order that tools/export_torch.py writes.
LAYER_TENSORS = [
    ("self_attn.in_proj_weight", [3 * E, E], E),
    ("self_attn.in_proj_bias", [3 * E], E),
    ("self_attn.out_proj.weight", [E, E], E),
    ("self_attn.out_proj.bias", [E], E),
    ("linear1.weight", [F, E], E),
    ("linear1.bias", [F], E),
    ("linear2.weight", [E, F], F),
    ("linear2.bias", [E], F),
    ("norm1.weight", [E], "ones"),
    ("norm1.bias", [E], "zeros"),
    ("norm2.weight", [E], "ones"),
    ("norm2.bias", [E], "zeros"),
]


def tensor_bytes(rng, shape, init):
    """Little-endian float32 bytes of a tensor of `shape`."""
    n = math.prod(shape)
    if init == "ones":
        values = array.array("f", [1.0]) * n
    elif init == "zeros":
        values = array.array("f", [0.0]) * n
    else:
        bound = 1.0 / math.sqrt(init)
        values = array.array("f", (rng.uniform(-bound, bound) for _ in range(n)))
    if sys.byteorder == "big":
        values.byteswap()
    return values.tobytes()


def write(path, layers, seed):
    rng = random.Random(seed)
    one_layer = [(name, shape, tensor_bytes(rng, shape, init))
                 for name, shape, init in LAYER_TENSORS]
    header = {"__metadata__": {"d_model": str(E), "nhead": str(H), "num_layers": str(layers),
                               "dim_feedforward": str(F), "activation": "relu",
                               "norm_first": "false", "layer_norm_eps": "1e-05",
                               "positional": "none"}}
    offset = 0
    for i in range(layers):
        for name, shape, data in one_layer:
            header["layers.%d.%s" % (i, name)] = {"dtype": "F32", "shape": shape,
                                                  "data_offsets": [offset, offset + len(data)]}
            offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for _ in range(layers):
            for _, _, data in one_layer:
                f.write(data)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", help="the safetensors file to write")
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    if a.layers < 1:
        ap.error("--layers must be at least 1")
    write(a.out, a.layers, a.seed)


if __name__ == "__main__":
    main()
