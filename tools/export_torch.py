#!/usr/bin/env python3
"""Exports a PyTorch Transformer encoder to a safetensors file that libclattn loads.

usage: /usr/bin/python3 tools/export_torch.py --demo OUT.safetensors [options]
       /usr/bin/python3 tools/export_torch.py --from-pt MODEL.pt OUT.safetensors [options]
options: --positional none|sinusoidal   (default none)
         --dtype f32|f16|bf16           (default f32)

Also an importable module (needs only torch and numpy):

    export(module, path, embedding=None, positional="none", dtype="f32")
    export_transformer(transformer, path, src_embedding, tgt_embedding, generator=None,
                       bos_id=1, eos_id=2, pad_id=0, dtype="f32")   # encoder-decoder models

`module` is an nn.TransformerEncoder or a single nn.TransformerEncoderLayer (exported as a
1-layer encoder); `embedding` an optional nn.Embedding [vocab, d_model] for token input.

Walk-through
------------
1. Build (or train, or load) the model in PyTorch:

       import sys, numpy as np, torch, torch.nn as nn
       sys.path.insert(0, 'tools')
       from export_torch import export

       layer = nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64,
                                          activation='gelu', batch_first=True)
       model = nn.TransformerEncoder(layer, num_layers=2, norm=nn.LayerNorm(32),
                                     enable_nested_tensor=False).eval()

2. Export it (and an input with PyTorch's output, to compare against):

       export(model, 'model.safetensors')                 # input x [B, N, d_model]
       # or, with token input and the paper's sinusoidal positional encoding:
       # export(model, 'model.safetensors', embedding=emb, positional='sinusoidal')
       x = torch.rand(2, 7, 32)
       np.save('x.npy', x.numpy())
       with torch.no_grad():
           np.save('want.npy', model(x).numpy())

   (From the shell: torch.save(model, 'model.pt'), then
   `/usr/bin/python3 tools/export_torch.py --from-pt model.pt model.safetensors`.)

3. Run it with libclattn (input: np.save of float32 [B, N, d_model]):

       encode --model model.safetensors --input x.npy --output y.npy

   and compare: np.abs(np.load('y.npy') - np.load('want.npy')).max() should be ~1e-5 or less
   (tests/golden/enc_* allow 1e-4).

What libclattn computes from the file (and what tests/golden/enc_* check):

    x = input                 or  x = embedding(tokens) * sqrt(d_model)   (paper, section 3.4)
    if positional == "sinusoidal":
        x = x + PE[:N]        PE[pos, 2i] = sin(pos / 10000^(2i/d_model)),
                              PE[pos, 2i+1] = cos(pos / 10000^(2i/d_model))
    y = nn.TransformerEncoder(...)(x, mask, src_key_padding_mask)   (eval mode)

PyTorch's encoder has no positional encoding of its own, hence the `positional` option: with
"sinusoidal" libclattn adds the table before the first layer, as the paper does.

File format
-----------
safetensors: an 8-byte little-endian u64 N, N bytes of JSON header (padded with spaces to a
multiple of 8), then the data section. The header maps each tensor name to
{"dtype": "F32"|"F16"|"BF16", "shape": [...], "data_offsets": [begin, end]} (byte offsets into
the data section) and holds "__metadata__", a {string: string} map. Tensor data is C-contiguous,
little-endian, with no gaps, in this order: embedding.weight (if any), then the encoder's
state_dict order:

    embedding.weight                      [vocab, d_model]   (only with an embedding)
    layers.{i}.self_attn.in_proj_weight   [3*d_model, d_model]   (q, k, v rows stacked)
    layers.{i}.self_attn.in_proj_bias     [3*d_model]
    layers.{i}.self_attn.out_proj.weight  [d_model, d_model]
    layers.{i}.self_attn.out_proj.bias    [d_model]
    layers.{i}.linear1.weight             [dim_feedforward, d_model]
    layers.{i}.linear1.bias               [dim_feedforward]
    layers.{i}.linear2.weight             [d_model, dim_feedforward]
    layers.{i}.linear2.bias               [d_model]
    layers.{i}.norm1.weight, .norm1.bias, .norm2.weight, .norm2.bias   [d_model] each
    norm.weight, norm.bias                [d_model]   (only with a final LayerNorm)

__metadata__ (all values are strings): d_model, nhead, num_layers, dim_feedforward,
activation ("relu"|"gelu", exact erf GELU), norm_first ("true"|"false"), layer_norm_eps
(repr of the float, e.g. "1e-05"; the final norm must use the same eps), positional
("none"|"sinusoidal").

--dtype f16|bf16 stores every tensor as F16 or BF16 (rounded to nearest even by torch); the
model then computes with those rounded weights.
"""
import argparse
import json
import math
import struct
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = ['export', 'export_transformer', 'encoder_metadata', 'write_safetensors', 'demo_model']

DTYPES = {  # option -> (safetensors dtype, torch dtype)
    'f32': ('F32', torch.float32),
    'f16': ('F16', torch.float16),
    'bf16': ('BF16', torch.bfloat16),
}
POSITIONAL = ('none', 'sinusoidal')
LAYER_TENSORS = (
    'self_attn.in_proj_weight', 'self_attn.in_proj_bias',
    'self_attn.out_proj.weight', 'self_attn.out_proj.bias',
    'linear1.weight', 'linear1.bias', 'linear2.weight', 'linear2.bias',
    'norm1.weight', 'norm1.bias', 'norm2.weight', 'norm2.bias',
)


def _activation_name(layer):
    act = layer.activation
    if isinstance(act, str):
        name = act.lower()
    elif act is F.relu or isinstance(act, nn.ReLU):
        name = 'relu'
    elif act is F.gelu or (isinstance(act, nn.GELU) and act.approximate == 'none'):
        name = 'gelu'
    else:
        # PyTorch 1.12+ also records 1 (relu) / 2 (gelu) / 0 (other) next to the function.
        name = {1: 'relu', 2: 'gelu'}.get(getattr(layer, 'activation_relu_or_gelu', 0))
    if name not in ('relu', 'gelu'):
        raise ValueError(f'unsupported activation {act!r}: only relu and (exact) gelu are '
                         'supported')
    return name


def _layer_config(layer):
    if not isinstance(layer, nn.TransformerEncoderLayer):
        raise TypeError(f'expected nn.TransformerEncoderLayer, got {type(layer).__name__}')
    attn = layer.self_attn
    if not attn._qkv_same_embed_dim or attn.in_proj_weight is None:
        raise ValueError('self_attn must use a packed in_proj_weight (kdim == vdim == d_model)')
    if attn.in_proj_bias is None or attn.out_proj.bias is None:
        raise ValueError('self_attn without biases is not supported')
    if attn.bias_k is not None or attn.bias_v is not None or attn.add_zero_attn:
        raise ValueError('self_attn with add_bias_kv or add_zero_attn is not supported')
    for norm in (layer.norm1, layer.norm2):
        if not norm.elementwise_affine:
            raise ValueError('LayerNorm without elementwise_affine is not supported')
    if layer.norm1.eps != layer.norm2.eps:
        raise ValueError(f'norm1.eps ({layer.norm1.eps}) != norm2.eps ({layer.norm2.eps})')
    return {
        'd_model': attn.embed_dim,
        'nhead': attn.num_heads,
        'dim_feedforward': layer.linear1.out_features,
        'activation': _activation_name(layer),
        'norm_first': bool(layer.norm_first),
        'layer_norm_eps': float(layer.norm1.eps),
    }


def _split_module(module):
    """Returns (list of encoder layers, final LayerNorm or None)."""
    if isinstance(module, nn.TransformerEncoderLayer):
        return [module], None
    if isinstance(module, nn.TransformerEncoder):
        return list(module.layers), module.norm
    raise TypeError('expected nn.TransformerEncoder or nn.TransformerEncoderLayer, got '
                    f'{type(module).__name__}')


def encoder_metadata(module, positional='none'):
    """The __metadata__ dict (all strings) export() writes for `module`."""
    if positional not in POSITIONAL:
        raise ValueError(f'positional must be one of {POSITIONAL}, got {positional!r}')
    layers, norm = _split_module(module)
    if not layers:
        raise ValueError('the encoder has no layers')
    cfg = _layer_config(layers[0])
    for i, layer in enumerate(layers[1:], 1):
        if _layer_config(layer) != cfg:
            raise ValueError(f'layer {i} is configured differently from layer 0: '
                             f'{_layer_config(layer)} vs {cfg}')
    if norm is not None:
        if not isinstance(norm, nn.LayerNorm) or tuple(norm.normalized_shape) != (cfg['d_model'],) \
                or not norm.elementwise_affine:
            raise ValueError(f'the final norm must be nn.LayerNorm({cfg["d_model"]}), got {norm!r}')
        if float(norm.eps) != cfg['layer_norm_eps']:
            raise ValueError(f'the final norm eps ({norm.eps}) differs from the layers\' '
                             f'({cfg["layer_norm_eps"]})')
    return {
        'd_model': str(cfg['d_model']),
        'nhead': str(cfg['nhead']),
        'num_layers': str(len(layers)),
        'dim_feedforward': str(cfg['dim_feedforward']),
        'activation': cfg['activation'],
        'norm_first': 'true' if cfg['norm_first'] else 'false',
        'layer_norm_eps': repr(cfg['layer_norm_eps']),
        'positional': positional,
    }


def _encoder_tensors(module, embedding, d_model):
    """[(name, float32 CPU tensor)] in file order."""
    tensors = []
    if embedding is not None:
        if isinstance(embedding, nn.Embedding):
            if embedding.max_norm is not None:
                raise ValueError('nn.Embedding with max_norm is not supported')
            weight = embedding.weight
        else:
            weight = torch.as_tensor(embedding)
        if weight.dim() != 2 or weight.shape[1] != d_model:
            raise ValueError(f'embedding weight must be [vocab, {d_model}], got '
                             f'{list(weight.shape)}')
        tensors.append(('embedding.weight', weight))
    if isinstance(module, nn.TransformerEncoderLayer):
        state = [('layers.0.' + k, v) for k, v in module.state_dict().items()]
        num_layers, has_norm = 1, False
    else:
        state = list(module.state_dict().items())
        num_layers, has_norm = len(module.layers), module.norm is not None
    expect = [f'layers.{i}.{t}' for i in range(num_layers) for t in LAYER_TENSORS]
    expect += ['norm.weight', 'norm.bias'] if has_norm else []
    if sorted(k for k, _ in state) != sorted(expect):
        raise ValueError(f'unexpected state_dict keys {[k for k, _ in state]}')
    tensors += state
    return [(k, v.detach().to('cpu', torch.float32).contiguous()) for k, v in tensors]


def write_safetensors(path, tensors, metadata, dtype='f32'):
    """Writes [(name, tensor)] (converted to `dtype`, in the given order) and the metadata
    {str: str} as a safetensors file. Returns the list of (name, dtype, shape) written."""
    st_dtype, torch_dtype = DTYPES[dtype.lower()]
    header = {'__metadata__': {str(k): str(v) for k, v in metadata.items()}}
    blobs, written, offset = [], [], 0
    for name, t in tensors:
        t = t.detach().to('cpu').to(torch_dtype).contiguous()
        if torch_dtype is torch.bfloat16:  # numpy has no bfloat16: write the raw 16-bit patterns
            data = t.view(torch.int16).numpy().astype('<i2').tobytes()
        else:
            data = t.numpy().astype('<f4' if torch_dtype is torch.float32 else '<f2').tobytes()
        assert len(data) == t.numel() * t.element_size()
        header[name] = {'dtype': st_dtype, 'shape': list(t.shape),
                        'data_offsets': [offset, offset + len(data)]}
        blobs.append(data)
        written.append((name, st_dtype, list(t.shape)))
        offset += len(data)
    text = json.dumps(header, separators=(',', ':')).encode('utf-8')
    text += b' ' * (-len(text) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(text)))
        f.write(text)
        for data in blobs:
            f.write(data)
    return written


def export(module, path, embedding=None, positional='none', dtype='f32'):
    """Writes `module` (nn.TransformerEncoder or nn.TransformerEncoderLayer), plus an optional
    token `embedding` (nn.Embedding or a [vocab, d_model] tensor), to `path` as safetensors.

    positional: "none" or "sinusoidal" (libclattn then adds the paper's sinusoidal table to the
    input before the first layer). dtype: "f32", "f16" or "bf16" (the storage type of every
    tensor). Returns {"metadata": {...}, "tensors": [(name, dtype, shape), ...]}."""
    if dtype.lower() not in DTYPES:
        raise ValueError(f'dtype must be one of {tuple(DTYPES)}, got {dtype!r}')
    metadata = encoder_metadata(module, positional)
    tensors = _encoder_tensors(module, embedding, int(metadata['d_model']))
    written = write_safetensors(path, tensors, metadata, dtype)
    return {'metadata': metadata, 'tensors': written}


def _decoder_layer_config(layer):
    if not isinstance(layer, nn.TransformerDecoderLayer):
        raise TypeError(f'expected nn.TransformerDecoderLayer, got {type(layer).__name__}')
    for attn in (layer.self_attn, layer.multihead_attn):
        if not attn._qkv_same_embed_dim or attn.in_proj_weight is None:
            raise ValueError('decoder attention must use a packed in_proj_weight')
        if attn.in_proj_bias is None or attn.bias_k is not None or attn.add_zero_attn:
            raise ValueError('decoder attention without biases, with add_bias_kv or '
                             'add_zero_attn is not supported')
    eps = {float(n.eps) for n in (layer.norm1, layer.norm2, layer.norm3)}
    if len(eps) != 1:
        raise ValueError(f'the decoder layer\'s norms have different eps: {sorted(eps)}')
    return {
        'd_model': layer.self_attn.embed_dim,
        'nhead': layer.self_attn.num_heads,
        'dim_feedforward': layer.linear1.out_features,
        'activation': _activation_name(layer),
        'norm_first': bool(layer.norm_first),
        'layer_norm_eps': eps.pop(),
    }


def export_transformer(transformer, path, src_embedding, tgt_embedding, generator=None,
                       bos_id=1, eos_id=2, pad_id=0, dtype='f32'):
    """Writes an encoder-decoder model file (docs/decoders.md; clattn/transformer.h) that
    clattn_transformer_load and examples/generate read: `transformer` an nn.Transformer
    (batch_first or not; encoder.norm and decoder.norm as nn.Transformer makes them),
    `src_embedding` and `tgt_embedding` nn.Embedding [V, d_model] (libclattn multiplies them by
    sqrt(d_model) and adds the paper's sinusoidal table), `generator` an nn.Linear(d_model, V_tgt)
    for the logits, or None to tie them to tgt_embedding (metadata tie_embeddings "true", no
    bias). Every encoder and decoder layer must share one configuration (widths, activation,
    norm placement, eps). Returns {"metadata": {...}, "tensors": [(name, dtype, shape), ...]}."""
    if not isinstance(transformer, nn.Transformer):
        raise TypeError(f'expected nn.Transformer, got {type(transformer).__name__}')
    enc_meta = encoder_metadata(transformer.encoder, 'sinusoidal')
    dec_layers = list(transformer.decoder.layers)
    for i, layer in enumerate(dec_layers):
        cfg = _decoder_layer_config(layer)
        for key in ('d_model', 'nhead', 'dim_feedforward', 'activation'):
            if str(cfg[key]) != enc_meta[key]:
                raise ValueError(f'decoder layer {i}: {key} {cfg[key]} differs from the '
                                 f'encoder\'s {enc_meta[key]}')
        if ('true' if cfg['norm_first'] else 'false') != enc_meta['norm_first'] or \
                repr(cfg['layer_norm_eps']) != enc_meta['layer_norm_eps']:
            raise ValueError(f'decoder layer {i}: norm_first or layer_norm_eps differs from the '
                             'encoder\'s')
    d_model = int(enc_meta['d_model'])
    for name, emb in (('src_embedding', src_embedding), ('tgt_embedding', tgt_embedding)):
        if not isinstance(emb, nn.Embedding) or emb.embedding_dim != d_model:
            raise ValueError(f'{name} must be an nn.Embedding(V, {d_model})')
    vocab = tgt_embedding.num_embeddings
    if generator is not None and (not isinstance(generator, nn.Linear) or
                                  generator.in_features != d_model or
                                  generator.out_features != vocab or generator.bias is None):
        raise ValueError(f'generator must be nn.Linear({d_model}, {vocab}) with a bias, or None')
    metadata = {
        'd_model': enc_meta['d_model'], 'nhead': enc_meta['nhead'],
        'num_encoder_layers': enc_meta['num_layers'],
        'num_decoder_layers': str(len(dec_layers)),
        'dim_feedforward': enc_meta['dim_feedforward'], 'activation': enc_meta['activation'],
        'norm_first': enc_meta['norm_first'], 'layer_norm_eps': enc_meta['layer_norm_eps'],
        'positional': 'sinusoidal', 'bos_id': str(bos_id), 'eos_id': str(eos_id),
        'pad_id': str(pad_id), 'src_vocab': str(src_embedding.num_embeddings),
        'tgt_vocab': str(vocab),
    }
    if generator is None:
        metadata['tie_embeddings'] = 'true'
    tensors = [('src_embedding.weight', src_embedding.weight),
               ('tgt_embedding.weight', tgt_embedding.weight)]
    tensors += list(transformer.state_dict().items())
    if generator is not None:
        tensors += [('generator.weight', generator.weight), ('generator.bias', generator.bias)]
    written = write_safetensors(path, tensors, metadata, dtype)
    return {'metadata': metadata, 'tensors': written}


def demo_model(seed=0):
    """A small seeded encoder: d_model 32, 4 heads, dim_feedforward 64, GELU, post-LN, 2 layers
    and a final LayerNorm, in eval mode."""
    torch.manual_seed(seed)
    layer = nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, dropout=0.1,
                                       activation='gelu', batch_first=True)
    model = nn.TransformerEncoder(layer, num_layers=2, norm=nn.LayerNorm(32),
                                  enable_nested_tensor=False)
    with torch.no_grad():  # the cloned layers start identical; make every parameter distinct
        for name, p in model.named_parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
            elif 'norm' in name and name.endswith('weight'):
                p.uniform_(0.5, 1.5)
            else:
                p.uniform_(-0.2, 0.2)
    return model.eval()


def _find_model(obj):
    """(encoder or layer, embedding or None) from what torch.load returned."""
    if isinstance(obj, (nn.TransformerEncoder, nn.TransformerEncoderLayer)):
        return obj, None
    if not isinstance(obj, nn.Module):
        raise SystemExit(f'export_torch: the .pt file holds a {type(obj).__name__}, not an '
                         'nn.Module (a bare state_dict lacks the configuration; save the module)')
    mods = list(obj.modules())
    encoders = [m for m in mods if isinstance(m, nn.TransformerEncoder)]
    layers = [m for m in mods if isinstance(m, nn.TransformerEncoderLayer)]
    embeddings = [m for m in mods if isinstance(m, nn.Embedding)]
    if len(encoders) == 1:
        found = encoders[0]
    elif not encoders and len(layers) == 1:
        found = layers[0]
    else:
        raise SystemExit(f'export_torch: {type(obj).__name__} holds {len(encoders)} '
                         f'TransformerEncoder(s) and {len(layers)} layer(s); export one by '
                         'calling export() from Python')
    if len(embeddings) > 1:
        raise SystemExit('export_torch: more than one nn.Embedding; call export() from Python')
    return found, (embeddings[0] if embeddings else None)


def main(argv=None):
    parser = argparse.ArgumentParser(
        description='Export a PyTorch nn.TransformerEncoder(Layer) to safetensors for libclattn.')
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument('--demo', action='store_true', help='export a small seeded demo encoder')
    src.add_argument('--from-pt', metavar='FILE.pt',
                     help='export the module pickled in FILE.pt (torch.save(module, ...))')
    parser.add_argument('out', metavar='OUT.safetensors', help='file to write')
    parser.add_argument('--positional', choices=POSITIONAL, default='none',
                        help='positional encoding libclattn adds to the input (default: none)')
    parser.add_argument('--dtype', choices=tuple(DTYPES), default='f32',
                        help='storage type of every tensor (default: f32)')
    args = parser.parse_args(argv)

    embedding = None
    if args.demo:
        module = demo_model()
        what = 'demo encoder (seed 0)'
    else:
        try:
            obj = torch.load(args.from_pt, map_location='cpu')
        except (AttributeError, ImportError) as e:  # pickle needs the module's class importable
            raise SystemExit(f'export_torch: cannot unpickle {args.from_pt}: {e}\n(put the '
                             "module defining the model's class on PYTHONPATH, or call "
                             'export() from Python)')
        module, embedding = _find_model(obj)
        what = f'{type(module).__name__} from {args.from_pt}'
        if embedding is not None:
            what += ' with its nn.Embedding'
    result = export(module, args.out, embedding=embedding, positional=args.positional,
                    dtype=args.dtype)
    print(f'wrote {args.out}: {what}')
    for k, v in result['metadata'].items():
        print(f'  {k:16s} {v}')
    total = 0
    for name, dt, shape in result['tensors']:
        total += math.prod(shape)
        print(f'  {name:40s} {dt:4s} {shape}')
    print(f'  {len(result["tensors"])} tensors, {total} parameters')
    return 0


if __name__ == '__main__':
    sys.exit(main())
