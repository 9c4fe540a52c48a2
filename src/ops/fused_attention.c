/* The fused attention kernel's launch: packing long strided keys and values, then one kernel
 * (the micro-tiled one reads few queries' keys in place, e.g. a decode step's cache);
 * or, for few queries against many keys, split-key attention (flash-decoding): the keys split
 * across work-items, then a kernel that merges their partial softmax states. */
#include "attention_problem.h"
#include "runtime/buffers.h"
#include "runtime/context_internal.h"
#include "runtime/fused_cache.h"

/* Keys and values shorter than this are read in place: they stay in cache anyway. */
#define PACK_MIN_KEYS 256

/* Split-key attention gives each work-item at least this many keys (automatic choice): its
 * partial state (d_v + 2 floats) then costs under 1 % of the keys and values it reads. */
#define SPLIT_MIN_KEYS 64

/* Work-items (CPUs: work-groups of fused_wg = 1) that fill the device: several per compute
 * unit, for balance (a one-query step of 8 heads on 2 cores: 16 work-items, two splits). */
static size_t device_fill(const clattn_context *ctx)
{
    size_t units = ctx->info.compute_units ? ctx->info.compute_units : 1;
    return 8 * units * ctx->tuning.fused_wg;
}

/* Batch invariance (clattn/context.h): how a row's keys are summed must not depend on the batch
 * it is in or on its padding. The automatic choice therefore splits only single queries (a
 * decoding step of one token, alone or inside a beam batch; never an encoder's self-attention,
 * whose query count is its padded length) and derives the split count from the key length and
 * the device alone: enough splits for one head's work-items to fill the device, at least
 * SPLIT_MIN_KEYS keys each. */
size_t clattn__attention_key_splits(const clattn_context *ctx, const clattn_attention_problem *p,
                                    size_t queries_per_item)
{
    int mode = ctx->tuning.split_keys;
    if (mode == CLATTN_SPLIT_KEYS_NEVER || p->seq_k < 2 || p->no_key_split)
        return 1;
    size_t splits;
    if (mode == CLATTN_SPLIT_KEYS_ALWAYS) { /* at least 2, uneven when it can be */
        size_t items = p->batch * p->heads * ((p->seq_q + queries_per_item - 1) / queries_per_item);
        size_t wanted = (device_fill(ctx) + items - 1) / items, most = p->seq_k / SPLIT_MIN_KEYS;
        splits = wanted < most ? wanted : most;
        if (splits < 4)
            splits = p->seq_k < 4 ? p->seq_k : 4;
    } else {
        if (p->seq_q > 1)
            return 1;
        size_t wanted = device_fill(ctx), most = p->seq_k / SPLIT_MIN_KEYS;
        splits = wanted < most ? wanted : most;
    }
    if (splits < 2)
        return 1;
    size_t chunk = (p->seq_k + splits - 1) / splits;
    return (p->seq_k + chunk - 1) / chunk; /* no empty split at the end */
}

/* Copies the [B, H, Nk, d] view *view into mem at `offset` (floats) as contiguous per-head rows
 * and points *view there. */
static clattn_status pack(clattn_context *ctx, const clattn_attention_problem *p, size_t d,
                          cl_mem mem, size_t offset, clattn_head_view *view)
{
    cl_ulong out_off = offset;
    size_t kv_heads = p->heads / clattn__kv_group(p); /* keys and values have their own heads */
    cl_uint heads = (cl_uint)kv_heads, pairs = (cl_uint)(p->batch * kv_heads);
    cl_uint n = (cl_uint)p->seq_k, width = (cl_uint)d;
    clattn_kernel_args args = clattn__kernel_args(ctx, CLATTN_KERNEL_PACK_HEADS);
    clattn__head_view_args(&args, view);
    CLATTN_ARG(&args, mem);
    CLATTN_ARG(&args, out_off);
    CLATTN_ARG(&args, heads);
    CLATTN_ARG(&args, pairs);
    CLATTN_ARG(&args, n);
    CLATTN_ARG(&args, width);
    size_t global[3] = {d, p->seq_k, pairs};
    *view = (clattn_head_view){mem, offset, kv_heads * p->seq_k * d, p->seq_k * d, d};
    return clattn__launch(ctx, &args, "pack_heads", 3, global, NULL, CLATTN_OP_OTHER, 0);
}

/* The arguments clattn_fused_attention and clattn_fused_attention_local share: views, sizes,
 * scale and masks. */
static void common_args(clattn_kernel_args *args, const clattn_attention_problem *p)
{
    cl_uint heads = (cl_uint)p->heads, pairs = (cl_uint)(p->batch * p->heads);
    cl_uint group = (cl_uint)clattn__kv_group(p);
    cl_uint nq = (cl_uint)p->seq_q, nk = (cl_uint)p->seq_k;
    float scale = p->scale;
    clattn__head_view_args(args, &p->q);
    clattn__head_view_args(args, &p->k);
    clattn__head_view_args(args, &p->v);
    clattn__head_view_args(args, &p->out);
    CLATTN_ARG(args, heads);
    CLATTN_ARG(args, group);
    CLATTN_ARG(args, pairs);
    CLATTN_ARG(args, nq);
    CLATTN_ARG(args, nk);
    CLATTN_ARG(args, scale);
    clattn__mask_args(args, p);
}

/* Counts the multiply-adds of both products, the weights·V ones under their own operation (the
 * same launches did them). */
static clattn_status count_and_launch(clattn_context *ctx, const clattn_attention_problem *p,
                                      const clattn_kernel_args *args, cl_uint dims,
                                      const size_t *global, const size_t *local)
{
    uint64_t pairs_queries = (uint64_t)p->batch * p->heads * p->seq_q;
    clattn_status status = clattn__launch(ctx, args, "fused_attention", dims, global, local,
                                          CLATTN_OP_SCORES, pairs_queries * p->seq_k * p->dk);
    if (status == CLATTN_OK)
        clattn__count_macs(ctx, CLATTN_OP_WEIGHTS_V, pairs_queries * p->seq_k * p->dv);
    return status;
}

/* Split-key attention: pass 1 over (query groups, pairs, splits) stores each split's partial
 * state in the workspace ([pairs, Nq, splits] pairs (m, l), then [pairs, Nq, splits, d_v]
 * accumulators); pass 2 merges them into the output. */
static clattn_status split_keys(clattn_context *ctx, const clattn_fused_program *prog,
                                const clattn_attention_problem *p, size_t splits)
{
    size_t pairs = p->batch * p->heads, rows = pairs * p->seq_q * splits;
    cl_mem partial;
    clattn_status status = clattn__workspace_slot(ctx, CLATTN_SLOT_SPLIT_PARTIALS,
                                                  rows * (2 + p->dv) * sizeof(float), &partial);
    if (status != CLATTN_OK)
        return status;
    cl_uint chunk = (cl_uint)((p->seq_k + splits - 1) / splits);
    cl_ulong acc_off = 2 * rows;
    clattn_kernel_args pass1 = {prog->unstaged, 0, CL_SUCCESS};
    common_args(&pass1, p);
    CLATTN_ARG(&pass1, chunk);
    CLATTN_ARG(&pass1, partial);
    CLATTN_ARG(&pass1, acc_off);
    if (p->mods.flags)
        clattn__mod_args(&pass1, p);
    size_t global1[3] = {(p->seq_q + prog->qpw - 1) / prog->qpw, pairs, splits};
    size_t local1[3] = {prog->wg, 1, 1}; /* the unstaged kernel's own work-group shape */
    if ((status = count_and_launch(ctx, p, &pass1, 3, global1, prog->local ? NULL : local1)))
        return status;
    cl_uint heads = (cl_uint)p->heads, n_pairs = (cl_uint)pairs, nq = (cl_uint)p->seq_q;
    cl_uint n_splits = (cl_uint)splits;
    clattn_kernel_args pass2 = {prog->combine, 0, CL_SUCCESS};
    CLATTN_ARG(&pass2, partial);
    CLATTN_ARG(&pass2, acc_off);
    clattn__head_view_args(&pass2, &p->out);
    CLATTN_ARG(&pass2, heads);
    CLATTN_ARG(&pass2, n_pairs);
    CLATTN_ARG(&pass2, nq);
    CLATTN_ARG(&pass2, n_splits);
    size_t global2[2] = {p->seq_q, pairs};
    return clattn__launch(ctx, &pass2, "split_combine", 2, global2, NULL, CLATTN_OP_OTHER, 0);
}

/* The micro-tiled variant: keys packed transposed in tiles of 16 (and values made contiguous
 * when strided) into the workspace, then one kernel over (ceil(Nq / 16), pairs). With one
 * block of queries per pair (a decode step against its cache, a short chunk) packing would cost
 * as much as the attention: the keys are read where they are, with the same bytes per row. */
static clattn_status tiled(clattn_context *ctx, const clattn_fused_program *prog,
                           const clattn_attention_problem *given)
{
    if (given->seq_q <= CLATTN_TILED_QUERIES) {
        /* Without masks or modifiers, one query per work-item with the same bytes per row
         * (clattn_fused_attention_query: its vectors' lanes hold keys or value columns rather
         * than the block's 16 queries, of which a decode step fills one). */
        bool masked = given->attn_mask.kind || given->key_padding_mask.kind;
        if (prog->query && !masked && !given->mods.flags) {
            clattn_kernel_args args = {prog->query, 0, CL_SUCCESS};
            common_args(&args, given);
            size_t global[2] = {given->seq_q, given->batch * given->heads}, local[2] = {1, 1};
            return count_and_launch(ctx, given, &args, 2, global, local);
        }
        clattn_kernel_args args = {prog->tiled_rows, 0, CL_SUCCESS};
        common_args(&args, given);
        if (given->mods.flags)
            clattn__mod_args(&args, given);
        size_t global[2] = {1, given->batch * given->heads};
        size_t local[2] = {prog->wg, 1};
        return count_and_launch(ctx, given, &args, 2, global, local);
    }
    clattn_attention_problem packed = *given;
    const clattn_attention_problem *p = &packed;
    size_t kv_heads = given->heads / clattn__kv_group(given), kv_pairs = given->batch * kv_heads;
    size_t tiles = (given->seq_k + CLATTN_KEY_TILE - 1) / CLATTN_KEY_TILE;
    size_t k_floats = kv_pairs * tiles * CLATTN_KEY_TILE * given->dk;
    bool pack_v = given->v.sn != given->dv && given->seq_k >= PACK_MIN_KEYS;
    size_t v_floats = pack_v ? kv_pairs * given->seq_k * given->dv : 0;
    cl_mem scratch;
    clattn_status status = clattn__workspace_slot(ctx, CLATTN_SLOT_PACKED_KV,
                                                  (k_floats + v_floats) * sizeof(float), &scratch);
    if (status != CLATTN_OK)
        return status;
    cl_ulong out_off = 0;
    cl_uint heads = (cl_uint)kv_heads, n_pairs = (cl_uint)kv_pairs, n = (cl_uint)given->seq_k;
    cl_uint width = (cl_uint)given->dk;
    bool blocks = given->dk % 16 == 0; /* clattn_pack_keys_tiled16: 16 x 16 blocks */
    clattn_kernel_args pack_k = clattn__kernel_args(
        ctx, blocks ? CLATTN_KERNEL_PACK_KEYS_TILED16 : CLATTN_KERNEL_PACK_KEYS_TILED);
    clattn__head_view_args(&pack_k, &given->k);
    CLATTN_ARG(&pack_k, scratch);
    CLATTN_ARG(&pack_k, out_off);
    CLATTN_ARG(&pack_k, heads);
    CLATTN_ARG(&pack_k, n_pairs);
    CLATTN_ARG(&pack_k, n);
    CLATTN_ARG(&pack_k, width);
    size_t global_k[3] = {blocks ? given->dk / 16 : given->dk,
                          blocks ? tiles : tiles * CLATTN_KEY_TILE, kv_pairs};
    if ((status = clattn__launch(ctx, &pack_k, "pack_keys_tiled", 3, global_k, NULL,
                                 CLATTN_OP_OTHER, 0)) ||
        (pack_v && (status = pack(ctx, given, given->dv, scratch, k_floats, &packed.v))))
        return status;
    size_t tile_floats = given->dk * CLATTN_KEY_TILE, head_floats = tiles * tile_floats;
    packed.k = (clattn_head_view){scratch, 0, kv_heads * head_floats, head_floats, tile_floats};
    clattn_kernel_args args = {prog->tiled, 0, CL_SUCCESS};
    common_args(&args, p);
    if (p->mods.flags)
        clattn__mod_args(&args, p);
    size_t global[2] = {(p->seq_q + CLATTN_TILED_QUERIES - 1) / CLATTN_TILED_QUERIES,
                        p->batch * p->heads};
    size_t local[2] = {prog->wg, 1};
    return count_and_launch(ctx, p, &args, 2, global, local);
}

clattn_status clattn__attention_fused(clattn_context *ctx, const clattn_attention_problem *given)
{
    const clattn_fused_program *prog;
    bool few_queries = given->seq_q < ctx->tuning.fused_qpw;
    clattn_status status = clattn__fused_program(ctx, given->dk, given->dv, given->kv_half,
                                                 given->mods.flags, few_queries, &prog);
    if (status != CLATTN_OK)
        return status;
    size_t splits = clattn__attention_key_splits(ctx, given, prog->qpw);
    if (splits > 1) /* each work-item reads its keys once: no packing */
        return split_keys(ctx, prog, given, splits);
    /* The micro-tiled variant for every query count, so that a row takes the same kernel
     * whatever its padded length (batch invariance). */
    if (prog->tiled && !ctx->tuning.fused_untiled)
        return tiled(ctx, prog, given);
    /* Without staging every work-item streams all keys and values of its head: rows strided by a
     * packed projection's width (a page per row at long sequences) are first made contiguous,
     * unless one work-item holds all the queries (then each key row is read once anyway). */
    clattn_attention_problem packed = *given;
    const clattn_attention_problem *p = &packed;
    bool strided = given->k.sn != given->dk || given->v.sn != given->dv;
    if (strided && !prog->local && !given->kv_half && given->seq_k >= PACK_MIN_KEYS &&
        given->seq_q > prog->qpw) {
        size_t kv_heads = given->heads / clattn__kv_group(given);
        size_t k_floats = given->batch * kv_heads * given->seq_k * given->dk;
        size_t v_floats = given->batch * kv_heads * given->seq_k * given->dv;
        cl_mem scratch;
        if ((status = clattn__workspace_slot(ctx, CLATTN_SLOT_PACKED_KV,
                                             (k_floats + v_floats) * sizeof(float), &scratch)) ||
            (status = pack(ctx, given, given->dk, scratch, 0, &packed.k)) ||
            (status = pack(ctx, given, given->dv, scratch, k_floats, &packed.v)))
            return status;
    }
    clattn_kernel_args args = {prog->kernel, 0, CL_SUCCESS};
    common_args(&args, p);
    if (!prog->local) { /* one split: the partial-state arguments are unused */
        cl_uint chunk = (cl_uint)p->seq_k;
        cl_ulong acc_off = 0;
        CLATTN_ARG(&args, chunk);
        clattn__arg_mem(&args, NULL);
        CLATTN_ARG(&args, acc_off);
    }
    if (p->mods.flags) /* after every other argument */
        clattn__mod_args(&args, p);
    size_t global[2] = {(p->seq_q + prog->qpw - 1) / prog->qpw, p->batch * p->heads};
    size_t local[2] = {prog->wg, 1};
    return count_and_launch(ctx, p, &args, 2, global, local);
}
