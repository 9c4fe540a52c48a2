#!/usr/bin/env python3
"""Writes the small .npy fixtures of tests/test_npy.c into tests/data/npy (numpy only).

usage: ~/.cache/clattn/golden-venv/bin/python tools/gen_npy_fixtures.py [--out DIR]

Runs from anywhere, with any Python that has numpy (the venv of tools/make-golden-venv.sh, from
which every generator runs, has it). The output is deterministic; the values here are repeated
in tests/test_npy.c, so change both together.
"""
import argparse
import os

import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "npy")


def save(name, array):
    np.save(os.path.join(OUT, name), array, allow_pickle=False)


def write_version(name, array, version):
    with open(os.path.join(OUT, name), "wb") as f:
        np.lib.format.write_array(f, array, version=version, allow_pickle=False)


def main():
    os.makedirs(OUT, exist_ok=True)
    f32 = np.array([[0.0, -1.5, 3.25], [1e-40, np.inf, -0.0]], dtype=np.float32)

    # Written by numpy; the tests compare clattn_npy_write_f32's output with these byte for byte.
    save("f32_2x3.npy", f32)
    save("f32_scalar.npy", np.array(2.5, dtype=np.float32))
    save("f32_7.npy", np.arange(7, dtype=np.float32) * 0.5 - 1)
    save("f32_2x1x3x2.npy", np.arange(12, dtype=np.float32).reshape(2, 1, 3, 2))
    save("f32_empty_100000x0.npy", np.zeros((100000, 0), dtype=np.float32))
    # Its header needs only 2 bytes of padding (the least of any float32 array numpy can make):
    # 2 more spaces after the dictionary would add 64 bytes.
    save("f32_empty_pad2.npy", np.zeros((1, 0, 1000, 1000, 1000, 1000, 1000, 1000), np.float32))

    # Every supported dtype.
    save("f64_4.npy", np.array([1.5, -2.25, 0.1, 1e300], dtype=np.float64))
    save("bool_5.npy", np.array([True, False, True, True, False]))
    save("i8_3.npy", np.array([-128, 0, 127], dtype=np.int8))
    save("i16_3.npy", np.array([-32768, 1, 32767], dtype=np.int16))
    save("i32_3.npy", np.array([-2147483648, 5, 2147483647], dtype=np.int32))
    save("i64_2x2.npy", np.array([[-9223372036854775808, 7],
                                  [9223372036854775807, 16777217]], dtype=np.int64))
    save("u8_2.npy", np.array([0, 255], dtype=np.uint8))
    save("u16_2.npy", np.array([0, 65535], dtype=np.uint16))
    save("u32_2.npy", np.array([0, 4294967295], dtype=np.uint32))
    save("u64_2.npy", np.array([0, 9223372036854775807], dtype=np.uint64))
    save("u64_big_3.npy", np.array([1, 2, 18446744073709551615], dtype=np.uint64))

    # Other format versions.
    write_version("f32_v2_2x2.npy", np.array([[1, 2], [3, 4]], dtype=np.float32), (2, 0))
    write_version("f32_v3_2.npy", np.array([5, 6], dtype=np.float32), (3, 0))

    # Unsupported files.
    save("f32_fortran_2x3.npy", np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3)))
    save("f32_bigendian_2.npy", np.array([1, 2], dtype=">f4"))
    save("f16_2.npy", np.array([1, 2], dtype=np.float16))
    save("c64_2.npy", np.array([1 + 2j, 3], dtype=np.complex64))
    save("structured_2.npy", np.zeros(2, dtype=[("a", "<f4"), ("b", "<i4")]))
    save("f32_9d.npy", np.zeros((1,) * 9, dtype=np.float32))


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=OUT, help="the folder written (default tests/data/npy)")
    OUT = ap.parse_args().out
    main()
