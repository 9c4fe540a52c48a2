#!/usr/bin/env python3
"""Golden files for the decoder's self-attention positions (RoPE, ALiBi) with a key/value cache,
and for encoder–decoder model files with metadata positional "rope" | "alibi"
(tests/golden/decpos_*; tests/test_decoder_positions.c reads them).

usage: ~/.cache/clattn/golden-venv/bin/python tools/gen_positional_decoder_golden.py [--out DIR]
(the venv of tools/make-golden-venv.sh, from which every generator runs: tests/golden/README.md)

Needs torch and numpy. Deterministic (fixed seeds, one thread): reruns write identical files.
Every reference is computed in float64 with PyTorch from the float32 weights stored in the file.

The reference decoder is nn.TransformerDecoder's maths (batch_first, eval, no dropout; post- or
pre-LN, ReLU, nn.TransformerDecoderLayer's norm1/norm2/norm3), with grouped-query attention (the
packed in_proj_weight [h·d_k + 2·h_kv·d_k, E], query head h reading kv head h // (h / h_kv), as
transformers' repeat_kv), and positions in the self-attention only (cross-attention has none):

  RoPE, transcribed from transformers (v4.x):
    models/gpt_neox/modeling_gpt_neox.py  rotate_half, apply_rotary_pos_emb, and the partial
        rotary split  q_rot = q[..., :rotary_ndims], q_pass = q[..., rotary_ndims:]
        (inv_freq = 1 / theta^(arange(0, r, 2) / r), emb = cat(freqs, freqs))
    models/gptj/modeling_gptj.py  rotate_every_two, duplicate_interleave (the interleaved
        layout: channels 2k and 2k + 1 share angle k)
    Queries and keys of position p are rotated by p·inv_freq; with a cache, the new tokens'
    position_ids are past .. past + n - 1 and the keys are rotated BEFORE they are cached
    (as transformers' models do: layer_past holds rotated keys).
  ALiBi, transcribed from transformers' models/bloom/modeling_bloom.py build_alibi_tensor
    (slopes from the head count; alibi = slopes · key position, added to the scores through
    baddbmm), with an attention mask of ones (absolute key positions 0 .. past + n - 1, which
    also makes BLOOM's cache handling position-exact). With the causal mask this equals
    -m_h·(i - j) up to a constant per query row, which the softmax removes; the script checks
    that the explicit form -m_h·(i - j) gives the same outputs (< 1e-12).
  The encoder of the model files: bidirectional self-attention with RoPE at positions 0 .. S-1,
    or ALiBi's symmetric form -m_h·|i - j| (JinaBERT: jinaai/jina-bert-implementation's
    _build_alibi_tensor, slopes · -|memory_position - context_position|).

Decoder cases tests/golden/decpos_<case>/ (kind "decoder_positions"):
  model.safetensors  layers.{i}.self_attn.in_proj_weight [h·d_k + 2·h_kv·d_k, E],
      .in_proj_bias, .out_proj.weight, .out_proj.bias, layers.{i}.multihead_attn.* (same),
      linear1.*, linear2.*, norm1.*, norm2.*, norm3.*, then norm.* when final_norm. F32.
  tgt.npy float32 [B, T, E], memory.npy float32 [B, S, E]
  tgt_key_padding_mask.npy, memory_key_padding_mask.npy  bool (True = padding), when present
  out.npy        float32 [B, T, E]: teacher-forced (causal, every mask given)
  out_steps.npy  float32 [B, T, E]: incremental decoding with the cache, chunks of meta "steps"
      tokens (memory padding applied; no target padding: a step takes none). The script checks
      that it equals the teacher-forced output without target padding to < 1e-12.
  meta.json  sizes, "num_kv_heads", "norm_first", "final_norm", "positions" ("rope"|"alibi"),
      "rope_theta", "rotary_dim", "rope_interleaved", "steps", "tolerance" (1e-4),
      "half_cache_tolerance" (2e-3), "float64_vs_torch" (the no-position self-check against
      nn.TransformerDecoder; see below).
Model-file cases tests/golden/decpos_s2s_<rope|alibi>/ (kind "seq2seq_positions"):
  model.safetensors  as clattn/transformer.h with metadata positional "rope" or "alibi"
      (rope_theta, rotary_dim, rope_interleaved too for rope); no sinusoidal table anywhere.
  src.npy int64 [B, S], src_padding.npy bool [B, S]
  greedy.npy int64 [B, L]: greedy ids (eos included), right-padded with pad_id to the longest
      (L; examples/generate's --output)
  beam.npy   int64 [B, L]: beam search (meta "beam", "alpha"; rule of TOY.md)
  meta "greedy_lengths", "beam_lengths", and "greedy_scores", "beam_scores": each result's sum
      of log-probabilities / ((5 + length) / 6)^alpha (clattn_generate_params.scores), which
      every step's logits move (the ids alone may not see a small error)
  tgt.npy int64 [B, T] and logits.npy float32 [B, T, V]: teacher-forced logits
  Every greedy arg-max beats the runner-up by meta "greedy_margin" (> 1e-3) so that float32
  cannot flip it.

Self-check of the layer maths: with no positions, no grouped-query attention, the reference
decoder equals torch.nn.TransformerDecoder (float32 module) to < 1e-5 on every decoder case's
weights and inputs.
"""
import argparse
import math
import os
import sys
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_torch import write_safetensors  # noqa: E402
from gen_golden import DEFAULT_OUT, _write_case, read_safetensors  # noqa: E402

D = torch.float64
TOLERANCE = 1e-4
HALF_TOLERANCE = 2e-3


# ---------------------------------------------------------------------------------------------
# positions (transcribed; see the docstring)
# ---------------------------------------------------------------------------------------------

def rotate_half(x):
    """transformers gpt_neox / llama rotate_half."""
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def rotate_every_two(x):
    """transformers gptj rotate_every_two."""
    x1 = x[:, :, :, ::2]
    x2 = x[:, :, :, 1::2]
    x = torch.stack((-x2, x1), dim=-1)
    return x.flatten(-2)


def rope_cos_sin(position_ids, rot, theta, interleaved):
    """cos, sin [n, rot] for the positions: GPT-NeoX's cat(freqs, freqs) or GPT-J's
    duplicate_interleave(freqs)."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, rot, 2, dtype=D) / rot))
    freqs = position_ids.to(D)[:, None] * inv_freq[None, :]
    if interleaved:
        emb = freqs.repeat_interleave(2, dim=-1)
    else:
        emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def apply_rotary_pos_emb(x, position_ids, rot, theta, interleaved):
    """x [B, H, n, d] at position_ids [n]: GPT-NeoX's partial split, then q·cos + rot(q)·sin."""
    cos, sin = rope_cos_sin(position_ids, rot, theta, interleaved)
    x_rot, x_pass = x[..., :rot], x[..., rot:]
    rotated = rotate_every_two(x_rot) if interleaved else rotate_half(x_rot)
    return torch.cat((x_rot * cos + rotated * sin, x_pass), dim=-1)


def bloom_alibi_slopes(num_heads):
    """transformers bloom build_alibi_tensor's slopes (in float64 here)."""
    closest_power_of_2 = 2 ** math.floor(math.log2(num_heads))
    base = torch.tensor(2 ** (-(2 ** -(math.log2(closest_power_of_2) - 3))), dtype=D)
    powers = torch.arange(1, 1 + closest_power_of_2, dtype=torch.int32)
    slopes = torch.pow(base, powers)
    if closest_power_of_2 != num_heads:
        extra_base = torch.tensor(2 ** (-(2 ** -(math.log2(2 * closest_power_of_2) - 3))),
                                  dtype=D)
        num_remaining_heads = min(closest_power_of_2, num_heads - closest_power_of_2)
        extra_powers = torch.arange(1, 1 + 2 * num_remaining_heads, 2, dtype=torch.int32)
        slopes = torch.cat([slopes, torch.pow(extra_base, extra_powers)], dim=0)
    return slopes


def build_alibi_tensor(attention_mask, num_heads):
    """transformers bloom build_alibi_tensor: [B, H, 1, L] = slopes · key position."""
    batch_size, seq_length = attention_mask.shape
    slopes = bloom_alibi_slopes(num_heads)
    arange_tensor = ((attention_mask.cumsum(dim=-1) - 1) * attention_mask)[:, None, :]
    alibi = slopes[..., None] * arange_tensor
    return alibi.reshape(batch_size, num_heads, 1, seq_length)


def explicit_alibi(num_heads, nq, nk, past, symmetric):
    """-m_h·(i - j) (or -m_h·|i - j|) with query i at past + row: [1, H, nq, nk]."""
    i = torch.arange(nq, dtype=D)[:, None] + past
    j = torch.arange(nk, dtype=D)[None, :]
    dist = (i - j).abs() if symmetric else (i - j)
    return -bloom_alibi_slopes(num_heads)[:, None, None] * dist[None]


# ---------------------------------------------------------------------------------------------
# the reference layers (float64)
# ---------------------------------------------------------------------------------------------

class Cfg:
    def __init__(self, E, H, kv, ff, layers, norm_first=False, final_norm=False,
                 positions=None, theta=10000.0, rot=0, interleaved=False, eps=1e-5,
                 alibi_form='bloom'):
        self.E, self.H, self.kv, self.ff, self.layers = E, H, kv, ff, layers
        self.dk = E // H
        self.norm_first, self.final_norm = norm_first, final_norm
        self.positions, self.theta, self.interleaved = positions, theta, interleaved
        self.rot = rot or self.dk
        self.eps = eps
        self.alibi_form = alibi_form


def project_heads(W, b, x, heads, dk):
    B, n, _ = x.shape
    return (x @ W.T + b).reshape(B, n, heads, dk).transpose(1, 2)


def attention(cfg, T, p, q_in, kv_in, add, positions=None, past=0, cache=None, causal=False,
              symmetric=False):
    """One attention layer p (weights T[p + ...]) of q_in [B, nq, E] over kv_in [B, nk, E].
    positions: None, 'rope' or 'alibi' (self-attention). With `cache` (a dict holding the
    rotated keys and the values so far) the new keys/values are appended and attention runs
    over all of them; query rows are at positions past .. past + nq - 1."""
    H, kv, dk = cfg.H, cfg.kv, cfg.dk
    W, bias = T[p + 'in_proj_weight'], T[p + 'in_proj_bias']
    qw, kw = H * dk, kv * dk
    B, nq, _ = q_in.shape
    q = project_heads(W[:qw], bias[:qw], q_in, H, dk)
    k = project_heads(W[qw:qw + kw], bias[qw:qw + kw], kv_in, kv, dk)
    v = project_heads(W[qw + kw:], bias[qw + kw:], kv_in, kv, dk)
    if positions == 'rope':
        q = apply_rotary_pos_emb(q, torch.arange(past, past + nq), cfg.rot, cfg.theta,
                                 cfg.interleaved)
        k = apply_rotary_pos_emb(k, torch.arange(past, past + k.shape[2]), cfg.rot, cfg.theta,
                                 cfg.interleaved)
    if cache is not None:
        if 'k' in cache:
            k = torch.cat((cache['k'], k), dim=2)
            v = torch.cat((cache['v'], v), dim=2)
        cache['k'], cache['v'] = k, v
    nk = k.shape[2]
    group = H // kv
    k = k.repeat_interleave(group, dim=1)  # transformers' repeat_kv
    v = v.repeat_interleave(group, dim=1)
    scores = q @ k.transpose(-1, -2) / math.sqrt(dk)
    if positions == 'alibi':
        if symmetric:
            scores = scores + explicit_alibi(H, nq, nk, past, True)
        elif cfg.alibi_form == 'bloom':
            scores = scores + build_alibi_tensor(torch.ones(B, nk, dtype=D), H)
        else:
            scores = scores + explicit_alibi(H, nq, nk, past, False)
    if causal:
        i = torch.arange(nq)[:, None] + past
        j = torch.arange(nk)[None, :]
        scores = scores.masked_fill(j > i, float('-inf'))
    if add is not None:
        scores = scores + add
    w = torch.softmax(scores, dim=-1)
    out = (w @ v).transpose(1, 2).reshape(B, nq, H * dk)
    return out @ T[p + 'out_proj.weight'].T + T[p + 'out_proj.bias']


def layer_norm(cfg, T, p, x):
    return F.layer_norm(x, (cfg.E,), T[p + 'weight'], T[p + 'bias'], cfg.eps)


def feed_forward(T, p, x):
    h = torch.relu(x @ T[p + 'linear1.weight'].T + T[p + 'linear1.bias'])
    return h @ T[p + 'linear2.weight'].T + T[p + 'linear2.bias']


def decoder(cfg, T, x, mem, self_pad=None, mem_pad=None, past=0, caches=None, prefix=''):
    """The decoder stack (teacher-forced when caches is None, else one incremental step)."""
    self_add = None if self_pad is None else \
        torch.zeros(self_pad.shape, dtype=D).masked_fill(self_pad, float('-inf'))[:, None, None]
    mem_add = None if mem_pad is None else \
        torch.zeros(mem_pad.shape, dtype=D).masked_fill(mem_pad, float('-inf'))[:, None, None]
    for i in range(cfg.layers):
        p = f'{prefix}layers.{i}.'
        cache = caches[i] if caches is not None else None

        def sa(z):
            return attention(cfg, T, p + 'self_attn.', z, z, self_add, cfg.positions, past,
                             cache, causal=True)

        def ca(z):
            return attention(cfg, T, p + 'multihead_attn.', z, mem, mem_add)
        if cfg.norm_first:
            x = x + sa(layer_norm(cfg, T, p + 'norm1.', x))
            x = x + ca(layer_norm(cfg, T, p + 'norm2.', x))
            x = x + feed_forward(T, p, layer_norm(cfg, T, p + 'norm3.', x))
        else:
            x = layer_norm(cfg, T, p + 'norm1.', x + sa(x))
            x = layer_norm(cfg, T, p + 'norm2.', x + ca(x))
            x = layer_norm(cfg, T, p + 'norm3.', x + feed_forward(T, p, x))
    if cfg.final_norm:
        x = layer_norm(cfg, T, prefix + 'norm.', x)
    return x


def decode_incrementally(cfg, T, x, mem, mem_pad, steps, prefix=''):
    """x [B, T, E] fed in chunks of `steps` tokens through one cache per layer."""
    caches = [dict() for _ in range(cfg.layers)]
    outs, past = [], 0
    for n in steps:
        outs.append(decoder(cfg, T, x[:, past:past + n], mem, None, mem_pad, past, caches,
                            prefix))
        past += n
    assert past == x.shape[1]
    return torch.cat(outs, dim=1)


def encoder(cfg, T, x, pad):
    add = None if pad is None else \
        torch.zeros(pad.shape, dtype=D).masked_fill(pad, float('-inf'))[:, None, None]
    for i in range(cfg.layers):
        p = f'encoder.layers.{i}.'

        def sa(z):
            return attention(cfg, T, p + 'self_attn.', z, z, add, cfg.positions,
                             symmetric=True)
        if cfg.norm_first:
            x = x + sa(layer_norm(cfg, T, p + 'norm1.', x))
            x = x + feed_forward(T, p, layer_norm(cfg, T, p + 'norm2.', x))
        else:
            x = layer_norm(cfg, T, p + 'norm1.', x + sa(x))
            x = layer_norm(cfg, T, p + 'norm2.', x + feed_forward(T, p, x))
    return layer_norm(cfg, T, 'encoder.norm.', x)


# ---------------------------------------------------------------------------------------------
# weights
# ---------------------------------------------------------------------------------------------

def uniform(shape, lo, hi):
    return torch.rand(*shape) * (hi - lo) + lo


def xavier(rows, cols):
    a = math.sqrt(6.0 / (rows + cols))
    return uniform((rows, cols), -a, a)


def attention_weights(cfg, p):
    rows = cfg.H * cfg.dk + 2 * cfg.kv * cfg.dk
    return [(p + 'in_proj_weight', xavier(rows, cfg.E)),
            (p + 'in_proj_bias', uniform((rows,), -0.2, 0.2)),
            (p + 'out_proj.weight', xavier(cfg.E, cfg.H * cfg.dk)),
            (p + 'out_proj.bias', uniform((cfg.E,), -0.2, 0.2))]


def norm_weights(cfg, p):
    return [(p + 'weight', uniform((cfg.E,), 0.5, 1.5)), (p + 'bias', uniform((cfg.E,), -0.2, 0.2))]


def ffn_weights(cfg, p):
    return [(p + 'linear1.weight', xavier(cfg.ff, cfg.E)),
            (p + 'linear1.bias', uniform((cfg.ff,), -0.2, 0.2)),
            (p + 'linear2.weight', xavier(cfg.E, cfg.ff)),
            (p + 'linear2.bias', uniform((cfg.E,), -0.2, 0.2))]


def decoder_weights(cfg, prefix=''):
    named = []
    for i in range(cfg.layers):
        p = f'{prefix}layers.{i}.'
        named += attention_weights(cfg, p + 'self_attn.')
        named += attention_weights(cfg, p + 'multihead_attn.')
        named += ffn_weights(cfg, p)
        for n in ('norm1.', 'norm2.', 'norm3.'):
            named += norm_weights(cfg, p + n)
    if cfg.final_norm:
        named += norm_weights(cfg, prefix + 'norm.')
    return named


def encoder_weights(cfg):
    named = []
    for i in range(cfg.layers):
        p = f'encoder.layers.{i}.'
        named += attention_weights(cfg, p + 'self_attn.')
        named += ffn_weights(cfg, p)
        named += norm_weights(cfg, p + 'norm1.') + norm_weights(cfg, p + 'norm2.')
    return named + norm_weights(cfg, 'encoder.norm.')


def file_round_trip(named, metadata):
    """The safetensors bytes, and the tensors read back (float64)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, 'model.safetensors')
        write_safetensors(path, named, metadata, 'f32')
        with open(path, 'rb') as f:
            blob = f.read()
    file_md, T, order, _ = read_safetensors(blob)
    assert file_md == metadata and order == [n for n, _ in named]
    return blob, {k: torch.from_numpy(v) for k, v in T.items()}


def torch_check(cfg, T, tgt, mem, tkpm, mkpm):
    """The reference without positions against nn.TransformerDecoder (float32)."""
    if cfg.kv != cfg.H:
        return None
    layer = nn.TransformerDecoderLayer(cfg.E, cfg.H, cfg.ff, dropout=0.0, batch_first=True,
                                       norm_first=cfg.norm_first, layer_norm_eps=cfg.eps)
    module = nn.TransformerDecoder(layer, cfg.layers,
                                   norm=nn.LayerNorm(cfg.E, eps=cfg.eps) if cfg.final_norm
                                   else None).eval()
    module.load_state_dict({k: v.float() for k, v in T.items()})
    Tq = tgt.shape[1]
    causal = nn.Transformer.generate_square_subsequent_mask(Tq)
    want = module(tgt.float(), mem.float(), tgt_mask=causal, tgt_key_padding_mask=tkpm,
                  memory_key_padding_mask=mkpm).double()
    plain = Cfg(cfg.E, cfg.H, cfg.kv, cfg.ff, cfg.layers, cfg.norm_first, cfg.final_norm)
    got = decoder(plain, T, tgt, mem, tkpm, mkpm)
    diff = float((got - want).abs().max())
    assert diff < 1e-5, diff
    return diff


# ---------------------------------------------------------------------------------------------
# cases
# ---------------------------------------------------------------------------------------------

def make_decoder_case(description, seed, cfg, B, Tq, S, steps, tgt_pad=None, mem_pad=None):
    torch.manual_seed(seed)
    named = decoder_weights(cfg)
    metadata = {'d_model': str(cfg.E), 'nhead': str(cfg.H), 'num_kv_heads': str(cfg.kv),
                'num_layers': str(cfg.layers), 'dim_feedforward': str(cfg.ff)}
    blob, T = file_round_trip(named, metadata)
    tgt = uniform((B, Tq, cfg.E), -1, 1).to(D)
    mem = uniform((B, S, cfg.E), -1, 1).to(D)
    tgt = tgt.float().to(D)
    tkpm = None if tgt_pad is None else torch.tensor(tgt_pad, dtype=torch.bool)
    mkpm = None if mem_pad is None else torch.tensor(mem_pad, dtype=torch.bool)
    out = decoder(cfg, T, tgt, mem, tkpm, mkpm)
    unpadded = decoder(cfg, T, tgt, mem, None, mkpm)
    stepped = decode_incrementally(cfg, T, tgt, mem, mkpm, steps)
    step_diff = float((stepped - unpadded).abs().max())
    assert step_diff < 1e-12, step_diff
    if cfg.positions == 'alibi':  # BLOOM's form and the explicit -m·(i - j) agree
        cfg2 = Cfg(cfg.E, cfg.H, cfg.kv, cfg.ff, cfg.layers, cfg.norm_first, cfg.final_norm,
                   'alibi', alibi_form='explicit')
        forms = float((decoder(cfg2, T, tgt, mem, tkpm, mkpm) - out).abs().max())
        forms = max(forms, float((decode_incrementally(cfg2, T, tgt, mem, mkpm, steps)
                                  - stepped).abs().max()))
        assert forms < 1e-12, forms
    torch_diff = torch_check(cfg, T, tgt, mem, tkpm, mkpm)
    arrays = {'tgt': tgt.float().numpy(), 'memory': mem.float().numpy(),
              'out': out.float().numpy(), 'out_steps': stepped.float().numpy()}
    if tkpm is not None:
        arrays['tgt_key_padding_mask'] = tkpm.numpy()
    if mkpm is not None:
        arrays['memory_key_padding_mask'] = mkpm.numpy()
    meta = {'kind': 'decoder_positions', 'description': description,
            'torch_version': torch.__version__, 'tolerance': TOLERANCE,
            'half_cache_tolerance': HALF_TOLERANCE,
            'd_model': cfg.E, 'nhead': cfg.H, 'num_kv_heads': cfg.kv, 'num_layers': cfg.layers,
            'dim_feedforward': cfg.ff, 'norm_first': cfg.norm_first,
            'final_norm': cfg.final_norm, 'layer_norm_eps': cfg.eps,
            'positions': cfg.positions, 'rope_theta': cfg.theta if cfg.positions == 'rope' else 0,
            'rotary_dim': cfg.rot if cfg.positions == 'rope' else 0,
            'rope_interleaved': cfg.interleaved, 'steps': list(steps),
            'batch': B, 'tgt_len': Tq, 'memory_len': S,
            'steps_vs_teacher_forced': float(f'{step_diff:.3g}'),
            'float64_vs_torch': None if torch_diff is None else float(f'{torch_diff:.3g}')}
    return meta, arrays, {'model.safetensors': blob}


def decoder_cases():
    F_, T_ = False, True
    yield 'decpos_rope_half', make_decoder_case(
        'RoPE, GPT-NeoX half-split layout over every channel (d_k 8, theta 10000): two post-LN '
        'layers, 3 heads, a padded memory; steps 3, 1, 1, 2, 1, 1.',
        901, Cfg(24, 3, 3, 32, 2, positions='rope'), 2, 9, 6, (3, 1, 1, 2, 1, 1),
        mem_pad=[[F_] * 6, [F_, F_, F_, F_, T_, T_]])
    yield 'decpos_rope_interleaved_gqa', make_decoder_case(
        'RoPE, GPT-J interleaved layout on 4 of 6 channels (theta 500): two pre-LN layers with '
        'a final norm, 4 query heads on 2 key/value heads, target and memory padding; steps '
        '4, 1, 1, 1, 1.',
        902, Cfg(24, 4, 2, 32, 2, norm_first=True, final_norm=True, positions='rope',
                 theta=500.0, rot=4, interleaved=True), 2, 8, 5, (4, 1, 1, 1, 1),
        tgt_pad=[[F_] * 8, [F_, F_, F_, F_, F_, F_, T_, T_]],
        mem_pad=[[F_, F_, F_, T_, T_], [F_] * 5])
    yield 'decpos_rope_half_partial', make_decoder_case(
        'RoPE, half-split layout on 6 of 8 channels (theta 10000): one post-LN layer, 2 heads '
        'on 1 key/value head (multi-query); steps 1 each.',
        903, Cfg(16, 2, 1, 32, 1, positions='rope', rot=6), 1, 7, 4, (1,) * 7)
    yield 'decpos_alibi', make_decoder_case(
        'ALiBi (BLOOM): 6 heads, so the slopes take both of build_alibi_tensor\'s branches; two '
        'post-LN layers, 6 query heads on 3 key/value heads, target and memory padding; steps '
        '2, 1, 3, 1, 1, 1.',
        904, Cfg(24, 6, 3, 32, 2, positions='alibi'), 2, 9, 6, (2, 1, 3, 1, 1, 1),
        tgt_pad=[[F_] * 8 + [T_], [F_] * 9],
        mem_pad=[[F_, F_, T_, F_, F_, F_], [F_, F_, F_, F_, F_, T_]])
    yield 'decpos_alibi_pre_ln', make_decoder_case(
        'ALiBi (BLOOM): 4 heads, two pre-LN layers with a final norm, no grouping, no padding; '
        'steps 5, 1, 1, 1, 1, 1.',
        905, Cfg(16, 4, 4, 32, 2, norm_first=True, final_norm=True, positions='alibi'),
        2, 10, 5, (5, 1, 1, 1, 1, 1))


# ---- encoder–decoder model files ----

BOS, EOS, PAD = 1, 2, 0


def lp(n, alpha):
    return ((5.0 + n) / 6.0) ** alpha


class Seq2Seq:
    def __init__(self, cfg_enc, cfg_dec, T, V):
        self.ce, self.cd, self.T, self.V = cfg_enc, cfg_dec, T, V

    def embed(self, table, ids):
        return self.T[table][ids] * math.sqrt(self.ce.E)

    def encode(self, src, pad):
        return encoder(self.ce, self.T, self.embed('src_embedding.weight', src), pad)

    def logits(self, mem, pad, ys):
        x = decoder(self.cd, self.T, self.embed('tgt_embedding.weight', ys), mem, None, pad,
                    prefix='decoder.')
        return x @ self.T['generator.weight'].T + self.T['generator.bias']


def greedy(model, src, pad, max_new, alpha):
    """Greedy ids for each sentence, decoded incrementally with a cache, their scores (the sum of
    log-probabilities / lp(length), as clattn_generate_params.scores), and the smallest margin
    between the arg-max and the runner-up; the full recomputation must agree."""
    mem = model.encode(src, pad)
    rows, scores, margin = [], [], float('inf')
    for b in range(src.shape[0]):
        total = 0.0
        caches = [dict() for _ in range(model.cd.layers)]
        ys, tok = [BOS], BOS
        for t in range(max_new):
            x = model.embed('tgt_embedding.weight', torch.tensor([[tok]]))
            h = decoder(model.cd, model.T, x, mem[b:b + 1], None, pad[b:b + 1], t, caches,
                        'decoder.')
            logit = (h @ model.T['generator.weight'].T + model.T['generator.bias'])[0, -1]
            full = model.logits(mem[b:b + 1], pad[b:b + 1], torch.tensor([ys]))[0, -1]
            assert float((full - logit).abs().max()) < 1e-12
            top = torch.topk(logit, 2).values
            margin = min(margin, float(top[0] - top[1]))
            tok = int(logit.argmax())
            total += float(torch.log_softmax(logit, -1)[tok])
            ys.append(tok)
            if tok == EOS:
                break
        rows.append(ys[1:])
        scores.append(total / lp(len(ys) - 1, alpha))
    return rows, scores, margin


def beam_search(model, src_row, pad_row, max_new, k, alpha):
    """tests/golden/TOY.md's rule (as tools/train_toy_seq2seq.py beam_search)."""
    mem = model.encode(src_row, pad_row)
    alive, best, gap = [([], 0.0)], None, float('inf')
    for step in range(1, max_new + 1):
        ys = torch.tensor([[BOS] + toks for toks, _ in alive])
        logp = torch.log_softmax(model.logits(mem.expand(len(alive), -1, -1),
                                              pad_row.expand(len(alive), -1), ys)[:, -1],
                                 -1).tolist()
        for (toks, s), row in zip(alive, logp):
            score = (s + row[EOS]) / lp(step, alpha)
            if best is not None:
                gap = min(gap, abs(score - best[1]))
            if best is None or score > best[1]:
                best = (toks + [EOS], score)
        cands = [(s + row[v], h, v) for h, ((toks, s), row) in enumerate(zip(alive, logp))
                 for v in range(model.V) if v != EOS]
        cands.sort(key=lambda c: (-c[0], c[1], c[2]))
        if len(cands) > k:
            gap = min(gap, cands[k - 1][0] - cands[k][0])
        alive = [(alive[h][0] + [v], sc) for sc, h, v in cands[:k]]
        if step == max_new or best[1] >= max(s for _, s in alive) / lp(max_new, alpha):
            break
    return best[0], best[1], gap


def pad_rows(rows, width):
    out = np.full((len(rows), width), PAD, np.int64)
    for i, r in enumerate(rows):
        out[i, :len(r)] = r
    return out


def make_s2s_case(description, seed, positions, theta=10000.0, rot=0, interleaved=False,
                  E=16, H=4, ff=32, V=11, layers=1, B=3, S=6, max_new=7, beam=3, alpha=0.6,
                  eos_bias=0.0):
    """eos_bias: added to generator.bias[eos_id] (sentences of several lengths)."""
    torch.manual_seed(seed)
    ce = Cfg(E, H, H, ff, layers, positions=positions, theta=theta, rot=rot,
             interleaved=interleaved)
    cd = Cfg(E, H, H, ff, layers, final_norm=True, positions=positions, theta=theta, rot=rot,
             interleaved=interleaved, alibi_form='explicit')
    named = encoder_weights(ce) + decoder_weights(cd, 'decoder.')
    named += [('src_embedding.weight', uniform((V, E), -0.5, 0.5)),
              ('tgt_embedding.weight', uniform((V, E), -0.5, 0.5)),
              ('generator.weight', xavier(V, E) * 3.0),
              ('generator.bias', uniform((V,), -0.2, 0.2))]
    metadata = {'d_model': str(E), 'nhead': str(H), 'num_encoder_layers': str(layers),
                'num_decoder_layers': str(layers), 'dim_feedforward': str(ff),
                'activation': 'relu', 'norm_first': 'false', 'layer_norm_eps': '1e-05',
                'positional': positions, 'bos_id': str(BOS), 'eos_id': str(EOS),
                'pad_id': str(PAD)}
    if positions == 'rope':
        metadata.update({'rope_theta': repr(theta), 'rotary_dim': str(rot or E // H),
                         'rope_interleaved': 'true' if interleaved else 'false'})
    named[-1][1][EOS] += eos_bias
    blob, T = file_round_trip(named, metadata)
    model = Seq2Seq(ce, cd, T, V)
    src = torch.randint(3, V, (B, S))
    pad = torch.zeros(B, S, dtype=torch.bool)
    pad[1, S - 2:] = True
    pad[2, S - 1:] = True
    src[pad] = PAD
    rows, greedy_scores, margin = greedy(model, src, pad, max_new, alpha)
    assert margin > 1e-3, f'greedy margin {margin}: pick another seed'
    beams, beam_scores, gap = [], [], float('inf')
    for b in range(B):
        ids, score, g = beam_search(model, src[b:b + 1], pad[b:b + 1], max_new, beam, alpha)
        beams.append(ids)
        beam_scores.append(score)
        gap = min(gap, g)
    assert gap > 1e-4, f'beam gap {gap}: pick another seed'
    # the greedy ids after bos_id, then id 3 to max_new tokens (teacher forcing scores any ids)
    tgt = torch.tensor([([BOS] + r + [3] * max_new)[:max_new] for r in rows])
    mem = model.encode(src, pad)
    logits = model.logits(mem, pad, tgt)
    arrays = {'src': src.numpy().astype(np.int64), 'src_padding': pad.numpy(),
              'greedy': pad_rows(rows, max(map(len, rows))),
              'beam': pad_rows(beams, max(map(len, beams))),
              'tgt': tgt.numpy().astype(np.int64), 'logits': logits.float().numpy()}
    meta = {'kind': 'seq2seq_positions', 'description': description,
            'torch_version': torch.__version__, 'tolerance': TOLERANCE, 'positional': positions,
            'max_new': max_new, 'beam': beam, 'alpha': alpha,
            'greedy_lengths': [len(r) for r in rows], 'beam_lengths': [len(r) for r in beams],
            'greedy_scores': [float(f'{x:.9g}') for x in greedy_scores],
            'beam_scores': [float(f'{x:.9g}') for x in beam_scores],
            'greedy_margin': float(f'{margin:.3g}'), 'beam_gap': float(f'{gap:.3g}')}
    return meta, arrays, {'model.safetensors': blob}


def s2s_cases():
    yield 'decpos_s2s_rope', make_s2s_case(
        'An encoder–decoder model file with positional "rope" (half-split, every channel of '
        'd_k 4, theta 10000) in the encoder\'s and the decoder\'s self-attention: 1 + 1 post-LN '
        'layers, vocabulary 11, padded sources; greedy and beam (3, alpha 0.6) ids.',
        920, 'rope', eos_bias=-1.5)
    yield 'decpos_s2s_alibi', make_s2s_case(
        'An encoder–decoder model file with positional "alibi" (symmetric in the encoder, '
        'causal in the decoder): 1 + 1 post-LN layers, vocabulary 11, padded sources; greedy '
        'and beam (3, alpha 0.6) ids.',
        925, 'alibi', eos_bias=-0.5)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--out', default=DEFAULT_OUT)
    args = parser.parse_args()
    torch.set_num_threads(1)
    with torch.no_grad():
        for name, (meta, arrays, files) in list(decoder_cases()) + list(s2s_cases()):
            _write_case(args.out, name, meta, arrays, files)
            print(name, {k: v for k, v in meta.items()
                         if k in ('steps_vs_teacher_forced', 'float64_vs_torch', 'greedy_margin',
                                  'beam_gap', 'greedy_lengths', 'beam_lengths')})


if __name__ == '__main__':
    main()
