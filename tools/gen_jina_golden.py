#!/usr/bin/env python3
"""Writes small random JinaBERT (jina-embeddings-v2) model folders and their reference outputs.

usage: ~/.cache/clattn/golden-venv/bin/python tools/gen_jina_golden.py [--out DIR]
           [--case NAME ...]

(the venv every generator runs from, made by tools/make-golden-venv.sh: torch, safetensors,
tokenizers at its pinned versions, tests/golden/README.md; the committed files were made with
torch 1.13 and tokenizers 0.19.1, which give the same files but for the versions and the float32
errors meta.json records. No network, nothing downloaded.) --out (default tests/golden/jina)
receives the cases named by --case (default all), slopes.json, and embed/ when basic is among
them.

JinaBERT's modelling code is not in transformers: jina-embeddings-v2-{small,base}-en load it with
trust_remote_code from the Hugging Face repository jinaai/jina-bert-implementation (files
configuration_bert.py and modeling_bert.py; revision f3ec4cf7de7e561007f27c9efc7148b0bd713f81 is
the one transformers_modules caches for jina-embeddings-v2-base-en in scripts on GitHub). The
classes below transcribe the part of modeling_bert.py that an inference forward pass of
JinaBertModel runs, under the same class and parameter names (so that the state_dict keys are
the checkpoint's), with the same arithmetic. The Hugging Face repository itself could not be
read from where this was written (no copy of it is on GitHub); the transcription follows the
public code that derives from it or that it derives from, which agree on every point below:
  - mosaicml/examples examples/benchmarks/bert/src/bert_layers.py (commit cb78d90a):
    MosaicBERT's BertGatedLinearUnitMLP, the origin of gated_layers / wo / layernorm, GELU with
    approximate='none' on the first half, and its _get_alibi_head_slopes and symmetric
    -slope·|i - j| bias;
  - huggingface/candle candle-transformers/src/models/jina_bert.rs (commit beb13ff8), written
    for jina-embeddings-v2-base-en: the same tensor names at the top level of its
    model.safetensors (no "bert." prefix), exact gelu on the first half, the same slopes;
  - vllm-project/vllm vllm/model_executor/models/jina_bert.py (commit ecdda796), "Adapted from
    jinaai/jina-bert-implementation": GeluAndMul (gelu(first half) · second half), "bert."
    prefix optional;
  - huggingface/text-embeddings-inference backends/candle/src/models/jina.rs: the same names,
    "bert." prefix optional (it takes the activation from hidden_act, candle's tanh gelu: a
    divergence from Jina's nn.GELU(), not followed here).
What it says, with the source's names:

  JinaBertEmbeddings (position_embedding_type "alibi": no position_embeddings module):
      LayerNorm(word_embeddings(input_ids) + token_type_embeddings(token_type_ids or 0))
  JinaBertEncoder.rebuild_alibi_tensor(size):
      relative_position = |memory_position - context_position|      [H, N, N]
      slopes = torch.Tensor(_get_alibi_head_slopes(H)) * -1         (float32)
      alibi = slopes[:, None, None] * relative_position               [1, H, N, N]
    with _get_alibi_head_slopes the ALiBi paper's: for a power of two n,
    2^(-8/n)^(i+1); otherwise those of the closest power of two p below, then
    _get_alibi_head_slopes(2p)[0::2][:n - p].
  JinaBertModel: extended_attention_mask = (1 - attention_mask) * finfo(dtype).min
    (get_extended_attention_mask), passed to every layer with bias = alibi[:, :, :N, :N].
  JinaBertSelfAttention (eager path; attn_implementation "torch" computes the same through
    scaled_dot_product_attention(q, k, v, attention_mask + bias)):
      scores = q·kᵀ / sqrt(head_size) + attention_mask; probs = softmax(scores + bias)
  JinaBertSelfOutput: LayerNorm(dense(context) + hidden_states)        (post-LN)
  JinaBertGLUMLP (feed_forward_type "geglu": act = nn.GELU(), the exact erf form; "reglu":
    nn.ReLU(); anything else raises):
      h = gated_layers(x)                       (Linear(hidden, 2·intermediate, bias=False))
      gated, non_gated = h[..., :intermediate], h[..., intermediate:]
      out = layernorm(wo(dropout(act(gated) * non_gated)) + x)
  JinaBertLayer: mlp(attention(x)) when feed_forward_type ends in "glu".

So in the encoder's terms (include/clattn/encoder.h): linear1_gate = rows [0, I) of
gated_layers.weight (activated), linear1 = rows [I, 2I) (the "up" factor), no bias on either,
linear2 = mlp.wo, norm2 = mlp.layernorm, ALiBi with clattn_alibi_slopes(H).

Written (each case folder removed first):
  tests/golden/jina/<case>/config.json   the keys of jina-embeddings-v2-small-en's config.json
                      (model_type "bert", position_embedding_type "alibi", feed_forward_type,
                      emb_pooler "mean", auto_map to jinaai/jina-bert-implementation, ...), with
                      small sizes; max_position_embeddings stays 8192 (no table is built from it)
  model.safetensors   float32, the state_dict of JinaBertModel (embeddings.*, encoder.layer.N.*,
                      pooler.dense.*) or, for "heads6", of JinaBertForMaskedLM: the same under
                      "bert." plus cls.predictions.* (to be ignored)
  input_ids.npy       int64 [B, N]: [CLS] (2) ids [SEP] (3), right-padded with [PAD] (0)
  attention_mask.npy  int64 [B, N]
  last_hidden_state.npy  float32 [B, N, hidden]: the transcription in float64 from the stored
                      float32 weights (token types 0), every position kept
  mean_pooled.npy, mean_pooled_normalized.npy   float32 [B, hidden]: sentence-transformers'
                      masked mean (and it L2-normalised), in float64
  meta.json           sizes, tolerance 1e-5 (absolute; the script asserts that the same model in
                      float32 is 4x closer), float32_torch_max_abs_err
  tests/golden/jina/slopes.json  _get_alibi_head_slopes(n) as torch.Tensor rounds them (float32)
                      for n = 1 .. 16
  tests/golden/jina/embed/  a sentence-transformers folder's other files for the "basic" model:
                      tokenizer.json (BERT WordPiece over a 100-entry vocabulary, made with the
                      tokenizers package), modules.json (Transformer, Pooling, Normalize),
                      1_Pooling/config.json (mean), texts.txt, ids.txt (what the tokenizer gives
                      each text, as `embed --tokenize` prints it) and embeddings.npy (float32
                      [texts, hidden]: the reference's mean pooling, L2-normalised, each text
                      alone); long_text_embedding.npy (float32 [1, hidden]): the same for
                      LONG_TEXT ("the cat sat on the mat " 700 times, 5602 tokens) truncated to
                      LONG_MAX_LENGTH (4096) tokens ([CLS], the first 4094, [SEP]), as
                      `embed --max-length 4096` does: ALiBi over distances up to 4095
"""
import argparse
import json
import math
import os
import shutil
import sys
from typing import List

import numpy as np
import torch
from torch import nn

from golden_common import pooled

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "tests", "golden", "jina")


# ---- configuration_bert.py: JinaBertConfig (the keys; defaults as there) ----

class JinaBertConfig:
    def __init__(self, vocab_size=30522, hidden_size=768, num_hidden_layers=12,
                 num_attention_heads=12, intermediate_size=3072, hidden_act="gelu",
                 hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
                 max_position_embeddings=512, type_vocab_size=2, initializer_range=0.02,
                 layer_norm_eps=1e-12, pad_token_id=0, position_embedding_type="absolute",
                 use_cache=True, classifier_dropout=None, feed_forward_type="original",
                 emb_pooler=None, attn_implementation="torch", **kwargs):
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.hidden_act = hidden_act
        self.intermediate_size = intermediate_size
        self.hidden_dropout_prob = hidden_dropout_prob
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.initializer_range = initializer_range
        self.layer_norm_eps = layer_norm_eps
        self.pad_token_id = pad_token_id
        self.position_embedding_type = position_embedding_type
        self.use_cache = use_cache
        self.classifier_dropout = classifier_dropout
        self.feed_forward_type = feed_forward_type
        self.emb_pooler = emb_pooler
        self.attn_implementation = attn_implementation


# ---- modeling_bert.py: the inference forward path of JinaBertModel ----

class JinaBertEmbeddings(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size,
                                            padding_idx=config.pad_token_id)
        self.position_embedding_type = config.position_embedding_type
        assert self.position_embedding_type == "alibi"  # no position_embeddings module then
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, input_ids, token_type_ids=None):
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        embeddings = self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids)
        embeddings = self.LayerNorm(embeddings)
        return self.dropout(embeddings)


class JinaBertSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.num_attention_heads = config.num_attention_heads
        self.attention_head_size = int(config.hidden_size / config.num_attention_heads)
        self.all_head_size = self.num_attention_heads * self.attention_head_size
        self.query = nn.Linear(config.hidden_size, self.all_head_size)
        self.key = nn.Linear(config.hidden_size, self.all_head_size)
        self.value = nn.Linear(config.hidden_size, self.all_head_size)
        self.dropout = nn.Dropout(config.attention_probs_dropout_prob)

    def transpose_for_scores(self, x):
        new_x_shape = x.size()[:-1] + (self.num_attention_heads, self.attention_head_size)
        return x.view(new_x_shape).permute(0, 2, 1, 3)

    def forward(self, hidden_states, attention_mask, bias):
        query_layer = self.transpose_for_scores(self.query(hidden_states))
        key_layer = self.transpose_for_scores(self.key(hidden_states))
        value_layer = self.transpose_for_scores(self.value(hidden_states))
        attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2))
        attention_scores = attention_scores / math.sqrt(self.attention_head_size)
        attention_scores = attention_scores + attention_mask
        attention_probs = nn.functional.softmax(attention_scores + bias, dim=-1)
        attention_probs = self.dropout(attention_probs)
        context_layer = torch.matmul(attention_probs, value_layer)
        context_layer = context_layer.permute(0, 2, 1, 3).contiguous()
        return context_layer.view(context_layer.size()[:-2] + (self.all_head_size,))


class JinaBertSelfOutput(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, hidden_states, input_tensor):
        hidden_states = self.dropout(self.dense(hidden_states))
        return self.LayerNorm(hidden_states + input_tensor)


class JinaBertAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.self = JinaBertSelfAttention(config)
        self.output = JinaBertSelfOutput(config)

    def forward(self, hidden_states, attention_mask, bias):
        return self.output(self.self(hidden_states, attention_mask, bias), hidden_states)


class JinaBertGLUMLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.gated_layers = nn.Linear(config.hidden_size, config.intermediate_size * 2,
                                      bias=False)
        if config.feed_forward_type == "reglu":
            self.act = nn.ReLU()
        elif config.feed_forward_type == "geglu":
            self.act = nn.GELU()
        else:
            raise ValueError(f"feed_forward_type {config.feed_forward_type} not supported")
        self.wo = nn.Linear(config.intermediate_size, config.hidden_size)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.layernorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def forward(self, hidden_states):
        residual_connection = hidden_states
        hidden_states = self.gated_layers(hidden_states)
        gated = hidden_states[:, :, :self.config.intermediate_size]
        non_gated = hidden_states[:, :, self.config.intermediate_size:]
        hidden_states = self.act(gated) * non_gated
        hidden_states = self.dropout(hidden_states)
        hidden_states = self.wo(hidden_states)
        return self.layernorm(hidden_states + residual_connection)


class JinaBertLayer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.attention = JinaBertAttention(config)
        assert config.feed_forward_type.endswith("glu")
        self.mlp = JinaBertGLUMLP(config)

    def forward(self, hidden_states, attention_mask, bias):
        return self.mlp(self.attention(hidden_states, attention_mask, bias))


def _get_alibi_head_slopes(n_heads: int) -> List[float]:
    def get_slopes_power_of_2(n_heads: int) -> List[float]:
        start = 2 ** (-(2 ** -(math.log2(n_heads) - 3)))
        ratio = start
        return [start * ratio ** i for i in range(n_heads)]

    if math.log2(n_heads).is_integer():
        return get_slopes_power_of_2(n_heads)
    closest_power_of_2 = 2 ** math.floor(math.log2(n_heads))
    slopes_a = get_slopes_power_of_2(closest_power_of_2)
    slopes_b = _get_alibi_head_slopes(2 * closest_power_of_2)
    slopes_b = slopes_b[0::2][:n_heads - closest_power_of_2]
    return slopes_a + slopes_b


class JinaBertEncoder(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.layer = nn.ModuleList([JinaBertLayer(config)
                                    for _ in range(config.num_hidden_layers)])
        self.num_attention_heads = config.num_attention_heads

    def rebuild_alibi_tensor(self, size):
        n_heads = self.num_attention_heads
        context_position = torch.arange(size)[:, None]
        memory_position = torch.arange(size)[None, :]
        relative_position = torch.abs(memory_position - context_position)
        relative_position = relative_position.unsqueeze(0).expand(n_heads, -1, -1)
        slopes = torch.Tensor(_get_alibi_head_slopes(n_heads)) * -1
        alibi = slopes.unsqueeze(1).unsqueeze(1) * relative_position
        return alibi.unsqueeze(0)

    def forward(self, hidden_states, attention_mask):
        seqlen = hidden_states.size(1)
        alibi_bias = self.rebuild_alibi_tensor(seqlen).to(hidden_states.dtype)
        for layer_module in self.layer:
            hidden_states = layer_module(hidden_states, attention_mask, alibi_bias)
        return hidden_states


class JinaBertPooler(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.activation = nn.Tanh()


class JinaBertModel(nn.Module):
    def __init__(self, config, add_pooling_layer=True):
        super().__init__()
        self.config = config
        self.embeddings = JinaBertEmbeddings(config)
        self.encoder = JinaBertEncoder(config)
        self.pooler = JinaBertPooler(config) if add_pooling_layer else None

    def forward(self, input_ids, attention_mask):
        embedding_output = self.embeddings(input_ids)
        dtype = embedding_output.dtype
        extended = attention_mask[:, None, None, :].to(dtype)
        extended = (1.0 - extended) * torch.finfo(dtype).min
        return self.encoder(embedding_output, extended)


class JinaBertLMPredictionHeadTransform(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)


class JinaBertLMPredictionHead(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.transform = JinaBertLMPredictionHeadTransform(config)
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size)


class JinaBertOnlyMLMHead(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.predictions = JinaBertLMPredictionHead(config)


class JinaBertForMaskedLM(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.bert = JinaBertModel(config, add_pooling_layer=False)
        self.cls = JinaBertOnlyMLMHead(config)


# ---- the cases ----

VOCAB = (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + list("abcdefghijklmnopqrstuvwxyz") +
         list("0123456789") + list(".,!?;:'-") + ["##" + c for c in "abcdefghijklmnopqrstuvwxyz"] +
         ["the", "of", "and", "to", "in", "is", "was", "for", "on", "that", "with", "as", "by",
          "at", "from", "it", "an", "be", "this", "are", "cat", "dog", "mat", "##ing", "##ed"])
assert len(VOCAB) == len(set(VOCAB)) == 100

# name: (seed, description, config overrides, masked LM, row lengths with [CLS] and [SEP]); the
# weights are drawn under torch.manual_seed(MODEL_SEEDS.get(name, seed)), the inputs from
# numpy.random.RandomState(seed)
CASES = {
    "basic": (2301, "JinaBertModel, geglu, hidden 32, 4 heads, 2 layers; three rows right-padded "
                    "to 12 tokens.",
              dict(), False, [12, 7, 3]),
    "long": (2302, "basic's model (the same files), rows of 200 and 131 tokens: ALiBi over long "
                   "distances.",
             dict(), False, [200, 131]),
    "heads6": (2303, "JinaBertForMaskedLM (tensors under \"bert.\", cls.predictions.* to ignore), "
                     "geglu, 6 heads (non-power-of-two ALiBi slopes), hidden 36, layer_norm_eps "
                     "1e-5.",
               dict(hidden_size=36, num_attention_heads=6, intermediate_size=40,
                    layer_norm_eps=1e-5), True, [21, 9]),
    "reglu": (2304, "JinaBertModel, feed_forward_type reglu, 1 layer, hidden 16, 2 heads.",
              dict(hidden_size=16, num_attention_heads=2, intermediate_size=24,
                   num_hidden_layers=1), False, [9, 5]),
}

MODEL_SEEDS = {"long": 2301}  # basic's weights: git stores the identical files once

EMBED_TEXTS = [
    "the cat is on the mat.",
    "a dog was running in the park!",
    "",
    "hello world",
    "dogs and cats are walking; it is 42 degrees",
    "Café naïve ZEBRA quick brown fox",
    " ".join(["the cat sat on the mat"] * 12),
]


def small_config(**overrides):
    c = dict(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
             intermediate_size=48, hidden_act="gelu", hidden_dropout_prob=0.1,
             attention_probs_dropout_prob=0.0, max_position_embeddings=8192, type_vocab_size=2,
             initializer_range=0.2, layer_norm_eps=1e-12, pad_token_id=0,
             position_embedding_type="alibi", feed_forward_type="geglu", emb_pooler="mean",
             attn_implementation="torch")
    c.update(overrides)
    return c


def config_json(c, masked_lm):
    impl = "jinaai/jina-bert-implementation--"
    out = {
        "_name_or_path": "jinaai/jina-bert-implementation",
        "architectures": ["JinaBertForMaskedLM"] if masked_lm else ["JinaBertModel"],
        "auto_map": {
            "AutoConfig": impl + "configuration_bert.JinaBertConfig",
            "AutoModel": impl + "modeling_bert.JinaBertModel",
            "AutoModelForMaskedLM": impl + "modeling_bert.JinaBertForMaskedLM",
            "AutoModelForSequenceClassification":
                impl + "modeling_bert.JinaBertForSequenceClassification",
        },
        "classifier_dropout": None,
        "gradient_checkpointing": False,
        "model_max_length": c["max_position_embeddings"],
        "model_type": "bert",
        "torch_dtype": "float32",
        "transformers_version": "4.26.0",
        "use_cache": True,
    }
    out.update(c)
    return dict(sorted(out.items()))


def init_weights(model, config):
    """BertPreTrainedModel._init_weights with initializer_range 0.2 (so that attention is not
    nearly uniform), then LayerNorm weights 1 + N(0, 0.1²) and biases N(0, 0.1²) and linear
    biases N(0, 0.1²), so that every parameter matters."""
    with torch.no_grad():
        for mod in model.modules():
            if isinstance(mod, nn.Linear):
                mod.weight.normal_(0.0, config.initializer_range)
                if mod.bias is not None:
                    mod.bias.normal_(0.0, 0.1)
            elif isinstance(mod, nn.Embedding):
                mod.weight.normal_(0.0, config.initializer_range)
            elif isinstance(mod, nn.LayerNorm):
                mod.weight.copy_(1.0 + 0.1 * torch.randn_like(mod.weight))
                mod.bias.copy_(0.1 * torch.randn_like(mod.bias))


def make_inputs(rng, lengths, vocab):
    n = max(lengths)
    ids = np.zeros((len(lengths), n), dtype=np.int64)
    mask = np.zeros((len(lengths), n), dtype=np.int64)
    for b, length in enumerate(lengths):
        ids[b, 0] = 2
        ids[b, 1:length - 1] = rng.randint(5, vocab, size=length - 2)
        ids[b, length - 1] = 3
        mask[b, :length] = 1
    return ids, mask


def save_safetensors(module, path):
    from safetensors.torch import save_file
    tensors = {k: v.detach().to(torch.float32).contiguous() for k, v in module.state_dict().items()}
    save_file(tensors, path, metadata={"format": "pt"})
    return sorted(tensors)


def load_reference(folder, masked_lm):
    """The model rebuilt from the folder's config.json and model.safetensors, in float64."""
    from safetensors.torch import load_file
    with open(os.path.join(folder, "config.json")) as f:
        config = JinaBertConfig(**json.load(f))
    model = JinaBertModel(config)
    state = load_file(os.path.join(folder, "model.safetensors"))
    if masked_lm:
        state = {k[len("bert."):]: v for k, v in state.items() if k.startswith("bert.")}
        model.pooler = None
    model.load_state_dict(state, strict=True)
    return model.eval(), config


def write_case(name, seed, description, overrides, masked_lm, lengths):
    folder = os.path.join(ROOT, name)
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    torch.manual_seed(MODEL_SEEDS.get(name, seed))
    c = small_config(**overrides)
    config = JinaBertConfig(**c)
    model = JinaBertForMaskedLM(config) if masked_lm else JinaBertModel(config)
    init_weights(model, config)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config_json(c, masked_lm), f, indent=2)
        f.write("\n")
    names = save_safetensors(model.eval(), os.path.join(folder, "model.safetensors"))
    ref, config = load_reference(folder, masked_lm)
    rng = np.random.RandomState(seed)
    ids, mask = make_inputs(rng, lengths, config.vocab_size)
    with torch.no_grad():
        h32 = ref(torch.from_numpy(ids), torch.from_numpy(mask)).numpy()
        h64 = ref.double()(torch.from_numpy(ids), torch.from_numpy(mask)).numpy()
    mean, norm = pooled(h64, mask)
    tol = 1e-5
    err32 = float(np.abs(h32 - h64).max())
    assert err32 * 4 <= tol, (name, err32, tol)
    np.save(os.path.join(folder, "input_ids.npy"), ids)
    np.save(os.path.join(folder, "attention_mask.npy"), mask)
    np.save(os.path.join(folder, "last_hidden_state.npy"), h64.astype(np.float32))
    np.save(os.path.join(folder, "mean_pooled.npy"), mean.astype(np.float32))
    np.save(os.path.join(folder, "mean_pooled_normalized.npy"), norm.astype(np.float32))
    meta = dict(kind="jina", description=description, torch_version=torch.__version__,
                reference="tools/gen_jina_golden.py (transcribed jinaai/jina-bert-implementation "
                          "modeling_bert.py)",
                model_class="JinaBertForMaskedLM" if masked_lm else "JinaBertModel",
                name_prefix="bert." if masked_lm else "", hidden_size=config.hidden_size,
                num_layers=config.num_hidden_layers, heads=config.num_attention_heads,
                intermediate=config.intermediate_size,
                feed_forward_type=config.feed_forward_type,
                layer_norm_eps=config.layer_norm_eps, vocab_size=config.vocab_size,
                alibi_slopes=[float(s) for s in torch.Tensor(
                    _get_alibi_head_slopes(config.num_attention_heads))],
                batch=len(lengths), seq=int(ids.shape[1]), lengths=lengths, seed=seed,
                tolerance=tol, float32_torch_max_abs_err=err32,
                max_abs_last_hidden_state=float(np.abs(h64).max()), tensors=names)
    with open(os.path.join(folder, "meta.json"), "w") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")
    print("%s: tolerance %g, float32 torch off by %.2e" % (name, tol, err32))


def write_slopes():
    slopes = {str(n): [float(s) for s in torch.Tensor(_get_alibi_head_slopes(n))]
              for n in range(1, 17)}
    with open(os.path.join(ROOT, "slopes.json"), "w") as f:
        json.dump(dict(source="_get_alibi_head_slopes of jinaai/jina-bert-implementation "
                              "modeling_bert.py, as torch.Tensor (float32) holds them",
                       slopes=slopes), f, indent=1)
        f.write("\n")


LONG_TEXT = "the cat sat on the mat " * 700
LONG_MAX_LENGTH = 4096


def write_embed():
    """The files that make tests/golden/jina/basic a sentence-transformers folder, and the
    embeddings of a few texts through it."""
    from tokenizers import Tokenizer
    from tokenizers.implementations import BertWordPieceTokenizer
    folder = os.path.join(ROOT, "embed")
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(os.path.join(folder, "1_Pooling"))
    bwp = BertWordPieceTokenizer({w: i for i, w in enumerate(VOCAB)}, lowercase=True,
                                 strip_accents=None, clean_text=True,
                                 handle_chinese_chars=True)
    bwp.save(os.path.join(folder, "tokenizer.json"))
    tok = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling",
         "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize",
         "type": "sentence_transformers.models.Normalize"},
    ]
    with open(os.path.join(folder, "modules.json"), "w") as f:
        json.dump(modules, f, indent=2)
        f.write("\n")
    pooling = {"word_embedding_dimension": 32, "pooling_mode_cls_token": False,
               "pooling_mode_mean_tokens": True, "pooling_mode_max_tokens": False,
               "pooling_mode_mean_sqrt_len_tokens": False}
    with open(os.path.join(folder, "1_Pooling", "config.json"), "w") as f:
        json.dump(pooling, f, indent=2)
        f.write("\n")
    ref, _ = load_reference(os.path.join(ROOT, "basic"), False)
    ref = ref.double()
    rows, id_lines = [], []
    for text in EMBED_TEXTS:
        ids = tok.encode(text).ids
        id_lines.append(json.dumps(ids))
        x = torch.tensor([ids], dtype=torch.int64)
        with torch.no_grad():
            h = ref(x, torch.ones_like(x)).numpy()
        rows.append(pooled(h, np.ones((1, len(ids)), dtype=np.int64))[1][0])
    with open(os.path.join(folder, "texts.txt"), "w", encoding="utf-8") as f:
        f.write("".join(t + "\n" for t in EMBED_TEXTS))
    with open(os.path.join(folder, "ids.txt"), "w") as f:
        f.write("".join(line + "\n" for line in id_lines))
    np.save(os.path.join(folder, "embeddings.npy"), np.stack(rows).astype(np.float32))
    tok.enable_truncation(LONG_MAX_LENGTH)
    ids = tok.encode(LONG_TEXT).ids
    assert len(ids) == LONG_MAX_LENGTH and ids[0] == 2 and ids[-1] == 3
    x = torch.tensor([ids], dtype=torch.int64)
    with torch.no_grad():
        h = ref(x, torch.ones_like(x)).numpy()
    row = pooled(h, np.ones((1, len(ids)), dtype=np.int64))[1]
    np.save(os.path.join(folder, "long_text_embedding.npy"), row.astype(np.float32))
    print("embed: %d texts and a long one" % len(EMBED_TEXTS))


def main():
    global ROOT
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=ROOT)
    ap.add_argument("--case", action="append", choices=sorted(CASES))
    a = ap.parse_args()
    ROOT = a.out
    torch.set_num_threads(1)
    os.makedirs(ROOT, exist_ok=True)
    for name, args in CASES.items():
        if not a.case or name in a.case:
            write_case(name, *args)
    write_slopes()
    if not a.case or "basic" in a.case:
        write_embed()


if __name__ == "__main__":
    sys.exit(main())
