#!/usr/bin/env python3
"""Writes the small GGUF fixtures of tests/test_gguf.c into tests/data/gguf, and what gguf-py's
GGUFReader reads back from them (the independent reference the test compares with).

usage: ~/.cache/clattn/golden-venv/bin/python tools/gen_gguf_fixtures.py [--out DIR]

(the venv of tools/make-golden-venv.sh, with gguf 0.19.0 and numpy). Files:
  all_types.gguf      version 3, default alignment (32): a scalar of every value type, an array
                      of every scalar type and of strings, an empty array, a string with an
                      embedded NUL, a 300-byte key; tensors of F32, F16, Q8_0 and Q4_1 (1 to 4
                      dimensions) with known bytes.
  align64_v2.gguf     version 2, general.alignment 64 (uint32), three tensors. gguf-py's writer
                      only writes version 3: the file is written as 3 and its version field (the
                      uint32 at byte 4) patched to 2; versions 2 and 3 have the same layout for
                      little-endian files, and GGUFReader reads the patched file as version 2.
  expected.json       for each file, GGUFReader's reading: version, alignment, data offset, every
                      metadata entry (type, array type, values) and every tensor (name, type, ne,
                      elements, bytes, absolute offset, its data in hex); and the block layout of
                      every ggml type gguf-py knows (GGML_QUANT_SIZES).
Exact encodings in expected.json: integers as decimal strings (uint64 does not fit a JSON
integer everywhere), floats as Python's float.hex() (strtod reads them back exactly), strings
as hex bytes (NULs and any byte kept).

Two things gguf-py's writer refuses are done by hand here: an empty array (its _pack_val raises;
the subclass below packs the array type and a count of 0), and version 2 (patched, above).
gguf-py's GGML_QUANT_SIZES gives Q8_1 as 40 bytes, the layout of an older ggml (two float32);
ggml today (ggml-common.h, block_q8_1: two halves and 32 int8) has 36, which expected.json
records instead (marked in "layout_notes").
The output is deterministic.
"""
import argparse
import json
import os

import numpy as np
from gguf import GGUFReader, GGUFValueType, GGUFWriter
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "gguf")


class Writer(GGUFWriter):
    """GGUFWriter that also writes empty arrays (of the sub_type given)."""

    def _pack_val(self, val, vtype, add_vtype, sub_type=None):
        if vtype == GGUFValueType.ARRAY and len(val) == 0 and sub_type is not None:
            out = bytearray()
            if add_vtype:
                out += self._pack("I", vtype)
            out += self._pack("I", sub_type) + self._pack("Q", 0)
            return bytes(out)
        return super()._pack_val(val, vtype, add_vtype, sub_type)


V = GGUFValueType
SCALARS = [
    ("test.uint8", 255, V.UINT8),
    ("test.int8", -128, V.INT8),
    ("test.uint16", 65535, V.UINT16),
    ("test.int16", -32768, V.INT16),
    ("test.uint32", 4294967295, V.UINT32),
    ("test.int32", -2147483648, V.INT32),
    ("test.float32", float(np.float32(3.14159265)), V.FLOAT32),
    ("test.bool", True, V.BOOL),
    ("test.string", "héllo wörld ✓", V.STRING),
    ("test.uint64", 18446744073709551615, V.UINT64),
    ("test.int64", -9223372036854775808, V.INT64),
    ("test.float64", 2.718281828459045, V.FLOAT64),
    ("test.float32_subnormal", float(np.float32(1e-45)), V.FLOAT32),
    ("test.bool_false", False, V.BOOL),
    ("test.string_nul", "before\x00after", V.STRING),
    ("test.string_empty", "", V.STRING),
]
ARRAYS = [
    ("test.array.uint8", [0, 1, 254, 255], V.UINT8),
    ("test.array.int8", [-128, -1, 0, 127], V.INT8),
    ("test.array.uint16", [0, 65535, 1234], V.UINT16),
    ("test.array.int16", [-32768, 32767, -2], V.INT16),
    ("test.array.uint32", [0, 4294967295, 7], V.UINT32),
    ("test.array.int32", [-2147483648, 2147483647, -5], V.INT32),
    ("test.array.float32", [0.5, -1.25, float(np.float32(1e30)), float("inf")], V.FLOAT32),
    ("test.array.bool", [True, False, True], V.BOOL),
    ("test.array.string", ["", "a", "tokens ▁with spaces", "nul\x00inside", "<|im_end|>"],
     V.STRING),
    ("test.array.uint64", [0, 18446744073709551615], V.UINT64),
    ("test.array.int64", [-9223372036854775808, 9223372036854775807], V.INT64),
    ("test.array.float64", [1e-300, -0.0, 1.0 / 3.0], V.FLOAT64),
    ("test.array.empty", [], V.INT32),
    ("test.array.empty_string", [], V.STRING),
]
LONG_KEY = "test.long_key." + "k" * 286  # 300 bytes


def known_bytes(rng, n):
    return np.frombuffer(rng.bytes(n), dtype=np.uint8).copy()


def quant_rows(rng, qtype, rows, cols):
    """Raw blocks of qtype for a [rows, cols] tensor, scales finite (f16 in [0.01, 1))."""
    block, size = GGML_QUANT_SIZES[qtype]
    raw = known_bytes(rng, rows * cols // block * size).reshape(rows, cols // block, size)
    scales = rng.uniform(0.01, 1.0, size=(rows, cols // block, 2)).astype(np.float16)
    raw[:, :, 0:2] = scales[:, :, 0:1].view(np.uint8)
    if qtype == GGMLQuantizationType.Q4_1:  # d and m
        raw[:, :, 2:4] = scales[:, :, 1:2].view(np.uint8)
    return raw.reshape(rows, cols // block * size)


def write_all_types(path):
    rng = np.random.RandomState(35)
    w = Writer(path, arch="testarch")
    for key, value, vtype in SCALARS:
        w.add_key_value(key, value, vtype)
    for key, value, sub in ARRAYS:
        w.add_key_value(key, value, V.ARRAY, sub_type=sub)
    w.add_key_value(LONG_KEY, 42, V.UINT32)
    w.add_tensor("f32.matrix", rng.standard_normal((5, 3)).astype(np.float32))
    w.add_tensor("f16.vector", rng.standard_normal(8).astype(np.float16))
    w.add_tensor("f32.4d", rng.standard_normal((2, 1, 3, 2)).astype(np.float32))
    w.add_tensor("q8_0.weight", quant_rows(rng, GGMLQuantizationType.Q8_0, 2, 64),
                 raw_dtype=GGMLQuantizationType.Q8_0)
    w.add_tensor("q4_1.weight", quant_rows(rng, GGMLQuantizationType.Q4_1, 3, 32),
                 raw_dtype=GGMLQuantizationType.Q4_1)
    w.add_tensor("f16.3d", rng.standard_normal((2, 2, 4)).astype(np.float16))
    finish(w)


def write_align64_v2(path):
    rng = np.random.RandomState(2)
    w = Writer(path, arch="testarch")
    w.add_custom_alignment(64)
    w.add_string("general.name", "version 2, alignment 64")
    w.add_tensor("a", rng.standard_normal(3).astype(np.float32))
    w.add_tensor("b", quant_rows(rng, GGMLQuantizationType.Q8_0, 1, 32),
                 raw_dtype=GGMLQuantizationType.Q8_0)
    w.add_tensor("c", rng.standard_normal((2, 5)).astype(np.float16))
    finish(w)
    with open(path, "r+b") as f:
        f.seek(4)
        assert int.from_bytes(f.read(4), "little") == 3
        f.seek(4)
        f.write((2).to_bytes(4, "little"))


def finish(w):
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def encode_value(part, vtype):
    if vtype == V.STRING:
        return bytes(part).hex()
    value = part.tolist()[0] if hasattr(part, "tolist") else part
    if vtype in (V.FLOAT32, V.FLOAT64):
        return float(value).hex()
    if vtype == V.BOOL:
        return "1" if value else "0"
    return str(int(value))


def read_back(path):
    r = GGUFReader(path)
    out = {"kv": [], "tensors": []}
    for name, field in r.fields.items():
        if name.startswith("GGUF."):
            if name == "GGUF.version":
                out["version"] = int(field.parts[field.data[0]][0])
            continue
        entry = {"key_hex": name.encode().hex(), "type": int(field.types[0])}
        if field.types[0] == V.ARRAY:
            sub = field.types[1] if len(field.types) > 1 else None
            if sub is None:  # GGUFReader keeps no sub type for an empty array: read it
                sub = V(int(field.parts[-2][0]))
            entry["array_type"] = int(sub)
            entry["values"] = [encode_value(field.parts[i], sub) for i in field.data]
        else:
            entry["value"] = encode_value(field.parts[field.data[0]], field.types[0])
        out["kv"].append(entry)
    out["alignment"] = int(r.alignment)
    out["data_offset"] = int(r.data_offset)
    for t in r.tensors:
        out["tensors"].append({
            "name": t.name,
            "type": int(t.tensor_type),
            "ne": [int(x) for x in t.shape],
            "elements": int(t.n_elements),
            "bytes": int(t.n_bytes),
            "offset": int(t.data_offset),
            "data_hex": np.ascontiguousarray(t.data).tobytes().hex(),
        })
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=OUT)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    files = {"all_types.gguf": write_all_types, "align64_v2.gguf": write_align64_v2}
    expected = {"files": {}, "layouts": {}, "layout_notes": {}}
    for name, write in files.items():
        path = os.path.join(args.out, name)
        write(path)
        expected["files"][name] = read_back(path)
    for qtype, (block, size) in GGML_QUANT_SIZES.items():
        if qtype == GGMLQuantizationType.Q8_1:
            size = 36
            expected["layout_notes"]["9"] = "gguf-py says 40 (an older ggml's layout)"
        expected["layouts"][str(int(qtype))] = [block, size, qtype.name.lower()]
    with open(os.path.join(args.out, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
