#!/usr/bin/env python3
"""Small random decoder-only LLMs written as GGUF files in llama.cpp's conventions, and
transformers' logits for them in float64 (tests/golden/llm/).

usage: ~/.cache/clattn/golden-venv/bin/python tools/gen_llm_golden.py [--out DIR]
           (default tests/golden/llm)
       ~/.cache/clattn/golden-venv/bin/python tools/gen_llm_golden.py --real GGUF [--out DIR]
           (the real model's references: real_* files, see below)
(the venv of tools/make-golden-venv.sh, from which every generator runs: tests/golden/README.md)

Files (tiny models)
  tiny_<arch>_<type>.gguf
      a random model of architecture <arch> (llama, qwen2, qwen3): d_model 64, 2 layers,
      4 query heads on 2 key/value heads of width 16, SwiGLU d_ff 64, vocabulary 128, RMSNorm;
      qwen2 with q/k/v biases and a separate output matrix; qwen3 with per-head q/k RMSNorm;
      llama's output tied to the token embedding. Written by gguf-py's GGUFWriter as
      llama.cpp's convert_hf_to_gguf.py writes such models: the llama file's q and k rows
      permuted (LlamaModel.permute: the rotation then acts on adjacent pairs), the 2-D weights
      in <type> (f32, f16, q8_0, q4_1, quantised by gguf.quants.quantize), the 1-D ones in F32.
  tiny_<arch>_<type>_ids<k>.npy, tiny_<arch>_<type>_logits<k>.npy
      int64 ids [n] (k = 0: n 7, k = 1: n 33) and float64 logits [n, vocab] of
      transformers' AutoModelForCausalLM loaded from THAT file (its own de-permutation and
      dequantisation) in float64, teacher-forced.
  hf_<arch>_<dtype>/config.json, model.safetensors, generation_config.json
      the same kind of random model as a Hugging Face folder, saved by transformers'
      save_pretrained (LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM; llama in float32
      with tied embeddings, qwen2 in bfloat16, qwen3 in float16): the rotation on halves, the
      weights as PyTorch holds them.
  hf_<arch>_<dtype>_ids<k>.npy, hf_<arch>_<dtype>_logits<k>.npy
      as above, transformers' float64 logits of the folder.
  meta.json
      the models (file, architecture, type) and the sequences' lengths.

Files (--real GGUF: SmolLM2-135M-Instruct Q4_1)
  real_ids<k>.npy         int64 prompt ids (k = 0 .. 3; the first is the ChatML rendering of
                          "What is the capital of France?" with the generation prompt)
  real_logits<k>.npy      float64 [2, vocab]: the logits at positions 0 and n - 1 of prompt k
                          (n tokens), real_pos<k>.npy int64 [2] which positions
  real_top<k>_ids.npy, real_top<k>_values.npy   int64 / float64 [n, 20]: the top-20 logits at
                          every position of prompt k
  real_greedy<k>.npy      int64 [64]: transformers' greedy continuation (float64, no sampling;
                          stops early at <|im_end|> only if the model ends there: then shorter)
  real_gaps<k>.npy        float64 [steps]: the gap between the two largest logits at each
                          greedy step (a near-tie may resolve either way)
  real_meta.json          the prompts' texts and lengths, the greedy texts
"""
import argparse
import json
import os
import tempfile

import numpy as np
import torch
import gguf
from gguf import GGMLQuantizationType as Q

D, LAYERS, HEADS, KV_HEADS, HEAD_DIM, D_FF, VOCAB = 64, 2, 4, 2, 16, 64, 128
EPS, THETA, CONTEXT = 1e-5, 10000.0, 256
TYPES = {'f32': Q.F32, 'f16': Q.F16, 'q8_0': Q.Q8_0, 'q4_1': Q.Q4_1}
LENGTHS = [7, 33]


def permute(w, n_head, n_head_kv):
    """convert_hf_to_gguf.py's LlamaModel.permute."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def random_model(arch, rng):
    """Hugging Face weights [out, in] of a random model (float32), by GGUF name."""
    def lin(out, inp):
        return (rng.standard_normal((out, inp)) / np.sqrt(inp)).astype(np.float32)

    def norm(n):
        return (1.0 + 0.2 * rng.standard_normal(n)).astype(np.float32)

    t = {'token_embd.weight': (0.3 * rng.standard_normal((VOCAB, D))).astype(np.float32)}
    for i in range(LAYERS):
        p = f'blk.{i}.'
        t[p + 'attn_norm.weight'] = norm(D)
        q, k = lin(HEADS * HEAD_DIM, D), lin(KV_HEADS * HEAD_DIM, D)
        if arch == 'llama':
            q, k = permute(q, HEADS, HEADS), permute(k, HEADS, KV_HEADS)
        t[p + 'attn_q.weight'] = q
        t[p + 'attn_k.weight'] = k
        t[p + 'attn_v.weight'] = lin(KV_HEADS * HEAD_DIM, D)
        if arch == 'qwen2':
            for n, w in (('q', HEADS), ('k', KV_HEADS), ('v', KV_HEADS)):
                t[p + f'attn_{n}.bias'] = (0.3 * rng.standard_normal(w * HEAD_DIM)).astype(
                    np.float32)
        if arch == 'qwen3':
            t[p + 'attn_q_norm.weight'] = norm(HEAD_DIM)
            t[p + 'attn_k_norm.weight'] = norm(HEAD_DIM)
        t[p + 'attn_output.weight'] = lin(D, HEADS * HEAD_DIM)
        t[p + 'ffn_norm.weight'] = norm(D)
        t[p + 'ffn_gate.weight'] = lin(D_FF, D)
        t[p + 'ffn_up.weight'] = lin(D_FF, D)
        t[p + 'ffn_down.weight'] = lin(D, D_FF)
    t['output_norm.weight'] = norm(D)
    if arch == 'qwen2':
        t['output.weight'] = lin(VOCAB, D)
    return t


def write_gguf(path, arch, tensors, qtype):
    w = gguf.GGUFWriter(path, arch)
    w.add_name(f'tiny-{arch}')
    w.add_context_length(CONTEXT)
    w.add_embedding_length(D)
    w.add_block_count(LAYERS)
    w.add_feed_forward_length(D_FF)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_layer_norm_rms_eps(EPS)
    w.add_rope_freq_base(THETA)
    if arch == 'llama':
        w.add_rope_dimension_count(HEAD_DIM)
    w.add_vocab_size(VOCAB)
    if arch == 'qwen3':
        w.add_key_length(HEAD_DIM)
        w.add_value_length(HEAD_DIM)
    w.add_file_type(int(qtype) if qtype != Q.F32 else 0)
    for name, a in tensors.items():
        if a.ndim == 1 or qtype == Q.F32:
            w.add_tensor(name, a)
        else:
            w.add_tensor(name, gguf.quants.quantize(a, qtype), raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def hf_logits(path, ids_list, **config):
    """transformers' float64 logits of each id list, loading the GGUF itself (config: what
    transformers' GGUF reader does not take from the file)."""
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(os.path.dirname(path),
                                                 gguf_file=os.path.basename(path),
                                                 torch_dtype=torch.float64, **config)
    model.eval()
    out = []
    with torch.no_grad():
        for ids in ids_list:
            out.append(model(torch.tensor(ids)[None]).logits[0].numpy().astype(np.float64))
    return model, out


def tiny(out_dir):
    meta = {'models': [], 'lengths': LENGTHS, 'vocab': VOCAB,
            'transformers': __import__('transformers').__version__,
            'torch': torch.__version__, 'gguf': 'gguf-py'}
    for a_i, arch in enumerate(('llama', 'qwen2', 'qwen3')):
        weights = random_model(arch, np.random.default_rng(100 + a_i))
        for tname, qtype in TYPES.items():
            stem = f'tiny_{arch}_{tname}'
            path = os.path.join(out_dir, stem + '.gguf')
            write_gguf(path, arch, weights, qtype)
            rng = np.random.default_rng(7 + a_i)
            ids_list = [rng.integers(0, VOCAB, n).astype(np.int64) for n in LENGTHS]
            # transformers reads the file from a folder of its own (it lists the folder).
            with tempfile.TemporaryDirectory() as d:
                link = os.path.join(d, stem + '.gguf')
                os.symlink(os.path.abspath(path), link)
                # transformers 4.57 maps no qwen3 key to head_dim (its default is 128): the
                # file's attention.key_length is given as the config's head_dim.
                extra = {'head_dim': HEAD_DIM} if arch == 'qwen3' else {}
                _, logits = hf_logits(link, ids_list, **extra)
            for k, (ids, lg) in enumerate(zip(ids_list, logits)):
                np.save(os.path.join(out_dir, f'{stem}_ids{k}.npy'), ids)
                np.save(os.path.join(out_dir, f'{stem}_logits{k}.npy'), lg)
            meta['models'].append({'file': stem + '.gguf', 'arch': arch, 'type': tname})
    hf_folders(out_dir, meta)
    with open(os.path.join(out_dir, 'meta.json'), 'w') as f:
        json.dump(meta, f, indent=1, sort_keys=True)
        f.write('\n')


HF_CASES = [('llama', 'f32', torch.float32), ('qwen2', 'bf16', torch.bfloat16),
            ('qwen3', 'f16', torch.float16)]


def hf_folders(out_dir, meta):
    import transformers as tf
    for a_i, (arch, tname, dtype) in enumerate(HF_CASES):
        common = dict(vocab_size=VOCAB, hidden_size=D, intermediate_size=D_FF,
                      num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                      num_key_value_heads=KV_HEADS, head_dim=HEAD_DIM, rms_norm_eps=EPS,
                      rope_theta=THETA, max_position_embeddings=CONTEXT,
                      tie_word_embeddings=arch == 'llama', hidden_act='silu')
        config, cls = {
            'llama': (tf.LlamaConfig, tf.LlamaForCausalLM),
            'qwen2': (tf.Qwen2Config, tf.Qwen2ForCausalLM),
            'qwen3': (tf.Qwen3Config, tf.Qwen3ForCausalLM),
        }[arch]
        torch.manual_seed(200 + a_i)
        model = cls(config(**common)).to(torch.float64)
        with torch.no_grad():  # norms away from 1, biases away from 0: each one matters
            for name, p in model.named_parameters():
                if name.endswith('norm.weight'):
                    p.copy_(1.0 + 0.2 * torch.randn_like(p))
                elif name.endswith('.bias'):
                    p.copy_(0.3 * torch.randn_like(p))
                elif name.endswith('embed_tokens.weight'):
                    p.copy_(0.3 * torch.randn_like(p))
                else:
                    p.copy_(torch.randn_like(p) / p.shape[-1] ** 0.5)
        stem = f'hf_{arch}_{tname}'
        folder = os.path.join(out_dir, stem)
        model.to(dtype).save_pretrained(folder, safe_serialization=True)
        ref = cls.from_pretrained(folder, torch_dtype=torch.float64)
        ref.eval()
        rng = np.random.default_rng(17 + a_i)
        for k, n in enumerate(LENGTHS):
            ids = rng.integers(0, VOCAB, n).astype(np.int64)
            with torch.no_grad():
                logits = ref(torch.tensor(ids)[None]).logits[0].numpy().astype(np.float64)
            np.save(os.path.join(out_dir, f'{stem}_ids{k}.npy'), ids)
            np.save(os.path.join(out_dir, f'{stem}_logits{k}.npy'), logits)
        meta['models'].append({'file': stem, 'arch': arch, 'type': tname})


REAL_PROMPTS = [
    None,  # the chat prompt below
    'The quick brown fox jumps over the lazy dog. Then it',
    'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n',
    'Once upon a time, in a small village by the sea, there lived an old fisherman who',
    # A long prompt (about 350 tokens): decode steps over caches of hundreds of keys.
    ' '.join(['The history of the printing press begins in the fifteenth century, when movable '
              'type changed how books were made, sold and read across Europe.'] * 12) +
    ' In summary, the most important consequence of the printing press was',
]
CHAT = [{'role': 'user', 'content': 'What is the capital of France?'}]


def real(gguf_path, out_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer
    d, f = os.path.dirname(gguf_path), os.path.basename(gguf_path)
    tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, torch_dtype=torch.float64)
    model.eval()
    meta = {'prompts': [], 'transformers': __import__('transformers').__version__,
            'torch': torch.__version__}
    im_end = tok.convert_tokens_to_ids('<|im_end|>')
    for k, text in enumerate(REAL_PROMPTS):
        if text is None:
            text = tok.apply_chat_template(CHAT, add_generation_prompt=True, tokenize=False)
        ids = tok(text, add_special_tokens=False)['input_ids']
        with torch.no_grad():
            logits = model(torch.tensor(ids)[None]).logits[0].numpy()
            n = len(ids)
            pos = sorted(set([0, n - 1]))
            np.save(os.path.join(out_dir, f'real_ids{k}.npy'), np.array(ids, np.int64))
            np.save(os.path.join(out_dir, f'real_pos{k}.npy'), np.array(pos, np.int64))
            np.save(os.path.join(out_dir, f'real_logits{k}.npy'), logits[pos].astype(np.float64))
            top = np.argsort(-logits, axis=1, kind='stable')[:, :20]
            np.save(os.path.join(out_dir, f'real_top{k}_ids.npy'), top.astype(np.int64))
            np.save(os.path.join(out_dir, f'real_top{k}_values.npy'),
                    np.take_along_axis(logits, top, axis=1).astype(np.float64))
            # Greedy, with the cache, in float64: 64 tokens or up to <|im_end|>.
            seq = list(ids)
            gen, gaps = [], []
            past = None
            inp = torch.tensor(ids)[None]
            for _ in range(64):
                o = model(inp, past_key_values=past, use_cache=True)
                past = o.past_key_values
                last = o.logits[0, -1]
                two = torch.topk(last, 2).values
                gaps.append(float(two[0] - two[1]))
                nxt = int(torch.argmax(last))
                gen.append(nxt)
                seq.append(nxt)
                if nxt == im_end:
                    break
                inp = torch.tensor([[nxt]])
        np.save(os.path.join(out_dir, f'real_greedy{k}.npy'), np.array(gen, np.int64))
        np.save(os.path.join(out_dir, f'real_gaps{k}.npy'), np.array(gaps, np.float64))
        meta['prompts'].append({'text': text, 'length': len(ids), 'positions': pos,
                                'greedy_text': tok.decode(gen),
                                'smallest_top2_gap': min(gaps)})
    with open(os.path.join(out_dir, 'real_meta.json'), 'w') as f:
        json.dump(meta, f, indent=1, sort_keys=True, ensure_ascii=False)
        f.write('\n')


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--out', default=os.path.join(os.path.dirname(__file__), '..', 'tests',
                                                  'golden', 'llm'))
    ap.add_argument('--real', help='the real SmolLM2-135M-Instruct Q4_1 GGUF')
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    torch.set_num_threads(1)
    if a.real:
        real(a.real, a.out)
    else:
        tiny(a.out)


if __name__ == '__main__':
    main()
