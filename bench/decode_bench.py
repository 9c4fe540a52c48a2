#!/usr/bin/env python3
"""Decoding throughput: libclattn's examples/generate (key/value cache, one step per token)
against PyTorch's own decoding loop on the same nn.Transformer, same machine, same run.

usage: /usr/bin/python3 bench/decode_bench.py --generate build/examples/generate
           [--lengths 64,256,1024,4096] [--src-len 64] [--threads 2] [--out bench/results]
           [--torch-max 1024]

The model: a seeded random nn.Transformer with the paper's base widths (d_model 512, 8 heads,
6 + 6 layers, d_ff 2048), embeddings of 1000 tokens and a generator whose bias makes eos
(id 2) impossible, so that every run generates exactly N tokens; written with
tools/export_torch.export_transformer. One sentence of --src-len random source tokens; greedy
decoding of N tokens for every N of --lengths:

  libclattn  generate --max-new N --json: "seconds" (encoder, N decoder steps, the arg-max of
             each step on the host; model loading and kernel compilation excluded)
  PyTorch    the usual loop over nn.Transformer without a cache: each step runs the decoder on
             the whole prefix (causal mask) and takes the arg-max of the last position; no_grad,
             eval, --threads threads. Skipped above --torch-max tokens (its cost grows as N²).

Both are cross-checked: the first 32 generated ids must agree (random models have near ties, so
a later divergence is reported, not fatal). The time per step at cache length L is estimated from
the difference of the totals of consecutive N. Results: decode.md and decode.json in --out.
"""
import argparse
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'tools'))
from export_torch import export_transformer  # noqa: E402

VOCAB, PAD, BOS, EOS = 1000, 0, 1, 2
D_MODEL, NHEAD, LAYERS, D_FF = 512, 8, 6, 2048


def sinusoidal(n, d):
    pos = torch.arange(n, dtype=torch.float64)[:, None]
    div = torch.pow(10000.0, torch.arange(0, d, 2, dtype=torch.float64) / d)
    pe = torch.zeros(n, d, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(pos / div)
    pe[:, 1::2] = torch.cos(pos / div)
    return pe.float()


def build_model(seed=0):
    torch.manual_seed(seed)
    t = nn.Transformer(D_MODEL, NHEAD, LAYERS, LAYERS, D_FF, dropout=0.0, batch_first=True)
    t.encoder.enable_nested_tensor = False
    src_emb, tgt_emb = nn.Embedding(VOCAB, D_MODEL), nn.Embedding(VOCAB, D_MODEL)
    gen = nn.Linear(D_MODEL, VOCAB)
    with torch.no_grad():
        gen.bias[EOS] = -1e4
    return t.eval(), src_emb, tgt_emb, gen


@torch.no_grad()
def torch_greedy(model, src, n):
    t, src_emb, tgt_emb, gen = model
    scale = math.sqrt(D_MODEL)
    pe = sinusoidal(src.shape[1] + n + 1, D_MODEL)
    memory = t.encoder(src_emb(src) * scale + pe[:src.shape[1]])
    ys = torch.tensor([[BOS]])
    for _ in range(n):
        T = ys.shape[1]
        causal = torch.triu(torch.full((T, T), float('-inf')), 1)
        h = t.decoder(tgt_emb(ys) * scale + pe[:T], memory, tgt_mask=causal)
        nxt = gen(h[:, -1]).argmax(-1, keepdim=True)
        ys = torch.cat([ys, nxt], 1)
    return ys[0, 1:].tolist()


def run_generate(exe, model_path, src_path, n):
    out = subprocess.run([exe, '--model', model_path, '--src', src_path, '--max-new', str(n),
                          '--json'], check=True, capture_output=True, text=True)
    j = json.loads(out.stdout)
    return j['seconds'], j['ids'][0], j['device']


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--generate', required=True)
    p.add_argument('--lengths', default='64,256,1024,4096')
    p.add_argument('--src-len', type=int, default=64)
    p.add_argument('--threads', type=int, default=2)
    p.add_argument('--torch-max', type=int, default=1024)
    p.add_argument('--out', default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                 'results'))
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    lengths = sorted(int(x) for x in a.lengths.split(','))
    model = build_model()
    rng = np.random.default_rng(1)
    src = rng.integers(3, VOCAB, size=(1, a.src_len)).astype(np.int64)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        model_path, src_path = os.path.join(tmp, 'model.safetensors'), os.path.join(tmp, 'src.npy')
        t, src_emb, tgt_emb, gen = model
        export_transformer(t, model_path, src_emb, tgt_emb, gen, bos_id=BOS, eos_id=EOS,
                           pad_id=PAD)
        np.save(src_path, src)
        run_generate(a.generate, model_path, src_path, 4)  # warm-up: kernel compilation
        for n in lengths:
            seconds, ids, device = run_generate(a.generate, model_path, src_path, n)
            row = {'tokens': n, 'clattn_s': seconds, 'clattn_tokens_per_s': n / seconds}
            if n <= a.torch_max:
                start = time.perf_counter()
                ref = torch_greedy(model, torch.from_numpy(src), n)
                row['torch_s'] = time.perf_counter() - start
                row['torch_tokens_per_s'] = n / row['torch_s']
                same = next((i for i, (x, y) in enumerate(zip(ids, ref)) if x != y), len(ref))
                row['ids_agree_first'] = same
                if same < min(32, n):
                    sys.exit(f'ids differ at step {same}: libclattn {ids[:same + 1]} vs '
                             f'PyTorch {ref[:same + 1]}')
            rows.append(row)
            print(json.dumps(row), flush=True)
    for prev, row in zip(rows, rows[1:]):
        row['clattn_ms_per_step_at'] = 1e3 * (row['clattn_s'] - prev['clattn_s']) / (
            row['tokens'] - prev['tokens'])
    load = os.getloadavg()
    result = {'machine': platform.processor() or platform.machine(), 'device': device,
              'torch': torch.__version__, 'threads': a.threads, 'src_len': a.src_len,
              'model': f'd_model {D_MODEL}, {NHEAD} heads, {LAYERS}+{LAYERS} layers, d_ff {D_FF}, '
                       f'vocab {VOCAB}', 'load_average': load, 'rows': rows}
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, 'decode.json'), 'w') as f:
        json.dump(result, f, indent=2)
    lines = ['# Decoding throughput (`bench/decode_bench.py`)', '',
             f'Greedy decoding of N tokens from one {a.src_len}-token source, {result["model"]}, '
             f'random weights; {a.threads} threads; device {device}; PyTorch {torch.__version__} '
             f'(no cache: the decoder re-runs the prefix each step). Load average at the end: '
             f'{load[0]:.1f}.', '',
             '| N | libclattn s | libclattn tokens/s | ms/step between this N and the previous '
             '| PyTorch s | PyTorch tokens/s | libclattn × |', '|---:|---:|---:|---:|---:|---:|---:|']
    for r in rows:
        step = f'{r["clattn_ms_per_step_at"]:.1f}' if 'clattn_ms_per_step_at' in r else '—'
        if 'torch_s' in r:
            tp = (f'{r["torch_s"]:.2f} | {r["torch_tokens_per_s"]:.1f} | '
                  f'{r["clattn_tokens_per_s"] / r["torch_tokens_per_s"]:.2f}')
        else:
            tp = '— | — | —'
        lines.append(f'| {r["tokens"]} | {r["clattn_s"]:.2f} | {r["clattn_tokens_per_s"]:.1f} | '
                     f'{step} | {tp} |')
    with open(os.path.join(a.out, 'decode.md'), 'w') as f:
        f.write('\n'.join(lines) + '\n')
    print('\n'.join(lines))


if __name__ == '__main__':
    main()
