#!/usr/bin/env python3
"""A tiny random decoder-only LLM with a tokenizer and a chat template, as one GGUF file, for the
tests of the text API and clattn-chat (tests/test_llm_text.c, tests/test_chat.sh,
tests/python/test_llm.py); and what transformers' Jinja renders of its template.

usage: ~/.cache/clattn/golden-venv/bin/python tools/gen_chat_fixture.py [--out DIR]
           (default tests/data/llm_chat)

Files
  tiny_chat.gguf   architecture llama: d_model 32, 2 layers, 4 query heads on 2 key/value heads
                   of width 8, SwiGLU d_ff 64, context 256, F32 weights drawn with seed 5, a
                   separate output matrix whose rows for the bytes 0x80-0xFF are zero (greedy
                   and top-k sampling then give ASCII text). Tokenizer "gpt2" with
                   pre-tokenizer "gpt-2":
                   ids 0-2 the control tokens <|endoftext|>, <|im_start|>, <|im_end|> (BOS 1,
                   EOS 2, no BOS added), ids 3-258 the 256 bytes in GPT-2's byte alphabet, then
                   the tokens of MERGES. A ChatML template with a default system prompt, as
                   SmolLM2's.
  chat.json        the template rendered by jinja2 with transformers' environment (trim_blocks,
                   lstrip_blocks) for MESSAGES with and without add_generation_prompt.
"""
import argparse
import json
import os

import numpy as np
import gguf
import jinja2

D, LAYERS, HEADS, KV_HEADS, HEAD_DIM, D_FF, CONTEXT = 32, 2, 4, 2, 8, 64, 256
SPECIALS = ['<|endoftext|>', '<|im_start|>', '<|im_end|>']
MERGES = ['Ġ t', 'h e', 'Ġt he', 'i n', 'Ġ a', 'r e', 'o n', 'Ġ s', 'e r', 'a t', 'Ġ P',
          'Ġ i']
TEMPLATE = (
    "{% for message in messages %}"
    "{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a tiny test model.<|im_end|>\n' }}"
    "{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
MESSAGES = [{'role': 'user', 'content': 'Hi there, is it the cat?'}]


def bytes_to_unicode():
    bs = list(range(ord('!'), ord('~') + 1)) + list(range(0xA1, 0xAC + 1)) + \
        list(range(0xAE, 0xFF + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, (chr(c) for c in cs)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--out', default='tests/data/llm_chat')
    out = ap.parse_args().out
    os.makedirs(out, exist_ok=True)
    byte_chars = bytes_to_unicode()
    tokens = SPECIALS + [byte_chars[b] for b in range(256)] + [m.replace(' ', '') for m in MERGES]
    assert len(set(tokens)) == len(tokens)
    types = [3] * len(SPECIALS) + [1] * (len(tokens) - len(SPECIALS))
    vocab = len(tokens)

    rng = np.random.default_rng(5)

    def lin(rows, cols):
        return (rng.standard_normal((rows, cols)) / np.sqrt(cols)).astype(np.float32)

    # The output rows of the bytes 0x80-0xFF are zero and the others large, so that greedy
    # and top-k sampling give ASCII text (valid UTF-8, usable as stop strings).
    output = (0.8 * rng.standard_normal((vocab, D))).astype(np.float32)
    output[len(SPECIALS) + 0x80:len(SPECIALS) + 0x100] = 0
    t = {'token_embd.weight': rng.standard_normal((vocab, D)).astype(np.float32),
         'output_norm.weight': (1 + 0.1 * rng.standard_normal(D)).astype(np.float32),
         'output.weight': output}
    for i in range(LAYERS):
        p = f'blk.{i}.'
        t[p + 'attn_norm.weight'] = (1 + 0.1 * rng.standard_normal(D)).astype(np.float32)
        t[p + 'attn_q.weight'] = lin(HEADS * HEAD_DIM, D)
        t[p + 'attn_k.weight'] = lin(KV_HEADS * HEAD_DIM, D)
        t[p + 'attn_v.weight'] = lin(KV_HEADS * HEAD_DIM, D)
        t[p + 'attn_output.weight'] = lin(D, HEADS * HEAD_DIM)
        t[p + 'ffn_norm.weight'] = (1 + 0.1 * rng.standard_normal(D)).astype(np.float32)
        t[p + 'ffn_gate.weight'] = lin(D_FF, D)
        t[p + 'ffn_up.weight'] = lin(D_FF, D)
        t[p + 'ffn_down.weight'] = lin(D, D_FF)

    w = gguf.GGUFWriter(os.path.join(out, 'tiny_chat.gguf'), 'llama')
    w.add_name('tiny-chat')
    w.add_context_length(CONTEXT)
    w.add_embedding_length(D)
    w.add_block_count(LAYERS)
    w.add_feed_forward_length(D_FF)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    w.add_rope_dimension_count(HEAD_DIM)
    w.add_vocab_size(vocab)
    w.add_file_type(0)
    w.add_tokenizer_model('gpt2')
    w.add_tokenizer_pre('gpt-2')
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(MERGES)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(False)
    w.add_chat_template(TEMPLATE)
    for name, a in t.items():
        w.add_tensor(name, a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True,
                             loader=jinja2.BaseLoader())
    tmpl = env.from_string(TEMPLATE)
    rendered = {str(g).lower(): tmpl.render(messages=MESSAGES, add_generation_prompt=g,
                                            bos_token=SPECIALS[1], eos_token=SPECIALS[2])
                for g in (True, False)}
    with open(os.path.join(out, 'chat.json'), 'w') as f:
        json.dump({'messages': MESSAGES, 'rendered': rendered, 'vocab': vocab,
                   'jinja2': jinja2.__version__}, f, indent=1, sort_keys=True)
        f.write('\n')


if __name__ == '__main__':
    main()
