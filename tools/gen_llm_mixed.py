#!/usr/bin/env python3
"""Writes tests/golden/llm/tiny_llama_mixed.gguf: tiny_llama_q4_1.gguf with every layer's
attn_v.weight and ffn_up.weight stored as float32 (their Q4_1 values dequantised by gguf-py,
exactly), beside Q4_1 attn_q, attn_k and ffn_gate. Parts of one stacked weight of different types
(as llama.cpp's Q4_K_M files give a Q6_K attn_v) are what tests/test_llm.c loads it for: the
values are those of tiny_llama_q4_1.gguf, so that file's transformers goldens apply.

Run with the golden environment (tools/make-golden-venv.sh): python tools/gen_llm_mixed.py
[--out DIR] (default tests/golden/llm; the source is always the committed tiny_llama_q4_1.gguf).
"""
import argparse
import os

import gguf
import numpy as np

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'tests', 'golden', 'llm')


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--out', default=HERE)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    src = gguf.GGUFReader(os.path.join(HERE, 'tiny_llama_q4_1.gguf'))
    arch = src.fields['general.architecture'].contents()
    w = gguf.GGUFWriter(os.path.join(a.out, 'tiny_llama_mixed.gguf'), arch)
    for name, field in src.fields.items():
        if name.startswith('GGUF.') or name == 'general.architecture':
            continue
        vtype = field.types[0]
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        w.add_key_value(name, field.contents(), vtype, sub_type=sub)
    for t in src.tensors:
        shape = [int(x) for x in reversed(t.shape)]  # PyTorch order
        if t.name.endswith(('attn_v.weight', 'ffn_up.weight')):
            values = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
            w.add_tensor(t.name, values.reshape(shape))
        elif t.tensor_type == gguf.GGMLQuantizationType.F32:
            w.add_tensor(t.name, np.asarray(t.data, dtype=np.float32).reshape(shape))
        else:
            w.add_tensor(t.name, np.asarray(t.data), raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == '__main__':
    main()
