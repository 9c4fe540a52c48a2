#!/usr/bin/env python3
"""Generates the PyTorch golden files for libclattn's Transformer decoder tests (tests/golden/dec_*).

usage: ~/.cache/clattn/golden-venv/bin/python tools/gen_decoder_golden.py [--out DIR]
(the venv of tools/make-golden-venv.sh, from which every generator runs: tests/golden/README.md)

Needs only torch and numpy; imports its helpers from tools/gen_golden.py (random weights, the
float64 building blocks, the strict safetensors parser, the case writer) and the safetensors
writer from tools/export_torch.py. Writes one directory per case under DIR (default:
tests/golden), removing and rewriting each dec_* directory it generates; prints one line per
case. Deterministic: float32, torch.set_num_threads(1), torch.no_grad(), eval() mode,
torch.manual_seed(<fixed per-case seed>) before each case; the files are byte-identical from run
to run and from one interpreter to another.

What is computed (PyTorch's nn.TransformerDecoder, batch_first=True, eval, no dropout):

    layer = nn.TransformerDecoderLayer(d_model, nhead, dim_feedforward, activation=...,
                                       layer_norm_eps=eps, batch_first=True, norm_first=...)
    dec   = nn.TransformerDecoder(layer, num_layers, norm=nn.LayerNorm(d_model, eps) or None)
    out   = dec(tgt, memory, tgt_mask=M, tgt_key_padding_mask=..., memory_key_padding_mask=...)

  M = nn.Transformer.generate_square_subsequent_mask(T) (float [T, T], -inf above the diagonal,
  0 elsewhere) when "causal", else None; memory_mask is always None. Per layer:
    post-LN (norm_first false): x = norm1(x + SA(x)); x = norm2(x + CA(x, memory));
                                x = norm3(x + FF(x))
    pre-LN  (norm_first true):  x = x + SA(norm1(x)); x = x + CA(norm2(x), memory);
                                x = x + FF(norm3(x))          (memory itself is never normalised)
  then the final LayerNorm "norm" if final_norm. SA = self_attn (packed in_proj, q/k/v from x,
  mask M plus tgt key padding), CA = multihead_attention (q from x with rows [0, E) of
  in_proj_weight, k/v from memory with rows [E, 2E) and [2E, 3E), memory key padding),
  FF = linear2(act(linear1(x))) with act relu or exact (erf) gelu. LayerNorm: biased variance,
  eps inside the sqrt. Padded positions (True in a key padding mask) are masked out as keys
  (-inf before the softmax); out still holds every query position, padded ones included.

Case directory tests/golden/dec_<case>/:

  model.safetensors  the decoder's state_dict, every tensor F32, in state_dict order, written by
      tools/export_torch.write_safetensors (8-byte little-endian header length, JSON header
      padded with spaces to a multiple of 8, contiguous data). Per layer i:
        layers.{i}.self_attn.in_proj_weight        [3E, E]  (q, k, v rows stacked)
        layers.{i}.self_attn.in_proj_bias          [3E]
        layers.{i}.self_attn.out_proj.weight       [E, E]
        layers.{i}.self_attn.out_proj.bias         [E]
        layers.{i}.multihead_attn.in_proj_weight   [3E, E]
        layers.{i}.multihead_attn.in_proj_bias     [3E]
        layers.{i}.multihead_attn.out_proj.weight  [E, E]
        layers.{i}.multihead_attn.out_proj.bias    [E]
        layers.{i}.linear1.weight [F, E], .linear1.bias [F], .linear2.weight [E, F], .linear2.bias [E]
        layers.{i}.norm1.weight, .norm1.bias, .norm2.*, .norm3.*   [E] each
      then norm.weight, norm.bias [E] when final_norm.
      __metadata__ (strings): d_model, nhead, num_layers, dim_feedforward, activation
      ("relu"|"gelu"), norm_first ("true"|"false"), layer_norm_eps (repr, e.g. "1e-05"; the
      final norm uses the same eps), final_norm ("true"|"false").
  tgt.npy      float32 [B, T, E]
  memory.npy   float32 [B, S, E]
  tgt_key_padding_mask.npy     bool [B, T] (only if meta "tgt_key_padding_mask"); True = padding
  memory_key_padding_mask.npy  bool [B, S] (only if meta "memory_key_padding_mask")
      No mask ever hides every key of a query row (with causal, tgt position 0 is never padded).
  out.npy      float32 [B, T, E], PyTorch's output.
  meta.json    "kind": "decoder", "description", "torch_version", "tolerance" (1e-4, what the C
      library is allowed), "d_model", "nhead", "num_layers", "dim_feedforward", "activation",
      "norm_first", "layer_norm_eps", "final_norm", "causal" (bool; no mask file: the tgt_mask
      is the triangle above), "tgt_key_padding_mask", "memory_key_padding_mask" (bools: whether
      the files are there), "batch" (B), "tgt_len" (T), "memory_len" (S), "model"
      ("model.safetensors"), "model_dtype" ("F32"), "module" ("TransformerDecoder"),
      "float64_max_diff" (max |float64 NumPy reference - PyTorch| over out), "float64_check"
      (the bound it had to meet, 1e-5), "arrays" (file -> dtype and shape, as gen_golden.py).

Every case is checked before it is written: the model file is parsed back with gen_golden's
strict read_safetensors and must hold exactly the module's parameters (names, order, values);
when the `safetensors` package is importable (the golden venv has it) the file is also
loaded with it and compared. Then an independent float64 NumPy decoder (ref_decoder below),
driven only by the file's tensors and __metadata__, the stored .npy arrays and meta["causal"],
must match PyTorch's out to < 1e-5.
"""
import argparse
import math
import os
import sys
import tempfile

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_torch import write_safetensors  # noqa: E402
from gen_golden import (DEFAULT_OUT, ENC_CHECK, ENC_TOLERANCE, _check, _erf,  # noqa: E402
                        _layer_norm64, _np, _randomize_encoder, _softmax64, _write_case,
                        read_safetensors)

DEC_TOLERANCE = ENC_TOLERANCE  # what the C library may differ from out.npy by
DEC_CHECK = ENC_CHECK          # what the float64 reference must agree with PyTorch to

ATTN_TENSORS = ('in_proj_weight', 'in_proj_bias', 'out_proj.weight', 'out_proj.bias')
LAYER_TENSORS = (tuple('self_attn.' + t for t in ATTN_TENSORS)
                 + tuple('multihead_attn.' + t for t in ATTN_TENSORS)
                 + ('linear1.weight', 'linear1.bias', 'linear2.weight', 'linear2.bias',
                    'norm1.weight', 'norm1.bias', 'norm2.weight', 'norm2.bias',
                    'norm3.weight', 'norm3.bias'))


def decoder_tensor_names(num_layers, final_norm):
    names = [f'layers.{i}.{t}' for i in range(num_layers) for t in LAYER_TENSORS]
    return names + (['norm.weight', 'norm.bias'] if final_norm else [])


# ---------------------------------------------------------------------------------------------
# float64 NumPy reference (independent of PyTorch)
# ---------------------------------------------------------------------------------------------

def ref_decoder(meta, metadata, T, arrays):
    """The whole decoder in float64 from the safetensors __metadata__ and tensors T, the stored
    tgt/memory/padding arrays and meta['causal']."""
    d, H = int(metadata['d_model']), int(metadata['nhead'])
    L, eps = int(metadata['num_layers']), float(metadata['layer_norm_eps'])
    boolean = {'true': True, 'false': False}
    norm_first, final_norm = boolean[metadata['norm_first']], boolean[metadata['final_norm']]
    act = {'relu': lambda z: np.maximum(z, 0.0),
           'gelu': lambda z: 0.5 * z * (1.0 + _erf(z / math.sqrt(2.0)))}[metadata['activation']]
    Dh = d // H
    x = arrays['tgt'].astype(np.float64)
    mem = arrays['memory'].astype(np.float64)
    B, Tq = x.shape[:2]
    S = mem.shape[1]

    # Additive masks on the scaled scores [B, H, Nq, Nk].
    self_add = np.zeros((B, 1, Tq, Tq))
    if meta['causal']:
        self_add = self_add + np.where(np.triu(np.ones((Tq, Tq), dtype=bool), 1), -np.inf, 0.0)
    if 'tgt_key_padding_mask' in arrays:
        self_add = self_add + np.where(arrays['tgt_key_padding_mask'], -np.inf, 0.0)[:, None, None, :]
    cross_add = np.zeros((B, 1, Tq, S))
    if 'memory_key_padding_mask' in arrays:
        cross_add = cross_add + np.where(arrays['memory_key_padding_mask'], -np.inf,
                                         0.0)[:, None, None, :]

    def attention(q_in, kv_in, p, add):
        w_q, w_k, w_v = np.split(T[p + 'in_proj_weight'], 3, axis=0)
        b_q, b_k, b_v = np.split(T[p + 'in_proj_bias'], 3)
        nq, nk = q_in.shape[1], kv_in.shape[1]
        q = (q_in @ w_q.T + b_q).reshape(B, nq, H, Dh).transpose(0, 2, 1, 3)
        k = (kv_in @ w_k.T + b_k).reshape(B, nk, H, Dh).transpose(0, 2, 1, 3)
        v = (kv_in @ w_v.T + b_v).reshape(B, nk, H, Dh).transpose(0, 2, 1, 3)
        w = _softmax64(q @ k.transpose(0, 1, 3, 2) / math.sqrt(Dh) + add)
        ctx = (w @ v).transpose(0, 2, 1, 3).reshape(B, nq, d)
        return ctx @ T[p + 'out_proj.weight'].T + T[p + 'out_proj.bias']

    def ff(z, p):
        h = act(z @ T[p + 'linear1.weight'].T + T[p + 'linear1.bias'])
        return h @ T[p + 'linear2.weight'].T + T[p + 'linear2.bias']

    def ln(z, p):
        return _layer_norm64(z, T[p + 'weight'], T[p + 'bias'], eps)

    for i in range(L):
        p = f'layers.{i}.'
        sa, ca = p + 'self_attn.', p + 'multihead_attn.'
        if norm_first:
            z = ln(x, p + 'norm1.')
            x = x + attention(z, z, sa, self_add)
            x = x + attention(ln(x, p + 'norm2.'), mem, ca, cross_add)
            x = x + ff(ln(x, p + 'norm3.'), p)
        else:
            x = ln(x + attention(x, x, sa, self_add), p + 'norm1.')
            x = ln(x + attention(x, mem, ca, cross_add), p + 'norm2.')
            x = ln(x + ff(x, p), p + 'norm3.')
    if final_norm:
        x = ln(x, 'norm.')
    return x


# ---------------------------------------------------------------------------------------------
# case builder
# ---------------------------------------------------------------------------------------------

def _check_with_safetensors_package(path, metadata, T):
    """When the safetensors package is importable, load the file with it too and compare."""
    try:
        from safetensors import safe_open
    except ImportError:
        return False
    with safe_open(path, framework='np') as f:
        assert f.metadata() == metadata, f.metadata()
        assert sorted(f.keys()) == sorted(T), f.keys()
        for k in f.keys():
            a = f.get_tensor(k)
            assert a.dtype == np.float32 and np.array_equal(a.astype(np.float64), T[k]), k
    return True


def _padding(rows, name):
    if rows is None:
        return None
    m = torch.tensor(rows, dtype=torch.bool)
    assert bool(m.any()), f'{name}: no padding at all'
    return m


def make_decoder(name, description, seed, d=16, H=4, ff=32, num_layers=2, activation='relu',
                 norm_first=False, eps=1e-5, final_norm=False, causal=True, tgt_padding=None,
                 memory_padding=None, B=2, Tq=5, S=7, tgt_scale=1.0):
    """tgt_padding / memory_padding: None or [B][T] / [B][S] bools (True = padding). tgt is
    U(-tgt_scale, tgt_scale), memory U(-1, 1)."""
    torch.manual_seed(seed)
    layer = nn.TransformerDecoderLayer(d, H, dim_feedforward=ff, dropout=0.0,
                                       activation=activation, layer_norm_eps=eps,
                                       batch_first=True, norm_first=norm_first)
    module = nn.TransformerDecoder(layer, num_layers,
                                   norm=nn.LayerNorm(d, eps=eps) if final_norm else None)
    module.eval()
    _randomize_encoder(module)  # generic: LayerNorms, matrices, biases; distinct per layer

    tgt = (torch.rand(B, Tq, d) * 2 - 1) * tgt_scale
    memory = torch.rand(B, S, d) * 2 - 1
    tgt_mask = None
    if causal:
        tgt_mask = nn.Transformer.generate_square_subsequent_mask(Tq)
        assert torch.equal(tgt_mask, torch.triu(torch.full((Tq, Tq), float('-inf')), 1))
    tkpm = _padding(tgt_padding, name + ' tgt_key_padding_mask')
    mkpm = _padding(memory_padding, name + ' memory_key_padding_mask')
    if tkpm is not None:
        assert tkpm.shape == (B, Tq)
        allowed = ~tkpm[:, None, :].expand(B, Tq, Tq)
        if causal:
            allowed = allowed & ~torch.triu(torch.ones(Tq, Tq, dtype=torch.bool), 1)
        assert bool(allowed.any(dim=-1).all()), 'a self-attention row would have every key masked'
    if mkpm is not None:
        assert mkpm.shape == (B, S)
        assert not bool(mkpm.all(dim=-1).any()), 'a memory row would be entirely padding'

    out = module(tgt, memory, tgt_mask=tgt_mask, tgt_key_padding_mask=tkpm,
                 memory_key_padding_mask=mkpm)
    assert out.shape == (B, Tq, d)

    arrays = {'tgt': _np(tgt), 'memory': _np(memory)}
    if tkpm is not None:
        arrays['tgt_key_padding_mask'] = _np(tkpm)
    if mkpm is not None:
        arrays['memory_key_padding_mask'] = _np(mkpm)
    arrays['out'] = _np(out)

    metadata = {
        'd_model': str(d), 'nhead': str(H), 'num_layers': str(num_layers),
        'dim_feedforward': str(ff), 'activation': activation,
        'norm_first': 'true' if norm_first else 'false', 'layer_norm_eps': repr(float(eps)),
        'final_norm': 'true' if final_norm else 'false',
    }
    state = module.state_dict()
    names = decoder_tensor_names(num_layers, final_norm)
    assert list(state) == names, list(state)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, 'model.safetensors')
        write_safetensors(path, list(state.items()), metadata, 'f32')
        with open(path, 'rb') as f:
            blob = f.read()
        file_md, T, order, dtypes = read_safetensors(blob)
        package_checked = _check_with_safetensors_package(path, file_md, T)
    assert file_md == metadata, file_md
    assert order == names, order
    assert set(dtypes.values()) == {'F32'}, dtypes
    for k, v in state.items():
        assert np.array_equal(T[k], v.numpy().astype(np.float64)), k

    meta = {
        'kind': 'decoder',
        'description': description,
        'torch_version': torch.__version__,
        'tolerance': DEC_TOLERANCE,
        'd_model': d, 'nhead': H, 'num_layers': num_layers, 'dim_feedforward': ff,
        'activation': activation, 'norm_first': norm_first, 'layer_norm_eps': eps,
        'final_norm': final_norm,
        'causal': causal,
        'tgt_key_padding_mask': tkpm is not None,
        'memory_key_padding_mask': mkpm is not None,
        'batch': B, 'tgt_len': Tq, 'memory_len': S,
        'model': 'model.safetensors',
        'model_dtype': 'F32',
        'module': 'TransformerDecoder',
    }
    ref = ref_decoder(meta, file_md, T, arrays)
    diff = _check(name + ' out', arrays['out'], ref, DEC_CHECK)
    meta['float64_max_diff'] = float(f'{diff:.3g}')  # rounded so that reruns stay byte-identical
    meta['float64_check'] = DEC_CHECK
    return meta, arrays, diff, {'model.safetensors': blob}, package_checked


def cases():
    F_, T_ = False, True
    yield 'dec_post_ln_relu', make_decoder(
        'dec_post_ln_relu',
        'Two post-LN ReLU decoder layers (d_model 16, 4 heads, dim_feedforward 32) with a causal '
        'tgt_mask, no padding, no final norm.',
        401)
    yield 'dec_pre_ln_gelu', make_decoder(
        'dec_pre_ln_gelu',
        'Two pre-LN (norm_first) GELU decoder layers with a causal tgt_mask and a final '
        'LayerNorm.',
        402, activation='gelu', norm_first=True, final_norm=True)
    yield 'dec_padding', make_decoder(
        'dec_padding',
        'Two post-LN ReLU decoder layers with a causal tgt_mask, a tgt_key_padding_mask and a '
        'memory_key_padding_mask (True = padding, not only trailing); out holds every position.',
        403,
        tgt_padding=[[F_, F_, F_, F_, T_], [F_, F_, T_, F_, T_]],
        memory_padding=[[F_, F_, F_, F_, F_, T_, T_], [T_, F_, F_, T_, F_, F_, F_]])
    yield 'dec_no_causal', make_decoder(
        'dec_no_causal',
        'Two pre-LN ReLU decoder layers without a tgt_mask (every tgt position sees every '
        'other), a memory_key_padding_mask, no final norm.',
        404, norm_first=True, causal=False,
        memory_padding=[[F_, T_, F_, F_, F_, F_, F_], [F_, F_, F_, F_, T_, T_, T_]])
    yield 'dec_cross_lengths', make_decoder(
        'dec_cross_lengths',
        'One post-LN GELU decoder layer, causal, with a short target (T 3) and a long memory '
        '(S 11).',
        405, num_layers=1, activation='gelu', Tq=3, S=11)
    yield 'dec_eps_1e-6', make_decoder(
        'dec_eps_1e-6',
        'Two pre-LN ReLU decoder layers, causal, with layer_norm_eps 1e-6 in every LayerNorm '
        '(final one included) and a small tgt, U(-0.01, 0.01), so that the first norm1 sees a '
        'variance near 3e-5 and an eps of 1e-5 instead would move out by far more than the '
        'tolerance.',
        406, eps=1e-6, norm_first=True, final_norm=True, tgt_scale=0.01)


def main():
    parser = argparse.ArgumentParser(description='Generate libclattn decoder golden files with '
                                                 'PyTorch.')
    parser.add_argument('--out', default=DEFAULT_OUT, help='output directory (default: %(default)s)')
    args = parser.parse_args()

    torch.set_num_threads(1)
    torch.set_default_dtype(torch.float32)
    os.makedirs(args.out, exist_ok=True)
    with torch.no_grad():
        generated = list(cases())
    for name, (meta, arrays, diff, files, package_checked) in generated:
        _write_case(args.out, name, meta, arrays, files)
        print(f'{name:20s} {meta["kind"]:8s} max |float64 ref - torch|: out {diff:.3g}'
              + ('  (safetensors package: read back OK)' if package_checked else ''))


if __name__ == '__main__':
    main()
