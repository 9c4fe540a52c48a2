#!/usr/bin/env python3
"""The special tokens a chat template sees, rendered by transformers, for tests/test_llm_text.c
(clattn_llm_apply_chat_template).

transformers' apply_chat_template passes the tokenizer's special_tokens_map (bos_token,
eos_token, unk_token, sep_token, pad_token, cls_token, mask_token, additional_special_tokens:
each one that is set, as text) with messages and add_generation_prompt to the template. A GGUF
names its special tokens by id (tokenizer.ggml.bos_token_id, eos_token_id, unknown_token_id,
padding_token_id, seperator_token_id, cls_token_id, mask_token_id). For each GGUF below this
script reads those ids with gguf-py, builds a transformers tokenizer
(PreTrainedTokenizerFast over the file's vocabulary) whose special tokens are the ids' texts,
and renders TEMPLATE (which prints every name, or <undefined>) with its apply_chat_template.
(transformers' own GGUF loader is not used: for architecture "llama" it sets eos_token to the
BOS's text, and it reads no separator, cls or mask id.)

Writes into --out:
  special_tokens.gguf  a vocabulary-only GGUF (tokenizer "gpt2", pre-tokenizer "gpt-2"): the
                       256 bytes of GPT-2's alphabet after 8 special tokens, each of the ids
                       above set but the padding one (left out: the template must see
                       pad_token undefined).
  renders.json         {"template", "messages", "renders": {file: {"false", "true"}}} for
                       special_tokens.gguf and tests/data/llm_chat/tiny_chat.gguf (BOS and EOS
                       only), with add_generation_prompt false and true.

usage: ~/.cache/clattn/golden-venv/bin/python tools/gen_chat_special_tokens_golden.py
           [--out DIR]   (default tests/golden/chat_special_tokens)
"""
import argparse
import json
import os

import gguf
import tokenizers
import transformers

from gen_chat_fixture import bytes_to_unicode  # GPT-2's byte-to-character map (tools/)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY_CHAT = os.path.join(ROOT, 'tests', 'data', 'llm_chat', 'tiny_chat.gguf')

NAMES = ['bos_token', 'eos_token', 'unk_token', 'sep_token', 'pad_token', 'cls_token',
         'mask_token', 'additional_special_tokens']
KEYS = {'bos_token': 'tokenizer.ggml.bos_token_id', 'eos_token': 'tokenizer.ggml.eos_token_id',
        'unk_token': 'tokenizer.ggml.unknown_token_id',
        'pad_token': 'tokenizer.ggml.padding_token_id',
        'sep_token': 'tokenizer.ggml.seperator_token_id',
        'cls_token': 'tokenizer.ggml.cls_token_id', 'mask_token': 'tokenizer.ggml.mask_token_id'}
TEMPLATE = ''.join('%s={{ %s if %s is defined else "<undefined>" }}\n' % (n, n, n)
                   for n in NAMES) + (
    '{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}'
    'add_generation_prompt={{ add_generation_prompt }}')
MESSAGES = [{'role': 'user', 'content': 'Hi'}, {'role': 'assistant', 'content': 'Hello'}]
# special_tokens.gguf: every id but the padding one (left out: undefined in the template)
SPECIALS = ['<|endoftext|>', '<s>', '</s>', '<unk>', '<pad>', '<sep>', '<cls>', '<mask>']
IDS = {'bos_token': 1, 'eos_token': 2, 'unk_token': 3, 'sep_token': 5, 'cls_token': 6,
       'mask_token': 7}


def write_vocab_gguf(path):
    byte_chars = bytes_to_unicode()
    tokens = SPECIALS + [byte_chars[b] for b in range(256)] + ['Ġt']
    w = gguf.GGUFWriter(path, 'llama')
    w.add_tokenizer_model('gpt2')
    w.add_tokenizer_pre('gpt-2')
    w.add_token_list(tokens)
    w.add_token_types([3] * len(SPECIALS) + [1] * (len(tokens) - len(SPECIALS)))
    w.add_token_merges(['Ġ t'])
    for name, token_id in IDS.items():
        w.add_uint32(KEYS[name], token_id)
    w.add_add_bos_token(False)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def renders(path):
    """transformers' renderings of TEMPLATE with the file's special tokens."""
    reader = gguf.GGUFReader(path)
    tokens = reader.fields['tokenizer.ggml.tokens'].contents()
    special = {}
    for name, key in KEYS.items():
        if key in reader.fields:
            token_id = int(reader.fields[key].contents())
            if token_id < len(tokens):
                special[name] = tokens[token_id]
    vocab = {t: i for i, t in enumerate(tokens)}
    tok = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab)), **special)
    assert tok.special_tokens_map == special, (tok.special_tokens_map, special)
    return {str(g).lower(): tok.apply_chat_template(MESSAGES, chat_template=TEMPLATE,
                                                    add_generation_prompt=g, tokenize=False)
            for g in (False, True)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--out', default=os.path.join(ROOT, 'tests', 'golden', 'chat_special_tokens'))
    out = ap.parse_args().out
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, 'special_tokens.gguf')
    write_vocab_gguf(path)
    result = {'template': TEMPLATE, 'messages': MESSAGES,
              'renders': {'special_tokens.gguf': renders(path),
                          'tiny_chat.gguf': renders(TINY_CHAT)},
              'transformers': transformers.__version__}
    with open(os.path.join(out, 'renders.json'), 'w') as f:
        json.dump(result, f, indent=1, sort_keys=True, ensure_ascii=False)
        f.write('\n')


if __name__ == '__main__':
    main()
