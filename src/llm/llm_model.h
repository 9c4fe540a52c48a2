/*
 * A decoder-only language model from a GGUF file, on the block stack (llm_config.c: the file's
 * metadata as a clattn_block_spec; llm_weights.c: its tensors under the stack's names;
 * llm_quant.c: the linear weights kept quantised on the device, the embedding's rows read from
 * the file; llm_model.c: loading and running).
 *
 * Architectures: llama (Llama 2/3, SmolLM2, TinyLlama, Mistral without sliding window), qwen2
 * (biases on q, k, v), qwen3 (per-head q/k RMSNorm). Every hyperparameter comes from the
 * metadata ("<arch>.block_count", ...); the vocabulary from the token embedding's rows. A llama
 * GGUF holds q and k rows permuted by llama.cpp's converter, so its rotation acts on adjacent
 * pairs (the spec's rope_interleaved); qwen2 and qwen3 files rotate halves.
 *
 * Running: the token embedding, the stack over a key/value state (each sequence a slot with its
 * own length and its own RoPE positions), the final RMSNorm, the output projection (the token
 * embedding itself when the file has no "output.weight") into float32 logits. A token's logits
 * are the same bytes whether it was run in a prompt (any chunk) or in a decode step, alone or
 * beside other sequences (tests/test_llm.c).
 */
#ifndef CLATTN_LLM_MODEL_H
#define CLATTN_LLM_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clattn/safetensors.h"
#include "formats/gguf.h"
#include "nn/block_stack.h"
#include "nn/kv_state.h"
#include "ops/linear.h"

/* What the file's metadata says. */
typedef struct clattn_llm_config {
    char arch[16];          /* general.architecture: "llama", "qwen2" or "qwen3" */
    clattn_block_spec spec; /* the layers, the final norm */
    size_t vocab;           /* rows of token_embd.weight */
    size_t context_length;  /* "<arch>.context_length" */
    bool tied;              /* no output.weight: the output projection is token_embd */
} clattn_llm_config;

/* Reads the configuration of an open GGUF file. Refused, naming the key or tensor (errors
 * "<function>: <path>: ..."): an architecture other than llama, qwen2, qwen3 (naming
 * general.architecture); a missing or mistyped key; sizes that do not fit together; a RoPE
 * scaling type other than "none" and "linear" (naming "<arch>.rope.scaling.type"). Llama
 * 3.1's rope_freqs.weight divides each pair's frequency (nn/rope_scaling.h). */
clattn_status clattn__llm_config_read(const char *function, const clattn_gguf *g,
                                      clattn_llm_config *config);

/* Checks that every tensor the configuration needs is in the file with its shape and a type
 * the library runs (clattn__ggml_type_supported): a missing tensor, a wrong shape or an
 * unsupported type ("tensor blk.0.attn_q.weight has type iq2_xxs, which is not supported") is
 * an error naming the tensor. */
clattn_status clattn__llm_weights_check(const char *function, const clattn_gguf *g,
                                        const clattn_llm_config *config);

/* The weights of the file as the block stack asks for them (clattn_weight_lookup): the stack's
 * PyTorch-style names ("layers.3.self_attn.q_proj_weight", "norm.weight") are mapped to the
 * GGUF's ("blk.3.attn_q.weight", "output_norm.weight"), other names are GGUF names; each
 * tensor is read and dequantised to float32 on request. The answers of the last few requests
 * stay valid (a ring), which is what the stack's loaders need. */
typedef struct clattn_llm_weight_source {
    const clattn_gguf *g;
    const char *function;
    clattn_status status;   /* the first failure, else CLATTN_OK */
    char message[400];      /* its message */
    clattn_host_tensor made[8];
    float *data[8];
    size_t next;
} clattn_llm_weight_source;

const clattn_host_tensor *clattn__llm_weight_lookup(void *source, const char *name);
/* The GGUF name of one of the stack's names into gguf (false: none, such as the packed
 * in_proj_weight); a name the stack does not use is taken as a GGUF name. */
bool clattn__llm_gguf_name(const char *name, char *gguf, size_t size);

/* A GGUF model's linear weights kept in their stored types on the device (llm_quant.c): the
 * program of the quantised kernels, and every weight the stack's layers and the output
 * projection point to (released with the model, after the stack). */
typedef struct clattn_llm_quant {
    clattn_context *ctx;
    const char *function;  /* for messages, while loading */
    const clattn_gguf *g;  /* the file, while loading */
    clattn_qlinear_program *prog;
    clattn_gemm_quant **weights;
    size_t count, capacity;
} clattn_llm_quant;

/* The stack's clattn_quant_provider (layer_weights.h) over a clattn_llm_quant: the GGUF tensors
 * of names[0 .. count) (stack names, mapped as the lookups map them), each rows[i] × k,
 * stacked into one weight in their type (q|k|v, gate|up), or in float32 when their types
 * differ (exact: the dequantised values); split into a chain of parts when larger than the
 * device's largest allocation (below). */
clattn_status clattn__llm_quant_weight(void *quant, const char *const *names, const size_t *rows,
                                       size_t count, size_t k, const clattn_gemm_quant **out);
void clattn__llm_quant_release(clattn_llm_quant *quant);

/* Limits of the device: no buffer may be larger than CL_DEVICE_MAX_MEM_ALLOC_SIZE (often a
 * quarter of a GPU's memory; 128 MiB under oclgrind), and a large vocabulary's output projection
 * can be (150k × 4096 values), as can a large model's stacked gate|up weight. Such a weight is
 * split by rows over several buffers, a chain of parts (ops/linear.h's clattn_gemm_quant.next),
 * each run as its own quantised linear layer writing its columns of the output: column j is the
 * sum of row j of the weight with the input in the kernels' one order, whichever buffer holds
 * that row, so the outputs (and the logits) are the same bytes split or not. This holds for the
 * output projection (clattn__llm_quant_split) and for every layer weight the stack asks for
 * (clattn__llm_quant_weight: q|k|v, the attention's output, gate|up, down). Only a weight whose
 * single row is over the limit is refused, naming its tensors and the numbers. */

/* The output projection's chain of parts: first holds the first first->w.n rows, its next the
 * rows after them, and so on. The parts are kept in the clattn_llm_quant's list (released with
 * it). */
typedef struct clattn_llm_split {
    const clattn_gemm_quant *first;
    size_t count; /* parts in the chain; 0: not kept quantised (the float path) */
} clattn_llm_split;

/* How many buffers `rows` rows of row_bytes bytes need when none may exceed cap bytes: the
 * fewest; 0 when one row alone is larger than cap. Part p holds rows
 * [clattn__llm_split_first(rows, parts, p), clattn__llm_split_first(rows, parts, p + 1)): as
 * even as whole rows allow, each within cap. */
size_t clattn__llm_split_parts(size_t rows, size_t row_bytes, uint64_t cap);
size_t clattn__llm_split_first(size_t rows, size_t parts, size_t p);

/* The GGUF tensor `name` [rows, k] kept in its type (or float32 where the kernels do not run its
 * type), split over as many buffers as the device's largest allocation needs into *out
 * (out->count 0 with CLATTN_OK: the kernels cannot run it; the float path then loads it). One
 * row larger than the allocation is CLATTN_ERROR_TOO_LARGE naming the tensor and the numbers. */
clattn_status clattn__llm_quant_split(clattn_llm_quant *quant, const char *name, size_t rows,
                                      size_t k, clattn_llm_split *out);
/* y[y_offset + r·ldy + j] = Σ_l x[x_offset + r·ldx + l] · W[j, l] for r < m and every row j of
 * the split weight W, part by part (clattn__qlinear's contract, ops/qlinear.h). */
clattn_status clattn__llm_split_linear(clattn_context *ctx, const clattn_llm_split *split,
                                       size_t m, cl_mem x, size_t x_offset, size_t ldx, cl_mem y,
                                       size_t y_offset, size_t ldy);
/* Zeroes *split (its parts are the clattn_llm_quant's). */
void clattn__llm_split_release(clattn_llm_split *split);

/* Rows ids[0 .. n) (each checked by the caller) of the embedding table t, read from the file
 * and dequantised into dst [n, ne0]: the values a dequantised table would hold. */
clattn_status clattn__llm_embed_rows(const clattn_gguf *g, const char *function,
                                     const clattn_gguf_tensor *t, const int32_t *ids, size_t n,
                                     float *dst);
void clattn__llm_weight_source_free(clattn_llm_weight_source *source);

/* A Hugging Face *ForCausalLM folder (llm_hf.c): config.json ("model_type" llama, qwen2 or
 * qwen3; rope_scaling "llama3" or "linear"; another rope_scaling, attention_bias, mlp_bias,
 * use_sliding_window and another hidden_act refused by name) and model.safetensors (F32, F16, BF16) read whole, its tensors checked
 * against the configuration; lookups map the stack's names to the folder's
 * ("model.layers.3.self_attn.q_proj.weight") and token_embd/output to model.embed_tokens and
 * lm_head. The rotation acts on halves (rotate_half). */
typedef struct clattn_llm_hf {
    clattn_safetensors *st;
    float *bias; /* the last q|k|v bias asked for */
    clattn_host_tensor bias_tensor;
    clattn_host_tensor made[8];
    size_t next;
} clattn_llm_hf;

clattn_status clattn__llm_hf_open(const char *function, const char *dir,
                                  clattn_llm_config *config, clattn_llm_hf *hf);
void clattn__llm_hf_close(clattn_llm_hf *hf);
const clattn_host_tensor *clattn__llm_hf_lookup(void *hf, const char *name);

typedef struct clattn_llm_model {
    clattn_context *ctx;
    clattn_llm_config cfg;
    clattn_block_stack stack;
    /* A GGUF file stays open: the token embedding's rows are read from it (embd) as they are
     * needed, and the linear weights are kept quantised (quant). A folder's weights, or a
     * file whose output projection the quantised kernels cannot run, are float32 on the
     * device (embedding, output_weight) and embd is NULL. */
    clattn_gguf *g;
    const clattn_gguf_tensor *embd; /* token_embd.weight in g, or NULL */
    clattn_llm_quant quant;
    clattn_llm_split output_split; /* the output projection kept quantised, or count 0 */
    cl_mem embedding;          /* [vocab, d_model], or NULL with embd */
    cl_mem output_weight;      /* [vocab, d_model], or NULL when tied or quantised */
    clattn_gemm_weight output; /* output_weight, or embedding when tied (unused when split) */
    /* [rows, d_model], [rows, vocab]: grown as needed; the logits of a step are computed in
     * chunks of rows that fit one buffer of the device. */
    cl_mem hidden, logits;
    size_t hidden_rows, logits_rows;
} clattn_llm_model;

/* Loads the GGUF file at `path`, or the Hugging Face folder when `path` is a directory, onto the
 * context's device. Errors name `function`. */
clattn_status clattn__llm_model_load(clattn_context *ctx, const char *function, const char *path,
                                     clattn_llm_model **model);
/* Releases the model; sets *model to NULL. Accepts NULL. */
void clattn__llm_model_free(clattn_llm_model **model);

/* A key/value state of `sequences` slots of `capacity` tokens each (half floats with `half`). */
clattn_status clattn__llm_state_create(clattn_llm_model *m, const char *function,
                                       size_t sequences, size_t capacity, bool half,
                                       clattn_kv_state **state);

/* Runs n new tokens of each of `count` sequences of the state: row b is slot slots[b] (in use,
 * each once), its ids ids[b·n .. b·n + n), at the positions after its cached tokens. logits:
 * with all_rows, [count·n, vocab] (every new token's); else [count, vocab] (each sequence's
 * last); NULL: none (the output projection is skipped). An id outside the vocabulary, or more
 * tokens than a slot has room for, is an error and nothing changes. */
clattn_status clattn__llm_step(clattn_llm_model *m, const char *function, clattn_kv_state *state,
                               const size_t *slots, size_t count, size_t n, const int32_t *ids,
                               bool all_rows, float *logits);

/* Teacher-forced logits [n, vocab] of the ids: a prompt of one sequence in one step (the same
 * bytes as clattn__llm_step gives them). */
clattn_status clattn__llm_logits(clattn_llm_model *m, const char *function, const int32_t *ids,
                                 size_t n, float *logits);

#endif /* CLATTN_LLM_MODEL_H */
