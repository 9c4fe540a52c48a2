/*
 * libclattn — transformer.h: the whole encoder–decoder Transformer (nn.Transformer with the
 * paper's embeddings and an output projection): teacher-forced logits, and generation by greedy
 * decoding or beam search with a key/value cache.
 *
 * Model file (safetensors, F32/F16/BF16): nn.Transformer's state_dict names —
 * encoder.layers.{i}.* and encoder.norm.* (as clattn_encoder_load_weights' names),
 * decoder.layers.{i}.* and decoder.norm.* (as clattn_decoder_load_weights') — plus
 * src_embedding.weight [V_src, E] and tgt_embedding.weight [V_tgt, E] (multiplied by √E, then the
 * paper's sinusoidal table added, section 3.4/3.5, unless metadata "positional" says otherwise,
 * below) and generator.weight [V_tgt, E],
 * generator.bias [V_tgt] (logits = decoder output · generator.weightᵀ + bias; with metadata
 * tie_embeddings "true" the generator is tgt_embedding.weight without bias). Metadata (strings):
 * d_model, nhead, num_encoder_layers, num_decoder_layers, dim_feedforward, activation,
 * norm_first, layer_norm_eps, bos_id, eos_id, pad_id, and optionally num_kv_heads: the
 * decoder's key/value heads (grouped-query attention in its self- and cross-attention, see
 * clattn_decoder_config; its K/V projection rows then num_kv_heads·d_k wide). encoder.norm and
 * decoder.norm are used when present (nn.Transformer always has them). Optional metadata
 * "positional": "sinusoidal" (the default for a model of token ids: the table above), "none"
 * (no positions), "rope" or "alibi": positions inside the encoder's and the decoder's
 * self-attention instead of the table (cross-attention takes none) — RoPE with the optional
 * "rope_theta" (default 10000), "rotary_dim" (default 0: all of d_k; even, <= d_k) and
 * "rope_interleaved" ("true": GPT-J's pairs; "false", the default: GPT-NeoX's halves), as
 * clattn_encoder_config and clattn_decoder_config's rope_theta, rotary_dim, rope_interleaved;
 * ALiBi with clattn_alibi_slopes(nhead): -m_h·|i - j| in the encoder, -m_h·(i - j) in the causal
 * decoder. Any other "positional" is CLATTN_ERROR_FORMAT naming the four. The layer counts must
 * be the number of layers the file holds (encoder.layers.0 .. encoder.layers.{n-1}): a count
 * that disagrees is CLATTN_ERROR_FORMAT naming both.
 *
 * A model of float inputs: a file without src_embedding.weight and tgt_embedding.weight (the
 * state_dict of nn.Transformer alone; a file with one embedding but not the other is an error).
 * It runs only clattn_transformer_forward_float (no positional encoding is added, as
 * nn.Transformer adds none); bos_id, eos_id and pad_id are not read, and generator.weight /
 * generator.bias are optional (with them, its forward gives logits).
 *
 * Same thread-safety rule as the context.
 */
#ifndef CLATTN_TRANSFORMER_H
#define CLATTN_TRANSFORMER_H

#include "clattn/decoder.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct clattn_transformer clattn_transformer;

typedef struct clattn_transformer_info {
    size_t d_model, nhead, num_encoder_layers, num_decoder_layers, dim_feedforward;
    /* src_vocab 0: a model of float inputs; tgt_vocab: its generator's rows then (0: none) */
    size_t src_vocab, tgt_vocab;
    int64_t bos_id, eos_id, pad_id; /* -1 in a model of float inputs */
    size_t num_kv_heads; /* the decoder's key/value heads (nhead without grouped-query attention) */
    uint8_t reserved[56];
} clattn_transformer_info;

/* Loads a model file (see above). Errors name the file and the tensor or metadata key. */
CLATTN_API clattn_status clattn_transformer_load(clattn_context *ctx, clattn_transformer **model,
                                                 const char *path);

/* Releases the model; sets *model to NULL. Accepts NULL. */
CLATTN_API void clattn_transformer_destroy(clattn_transformer **model);

CLATTN_API clattn_status clattn_transformer_get_info(const clattn_transformer *model,
                                                     clattn_transformer_info *info);

/*
 * Teacher-forced logits: the encoder reads src [B, S] (ids below V_src) with the source padding
 * src_padding [B, S] (nonzero = padding; NULL: none; used as src_key_padding_mask and
 * memory_key_padding_mask, as nn.Transformer users pass it); the decoder reads tgt [B, T] (ids
 * below V_tgt) causally; logits: a contiguous [B, T, V_tgt] tensor.
 */
CLATTN_API clattn_status clattn_transformer_forward(clattn_transformer *model, const int64_t *src,
                                                    size_t batch, size_t src_len,
                                                    const uint8_t *src_padding,
                                                    const int64_t *tgt, size_t tgt_len,
                                                    clattn_tensor *logits);

/*
 * A model of float inputs (src_vocab 0): nn.Transformer's forward(src, tgt, tgt_mask = causal,
 * src_key_padding_mask = memory_key_padding_mask = src_padding), then the generator when the
 * file has one.
 *   src: [B, S, d_model], tgt: [B, T, d_model], contiguous float tensors (not modified)
 *   src_padding: [B, S] on the host, nonzero = padding; NULL: none
 *   out: [B, T, d_model], the decoder output after decoder.norm; [B, T, V] logits with a
 *        generator
 * A model of token ids is CLATTN_ERROR_UNSUPPORTED (and clattn_transformer_forward or _generate
 * on a model of float inputs).
 */
CLATTN_API clattn_status clattn_transformer_forward_float(clattn_transformer *model,
                                                          const clattn_tensor *src,
                                                          const uint8_t *src_padding,
                                                          const clattn_tensor *tgt,
                                                          clattn_tensor *out);

/* Called by clattn_transformer_generate after each step (step tokens generated of max_new at
 * most, on `sequences` = batch x beam rows); a nonzero return stops generation there: the
 * outputs are then what they would be with max_new = step. */
typedef int (*clattn_generate_progress)(void *user_data, size_t step, size_t max_new,
                                        size_t sequences);

typedef struct clattn_generate_params {
    size_t max_new; /* tokens to generate at most; 0: source length + 50 (the paper's rule) */
    size_t beam;    /* 1 (or 0): greedy; k > 1: beam search with k hypotheses per sentence */
    float alpha;    /* the GNMT length penalty's exponent: scores / ((5 + |Y|)^α / 6^α); 0.6 */
    int half_cache; /* 1: the decoder's key/value cache in half floats (half the memory; see
                     * clattn_decoder_state_params.half_cache); 0: float (the default) */
    /* [B] or NULL: each result's score, the sum of its log-probabilities divided by the length
     * penalty lp(length) below (beam search's own score; greedy's output is scored alike) */
    double *scores;
    clattn_generate_progress progress; /* NULL: none */
    void *progress_user_data;
    uint8_t reserved[36]; /* must be zero */
} clattn_generate_params;

CLATTN_API void clattn_generate_params_default(clattn_generate_params *params);

/*
 * Generates from bos_id until eos_id (included in the output) or max_new tokens, for every
 * sentence of src [B, S]: out [B, max_new] receives the ids, right-padded with pad_id, and
 * lengths[b] (may be NULL) the number of ids of sentence b.
 *
 * Greedy: the arg-max token each step (the lowest id on ties).
 *
 * Beam search with k = beam hypotheses per sentence, scores in double precision. Each step t
 * (t + 1 tokens generated after it):
 *   1. every alive hypothesis extended by eos_id is a finished candidate, scored by its sum of
 *      log-probabilities divided by the length penalty lp(t + 1) = ((5 + t + 1) / 6)^α; it
 *      replaces the sentence's best finished hypothesis only when strictly greater;
 *   2. the k best extensions by any other token (by the sum of log-probabilities; ties: the
 *      earlier hypothesis, then the lower id) stay alive;
 *   3. the sentence stops when its best finished score >= the best alive sum / lp(max_new) (no
 *      alive hypothesis can beat it any more), or after max_new tokens.
 * The result is the best finished hypothesis. tests/golden/TOY.md states the same rule, and
 * tools/train_toy_seq2seq.py implements it in PyTorch for the tests' expected outputs
 * (tools/gen_beam_golden.py too, in plain Python, on a model where α decides the winner).
 *
 * params->progress, when set, is called after every step; SIGINT handling and progress lines
 * belong to the caller (examples/generate.c).
 *
 * Before any step, a key/value cache (sequences x max_new tokens, every decoder layer) larger
 * than the device's global memory is CLATTN_ERROR_TOO_LARGE with the size needed and the
 * device's (see clattn_decoder_state_create).
 *
 * Errors: CLATTN_ERROR_INVALID_ARGUMENT (NULLs, alpha negative or not finite, half_cache not 0
 * or 1, reserved bytes),
 * CLATTN_ERROR_OUT_OF_RANGE (an id outside the vocabulary), CLATTN_ERROR_TOO_LARGE,
 * CLATTN_ERROR_UNSUPPORTED (a model of float inputs: nothing to generate from), and the
 * device's errors.
 */
CLATTN_API clattn_status clattn_transformer_generate(clattn_transformer *model,
                                                     const int64_t *src, size_t batch,
                                                     size_t src_len, const uint8_t *src_padding,
                                                     const clattn_generate_params *params,
                                                     int64_t *out, size_t *lengths);

/*
 * The parameters of the paper's whole model for an encoder configuration: num_layers encoder
 * and num_layers decoder layers of its widths (biases and LayerNorms included), encoder.norm and
 * decoder.norm, and one embedding matrix [vocab, d_model] shared by the source and target
 * embeddings and the output projection (section 3.4; the paper's vocabulary is 37000 byte-pair
 * tokens). config->vocab_size and final_norm are not used. For the base configuration:
 * 63082496 (the paper's Table 3: 65M); big: 214245376 (213M).
 */
CLATTN_API clattn_status clattn_transformer_count_params(const clattn_encoder_config *config,
                                                         size_t vocab, uint64_t *params);

#ifdef __cplusplus
}
#endif

#endif /* CLATTN_TRANSFORMER_H */
