#!/usr/bin/env python3
"""Small random decoder-only LLMs written as GGUF files in llama.cpp's conventions, and
transformers' logits for them in float64 (tests/golden/llm/).

usage: ~/.cache/clattn/golden-venv/bin/python tools/gen_llm_golden.py [--out DIR]
           (default tests/golden/llm)
       ~/.cache/clattn/golden-venv/bin/python tools/gen_llm_golden.py --real GGUF [--out DIR]
           [--prompts K,...]
           (the real model's references: real_* files, see below; --prompts: only those
           prompts', real_meta.json's other entries kept)
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
      The other types, one architecture each (MORE_TYPES): tiny_llama_q4_0, tiny_llama_bf16,
      tiny_qwen2_q5_0, tiny_qwen3_q5_1 (the weights of that architecture's f32 file).
  tiny_qwen2_kquants.gguf
      a qwen2 as above but with d_model 256, heads of 64, d_ff 256 (K-quant blocks hold 256
      values: every linear's input width a multiple of 256) whose 2-D weights are random raw
      Q4_K, Q5_K and Q6_K blocks (KQ_TYPES: each type in a stacked q|k|v or gate|up, and in
      another linear; token_embd Q6_K, output Q4_K), with finite float16 block scales.
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
  real_ids<k>.npy         int64 prompt ids (k = 0 .. 7; the first is the ChatML rendering of
                          "What is the capital of France?" with the generation prompt; 5: C
                          code, 6: several languages and scripts, 7: a long chat turn)
  real_logits<k>.npy      float64 [r, vocab]: full rows of logits of prompt k (n tokens) at
                          the positions real_pos<k>.npy (int64 [r]) names: 0 and n - 1 for
                          k < 5, n - 1 only for the others (smaller files)
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
# The other types gguf-py quantises, each in one architecture only (small goldens).
MORE_TYPES = {'llama': {'q4_0': Q.Q4_0, 'bf16': Q.BF16}, 'qwen2': {'q5_0': Q.Q5_0},
              'qwen3': {'q5_1': Q.Q5_1}}
LENGTHS = [7, 33]
# The K-quant model (tiny_qwen2_kquants.gguf): ggml's K-quants pack 256 weights per block, so
# every linear's input width is a multiple of 256; per layer and tensor the type in KQ_TYPES.
KQ_DIMS = dict(d=256, layers=2, heads=4, kv_heads=2, head_dim=64, d_ff=256)
KQ_TYPES = {
    'blk.0.attn_q.weight': Q.Q4_K, 'blk.0.attn_k.weight': Q.Q4_K, 'blk.0.attn_v.weight': Q.Q4_K,
    'blk.0.attn_output.weight': Q.Q5_K, 'blk.0.ffn_gate.weight': Q.Q6_K,
    'blk.0.ffn_up.weight': Q.Q6_K, 'blk.0.ffn_down.weight': Q.Q4_K,
    'blk.1.attn_q.weight': Q.Q5_K, 'blk.1.attn_k.weight': Q.Q5_K, 'blk.1.attn_v.weight': Q.Q5_K,
    'blk.1.attn_output.weight': Q.Q6_K, 'blk.1.ffn_gate.weight': Q.Q4_K,
    'blk.1.ffn_up.weight': Q.Q4_K, 'blk.1.ffn_down.weight': Q.Q5_K,
    'token_embd.weight': Q.Q6_K, 'output.weight': Q.Q4_K,
}


def permute(w, n_head, n_head_kv):
    """convert_hf_to_gguf.py's LlamaModel.permute."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


TINY_DIMS = dict(d=D, layers=LAYERS, heads=HEADS, kv_heads=KV_HEADS, head_dim=HEAD_DIM, d_ff=D_FF)


def random_model(arch, rng, dims=TINY_DIMS, lin=None):
    """Hugging Face weights [out, in] of a random model (float32), by GGUF name (lin(name, out,
    in), when given, makes the 2-D ones instead: raw K-quant blocks)."""
    D, LAYERS, HEADS, KV_HEADS, HEAD_DIM, D_FF = (dims[k] for k in (
        'd', 'layers', 'heads', 'kv_heads', 'head_dim', 'd_ff'))

    def gaussian(out, inp):
        return (rng.standard_normal((out, inp)) / np.sqrt(inp)).astype(np.float32)

    def norm(n):
        return (1.0 + 0.2 * rng.standard_normal(n)).astype(np.float32)

    def named(name, out, inp):
        return lin(name, out, inp) if lin else gaussian(out, inp)

    t = {'token_embd.weight': (lin('token_embd.weight', VOCAB, D) if lin else
                               (0.3 * rng.standard_normal((VOCAB, D))).astype(np.float32))}
    for i in range(LAYERS):
        p = f'blk.{i}.'
        t[p + 'attn_norm.weight'] = norm(D)
        q, k = named(p + 'attn_q.weight', HEADS * HEAD_DIM, D), named(p + 'attn_k.weight',
                                                                    KV_HEADS * HEAD_DIM, D)
        if arch == 'llama':
            q, k = permute(q, HEADS, HEADS), permute(k, HEADS, KV_HEADS)
        t[p + 'attn_q.weight'] = q
        t[p + 'attn_k.weight'] = k
        t[p + 'attn_v.weight'] = named(p + 'attn_v.weight', KV_HEADS * HEAD_DIM, D)
        if arch == 'qwen2':
            for n, w in (('q', HEADS), ('k', KV_HEADS), ('v', KV_HEADS)):
                t[p + f'attn_{n}.bias'] = (0.3 * rng.standard_normal(w * HEAD_DIM)).astype(
                    np.float32)
        if arch == 'qwen3':
            t[p + 'attn_q_norm.weight'] = norm(HEAD_DIM)
            t[p + 'attn_k_norm.weight'] = norm(HEAD_DIM)
        t[p + 'attn_output.weight'] = named(p + 'attn_output.weight', D, HEADS * HEAD_DIM)
        t[p + 'ffn_norm.weight'] = norm(D)
        t[p + 'ffn_gate.weight'] = named(p + 'ffn_gate.weight', D_FF, D)
        t[p + 'ffn_up.weight'] = named(p + 'ffn_up.weight', D_FF, D)
        t[p + 'ffn_down.weight'] = named(p + 'ffn_down.weight', D, D_FF)
    t['output_norm.weight'] = norm(D)
    if arch == 'qwen2':
        t['output.weight'] = named('output.weight', VOCAB, D)
    return t


def random_kquant_blocks(rng, qtype, out, inp, std):
    """Raw blocks of a [out, inp] weight in Q4_K, Q5_K or Q6_K (uint8 [out, bytes per row]):
    random quants and sub-block scales, block scales (finite, normal float16) chosen so that
    the weights' standard deviation is about std. gguf-py cannot quantise to K-quants;
    transformers dequantises these same bytes with gguf-py."""
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    n = out * inp // block
    b = rng.integers(0, 256, (n, size), dtype=np.uint8)
    # Per block: a scale within a factor 2 of the target's; w = d * sc * q - dmin * m.
    jitter = rng.uniform(0.7, 1.4, n)
    if qtype == Q.Q6_K:
        # ql[128] qh[64] scales[16] (int8) d: w = d * sc * (q - 32); sc kept in [-32, 32).
        b[:, 192:208] = (rng.integers(-32, 32, (n, 16)).astype(np.int8)).view(np.uint8)
        d = std / 341.0 * jitter
        b[:, 208:210] = d.astype(np.float16).reshape(n, 1).view(np.uint8)
    else:
        # d dmin scales[12] (6-bit sc and m) [qh[32]] qs: q in 0..15 (Q4_K) or 0..31 (Q5_K);
        # dmin centres the weights on zero on average (E[sc q] = dmin / d E[m]).
        spread, centre = (258.0, 7.5) if qtype == Q.Q4_K else (527.0, 15.5)
        d = std / spread * jitter
        b[:, 0:2] = d.astype(np.float16).reshape(n, 1).view(np.uint8)
        b[:, 2:4] = (d * centre).astype(np.float16).reshape(n, 1).view(np.uint8)
    return b.reshape(out, inp // block * size)


def write_gguf(path, arch, tensors, qtype, dims=TINY_DIMS, raw_types=None):
    """raw_types: name -> type of the tensors given as raw blocks already (qtype: the file's
    type as general.file_type records it)."""
    w = gguf.GGUFWriter(path, arch)
    w.add_name(f'tiny-{arch}')
    w.add_context_length(CONTEXT)
    w.add_embedding_length(dims['d'])
    w.add_block_count(dims['layers'])
    w.add_feed_forward_length(dims['d_ff'])
    w.add_head_count(dims['heads'])
    w.add_head_count_kv(dims['kv_heads'])
    w.add_layer_norm_rms_eps(EPS)
    w.add_rope_freq_base(THETA)
    if arch == 'llama':
        w.add_rope_dimension_count(dims['head_dim'])
    w.add_vocab_size(VOCAB)
    if arch == 'qwen3':
        w.add_key_length(dims['head_dim'])
        w.add_value_length(dims['head_dim'])
    w.add_file_type(int(qtype) if qtype != Q.F32 else 0)
    for name, a in tensors.items():
        if raw_types and name in raw_types:
            w.add_tensor(name, a, raw_dtype=raw_types[name])  # uint8 [rows, bytes per row]
        elif a.ndim == 1 or qtype == Q.F32:
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
        for tname, qtype in {**TYPES, **MORE_TYPES[arch]}.items():
            stem = f'tiny_{arch}_{tname}'
            path = os.path.join(out_dir, stem + '.gguf')
            write_gguf(path, arch, weights, qtype)
            rng = np.random.default_rng(7 + a_i)
            ids_list = [rng.integers(0, VOCAB, n).astype(np.int64) for n in LENGTHS]
            golden_logits(out_dir, stem, arch, ids_list, HEAD_DIM)
            meta['models'].append({'file': stem + '.gguf', 'arch': arch, 'type': tname})
    kquant_model(out_dir, meta)
    hf_folders(out_dir, meta)
    with open(os.path.join(out_dir, 'meta.json'), 'w') as f:
        json.dump(meta, f, indent=1, sort_keys=True)
        f.write('\n')


def golden_logits(out_dir, stem, arch, ids_list, head_dim):
    """transformers' float64 logits of out_dir/stem.gguf for each id list, saved beside it."""
    path = os.path.join(out_dir, stem + '.gguf')
    # transformers reads the file from a folder of its own (it lists the folder).
    with tempfile.TemporaryDirectory() as d:
        link = os.path.join(d, stem + '.gguf')
        os.symlink(os.path.abspath(path), link)
        # transformers 4.57 maps no qwen3 key to head_dim (its default is 128): the
        # file's attention.key_length is given as the config's head_dim.
        extra = {'head_dim': head_dim} if arch == 'qwen3' else {}
        _, logits = hf_logits(link, ids_list, **extra)
    for k, (ids, lg) in enumerate(zip(ids_list, logits)):
        np.save(os.path.join(out_dir, f'{stem}_ids{k}.npy'), ids)
        np.save(os.path.join(out_dir, f'{stem}_logits{k}.npy'), lg)


def kquant_model(out_dir, meta):
    """tiny_qwen2_kquants.gguf: random Q4_K, Q5_K and Q6_K blocks (KQ_TYPES), F32 norms and
    biases, and transformers' logits of it."""
    arch, stem = 'qwen2', 'tiny_qwen2_kquants'
    rng = np.random.default_rng(300)

    def lin(name, out, inp):
        std = 0.3 if name == 'token_embd.weight' else 1.0 / np.sqrt(inp)
        return random_kquant_blocks(rng, KQ_TYPES[name], out, inp, std)

    weights = random_model(arch, rng, KQ_DIMS, lin)
    write_gguf(os.path.join(out_dir, stem + '.gguf'), arch, weights, Q.Q4_K, KQ_DIMS, KQ_TYPES)
    rng = np.random.default_rng(301)
    ids_list = [rng.integers(0, VOCAB, n).astype(np.int64) for n in LENGTHS]
    golden_logits(out_dir, stem, arch, ids_list, KQ_DIMS['head_dim'])
    meta['models'].append({'file': stem + '.gguf', 'arch': arch, 'type': 'q4_k,q5_k,q6_k'})


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


LONG_TURN = (
    'I am writing a short guide for new volunteers at our community garden, and I would like '
    'your help to make it clearer. Here is my draft. Welcome to the garden! Every plot is '
    'looked after by one family or one person, and the paths, the tool shed, the compost bins '
    'and the water taps are shared by everybody. Please close the gate behind you, because '
    'rabbits come in from the field next door and they eat young lettuce in a single night. '
    'Tools live in the shed: take what you need, clean the soil off when you are done and hang '
    'each tool back on its hook, so that the next person can find it. The compost has three '
    'bins. The left bin is for fresh kitchen scraps and green cuttings, the middle one is '
    'turned once a month, and the right one is ready to use. Never put meat, dairy or diseased '
    'plants into any of them. Water early in the morning or in the evening, at the foot of the '
    'plants rather than on the leaves, and turn the tap off firmly, since it drips. In summer '
    'we have a rota for watering the shared herb beds: your name will be on the board by the '
    'shed for one week in July or August. If you go away, ask a neighbour to water your plot '
    'and tell us by writing a note on the board. We meet on the first Saturday of every month '
    'at ten o\'clock for an hour of shared work, followed by tea. Children are welcome when '
    'they are with an adult. Dogs must stay on a lead and outside the beds. Finally, if '
    'something is broken or missing, please tell one of the coordinators rather than trying to '
    'fix it alone. Could you rewrite this as a numbered list of at most ten short rules, keep '
    'the friendly tone, and then suggest a title for the guide?')

# Prompts: a text, or a list of chat messages (rendered by the file's template with the
# generation prompt). FULL_ROWS_BOTH: the prompts whose full rows at 0 and n - 1 are kept.
FULL_ROWS_BOTH = 5
REAL_PROMPTS = [
    None,  # the chat prompt below
    'The quick brown fox jumps over the lazy dog. Then it',
    'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n',
    'Once upon a time, in a small village by the sea, there lived an old fisherman who',
    # A long prompt (about 350 tokens): decode steps over caches of hundreds of keys.
    ' '.join(['The history of the printing press begins in the fifteenth century, when movable '
              'type changed how books were made, sold and read across Europe.'] * 12) +
    ' In summary, the most important consequence of the printing press was',
    '#include <stddef.h>\n\n/* Returns the index of x in the sorted array a[0..n-1], or -1. */\n'
    'long binary_search(const int *a, size_t n, int x)\n{\n    size_t lo = 0, hi = n;\n'
    '    while (lo < hi) {\n',
    'Bonjour, je m\'appelle Marie. ¿Dónde está la estación? Guten Morgen, wie geht es dir? '
    '你好，世界。こんにちは、元気ですか。Привет, как дела? '
    'In English, all of these greetings mean',
    [{'role': 'user', 'content': LONG_TURN}],
]
CHAT = [{'role': 'user', 'content': 'What is the capital of France?'}]


def real(gguf_path, out_dir, only=None):
    from transformers import AutoModelForCausalLM, AutoTokenizer
    d, f = os.path.dirname(gguf_path), os.path.basename(gguf_path)
    tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, torch_dtype=torch.float64)
    model.eval()
    meta = {'prompts': [], 'transformers': __import__('transformers').__version__,
            'torch': torch.__version__}
    meta_path = os.path.join(out_dir, 'real_meta.json')
    if only is not None and os.path.exists(meta_path):
        with open(meta_path) as fm:
            meta['prompts'] = json.load(fm)['prompts']
    im_end = tok.convert_tokens_to_ids('<|im_end|>')
    for k, text in enumerate(REAL_PROMPTS):
        if only is not None and k not in only:
            continue
        if text is None or isinstance(text, list):
            text = tok.apply_chat_template(CHAT if text is None else text,
                                           add_generation_prompt=True, tokenize=False)
        ids = tok(text, add_special_tokens=False)['input_ids']
        with torch.no_grad():
            logits = model(torch.tensor(ids)[None]).logits[0].numpy()
            n = len(ids)
            pos = sorted(set([0, n - 1])) if k < FULL_ROWS_BOTH else [n - 1]
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
        entry = {'text': text, 'length': len(ids), 'positions': pos,
                 'greedy_text': tok.decode(gen), 'smallest_top2_gap': min(gaps)}
        if k < len(meta['prompts']):
            meta['prompts'][k] = entry
        else:
            assert k == len(meta['prompts']), 'the prompts before k are not in real_meta.json'
            meta['prompts'].append(entry)
    with open(meta_path, 'w') as f:
        json.dump(meta, f, indent=1, sort_keys=True, ensure_ascii=False)
        f.write('\n')


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--out', default=os.path.join(os.path.dirname(__file__), '..', 'tests',
                                                  'golden', 'llm'))
    ap.add_argument('--real', help='the real SmolLM2-135M-Instruct Q4_1 GGUF')
    ap.add_argument('--prompts', help='with --real: only these prompts (K,...), the others\' '
                    'entries of real_meta.json kept')
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    torch.set_num_threads(1)
    if a.real:
        real(a.real, a.out, None if a.prompts is None else
             {int(k) for k in a.prompts.split(',')})
    else:
        tiny(a.out)


if __name__ == '__main__':
    main()
