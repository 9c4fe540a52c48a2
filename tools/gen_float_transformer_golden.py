#!/usr/bin/env python3
"""Golden files for a model of float inputs: tests/golden/float_transformer/.

A small random nn.Transformer (no embeddings: its own state_dict names, as docs/decoders.md and
clattn/transformer.h describe, with the metadata generate needs) and PyTorch's teacher-forced
forward on float inputs:

    out = nn.Transformer(src, tgt, tgt_mask = causal, src_key_padding_mask = src_mask,
                         memory_key_padding_mask = src_mask)           (float64 model)

model.safetensors    F32, d_model 8, nhead 2, 2 encoder layers, 1 decoder layer, feed-forward
                     16, GELU, pre-LN (norm_first), eps 1e-5, encoder.norm and decoder.norm
src.npy              float32 [2, 3, 8]
src_mask.npy         bool [2, 3] (True = padding; the second source has one padded position)
tgt.npy              float32 [2, 4, 8]
out.npy              float32 [2, 4, 8]: the decoder output after decoder.norm
generator.safetensors the same model plus generator.weight [5, 8] and generator.bias [5]
logits.npy           float32 [2, 4, 5]: out.npy through the generator

usage: ~/.cache/clattn/golden-venv/bin/python tools/gen_float_transformer_golden.py [--out DIR]
(the venv of tools/make-golden-venv.sh, from which every generator runs: tests/golden/README.md)
"""
import argparse
import os
import sys

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_torch import write_safetensors  # noqa: E402

D_MODEL, NHEAD, ENC_LAYERS, DEC_LAYERS, FF, VOCAB = 8, 2, 2, 1, 16, 5


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument('--out',
                    default=os.path.join(here, '..', 'tests', 'golden', 'float_transformer'))
    args = ap.parse_args(argv)
    torch.manual_seed(7)
    model = nn.Transformer(D_MODEL, NHEAD, ENC_LAYERS, DEC_LAYERS, FF, dropout=0.0,
                           activation='gelu', batch_first=True, norm_first=True)
    model.encoder.enable_nested_tensor = False
    generator = nn.Linear(D_MODEL, VOCAB)
    with torch.no_grad():  # LayerNorm weights away from 1 and biases away from 0
        for name, p in model.named_parameters():
            if 'norm' in name:
                p.add_(0.2 * torch.randn_like(p))
    model.eval()
    src = torch.randn(2, 3, D_MODEL)
    tgt = torch.randn(2, 4, D_MODEL)
    src_mask = torch.tensor([[False, False, False], [False, False, True]])
    causal = torch.triu(torch.ones(4, 4, dtype=torch.bool), 1)
    with torch.no_grad():
        m64, g64 = model.double(), generator.double()
        out = m64(src.double(), tgt.double(), tgt_mask=causal, src_key_padding_mask=src_mask,
                  memory_key_padding_mask=src_mask)
        logits = g64(out)
    os.makedirs(args.out, exist_ok=True)
    sd = model.float().state_dict()
    metadata = dict(d_model=D_MODEL, nhead=NHEAD, num_encoder_layers=ENC_LAYERS,
                    num_decoder_layers=DEC_LAYERS, dim_feedforward=FF, activation='gelu',
                    norm_first='true', layer_norm_eps='1e-05', positional='none')
    write_safetensors(os.path.join(args.out, 'model.safetensors'), list(sd.items()), metadata)
    gen = generator.float()
    write_safetensors(os.path.join(args.out, 'generator.safetensors'),
                      list(sd.items()) + [('generator.weight', gen.weight),
                                          ('generator.bias', gen.bias)], metadata)
    np.save(os.path.join(args.out, 'src.npy'), src.numpy().astype(np.float32))
    np.save(os.path.join(args.out, 'src_mask.npy'), src_mask.numpy())
    np.save(os.path.join(args.out, 'tgt.npy'), tgt.numpy().astype(np.float32))
    np.save(os.path.join(args.out, 'out.npy'), out.numpy().astype(np.float32))
    np.save(os.path.join(args.out, 'logits.npy'), logits.numpy().astype(np.float32))
    print('written to', os.path.normpath(args.out))


if __name__ == '__main__':
    main()
