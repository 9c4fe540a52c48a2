#!/usr/bin/env python3
"""Writes NomicBERT reference files (tests/golden/nomic/): small random nomic_bert models in the
folder layout of nomic-embed-text v1 / v1.5, with the outputs of NomicBERT's published modelling
code, transcribed below, in float64.

usage: ~/.cache/clattn/golden-venv/bin/python tools/gen_nomic_golden.py [--out DIR]
           [--case NAME ...] [--published DIR]

The venv is the one every generator runs from, made by tools/make-golden-venv.sh (torch,
transformers, tokenizers, safetensors at its pinned versions; tests/golden/README.md). The files
in tests/golden/nomic were made with torch 1.13, transformers 4.40.2 and tokenizers 0.19.1 (but
no_interleaved_key, made with the venv's): torch 2.9 moves a few float32 outputs by one unit in
the last place. No network: the models are built here, the tokenizer from a small vocabulary.
--case writes only the cases named (default all; a case with model_from needs its model's case
too).

THE REFERENCE. NomicBERT is not in transformers: nomic-embed-text's config.json names
NomicBertModel in nomic-ai/nomic-bert-2048's modeling_hf_nomic_bert.py ("auto_map", run with
trust_remote_code), published in the GitHub repository nomic-ai/contrastors as
    src/contrastors/models/huggingface/modeling_hf_nomic_bert.py
    src/contrastors/models/huggingface/configuration_hf_nomic_bert.py
at commit 613ddfd37309e538cceadb05b1e6423e7b09f603 (2025-02-18; the modelling file last changed
in 496a0593453c3fc1b0dce723c176e82819afb7bb). The classes below transcribe its inference path
line by line (same class and attribute names, hence the same state_dict names), leaving out what
these models do not use: dropout (p = 0 in eval), the key/value cache, the vision models'
`rope` argument, torch 2's F.scaled_dot_product_attention branch (torch 1.13 has none; the
published code then takes the explicit softmax branch transcribed here), the prenorm branch of
NomicBertBlock (its output is the last layer's MLP output without the residual, refused by the
loader), NomicBertMLP (the ungated activations), the dynamic-NTK rotary class (only with a
rotary_scaling_factor, refused by the loader) and einops (rearrange/repeat written as
view/cat/repeat_interleave). `--published DIR` imports the published files from DIR (both files;
they need einops) and asserts that the transcription gives the same last_hidden_state to 1e-12
on every case; the files in tests/golden/nomic were checked so. To get them (the venv also needs
`pip install einops`), from a clone of nomic-ai/contrastors:
    for f in modeling_hf_nomic_bert configuration_hf_nomic_bert; do
        git show 613ddfd:src/contrastors/models/huggingface/$f.py >DIR/$f.py; done

What the published forward computes, for ids [B, N] and attention_mask [B, N]:
  x = word_embeddings[ids] + token_type_embeddings[0]    (+ position_embeddings[0..N-1] only
                                                          when rotary_emb_fraction <= 0)
  x = emb_ln(x)                                           LayerNorm, eps layer_norm_epsilon
  every layer (post-norm, prenorm false):
    qkv = Wqkv(x) viewed [B, N, 3, H, d] (q, k, v blocks of H·d rows each)
    q, k rotated (rotary_emb_dim = d · rotary_emb_fraction channels, base rotary_emb_base,
      half-split or interleaved), positions 0 .. N-1 in every row; the angles t · inv_freq in
      float32 (pos_idx_in_fp32), cos and sin rounded to float32, then cast to the model's dtype
    scores = q·kᵀ / sqrt(d) + (1 - mask) · finfo(float64).min; softmax; · v; out_proj
    x = norm1(x + attn);  x = norm2(x + fc2(fc11(x) · act(fc12(x))))   act = silu (swiglu) or
                                                                         gelu, erf (geglu)
  last_hidden_state = x
Note: fc12 is the activated factor (the gate), fc11 the plain one ("up").

Each case folder holds what save_pretrained would write for such a model plus the references:
  config.json        NomicBertConfig(...).to_json_file(): every key of a real checkpoint's
                     config (GPT2Config's n_embd, n_head, n_layer, n_inner, n_positions,
                     layer_norm_epsilon, activation_function, ... and NomicBERT's prenorm,
                     rotary_emb_*, qkv_proj_bias, mlp_fc1_bias, mlp_fc2_bias, ...) with
                     architectures and auto_map as nomic-embed-text-v1.5 has them
  model.safetensors  float32 state_dict of NomicBertModel (no prefix, as nomic-embed-text's
                     files), or of NomicBertForPreTraining ("bert." prefix, cls.* heads)
  input_ids.npy, attention_mask.npy   int64 [B, N], right padding (id 0 = [PAD])
  last_hidden_state.npy  float32 [B, N, n_embd]: the reference in float64 from the float32
                     weights, rounded at the end (padded rows too)
  mean_pooled.npy, mean_pooled_normalized.npy  float32 [B, n_embd]: sentence-transformers'
                     masked mean and its L2 normalisation (eps 1e-12), in float64
  meta.json          sizes, seed, versions, tolerance (1e-5 absolute), published_check (whether
                     --published confirmed the transcription), float32_torch_max_abs_err (the
                     reference run in float32), rope_exact_angles_max_abs_diff (how far the
                     outputs move when the rotary angles are computed in float64 instead)
The weights: normal(0, 0.2) linears (so that attention is far from uniform), N(0, 1)
embeddings, LayerNorm weights 1 + N(0, 0.1²) and biases N(0, 0.1²).

The folder "basic" is also a sentence-transformers folder as nomic-embed-text-v1.5 ships one
(modules.json with Transformer, Pooling (mean) and Normalize, 1_Pooling/config.json,
sentence_bert_config.json (max_seq_length 48 here), config_sentence_transformers.json with nomic's
task prompts, tokenizer.json: a BERT WordPiece tokenizer (BertNormalizer lowercasing,
BertPreTokenizer, [CLS] $A [SEP]) over a small vocabulary made with the `tokenizers` package,
tokenizer_config.json, special_tokens_map.json), with:
  texts.txt          one text per line
  ids.txt            each text's ids as `embed --tokenize` prints them (tokenizers' encode,
                     truncated to max_seq_length)
  embeddings.npy     float32 [texts, n_embd]: the reference's masked mean, L2-normalised, what
                     SentenceTransformer(folder, trust_remote_code=True).encode would give (it
                     cannot run here offline: the code is fetched from the hub)
  embeddings_search_query.npy  the same with --prompt-name search_query ("search_query: " put
                     before each text, pooled over as sentence-transformers does)
The folder "long" holds inputs and outputs only: it runs basic's model (meta.json's model_from).
The folder "no_interleaved_key" has a config.json without the key rotary_emb_interleaved: its
reference runs with NomicBertConfig's default (False: the half-split rotation), which the
loader must take too.
NomciBertGatedMLP rounds n_inner up to a multiple of 256, so every MLP here is 256 wide.
"""
import argparse
import copy
import importlib
import json
import os
import shutil
import sys
import types

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import transformers  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
from transformers import GPT2Config  # noqa: E402

from golden_common import pooled, write_json_files  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(HERE, "..", "tests", "golden", "nomic")
PUBLISHED_COMMIT = "613ddfd37309e538cceadb05b1e6423e7b09f603"


# ---- transcribed from configuration_hf_nomic_bert.py (contrastors 613ddfd) ----

class NomicBertConfig(GPT2Config):
    model_type = "nomic_bert"

    def __init__(
        self,
        prenorm=False,
        parallel_block=False,
        parallel_block_tied_norm=False,
        rotary_emb_fraction=0.0,
        fused_dropout_add_ln=False,
        fused_bias_fc=False,
        use_flash_attn=False,
        use_xentropy=False,
        qkv_proj_bias=True,
        rotary_emb_base=10_000,
        rotary_emb_scale_base=None,
        rotary_emb_interleaved=False,
        mlp_fc1_bias=True,
        mlp_fc2_bias=True,
        use_rms_norm=False,
        causal=False,
        type_vocab_size=2,
        dense_seq_output=True,
        pad_vocab_size_multiple=1,
        tie_word_embeddings=True,
        rotary_scaling_factor=None,
        max_trained_positions=2048,
        **kwargs,
    ):
        self.prenorm = prenorm
        self.parallel_block = parallel_block
        self.parallel_block_tied_norm = parallel_block_tied_norm
        self.rotary_emb_fraction = rotary_emb_fraction
        self.tie_word_embeddings = tie_word_embeddings
        self.fused_dropout_add_ln = fused_dropout_add_ln
        self.fused_bias_fc = fused_bias_fc
        self.use_flash_attn = use_flash_attn
        self.use_xentropy = use_xentropy
        self.qkv_proj_bias = qkv_proj_bias
        self.rotary_emb_base = rotary_emb_base
        self.rotary_emb_scale_base = rotary_emb_scale_base
        self.rotary_emb_interleaved = rotary_emb_interleaved
        self.mlp_fc1_bias = mlp_fc1_bias
        self.mlp_fc2_bias = mlp_fc2_bias
        self.use_rms_norm = use_rms_norm
        self.causal = causal
        self.type_vocab_size = type_vocab_size
        self.dense_seq_output = dense_seq_output
        self.pad_vocab_size_multiple = pad_vocab_size_multiple
        self.rotary_scaling_factor = rotary_scaling_factor
        self.max_trained_positions = max_trained_positions

        super().__init__(**kwargs)


# ---- transcribed from modeling_hf_nomic_bert.py (contrastors 613ddfd), inference path ----

class NomicBertEmbeddings(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size,
                                            padding_idx=config.pad_token_id)
        self.max_position_embeddings = (config.max_position_embeddings
                                        if config.rotary_emb_fraction <= 0 else 0)
        self.type_vocab_size = config.type_vocab_size
        if self.max_position_embeddings > 0 and config.rotary_emb_fraction <= 0:
            self.position_embeddings = nn.Embedding(config.max_position_embeddings,
                                                    config.hidden_size)
        if self.type_vocab_size > 0:
            self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)

    def forward(self, input_ids, position_ids=None, token_type_ids=None):
        batch_size, seqlen = input_ids.shape
        embeddings = self.word_embeddings(input_ids)
        if self.type_vocab_size > 0:
            if token_type_ids is None:
                token_type_ids = torch.zeros(seqlen, dtype=torch.long, device=input_ids.device)
            token_type_embeddings = self.token_type_embeddings(token_type_ids)
            embeddings = embeddings + token_type_embeddings
        if self.max_position_embeddings > 0:
            if position_ids is None:
                position_ids = torch.arange(seqlen, dtype=torch.long, device=input_ids.device)
            position_embeddings = self.position_embeddings(position_ids)
            embeddings = embeddings + position_embeddings
        return embeddings


class NomciBertGatedMLP(nn.Module):  # sic: the published class name
    def __init__(self, in_features, hidden_features=None, out_features=None,
                 activation=F.sigmoid, bias1=True, bias2=True, multiple_of=256):
        super().__init__()
        out_features = out_features if out_features is not None else in_features
        hidden_features = (hidden_features if hidden_features is not None
                           else int(8 * in_features / 3))
        hidden_features = int((hidden_features + multiple_of - 1) // multiple_of * multiple_of)
        self.fc11 = nn.Linear(in_features, hidden_features, bias=bias1)
        self.fc12 = nn.Linear(in_features, hidden_features, bias=bias1)
        self.activation = activation
        self.fc2 = nn.Linear(hidden_features, out_features, bias=bias2)

    def forward(self, x):
        y = self.fc11(x)
        gate = self.fc12(x)
        if self.activation == F.sigmoid:  # Special case for GLU
            y = F.glu(torch.cat([y, gate], dim=-1), dim=-1)
        else:
            y = y * self.activation(gate)
        return self.fc2(y)


def rotate_half(x, interleaved=False):
    if not interleaved:
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat((-x2, x1), dim=-1)
    x1, x2 = x[..., ::2], x[..., 1::2]
    # rearrange(stack((-x2, x1), -1), "... d two -> ... (d two)")
    return torch.stack((-x2, x1), dim=-1).flatten(-2)


def apply_rotary_emb(x, cos, sin, offset=0, interleaved=False):
    """x: (batch_size, seqlen, nheads, headdim); cos, sin: (seqlen, rotary_dim / 2)"""
    ro_dim = cos.shape[-1] * 2
    assert ro_dim <= x.shape[-1]
    cos, sin = cos[offset: offset + x.shape[1]], sin[offset: offset + x.shape[1]]
    # repeat(cos, "... d -> ... 1 (2 d)") or, interleaved, "... d -> ... 1 (d 2)"
    if not interleaved:
        cos, sin = torch.cat([cos, cos], -1), torch.cat([sin, sin], -1)
    else:
        cos, sin = cos.repeat_interleave(2, -1), sin.repeat_interleave(2, -1)
    cos, sin = cos.unsqueeze(-2), sin.unsqueeze(-2)
    return torch.cat(
        [x[..., :ro_dim] * cos + rotate_half(x[..., :ro_dim], interleaved) * sin,
         x[..., ro_dim:]], dim=-1)


class NomicBertRotaryEmbedding(nn.Module):
    # exact_angles is not published: with it the angles are float64 (meta.json's
    # rope_exact_angles_max_abs_diff); the golden outputs use the published float32 ones.
    exact_angles = False

    def __init__(self, dim, base=10000.0, interleaved=False, scale_base=None,
                 pos_idx_in_fp32=True, device=None):
        super().__init__()
        assert scale_base is None  # the published scale buffer is unused by this class
        self.dim = dim
        self.base = float(base)
        self.pos_idx_in_fp32 = pos_idx_in_fp32
        inv_freq = self._compute_inv_freq(device)
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self.interleaved = interleaved
        self._seq_len_cached = 0
        self._cos_cached = None
        self._sin_cached = None

    def _compute_inv_freq(self, device=None):
        dtype = torch.float64 if self.exact_angles else torch.float32
        return 1.0 / (self.base ** (torch.arange(0, self.dim, 2, device=device, dtype=dtype)
                                    / self.dim))

    def _update_cos_sin_cache(self, seqlen, device=None, dtype=None):
        if (seqlen > self._seq_len_cached or self._cos_cached is None
                or self._cos_cached.device != device or self._cos_cached.dtype != dtype):
            self._seq_len_cached = seqlen
            if self.exact_angles:
                t = torch.arange(seqlen, device=device, dtype=torch.float64)
                inv_freq = self._compute_inv_freq(device=device)
            elif self.pos_idx_in_fp32:
                t = torch.arange(seqlen, device=device, dtype=torch.float32)
                if self.inv_freq.dtype != torch.float32:
                    inv_freq = self._compute_inv_freq(device=device)
                else:
                    inv_freq = self.inv_freq
            else:
                t = torch.arange(seqlen, device=device, dtype=self.inv_freq.dtype)
                inv_freq = self.inv_freq
            freqs = torch.outer(t, inv_freq)
            self._cos_cached = torch.cos(freqs).to(dtype)
            self._sin_cached = torch.sin(freqs).to(dtype)

    def forward(self, qkv, seqlen_offset=0):
        """qkv: (batch, seqlen, 3, nheads, headdim)"""
        seqlen = qkv.shape[1]
        if seqlen > self._seq_len_cached:
            self._update_cos_sin_cache(seqlen, device=qkv.device, dtype=qkv.dtype)
        else:
            self._update_cos_sin_cache(seqlen + seqlen_offset, device=qkv.device,
                                       dtype=qkv.dtype)
        q_rot = apply_rotary_emb(qkv[:, :, 0], self._cos_cached, self._sin_cached,
                                 seqlen_offset, self.interleaved)
        k_rot = apply_rotary_emb(qkv[:, :, 1], self._cos_cached, self._sin_cached,
                                 seqlen_offset, self.interleaved)
        return torch.stack((q_rot, k_rot, qkv[:, :, 2]), dim=2)


class NomicBertAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.embed_dim = config.n_embd
        self.num_heads = config.n_head
        self.num_heads_kv = (config.num_heads_kv
                             if getattr(config, "num_heads_kv", None) is not None
                             else self.num_heads)
        assert self.embed_dim % self.num_heads == 0
        self.head_dim = self.embed_dim // self.num_heads
        qkv_dim = self.head_dim * (self.num_heads + 2 * self.num_heads_kv)
        self.register_buffer(
            "norm_factor",
            torch.sqrt(torch.tensor(self.head_dim, dtype=torch.float32)).to(
                torch.get_default_dtype()),
            persistent=False)
        self.rotary_emb_dim = self.head_dim * config.rotary_emb_fraction
        if self.rotary_emb_dim > 0:
            assert not getattr(config, "rotary_scaling_factor", None)  # dynamic NTK: not here
            self.rotary_emb = NomicBertRotaryEmbedding(
                dim=self.rotary_emb_dim, base=config.rotary_emb_base,
                scale_base=config.rotary_emb_scale_base,
                interleaved=config.rotary_emb_interleaved)
            self.rotary_head_dim = getattr(config, "rotary_head_dim", False)
            assert not self.rotary_head_dim
        self.Wqkv = nn.Linear(self.embed_dim, qkv_dim, bias=config.qkv_proj_bias)
        self.out_proj = nn.Linear(self.embed_dim, self.embed_dim, bias=config.qkv_proj_bias)

    def forward(self, hidden_states, attention_mask=None):
        qkv = self.Wqkv(hidden_states)
        # rearrange(qkv, "... (three h d) -> ... three h d", three=3, d=self.head_dim)
        qkv = qkv.view(*qkv.shape[:-1], 3, -1, self.head_dim)
        if self.rotary_emb_dim > 0:
            qkv = self.rotary_emb(qkv, seqlen_offset=0)
        query, key, value = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
        query = query.permute(0, 2, 1, 3)
        key = key.permute(0, 2, 1, 3)
        value = value.permute(0, 2, 1, 3)
        attention_scores = torch.matmul(query, key.transpose(-1, -2)) / self.norm_factor
        if attention_mask is not None:
            attention_scores = attention_scores + attention_mask
        attentions_probs = F.softmax(attention_scores, dim=-1)
        attn_output = torch.matmul(attentions_probs, value)
        # rearrange(attn_output.permute(0, 2, 1, 3), "... h d -> ... (h d)")
        attn_output = attn_output.permute(0, 2, 1, 3).flatten(-2)
        return self.out_proj(attn_output)


class NomicBertBlock(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.prenorm = config.prenorm
        assert not self.prenorm  # the prenorm branch is not transcribed (the loader refuses it)
        self.attn = NomicBertAttention(config)
        activation = (F.sigmoid if config.activation_function == "glu"
                      else (F.silu if config.activation_function == "swiglu" else F.gelu))
        assert config.activation_function in ["glu", "swiglu", "geglu"]  # NomicBertMLP: not here
        self.mlp = NomciBertGatedMLP(config.n_embd, hidden_features=config.n_inner,
                                     bias1=config.mlp_fc1_bias, bias2=config.mlp_fc2_bias,
                                     activation=activation)
        self.norm1 = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)
        self.norm2 = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)

    def forward(self, hidden_states, attention_mask=None):
        attn_outputs = self.attn(hidden_states, attention_mask=attention_mask)
        hidden_states = self.norm1(attn_outputs + hidden_states)
        mlp_out = self.mlp(hidden_states)
        return self.norm2(mlp_out + hidden_states)


class NomicBertEncoder(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.layers = nn.ModuleList([NomicBertBlock(config) for _ in range(config.n_layer)])

    def forward(self, hidden_states, attention_mask=None):
        for layer in self.layers:
            hidden_states = layer(hidden_states, attention_mask)
        return hidden_states


class NomicBertModel(nn.Module):
    def __init__(self, config):
        super().__init__()
        multiple = getattr(config, "pad_vocab_size_multiple", 1)
        if config.vocab_size % multiple != 0:
            config.vocab_size += multiple - (config.vocab_size % multiple)
        self.embeddings = NomicBertEmbeddings(config)
        self.emb_ln = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)
        self.encoder = NomicBertEncoder(config)

    def forward(self, input_ids, attention_mask=None, token_type_ids=None):
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        hidden_states = self.embeddings(input_ids, token_type_ids=token_type_ids)
        hidden_states = self.emb_ln(hidden_states)
        # transformers' PreTrainedModel.get_extended_attention_mask (2-D mask, not a decoder)
        dtype = hidden_states.dtype
        extended = attention_mask[:, None, None, :].to(dtype=dtype)
        extended = (1.0 - extended) * torch.finfo(dtype).min
        return self.encoder(hidden_states, attention_mask=extended)


# ---- the cases ----
# ---- the cases ----

# Everything config.json holds besides the sizes, as nomic-embed-text-v1.5's config.json has it.
REAL_LIKE = dict(
    activation_function="swiglu", attn_pdrop=0.0, bos_token_id=None, causal=False,
    dense_seq_output=True, embd_pdrop=0.0, eos_token_id=None, fused_bias_fc=True,
    fused_dropout_add_ln=True, initializer_range=0.02, layer_norm_epsilon=1e-12,
    max_trained_positions=2048, mlp_fc1_bias=False, mlp_fc2_bias=False,
    pad_vocab_size_multiple=64, parallel_block=False, parallel_block_tied_norm=False,
    prenorm=False, qkv_proj_bias=False, reorder_and_upcast_attn=False, resid_pdrop=0.0,
    rotary_emb_base=1000, rotary_emb_fraction=1.0, rotary_emb_interleaved=False,
    rotary_emb_scale_base=None, rotary_scaling_factor=None,
    scale_attn_by_inverse_layer_idx=False, scale_attn_weights=True, summary_activation=None,
    summary_first_dropout=0.0, summary_proj_to_labels=True, summary_type="cls_index",
    summary_use_proj=True, type_vocab_size=2, use_cache=True, use_flash_attn=True,
    use_rms_norm=False, use_xentropy=True)

AUTO_MAP = {
    "AutoConfig": "nomic-ai/nomic-bert-2048--configuration_hf_nomic_bert.NomicBertConfig",
    "AutoModel": "nomic-ai/nomic-bert-2048--modeling_hf_nomic_bert.NomicBertModel",
    "AutoModelForMaskedLM":
        "nomic-ai/nomic-bert-2048--modeling_hf_nomic_bert.NomicBertForPreTraining",
}

# The sentence-transformers files and the tokenizer's vocabulary (folder "basic").
ST_WORDS = ("the of and to in is was for on that with as by at from it an be this are what "
            "who search query document classification clustering tsne laurens van der maaten "
            "nomic embed text long context rotary cat dog zebra quick brown fox jumps over lazy "
            "hello world").split()
ST_TEXTS = [
    "What is TSNE?",
    "Who is Laurens van der Maaten?",
    "The quick brown fox jumps over the lazy dog!",
    "",
    "hello",
    "Héllo wörld, CAFÉ — unknown words: xylophone 42",
    "nomic embed text is a long context model with rotary embeddings " * 6,
]
ST_PROMPTS = {"search_query": "search_query: ", "search_document": "search_document: ",
              "classification": "classification: ", "clustering": "clustering: "}
ST_MAX_SEQ_LENGTH = 48


def st_vocab():
    vocab = ["[PAD]", "[unused0]", "[CLS]", "[SEP]", "[MASK]", "[UNK]"]
    vocab += list("abcdefghijklmnopqrstuvwxyz0123456789.,:;!?_-'\"()")
    vocab += ["##" + c for c in "abcdefghijklmnopqrstuvwxyz0123456789"]
    vocab += ST_WORDS
    return {t: i for i, t in enumerate(dict.fromkeys(vocab))}


# name: seed, description, config overrides, row lengths (tokens with [CLS] and [SEP]),
# pretraining (NomicBertForPreTraining's file), model_from (another case's model: no weights of
# its own). NomciBertGatedMLP rounds n_inner up to a multiple of 256, so every case's MLP is
# 256 wide (n_inner 200 in partial_interleaved shows the rounding).
CASES = {
    "basic": dict(
        seed=2301,
        description="nomic-embed-text-v1.5's configuration (swiglu, no biases, full rotary "
                    "half-split, base 1000, post-norm, eps 1e-12) at n_embd 32, 4 heads, 2 "
                    "layers; a sentence-transformers folder (tokenizer, pooling, prompts); "
                    "three rows right-padded to 13 tokens.",
        config=dict(n_inner=256, vocab_size=len(st_vocab()), pad_vocab_size_multiple=8),
        lengths=[13, 8, 3]),
    "long": dict(
        seed=2302, model_from="basic",
        description="basic's model on rows of 200 and 131 tokens (angles up to 199 radians).",
        lengths=[200, 131]),
    "partial_interleaved": dict(
        seed=2303,
        description="rotary_emb_fraction 0.5 (4 of 8 channels per head), "
                    "rotary_emb_interleaved, base 10000, geglu (erf gelu on fc12), every bias "
                    "(qkv_proj_bias, mlp_fc1_bias, mlp_fc2_bias), layer_norm_epsilon 1e-5, "
                    "n_embd 16, 2 heads, 1 layer, n_inner 200 (256 after rounding); rows of 37 "
                    "and 20.",
        config=dict(n_embd=16, n_head=2, n_layer=1, n_inner=200, rotary_emb_fraction=0.5,
                    rotary_emb_interleaved=True, activation_function="geglu",
                    qkv_proj_bias=True, mlp_fc1_bias=True, mlp_fc2_bias=True,
                    layer_norm_epsilon=1e-5, rotary_emb_base=10000),
        lengths=[37, 20]),
    "pretraining": dict(
        seed=2304, pretraining=True,
        description="NomicBertForPreTraining's file (\"bert.\" prefix, cls.* heads to ignore), "
                    "vocab_size 50 padded to 56 (pad_vocab_size_multiple 8), "
                    "rotary_emb_fraction 0: learned position embeddings (n_positions 24), "
                    "n_inner null (int(8·16/3) = 42, 256 after rounding), n_embd 16, 2 heads, "
                    "1 layer.",
        config=dict(n_embd=16, n_head=2, n_layer=1, n_inner=None, vocab_size=50,
                    pad_vocab_size_multiple=8, rotary_emb_fraction=0.0, n_positions=24),
        lengths=[10, 6]),
    "no_interleaved_key": dict(
        seed=2305,
        description="config.json without rotary_emb_interleaved: NomicBertConfig's default "
                    "(False, the half-split rotation); full rotary, base 10000, n_embd 16, 2 "
                    "heads, 1 layer; rows of 11 and 6.",
        config=dict(n_embd=16, n_head=2, n_layer=1, rotary_emb_base=10000),
        absent=["rotary_emb_interleaved"],
        lengths=[11, 6]),
}


def make_config(absent=(), **overrides):
    """absent: keys left to NomicBertConfig's defaults (and out of config.json)."""
    c = dict(REAL_LIKE, vocab_size=64, n_embd=32, n_head=4, n_layer=2, n_inner=256,
             n_positions=8192)
    c.update(overrides)
    for key in absent:
        del c[key]
    config = NomicBertConfig(**c)
    config.architectures = ["NomicBertModel"]
    config.auto_map = AUTO_MAP
    return config


def randomize(model):
    with torch.no_grad():
        for mod in model.modules():
            if isinstance(mod, nn.Linear):
                mod.weight.normal_(0.0, 0.2)
                if mod.bias is not None:
                    mod.bias.normal_(0.0, 0.2)
            elif isinstance(mod, nn.Embedding):
                mod.weight.normal_(0.0, 1.0)
            elif isinstance(mod, nn.LayerNorm):
                mod.weight.copy_(1.0 + 0.1 * torch.randn_like(mod.weight))
                mod.bias.copy_(0.1 * torch.randn_like(mod.bias))


def make_inputs(rng, lengths, vocab, cls_id=2, sep_id=3):
    n = max(lengths)
    ids = np.zeros((len(lengths), n), dtype=np.int64)  # [PAD] = 0
    mask = np.zeros((len(lengths), n), dtype=np.int64)
    for b, length in enumerate(lengths):
        ids[b, 0] = cls_id
        ids[b, 1:length - 1] = rng.randint(6, vocab, size=length - 2)
        ids[b, length - 1] = sep_id
        mask[b, :length] = 1
    return ids, mask


def run(model, ids, mask, dtype):
    model = model.to(dtype)
    with torch.no_grad():
        out = model(torch.from_numpy(ids), torch.from_numpy(mask)).numpy().astype(np.float64)
    model.to(torch.float64)
    return out


def exact_angle_run(model, ids, mask):
    def reset():
        for mod in model.modules():
            if isinstance(mod, NomicBertRotaryEmbedding):
                mod._seq_len_cached = 0
    NomicBertRotaryEmbedding.exact_angles = True
    reset()
    try:
        return run(model, ids, mask, torch.float64)
    finally:
        NomicBertRotaryEmbedding.exact_angles = False
        reset()


def load_published(folder):
    """The published modelling files as a package (they import each other relatively)."""
    package = types.ModuleType("nomic_published")
    package.__path__ = [os.path.abspath(folder)]
    sys.modules["nomic_published"] = package
    return importlib.import_module("nomic_published.modeling_hf_nomic_bert")


def published_output(published, config_dict, state, ids, mask):
    cfg = published.NomicBertConfig(**config_dict)
    model = published.NomicBertModel(cfg, add_pooling_layer=False)
    if any(k.startswith("bert.") for k in state):
        state = {k[len("bert."):]: v for k, v in state.items() if k.startswith("bert.")}
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not missing and not unexpected, (missing, unexpected)
    model = model.double().eval()
    with torch.no_grad():
        out = model(input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask))
    return out.last_hidden_state.numpy()


def save_model(folder, config, model, pretraining, absent=()):
    """config: as made (before NomicBertModel pads its vocab_size); absent: keys left out of
    config.json, which must then give the same configuration."""
    config.to_json_file(os.path.join(folder, "config.json"))
    if absent:
        path = os.path.join(folder, "config.json")
        with open(path) as f:
            written = json.load(f)
        for key in absent:
            del written[key]
        assert NomicBertConfig(**written).to_dict() == config.to_dict()
        with open(path, "w") as f:
            json.dump(written, f, indent=2, sort_keys=True)
            f.write("\n")
    state = {k: v.detach().float().contiguous() for k, v in model.state_dict().items()}
    if pretraining:
        state = {"bert." + k: v for k, v in state.items()}
        g = torch.Generator().manual_seed(1)
        e = config.n_embd
        state["cls.predictions.transform.dense.weight"] = torch.randn(e, e, generator=g)
        state["cls.predictions.transform.layer_norm.weight"] = torch.ones(e)
        state["cls.predictions.transform.layer_norm.bias"] = torch.zeros(e)
    save_file(state, os.path.join(folder, "model.safetensors"), metadata={"format": "pt"})
    return state


class Model:
    """A case's model: the reference module, its config (padded as the module pads it), the
    config as config.json holds it, and the state_dict as the file holds it."""

    def __init__(self, folder, seed, overrides, pretraining, absent=()):
        torch.manual_seed(seed)
        self.config = make_config(absent, **overrides)
        self.config_dict = self.config.to_dict()
        as_made = copy.deepcopy(self.config)
        self.module = NomicBertModel(self.config).eval()  # pads config.vocab_size
        randomize(self.module)
        self.module.to(torch.float64)  # from float32 values: the file's weights exactly
        self.state = save_model(folder, as_made, self.module, pretraining, absent)


def write_outputs(folder, name, case, model, ids, mask, published):
    config = model.config
    h64 = run(model.module, ids, mask, torch.float64)
    h32 = run(model.module, ids, mask, torch.float32)
    exact = (exact_angle_run(model.module, ids, mask) if config.rotary_emb_fraction > 0
             else h64)
    checked = False
    if published is not None:
        ref = published_output(published, model.config_dict, model.state, ids, mask)
        diff = float(np.abs(ref - h64).max())
        assert diff <= 1e-12, (name, diff)
        checked = True
    mean, norm = pooled(h64, mask)
    tol = 1e-5
    err32 = float(np.abs(h32 - h64).max())
    np.save(os.path.join(folder, "input_ids.npy"), ids)
    np.save(os.path.join(folder, "attention_mask.npy"), mask)
    np.save(os.path.join(folder, "last_hidden_state.npy"), h64.astype(np.float32))
    np.save(os.path.join(folder, "mean_pooled.npy"), mean.astype(np.float32))
    np.save(os.path.join(folder, "mean_pooled_normalized.npy"), norm.astype(np.float32))
    meta = dict(kind="nomic_bert", description=case["description"],
                reference="tools/gen_nomic_golden.py: NomicBertModel of nomic-ai/contrastors "
                          "src/contrastors/models/huggingface/modeling_hf_nomic_bert.py at "
                          + PUBLISHED_COMMIT + ", transcribed",
                published_check=checked, model_from=case.get("model_from"),
                torch_version=torch.__version__,
                transformers_version=transformers.__version__,
                hidden_size=config.n_embd, heads=config.n_head, num_layers=config.n_layer,
                n_inner=config.n_inner, vocab_size=config.vocab_size,
                activation_function=config.activation_function,
                rotary_emb_fraction=config.rotary_emb_fraction,
                rotary_emb_interleaved=config.rotary_emb_interleaved,
                rotary_emb_base=config.rotary_emb_base,
                layer_norm_epsilon=config.layer_norm_epsilon,
                pretraining_file=case.get("pretraining", False),
                batch=int(ids.shape[0]), seq=int(ids.shape[1]), lengths=case["lengths"],
                seed=case["seed"], tolerance=tol, float32_torch_max_abs_err=err32,
                rope_exact_angles_max_abs_diff=float(np.abs(exact - h64).max()),
                max_abs_last_hidden_state=float(np.abs(h64).max()))
    with open(os.path.join(folder, "meta.json"), "w") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")
    print("%-20s float32 torch off by %.2e, exact angles move it %.2e%s" % (
        name, err32, meta["rope_exact_angles_max_abs_diff"],
        ", matches the published code" if checked else ""))
    return meta


def st_tokenizer(vocab):
    from tokenizers import Tokenizer, normalizers, pre_tokenizers, processors
    from tokenizers.models import WordPiece
    tok = Tokenizer(WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                                strip_accents=None, lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0", pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])])
    tok.add_special_tokens(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    return tok


def write_sentence_transformers(folder, model, meta):
    """Turns folder into a sentence-transformers folder; its texts' embeddings."""
    import tokenizers
    vocab = st_vocab()
    tok = st_tokenizer(vocab)
    tok.save(os.path.join(folder, "tokenizer.json"))
    os.makedirs(os.path.join(folder, "1_Pooling"))
    files = {
        "modules.json": [
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling",
             "type": "sentence_transformers.models.Pooling"},
            {"idx": 2, "name": "2", "path": "2_Normalize",
             "type": "sentence_transformers.models.Normalize"}],
        "1_Pooling/config.json": {
            "word_embedding_dimension": model.config.n_embd, "pooling_mode_cls_token": False,
            "pooling_mode_mean_tokens": True, "pooling_mode_max_tokens": False,
            "pooling_mode_mean_sqrt_len_tokens": False},
        "sentence_bert_config.json": {"max_seq_length": ST_MAX_SEQ_LENGTH,
                                      "do_lower_case": False},
        "config_sentence_transformers.json": {
            "__version__": {"sentence_transformers": "2.7.0",
                            "transformers": transformers.__version__,
                            "pytorch": torch.__version__},
            "prompts": ST_PROMPTS, "default_prompt_name": None},
        "tokenizer_config.json": {
            "clean_up_tokenization_spaces": True, "cls_token": "[CLS]", "do_lower_case": True,
            "mask_token": "[MASK]", "model_max_length": ST_MAX_SEQ_LENGTH, "pad_token": "[PAD]",
            "sep_token": "[SEP]", "strip_accents": None, "tokenize_chinese_chars": True,
            "tokenizer_class": "BertTokenizer", "unk_token": "[UNK]"},
        "special_tokens_map.json": {
            "cls_token": "[CLS]", "mask_token": "[MASK]", "pad_token": "[PAD]",
            "sep_token": "[SEP]", "unk_token": "[UNK]"},
    }
    write_json_files(folder, files)
    with open(os.path.join(folder, "texts.txt"), "w", encoding="utf-8") as f:
        for t in ST_TEXTS:
            f.write(t + "\n")

    def encode(texts):
        # sentence-transformers' Transformer module truncates to max_seq_length keeping [SEP]
        tok.enable_truncation(ST_MAX_SEQ_LENGTH)
        enc = [tok.encode(t).ids for t in texts]
        tok.no_truncation()
        n = max(len(e) for e in enc)
        ids = np.zeros((len(enc), n), dtype=np.int64)
        mask = np.zeros((len(enc), n), dtype=np.int64)
        for b, e in enumerate(enc):
            ids[b, :len(e)] = e
            mask[b, :len(e)] = 1
        return enc, ids, mask

    enc, ids, mask = encode(ST_TEXTS)
    assert max(len(e) for e in enc) == ST_MAX_SEQ_LENGTH  # the last text is truncated
    with open(os.path.join(folder, "ids.txt"), "w") as f:
        for e in enc:
            f.write(json.dumps(e) + "\n")
    _, norm = pooled(run(model.module, ids, mask, torch.float64), mask)
    np.save(os.path.join(folder, "embeddings.npy"), norm.astype(np.float32))
    _, ids_q, mask_q = encode([ST_PROMPTS["search_query"] + t for t in ST_TEXTS])
    _, norm_q = pooled(run(model.module, ids_q, mask_q, torch.float64), mask_q)
    np.save(os.path.join(folder, "embeddings_search_query.npy"), norm_q.astype(np.float32))
    meta.update(tokenizers_version=tokenizers.__version__, texts=len(ST_TEXTS),
                max_seq_length=ST_MAX_SEQ_LENGTH)
    with open(os.path.join(folder, "meta.json"), "w") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=GOLDEN)
    ap.add_argument("--case", action="append", choices=sorted(CASES))
    ap.add_argument("--published", default=None,
                    help="a folder holding the published modeling_hf_nomic_bert.py and "
                         "configuration_hf_nomic_bert.py, to check the transcription against")
    a = ap.parse_args()
    torch.set_num_threads(1)
    published = load_published(a.published) if a.published else None
    models = {}
    for name, case in CASES.items():
        if a.case and name not in a.case:
            continue
        folder = os.path.join(a.out, name)
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(folder)
        if "model_from" in case:
            model = models[case["model_from"]]
        else:
            model = Model(folder, case["seed"], case.get("config", {}),
                          case.get("pretraining", False), case.get("absent", ()))
        models[name] = model
        ids, mask = make_inputs(np.random.RandomState(case["seed"]), case["lengths"],
                                model.config.vocab_size)
        meta = write_outputs(folder, name, case, model, ids, mask, published)
        if name == "basic":
            write_sentence_transformers(folder, model, meta)
    return 0


if __name__ == "__main__":
    sys.exit(main())
