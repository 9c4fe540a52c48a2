/* One layer stack: weights by PyTorch name and the runner (block_stack.h). */
#include "block_stack.h"
#include "ffn_swiglu.h"
#include "runtime/buffers.h"
#include "ops/elementwise.h"
#include "ops/linear.h"
#include "ops/relative_bias.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int clattn__activation_kind(clattn_activation a)
{
    return a == CLATTN_ACTIVATION_GELU        ? CLATTN_ACT_GELU
           : a == CLATTN_ACTIVATION_GELU_TANH ? CLATTN_ACT_GELU_TANH
           : a == CLATTN_ACTIVATION_SILU      ? CLATTN_ACT_SILU
                                               : CLATTN_ACT_RELU;
}

bool clattn__block_layer_is_local(const clattn_block_spec *s, size_t i)
{
    return s->local_window && (s->global_every == 0 || i % s->global_every != 0);
}

/* ---- life cycle ---- */

clattn_status clattn__block_stack_init(clattn_context *ctx, const char *fn,
                                       const clattn_block_spec *spec, clattn_block_stack *s)
{
    memset(s, 0, sizeof(*s));
    s->ctx = ctx;
    s->spec = *spec;
    if (!spec->alibi)
        return CLATTN_OK;
    /* The ALiBi slopes of the heads, on the device once. */
    float *slopes = malloc(spec->nhead * sizeof(float));
    if (!slopes)
        return clattn__fail(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory", fn);
    clattn_status status = clattn_alibi_slopes(spec->nhead, slopes);
    if (status == CLATTN_OK)
        status = clattn__upload(ctx, slopes, spec->nhead, "ALiBi slopes", &s->alibi_slopes);
    free(slopes);
    return status;
}

void clattn__block_stack_release(clattn_block_stack *s)
{
    clattn__block_weights_release(&s->weights, s->spec.num_layers);
    clattn__release_mem(&s->alibi_slopes);
}

/* ---- weights ---- */

void clattn__block_weights_release(clattn_block_weights *w, size_t num_layers)
{
    for (size_t i = 0; w->layers && i < num_layers; i++) {
        clattn_block_layer *l = &w->layers[i];
        clattn_mha_destroy(&l->self_attn), clattn_mha_destroy(&l->cross_attn);
        clattn__ffn_release(&l->ffn);
        clattn__norm_release(&l->norm_self), clattn__norm_release(&l->norm_cross);
        clattn__norm_release(&l->norm_ffn);
        clattn__release_mem(&l->q_norm), clattn__release_mem(&l->k_norm);
    }
    free(w->layers);
    w->layers = NULL;
    clattn__norm_release(&w->final_norm);
    free(w->relative_bias);
    w->relative_bias = NULL;
}

/* A norm of the stack's kind: LayerNorm's "<name>.weight" and ".bias" (without norm_bias a
 * bias of zeros), RMSNorm's "<name>.weight" alone. */
static clattn_status load_norm(const clattn_weight_loader *l, const clattn_block_spec *s,
                               const char *name, clattn_norm *norm)
{
    if (s->norm == CLATTN_NORM_LAYER)
        return clattn__load_norm(l, name, s->d_model, s->norm_bias, norm);
    char w[160];
    snprintf(w, sizeof(w), "%s.weight", name);
    return clattn__load_tensor(l, w, 1, &s->d_model, &norm->weight);
}

/* Layer i's per-head q/k norms (spec.qk_norm): "<self>.q_norm.weight", ".k_norm.weight". */
static clattn_status load_qk_norm(const clattn_weight_loader *l, const clattn_block_spec *s,
                                  const char *self, clattn_block_layer *layer)
{
    char q[96], k[96];
    snprintf(q, sizeof(q), "%s.q_norm.weight", self);
    snprintf(k, sizeof(k), "%s.k_norm.weight", self);
    clattn_status status = clattn__load_tensor(l, q, 1, &s->head_dim_qk, &layer->q_norm);
    return status ? status : clattn__load_tensor(l, k, 1, &s->head_dim_qk, &layer->k_norm);
}

/* Layer i: self-attention (with its q/k norms), cross-attention, feed-forward, then the norms
 * in their names' order (norm1, norm2, norm3). */
static clattn_status load_layer(const clattn_weight_loader *l, const clattn_block_spec *s,
                                size_t i, clattn_block_layer *layer)
{
    char prefix[64], self[64], cross[64], norm[3][64];
    snprintf(prefix, sizeof(prefix), "layers.%zu.", i);
    snprintf(self, sizeof(self), "layers.%zu.self_attn", i);
    snprintf(cross, sizeof(cross), "layers.%zu.multihead_attn", i);
    for (int n = 0; n < 3; n++)
        snprintf(norm[n], sizeof(norm[n]), "layers.%zu.norm%d", i, n + 1);
    size_t d = s->d_model;
    bool bias = s->linear_bias;
    clattn_status status;
    if ((status = clattn__load_attention_biases(l, self, d, s->nhead, s->kv_heads,
                                                s->head_dim_qk, s->head_dim_v,
                                                bias || s->qkv_bias, bias, &layer->self_attn)) ||
        (s->qk_norm && (status = load_qk_norm(l, s, self, layer))) ||
        (s->cross_attention &&
         (status = clattn__load_attention(l, cross, d, s->nhead, s->kv_heads, s->head_dim_qk,
                                          s->head_dim_v, bias, &layer->cross_attn))) ||
        (status = clattn__load_ffn(l, prefix, d, s->d_ff, s->ffn_gated, bias, &layer->ffn)) ||
        (!(i == 0 && s->first_norm_identity) &&
         (status = load_norm(l, s, norm[0], &layer->norm_self))) ||
        (s->cross_attention && (status = load_norm(l, s, norm[1], &layer->norm_cross))) ||
        (status = load_norm(l, s, norm[s->cross_attention ? 2 : 1], &layer->norm_ffn)))
        return status;
    if (!s->packed_only)
        return CLATTN_OK;
    /* On the CPU GEMM the layer's linear weights are held once, packed (not also as loaded);
     * packed layer by layer, so the next layer's uploads reuse the memory released here. */
    if ((status = clattn__mha_keep_packed_only(layer->self_attn)))
        return status;
    return clattn__ffn_keep_packed_only(l->ctx, &layer->ffn);
}

clattn_status clattn__block_weights_load(const clattn_weight_loader *l,
                                         const clattn_block_spec *s, clattn_block_weights *w)
{
    memset(w, 0, sizeof(*w));
    w->layers = calloc(s->num_layers, sizeof(*w->layers));
    if (!w->layers)
        return clattn__fail(l->ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory",
                            l->function);
    clattn_status status = CLATTN_OK;
    for (size_t i = 0; i < s->num_layers && status == CLATTN_OK; i++)
        status = load_layer(l, s, i, &w->layers[i]);
    if (status == CLATTN_OK && s->final_norm)
        status = load_norm(l, s, "norm", &w->final_norm);
    if (status == CLATTN_OK && s->relative_buckets)
        status = clattn__load_host_tensor(l, "relative_attention_bias.weight", 2,
                                          (size_t[]){s->relative_buckets, s->nhead},
                                          &w->relative_bias);
    return status;
}

/* Loads everything through `provide` and replaces the stack's weights when all succeeded. */
static clattn_status load_all(clattn_block_stack *s, const char *fn,
                              clattn_weight_provider provide, void *user,
                              clattn_quant_provider quant, void *quant_user,
                              clattn_owner_weights_fn more, void *owner)
{
    clattn_weight_loader l = {s->ctx, fn, provide, user, quant, quant_user};
    clattn_block_weights w;
    clattn_status status = clattn__block_weights_load(&l, &s->spec, &w);
    if (status == CLATTN_OK && more)
        status = more(owner, &l);
    if (status != CLATTN_OK) {
        clattn__block_weights_release(&w, s->spec.num_layers);
        return status;
    }
    clattn__block_weights_release(&s->weights, s->spec.num_layers);
    s->weights = w;
    s->loaded = true;
    return CLATTN_OK;
}

clattn_status clattn__block_stack_load(clattn_block_stack *s, const char *fn,
                                       clattn_weight_lookup lookup, void *user_data,
                                       clattn_owner_weights_fn more, void *owner)
{
    return clattn__block_stack_load_quant(s, fn, lookup, user_data, NULL, NULL, more, owner);
}

clattn_status clattn__block_stack_load_quant(clattn_block_stack *s, const char *fn,
                                             clattn_weight_lookup lookup, void *user_data,
                                             clattn_quant_provider quant, void *quant_user,
                                             clattn_owner_weights_fn more, void *owner)
{
    CLATTN_CHECK_ARG(s->ctx, fn, lookup, "lookup is NULL");
    clattn_lookup_adapter a = {lookup, user_data};
    return load_all(s, fn, clattn__lookup_weight, &a, quant, quant_user, more, owner);
}

clattn_status clattn__block_stack_init_random(clattn_block_stack *s, const char *fn,
                                              const char *fn_load, uint64_t seed,
                                              clattn_owner_weights_fn more, void *owner)
{
    const clattn_block_spec *c = &s->spec;
    clattn_random_weights r = {seed, c->head_dim_qk * c->nhead == c->d_model &&
                                         c->head_dim_v * c->nhead == c->d_model,
                               NULL, 0, 0, false};
    clattn_status status = load_all(s, fn_load, clattn__random_weight, &r, NULL, NULL, more,
                                    owner);
    if (r.out_of_memory && status != CLATTN_OK)
        status = clattn__fail(s->ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                              "%s: out of host memory for the weights", fn);
    clattn__random_weights_free(&r);
    return status;
}

/* ---- cross memory ---- */

clattn_status clattn__block_stack_set_memory(clattn_block_stack *s, clattn_kv_state *kv,
                                             const char *fn, cl_mem memory, size_t memory_offset,
                                             size_t S, cl_mem mask, size_t mask_offset)
{
    clattn__kv_state_clear(kv);
    clattn_status status = clattn__kv_state_alloc_memory(kv, fn, S, mask, mask_offset);
    for (size_t i = 0; status == CLATTN_OK && i < s->spec.num_layers; i++)
        status = clattn__mha_project_kv(s->weights.layers[i].cross_attn, memory, memory_offset,
                                        kv->batch, S, kv->memory_k[i], kv->memory_v[i]);
    if (status != CLATTN_OK) {
        clattn__kv_state_release_memory(kv);
        return status;
    }
    kv->memory_len = S;
    return CLATTN_OK;
}

/* ---- the runner ---- */

/* One run: the workspace buffers it borrows and the attention calls' templates. */
typedef struct pass {
    clattn_block_stack *s;
    clattn_block_run *run;
    size_t tokens;
    cl_mem x;      /* [T, d_model] the activations */
    cl_mem sub;    /* [T, d_model] a sub-layer's output */
    cl_mem normed; /* [T, d_model] pre-norm's normalised activations */
    cl_mem hidden; /* [rows, d_ff], gated [rows, 2·d_ff]: clattn__ffn_chunk_rows */
    clattn_mha_io self, cross;
    /* With a state: the sequences at one length (past) attended in one call, or row b's
     * sequence slot[b], its past[b] tokens and the position pos[b] of its first new one. */
    bool one_length;
    size_t past;
    size_t *slot, *past_of, *pos;
} pass;

/* The relative position bias [H, N, N], computed once for the run and given to every layer as
 * its additive attention mask (the key padding mask stays separate, combined by attention). */
static clattn_status relative_position_bias(pass *p)
{
    clattn_block_stack *s = p->s;
    const clattn_block_spec *c = &s->spec;
    if (!c->relative_buckets)
        return CLATTN_OK;
    if (p->run->kv)
        return clattn__fail(s->ctx, CLATTN_ERROR_UNSUPPORTED,
                            "%s: a relative position bias over a key/value cache is not "
                            "supported",
                            p->run->function);
    size_t n = p->self.seq_q, heads = c->nhead;
    cl_mem bias;
    clattn_status status = clattn__workspace_slot(s->ctx, CLATTN_SLOT_ATTN_BIAS,
                                                  heads * n * n * sizeof(float), &bias);
    if (status == CLATTN_OK)
        status = clattn__relative_bias_upload(s->ctx, s->weights.relative_bias,
                                              c->relative_buckets, heads,
                                              c->relative_max_distance, n, bias);
    if (status != CLATTN_OK)
        return status;
    /* [H, N, N] broadcast over the batch. */
    p->self.attn_mask = (clattn_mask_view){bias, 0, 0, n * n, n, 1, CLATTN_KMASK_ADDITIVE};
    return CLATTN_OK;
}

/* The spec's modifiers of the self-attention: causal, soft-capping, ALiBi, RoPE (rows from
 * position_offset; a step's past is added by clattn__mha_run_cached); with a state, its cache
 * and memory. The q/k norms are layer i's (attend_self). */
static void templates(pass *p)
{
    const clattn_block_spec *c = &p->s->spec;
    clattn_block_run *run = p->run;
    p->self = run->self;
    p->cross = run->cross;
    if (c->causal)
        p->self.causal = 1;
    p->self.no_key_split = c->query_count_invariant;
    if (c->attn_softcap > 0.0f) {
        p->self.mods.flags |= CLATTN_MOD_SOFTCAP;
        p->self.mods.softcap = c->attn_softcap;
    }
    if (c->alibi) {
        p->self.mods.flags |= CLATTN_MOD_ALIBI;
        p->self.mods.alibi = p->s->alibi_slopes;
        p->self.mods.alibi_offset = 0;
    }
    if (c->rope_theta > 0.0f) {
        p->self.rope = true;
        p->self.rope_q = (clattn_rotary_spec){c->rotary_dim ? c->rotary_dim : c->head_dim_qk,
                                              c->rope_interleaved, (double)c->rope_theta,
                                              run->position_offset,
                                              c->rope_scaled ? c->rope_inv_freq : NULL};
        p->self.rope_key_pos0 = run->position_offset;
    }
    clattn_kv_state *kv = run->kv;
    if (!kv)
        return;
    p->self.seq_k = p->past + p->self.seq_q; /* (one length; else per sequence) */
    p->self.causal = 1;
    p->cross.seq_k = kv->memory_len;
    if (kv->memory_mask)
        p->cross.key_padding_mask = (clattn_mask_view){
            kv->memory_mask, 0, kv->memory_len, 0, 0, 1,
            kv->memory_mask_kind == CLATTN_MASK_BOOL ? CLATTN_KMASK_BOOL : CLATTN_KMASK_ADDITIVE};
}

/* Borrows the workspace slots the run needs (x is the caller's). */
static clattn_status borrow_workspace(pass *p)
{
    clattn_context *ctx = p->s->ctx;
    const clattn_block_spec *c = &p->s->spec;
    size_t row = c->d_model * sizeof(float);
    size_t hidden_row = (c->ffn_gated ? 2 : 1) * c->d_ff * sizeof(float);
    size_t hidden_rows = clattn__ffn_chunk_rows(p->tokens, c->d_ff, c->ffn_gated);
    clattn_status status;
    if ((status = clattn__workspace_slot(ctx, CLATTN_SLOT_LAYER_OUT, p->tokens * row, &p->sub)) ||
        (status = clattn__workspace_slot(ctx, CLATTN_SLOT_FFN_HIDDEN, hidden_rows * hidden_row,
                                         &p->hidden)))
        return status;
    if (c->norm_first)
        return clattn__workspace_slot(ctx, CLATTN_SLOT_LAYER_NORMED, p->tokens * row, &p->normed);
    return CLATTN_OK;
}

/* Layer i's self-attention of input into p->sub: over the whole input, or over the state's
 * cache; a local layer's sliding window and rotary base. *out_bias: the output projection's
 * bias when the GEMM left it (CLBlast), for the residual step to add; else NULL. */
static clattn_status attend_self(pass *p, size_t i, cl_mem input, cl_mem *out_bias)
{
    const clattn_block_spec *c = &p->s->spec;
    clattn_block_layer *l = &p->s->weights.layers[i];
    clattn_mha_io io = p->self;
    io.query = input;
    io.out = p->sub;
    io.q_norm = l->q_norm, io.k_norm = l->k_norm, io.qk_norm_eps = c->norm_eps;
    if (clattn__block_layer_is_local(c, i)) {
        io.mods.flags |= CLATTN_MOD_WINDOW;
        io.mods.window = c->local_window;
        if (io.rope && c->local_rope_theta > 0.0f) {
            io.rope_q.theta = (double)c->local_rope_theta;
            io.rope_q.inv_freq = NULL;
        }
    }
    *out_bias = NULL;
    clattn_kv_state *kv = p->run->kv;
    if (kv && p->one_length)
        return clattn__mha_run_cached(l->self_attn, &io, &kv->self[i], p->past);
    if (kv)
        return clattn__mha_run_cached_seqs(l->self_attn, &io, &kv->self[i], p->slot, p->past_of,
                                           p->pos);
    return clattn__mha_run_out_bias_left(l->self_attn, &io, out_bias);
}

/* Layer i's cross-attention of input into p->sub, over the memory (projected once with a
 * state); *out_bias as attend_self's. */
static clattn_status attend_cross(pass *p, size_t i, cl_mem input, cl_mem *out_bias)
{
    clattn_block_layer *l = &p->s->weights.layers[i];
    clattn_mha_io io = p->cross;
    io.query = input;
    io.out = p->sub;
    *out_bias = NULL;
    clattn_kv_state *kv = p->run->kv;
    if (kv)
        return clattn__mha_run_projected(l->cross_attn, &io, kv->memory_k[i], kv->memory_v[i]);
    return clattn__mha_run_out_bias_left(l->cross_attn, &io, out_bias);
}

/* p->sub = the feed-forward block of input (linear2's bias is added by the caller's residual
 * step, fused into the norm or the add). */
static clattn_status feed_forward(pass *p, clattn_block_layer *l, cl_mem input)
{
    const clattn_block_spec *c = &p->s->spec;
    return clattn__ffn_forward_swiglu(p->s->ctx, &l->ffn, p->tokens, c->d_model, c->d_ff,
                                      c->activation, input, p->hidden, p->sub);
}

/* dst = norm(src), row by row. */
static clattn_status norm_rows(pass *p, const clattn_norm *n, cl_mem src, cl_mem dst,
                               size_t dst_offset)
{
    const clattn_block_spec *c = &p->s->spec;
    if (c->norm == CLATTN_NORM_RMS)
        return clattn__rmsnorm(p->s->ctx, src, 0, dst, dst_offset, p->tokens, c->d_model,
                               n->weight, c->norm_eps);
    return clattn__layernorm(p->s->ctx, src, 0, NULL, 0, NULL, dst, dst_offset, p->tokens,
                             c->d_model, n->weight, n->bias, c->norm_eps);
}

/* The program of `reader`, the weight that reads a norm's rows next, where it is kept quantised
 * (else NULL). */
static clattn_qlinear_program *reader_program(const clattn_gemm_weight *reader)
{
    return reader && reader->quant ? reader->quant->prog : NULL;
}

/* dst = RMSNorm(x + (p->sub + bias)) into another buffer than x; where `reader` (may be NULL)
 * reads dst next through 8-bit activations, the same launch quantises dst's rows for it
 * (ops/qlinear.h's clattn__qlinear_prequantize; the caller forgets them once it has run). */
static clattn_status add_rmsnorm_for(pass *p, const clattn_norm *n, cl_mem bias, cl_mem dst,
                                     size_t dst_offset, const clattn_gemm_weight *reader)
{
    const clattn_block_spec *c = &p->s->spec;
    clattn_context *ctx = p->s->ctx;
    clattn_qlinear_rows rows = {NULL, NULL, NULL, NULL, 0};
    clattn_qlinear_program *prog = reader_program(reader);
    clattn_status status = CLATTN_OK;
    if (prog)
        status = clattn__qlinear_prequantize(ctx, prog, reader->quant->w.type, p->tokens,
                                             c->d_model, dst, dst_offset, c->d_model, &rows);
    if (status == CLATTN_OK && rows.q)
        status = clattn__add_rmsnorm_quantize(ctx, p->x, 0, p->sub, 0, bias, dst, dst_offset,
                                              p->tokens, c->d_model, n->weight, c->norm_eps,
                                              rows.block, rows.q, rows.d, rows.s, rows.t);
    else if (status == CLATTN_OK)
        status = clattn__add_rmsnorm(ctx, p->x, 0, p->sub, 0, bias, dst, dst_offset, p->tokens,
                                     c->d_model, n->weight, c->norm_eps);
    if (status != CLATTN_OK)
        clattn__qlinear_prequantized_forget(prog);
    return status;
}

/* dst = norm(x + (p->sub + bias)), row by row: LayerNorm with the add fused; RMSNorm too, into
 * another buffer than x (x keeps the sum, which post-norm overwrites or no longer reads), its
 * rows quantised for `reader` where it takes 8-bit activations (add_rmsnorm_for). */
static clattn_status add_norm_into(pass *p, const clattn_norm *n, cl_mem bias, cl_mem dst,
                                   size_t dst_offset, const clattn_gemm_weight *reader)
{
    const clattn_block_spec *c = &p->s->spec;
    if (c->norm == CLATTN_NORM_RMS && dst != p->x)
        return add_rmsnorm_for(p, n, bias, dst, dst_offset, reader);
    if (c->norm == CLATTN_NORM_RMS) {
        clattn_status status = clattn__add(p->s->ctx, p->x, 0, p->sub, 0, bias, p->tokens,
                                           c->d_model);
        return status ? status : norm_rows(p, n, p->x, dst, dst_offset);
    }
    return clattn__layernorm(p->s->ctx, p->x, 0, p->sub, 0, bias, dst, dst_offset, p->tokens,
                             c->d_model, n->weight, n->bias, c->norm_eps);
}

/* Post-norm: x = N1(x + SA(x)); (x = N2(x + CA(x)));  x = N3(x + FF(x)), each residual add fused
 * into its norm (and linear2's bias into the last), the last writing into dst. */
static clattn_status layer_post_norm(pass *p, size_t i, cl_mem dst, size_t dst_offset)
{
    clattn_block_layer *l = &p->s->weights.layers[i];
    cl_mem out_bias;
    clattn_status status;
    if ((status = attend_self(p, i, p->x, &out_bias)) ||
        (status = add_norm_into(p, &l->norm_self, out_bias, p->x, 0, NULL)))
        return status;
    if (l->cross_attn && ((status = attend_cross(p, i, p->x, &out_bias)) ||
                          (status = add_norm_into(p, &l->norm_cross, out_bias, p->x, 0, NULL))))
        return status;
    if ((status = feed_forward(p, l, p->x)))
        return status;
    return add_norm_into(p, &l->norm_ffn, l->ffn.b2, dst, dst_offset, NULL);
}

/* x += p->sub + bias; then dst = norm(x). LayerNorm: one launch (clattn__add_layernorm: the
 * bytes of the add and the norm apart). RMSNorm: add_norm_into, for `reader` (may be NULL). */
static clattn_status add_then_norm(pass *p, cl_mem bias, const clattn_norm *n, cl_mem dst,
                                   size_t dst_offset, const clattn_gemm_weight *reader)
{
    const clattn_block_spec *c = &p->s->spec;
    if (c->norm == CLATTN_NORM_RMS)
        return add_norm_into(p, n, bias, dst, dst_offset, reader);
    return clattn__add_layernorm(p->s->ctx, p->x, 0, p->sub, 0, bias, dst, dst_offset, p->tokens,
                                 c->d_model, n->weight, n->bias, c->norm_eps);
}

/* The norm that follows a pre-norm layer's last residual add: the next layer's first norm into
 * p->normed, the final norm into the output, or none (norm NULL). */
typedef struct norm_after {
    const clattn_norm *norm;
    cl_mem dst;
    size_t dst_offset;
    const clattn_gemm_weight *reader; /* the weight that reads dst next (NULL: none known) */
} norm_after;

/* Pre-norm: x = x + SA(N1(x)); (x = x + CA(N2(x)));  x = x + FF(N3(x)). Every residual add is one
 * launch with the norm after it: the next sub-layer's, then `after`. On entry p->normed holds
 * N1(x) when the layer has a first norm (the previous layer's last launch, or the run's first
 * one); without it (first_norm_identity's layer 0) the attention reads x itself. */
static clattn_status layer_pre_norm(pass *p, size_t i, norm_after after)
{
    clattn_block_layer *l = &p->s->weights.layers[i];
    const clattn_block_spec *c = &p->s->spec;
    bool norm1 = l->norm_self.weight != NULL;
    cl_mem out_bias;
    clattn_status status;
    /* The rows a norm quantised for the projection that reads them are forgotten once it has
     * run: the buffer is written again after. */
    status = attend_self(p, i, norm1 ? p->normed : p->x, &out_bias);
    clattn__qlinear_prequantized_forget(reader_program(clattn__mha_in_weight(l->self_attn)));
    if (status)
        return status;
    if (l->cross_attn &&
        ((status = add_then_norm(p, out_bias, &l->norm_cross, p->normed, 0, NULL)) ||
         (status = attend_cross(p, i, p->normed, &out_bias))))
        return status;
    if ((status = add_then_norm(p, out_bias, &l->norm_ffn, p->normed, 0, &l->ffn.lin1)) == 0)
        status = feed_forward(p, l, p->normed);
    clattn__qlinear_prequantized_forget(reader_program(&l->ffn.lin1));
    if (status)
        return status;
    if (!after.norm)
        return clattn__add(p->s->ctx, p->x, 0, p->sub, 0, l->ffn.b2, p->tokens, c->d_model);
    return add_then_norm(p, l->ffn.b2, after.norm, after.dst, after.dst_offset, after.reader);
}

/* Runs the pre-norm layers on p->x; the final norm, when the stack has one, writes into the
 * output (*done then). */
static clattn_status run_pre_norm(pass *p, bool *done)
{
    clattn_block_stack *s = p->s;
    const clattn_block_spec *c = &s->spec;
    size_t L = c->num_layers;
    const clattn_norm *first = &s->weights.layers[0].norm_self;
    clattn_status status = CLATTN_OK;
    if (first->weight)
        status = norm_rows(p, first, p->x, p->normed, 0);
    for (size_t i = 0; i < L && status == CLATTN_OK; i++) {
        norm_after after = {NULL, p->normed, 0, NULL};
        if (i + 1 < L && s->weights.layers[i + 1].norm_self.weight) {
            after.norm = &s->weights.layers[i + 1].norm_self;
            after.reader = clattn__mha_in_weight(s->weights.layers[i + 1].self_attn);
        } else if (i + 1 == L && c->final_norm) {
            after = (norm_after){&s->weights.final_norm, p->run->out, p->run->out_offset, NULL};
        }
        status = layer_pre_norm(p, i, after);
    }
    *done = c->final_norm;
    return status;
}

/* Runs the post-norm layers on p->x, the last one's last norm writing into the output (*done
 * then), unless a final norm follows. */
static clattn_status run_post_norm(pass *p, bool *done)
{
    const clattn_block_spec *c = &p->s->spec;
    clattn_status status = CLATTN_OK;
    for (size_t i = 0; i < c->num_layers && status == CLATTN_OK; i++) {
        bool last = i + 1 == c->num_layers && !c->final_norm;
        status = last ? layer_post_norm(p, i, p->run->out, p->run->out_offset)
                      : layer_post_norm(p, i, p->x, 0);
    }
    *done = !c->final_norm;
    return status;
}

/* A run with a state: which sequences it steps, their lengths and positions, checked. */
static clattn_status plan_sequences(pass *p)
{
    clattn_block_run *run = p->run;
    clattn_kv_state *kv = run->kv;
    clattn_context *ctx = p->s->ctx;
    const char *fn = run->function;
    size_t B = run->self.batch, n = run->self.seq_q;
    CLATTN_CHECK_ARG(ctx, fn, run->slots || B == kv->batch,
                     "%zu sequences run, but the key/value state holds %zu", B, kv->batch);
    CLATTN_CHECK_ARG(ctx, fn, !run->slots || !p->s->spec.cross_attention,
                     "a cross-attending stack steps every sequence of its state (no slots)");
    p->one_length = !run->slots && !run->positions &&
                    clattn__kv_state_common_length(kv, &p->past);
    if (p->one_length) {
        if (n > kv->capacity - p->past)
            return clattn__fail(ctx, CLATTN_ERROR_OUT_OF_RANGE,
                                "%s: %zu new tokens do not fit: the cache holds %zu of its %zu",
                                fn, n, p->past, kv->capacity);
        return CLATTN_OK;
    }
    p->slot = calloc(3 * B, sizeof(size_t));
    if (!p->slot)
        return clattn__fail(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory", fn);
    p->past_of = p->slot + B, p->pos = p->slot + 2 * B;
    for (size_t b = 0; b < B; b++) {
        size_t q = run->slots ? run->slots[b] : b;
        CLATTN_CHECK_ARG(ctx, fn, !run->slots || (q < kv->batch && kv->in_use[q]),
                         "slots[%zu] = %zu is not a sequence in use of the key/value state", b,
                         q);
        for (size_t e = 0; e < b; e++)
            CLATTN_CHECK_ARG(ctx, fn, p->slot[e] != q, "sequence %zu runs twice", q);
        if (n > kv->capacity - kv->lengths[q])
            return clattn__fail(ctx, CLATTN_ERROR_OUT_OF_RANGE,
                                "%s: %zu new tokens do not fit: sequence %zu holds %zu of its %zu",
                                fn, n, q, kv->lengths[q], kv->capacity);
        p->slot[b] = q;
        p->past_of[b] = kv->lengths[q];
        p->pos[b] = run->positions ? run->positions[b] : run->position_offset + kv->lengths[q];
    }
    return CLATTN_OK;
}

/* The state's lengths after a successful step. */
static void advance(pass *p)
{
    clattn_kv_state *kv = p->run->kv;
    size_t n = p->run->self.seq_q;
    if (p->one_length) {
        for (size_t b = 0; b < kv->batch; b++)
            kv->lengths[b] += n;
        return;
    }
    for (size_t b = 0; b < p->run->self.batch; b++)
        kv->lengths[p->slot[b]] += n;
}

static clattn_status run_layers(pass *p)
{
    bool done = false;
    clattn_status status;
    if ((status = borrow_workspace(p)) || (status = relative_position_bias(p)) ||
        (status = p->s->spec.norm_first ? run_pre_norm(p, &done) : run_post_norm(p, &done)))
        return status;
    if (done)
        return CLATTN_OK;
    clattn_block_stack *s = p->s;
    clattn_block_run *run = p->run;
    if (s->spec.final_norm)
        return norm_rows(p, &s->weights.final_norm, p->x, run->out, run->out_offset);
    return clattn__copy_bytes(s->ctx, p->x, 0, run->out, run->out_offset * sizeof(float),
                              p->tokens * s->spec.d_model * sizeof(float),
                              "%s: copying the result", run->function);
}

clattn_status clattn__block_stack_run(clattn_block_stack *s, clattn_block_run *run)
{
    pass p;
    memset(&p, 0, sizeof(p));
    p.s = s;
    p.run = run;
    p.tokens = run->tokens;
    p.x = run->x;
    clattn_status status = run->kv ? plan_sequences(&p) : CLATTN_OK;
    if (status == CLATTN_OK) {
        templates(&p);
        status = run_layers(&p);
    }
    if (status == CLATTN_OK && run->kv)
        advance(&p);
    free(p.slot);
    return status;
}
