#!/usr/bin/env python3
"""A small random Llama 3.1-style model with scaled RoPE, as a Hugging Face folder and as GGUF
files, and transformers' float64 logits for it (tests/golden/llm_rope/, tests/test_llm_rope.c).

usage: ~/.cache/clattn/golden-venv/bin/python tools/gen_llm_rope_golden.py [--out DIR]
           (default tests/golden/llm_rope)
(the venv of tools/make-golden-venv.sh, from which every generator runs: tests/golden/README.md)

The model: LlamaForCausalLM, d_model 32, 2 layers, 2 query heads on 1 key/value head of width
16 (8 rotary pairs, θ 10000), SwiGLU d_ff 32, vocabulary 64, tied embeddings, float32. Its
rope_scaling is Llama 3.1's ("llama3": factor 4, low_freq_factor 1, high_freq_factor 32,
original_max_position_embeddings 256): pair 0 (wavelength 6.3, under 256 / 32) turns as it is,
pairs 1..3 (wavelengths 19.9, 63, 199) at smoothed rates, pairs 4..7 (628 to 19869, over 256)
four times slower; over the 96 positions of the test the angles of pairs 1..7 differ from
unscaled RoPE's by up to radians. (Llama 3.1 itself: 8, 1, 4, 8192, with 128-wide heads.)

Files
  hf_llama3/config.json, model.safetensors, generation_config.json
      the folder, saved by transformers' save_pretrained (the rotation on halves).
  llama3.gguf
      the same weights written by gguf-py's GGUFWriter as llama.cpp's convert_hf_to_gguf.py
      writes a Llama 3.1 model: q and k rows permuted (adjacent pairs), F32, and the tensor
      rope_freqs.weight [8] of frequency factors computed as its LlamaModel.
      generate_extra_tensors computes them (no rope.scaling.type key).
  linear.gguf
      the same weights with "llama.rope.scaling.type" "linear" and "llama.rope.scaling.factor"
      3 (no rope_freqs.weight): what convert_hf_to_gguf.py writes for rope_scaling "linear".
  ids.npy                int64 [96] random ids
  llama3_logits.npy      float64 [96, vocab]: transformers' logits of hf_llama3 in float64,
                         teacher-forced
  llama3_inv_freq.npy    float32 [8]: that model's rotary inv_freq (transformers'
                         _compute_llama3_parameters)
  linear_logits.npy      float64 [48, vocab]: the same weights with rope_scaling
                         {"rope_type": "linear", "factor": 3}, on the first 48 ids
  linear_inv_freq.npy    float32 [8]: that model's inv_freq
  meta.json              the configuration, the versions
"""
import argparse
import json
import math
import os

import numpy as np
import torch
import gguf

D, LAYERS, HEADS, KV_HEADS, HEAD_DIM, D_FF, VOCAB = 32, 2, 2, 1, 16, 32, 64
EPS, THETA, CONTEXT = 1e-5, 10000.0, 512
LLAMA3 = {'rope_type': 'llama3', 'factor': 4.0, 'low_freq_factor': 1.0,
          'high_freq_factor': 32.0, 'original_max_position_embeddings': 256}
LINEAR = {'rope_type': 'linear', 'factor': 3.0}
N, N_LINEAR = 96, 48


def permute(w, n_head, n_head_kv):
    """convert_hf_to_gguf.py's LlamaModel.permute."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def rope_factors(rope_params):
    """convert_hf_to_gguf.py's LlamaModel.generate_extra_tensors (conversion/llama.py)."""
    base = THETA
    dim = HEAD_DIM
    freqs = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    factor = rope_params.get("factor", 8.0)
    low_freq_factor = rope_params.get("low_freq_factor", 1.0)
    high_freq_factor = rope_params.get("high_freq_factor", 4.0)
    old_context_len = rope_params.get("original_max_position_embeddings", 8192)
    low_freq_wavelen = old_context_len / low_freq_factor
    high_freq_wavelen = old_context_len / high_freq_factor
    out = []
    for freq in freqs:
        wavelen = 2 * math.pi / freq
        if wavelen < high_freq_wavelen:
            out.append(1)
        elif wavelen > low_freq_wavelen:
            out.append(factor)
        else:
            smooth = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor -
                                                                       low_freq_factor)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return torch.tensor(out, dtype=torch.float32).numpy()


def gguf_tensors(sd):
    """The GGUF's tensors (float32, llama.cpp's names) of a LlamaForCausalLM state dict."""
    def a(name):
        return sd[name].detach().to(torch.float32).numpy().copy()

    t = {'token_embd.weight': a('model.embed_tokens.weight')}
    for i in range(LAYERS):
        h, p = f'model.layers.{i}.', f'blk.{i}.'
        t[p + 'attn_norm.weight'] = a(h + 'input_layernorm.weight')
        t[p + 'attn_q.weight'] = permute(a(h + 'self_attn.q_proj.weight'), HEADS, HEADS)
        t[p + 'attn_k.weight'] = permute(a(h + 'self_attn.k_proj.weight'), HEADS, KV_HEADS)
        t[p + 'attn_v.weight'] = a(h + 'self_attn.v_proj.weight')
        t[p + 'attn_output.weight'] = a(h + 'self_attn.o_proj.weight')
        t[p + 'ffn_norm.weight'] = a(h + 'post_attention_layernorm.weight')
        t[p + 'ffn_gate.weight'] = a(h + 'mlp.gate_proj.weight')
        t[p + 'ffn_up.weight'] = a(h + 'mlp.up_proj.weight')
        t[p + 'ffn_down.weight'] = a(h + 'mlp.down_proj.weight')
    t['output_norm.weight'] = a('model.norm.weight')
    return t


def write_gguf(path, tensors, factors=None, linear=None):
    w = gguf.GGUFWriter(path, 'llama')
    w.add_name('tiny-llama-rope')
    w.add_context_length(CONTEXT)
    w.add_embedding_length(D)
    w.add_block_count(LAYERS)
    w.add_feed_forward_length(D_FF)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_layer_norm_rms_eps(EPS)
    w.add_rope_freq_base(THETA)
    w.add_rope_dimension_count(HEAD_DIM)
    w.add_vocab_size(VOCAB)
    if linear is not None:
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(linear)
    w.add_file_type(0)
    for name, a in tensors.items():
        w.add_tensor(name, a)
    if factors is not None:
        w.add_tensor('rope_freqs.weight', factors)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def logits_and_inv_freq(model, ids):
    model.eval()
    with torch.no_grad():
        logits = model(torch.tensor(ids)[None]).logits[0].numpy().astype(np.float64)
    return logits, model.model.rotary_emb.inv_freq.to(torch.float32).numpy()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--out', default=os.path.join(os.path.dirname(__file__), '..', 'tests',
                                                  'golden', 'llm_rope'))
    out = ap.parse_args().out
    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(1)
    import transformers as tf
    common = dict(vocab_size=VOCAB, hidden_size=D, intermediate_size=D_FF,
                  num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                  num_key_value_heads=KV_HEADS, head_dim=HEAD_DIM, rms_norm_eps=EPS,
                  rope_theta=THETA, max_position_embeddings=CONTEXT, tie_word_embeddings=True,
                  hidden_act='silu')
    torch.manual_seed(300)
    model = tf.LlamaForCausalLM(tf.LlamaConfig(rope_scaling=dict(LLAMA3), **common))
    model = model.to(torch.float64)
    with torch.no_grad():  # norms away from 1: each one matters
        for name, p in model.named_parameters():
            if name.endswith('norm.weight'):
                p.copy_(1.0 + 0.2 * torch.randn_like(p))
            elif name.endswith('embed_tokens.weight'):
                p.copy_(0.5 * torch.randn_like(p))
            else:
                p.copy_(torch.randn_like(p) / p.shape[-1] ** 0.5)
    folder = os.path.join(out, 'hf_llama3')
    model.to(torch.float32).save_pretrained(folder, safe_serialization=True)

    ids = np.random.default_rng(31).integers(0, VOCAB, N).astype(np.int64)
    np.save(os.path.join(out, 'ids.npy'), ids)
    ref = tf.LlamaForCausalLM.from_pretrained(folder, torch_dtype=torch.float64)
    logits, inv_freq = logits_and_inv_freq(ref, ids)
    np.save(os.path.join(out, 'llama3_logits.npy'), logits)
    np.save(os.path.join(out, 'llama3_inv_freq.npy'), inv_freq)
    sd = ref.state_dict()
    tensors = gguf_tensors(sd)
    write_gguf(os.path.join(out, 'llama3.gguf'), tensors, factors=rope_factors(LLAMA3))

    # The same weights with linear scaling (transformers' model built in memory).
    cfg = tf.LlamaConfig(rope_scaling=dict(LINEAR), **common)
    lin = tf.LlamaForCausalLM(cfg).to(torch.float64)
    lin.load_state_dict(sd)
    lin_logits, lin_inv_freq = logits_and_inv_freq(lin, ids[:N_LINEAR])
    np.save(os.path.join(out, 'linear_logits.npy'), lin_logits)
    np.save(os.path.join(out, 'linear_inv_freq.npy'), lin_inv_freq)
    write_gguf(os.path.join(out, 'linear.gguf'), tensors, linear=LINEAR['factor'])

    meta = {'llama3': LLAMA3, 'linear': LINEAR, 'lengths': [N, N_LINEAR], 'vocab': VOCAB,
            'head_dim': HEAD_DIM, 'theta': THETA,
            'transformers': tf.__version__, 'torch': torch.__version__}
    with open(os.path.join(out, 'meta.json'), 'w') as f:
        json.dump(meta, f, indent=1, sort_keys=True)
        f.write('\n')


if __name__ == '__main__':
    main()
