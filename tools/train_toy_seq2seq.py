#!/usr/bin/env python3
"""Trains a small nn.Transformer to reverse digit strings and writes the golden files the C
encoder-decoder tests (greedy and beam-search generation) read: tests/golden/toy_reverse/.

usage: ~/.cache/clattn/golden-venv/bin/python tools/train_toy_seq2seq.py [--out DIR]
           [--threads N] [--max-steps N] [--lr LR] [--time-budget SECONDS]
       ~/.cache/clattn/golden-venv/bin/python tools/train_toy_seq2seq.py
           --from-model tests/golden/toy_reverse/model.safetensors [--out DIR]
(the venv every generator runs from, made by tools/make-golden-venv.sh: tests/golden/README.md;
the committed files were made with torch 1.13, whose float64 beam scores differ from torch
2.9's in the 14th digit)

--from-model skips training and rewrites every golden file from the given weights (the
training record is copied from the meta.json next to FILE): this reproduces the committed files
exactly, whatever the machine's speed.

Deterministic: fixed seeds (torch 0, numpy 1234 for the data), a fixed number of threads
(default 1; float results, and so the trained weights, can depend on the thread count) and a
step-based stopping rule (evaluate every 200 steps; stop at the first evaluation where greedy
decoding reverses all 256 held-out evaluation strings and the 16 golden strings, or at
--max-steps). --time-budget (default 230 s) is only a safety cut-off: if it ends training the
result is no longer reproducible, and meta.json says so ("stopped_by": "time").

Task (vocabulary shared by source and target, 13 tokens):
    0..9 digits, 10 = PAD, 11 = BOS, 12 = EOS
    source  = d_1 .. d_n EOS                       n uniform in 3..8
    target  = d_n .. d_1 EOS                        (the answer)
    decoder input (teacher forcing) = BOS d_n .. d_1 (BOS + target[:-1])
Batches are right-padded with PAD. The held-out strings (evaluation + golden) never occur in
training (training draws that hit one are redrawn).

Model (Seq2Seq below):
    nn.Transformer(d_model=64, nhead=4, num_encoder_layers=2, num_decoder_layers=2,
                   dim_feedforward=128, dropout=0.0, batch_first=True)   # post-LN, ReLU,
                                              # eps 1e-5, with encoder.norm and decoder.norm
    x_src = src_embedding(src) * sqrt(64) + PE[:S]
    x_tgt = tgt_embedding(tgt) * sqrt(64) + PE[:T]
          PE[p, 2i] = sin(p / 10000^(2i/64)),  PE[p, 2i+1] = cos(p / 10000^(2i/64))
    h = transformer(x_src, x_tgt, tgt_mask=causal (True above the diagonal),
                    src_key_padding_mask=src==PAD, memory_key_padding_mask=src==PAD,
                    tgt_key_padding_mask=tgt==PAD (teacher forcing only))
    logits = generator(h)          # Linear(64, 13): h @ generator.weight^T + generator.bias
Training: Adam(peak lr --lr, default 3e-3, betas (0.9, 0.98), eps 1e-9), linear warm-up over
200 steps, then linear decay to 5% of the peak at --max-steps (default 1000), batches of 64,
cross-entropy ignoring PAD targets, gradient clipping at 1.0.

Output (see tests/golden/TOY.md for the full description and the exact beam-search rule):
    model.safetensors  F32, nn.Transformer state_dict names + src_embedding.weight,
                       tgt_embedding.weight, generator.weight, generator.bias; __metadata__
    src.npy, src_mask.npy, tgt_in.npy, tgt_mask.npy, answers.npy,
    logits.npy, logits_no_tgt_mask.npy, greedy.npy, beam.npy, beam_scores.npy, meta.json
"""
import argparse
import json
import math
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_torch import write_safetensors  # noqa: E402

PAD, BOS, EOS = 10, 11, 12
VOCAB = 13
MIN_LEN, MAX_LEN = 3, 8
CONFIG = dict(d_model=64, nhead=4, num_encoder_layers=2, num_decoder_layers=2,
              dim_feedforward=128, dropout=0.0, batch_first=True)
BATCH = 64
LR, WARMUP, FINAL_LR_FRACTION = 3e-3, 200, 0.05
EVAL_EVERY = 200
N_EVAL = 256
N_GOLDEN = 16
BEAM_SIZE, ALPHA = 4, 0.6
EXTRA_NEW = 50  # max generated tokens = S + 50, S = padded source width (EOS included)


def sinusoidal_table(n, d, dtype=torch.float32):
    pos = torch.arange(n, dtype=torch.float64)[:, None]
    i2 = torch.arange(0, d, 2, dtype=torch.float64)  # 2i
    div = torch.pow(10000.0, i2 / d)
    pe = torch.zeros(n, d, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(pos / div)
    pe[:, 1::2] = torch.cos(pos / div)
    return pe.to(dtype)


class Seq2Seq(nn.Module):
    def __init__(self):
        super().__init__()
        self.transformer = nn.Transformer(**CONFIG)
        # No nested-tensor fast path: padded encoder positions keep their values (they are
        # masked out of the cross-attention anyway), the same math in train and eval.
        self.transformer.encoder.enable_nested_tensor = False
        e = CONFIG['d_model']
        self.src_embedding = nn.Embedding(VOCAB, e)
        self.tgt_embedding = nn.Embedding(VOCAB, e)
        self.generator = nn.Linear(e, VOCAB)
        self.scale = math.sqrt(e)

    def embed(self, emb, ids):
        x = emb(ids) * self.scale
        return x + sinusoidal_table(ids.shape[1], x.shape[-1], x.dtype)

    def encode(self, src, src_mask):
        return self.transformer.encoder(self.embed(self.src_embedding, src),
                                        src_key_padding_mask=src_mask)

    def decode(self, memory, src_mask, tgt, tgt_mask=None):
        t = tgt.shape[1]
        causal = torch.triu(torch.ones(t, t, dtype=torch.bool), 1)
        h = self.transformer.decoder(self.embed(self.tgt_embedding, tgt), memory,
                                     tgt_mask=causal, tgt_key_padding_mask=tgt_mask,
                                     memory_key_padding_mask=src_mask)
        return self.generator(h)

    def forward(self, src, src_mask, tgt, tgt_mask=None):
        return self.decode(self.encode(src, src_mask), src_mask, tgt, tgt_mask)


# ---------------------------------------------------------------- data

def random_digits(rng):
    n = int(rng.randint(MIN_LEN, MAX_LEN + 1))
    return tuple(int(d) for d in rng.randint(0, 10, size=n))


def make_batch(seqs):
    """seqs: digit tuples -> src, src_mask, tgt_in, tgt_out (answers), tgt_mask (torch)."""
    b, s = len(seqs), max(len(q) for q in seqs) + 1
    src = np.full((b, s), PAD, np.int64)
    tgt_in = np.full((b, s), PAD, np.int64)
    tgt_out = np.full((b, s), PAD, np.int64)
    for r, q in enumerate(seqs):
        n = len(q)
        src[r, :n], src[r, n] = q, EOS
        rev = q[::-1]
        tgt_out[r, :n], tgt_out[r, n] = rev, EOS
        tgt_in[r, 0], tgt_in[r, 1:n + 1] = BOS, rev
    t = torch.from_numpy
    return t(src), t(src == PAD), t(tgt_in), t(tgt_out), t(tgt_in == PAD)


def heldout_sets():
    rng = np.random.RandomState(99)
    golden, seen = [], set()
    for n in [3, 3, 4, 4, 5, 5, 5, 6, 6, 6, 7, 7, 7, 8, 8, 8]:  # every length, 16 strings
        while True:
            q = tuple(int(d) for d in rng.randint(0, 10, size=n))
            if q not in seen:
                break
        seen.add(q)
        golden.append(q)
    order = rng.permutation(len(golden))  # mixed lengths within the batch
    golden = [golden[i] for i in order]
    evals = []
    while len(evals) < N_EVAL:
        q = random_digits(rng)
        if q not in seen:
            seen.add(q)
            evals.append(q)
    return golden, evals, seen


# ---------------------------------------------------------------- decoding

@torch.no_grad()
def greedy(model, src, src_mask, max_new):
    """Batched greedy decoding. Returns int64 [B, L] without BOS, EOS included, PAD after."""
    memory = model.encode(src, src_mask)
    b = src.shape[0]
    ys = torch.full((b, 1), BOS, dtype=torch.long)
    out = []
    done = torch.zeros(b, dtype=torch.bool)
    for _ in range(max_new):
        logits = model.decode(memory, src_mask, ys)[:, -1]
        nxt = logits.argmax(-1)
        out.append(torch.where(done, torch.full_like(nxt, PAD), nxt))
        done |= nxt == EOS
        ys = torch.cat([ys, nxt[:, None]], 1)
        if bool(done.all()):
            break
    return torch.stack(out, 1)


def greedy_margin(model, src, src_mask, seq):
    """Smallest (top-1 minus top-2) logit gap along the greedy paths (teacher-forced on them)."""
    with torch.no_grad():
        tgt = torch.cat([torch.full((seq.shape[0], 1), BOS, dtype=torch.long), seq[:, :-1]], 1)
        tgt = torch.where(tgt == PAD, torch.full_like(tgt, PAD), tgt)
        logits = model(src, src_mask, tgt)
        top2 = logits.topk(2, -1).values
        gap = top2[..., 0] - top2[..., 1]
        valid = torch.ones_like(seq, dtype=torch.bool)
        for r in range(seq.shape[0]):  # positions up to and including the first EOS
            e = (seq[r] == EOS).nonzero()
            if len(e):
                valid[r, int(e[0]) + 1:] = False
        return float(gap[valid].min())


def lp(n, alpha=ALPHA):
    """GNMT length penalty for n generated tokens (EOS included)."""
    return ((5.0 + n) ** alpha) / (6.0 ** alpha)


@torch.no_grad()
def beam_search(model, src_row, mask_row, max_new, k=BEAM_SIZE, alpha=ALPHA):
    """Reference beam search for one sentence (src_row [1, S], mask_row [1, S]).
    Returns (generated tokens incl. EOS, normalised score). The exact rule is in TOY.md."""
    memory = model.encode(src_row, mask_row)
    alive = [([], 0.0)]          # (generated tokens, sum of log-probs); BOS is implicit
    best = None                  # (tokens, normalised score) of the best finished hypothesis
    for step in range(1, max_new + 1):
        ys = torch.tensor([[BOS] + toks for toks, _ in alive], dtype=torch.long)
        mem = memory.expand(len(alive), -1, -1)
        msk = mask_row.expand(len(alive), -1)
        logp = F.log_softmax(model.decode(mem, msk, ys)[:, -1].double(), -1).tolist()
        # 1. every alive hypothesis' EOS extension is a finished candidate, visited in alive
        #    order; it replaces the best only with a strictly greater normalised score
        for (toks, s), row in zip(alive, logp):
            score = (s + row[EOS]) / lp(step, alpha)
            if best is None or score > best[1]:
                best = (toks + [EOS], score)
        # 2. the k best non-EOS extensions by raw sum of log-probs stay alive
        cands = [(s + row[v], h, v) for h, ((toks, s), row) in enumerate(zip(alive, logp))
                 for v in range(VOCAB) if v != EOS]
        cands.sort(key=lambda c: (-c[0], c[1], c[2]))  # ties: lower alive index, lower id
        alive = [(alive[h][0] + [v], sc) for sc, h, v in cands[:k]]
        # 3. stop when no alive hypothesis can still beat the best finished one: future
        #    log-probs are <= 0 and lp grows, so s / lp(max_new) bounds an alive hypothesis
        if step == max_new or best[1] >= max(s for _, s in alive) / lp(max_new, alpha):
            break
    return best


def pad_rows(rows, fill=PAD):
    width = max(len(r) for r in rows)
    out = np.full((len(rows), width), fill, np.int64)
    for i, r in enumerate(rows):
        out[i, :len(r)] = r
    return out


def exact_match(pred, answers):
    """Per-row: pred (B, L) equals answers up to and including the first EOS."""
    res = []
    for p, a in zip(pred.tolist(), answers.tolist()):
        a = a[:a.index(EOS) + 1]
        res.append(p[:len(a)] == a)
    return np.array(res)


# ---------------------------------------------------------------- file reader (round-trip)

def read_safetensors(path):
    with open(path, 'rb') as f:
        n = struct.unpack('<Q', f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    meta = header.pop('__metadata__')
    tensors = {}
    for name, info in header.items():
        assert info['dtype'] == 'F32'
        b, e = info['data_offsets']
        tensors[name] = torch.from_numpy(
            np.frombuffer(data[b:e], '<f4').reshape(info['shape']).copy())
    return tensors, meta


def load_weights(model, tensors):
    """Loads {name: tensor} as read_safetensors() returns it into a Seq2Seq."""
    tensors = dict(tensors)
    with torch.no_grad():
        model.src_embedding.weight.copy_(tensors.pop('src_embedding.weight'))
        model.tgt_embedding.weight.copy_(tensors.pop('tgt_embedding.weight'))
        model.generator.weight.copy_(tensors.pop('generator.weight'))
        model.generator.bias.copy_(tensors.pop('generator.bias'))
    model.transformer.load_state_dict(tensors, strict=True)


# ---------------------------------------------------------------- main

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument('--out', default=os.path.join(here, 'tests', 'golden', 'toy_reverse'))
    ap.add_argument('--threads', type=int, default=1)
    ap.add_argument('--max-steps', type=int, default=1000)
    ap.add_argument('--lr', type=float, default=LR)
    ap.add_argument('--from-model', metavar='FILE.safetensors',
                    help='no training: take the weights from FILE (e.g. the committed '
                         'model.safetensors) and only rewrite the golden files')
    ap.add_argument('--time-budget', type=float, default=230.0)
    args = ap.parse_args(argv)

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    golden, evals, heldout = heldout_sets()
    rng = np.random.RandomState(1234)

    model = Seq2Seq()
    opt = torch.optim.Adam(model.parameters(), lr=args.lr, betas=(0.9, 0.98), eps=1e-9)
    def lr_factor(s):  # linear warm-up, then linear decay to FINAL_LR_FRACTION at max_steps
        if s < WARMUP:
            return (s + 1) / WARMUP
        frac = (s - WARMUP) / max(1, args.max_steps - WARMUP)
        return 1.0 - (1.0 - FINAL_LR_FRACTION) * min(1.0, frac)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_factor)
    g_src, g_mask, g_tin, g_ans, g_tmask = make_batch(golden)
    e_batch = make_batch(evals)

    def evaluate():
        model.eval()
        accs = []
        for (src, m, _, ans, _) in (e_batch, (g_src, g_mask, g_tin, g_ans, g_tmask)):
            pred = greedy(model, src, m, src.shape[1] + EXTRA_NEW).numpy()
            accs.append(float(exact_match(pred, ans.numpy()).mean()))
        model.train()
        return accs

    if args.from_model is None:
        t0 = time.time()
        step, stopped_by, loss_v, history = 0, 'max_steps', float('nan'), []
        model.train()
        while step < args.max_steps:
            seqs = []
            while len(seqs) < BATCH:
                q = random_digits(rng)
                if q not in heldout:
                    seqs.append(q)
            src, m, tin, tout, tm = make_batch(seqs)
            logits = model(src, m, tin, tm)
            loss = F.cross_entropy(logits.reshape(-1, VOCAB), tout.reshape(-1), ignore_index=PAD)
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            step += 1
            loss_v = float(loss)
            if step % EVAL_EVERY == 0:
                acc_e, acc_g = evaluate()
                el = time.time() - t0
                history.append(dict(step=step, loss=round(loss_v, 5), eval_acc=acc_e,
                                    golden_acc=acc_g, seconds=round(el, 1)))
                print(f'step {step:5d}  loss {loss_v:.4f}  eval acc {acc_e:.4f}  '
                      f'golden acc {acc_g:.4f}  {el:.0f}s', flush=True)
                if acc_e == 1.0 and acc_g == 1.0:
                    stopped_by = 'accuracy'
                    break
            if time.time() - t0 > args.time_budget:
                stopped_by = 'time'
                break
            train_seconds = time.time() - t0
    else:  # no training: the weights of an earlier run, the training record from its meta.json
        weights, _ = read_safetensors(args.from_model)
        load_weights(model, weights)
        old_meta = os.path.join(os.path.dirname(os.path.abspath(args.from_model)), 'meta.json')
        old_training = None
        if os.path.exists(old_meta):
            with open(old_meta) as f:
                old_training = json.load(f).get('training')
    model.eval()
    acc_e, acc_g = evaluate()
    if args.from_model is None:
        print(f'trained {step} steps in {train_seconds:.1f}s ({stopped_by}); greedy exact match: '
              f'eval {acc_e:.4f} ({N_EVAL} strings), golden {acc_g:.4f}')
        training = {
            'steps': step, 'seconds': round(train_seconds, 1), 'stopped_by': stopped_by,
            'threads': args.threads, 'batch': BATCH, 'optimizer': f'Adam(peak lr {args.lr}, betas (0.9, 0.98), '
            f'eps 1e-9), linear warm-up {WARMUP} steps, then linear decay to '
            f'{FINAL_LR_FRACTION} x peak at step {args.max_steps}, grad clip 1.0',
            'max_steps': args.max_steps, 'final_loss': loss_v,
            'eval_strings': N_EVAL, 'eval_greedy_accuracy': acc_e, 'golden_greedy_accuracy': acc_g,
            'history': history, 'seeds': {'torch': 0, 'data': 1234, 'heldout': 99},
        }
    else:
        print(f'weights from {args.from_model}; greedy exact match: eval {acc_e:.4f} '
              f'({N_EVAL} strings), golden {acc_g:.4f}')
        training = old_training or {'eval_strings': N_EVAL, 'eval_greedy_accuracy': acc_e,
                                    'golden_greedy_accuracy': acc_g}

    # ---------------- export
    os.makedirs(args.out, exist_ok=True)
    tensors = [('src_embedding.weight', model.src_embedding.weight),
               ('tgt_embedding.weight', model.tgt_embedding.weight)]
    tensors += list(model.transformer.state_dict().items())
    tensors += [('generator.weight', model.generator.weight),
                ('generator.bias', model.generator.bias)]
    enc_layer = model.transformer.encoder.layers[0]
    metadata = {
        'd_model': CONFIG['d_model'], 'nhead': CONFIG['nhead'],
        'num_encoder_layers': CONFIG['num_encoder_layers'],
        'num_decoder_layers': CONFIG['num_decoder_layers'],
        'dim_feedforward': CONFIG['dim_feedforward'], 'activation': 'relu',
        'norm_first': 'false', 'layer_norm_eps': repr(float(enc_layer.norm1.eps)),
        'positional': 'sinusoidal', 'bos_id': BOS, 'eos_id': EOS, 'pad_id': PAD,
        'src_vocab': VOCAB, 'tgt_vocab': VOCAB,
    }
    model_path = os.path.join(args.out, 'model.safetensors')
    write_safetensors(model_path, tensors, metadata, 'f32')
    model_bytes = os.path.getsize(model_path)

    # round trip: a fresh model from the file must give identical float32 logits
    loaded, meta_read = read_safetensors(model_path)
    fresh = Seq2Seq()
    load_weights(fresh, loaded)
    fresh.eval()
    with torch.no_grad():
        roundtrip = float((fresh(g_src, g_mask, g_tin, g_tmask)
                           - model(g_src, g_mask, g_tin, g_tmask)).abs().max())
    assert roundtrip < 1e-4, roundtrip  # same weights; float32 summation-order noise only
    assert meta_read == {k: str(v) for k, v in metadata.items()}

    # ---------------- golden arrays
    src, src_mask, tgt_in, tgt_mask = g_src, g_mask, g_tin, g_tmask
    answers = g_ans
    s = src.shape[1]
    max_new = s + EXTRA_NEW
    m64 = Seq2Seq()
    m64.load_state_dict(model.state_dict())
    m64 = m64.double().eval()
    with torch.no_grad():
        logits64 = m64(src, src_mask, tgt_in, tgt_mask)
        logits64_nm = m64(src, src_mask, tgt_in, None)
        logits32 = model(src, src_mask, tgt_in, tgt_mask)
    real = ~tgt_mask
    same_on_real = float((logits64 - logits64_nm)[real].abs().max())
    f32_vs_f64 = float((logits32.double() - logits64).abs().max())
    greedy_out = greedy(model, src, src_mask, max_new)
    margin = greedy_margin(model, src, src_mask, greedy_out)
    greedy_ok = exact_match(greedy_out.numpy(), answers.numpy())
    greedy64 = greedy(m64, src, src_mask, max_new)
    greedy64_equal = bool(torch.equal(greedy64, greedy_out))

    beams, scores = [], []
    for r in range(src.shape[0]):
        toks, sc = beam_search(m64, src[r:r + 1], src_mask[r:r + 1], max_new)
        beams.append(toks)
        scores.append(sc)
    beam = pad_rows(beams)
    beam_ok = exact_match(beam, answers.numpy())

    def save(name, arr):
        np.save(os.path.join(args.out, name), np.ascontiguousarray(arr))

    save('src.npy', src.numpy().astype(np.int64))
    save('src_mask.npy', src_mask.numpy().astype(bool))
    save('tgt_in.npy', tgt_in.numpy().astype(np.int64))
    save('tgt_mask.npy', tgt_mask.numpy().astype(bool))
    save('answers.npy', answers.numpy().astype(np.int64))
    save('logits.npy', logits64.numpy().astype(np.float32))
    save('logits_no_tgt_mask.npy', logits64_nm.numpy().astype(np.float32))
    save('greedy.npy', greedy_out.numpy().astype(np.int64))
    save('beam.npy', beam)
    save('beam_scores.npy', np.array(scores, np.float64))

    arrays = {}
    for f in sorted(os.listdir(args.out)):
        if f.endswith('.npy'):
            a = np.load(os.path.join(args.out, f))
            arrays[f] = {'dtype': str(a.dtype), 'shape': list(a.shape)}
    meta = {
        'kind': 'seq2seq_toy',
        'description': 'nn.Transformer trained to reverse digit strings (tools/train_toy_seq2seq.py); '
                       'teacher-forced logits (float64 model), PyTorch greedy decoding (float32 '
                       'model) and a reference beam search (float64 model). See tests/golden/TOY.md.',
        'torch_version': torch.__version__,
        'numpy_version': np.__version__,
        'config': {**{k: v for k, v in CONFIG.items()}, 'activation': 'relu', 'norm_first': False,
                   'layer_norm_eps': float(enc_layer.norm1.eps), 'encoder_norm': True,
                   'decoder_norm': True, 'positional': 'sinusoidal', 'embedding_scale': 'sqrt(d_model)',
                   'generator': 'Linear(64, 13)', 'tie_embeddings': False},
        'vocab': {'size': VOCAB, 'digits': '0..9', 'pad_id': PAD, 'bos_id': BOS, 'eos_id': EOS},
        'task': 'src = digits (length 3..8) + EOS; answer = reversed digits + EOS; '
                'tgt_in = BOS + answer[:-1]; right-padded with PAD',
        'batch': int(src.shape[0]), 'src_len': int(s), 'tgt_len': int(tgt_in.shape[1]),
        'max_new_rule': 'max generated tokens (EOS included) = S + 50, S = src.npy width '
                        '(padded source length, EOS included)',
        'max_new': int(max_new),
        'masks': 'src_mask (True = PAD) is the encoder src_key_padding_mask and the decoder '
                 'memory_key_padding_mask; causal tgt mask; logits.npy also uses tgt_mask.npy as '
                 'tgt_key_padding_mask, logits_no_tgt_mask.npy does not (identical on non-PAD '
                 'tgt positions); greedy and beam use no tgt padding mask',
        'logits_tolerance': 1e-4,
        'logits_f32_vs_f64_max_diff': f32_vs_f64,
        'logits_tgt_mask_effect_on_real_positions': same_on_real,
        'greedy': 'float32 model, eval, batched: start BOS, append argmax each step (lowest id on '
                  'ties), stop when every row emitted EOS or after max_new tokens; no BOS, EOS '
                  'included, PAD after EOS',
        'greedy_min_logit_margin': margin,
        'greedy_correct': int(greedy_ok.sum()),
        'greedy_float64_equal': greedy64_equal,
        'beam_rule': {
            'beam_size': BEAM_SIZE, 'alpha': ALPHA,
            'length_penalty': 'lp(n) = ((5 + n)^alpha) / (6^alpha), n = generated tokens incl. EOS',
            'score': 'sum of log_softmax (float64) of the generated tokens incl. EOS / lp(n)',
            'per_step': 'each alive hypothesis extended by EOS is a finished candidate (replaces '
                        'the best finished only if strictly greater); the beam_size best non-EOS '
                        'extensions by raw sum of log-probs (ties: lower hypothesis index, then '
                        'lower token id) stay alive; every token but EOS may extend (PAD/BOS too)',
            'stop': 'after a step when best_finished_score >= max(alive raw sums) / lp(max_new), '
                    'or after step max_new',
            'result': 'best finished hypothesis (EOS included, no BOS); beam_scores.npy its score',
            'model': 'float64, one sentence at a time (its padded src row and mask)',
        },
        'beam_correct': int(beam_ok.sum()),
        'beam_equals_greedy': bool(np.array_equal(pad_rows([r[:r.index(EOS) + 1] if EOS in r else r
                                                            for r in greedy_out.tolist()]), beam)),
        'training': training,
        'model': 'model.safetensors', 'model_dtype': 'F32', 'model_bytes': model_bytes,
        'file_roundtrip_max_diff': roundtrip,
        'arrays': arrays,
    }
    with open(os.path.join(args.out, 'meta.json'), 'w') as f:
        json.dump(meta, f, indent=2)
        f.write('\n')
    print(f'model {model_bytes} bytes; logits f32 vs f64 {f32_vs_f64:.2e}; tgt-mask effect on '
          f'real positions {same_on_real:.2e}; greedy {int(greedy_ok.sum())}/{len(greedy_ok)} '
          f'(min margin {margin:.2f}); beam {int(beam_ok.sum())}/{len(beam_ok)}')
    print(f'wrote {args.out}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
