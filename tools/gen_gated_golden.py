#!/usr/bin/env python3
"""Golden cases for the encoder's gated feed-forward and bias-free layers (tests/golden/gated/).

usage: ~/.cache/clattn/golden-venv/bin/python tools/gen_gated_golden.py [--out DIR]
           (default tests/golden/gated)
(the venv of tools/make-golden-venv.sh, from which every generator runs: tests/golden/README.md)

Each case directory holds
  meta.json          the configuration (the clattn_encoder_config fields it sets), tolerance,
                     description, torch_version
  model.safetensors  F32 weights under the library's encoder names (include/clattn/encoder.h):
                     layers.{i}.self_attn.in_proj_weight, .in_proj_bias, .out_proj.weight,
                     .out_proj.bias, layers.{i}.linear1_gate.weight / .bias (gated),
                     layers.{i}.linear1.weight / .bias, layers.{i}.linear2.weight / .bias,
                     layers.{i}.norm1.weight / .bias, layers.{i}.norm2.weight / .bias,
                     norm.weight / .bias (final_norm); the .bias tensors are absent with
                     linear_no_bias (linears) or norm_no_bias (LayerNorms)
  input.npy          float32 [B, N, d_model]
  key_padding_mask.npy  float32 [B, N], 1 marks padding
  out.npy            float32 [B, N, d_model]: the encoder in float64 PyTorch, rounded

The reference runs in float64: nn.MultiheadAttention (bias=False without linear biases),
F.layer_norm (bias None without norm biases), and the feed-forward
    FF(x) = linear2(act(linear1_gate(x)) * linear1(x))      gated (SwiGLU: silu, GeGLU: gelu)
    FF(x) = linear2(act(linear1(x)))                        otherwise
with post-LN x = LN1(x + SA(x)); x = LN2(x + FF(x)) or pre-LN x = x + SA(LN1(x));
x = x + FF(LN2(x)). Rows under the padding mask are computed as PyTorch computes them.
"""
import argparse
import json
import os
import struct
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

ACTS = {
    'relu': F.relu,
    'gelu': lambda z: F.gelu(z),
    'gelu_tanh': lambda z: F.gelu(z, approximate='tanh'),
    'silu': F.silu,
}


def write_safetensors(path, tensors, metadata):
    """F32 safetensors: 8-byte header length, JSON header (padded to 8), the data."""
    header, blobs, offset = {'__metadata__': metadata}, [], 0
    for name, t in tensors.items():
        a = np.ascontiguousarray(t.detach().numpy().astype('<f4'))
        header[name] = {'dtype': 'F32', 'shape': list(a.shape),
                        'data_offsets': [offset, offset + a.nbytes]}
        blobs.append(a.tobytes())
        offset += a.nbytes
    raw = json.dumps(header, separators=(',', ':')).encode()
    raw += b' ' * (-len(raw) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(raw)))
        f.write(raw)
        for b in blobs:
            f.write(b)


def make_case(seed, d, H, ff, L, B, lengths, activation, gated, norm_first, linear_no_bias,
              norm_no_bias, final_norm, eps=1e-5):
    g = torch.Generator().manual_seed(seed)

    def uni(*shape, bound):
        return (torch.rand(*shape, generator=g, dtype=torch.float64) * 2 - 1) * bound

    N = max(lengths)
    W = {}
    layers = []
    bias = not linear_no_bias
    for i in range(L):
        p = f'layers.{i}.'
        # train() (dropout 0) keeps PyTorch off its fast path, which rejects bias=False.
        mha = nn.MultiheadAttention(d, H, bias=bias, batch_first=True).double().train()
        with torch.no_grad():
            mha.in_proj_weight.copy_(uni(3 * d, d, bound=(6.0 / (4 * d)) ** 0.5))
            mha.out_proj.weight.copy_(uni(d, d, bound=d ** -0.5))
            W[p + 'self_attn.in_proj_weight'] = mha.in_proj_weight
            W[p + 'self_attn.out_proj.weight'] = mha.out_proj.weight
            if bias:
                mha.in_proj_bias.copy_(uni(3 * d, bound=0.5))
                mha.out_proj.bias.copy_(uni(d, bound=0.5))
                W[p + 'self_attn.in_proj_bias'] = mha.in_proj_bias
                W[p + 'self_attn.out_proj.bias'] = mha.out_proj.bias
        lw = {'mha': mha}
        for name, shape in [('linear1', (ff, d)), ('linear2', (d, ff))] + \
                ([('linear1_gate', (ff, d))] if gated else []):
            lw[name + '.weight'] = uni(*shape, bound=shape[1] ** -0.5)
            W[p + name + '.weight'] = lw[name + '.weight']
            lw[name + '.bias'] = uni(shape[0], bound=0.5) if bias else None
            if bias:
                W[p + name + '.bias'] = lw[name + '.bias']
        for name in ('norm1', 'norm2'):
            lw[name + '.weight'] = 1 + 0.3 * uni(d, bound=1)
            W[p + name + '.weight'] = lw[name + '.weight']
            lw[name + '.bias'] = None if norm_no_bias else 0.3 * uni(d, bound=1)
            if not norm_no_bias:
                W[p + name + '.bias'] = lw[name + '.bias']
        layers.append(lw)
    final = None
    if final_norm:
        final = (1 + 0.3 * uni(d, bound=1), None if norm_no_bias else 0.3 * uni(d, bound=1))
        W['norm.weight'] = final[0]
        if not norm_no_bias:
            W['norm.bias'] = final[1]

    x = uni(B, N, d, bound=1).float().double()  # the float32 input, exactly
    kpm = torch.zeros(B, N, dtype=torch.bool)
    for b, n in enumerate(lengths):
        kpm[b, n:] = True
    act = ACTS[activation]

    def ln(z, w, b):
        return F.layer_norm(z, (d,), w, b, eps)

    def ffn(z, lw):
        up = F.linear(z, lw['linear1.weight'], lw['linear1.bias'])
        h = act(F.linear(z, lw['linear1_gate.weight'], lw['linear1_gate.bias'])) * up \
            if gated else act(up)
        return F.linear(h, lw['linear2.weight'], lw['linear2.bias'])

    def sa(z, lw):
        return lw['mha'](z, z, z, key_padding_mask=kpm, need_weights=False)[0]

    with torch.no_grad():
        # Weights rounded to float32 first: the library computes with exactly these values.
        for lw in layers:
            for k, v in list(lw.items()):
                if isinstance(v, torch.Tensor):
                    v.copy_(v.float().double())
            for prm in lw['mha'].parameters():
                prm.copy_(prm.float().double())
        if final:
            for v in final:
                if v is not None:
                    v.copy_(v.float().double())
        h = x
        for lw in layers:
            if norm_first:
                h = h + sa(ln(h, lw['norm1.weight'], lw['norm1.bias']), lw)
                h = h + ffn(ln(h, lw['norm2.weight'], lw['norm2.bias']), lw)
            else:
                h = ln(h + sa(h, lw), lw['norm1.weight'], lw['norm1.bias'])
                h = ln(h + ffn(h, lw), lw['norm2.weight'], lw['norm2.bias'])
        if final:
            h = ln(h, *final)
    assert torch.isfinite(h).all()
    config = {'d_model': d, 'nhead': H, 'num_layers': L, 'dim_feedforward': ff,
              'activation': activation, 'ffn_gated': int(gated), 'norm_first': int(norm_first),
              'linear_no_bias': int(linear_no_bias), 'norm_no_bias': int(norm_no_bias),
              'final_norm': int(final_norm), 'layer_norm_eps': eps}
    return config, W, x.float().numpy(), kpm.float().numpy(), h.float().numpy()


CASES = [
    ('swiglu_pre_ln', 'SwiGLU, pre-LN, biases, final norm', 1,
     dict(activation='silu', gated=True, norm_first=True, linear_no_bias=False,
          norm_no_bias=False, final_norm=True)),
    ('geglu_post_ln', 'GeGLU (exact gelu), post-LN, biases', 2,
     dict(activation='gelu', gated=True, norm_first=False, linear_no_bias=False,
          norm_no_bias=False, final_norm=False)),
    ('geglu_tanh_pre_ln', 'GeGLU (tanh gelu), pre-LN, biases', 3,
     dict(activation='gelu_tanh', gated=True, norm_first=True, linear_no_bias=False,
          norm_no_bias=False, final_norm=False)),
    ('swiglu_no_bias_post_ln', 'SwiGLU, post-LN, no biases in linears or LayerNorms', 4,
     dict(activation='silu', gated=True, norm_first=False, linear_no_bias=True,
          norm_no_bias=True, final_norm=False)),
    ('no_bias_pre_ln', 'ungated gelu, pre-LN, no linear biases, no norm biases, final norm', 5,
     dict(activation='gelu', gated=False, norm_first=True, linear_no_bias=True,
          norm_no_bias=True, final_norm=True)),
    ('linear_no_bias_post_ln', 'ungated relu, post-LN, no linear biases, norm biases kept', 6,
     dict(activation='relu', gated=False, norm_first=False, linear_no_bias=True,
          norm_no_bias=False, final_norm=False)),
    ('silu_post_ln', 'ungated silu, post-LN, biases', 7,
     dict(activation='silu', gated=False, norm_first=False, linear_no_bias=False,
          norm_no_bias=False, final_norm=False)),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--out', default=os.path.join(os.path.dirname(__file__), '..', 'tests',
                                                  'golden', 'gated'))
    args = ap.parse_args()
    for name, description, seed, kw in CASES:
        config, W, x, kpm, out = make_case(seed, d=32, H=4, ff=48, L=2, B=3, lengths=(7, 5, 2),
                                           **kw)
        case = os.path.join(args.out, name)
        os.makedirs(case, exist_ok=True)
        # The header's __metadata__ as clattn_encoder_load_file reads it (encoder.h).
        md = {k: str(config[k]) for k in ('d_model', 'nhead', 'num_layers', 'dim_feedforward')}
        md.update(activation=config['activation'], layer_norm_eps=repr(config['layer_norm_eps']),
                  positional='none',
                  **{k: ('true' if config[k] else 'false')
                     for k in ('norm_first', 'ffn_gated', 'linear_no_bias', 'norm_no_bias')})
        write_safetensors(os.path.join(case, 'model.safetensors'), W, md)
        np.save(os.path.join(case, 'input.npy'), x)
        np.save(os.path.join(case, 'key_padding_mask.npy'), kpm)
        np.save(os.path.join(case, 'out.npy'), out)
        meta = {'description': description, 'torch_version': torch.__version__,
                'tolerance': 1e-5, 'config': config, 'tensors': sorted(W)}
        with open(os.path.join(case, 'meta.json'), 'w') as f:
            json.dump(meta, f, indent=1)
            f.write('\n')
        print(f'{name}: {len(W)} tensors, |out| max {np.abs(out).max():.3f}', file=sys.stderr)


if __name__ == '__main__':
    main()
