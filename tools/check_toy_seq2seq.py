#!/usr/bin/env python3
"""Independent float64 NumPy check of tests/golden/toy_reverse/ (written by
tools/train_toy_seq2seq.py): reads model.safetensors with its own parser, recomputes the
teacher-forced logits, greedy decoding and the beam search of tests/golden/TOY.md, and compares.

usage: python3 tools/check_toy_seq2seq.py [DIR]      (needs only numpy; exit 1 on a mismatch)
"""
import json, struct, sys, numpy as np
PAD, BOS, EOS = 10, 11, 12

def read(path):
    with open(path, 'rb') as f:
        n = struct.unpack('<Q', f.read(8))[0]; h = json.loads(f.read(n)); d = f.read()
    meta = h.pop('__metadata__')
    return {k: np.frombuffer(d[v['data_offsets'][0]:v['data_offsets'][1]], '<f4').reshape(v['shape']).astype(np.float64) for k, v in h.items()}, meta

def ln(x, w, b, eps): m = x.mean(-1, keepdims=True); v = ((x - m) ** 2).mean(-1, keepdims=True); return (x - m) / np.sqrt(v + eps) * w + b

def mha(W, p, q, kv, mask, H):  # mask [B, Tq, Tk] True = masked
    E = q.shape[-1]; w = W[p + 'in_proj_weight']; b = W[p + 'in_proj_bias']
    Q = q @ w[:E].T + b[:E]; K = kv @ w[E:2*E].T + b[E:2*E]; V = kv @ w[2*E:].T + b[2*E:]
    B, Tq, _ = Q.shape; Tk = K.shape[1]; d = E // H
    Q = Q.reshape(B, Tq, H, d).transpose(0, 2, 1, 3); K = K.reshape(B, Tk, H, d).transpose(0, 2, 1, 3); V = V.reshape(B, Tk, H, d).transpose(0, 2, 1, 3)
    s = Q @ K.transpose(0, 1, 3, 2) / np.sqrt(d); s = np.where(mask[:, None], -np.inf, s)
    s = np.exp(s - s.max(-1, keepdims=True)); s /= s.sum(-1, keepdims=True)
    o = (s @ V).transpose(0, 2, 1, 3).reshape(B, Tq, E)
    return o @ W[p + 'out_proj.weight'].T + W[p + 'out_proj.bias']

def ff(W, p, x): return np.maximum(x @ W[p + 'linear1.weight'].T + W[p + 'linear1.bias'], 0) @ W[p + 'linear2.weight'].T + W[p + 'linear2.bias']

def pe(n, E):
    pos = np.arange(n)[:, None]; div = 10000.0 ** (np.arange(0, E, 2) / E); t = np.zeros((n, E)); t[:, 0::2] = np.sin(pos / div); t[:, 1::2] = np.cos(pos / div); return t

def forward(W, meta, src, smask, tgt, tmask):
    E = int(meta['d_model']); H = int(meta['nhead']); eps = float(meta['layer_norm_eps'])
    B, S = src.shape; T = tgt.shape[1]
    x = W['src_embedding.weight'][src] * np.sqrt(E) + pe(S, E)
    m = np.broadcast_to(smask[:, None, :], (B, S, S))
    for i in range(int(meta['num_encoder_layers'])):
        p = f'encoder.layers.{i}.'
        x = ln(x + mha(W, p + 'self_attn.', x, x, m, H), W[p + 'norm1.weight'], W[p + 'norm1.bias'], eps)
        x = ln(x + ff(W, p, x), W[p + 'norm2.weight'], W[p + 'norm2.bias'], eps)
    mem = ln(x, W['encoder.norm.weight'], W['encoder.norm.bias'], eps)
    y = W['tgt_embedding.weight'][tgt] * np.sqrt(E) + pe(T, E)
    causal = np.triu(np.ones((T, T), bool), 1)[None]
    sm = causal | (tmask[:, None, :] if tmask is not None else False)
    cm = np.broadcast_to(smask[:, None, :], (B, T, S))
    for i in range(int(meta['num_decoder_layers'])):
        p = f'decoder.layers.{i}.'
        y = ln(y + mha(W, p + 'self_attn.', y, y, sm, H), W[p + 'norm1.weight'], W[p + 'norm1.bias'], eps)
        y = ln(y + mha(W, p + 'multihead_attn.', y, mem, cm, H), W[p + 'norm2.weight'], W[p + 'norm2.bias'], eps)
        y = ln(y + ff(W, p, y), W[p + 'norm3.weight'], W[p + 'norm3.bias'], eps)
    y = ln(y, W['decoder.norm.weight'], W['decoder.norm.bias'], eps)
    return y @ W['generator.weight'].T + W['generator.bias']


def lp(n, alpha=0.6):
    return (5.0 + n) ** alpha / 6.0 ** alpha


def log_softmax(z):
    z = z - z.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def beam(W, meta, src, smask, max_new, k=4):
    alive, best = [([], 0.0)], None
    for step in range(1, max_new + 1):
        ys = np.array([[BOS] + t for t, _ in alive])
        n = len(alive)
        L = log_softmax(forward(W, meta, np.repeat(src, n, 0), np.repeat(smask, n, 0), ys, None)[:, -1])
        for (t, s), row in zip(alive, L):
            sc = (s + row[EOS]) / lp(step)
            if best is None or sc > best[1]:
                best = (t + [EOS], sc)
        cands = sorted(((s + row[v], h, v) for h, ((t, s), row) in enumerate(zip(alive, L))
                        for v in range(len(row)) if v != EOS), key=lambda c: (-c[0], c[1], c[2]))
        alive = [(alive[h][0] + [v], sc) for sc, h, v in cands[:k]]
        if step == max_new or best[1] >= max(s for _, s in alive) / lp(max_new):
            break
    return best


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else 'tests/golden/toy_reverse'
    W, meta = read(d + '/model.safetensors')
    L = lambda n: np.load(f'{d}/{n}.npy')
    src, smask, tin, tmask = L('src'), L('src_mask'), L('tgt_in'), L('tgt_mask')
    ok = True
    for name, tm in (('logits', tmask), ('logits_no_tgt_mask', None)):
        err = np.abs(forward(W, meta, src, smask, tin, tm) - L(name)).max()
        print(f'{name}: max abs diff {err:.2e}')
        ok &= err < 1e-5
    B, max_new = src.shape[0], src.shape[1] + 50
    ys, done, out = np.full((B, 1), BOS), np.zeros(B, bool), []
    for _ in range(max_new):
        nxt = forward(W, meta, src, smask, ys, None)[:, -1].argmax(-1)
        out.append(np.where(done, PAD, nxt))
        done |= nxt == EOS
        ys = np.concatenate([ys, nxt[:, None]], 1)
        if done.all():
            break
    g = np.stack(out, 1)
    same = g.shape == L('greedy').shape and bool((g == L('greedy')).all())
    print(f'greedy: numpy float64 == greedy.npy: {same}')
    ok &= same
    res = [beam(W, meta, src[r:r + 1], smask[r:r + 1], max_new) for r in range(B)]
    width = max(len(t) for t, _ in res)
    bm = np.full((B, width), PAD, np.int64)
    for r, (t, _) in enumerate(res):
        bm[r, :len(t)] = t
    same = bm.shape == L('beam').shape and bool((bm == L('beam')).all())
    serr = float(np.abs(np.array([s for _, s in res]) - L('beam_scores')).max())
    print(f'beam: numpy float64 == beam.npy: {same}; scores max abs diff {serr:.2e}')
    ok &= same and serr < 1e-5
    print('OK' if ok else 'MISMATCH')
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
