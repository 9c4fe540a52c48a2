#!/usr/bin/env python3
"""Generates the PyTorch golden files for libclattn's attention and encoder tests.

usage: ~/.cache/clattn/golden-venv/bin/python tools/gen_golden.py [--out DIR]
(the venv of tools/make-golden-venv.sh, from which every generator runs: tests/golden/README.md)

Needs only torch and numpy (and tools/export_torch.py, imported from this directory). Writes
one directory per case under DIR (default: tests/golden next to this script's parent), removing
and rewriting each case directory it generates; prints one line per case. Everything is
deterministic: float32, torch.set_num_threads(1), torch.no_grad(), modules in eval() mode,
torch.manual_seed(<fixed per-case seed>) before each case.

Format of a case directory tests/golden/<case>/:

  meta.json   JSON object, see below.
  *.npy       np.save of C-contiguous little-endian arrays: float32 ('<f4') for float data,
              numpy bool ('|b1') for boolean masks, int64 ('<i8') for token ids.
  model.safetensors   (kind "encoder" only) the model, written by tools/export_torch.py.

meta.json keys present in every case:
  "kind"          "mha" | "timm_attention" | "encoder"
  "description"   one sentence
  "torch_version" torch.__version__ that produced the file
  "tolerance"     max abs error allowed against the stored outputs
  "arrays"        {file name: {"dtype": "float32"|"bool"|"int64", "shape": [...]}} for every
                  .npy stored

kind "mha": nn.MultiheadAttention(embed_dim, num_heads, bias=bias, kdim=kdim, vdim=vdim,
batch_first=True), called as mha(query, key, value, key_padding_mask=..., need_weights=...,
attn_mask=..., average_attn_weights=...).
  "embed_dim", "num_heads", "kdim", "vdim"   ints (kdim/vdim equal embed_dim when not given)
  "bias"            PyTorch's bias flag (in_proj_bias and out_proj.bias both present)
  "batch", "seq_q", "seq_k"
  "self_attention"  true: query, key and value were the same tensor; only query.npy is stored
  "causal"          true: the call used attn_mask = torch.triu(torch.ones(Nq, Nk, dtype=bool), 1)
                    (PyTorch 1.13's MHA has no is_causal); no attn_mask.npy is stored
  "attn_mask"       null | "bool" | "float"   (attn_mask.npy; bool True = masked out (-inf),
                    float = added to the scaled scores)
  "attn_mask_shape" null | [Nq, Nk] | [B*num_heads, Nq, Nk] (3-D index is b*num_heads + head)
  "key_padding_mask" null | "bool" | "float"  (key_padding_mask.npy, [B, Nk]; same semantics)
  "need_weights", "average_attn_weights"  bools; when need_weights, attn_weights.npy holds
                    PyTorch's returned weights: [B, Nq, Nk] averaged over heads, else
                    [B, num_heads, Nq, Nk]
  Arrays: query.npy [B,Nq,E], key.npy [B,Nk,kdim], value.npy [B,Nk,vdim] (unless
  self_attention); the module's state_dict with '.' replaced by '_': in_proj_weight.npy [3E,E]
  when kdim == vdim == E, else q_proj_weight.npy [E,E], k_proj_weight.npy [E,kdim],
  v_proj_weight.npy [E,vdim]; in_proj_bias.npy [3E] and out_proj_bias.npy [E] when bias;
  out_proj_weight.npy [E,E]; out.npy [B,Nq,E] (PyTorch's output); attn_weights.npy as above.

kind "timm_attention": timm's vision_transformer Attention(dim, num_heads, qkv_bias), which is
reimplemented below (TimmAttention) exactly as timm writes it.
  "dim", "num_heads", "qkv_bias", "batch", "seq"
  Arrays: x.npy [B,N,dim], qkv_weight.npy [3*dim,dim], qkv_bias.npy [3*dim] (if qkv_bias),
  proj_weight.npy [dim,dim], proj_bias.npy [dim], out.npy [B,N,dim].

kind "encoder": a Transformer encoder stored as model.safetensors (format and tensor names in
the docstring of tools/export_torch.py; the header's __metadata__ repeats d_model ... positional
as strings). out.npy is what PyTorch computes (batch_first=True, eval(), no_grad):
    x = input                            or  x = embedding(tokens) * sqrt(d_model)
    if positional == "sinusoidal": x = x + PE[:N]   (PE[pos, 2i] = sin(pos / 10000^(2i/d_model)),
                                   PE[pos, 2i+1] = cos(...), float64 cast to float32)
    out = nn.TransformerEncoder(layer, num_layers, norm=LayerNorm or None,
                                enable_nested_tensor=False)(x, mask=..., src_key_padding_mask=...)
  (module "TransformerEncoderLayer": out = layer(x, ...), exported as a 1-layer encoder).
  "d_model", "nhead", "num_layers", "dim_feedforward"   ints
  "activation"      "relu" | "gelu" (exact, erf)
  "norm_first"      false: post-LN, x = norm1(x + sa(x)); x = norm2(x + ff(x))
                    true:  pre-LN,  x = x + sa(norm1(x)); x = x + ff(norm2(x))
  "layer_norm_eps"  float, used by every LayerNorm (biased variance, eps inside the sqrt)
  "final_norm"      bool: a final LayerNorm (norm.weight/norm.bias) after the last layer
  "positional"      "none" | "sinusoidal" (input.npy holds x before the table is added)
  "causal"          true: mask = triu of -inf above the diagonal (no mask file stored)
  "input"           "input" (input.npy [B,N,d_model] float32) | "tokens" (tokens.npy [B,N]
                    int64 indices into embedding.weight)
  "key_padding_mask" bool: key_padding_mask.npy [B,N] bool present (True = padding key, -inf);
                    out holds every position, padded ones included (never zeroed)
  "batch", "seq"
  "model"           "model.safetensors"; "model_dtype" "F32" | "F16" | "BF16" (every tensor in
                    the file; out was computed from exactly those rounded weights)
  "module"          "TransformerEncoder" | "TransformerEncoderLayer" (what was exported)
  "vocab"           null | embedding rows (input "tokens")
  Arrays: input.npy or tokens.npy, key_padding_mask.npy (if any), out.npy [B,N,d_model].
  "tolerance" is 1e-4 (several float32 layers); the float64 check below uses 1e-5.

Every case is cross-checked before it is written: an independent float64 NumPy implementation
recomputes the outputs (and attention weights) from the stored arrays and meta, and must agree
with PyTorch to within the case tolerance. For encoder cases it reads model.safetensors back with
its own parser (read_safetensors, strict about the layout) and checks that the file holds exactly
the module's parameters in state_dict order before running the whole pipeline in float64.
"""
import argparse
import json
import math
import os
import re
import shutil
import struct
import sys
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_torch import export  # noqa: E402  (tools/export_torch.py writes model.safetensors)

TOLERANCE = 1e-5
ENC_TOLERANCE = 1e-4  # what the encoder cases allow the C library (several layers, float32)
ENC_CHECK = 1e-5      # what the float64 reference must agree with PyTorch to, per encoder case
DEFAULT_OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                           'tests', 'golden')


class TimmAttention(nn.Module):
    """timm.models.vision_transformer.Attention (no qk_norm, no dropout), written as timm does."""

    def __init__(self, dim, num_heads=8, qkv_bias=False):
        super().__init__()
        assert dim % num_heads == 0, 'dim should be divisible by num_heads'
        self.num_heads = num_heads
        head_dim = dim // num_heads
        self.scale = head_dim ** -0.5
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        attn = (q @ k.transpose(-2, -1)) * self.scale
        attn = attn.softmax(dim=-1)
        x = (attn @ v).transpose(1, 2).reshape(B, N, C)
        x = self.proj(x)
        return x


# ---------------------------------------------------------------------------------------------
# float64 NumPy reference (independent of PyTorch)
# ---------------------------------------------------------------------------------------------

def _softmax64(scores):
    m = np.max(scores, axis=-1, keepdims=True)
    e = np.exp(scores - m)
    return e / np.sum(e, axis=-1, keepdims=True)


def _additive(mask):
    """bool True -> -inf, float -> as is; returned as float64."""
    if mask.dtype == np.bool_:
        return np.where(mask, -np.inf, 0.0)
    return mask.astype(np.float64)


def ref_mha(meta, arrays):
    """Returns (out [B,Nq,E], weights [B,H,Nq,Nk]) in float64 from the stored arrays."""
    f64 = {k: v.astype(np.float64) if v.dtype != np.bool_ else v for k, v in arrays.items()}
    E, H = meta['embed_dim'], meta['num_heads']
    B, Nq, Nk = meta['batch'], meta['seq_q'], meta['seq_k']
    D = E // H
    x_q = f64['query']
    x_k = x_q if meta['self_attention'] else f64['key']
    x_v = x_q if meta['self_attention'] else f64['value']
    if 'in_proj_weight' in f64:
        wq, wk, wv = np.split(f64['in_proj_weight'], 3, axis=0)
    else:
        wq, wk, wv = f64['q_proj_weight'], f64['k_proj_weight'], f64['v_proj_weight']
    if meta['bias']:
        bq, bk, bv = np.split(f64['in_proj_bias'], 3)
        bo = f64['out_proj_bias']
    else:
        bq = bk = bv = np.zeros(E)
        bo = np.zeros(E)
    q = x_q @ wq.T + bq  # [B,Nq,E]
    k = x_k @ wk.T + bk
    v = x_v @ wv.T + bv
    # split heads: [B,H,N,D]
    q = q.reshape(B, Nq, H, D).transpose(0, 2, 1, 3)
    k = k.reshape(B, Nk, H, D).transpose(0, 2, 1, 3)
    v = v.reshape(B, Nk, H, D).transpose(0, 2, 1, 3)
    scores = (q / np.sqrt(D)) @ k.transpose(0, 1, 3, 2)  # [B,H,Nq,Nk]
    if meta['causal']:
        scores = scores + np.where(np.triu(np.ones((Nq, Nk), dtype=bool), 1), -np.inf, 0.0)
    if meta['attn_mask'] is not None:
        am = _additive(arrays['attn_mask'])
        if am.ndim == 3:
            am = am.reshape(B, H, Nq, Nk)
        scores = scores + am
    if meta['key_padding_mask'] is not None:
        kpm = _additive(arrays['key_padding_mask'])  # [B,Nk]
        scores = scores + kpm[:, None, None, :]
    w = _softmax64(scores)
    ctx = (w @ v).transpose(0, 2, 1, 3).reshape(B, Nq, E)
    out = ctx @ f64['out_proj_weight'].T + bo
    return out, w


def ref_timm(meta, arrays):
    dim, H = meta['dim'], meta['num_heads']
    B, N = meta['batch'], meta['seq']
    D = dim // H
    x = arrays['x'].astype(np.float64)
    qkv = x @ arrays['qkv_weight'].astype(np.float64).T
    if meta['qkv_bias']:
        qkv = qkv + arrays['qkv_bias'].astype(np.float64)
    qkv = qkv.reshape(B, N, 3, H, D).transpose(2, 0, 3, 1, 4)
    q, k, v = qkv[0], qkv[1], qkv[2]
    w = _softmax64((q @ k.transpose(0, 1, 3, 2)) * D ** -0.5)
    ctx = (w @ v).transpose(0, 2, 1, 3).reshape(B, N, dim)
    return ctx @ arrays['proj_weight'].astype(np.float64).T + arrays['proj_bias'].astype(np.float64)


def read_safetensors(blob):
    """Parses a safetensors file (bytes) independently of export_torch. Returns (metadata,
    {name: float64 array}, names in data order, {name: dtype}). Checks the layout strictly: header
    length a multiple of 8, JSON padded with spaces only, data offsets contiguous from 0 to the
    end of the file, sizes matching shapes and dtypes."""
    (n,) = struct.unpack('<Q', blob[:8])
    assert n % 8 == 0 and 8 + n <= len(blob), n
    text = blob[8:8 + n]
    assert text.startswith(b'{') and text.rstrip(b' ').endswith(b'}'), 'bad header padding'
    header = json.loads(text.decode('utf-8'))
    metadata = header.pop('__metadata__')
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()), metadata
    data = blob[8 + n:]
    sizes = {'F32': 4, 'F16': 2, 'BF16': 2}
    tensors, order, dtypes, pos = {}, [], {}, 0
    for name, info in sorted(header.items(), key=lambda kv: kv[1]['data_offsets'][0]):
        begin, end = info['data_offsets']
        shape, dt = info['shape'], info['dtype']
        count = int(np.prod(shape, dtype=np.int64))
        assert begin == pos and end - begin == count * sizes[dt], (name, info)
        raw = data[begin:end]
        if dt == 'F32':
            a = np.frombuffer(raw, '<f4')
        elif dt == 'F16':
            a = np.frombuffer(raw, '<f2')
        else:  # BF16: the upper half of a float32
            a = (np.frombuffer(raw, '<u2').astype('<u4') << 16).view('<f4')
        tensors[name] = a.astype(np.float64).reshape(shape)
        order.append(name)
        dtypes[name] = dt
        pos = end
    assert pos == len(data), 'trailing bytes after the last tensor'
    return metadata, tensors, order, dtypes


def _layer_norm64(x, w, b, eps):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)  # biased variance, eps inside the sqrt
    return (x - mu) / np.sqrt(var + eps) * w + b


_erf = np.vectorize(math.erf)


def _sinusoid64(n, d):
    """PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(same), element by element."""
    pe = np.zeros((n, d))
    for pos in range(n):
        for i in range(0, d, 2):
            angle = pos / 10000.0 ** (i / d)
            pe[pos, i] = math.sin(angle)
            if i + 1 < d:
                pe[pos, i + 1] = math.cos(angle)
    return pe


def ref_encoder(meta, metadata, T, arrays):
    """The whole encoder in float64 from the safetensors metadata and tensors T and the case
    inputs: embedding * sqrt(d_model), sinusoidal PE, per layer packed-in_proj MHA + FFN with
    post- or pre-LN, final LayerNorm; masks from meta (causal) and key_padding_mask.npy."""
    d, H = int(metadata['d_model']), int(metadata['nhead'])
    L, eps = int(metadata['num_layers']), float(metadata['layer_norm_eps'])
    norm_first = {'true': True, 'false': False}[metadata['norm_first']]
    act = {'relu': lambda z: np.maximum(z, 0.0),
           'gelu': lambda z: 0.5 * z * (1.0 + _erf(z / math.sqrt(2.0)))}[metadata['activation']]
    D = d // H
    if 'tokens' in arrays:
        x = T['embedding.weight'][arrays['tokens']] * math.sqrt(d)
    else:
        x = arrays['input'].astype(np.float64)
    B, N = x.shape[:2]
    if metadata['positional'] == 'sinusoidal':
        x = x + _sinusoid64(N, d)
    else:
        assert metadata['positional'] == 'none'
    add = np.zeros((B, 1, N, N))  # added to the scaled scores [B, H, Nq, Nk]
    if meta['causal']:
        add = add + np.where(np.triu(np.ones((N, N), dtype=bool), 1), -np.inf, 0.0)
    if 'key_padding_mask' in arrays:
        add = add + np.where(arrays['key_padding_mask'], -np.inf, 0.0)[:, None, None, :]

    def sa(z, p):
        qkv = z @ T[p + 'self_attn.in_proj_weight'].T + T[p + 'self_attn.in_proj_bias']
        q, k, v = (t.reshape(B, N, H, D).transpose(0, 2, 1, 3) for t in np.split(qkv, 3, -1))
        w = _softmax64(q @ k.transpose(0, 1, 3, 2) / math.sqrt(D) + add)
        ctx = (w @ v).transpose(0, 2, 1, 3).reshape(B, N, d)
        return ctx @ T[p + 'self_attn.out_proj.weight'].T + T[p + 'self_attn.out_proj.bias']

    def ff(z, p):
        h = act(z @ T[p + 'linear1.weight'].T + T[p + 'linear1.bias'])
        return h @ T[p + 'linear2.weight'].T + T[p + 'linear2.bias']

    def ln(z, p):
        return _layer_norm64(z, T[p + 'weight'], T[p + 'bias'], eps)

    for i in range(L):
        p = f'layers.{i}.'
        if norm_first:
            x = x + sa(ln(x, p + 'norm1.'), p)
            x = x + ff(ln(x, p + 'norm2.'), p)
        else:
            x = ln(x + sa(x, p), p + 'norm1.')
            x = ln(x + ff(x, p), p + 'norm2.')
    if 'norm.weight' in T:
        x = ln(x, 'norm.')
    return x


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------

def _np(t):
    a = t.detach().cpu().contiguous().numpy()
    if a.dtype == np.bool_:
        return np.ascontiguousarray(a)
    return np.ascontiguousarray(a, dtype='<f4')


def _randomize_biases(module):
    for name, p in module.named_parameters():
        if name.endswith('bias'):
            with torch.no_grad():
                p.uniform_(-0.5, 0.5)


def _bool_mask(shape, p=0.35):
    """Random bool mask (True = masked) that never masks an entire row (PyTorch 1.13 returns NaN
    for fully masked rows)."""
    m = torch.rand(shape) < p
    flat = m.reshape(-1, shape[-1])
    for r in range(flat.shape[0]):
        flat[r, int(torch.randint(shape[-1], ()))] = False  # keep one key visible in every row
    assert bool(flat.any()), 'mask has no True entry; pick another seed'
    assert not bool(flat.all(dim=-1).any())
    return flat.reshape(shape)


_NPY_DTYPES = {np.dtype('<f4'): 'float32', np.dtype(np.bool_): 'bool', np.dtype('<i8'): 'int64'}


def _write_case(root, name, meta, arrays, files=None):
    """files: {file name: bytes} written as they are (encoder cases: model.safetensors)."""
    d = os.path.join(root, name)
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    meta = dict(meta)
    meta['arrays'] = {}
    for key in sorted(arrays):
        a = arrays[key]
        assert a.flags['C_CONTIGUOUS']
        assert a.dtype in _NPY_DTYPES, (key, a.dtype)
        np.save(os.path.join(d, key + '.npy'), a)
        meta['arrays'][key + '.npy'] = {'dtype': _NPY_DTYPES[a.dtype], 'shape': list(a.shape)}
    for fname, blob in sorted((files or {}).items()):
        with open(os.path.join(d, fname), 'wb') as f:
            f.write(blob)
    with open(os.path.join(d, 'meta.json'), 'w') as f:
        text = json.dumps(meta, indent=2)
        # Keep shape lists on one line.
        text = re.sub(r'("(?:attn_mask_)?shape": )\[([\d,\s]*)\]',
                      lambda m: m.group(1) + '[' + ', '.join(m.group(2).replace(',', ' ').split())
                      + ']', text)
        f.write(text + '\n')


def _check(name, got, want, tol):
    diff = float(np.max(np.abs(got.astype(np.float64) - want)))
    assert np.all(np.isfinite(got)), f'{name}: non-finite values in PyTorch output'
    assert diff < tol, f'{name}: float64 reference differs from PyTorch by {diff:.3g} (tol {tol})'
    return diff


# ---------------------------------------------------------------------------------------------
# case builders
# ---------------------------------------------------------------------------------------------

def make_mha(name, description, seed, E, H, B, Nq, Nk=None, kdim=None, vdim=None, bias=True,
             self_attention=True, causal=False, attn_mask=None, attn_mask_3d=False,
             key_padding_mask=None, need_weights=True, average_attn_weights=True,
             randomize_biases=True, inputs=None, extra_meta=None, neg_inf_in_masks=False):
    torch.manual_seed(seed)
    Nk = Nq if Nk is None else Nk
    if self_attention:
        assert Nk == Nq and kdim in (None, E) and vdim in (None, E)
    mha = nn.MultiheadAttention(E, H, bias=bias, kdim=kdim, vdim=vdim, batch_first=True).eval()
    if bias and randomize_biases:
        _randomize_biases(mha)
    kdim_v = E if kdim is None else kdim
    vdim_v = E if vdim is None else vdim

    if inputs is not None:
        query = inputs
    else:
        query = torch.rand(B, Nq, E) * 2 - 1
    if self_attention:
        key = value = query
    else:
        key = torch.rand(B, Nk, kdim_v) * 2 - 1
        value = torch.rand(B, Nk, vdim_v) * 2 - 1

    am = None
    if causal:
        assert attn_mask is None
        am = torch.triu(torch.ones(Nq, Nk, dtype=torch.bool), 1)
    elif attn_mask is not None:
        shape = (B * H, Nq, Nk) if attn_mask_3d else (Nq, Nk)
        if attn_mask == 'bool':
            am = _bool_mask(shape)
        else:
            am = torch.rand(shape) * 3 - 2  # uniform(-2, 1)
            if neg_inf_in_masks:
                am = am.masked_fill(_bool_mask(shape, p=0.2), float('-inf'))
    kpm = None
    if key_padding_mask == 'bool':
        kpm = _bool_mask((B, Nk))
    elif key_padding_mask == 'float':
        kpm = torch.rand(B, Nk) * -2  # uniform(-2, 0)

    if self_attention and (not bias or key_padding_mask == 'float'):
        # PyTorch 1.13's eval/no_grad self-attention fast path (torch._native_multi_head_attention)
        # raises a TypeError when in_proj_bias is None, and converts a float key_padding_mask to
        # bool (nonzero = masked) instead of adding it, unlike the documented general path (and
        # PyTorch 2.x). Equal-valued copies of the query take the general path, which computes the
        # same self-attention with the documented semantics.
        key = value = query.clone()
    with torch.no_grad():
        out, weights = mha(query, key, value, key_padding_mask=kpm, need_weights=need_weights,
                           attn_mask=am, average_attn_weights=average_attn_weights)
    assert out.shape == (B, Nq, E)

    arrays = {'query': _np(query)}
    if not self_attention:
        arrays['key'] = _np(key)
        arrays['value'] = _np(value)
    for k, v in mha.state_dict().items():
        arrays[k.replace('.', '_')] = _np(v)
    if am is not None and not causal:
        arrays['attn_mask'] = _np(am)
    if kpm is not None:
        arrays['key_padding_mask'] = _np(kpm)
    arrays['out'] = _np(out)
    if need_weights:
        arrays['attn_weights'] = _np(weights)
    else:
        assert weights is None

    meta = {
        'kind': 'mha',
        'description': description,
        'torch_version': torch.__version__,
        'tolerance': TOLERANCE,
        'embed_dim': E, 'num_heads': H, 'kdim': kdim_v, 'vdim': vdim_v, 'bias': bias,
        'batch': B, 'seq_q': Nq, 'seq_k': Nk,
        'self_attention': self_attention,
        'causal': causal,
        'attn_mask': None if causal else attn_mask,
        'attn_mask_shape': None if (causal or attn_mask is None) else list(am.shape),
        'key_padding_mask': key_padding_mask,
        'need_weights': need_weights,
        'average_attn_weights': average_attn_weights,
    }
    if extra_meta:
        meta.update(extra_meta)

    # State dict names are what the meta promises.
    expect = {'out_proj_weight'}
    expect |= {'in_proj_weight'} if kdim_v == vdim_v == E else \
        {'q_proj_weight', 'k_proj_weight', 'v_proj_weight'}
    if bias:
        expect |= {'in_proj_bias', 'out_proj_bias'}
    assert set(k.replace('.', '_') for k in mha.state_dict()) == expect, mha.state_dict().keys()

    ref_out, ref_w = ref_mha(meta, arrays)
    diffs = [_check(name + ' out', arrays['out'], ref_out, TOLERANCE)]
    if need_weights:
        want_w = ref_w.mean(axis=1) if average_attn_weights else ref_w
        assert arrays['attn_weights'].shape == want_w.shape
        diffs.append(_check(name + ' attn_weights', arrays['attn_weights'], want_w, TOLERANCE))
    return meta, arrays, diffs


def make_timm(name, description, seed, dim, H, qkv_bias, B, N):
    torch.manual_seed(seed)
    mod = TimmAttention(dim, num_heads=H, qkv_bias=qkv_bias).eval()
    _randomize_biases(mod)
    x = torch.rand(B, N, dim) * 2 - 1
    with torch.no_grad():
        out = mod(x)
    arrays = {'x': _np(x)}
    for k, v in mod.state_dict().items():
        arrays[k.replace('.', '_')] = _np(v)
    arrays['out'] = _np(out)
    meta = {
        'kind': 'timm_attention',
        'description': description,
        'torch_version': torch.__version__,
        'tolerance': TOLERANCE,
        'dim': dim, 'num_heads': H, 'qkv_bias': qkv_bias, 'batch': B, 'seq': N,
    }
    expect = {'qkv_weight', 'proj_weight', 'proj_bias'} | ({'qkv_bias'} if qkv_bias else set())
    assert set(arrays) == expect | {'x', 'out'}, arrays.keys()
    diffs = [_check(name + ' out', arrays['out'], ref_timm(meta, arrays), TOLERANCE)]
    return meta, arrays, diffs


def _randomize_encoder(module):
    """Every parameter random and distinct across the (cloned) layers: LayerNorm weight
    U(0.5, 1.5) and bias U(-0.2, 0.2), matrices xavier_uniform, other biases U(-0.2, 0.2)."""
    for name, p in module.named_parameters():
        owner = name.rsplit('.', 1)[0] if '.' in name else ''
        owner = module.get_submodule(owner) if owner else module
        if isinstance(owner, nn.LayerNorm):
            if name.endswith('weight'):
                p.uniform_(0.5, 1.5)
            else:
                p.uniform_(-0.2, 0.2)
        elif p.dim() > 1:
            nn.init.xavier_uniform_(p)
        else:
            p.uniform_(-0.2, 0.2)


def _torch_sinusoid(n, d):
    """The paper's table, computed in float64 the way the PyTorch tutorial writes it, then cast
    to float32."""
    pos = torch.arange(n, dtype=torch.float64)[:, None]
    div = torch.exp(torch.arange(0, d, 2, dtype=torch.float64) * (-math.log(10000.0) / d))
    pe = torch.zeros(n, d, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(pos * div)
    pe[:, 1::2] = torch.cos(pos * div)
    return pe.to(torch.float32)


def make_encoder(name, description, seed, d, H, ff, num_layers=1, activation='relu',
                 norm_first=False, eps=1e-5, final_norm=False, causal=False, padding=None,
                 positional='none', vocab=None, dtype='f32', single_layer=False, B=2, N=6):
    """padding: None or [B][N] bools (True = padded key), never a whole row."""
    torch.manual_seed(seed)
    layer = nn.TransformerEncoderLayer(d, H, dim_feedforward=ff, activation=activation,
                                       layer_norm_eps=eps, batch_first=True,
                                       norm_first=norm_first)
    if single_layer:
        assert num_layers == 1 and not final_norm
        module = layer
    else:
        # enable_nested_tensor=False: with the default (True) PyTorch 1.13 runs padded batches
        # as nested tensors and returns zeros at padded positions.
        module = nn.TransformerEncoder(layer, num_layers,
                                       norm=nn.LayerNorm(d, eps=eps) if final_norm else None,
                                       enable_nested_tensor=False)
    module.eval()
    _randomize_encoder(module)
    emb = nn.Embedding(vocab, d) if vocab else None  # N(0, 1) init
    params = list(module.parameters()) + ([emb.weight] if emb is not None else [])
    if dtype != 'f32':
        # The golden output uses the weights as stored: rounded to f16/bf16 and back.
        for p in params:
            p.copy_(p.to({'f16': torch.float16, 'bf16': torch.bfloat16}[dtype]).float())

    if vocab:
        tokens = torch.randint(vocab, (B, N), dtype=torch.int64)
        x = emb(tokens) * math.sqrt(d)  # the paper's section 3.4
    else:
        x = torch.rand(B, N, d) * 2 - 1
    x_in = x  # what input.npy stores: before the positional encoding
    if positional == 'sinusoidal':
        x = x + _torch_sinusoid(N, d)
    mask = torch.triu(torch.full((N, N), float('-inf')), 1) if causal else None
    kpm = None
    if padding is not None:
        kpm = torch.tensor(padding, dtype=torch.bool)
        assert kpm.shape == (B, N) and bool(kpm.any())
        allowed = ~kpm[:, None, :]
        if causal:
            allowed = allowed & ~torch.triu(torch.ones(N, N, dtype=torch.bool), 1)
        assert bool(allowed.any(dim=-1).all()), 'a query row would have every key masked'
    # In eval()/no_grad the layers may take PyTorch's fast path (torch._transformer_encoder_
    # layer_fwd: key padding only, no src_mask, even nhead); the float64 check below passes with
    # it, including at padded query positions, so the output is the plain module call.
    if single_layer:
        out = module(x, src_mask=mask, src_key_padding_mask=kpm)
    else:
        out = module(x, mask=mask, src_key_padding_mask=kpm)
    assert out.shape == (B, N, d)

    arrays = {}
    if vocab:
        arrays['tokens'] = np.ascontiguousarray(tokens.numpy(), dtype='<i8')
    else:
        arrays['input'] = _np(x_in)
    if kpm is not None:
        arrays['key_padding_mask'] = _np(kpm)
    arrays['out'] = _np(out)

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, 'model.safetensors')
        export(module, path, embedding=emb, positional=positional, dtype=dtype)
        with open(path, 'rb') as f:
            blob = f.read()
    metadata, T, order, dtypes = read_safetensors(blob)
    md = {'d_model': d, 'nhead': H, 'num_layers': num_layers, 'dim_feedforward': ff}
    act_name = {'relu': 'relu', 'gelu': 'gelu', F.relu: 'relu', F.gelu: 'gelu'}[activation]
    assert metadata == {**{k: str(v) for k, v in md.items()}, 'activation': act_name,
                        'norm_first': 'true' if norm_first else 'false',
                        'layer_norm_eps': repr(eps), 'positional': positional}, metadata

    # The file holds exactly the module's (rounded) parameters, in state_dict order.
    state = module.state_dict()
    prefix = 'layers.0.' if single_layer else ''
    expect = [prefix + k for k in state]
    want = {prefix + k: v for k, v in state.items()}
    if emb is not None:
        expect.insert(0, 'embedding.weight')
        want['embedding.weight'] = emb.weight
    assert order == expect, order
    assert set(dtypes.values()) == {dtype.upper()}, dtypes
    for k, v in want.items():
        assert np.array_equal(T[k], v.detach().numpy().astype(np.float64)), k

    meta = {
        'kind': 'encoder',
        'description': description,
        'torch_version': torch.__version__,
        'tolerance': ENC_TOLERANCE,
        'd_model': d, 'nhead': H, 'num_layers': num_layers, 'dim_feedforward': ff,
        'activation': act_name, 'norm_first': norm_first, 'layer_norm_eps': eps,
        'final_norm': final_norm,
        'positional': positional,
        'causal': causal,
        'input': 'tokens' if vocab else 'input',
        'key_padding_mask': kpm is not None,
        'batch': B, 'seq': N,
        'model': 'model.safetensors',
        'model_dtype': dtype.upper(),
        'module': type(module).__name__,
        'vocab': vocab,
    }
    ref = ref_encoder(meta, metadata, T, arrays)
    diffs = [_check(name + ' out', arrays['out'], ref, ENC_CHECK)]
    return meta, arrays, diffs, {'model.safetensors': blob}


def cases():
    E, H, B = 16, 4, 2
    yield 'mha_self_basic', make_mha(
        'mha_self_basic',
        'Self-attention, E=16, 4 heads, with random nonzero biases, weights averaged over heads.',
        101, E, H, B, 5)
    yield 'mha_self_no_bias', make_mha(
        'mha_self_no_bias', 'Self-attention without any bias (bias=False), per-head weights.',
        102, E, H, B, 5, bias=False, average_attn_weights=False)
    yield 'mha_key_padding_bool', make_mha(
        'mha_key_padding_bool',
        'Self-attention with a bool key_padding_mask (True = ignore that key; no fully masked row).',
        103, E, H, B, 6, key_padding_mask='bool')
    yield 'mha_key_padding_float', make_mha(
        'mha_key_padding_float',
        'Self-attention with a float key_padding_mask in [-2, 0] added to the scores, per-head '
        'weights.',
        104, E, H, B, 6, key_padding_mask='float', average_attn_weights=False)
    yield 'mha_attn_mask_bool_2d', make_mha(
        'mha_attn_mask_bool_2d',
        'Self-attention with a bool [Nq, Nk] attn_mask shared by all batches and heads.',
        105, E, H, B, 6, attn_mask='bool')
    yield 'mha_attn_mask_float_2d', make_mha(
        'mha_attn_mask_float_2d',
        'Self-attention with a float [Nq, Nk] additive attn_mask in [-2, 1], per-head weights.',
        106, E, H, B, 6, attn_mask='float', average_attn_weights=False)
    yield 'mha_attn_mask_bool_3d', make_mha(
        'mha_attn_mask_bool_3d',
        'Self-attention with a bool [B*num_heads, Nq, Nk] attn_mask (one mask per batch and head).',
        107, E, H, B, 6, attn_mask='bool', attn_mask_3d=True)
    yield 'mha_attn_mask_float_3d', make_mha(
        'mha_attn_mask_float_3d',
        'Self-attention with a float [B*num_heads, Nq, Nk] additive attn_mask in [-2, 1] that '
        'also holds some -inf entries (never a whole row), per-head weights.',
        108, E, H, B, 6, attn_mask='float', attn_mask_3d=True, average_attn_weights=False,
        neg_inf_in_masks=True)
    yield 'mha_causal', make_mha(
        'mha_causal',
        'Causal self-attention (upper-triangular bool attn_mask, passed as causal=1 in C), '
        'per-head weights.',
        109, E, H, B, 6, causal=True, average_attn_weights=False)
    yield 'mha_cross_kdim_vdim', make_mha(
        'mha_cross_kdim_vdim',
        'Cross-attention with kdim=6, vdim=10 (separate q/k/v projection weights), E=8, 2 heads, '
        'Nq=3, Nk=7.',
        110, 8, 2, B, 3, Nk=7, kdim=6, vdim=10, self_attention=False)
    yield 'mha_cross_same_dims', make_mha(
        'mha_cross_same_dims',
        'Cross-attention with distinct query/key/value tensors, kdim=vdim=E=16, Nq=7, Nk=4, '
        'per-head weights.',
        111, E, H, B, 7, Nk=4, self_attention=False, average_attn_weights=False)
    yield 'mha_combined_masks', make_mha(
        'mha_combined_masks',
        'Self-attention with a bool key_padding_mask and a float [Nq, Nk] attn_mask together, '
        'need_weights=False.',
        112, E, H, B, 6, attn_mask='float', key_padding_mask='bool', need_weights=False)
    yield 'mha_single_head_wide', make_mha(
        'mha_single_head_wide', 'Self-attention with one 16-wide head, N=7.',
        113, E, 1, B, 7)
    yield 'mha_many_heads', make_mha(
        'mha_many_heads', 'Self-attention with 8 heads of width 2, B=3, N=4, per-head weights.',
        114, E, 8, 3, 4, average_attn_weights=False)

    # The permutation experiment (docs/library.md): PyTorch's default init (zero in_proj_bias and
    # out_proj.bias), same weights for both inputs.
    t1 = torch.tensor([[[1., 2.], [2., 3.], [3., 4.]]], dtype=torch.float32)
    t2 = torch.tensor([[[1., 2.], [3., 4.], [2., 3.]]], dtype=torch.float32)
    for tag, t, note in (
            ('t1', t1, 'query is t1 = [[1,2],[2,3],[3,4]] (batch 1).'),
            ('t2', t2, 'query is t2 = [[1,2],[3,4],[2,3]] (batch 1): t1 with rows 2 and 3 '
                       'swapped, so out rows 2 and 3 of seed_permutation_t1 appear swapped here.')):
        name = 'seed_permutation_' + tag
        yield name, make_mha(
            name,
            'Tutorial experiment: nn.MultiheadAttention(embed_dim=2, num_heads=1) with default '
            'init after torch.manual_seed(0), self-attention on ' + tag + '.',
            0, 2, 1, 1, 3, randomize_biases=False, inputs=t, extra_meta={'note': note})

    yield 'timm_attention_qkv_bias', make_timm(
        'timm_attention_qkv_bias',
        "timm ViT Attention(dim=16, num_heads=4, qkv_bias=True) on x of shape [2, 5, 16].",
        201, 16, 4, True, 2, 5)
    yield 'timm_attention_no_qkv_bias', make_timm(
        'timm_attention_no_qkv_bias',
        "timm ViT Attention(dim=16, num_heads=8, qkv_bias=False) on x of shape [2, 6, 16].",
        202, 16, 8, False, 2, 6)

    # Transformer encoder cases (kind "encoder"): model.safetensors from tools/export_torch.py.
    yield 'enc_post_ln_relu', make_encoder(
        'enc_post_ln_relu',
        'One post-LN encoder layer (d_model 32, 4 heads, dim_feedforward 64, ReLU, eps 1e-5).',
        301, 32, 4, 64)
    yield 'enc_pre_ln_relu', make_encoder(
        'enc_pre_ln_relu', 'One pre-LN (norm_first) encoder layer, d_model 32, 4 heads, ReLU.',
        302, 32, 4, 64, norm_first=True)
    yield 'enc_post_ln_gelu', make_encoder(
        'enc_post_ln_gelu', 'One post-LN encoder layer, d_model 16, 2 heads, exact GELU, N=5.',
        303, 16, 2, 32, activation='gelu', N=5)
    yield 'enc_pre_ln_gelu', make_encoder(
        'enc_pre_ln_gelu',
        'One pre-LN encoder layer, d_model 16, 4 heads, dim_feedforward 64, GELU given as '
        'F.gelu, N=7.',
        304, 16, 4, 64, activation=F.gelu, norm_first=True, N=7)
    yield 'enc_eps_1e-6', make_encoder(
        'enc_eps_1e-6', 'One post-LN ReLU encoder layer with layer_norm_eps 1e-6.',
        305, 16, 2, 32, eps=1e-6)
    yield 'enc_eps_1e-3', make_encoder(
        'enc_eps_1e-3', 'One pre-LN GELU encoder layer with layer_norm_eps 1e-3.',
        306, 16, 4, 32, activation='gelu', norm_first=True, eps=1e-3)
    yield 'enc_stack_final_norm', make_encoder(
        'enc_stack_final_norm',
        'Three pre-LN ReLU layers (distinct weights) followed by a final LayerNorm.',
        307, 16, 4, 32, num_layers=3, norm_first=True, final_norm=True)
    yield 'enc_stack_no_final_norm', make_encoder(
        'enc_stack_no_final_norm', 'Two post-LN GELU layers, no final norm, N=5.',
        308, 16, 2, 64, num_layers=2, activation='gelu', N=5)
    yield 'enc_key_padding', make_encoder(
        'enc_key_padding',
        'Two post-LN ReLU layers with a bool src_key_padding_mask (True = padding; not only '
        'trailing); out holds every position, padded ones included.',
        309, 16, 4, 32, num_layers=2,
        padding=[[False, False, False, False, False, True],
                 [False, True, False, False, True, True]])
    yield 'enc_causal', make_encoder(
        'enc_causal',
        'Two pre-LN GELU layers with a causal mask (triu of -inf above the diagonal).',
        310, 16, 4, 32, num_layers=2, activation='gelu', norm_first=True, causal=True)
    yield 'enc_causal_padding', make_encoder(
        'enc_causal_padding',
        'Two post-LN ReLU layers with a causal mask and trailing key padding (3 of 7 in batch 1).',
        311, 16, 2, 32, num_layers=2, causal=True, N=7,
        padding=[[False] * 7, [False] * 4 + [True] * 3])
    yield 'enc_sinusoidal', make_encoder(
        'enc_sinusoidal',
        'One post-LN ReLU layer, d_model 32, with the sinusoidal positional encoding added to '
        'the input (input.npy holds the input before it), N=7.',
        312, 32, 4, 64, positional='sinusoidal', N=7)
    yield 'enc_tokens', make_encoder(
        'enc_tokens',
        'Token input: nn.Embedding(11, 16) * sqrt(16) + sinusoidal encoding, then two pre-LN '
        'GELU layers and a final LayerNorm.',
        313, 16, 4, 32, num_layers=2, activation='gelu', norm_first=True, final_norm=True,
        positional='sinusoidal', vocab=11)
    yield 'enc_f16_weights', make_encoder(
        'enc_f16_weights',
        'Two post-LN GELU layers and a final norm stored as F16; out uses the f16-rounded '
        'weights.',
        314, 16, 4, 32, num_layers=2, activation='gelu', final_norm=True, dtype='f16')
    yield 'enc_bf16_weights', make_encoder(
        'enc_bf16_weights',
        'Two pre-LN ReLU layers and a final norm stored as BF16; out uses the bf16-rounded '
        'weights.',
        315, 16, 2, 64, num_layers=2, norm_first=True, final_norm=True, dtype='bf16')
    yield 'enc_single_layer_module', make_encoder(
        'enc_single_layer_module',
        'A bare nn.TransformerEncoderLayer (post-LN, GELU, d_model 32), exported as a 1-layer '
        'encoder; out is layer(x).',
        316, 32, 4, 64, activation='gelu', single_layer=True, N=5)


def main():
    parser = argparse.ArgumentParser(description='Generate libclattn golden files with PyTorch.')
    parser.add_argument('--out', default=DEFAULT_OUT, help='output directory (default: %(default)s)')
    args = parser.parse_args()

    torch.set_num_threads(1)
    torch.set_default_dtype(torch.float32)
    os.makedirs(args.out, exist_ok=True)
    with torch.no_grad():
        generated = list(cases())
    for name, result in generated:
        meta, arrays, diffs = result[:3]
        _write_case(args.out, name, meta, arrays, result[3] if len(result) > 3 else None)
        labels = ('out', 'attn_weights')
        print(f'{name:28s} {meta["kind"]:15s} max |float64 ref - torch|: '
              + ', '.join(f'{label} {d:.3g}' for label, d in zip(labels, diffs)))
    # Sanity check the experiment the seed_permutation cases exist for.
    o1 = dict(generated)['seed_permutation_t1'][1]
    o2 = dict(generated)['seed_permutation_t2'][1]
    assert np.array_equal(o1['in_proj_weight'], o2['in_proj_weight'])
    assert np.allclose(o1['out'][:, [0, 2, 1]], o2['out'], atol=TOLERANCE)


if __name__ == '__main__':
    main()
