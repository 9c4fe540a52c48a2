#!/usr/bin/env python3
"""Golden cases for the block stack's layer features that no public model reaches yet
(tests/golden/block/), computed with PyTorch in float64.

usage: ~/.cache/clattn/golden-venv/bin/python tools/gen_block_golden.py [--out DIR]
           (default tests/golden/block)
(the venv of tools/make-golden-venv.sh, from which every generator runs: tests/golden/README.md)

Files
  rmsnorm_x.npy, rmsnorm_weight.npy, rmsnorm_out.npy
      float32 x [rows, width], weight [width] and torch.nn.RMSNorm(width, eps)(x) computed in
      float64 and rounded; meta.json gives eps.
  rms_stack/model.safetensors, rms_stack/input.npy, rms_stack/out.npy
      a decoder-only stack (Llama's layer): pre-norm RMSNorm, causal grouped-query
      self-attention with RoPE (halves layout), SwiGLU feed-forward, no biases, a final RMSNorm:
          x = x + o_proj(attention(rope(q_proj(n1(x))), rope(k_proj(n1(x))), v_proj(n1(x))))
          x = x + linear2(silu(linear1_gate(n2(x))) * linear1(n2(x)))
          out = norm(x)
      under the library's names: layers.{i}.self_attn.q_proj_weight, .k_proj_weight,
      .v_proj_weight, .out_proj.weight, layers.{i}.linear1_gate.weight, .linear1.weight,
      .linear2.weight, layers.{i}.norm1.weight, .norm2.weight, norm.weight. Query head h reads
      key/value head h // (nhead / kv_heads). meta.json gives the sizes, eps, rope_theta and the
      tolerance.
  qwen3_stack/ (the same files)
      rms_stack's layer with Qwen3's per-head q/k RMSNorm (Qwen3Attention): q and k are normed
      over each head's d_k with layers.{i}.self_attn.q_norm.weight / .k_norm.weight [dk] (eps
      the layers' eps) after the projection and before RoPE:
          q = rope(q_norm(q_proj(n1(x)) per head)),  k = rope(k_norm(k_proj(n1(x)) per head))
  gemma2_stack/ (the same files)
      rms_stack's layer with Gemma 2's attention-logit soft-capping (eager_attention_forward):
      s = softcap * tanh((q k^T / sqrt(dk)) / softcap) before the causal mask and the softmax,
      and a GeGLU feed-forward (gelu with the tanh approximation). (Gemma 2's other traits, the
      norms around each sub-layer and the (1 + weight) RMSNorm, are not part of this case.)
"""
import argparse
import json
import os
import struct

import numpy as np
import torch


def write_safetensors(path, tensors):
    """F32 safetensors: 8-byte header length, JSON header (padded to 8), the data."""
    header, blobs, offset = {}, [], 0
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


def f32(t):
    """A float32 tensor's values as float64 (what the library reads)."""
    return t.to(torch.float32).to(torch.float64)


def rms(x, w, eps):
    norm = torch.nn.RMSNorm(x.shape[-1], eps=eps, dtype=torch.float64)
    with torch.no_grad():
        norm.weight.copy_(w)
        return norm(x)


def rope(x, theta, pos0=0):
    """Rotary embeddings, halves layout (transformers' rotate_half), on x [B, H, N, d]."""
    d, n = x.shape[-1], x.shape[-2]
    inv = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    ang = torch.arange(pos0, pos0 + n, dtype=torch.float64)[:, None] * inv[None, :]
    cos, sin = torch.cat([ang.cos(), ang.cos()], -1), torch.cat([ang.sin(), ang.sin()], -1)
    half = d // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], -1)
    return x * cos + rotated * sin


def rms_stack(seed, B, N, d, H, KV, dk, ff, L, eps, theta, qk_norm=False, softcap=0.0,
              act='silu'):
    g = torch.Generator().manual_seed(seed)

    def uni(*shape, bound):
        return f32((torch.rand(*shape, generator=g, dtype=torch.float64) * 2 - 1) * bound)

    w = {}
    for i in range(L):
        p = f'layers.{i}.'
        w[p + 'self_attn.q_proj_weight'] = uni(H * dk, d, bound=d ** -0.5)
        w[p + 'self_attn.k_proj_weight'] = uni(KV * dk, d, bound=d ** -0.5)
        w[p + 'self_attn.v_proj_weight'] = uni(KV * dk, d, bound=d ** -0.5)
        w[p + 'self_attn.out_proj.weight'] = uni(d, H * dk, bound=(H * dk) ** -0.5)
        w[p + 'linear1_gate.weight'] = uni(ff, d, bound=d ** -0.5)
        w[p + 'linear1.weight'] = uni(ff, d, bound=d ** -0.5)
        w[p + 'linear2.weight'] = uni(d, ff, bound=ff ** -0.5)
        w[p + 'norm1.weight'] = f32(1 + 0.2 * uni(d, bound=1.0))
        w[p + 'norm2.weight'] = f32(1 + 0.2 * uni(d, bound=1.0))
        if qk_norm:
            w[p + 'self_attn.q_norm.weight'] = f32(1 + 0.5 * uni(dk, bound=1.0))
            w[p + 'self_attn.k_norm.weight'] = f32(1 + 0.5 * uni(dk, bound=1.0))
    w['norm.weight'] = f32(1 + 0.2 * uni(d, bound=1.0))
    x0 = uni(B, N, d, bound=1.0)

    x = x0.clone()
    causal = torch.ones(N, N, dtype=torch.bool).tril()
    for i in range(L):
        p = f'layers.{i}.'
        h = rms(x, w[p + 'norm1.weight'], eps)
        q = (h @ w[p + 'self_attn.q_proj_weight'].T).view(B, N, H, dk).transpose(1, 2)
        k = (h @ w[p + 'self_attn.k_proj_weight'].T).view(B, N, KV, dk).transpose(1, 2)
        v = (h @ w[p + 'self_attn.v_proj_weight'].T).view(B, N, KV, dk).transpose(1, 2)
        if qk_norm:
            q = rms(q, w[p + 'self_attn.q_norm.weight'], eps)
            k = rms(k, w[p + 'self_attn.k_norm.weight'], eps)
        q, k = rope(q, theta), rope(k, theta)
        k = k.repeat_interleave(H // KV, dim=1)
        v = v.repeat_interleave(H // KV, dim=1)
        s = (q @ k.transpose(-1, -2)) / dk ** 0.5
        if softcap > 0:
            s = softcap * torch.tanh(s / softcap)
        s = s.masked_fill(~causal, float('-inf'))
        a = (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(B, N, H * dk)
        x = x + a @ w[p + 'self_attn.out_proj.weight'].T
        h = rms(x, w[p + 'norm2.weight'], eps)
        h_gate = h @ w[p + 'linear1_gate.weight'].T
        gate = (torch.nn.functional.silu(h_gate) if act == 'silu'
                else torch.nn.functional.gelu(h_gate, approximate='tanh'))
        x = x + (gate * (h @ w[p + 'linear1.weight'].T)) @ w[p + 'linear2.weight'].T
    out = rms(x, w['norm.weight'], eps)
    return w, x0, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--out', default=os.path.join(os.path.dirname(__file__), '..', 'tests',
                                                  'golden', 'block'))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(34)
    eps = 1e-6
    rows, width = 7, 40
    x = f32(torch.randn(rows, width, generator=g, dtype=torch.float64) * 3)
    weight = f32(1 + 0.5 * torch.randn(width, generator=g, dtype=torch.float64))
    np.save(os.path.join(args.out, 'rmsnorm_x.npy'), x.numpy().astype(np.float32))
    np.save(os.path.join(args.out, 'rmsnorm_weight.npy'), weight.numpy().astype(np.float32))
    np.save(os.path.join(args.out, 'rmsnorm_out.npy'),
            rms(x, weight, eps).detach().numpy().astype(np.float32))

    cfg = dict(B=2, N=9, d=32, H=4, KV=2, dk=8, ff=48, L=2, eps=1e-6, theta=10000.0)
    cases = {'rms_stack': (7, cfg),
             'qwen3_stack': (8, dict(cfg, qk_norm=True)),
             'gemma2_stack': (9, dict(cfg, softcap=0.5, act='gelu_tanh'))}
    for name, (seed, c) in cases.items():
        os.makedirs(os.path.join(args.out, name), exist_ok=True)
        w, x0, out = rms_stack(seed, **c)
        write_safetensors(os.path.join(args.out, name, 'model.safetensors'), w)
        np.save(os.path.join(args.out, name, 'input.npy'), x0.numpy().astype(np.float32))
        np.save(os.path.join(args.out, name, 'out.npy'),
                out.detach().numpy().astype(np.float32))
    meta = {'rmsnorm': {'eps': eps, 'rows': rows, 'width': width},
            'rms_stack': dict(cfg, tolerance=2e-5),
            'qwen3_stack': dict(cases['qwen3_stack'][1], tolerance=2e-5),
            'gemma2_stack': dict(cases['gemma2_stack'][1], tolerance=2e-5),
            'torch_version': torch.__version__,
            'description': 'tools/gen_block_golden.py: torch.nn.RMSNorm, and Llama-, Qwen3- '
                           'and Gemma-2-style decoder-only stacks, in float64'}
    with open(os.path.join(args.out, 'meta.json'), 'w') as f:
        json.dump(meta, f, indent=2)
        f.write('\n')


if __name__ == '__main__':
    main()
