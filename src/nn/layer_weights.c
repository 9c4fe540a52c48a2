/* Loading a layer's weights by PyTorch name, seeded random weights, the feed-forward block. */
#include "layer_weights.h"
#include "mha_internal.h"
#include "runtime/buffers.h"
#include "base/constants.h"
#include "ops/elementwise.h"
#include "ops/linear.h"
#include "runtime/shape.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The tensor `name` with exactly the shape `want`, or a named error. */
static clattn_status fetch(const clattn_weight_loader *l, const char *name, int ndim,
                           const size_t *want, const clattn_host_tensor **out)
{
    *out = l->provide(l->user, name, ndim, want);
    char what[160];
    snprintf(what, sizeof(what), "tensor %s", name);
    return clattn__expect_host_shape(l->ctx, l->function, what, name, *out, ndim, want, 1);
}

clattn_status clattn__load_tensor(const clattn_weight_loader *l, const char *name, int ndim,
                                  const size_t *shape, cl_mem *mem)
{
    const clattn_host_tensor *t;
    clattn_status status = fetch(l, name, ndim, shape, &t);
    if (status != CLATTN_OK)
        return status;
    size_t count = 1;
    for (int d = 0; d < ndim; d++)
        count *= shape[d];
    return clattn__upload(l->ctx, t->data, count, name, mem);
}

clattn_status clattn__load_host_tensor(const clattn_weight_loader *l, const char *name, int ndim,
                                       const size_t *shape, float **data)
{
    const clattn_host_tensor *t;
    clattn_status status = fetch(l, name, ndim, shape, &t);
    if (status != CLATTN_OK)
        return status;
    size_t count = 1;
    for (int d = 0; d < ndim; d++)
        count *= shape[d];
    *data = malloc(count * sizeof(float) + 1);
    if (!*data)
        return clattn__fail(l->ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory for %s",
                            l->function, name);
    memcpy(*data, t->data, count * sizeof(float));
    return CLATTN_OK;
}

/* A new buffer of `count` zeros. */
static clattn_status upload_zeros(const clattn_weight_loader *l, size_t count, const char *what,
                                  cl_mem *mem)
{
    float *zeros = calloc(count, sizeof(float));
    if (!zeros)
        return clattn__fail(l->ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                            "%s: out of host memory for %s", l->function, what);
    clattn_status status = clattn__upload(l->ctx, zeros, count, what, mem);
    free(zeros);
    return status;
}

clattn_status clattn__load_norm(const clattn_weight_loader *l, const char *name, size_t d,
                                bool bias, clattn_norm *norm)
{
    char w[160], b[160];
    snprintf(w, sizeof(w), "%s.weight", name);
    snprintf(b, sizeof(b), "%s.bias", name);
    clattn_status status = clattn__load_tensor(l, w, 1, &d, &norm->weight);
    if (status != CLATTN_OK)
        return status;
    /* The LayerNorm kernels always add a bias: a bias-free norm adds zeros. */
    return bias ? clattn__load_tensor(l, b, 1, &d, &norm->bias)
                : upload_zeros(l, d, b, &norm->bias);
}

/* The tensors "<prefix><first>" and "<prefix><second>", both [rows, cols] (cols 0: [rows]), one
 * after the other in one new buffer [2·rows, cols]. */
static clattn_status load_stacked(const clattn_weight_loader *l, const char *prefix,
                                  const char *first, const char *second, size_t rows, size_t cols,
                                  cl_mem *mem)
{
    int ndim = cols ? 2 : 1;
    size_t shape[2] = {rows, cols}, count = rows * (cols ? cols : 1);
    const char *suffix[2] = {first, second};
    char name[2][160];
    float *both = malloc(2 * count * sizeof(float));
    if (!both)
        return clattn__fail(l->ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                            "%s: out of host memory for %s%s", l->function, prefix, first);
    clattn_status status = CLATTN_OK;
    /* Each copied before the next is asked for: a lookup may reuse its answer. */
    for (int i = 0; i < 2 && status == CLATTN_OK; i++) {
        const clattn_host_tensor *t;
        snprintf(name[i], sizeof(name[i]), "%s%s", prefix, suffix[i]);
        if ((status = fetch(l, name[i], ndim, shape, &t)) == CLATTN_OK)
            memcpy(both + i * count, t->data, count * sizeof(float));
    }
    if (status == CLATTN_OK)
        status = clattn__upload(l->ctx, both, 2 * count, name[0], mem);
    free(both);
    return status;
}

clattn_status clattn__ffn_keep_packed_only(clattn_context *ctx, clattn_ffn *ffn)
{
    bool packed[2] = {false, false};
    clattn_status status = clattn__gemm_weight_pack(ctx, &ffn->lin1, &packed[0]);
    if (status == CLATTN_OK)
        status = clattn__gemm_weight_pack(ctx, &ffn->lin2, &packed[1]);
    if (packed[0]) {
        clattn__release_mem(&ffn->w1);
        ffn->lin1.mem = NULL;
    }
    if (packed[1]) {
        clattn__release_mem(&ffn->w2);
        ffn->lin2.mem = NULL;
    }
    return status;
}

void clattn__norm_release(clattn_norm *norm)
{
    clattn__release_mem(&norm->weight), clattn__release_mem(&norm->bias);
}

/* The block's weights kept quantised, when the loader's quant provider has both: linear1
 * (gated: linear1_gate's rows, then linear1's) and linear2; the biases as floats. *done: loaded
 * (else nothing was, and the float tensors are to be loaded). */
static clattn_status load_ffn_quant(const clattn_weight_loader *l, const char *prefix, size_t d,
                                    size_t ff, bool gated, bool bias, clattn_ffn *ffn,
                                    bool *done)
{
    char gate[160], up[160], down[160];
    snprintf(gate, sizeof(gate), "%slinear1_gate.weight", prefix);
    snprintf(up, sizeof(up), "%slinear1.weight", prefix);
    snprintf(down, sizeof(down), "%slinear2.weight", prefix);
    const char *in_names[2] = {gated ? gate : up, up}, *out_names[1] = {down};
    const size_t in_rows[2] = {ff, ff}, out_rows[1] = {d};
    const struct clattn_gemm_quant *q1 = NULL, *q2 = NULL;
    clattn_status status = l->quant(l->quant_user, in_names, in_rows, gated ? 2 : 1, d, &q1);
    if (status == CLATTN_OK && q1)
        status = l->quant(l->quant_user, out_names, out_rows, 1, ff, &q2);
    if (status != CLATTN_OK || !q1 || !q2)
        return status;
    if (bias) {
        char b1[160], b2[160];
        snprintf(b1, sizeof(b1), "%slinear1.bias", prefix);
        snprintf(b2, sizeof(b2), "%slinear2.bias", prefix);
        if ((status = gated ? load_stacked(l, prefix, "linear1_gate.bias", "linear1.bias", ff, 0,
                                           &ffn->b1)
                            : clattn__load_tensor(l, b1, 1, &ff, &ffn->b1)) ||
            (status = clattn__load_tensor(l, b2, 1, &d, &ffn->b2)))
            return status;
    }
    ffn->lin1 = (clattn_gemm_weight){NULL, 0, gated ? 2 * ff : ff, d, d, NULL, NULL, q1};
    ffn->lin2 = (clattn_gemm_weight){NULL, 0, d, ff, ff, NULL, NULL, q2};
    *done = true;
    return CLATTN_OK;
}

clattn_status clattn__load_ffn(const clattn_weight_loader *l, const char *prefix, size_t d,
                               size_t ff, bool gated, bool bias, clattn_ffn *ffn)
{
    ffn->gated = gated;
    clattn_status status;
    bool done = false;
    if (l->quant && ((status = load_ffn_quant(l, prefix, d, ff, gated, bias, ffn, &done)) || done))
        return status;
    if (gated) {
        if ((status = load_stacked(l, prefix, "linear1_gate.weight", "linear1.weight", ff, d,
                                   &ffn->w1)) ||
            (bias && (status = load_stacked(l, prefix, "linear1_gate.bias", "linear1.bias", ff, 0,
                                            &ffn->b1))))
            return status;
    }
    struct {
        const char *suffix;
        int ndim;
        size_t shape[2];
        cl_mem *mem;
    } parts[] = {
        {"linear1.weight", 2, {ff, d}, &ffn->w1},
        {"linear1.bias", 1, {ff, 0}, &ffn->b1},
        {"linear2.weight", 2, {d, ff}, &ffn->w2},
        {"linear2.bias", 1, {d, 0}, &ffn->b2},
    };
    for (size_t p = 0; p < sizeof(parts) / sizeof(parts[0]); p++) {
        if ((gated && parts[p].mem == &ffn->w1) || (gated && parts[p].mem == &ffn->b1) ||
            (!bias && parts[p].ndim == 1))
            continue; /* stacked above, or absent */
        char name[160];
        snprintf(name, sizeof(name), "%s%s", prefix, parts[p].suffix);
        if ((status = clattn__load_tensor(l, name, parts[p].ndim, parts[p].shape, parts[p].mem)))
            return status;
    }
    ffn->lin1 = (clattn_gemm_weight){ffn->w1, 0, gated ? 2 * ff : ff, d, d, NULL, NULL, NULL};
    ffn->lin2 = (clattn_gemm_weight){ffn->w2, 0, d, ff, ff, NULL, NULL, NULL};
    return CLATTN_OK;
}

void clattn__ffn_release(clattn_ffn *ffn)
{
    clattn__gemm_weight_release(&ffn->lin1), clattn__gemm_weight_release(&ffn->lin2);
    clattn__release_mem(&ffn->w1), clattn__release_mem(&ffn->b1);
    clattn__release_mem(&ffn->w2), clattn__release_mem(&ffn->b2);
}

clattn_status clattn__load_attention(const clattn_weight_loader *l, const char *prefix, size_t E,
                                     size_t nhead, size_t kv_heads, size_t dk, size_t dv,
                                     bool bias, clattn_mha **attn)
{
    return clattn__load_attention_biases(l, prefix, E, nhead, kv_heads, dk, dv, bias, bias, attn);
}

/* A new attention layer of these sizes, without weights. */
static clattn_status create_attention(const clattn_weight_loader *l, size_t E, size_t nhead,
                                      size_t kv_heads, size_t dk, size_t dv, bool in_bias,
                                      bool out_bias, clattn_mha **attn)
{
    clattn_mha_config mc;
    clattn_mha_config_default(&mc, E, nhead);
    mc.head_dim_qk = dk;
    mc.head_dim_v = dv;
    mc.num_kv_heads = kv_heads;
    mc.in_proj_bias = in_bias;
    mc.out_proj_bias = out_bias;
    return clattn_mha_create(l->ctx, attn, &mc);
}

/* The self-attention's weights kept quantised, when the loader's quant provider has both:
 * q|k|v stacked and the output projection; the biases as floats. *done: loaded (else nothing
 * was, and the float tensors are to be loaded). */
static clattn_status load_attention_quant(const clattn_weight_loader *l, const char *prefix,
                                          size_t E, size_t nhead, size_t kv_heads, size_t dk,
                                          size_t dv, bool in_bias, bool out_bias,
                                          clattn_mha **attn, bool *done)
{
    size_t P = nhead * dk + kv_heads * dk + kv_heads * dv;
    char q[192], k[192], v[192], o[192], name[192];
    snprintf(q, sizeof(q), "%s.q_proj_weight", prefix);
    snprintf(k, sizeof(k), "%s.k_proj_weight", prefix);
    snprintf(v, sizeof(v), "%s.v_proj_weight", prefix);
    snprintf(o, sizeof(o), "%s.out_proj.weight", prefix);
    const char *in_names[3] = {q, k, v}, *out_names[1] = {o};
    const size_t in_rows[3] = {nhead * dk, kv_heads * dk, kv_heads * dv}, out_rows[1] = {E};
    const struct clattn_gemm_quant *qin = NULL, *qout = NULL;
    clattn_status status = l->quant(l->quant_user, in_names, in_rows, 3, E, &qin);
    if (status == CLATTN_OK && qin)
        status = l->quant(l->quant_user, out_names, out_rows, 1, nhead * dv, &qout);
    if (status != CLATTN_OK || !qin || !qout)
        return status;
    const clattn_host_tensor *bin = NULL, *bout = NULL;
    snprintf(name, sizeof(name), "%s.in_proj_bias", prefix);
    if (in_bias && (status = fetch(l, name, 1, &P, &bin)))
        return status;
    snprintf(name, sizeof(name), "%s.out_proj.bias", prefix);
    if (out_bias && (status = fetch(l, name, 1, &E, &bout)))
        return status;
    if ((status = create_attention(l, E, nhead, kv_heads, dk, dv, in_bias, out_bias, attn)))
        return status;
    *done = true;
    return clattn__mha_load_quantised(*attn, qin, qout, bin ? bin->data : NULL,
                                      bout ? bout->data : NULL);
}

clattn_status clattn__load_attention_biases(const clattn_weight_loader *l, const char *prefix,
                                            size_t E, size_t nhead, size_t kv_heads, size_t dk,
                                            size_t dv, bool in_bias, bool out_bias,
                                            clattn_mha **attn)
{
    size_t qk = nhead * dk, kw = kv_heads * dk, vw = kv_heads * dv, P = qk + kw + vw;
    char name[3][192];
    clattn_mha_weights w;
    memset(&w, 0, sizeof(w));
    clattn_status status;
    bool done = false;
    if (l->quant && ((status = load_attention_quant(l, prefix, E, nhead, kv_heads, dk, dv,
                                                    in_bias, out_bias, attn, &done)) ||
                     done))
        return status;

    snprintf(name[0], sizeof(name[0]), "%s.in_proj_weight", prefix);
    const clattn_host_tensor *t = l->provide(l->user, name[0], 2, (size_t[]){P, E});
    if (t && t->data) {
        if ((status = fetch(l, name[0], 2, (size_t[]){P, E}, &t)))
            return status;
        w.in_proj_weight = *t;
    } else {
        static const char *const parts[3] = {"q_proj_weight", "k_proj_weight", "v_proj_weight"};
        for (int i = 0; i < 3; i++)
            snprintf(name[i], sizeof(name[i]), "%s.%s", prefix, parts[i]);
        t = l->provide(l->user, name[0], 2, (size_t[]){qk, E});
        if (!t || !t->data)
            return clattn__fail(l->ctx, CLATTN_ERROR_FORMAT,
                                "%s: missing tensor %s.in_proj_weight (or q_proj_weight, "
                                "k_proj_weight and v_proj_weight)",
                                l->function, prefix);
        if ((status = fetch(l, name[0], 2, (size_t[]){qk, E}, &t)))
            return status;
        w.q_proj_weight = *t;
        if ((status = fetch(l, name[1], 2, (size_t[]){kw, E}, &t)))
            return status;
        w.k_proj_weight = *t;
        if ((status = fetch(l, name[2], 2, (size_t[]){vw, E}, &t)))
            return status;
        w.v_proj_weight = *t;
    }
    snprintf(name[0], sizeof(name[0]), "%s.in_proj_bias", prefix);
    if (in_bias && (status = fetch(l, name[0], 1, &P, &t)))
        return status;
    if (in_bias)
        w.in_proj_bias = *t;
    snprintf(name[0], sizeof(name[0]), "%s.out_proj.weight", prefix);
    if ((status = fetch(l, name[0], 2, (size_t[]){E, nhead * dv}, &t)))
        return status;
    w.out_proj_weight = *t;
    snprintf(name[0], sizeof(name[0]), "%s.out_proj.bias", prefix);
    if (out_bias && (status = fetch(l, name[0], 1, &E, &t)))
        return status;
    if (out_bias)
        w.out_proj_bias = *t;

    if ((status = create_attention(l, E, nhead, kv_heads, dk, dv, in_bias, out_bias, attn)))
        return status;
    return clattn_mha_load_weights(*attn, &w);
}

size_t clattn__ffn_chunk_rows(size_t tokens, size_t ff, bool gated)
{
    size_t per_row = (gated ? 2 : 1) * ff;
    size_t rows = CLATTN_FFN_CHUNK_FLOATS / (per_row ? per_row : 1);
    if (rows == 0)
        rows = 1;
    return rows < tokens ? rows : tokens;
}

clattn_status clattn__ffn_forward(clattn_context *ctx, clattn_ffn *ffn, size_t tokens, size_t d,
                                  size_t ff, int act, cl_mem input, cl_mem hidden, cl_mem out)
{
    /* Gated: hidden [rows, 2·d_ff] = [gate | up], then gate = act(gate)·up in place, and linear2
     * reads the gate half with leading dimension 2·d_ff. Row blocks of at most
     * clattn__ffn_chunk_rows (every row's result is the same whatever the block). */
    size_t ld = ffn->gated ? 2 * ff : ff, chunk = clattn__ffn_chunk_rows(tokens, ff, ffn->gated);
    clattn_status status = CLATTN_OK;
    for (size_t r0 = 0; r0 < tokens && status == CLATTN_OK; r0 += chunk) {
        size_t rows = tokens - r0 < chunk ? tokens - r0 : chunk;
        status = clattn__linear(ctx, CLATTN_OP_FEED_FORWARD, rows, input, r0 * d, d, &ffn->lin1,
                                ffn->b1, 0, ffn->gated ? CLATTN_ACT_NONE : act, hidden, 0, ld);
        if (status == CLATTN_OK && ffn->gated)
            status = clattn__glu(ctx, hidden, rows, ff, act);
        if (status == CLATTN_OK)
            status = clattn__linear(ctx, CLATTN_OP_FEED_FORWARD, rows, hidden, 0, ld, &ffn->lin2,
                                    NULL, 0, CLATTN_ACT_NONE, out, r0 * d, d);
    }
    return status;
}

/* ---- seeded random weights ---- */

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double uniform01(uint64_t *state)
{
    return (double)(splitmix64(state) >> 11) * (1.0 / 9007199254740992.0);
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* PyTorch's initialisation for each kind of weight, drawn from a stream seeded by the name. */
static void fill_random(const char *name, int ndim, const size_t *shape, uint64_t seed, float *x,
                        size_t n)
{
    uint64_t state = seed;
    for (const char *p = name; *p; p++) /* FNV-1a of the name */
        state = (state ^ (unsigned char)*p) * 0x100000001b3ull;
    size_t fan_in = ndim == 2 ? shape[1] : shape[0], fan_out = shape[0];
    if (ends_with(name, "norm1.weight") || ends_with(name, "norm2.weight") ||
        ends_with(name, "norm3.weight") ||
        strcmp(name, "norm.weight") == 0 || strcmp(name, "embedding_norm.weight") == 0) {
        for (size_t i = 0; i < n; i++)
            x[i] = 1.0f;
    } else if (ends_with(name, "norm1.bias") || ends_with(name, "norm2.bias") ||
               ends_with(name, "norm3.bias") ||
               strcmp(name, "norm.bias") == 0 || strcmp(name, "embedding_norm.bias") == 0 ||
               ends_with(name, "in_proj_bias") ||
               ends_with(name, "out_proj.bias")) {
        for (size_t i = 0; i < n; i++)
            x[i] = 0.0f;
    } else if (ends_with(name, "embedding.weight") || /* token, position, type tables */
               ends_with(name, "relative_attention_bias.weight")) { /* nn.Embedding too */
        for (size_t i = 0; i < n; i++) { /* Box-Muller: N(0, 1) */
            double u = uniform01(&state), v = uniform01(&state);
            x[i] = (float)(sqrt(-2.0 * log(1.0 - u)) * cos(2.0 * M_PI * v));
        }
    } else {
        /* xavier-uniform for the attention projections, else kaiming-uniform(a=√5) for
         * weights and 1/sqrt(fan_in) for biases: both uniform(±1/sqrt(fan_in)). */
        bool xavier = ends_with(name, "proj_weight");
        double bound = xavier ? sqrt(6.0 / (double)(fan_in + fan_out)) : 1.0 / sqrt((double)fan_in);
        if (ndim == 1) /* a bias: its layer's fan-in is not known here, its width is */
            bound = 1.0 / sqrt((double)shape[0]);
        for (size_t i = 0; i < n; i++)
            x[i] = (float)((2.0 * uniform01(&state) - 1.0) * bound);
    }
}

const clattn_host_tensor *clattn__random_weight(void *user, const char *name, int ndim,
                                                const size_t *shape)
{
    clattn_random_weights *r = user;
    if (ends_with(name, "in_proj_weight") != r->packed && ends_with(name, "proj_weight") &&
        !ends_with(name, "out_proj.weight"))
        return NULL; /* the other form of the attention projections */
    if (r->count == r->capacity) {
        size_t cap = r->capacity ? 2 * r->capacity : 64;
        clattn_host_tensor *grown = realloc(r->made, cap * sizeof(*grown));
        if (!grown) {
            r->out_of_memory = true;
            return NULL;
        }
        r->made = grown;
        r->capacity = cap;
    }
    size_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    float *data = malloc(n * sizeof(float) + 1);
    if (!data) {
        r->out_of_memory = true;
        return NULL;
    }
    fill_random(name, ndim, shape, r->seed, data, n);
    clattn_host_tensor *t = &r->made[r->count++];
    memset(t, 0, sizeof(*t));
    t->data = data;
    t->ndim = ndim;
    for (int d = 0; d < ndim; d++)
        t->shape[d] = shape[d];
    return t;
}

void clattn__random_weights_free(clattn_random_weights *r)
{
    for (size_t i = 0; i < r->count; i++)
        free((void *)r->made[i].data);
    free(r->made);
    r->made = NULL;
    r->count = r->capacity = 0;
}

const clattn_host_tensor *clattn__lookup_weight(void *user, const char *name, int ndim,
                                                const size_t *shape)
{
    (void)ndim, (void)shape;
    clattn_lookup_adapter *a = user;
    return a->lookup(a->user, name);
}
