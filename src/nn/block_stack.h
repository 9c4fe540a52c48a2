/*
 * One layer stack (block_stack.c): the weights of layers a clattn_block_spec describes, loaded
 * by their PyTorch names, and the one runner that executes them — for the encoder, the
 * encoder–decoder's decoder (teacher-forced, or a step of a clattn_kv_state) and the stacks
 * that come next.
 */
#ifndef CLATTN_BLOCK_STACK_H
#define CLATTN_BLOCK_STACK_H

#include "block_spec.h"
#include "kv_state.h"
#include "layer_weights.h"
#include "mha_internal.h"

/* One layer's device weights (PyTorch layouts). */
typedef struct clattn_block_layer {
    clattn_mha *self_attn;
    clattn_mha *cross_attn;  /* NULL without cross-attention */
    cl_mem q_norm, k_norm;   /* [head_dim_qk] each (spec.qk_norm), or NULL */
    clattn_ffn ffn;          /* linear1 [d_ff, d_model], linear2 [d_model, d_ff] */
    /* [d_model] each: before (pre) or after (post) the self-attention ("norm1"; weight NULL
     * for first_norm_identity's layer 0), the cross-attention ("norm2"; NULLs without), the
     * feed-forward block ("norm2", or "norm3" with cross-attention). */
    clattn_norm norm_self, norm_cross, norm_ffn;
} clattn_block_layer;

/* Everything a load replaces at once. */
typedef struct clattn_block_weights {
    clattn_block_layer *layers; /* [num_layers] */
    clattn_norm final_norm;     /* "norm", or NULLs */
    float *relative_bias;       /* host [buckets, nhead] (relative_buckets), or NULL */
} clattn_block_weights;

typedef struct clattn_block_stack {
    clattn_context *ctx;
    clattn_block_spec spec;
    clattn_block_weights weights;
    cl_mem alibi_slopes; /* [nhead] (spec.alibi), or NULL */
    bool loaded;         /* weights loaded (or made) */
} clattn_block_stack;

/* A stack of `spec` without weights; errors name `function`. */
clattn_status clattn__block_stack_init(clattn_context *ctx, const char *function,
                                       const clattn_block_spec *spec, clattn_block_stack *stack);
void clattn__block_stack_release(clattn_block_stack *stack);

/* Loads the layers, the final norm and the relative bias of `spec` into *w (zeroed first; the
 * caller releases it on failure too). */
clattn_status clattn__block_weights_load(const clattn_weight_loader *loader,
                                         const clattn_block_spec *spec, clattn_block_weights *w);
void clattn__block_weights_release(clattn_block_weights *w, size_t num_layers);

/* The weights a stack's owner loads besides the stack's (an encoder's embeddings), from the
 * same loader: on success they replace the owner's, on failure nothing of them is kept. */
typedef clattn_status (*clattn_owner_weights_fn)(void *owner, const clattn_weight_loader *loader);

/* Loads the stack's weights from a public lookup, then the owner's (more: NULL for none), and
 * replaces the stack's only when both succeed (stack->loaded then). Errors name `function`. */
clattn_status clattn__block_stack_load(clattn_block_stack *stack, const char *function,
                                       clattn_weight_lookup lookup, void *user_data,
                                       clattn_owner_weights_fn more, void *owner);
/* clattn__block_stack_load with the linear weights kept quantised where `quant` has them
 * (layer_weights.h's clattn_quant_provider; the owner's `more` sees it in its loader too). */
clattn_status clattn__block_stack_load_quant(clattn_block_stack *stack, const char *function,
                                             clattn_weight_lookup lookup, void *user_data,
                                             clattn_quant_provider quant, void *quant_user,
                                             clattn_owner_weights_fn more, void *owner);
/* The same with seeded random weights in PyTorch's initialisation ranges; a shortage of host
 * memory for them names `function`, other errors `load_function` (as a load's would). */
clattn_status clattn__block_stack_init_random(clattn_block_stack *stack, const char *function,
                                              const char *load_function, uint64_t seed,
                                              clattn_owner_weights_fn more, void *owner);

/* One run of the stack over `tokens` rows. */
typedef struct clattn_block_run {
    size_t tokens;   /* B·n rows */
    cl_mem x;        /* [tokens, d_model] (CLATTN_SLOT_LAYER_X): the input; overwritten */
    /* Templates of the attention calls: batch, seq_q, seq_k, masks, causal, path (the runner
     * adds the spec's modifiers). cross: keys and values of the memory (without a state). */
    clattn_mha_io self, cross;
    size_t position_offset;  /* RoPE: the position of each sequence's first row */
    clattn_kv_state *kv;     /* NULL: whole sequences; else n new tokens of each sequence */
    /* With a state: row b of the run is sequence slots[b] of the state (each in use, each
     * once); NULL: row b is sequence b, every sequence of the state (self.batch == batch). */
    const size_t *slots;
    /* With a state: row b's first new token is at RoPE position positions[b]; NULL:
     * position_offset + the sequence's length. */
    const size_t *positions;
    cl_mem out;              /* [tokens, d_model] after the final norm */
    size_t out_offset;       /* floats */
    const char *function;    /* the public function, for messages */
} clattn_block_run;

/* Runs the layers and the final norm. With a state: self-attention over each sequence's cache
 * (causal), cross-attention over its projected memory (only with slots NULL: the memory's rows
 * are the state's), and each sequence's length grows by n on success; a run of sequences at
 * one length (slots and positions NULL) attends to all of them in one call, else sequence by
 * sequence (the same bytes). More tokens than a sequence has room for is
 * CLATTN_ERROR_OUT_OF_RANGE, and nothing changes. */
clattn_status clattn__block_stack_run(clattn_block_stack *stack, clattn_block_run *run);

/* Projects the memory [B, S, d_model] (mem from offset, in floats) through every layer's
 * cross-attention into the state, with its key padding mask [B, S] (NULL: none); empties the
 * cache. */
clattn_status clattn__block_stack_set_memory(clattn_block_stack *stack, clattn_kv_state *kv,
                                             const char *function, cl_mem memory,
                                             size_t memory_offset, size_t S, cl_mem mask,
                                             size_t mask_offset);

#endif /* CLATTN_BLOCK_STACK_H */
