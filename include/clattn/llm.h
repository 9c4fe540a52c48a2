/*
 * libclattn — llm.h: decoder-only language models from GGUF files (llama.cpp's format) and
 * Hugging Face *ForCausalLM folders.
 *
 * Architectures (the file's general.architecture): "llama" (Llama 2 and 3.x without RoPE
 * scaling, SmolLM2, TinyLlama, Mistral-style models without a sliding window), "qwen2" (biases
 * on the query, key and value projections), "qwen3" (per-head RMSNorm of queries and keys).
 * Every size comes from the metadata ("<arch>.block_count", "<arch>.embedding_length",
 * "<arch>.attention.head_count", ...); the vocabulary is the token embedding's rows; without an
 * "output.weight" the output projection is the token embedding (tied). Weight types: F32, F16,
 * BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K: the linear weights are kept in their
 * type on the device and decoded as the kernels read them (so a model takes about its file's
 * size), the token embedding's rows are read from the file as tokens need them, norms and
 * biases are float32; a folder's weights are float32. Another type is refused at load, naming
 * the type and the tensor. RoPE scaling: Llama 3.1/3.2's per-pair frequency factors
 * ("rope_freqs.weight") and "<arch>.rope.scaling.type" "linear" (or "none"). Refused, each naming
 * the key or tensor: another architecture (naming general.architecture), another RoPE scaling
 * type (yarn, longrope, ...), a sliding window, a mixture of experts, and an embedding or
 * reranking model ("<arch>.pooling_type" other than 0: llama.cpp's converter writes it for
 * those only).
 *
 * What runs: the token embedding, the layers (RMSNorm before attention and feed-forward, causal
 * grouped-query self-attention with RoPE, SwiGLU), the final RMSNorm and the output projection,
 * in float32, into float32 logits. They match transformers loading the same file (its own
 * dequantisation) in float64 within 1e-4 on small random models and within 2e-4 on
 * SmolLM2-135M-Instruct Q4_1 (tests/test_llm.c).
 *
 * Sequences live in a cache (clattn_llm_cache): up to max_sequences sequences of up to
 * `capacity` tokens each, every one with its own length and its own positions. A prompt is run
 * in one call or in chunks (clattn_llm_prompt); a decode step runs one new token for each of
 * several sequences at once (clattn_llm_decode), whatever their lengths.
 *
 * One set of bytes per token: a token's logits are the same bytes whether it was run in a
 * prompt (in one chunk or in chunks of any size) or in a decode step, alone or beside any other
 * sequences of any lengths (with a float cache, the default).
 *
 * A cache of half floats (CLATTN_LLM_CACHE_HALF) takes half the memory but rounds keys and
 * values to 11 significant bits: logits then differ from transformers' by up to about 1e-2 on
 * SmolLM2-135M-Instruct (a float cache: 1.2e-4), so float is the default.
 *
 * A model and its caches belong to their context: one thread at a time (clattn/context.h).
 */
#ifndef CLATTN_LLM_H
#define CLATTN_LLM_H

#include <stddef.h>
#include <stdint.h>

#include "clattn/common.h"
#include "clattn/context.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct clattn_llm clattn_llm;

/* Loads the GGUF file at `path` onto the context's device; when `path` is a directory, the Hugging
 * Face folder there: config.json ("model_type" llama, qwen2 or qwen3, its sizes; "rope_scaling"
 * of type "llama3" or "linear"; another rope_scaling type, "attention_bias", "mlp_bias",
 * "use_sliding_window" and a "hidden_act" other than silu are refused by name) and model.safetensors (F32, F16, BF16; one file), the rotation on halves as
 * transformers' rotate_half. Errors: CLATTN_ERROR_IO (the file),
 * CLATTN_ERROR_FORMAT (a malformed file, a missing key or tensor, a wrong shape, each named),
 * CLATTN_ERROR_UNSUPPORTED (above), CLATTN_ERROR_SHAPE_MISMATCH (a tensor's shape against the
 * metadata), out of memory. */
CLATTN_API clattn_status clattn_llm_load(clattn_context *ctx, const char *path, clattn_llm **llm);
/* Releases the model (destroy its caches first); accepts NULL and clears the pointer. */
CLATTN_API void clattn_llm_destroy(clattn_llm **llm);

/* The number format of the activations that enter the model's linear layers whose weights are
 * in a block type (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K: the projections, the
 * feed-forward, a quantised output projection), for the calls that follow:
 *   CLATTN_PRECISION_FP32 (the default): float32, the logits transformers gives on the same
 *     weights (above);
 *   CLATTN_PRECISION_INT8: each token's activations quantised to int8 in blocks of the weight's
 *     block (32 values, or 256 for the K-quants; scale = the block's largest magnitude / 127,
 *     rounded to nearest), integer dot products, then one float32 scaling per block: what
 *     llama.cpp's CPU backend does, and faster on CPUs (docs/llm.md has the figures). Results
 *     stay batch-invariant (one set of bytes per token, as above). Logits move by about 0.1
 *     on SmolLM2-135M-Instruct Q4_1 against float32 (docs/llm.md: measured on 8 prompts);
 *     weights in F32, F16 or BF16 keep float32 activations.
 * The first switch to int8 builds its kernels (a second or so on a CPU). Keys and values a cache
 * already holds stay as they were computed. Errors: CLATTN_ERROR_UNSUPPORTED for
 * CLATTN_PRECISION_BF16, and for int8 on a model without block-type weights (a Hugging Face
 * folder); CLATTN_ERROR_INVALID_ARGUMENT for a value that is no clattn_precision. */
CLATTN_API clattn_status clattn_llm_set_precision(clattn_llm *llm, clattn_precision precision);

/* What the file says. */
typedef struct clattn_llm_info {
    const char *architecture; /* "llama", "qwen2" or "qwen3"; valid while the model lives */
    size_t vocab_size;        /* logits per token */
    size_t context_length;    /* "<arch>.context_length": the positions it was trained for */
    size_t num_layers, d_model, d_ff;
    size_t num_heads, num_kv_heads, head_dim;
    int tied_embeddings; /* 1: the output projection is the token embedding */
} clattn_llm_info;

CLATTN_API clattn_status clattn_llm_get_info(const clattn_llm *llm, clattn_llm_info *info);

/* Teacher-forced logits [n, vocab_size] of the ids (each in [0, vocab_size)): one sequence
 * run as one prompt in a cache of its own. */
CLATTN_API clattn_status clattn_llm_logits(clattn_llm *llm, const int32_t *ids, size_t n,
                                           float *logits);

/* How a cache stores keys and values. */
typedef enum clattn_llm_cache_type {
    CLATTN_LLM_CACHE_FLOAT = 0, /* float32 */
    CLATTN_LLM_CACHE_HALF = 1,  /* IEEE half floats: half the memory */
} clattn_llm_cache_type;

typedef struct clattn_llm_cache clattn_llm_cache;

/* A cache of up to max_sequences sequences of up to `capacity` tokens each (the memory is
 * allocated now: num_layers · max_sequences · capacity · 2 · num_kv_heads · head_dim values);
 * refused before any allocation when it exceeds the device's memory. The model must outlive
 * it. */
CLATTN_API clattn_status clattn_llm_cache_create(clattn_llm *llm, size_t max_sequences,
                                                 size_t capacity, clattn_llm_cache_type type,
                                                 clattn_llm_cache **cache);
/* Releases the cache; accepts NULL and clears the pointer. */
CLATTN_API void clattn_llm_cache_destroy(clattn_llm_cache **cache);

/* A new, empty sequence (*seq: its number, below max_sequences); none free:
 * CLATTN_ERROR_OUT_OF_RANGE. */
CLATTN_API clattn_status clattn_llm_sequence_add(clattn_llm_cache *cache, size_t *seq);
/* Frees the sequence's slot. */
CLATTN_API clattn_status clattn_llm_sequence_remove(clattn_llm_cache *cache, size_t seq);
/* The tokens the sequence holds. */
CLATTN_API clattn_status clattn_llm_sequence_length(const clattn_llm_cache *cache, size_t seq,
                                                    size_t *length);
/* The cache's size as created: *max_sequences sequences of up to *capacity tokens each (either
 * pointer may be NULL). */
CLATTN_API clattn_status clattn_llm_cache_get_capacity(const clattn_llm_cache *cache,
                                                       size_t *max_sequences, size_t *capacity);
/* The tokens the sequence can still take: the capacity less the tokens it holds. */
CLATTN_API clattn_status clattn_llm_sequence_room(const clattn_llm_cache *cache, size_t seq,
                                                  size_t *room);
/* Keeps the sequence's first `length` tokens (at most its length): the rest is forgotten. */
CLATTN_API clattn_status clattn_llm_sequence_truncate(clattn_llm_cache *cache, size_t seq,
                                                      size_t length);
/* Sequence `to` (added) becomes a copy of sequence `from`: a shared prompt run once. */
CLATTN_API clattn_status clattn_llm_sequence_copy(clattn_llm_cache *cache, size_t from,
                                                  size_t to);

/* Runs n tokens of the sequence (a prompt, or the next chunk of one) after the tokens it holds.
 * logits: the last token's [vocab_size], or NULL (the output projection is then skipped). More
 * tokens than the sequence has room for is CLATTN_ERROR_OUT_OF_RANGE naming the numbers, and
 * nothing changes; so is an id outside the vocabulary. */
CLATTN_API clattn_status clattn_llm_prompt(clattn_llm_cache *cache, size_t seq,
                                           const int32_t *ids, size_t n, float *logits);
/* One decode step: ids[b] is the next token of sequence seqs[b] (each added, each once), for
 * b < count; logits [count, vocab_size] in that order. Errors as clattn_llm_prompt's. */
CLATTN_API clattn_status clattn_llm_decode(clattn_llm_cache *cache, const size_t *seqs,
                                           const int32_t *ids, size_t count, float *logits);

#ifdef __cplusplus
}
#endif

#endif /* CLATTN_LLM_H */
