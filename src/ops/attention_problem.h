/*
 * The attention engine shared by clattn_sdpa and the attention layer: one description of the
 * problem (where Q, K, V, the output and the masks live, by strides) and its implementations.
 *
 *   attention_views.c   checks the tensors of public calls and maps them onto views
 *   attention_args.c    sets the kernel arguments every attention kernel shares
 *   attention.c         the entry: checks the kernels' limits, picks the fused or unfused path
 *   attention_unfused.c scores → softmax → weights·V over chunks of (batch, head) pairs
 *   fused_attention.c   the fused kernel (programs from fused_cache.c)
 */
#ifndef CLATTN_ATTENTION_INTERNAL_H
#define CLATTN_ATTENTION_INTERNAL_H

#include <stdbool.h>

#include "clattn/attention.h"
#include "base/constants.h"
#include "base/errors.h"
#include "runtime/launch.h"

/* A [B, H, N, d] operand anywhere in a buffer: element (b, h, n, c) is at
 * mem[offset + b·sb + h·sh + n·sn + c] (the last dimension is contiguous). */
typedef struct clattn_head_view {
    cl_mem mem;
    size_t offset, sb, sh, sn;
} clattn_head_view;

/* A mask broadcast onto [B, H, Nq, Nk] (attention mask) or [B, Nk] (key padding, using sb and
 * sj only): element at mem[offset + b·sb + h·sh + i·si + j·sj]; kind CLATTN_KMASK_*. */
typedef struct clattn_mask_view {
    cl_mem mem;
    size_t offset, sb, sh, si, sj;
    int kind;
} clattn_mask_view;

/* The score modifiers (cl/common.cl clattn_modified_score): flags CLATTN_MOD_* and their
 * operands. Query positions count causal_shift earlier keys, as the causal mask does. */
typedef struct clattn_score_mods {
    int flags;
    cl_mem alibi;        /* ALiBi slopes [H] from alibi_offset */
    size_t alibi_offset;
    cl_mem rel;          /* relative-position table [rel_buckets, H] from rel_offset */
    size_t rel_offset, rel_buckets;
    float rel_log_ratio; /* log(max_distance / (rel_buckets / 4)) */
    size_t window;       /* even: query i sees keys with |i - j| <= window / 2 */
    float softcap;       /* c > 0 */
} clattn_score_mods;

typedef enum clattn_weights_layout {
    CLATTN_WEIGHTS_NONE = 0,
    CLATTN_WEIGHTS_PER_HEAD = 1, /* [B, H, Nq, Nk] contiguous */
    CLATTN_WEIGHTS_AVERAGED = 2, /* [B, Nq, Nk] contiguous, mean over heads */
} clattn_weights_layout;

typedef struct clattn_attention_problem {
    size_t batch, heads, seq_q, seq_k, dk, dv;
    size_t kv_heads; /* key/value heads (grouped-query attention); 0 means `heads` */
    float scale;
    int causal;
    size_t causal_shift; /* causal: query i sees keys j <= i + causal_shift (a cache's past) */
    clattn_head_view q, k, v;
    bool kv_half;         /* k and v hold IEEE half floats (a half-precision cache; views count
                           * elements): the fused path only */
    clattn_head_view out; /* [B, H, Nq, dv] */
    clattn_mask_view attn_mask, key_padding_mask;
    clattn_score_mods mods;
    clattn_weights_layout weights_layout;
    cl_mem weights;
    size_t weights_offset;
    clattn_attention_path path;
    /* A row's bytes must not depend on how many queries run with it (a decoder-only model's
     * prompt chunks and decode steps give a token the same logits): no split-key attention,
     * whose merge of partial softmax states sums in another order than one pass over the keys. */
    bool no_key_split;
} clattn_attention_problem;

/* Query heads per key/value head (grouped-query attention; 1 without). */
static inline size_t clattn__kv_group(const clattn_attention_problem *p)
{
    return p->kv_heads && p->kv_heads < p->heads ? p->heads / p->kv_heads : 1;
}

/* One chunk of (batch, head) pairs bh0 .. bh0 + pairs - 1 and its score buffer
 * [pairs, nq, nk] (contiguous from scores_offset), as the unfused kernels take them. */
typedef struct clattn_score_chunk {
    cl_uint heads, pairs, nq, nk, bh0;
    cl_mem scores;
    cl_ulong scores_offset;
} clattn_score_chunk;

/* ---- kernel arguments (attention_args.c) ---- */

/* The five arguments of a head view: mem, offset, sb, sh, sn (cl/common.cl CLATTN_VIEW_PARAMS). */
void clattn__head_view_args(clattn_kernel_args *args, const clattn_head_view *view);
/* The 14 mask arguments every attention kernel takes (cl/common.cl CLATTN_MASK_PARAMS). */
void clattn__mask_args(clattn_kernel_args *args, const clattn_attention_problem *p);

/* The 8 modifier arguments (cl/common.cl CLATTN_MOD_PARAMS), after every other argument of the
 * fused kernels when p->mods.flags is set. */
void clattn__mod_args(clattn_kernel_args *args, const clattn_attention_problem *p);

/* ---- the entry (attention.c) ---- */

/* Runs attention as described; the caller has validated shapes. */
clattn_status clattn__attention(clattn_context *ctx, const clattn_attention_problem *problem);

/* ---- the two paths ---- */

/* Unfused (attention_unfused.c): chunks of pairs under the workspace limit. */
clattn_status clattn__attention_unfused(clattn_context *ctx, const clattn_attention_problem *p);
/* Fused (fused_attention.c): one kernel, O(N) memory, no attention weights; split-key
 * (flash-decoding) when few queries face many keys. */
clattn_status clattn__attention_fused(clattn_context *ctx, const clattn_attention_problem *p);
/* How many parts the fused path splits the keys into (1: none) under the context's tuning
 * (split_keys), with queries_per_item queries per work-item (exposed for the kernel tests). */
size_t clattn__attention_key_splits(const clattn_context *ctx, const clattn_attention_problem *p,
                                    size_t queries_per_item);

/* The unfused path's kernels, one launch each (exposed for the kernel tests). */
clattn_status clattn__launch_scores(clattn_context *ctx, const clattn_attention_problem *p,
                                    const clattn_score_chunk *c);
/* Applies p's modifiers, then its masks, to a chunk of scores computed without masks. */
clattn_status clattn__launch_score_mods(clattn_context *ctx, const clattn_attention_problem *p,
                                        const clattn_score_chunk *c);
clattn_status clattn__launch_softmax(clattn_context *ctx, const clattn_score_chunk *c);
clattn_status clattn__launch_head_merge(clattn_context *ctx, const clattn_attention_problem *p,
                                        const clattn_score_chunk *c);
/* Adds the chunk's head-average into p->weights ([B, Nq, Nk], zeroed before the first chunk). */
clattn_status clattn__launch_average_heads(clattn_context *ctx,
                                           const clattn_attention_problem *p,
                                           const clattn_score_chunk *c);

/* ---- checking public tensors (attention_views.c) ---- */

/* How a 3-D attention mask's first dimension is read. */
typedef enum clattn_mask_3d {
    CLATTN_MASK_3D_HEADS = 0,         /* [H, Nq, Nk], right-aligned against [B, H, Nq, Nk]
                                       * (scaled_dot_product_attention's broadcasting) */
    CLATTN_MASK_3D_BATCH_X_HEADS = 1, /* [B·H, Nq, Nk] (nn.MultiheadAttention) */
} clattn_mask_3d;

/* Checks an attention mask against [B, H, Nq, Nk] and fills *view (kind NONE for mask NULL). */
clattn_status clattn__attn_mask_view(clattn_context *ctx, const char *function,
                                     const clattn_tensor *mask, clattn_mask_kind kind,
                                     clattn_mask_3d layout_3d, size_t batch, size_t heads,
                                     size_t seq_q, size_t seq_k, clattn_mask_view *view);
/* Checks a key-padding mask against [B, Nk] and fills *view. */
clattn_status clattn__key_padding_view(clattn_context *ctx, const char *function,
                                       const clattn_tensor *mask, clattn_mask_kind kind,
                                       size_t batch, size_t seq_k, clattn_mask_view *view);

/* The score modifiers as the public calls give them, checked against `heads` query heads and
 * turned into *mods (flags 0 when none is set). */
typedef struct clattn_mods_request {
    const clattn_tensor *alibi_slopes;  /* [H] or NULL */
    const clattn_tensor *relative_bias; /* [num_buckets, H] or NULL */
    size_t relative_max_distance;       /* 0: 128 */
    size_t window;                      /* 0: none */
    float softcap;                      /* 0: none */
} clattn_mods_request;
clattn_status clattn__score_mods_of(clattn_context *ctx, const char *function,
                                    const clattn_mods_request *request, size_t heads,
                                    clattn_score_mods *mods);

/* Fills a head view from a 4-D [B, H, N, d] tensor whose last dimension is contiguous. */
clattn_status clattn__head_view_of(clattn_context *ctx, const char *function, const char *name,
                                   const clattn_tensor *t, clattn_head_view *view);
/* Checks an optional attention-weights output tensor: same context, exactly `want`, contiguous,
 * and a path that can produce weights. */
clattn_status clattn__weights_output(clattn_context *ctx, const char *function,
                                     clattn_tensor *weights, int ndim, const size_t *want,
                                     const char *meaning, clattn_attention_path path);

#endif /* CLATTN_ATTENTION_INTERNAL_H */
