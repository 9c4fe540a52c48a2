#!/usr/bin/env python3
"""Generates the PyTorch golden files for libclattn's attention tests.

usage: /usr/bin/python3 tools/gen_golden.py [--out DIR]

Needs only torch and numpy. Writes one directory per case under DIR (default: tests/golden next
to this script's parent), removing and rewriting each case directory it generates; prints one
line per case. Everything is deterministic: float32, torch.set_num_threads(1), torch.no_grad(),
modules in eval() mode, torch.manual_seed(<fixed per-case seed>) before each case.

Format of a case directory tests/golden/<case>/:

  meta.json   JSON object, see below.
  *.npy       np.save of C-contiguous little-endian arrays: float32 ('<f4') for float data,
              numpy bool ('|b1') for boolean masks.

meta.json keys present in every case:
  "kind"          "mha" | "timm_attention"
  "description"   one sentence
  "torch_version" torch.__version__ that produced the file
  "tolerance"     max abs error allowed against the stored outputs
  "arrays"        {file name: {"dtype": "float32"|"bool", "shape": [...]}} for every .npy stored

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

Every case is cross-checked before it is written: an independent float64 NumPy implementation
recomputes the outputs (and attention weights) from the stored arrays and meta, and must agree
with PyTorch to within the case tolerance.
"""
import argparse
import json
import os
import re
import shutil

import numpy as np
import torch
import torch.nn as nn

TOLERANCE = 1e-5
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


def _write_case(root, name, meta, arrays):
    d = os.path.join(root, name)
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    meta = dict(meta)
    meta['arrays'] = {}
    for key in sorted(arrays):
        a = arrays[key]
        assert a.flags['C_CONTIGUOUS']
        assert a.dtype in (np.dtype('<f4'), np.dtype(np.bool_)), (key, a.dtype)
        np.save(os.path.join(d, key + '.npy'), a)
        meta['arrays'][key + '.npy'] = {'dtype': 'bool' if a.dtype == np.bool_ else 'float32',
                                        'shape': list(a.shape)}
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

    # The tutorial experiment: PyTorch's own default initialisation (zero in_proj_bias and
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


def main():
    parser = argparse.ArgumentParser(description='Generate libclattn golden files with PyTorch.')
    parser.add_argument('--out', default=DEFAULT_OUT, help='output directory (default: %(default)s)')
    args = parser.parse_args()

    torch.set_num_threads(1)
    torch.set_default_dtype(torch.float32)
    os.makedirs(args.out, exist_ok=True)
    with torch.no_grad():
        generated = list(cases())
    for name, (meta, arrays, diffs) in generated:
        _write_case(args.out, name, meta, arrays)
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
