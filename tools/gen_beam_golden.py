#!/usr/bin/env python3
"""Golden files for beam search's length penalty: tests/golden/beam_alpha/.

A tiny random encoder-decoder model (nn.Transformer with embeddings and a generator, the names
and metadata of clattn/transformer.h) and a few sources on which beam search and greedy decoding
disagree and the length penalty's exponent alpha decides the winner: beam search with alpha 1
returns other hypotheses than with alpha 0, and other ones than with the penalty taken one token
off (lp(step - 1) for lp(step)). The model runs in PyTorch (float64); greedy decoding and beam
search are plain Python over its log-probabilities, the rule of clattn_transformer_generate
(include/clattn/transformer.h, tests/golden/TOY.md):

    lp(n) = ((5 + n) / 6)^alpha                 n generated tokens, EOS included
    alive = [([], 0.0)]; best = none
    for step in 1 .. max_new:
        for each alive (toks, s) in order: L = log_softmax(model(src, [BOS] + toks)[-1])
            finished = (s + L[EOS]) / lp(step); replaces best only when strictly greater
        alive = the k best (s + L[v], alive index, v) over v != EOS (ties: lower index, lower v)
        stop after max_new steps, or when best >= max(alive sums) / lp(max_new)
    result: best (tokens with EOS, score)

Greedy: the arg-max each step until EOS or max_new; its score is scored alike: the sum of the
log-probabilities of its tokens / lp(length).

Writes model.safetensors (F32), src.npy (int64 [B, S]), src_mask.npy (bool [B, S]) and
expected.json: per case (beam, alpha), the ids of each sentence (EOS included, unpadded) and its
score. The search for the model and sources is seeded: the files are the same on every run.

usage: ~/.cache/clattn/golden-venv/bin/python tools/gen_beam_golden.py
           [--out DIR]   (default tests/golden/beam_alpha)
(the venv of tools/make-golden-venv.sh, from which every generator runs: tests/golden/README.md)
"""
import argparse
import copy
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_torch import write_safetensors  # noqa: E402

VOCAB = 8
PAD, BOS, EOS = 5, 6, 7  # 0..4 are content tokens
D_MODEL, NHEAD, FF = 8, 2, 16
MAX_NEW, BEAM = 8, 3
ALPHAS = (0.0, 1.0)
BATCH, SRC_LEN = 4, 4


def sinusoidal_table(n, d):
    pos = torch.arange(n, dtype=torch.float64)[:, None]
    div = torch.pow(10000.0, torch.arange(0, d, 2, dtype=torch.float64) / d)
    pe = torch.zeros(n, d, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(pos / div)
    pe[:, 1::2] = torch.cos(pos / div)
    return pe


class Model(nn.Module):
    def __init__(self, seed, eos_bias, sharpness):
        super().__init__()
        torch.manual_seed(seed)
        self.transformer = nn.Transformer(D_MODEL, NHEAD, 1, 1, FF, dropout=0.0,
                                          batch_first=True)
        self.transformer.encoder.enable_nested_tensor = False
        self.src_embedding = nn.Embedding(VOCAB, D_MODEL)
        self.tgt_embedding = nn.Embedding(VOCAB, D_MODEL)
        self.generator = nn.Linear(D_MODEL, VOCAB)
        with torch.no_grad():
            self.generator.weight.mul_(sharpness)
            self.generator.bias[EOS] += eos_bias
        self.eval()

    def embed(self, emb, ids):
        x = emb(ids) * math.sqrt(D_MODEL)
        return x + sinusoidal_table(ids.shape[1], D_MODEL).to(x.dtype)

    @torch.no_grad()
    def log_probs(self, src_row, mask_row, prefix):
        """log_softmax (float64) of the next token after [BOS] + prefix, for one sentence."""
        src = torch.tensor([src_row])
        mask = torch.tensor([mask_row])
        tgt = torch.tensor([[BOS] + prefix])
        t = tgt.shape[1]
        causal = torch.triu(torch.ones(t, t, dtype=torch.bool), 1)
        memory = self.transformer.encoder(self.embed(self.src_embedding, src),
                                          src_key_padding_mask=mask)
        h = self.transformer.decoder(self.embed(self.tgt_embedding, tgt), memory, tgt_mask=causal,
                                     memory_key_padding_mask=mask)
        z = self.generator(h)[0, -1].double()
        return torch.log_softmax(z, -1).tolist()


def lp(n, alpha):
    return ((5.0 + n) / 6.0) ** alpha


def greedy(model, src_row, mask_row, alpha):
    toks, total = [], 0.0
    for _ in range(MAX_NEW):
        logp = model.log_probs(src_row, mask_row, toks)
        v = max(range(VOCAB), key=lambda i: (logp[i], -i))  # the lowest id on ties
        toks.append(v)
        total += logp[v]
        if v == EOS:
            break
    return toks, total / lp(len(toks), alpha)


def beam_search(model, src_row, mask_row, alpha, k=BEAM, penalty_shift=0):
    """penalty_shift=-1 plants the off-by-one (lp(step - 1) for lp(step)) to select sources that
    it changes."""
    alive, best = [([], 0.0)], None
    for step in range(1, MAX_NEW + 1):
        rows = [model.log_probs(src_row, mask_row, toks) for toks, _ in alive]
        for (toks, s), logp in zip(alive, rows):
            score = (s + logp[EOS]) / lp(step + penalty_shift, alpha)
            if best is None or score > best[1]:
                best = (toks + [EOS], score)
        cands = [(s + logp[v], h, v) for h, ((toks, s), logp) in enumerate(zip(alive, rows))
                 for v in range(VOCAB) if v != EOS]
        cands.sort(key=lambda c: (-c[0], c[1], c[2]))
        alive = [(alive[h][0] + [v], sc) for sc, h, v in cands[:k]]
        if step == MAX_NEW or best[1] >= max(s for _, s in alive) / lp(MAX_NEW, alpha):
            break
    return best


def decode_all(model, src, mask):
    """{(beam, alpha): [(ids, score)] per sentence}."""
    out = {}
    for alpha in ALPHAS:
        out[(1, alpha)] = [greedy(model, s, m, alpha) for s, m in zip(src, mask)]
        out[(BEAM, alpha)] = [beam_search(model, s, m, alpha) for s, m in zip(src, mask)]
    return out


def sources(rng):
    src, mask = [], []
    for b in range(BATCH):
        n = SRC_LEN - (b % 2)  # odd rows padded by one
        row = [int(t) for t in rng.randint(0, 5, n - 1)] + [EOS]
        src.append(row + [PAD] * (SRC_LEN - n))
        mask.append([False] * n + [True] * (SRC_LEN - n))
    return src, mask


def wanted(model, src, mask):
    """The results when they show what the test needs, else None."""
    res = decode_all(model, src, mask)
    beam = [ids for ids, _ in res[(BEAM, 1.0)]]
    if beam == [ids for ids, _ in res[(1, 1.0)]]:
        return None  # beam search must disagree with greedy
    if beam == [ids for ids, _ in res[(BEAM, 0.0)]]:
        return None  # alpha must decide the winner
    shifted = [beam_search(model, s, m, 1.0, penalty_shift=-1)[0] for s, m in zip(src, mask)]
    if beam == shifted:
        return None  # the off-by-one penalty must change a result
    if any(len(ids) < 2 for ids in beam):
        return None
    # far from ties: the float32 model decides the same
    res32 = decode_all(copy.deepcopy(model).float(), src, mask)
    for key in res:
        if [i for i, _ in res[key]] != [i for i, _ in res32[key]]:
            return None
        if max(abs(a - b) for (_, a), (_, b) in zip(res[key], res32[key])) > 1e-5:
            return None
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument('--out', default=os.path.join(here, '..', 'tests', 'golden', 'beam_alpha'))
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    rng = np.random.RandomState(1234)
    for attempt in range(400):
        seed = 100 + attempt
        model = Model(seed, eos_bias=1.0, sharpness=3.0).double()
        src, mask = sources(rng)
        res = wanted(model, src, mask)
        if res is not None:
            break
    else:
        sys.exit('no model and sources found that show the length penalty')
    os.makedirs(args.out, exist_ok=True)
    sd = model.float().state_dict()
    tensors = [('src_embedding.weight', sd['src_embedding.weight']),
               ('tgt_embedding.weight', sd['tgt_embedding.weight'])]
    tensors += [(n, t) for n, t in sd.items() if n.startswith('transformer.')]
    tensors = [(n[len('transformer.'):] if n.startswith('transformer.') else n, t)
               for n, t in tensors]
    tensors += [('generator.weight', sd['generator.weight']),
                ('generator.bias', sd['generator.bias'])]
    metadata = dict(d_model=D_MODEL, nhead=NHEAD, num_encoder_layers=1, num_decoder_layers=1,
                    dim_feedforward=FF, activation='relu', norm_first='false',
                    layer_norm_eps='1e-05', positional='sinusoidal', bos_id=BOS, eos_id=EOS,
                    pad_id=PAD)
    write_safetensors(os.path.join(args.out, 'model.safetensors'), tensors, metadata)
    np.save(os.path.join(args.out, 'src.npy'), np.array(src, np.int64))
    np.save(os.path.join(args.out, 'src_mask.npy'), np.array(mask, bool))
    cases = []
    for (beam, alpha), results in sorted(res.items()):
        cases.append({'beam': beam, 'alpha': alpha, 'ids': [ids for ids, _ in results],
                      'scores': [score for _, score in results]})
    expected = {'seed': seed, 'max_new': MAX_NEW, 'score_tolerance': 1e-4,
                'torch': torch.__version__, 'cases': cases}
    with open(os.path.join(args.out, 'expected.json'), 'w') as f:
        json.dump(expected, f, indent=1)
        f.write('\n')
    for c in cases:
        print(c['beam'], c['alpha'], c['ids'], ['%.6f' % s for s in c['scores']])
    print('seed', seed, 'written to', os.path.normpath(args.out))


if __name__ == '__main__':
    main()
