/* Loading the encoder's weights by their PyTorch names, and seeded random initialisation. */
#include "encoder_internal.h"
#include "buffers.h"
#include "shape.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char fn_load[] = "clattn_encoder_load_weights";

/* Where weights come from: returns the tensor `name` (expected shape given), or NULL. */
typedef const clattn_host_tensor *(*weight_provider)(void *user, const char *name, int ndim,
                                                     const size_t *shape);

typedef struct loader {
    clattn_encoder *enc;
    weight_provider provide;
    void *user;
} loader;

void clattn__encoder_weights_release(clattn_encoder_weights *w, size_t num_layers)
{
    for (size_t i = 0; w->layers && i < num_layers; i++) {
        clattn_encoder_layer *l = &w->layers[i];
        clattn_mha_destroy(&l->attn);
        clattn__gemm_weight_release(&l->lin1), clattn__gemm_weight_release(&l->lin2);
        clattn__release_mem(&l->w1), clattn__release_mem(&l->b1);
        clattn__release_mem(&l->w2), clattn__release_mem(&l->b2);
        clattn__release_mem(&l->norm1_w), clattn__release_mem(&l->norm1_b);
        clattn__release_mem(&l->norm2_w), clattn__release_mem(&l->norm2_b);
    }
    free(w->layers);
    w->layers = NULL;
    clattn__release_mem(&w->norm_w), clattn__release_mem(&w->norm_b);
    clattn__release_mem(&w->embedding), clattn__release_mem(&w->pos_embedding);
    clattn__release_mem(&w->type_embedding);
    clattn__release_mem(&w->emb_norm_w), clattn__release_mem(&w->emb_norm_b);
}

/* Checks that t (what the provider gave for `name`) exists with exactly the shape `want`. */
static clattn_status check(loader *l, const char *name, const clattn_host_tensor *t, int ndim,
                           const size_t *want)
{
    char what[160];
    snprintf(what, sizeof(what), "tensor %s", name);
    return clattn__expect_host_shape(l->enc->ctx, fn_load, what, name, t, ndim, want, 1);
}

/* The tensor `name` with exactly the shape `want`, or a named error. */
static clattn_status fetch(loader *l, const char *name, int ndim, const size_t *want,
                           const clattn_host_tensor **out)
{
    *out = l->provide(l->user, name, ndim, want);
    return check(l, name, *out, ndim, want);
}

static clattn_status upload(loader *l, const char *name, int ndim, const size_t *want, cl_mem *mem)
{
    const clattn_host_tensor *t;
    clattn_status status = fetch(l, name, ndim, want, &t);
    if (status != CLATTN_OK)
        return status;
    size_t count = 1;
    for (int d = 0; d < ndim; d++)
        count *= want[d];
    return clattn__upload(l->enc->ctx, t->data, count, name, mem);
}

static clattn_status load_attention(loader *l, size_t i, clattn_encoder_layer *layer)
{
    const clattn_encoder_config *c = &l->enc->cfg;
    size_t E = c->d_model, qk = c->nhead * c->head_dim_qk, vw = c->nhead * c->head_dim_v;
    size_t P = 2 * qk + vw;
    char name[4][128];
    clattn_mha_weights w;
    memset(&w, 0, sizeof(w));
    clattn_status status;

    snprintf(name[0], sizeof(name[0]), "layers.%zu.self_attn.in_proj_weight", i);
    const clattn_host_tensor *t = l->provide(l->user, name[0], 2, (size_t[]){P, E});
    if (t && t->data) {
        if ((status = check(l, name[0], t, 2, (size_t[]){P, E})))
            return status;
        w.in_proj_weight = *t;
    } else {
        snprintf(name[0], sizeof(name[0]), "layers.%zu.self_attn.q_proj_weight", i);
        snprintf(name[1], sizeof(name[1]), "layers.%zu.self_attn.k_proj_weight", i);
        snprintf(name[2], sizeof(name[2]), "layers.%zu.self_attn.v_proj_weight", i);
        t = l->provide(l->user, name[0], 2, (size_t[]){qk, E});
        if (!t || !t->data)
            return clattn__fail(l->enc->ctx, CLATTN_ERROR_FORMAT,
                                "%s: missing tensor layers.%zu.self_attn.in_proj_weight (or "
                                "q_proj_weight, k_proj_weight and v_proj_weight)",
                                fn_load, i);
        if ((status = check(l, name[0], t, 2, (size_t[]){qk, E})))
            return status;
        w.q_proj_weight = *t;
        if ((status = fetch(l, name[1], 2, (size_t[]){qk, E}, &t)))
            return status;
        w.k_proj_weight = *t;
        if ((status = fetch(l, name[2], 2, (size_t[]){vw, E}, &t)))
            return status;
        w.v_proj_weight = *t;
    }
    snprintf(name[0], sizeof(name[0]), "layers.%zu.self_attn.in_proj_bias", i);
    if ((status = fetch(l, name[0], 1, &P, &t)))
        return status;
    w.in_proj_bias = *t;
    snprintf(name[0], sizeof(name[0]), "layers.%zu.self_attn.out_proj.weight", i);
    if ((status = fetch(l, name[0], 2, (size_t[]){E, vw}, &t)))
        return status;
    w.out_proj_weight = *t;
    snprintf(name[0], sizeof(name[0]), "layers.%zu.self_attn.out_proj.bias", i);
    if ((status = fetch(l, name[0], 1, &E, &t)))
        return status;
    w.out_proj_bias = *t;

    clattn_mha_config mc;
    clattn_mha_config_default(&mc, E, c->nhead);
    mc.head_dim_qk = c->head_dim_qk;
    mc.head_dim_v = c->head_dim_v;
    if ((status = clattn_mha_create(l->enc->ctx, &layer->attn, &mc)))
        return status;
    return clattn_mha_load_weights(layer->attn, &w);
}

static clattn_status load_layer(loader *l, size_t i, clattn_encoder_layer *layer)
{
    const clattn_encoder_config *c = &l->enc->cfg;
    size_t d = c->d_model, ff = c->dim_feedforward;
    clattn_status status = load_attention(l, i, layer);
    if (status != CLATTN_OK)
        return status;
    struct {
        const char *suffix;
        int ndim;
        size_t shape[2];
        cl_mem *mem;
    } parts[] = {
        {"linear1.weight", 2, {ff, d}, &layer->w1},
        {"linear1.bias", 1, {ff, 0}, &layer->b1},
        {"linear2.weight", 2, {d, ff}, &layer->w2},
        {"linear2.bias", 1, {d, 0}, &layer->b2},
        {"norm1.weight", 1, {d, 0}, &layer->norm1_w},
        {"norm1.bias", 1, {d, 0}, &layer->norm1_b},
        {"norm2.weight", 1, {d, 0}, &layer->norm2_w},
        {"norm2.bias", 1, {d, 0}, &layer->norm2_b},
    };
    for (size_t p = 0; p < sizeof(parts) / sizeof(parts[0]); p++) {
        char name[128];
        snprintf(name, sizeof(name), "layers.%zu.%s", i, parts[p].suffix);
        if ((status = upload(l, name, parts[p].ndim, parts[p].shape, parts[p].mem)))
            return status;
    }
    layer->lin1 = (clattn_gemm_weight){layer->w1, 0, ff, d, d, NULL};
    layer->lin2 = (clattn_gemm_weight){layer->w2, 0, d, ff, ff, NULL};
    return CLATTN_OK;
}

static clattn_status load_all(clattn_encoder *enc, weight_provider provide, void *user)
{
    const clattn_encoder_config *c = &enc->cfg;
    loader l = {enc, provide, user};
    clattn_encoder_weights w;
    memset(&w, 0, sizeof(w));
    w.layers = calloc(c->num_layers, sizeof(*w.layers));
    if (!w.layers)
        return clattn__fail(enc->ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                            "%s: out of host memory", fn_load);
    clattn_status status = CLATTN_OK;
    size_t d = c->d_model;
    for (size_t i = 0; i < c->num_layers && status == CLATTN_OK; i++)
        status = load_layer(&l, i, &w.layers[i]);
    if (status == CLATTN_OK && c->final_norm &&
        !(status = upload(&l, "norm.weight", 1, &d, &w.norm_w)))
        status = upload(&l, "norm.bias", 1, &d, &w.norm_b);
    if (status == CLATTN_OK && c->vocab_size)
        status = upload(&l, "embedding.weight", 2, (size_t[]){c->vocab_size, d}, &w.embedding);
    if (status == CLATTN_OK && c->positional == CLATTN_POSITIONAL_LEARNED)
        status = upload(&l, "pos_embedding.weight", 2, (size_t[]){c->max_positions, d},
                        &w.pos_embedding);
    if (status == CLATTN_OK && c->type_vocab_size)
        status = upload(&l, "token_type_embedding.weight", 2,
                        (size_t[]){c->type_vocab_size, d}, &w.type_embedding);
    if (status == CLATTN_OK && c->embedding_norm &&
        !(status = upload(&l, "embedding_norm.weight", 1, &d, &w.emb_norm_w)))
        status = upload(&l, "embedding_norm.bias", 1, &d, &w.emb_norm_b);
    if (status != CLATTN_OK) {
        clattn__encoder_weights_release(&w, c->num_layers);
        return status;
    }
    clattn__encoder_weights_release(&enc->weights, c->num_layers);
    enc->weights = w;
    enc->loaded = true;
    return CLATTN_OK;
}

/* ---- the public lookup ---- */

typedef struct lookup_adapter {
    clattn_weight_lookup lookup;
    void *user;
} lookup_adapter;

static const clattn_host_tensor *from_lookup(void *user, const char *name, int ndim,
                                             const size_t *shape)
{
    (void)ndim, (void)shape;
    lookup_adapter *a = user;
    return a->lookup(a->user, name);
}

clattn_status clattn_encoder_load_weights(clattn_encoder *enc, clattn_weight_lookup lookup,
                                          void *user_data)
{
    CLATTN_CHECK_ARG(NULL, fn_load, enc, "encoder is NULL");
    CLATTN_CHECK_ARG(enc->ctx, fn_load, lookup, "lookup is NULL");
    lookup_adapter a = {lookup, user_data};
    return load_all(enc, from_lookup, &a);
}

/* ---- seeded random weights ---- */

typedef struct random_weights {
    uint64_t seed;
    bool packed; /* in_proj_weight rather than q/k/v_proj_weight */
    clattn_host_tensor *made;
    size_t count, capacity;
    bool out_of_memory;
} random_weights;

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
        strcmp(name, "norm.weight") == 0 || strcmp(name, "embedding_norm.weight") == 0) {
        for (size_t i = 0; i < n; i++)
            x[i] = 1.0f;
    } else if (ends_with(name, "norm1.bias") || ends_with(name, "norm2.bias") ||
               strcmp(name, "norm.bias") == 0 || strcmp(name, "embedding_norm.bias") == 0 ||
               ends_with(name, "in_proj_bias") ||
               ends_with(name, "out_proj.bias")) {
        for (size_t i = 0; i < n; i++)
            x[i] = 0.0f;
    } else if (ends_with(name, "embedding.weight")) { /* token, position, type tables */
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

static const clattn_host_tensor *make_random(void *user, const char *name, int ndim,
                                             const size_t *shape)
{
    random_weights *r = user;
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

clattn_status clattn_encoder_init_random(clattn_encoder *enc, uint64_t seed)
{
    CLATTN_CHECK_ARG(NULL, "clattn_encoder_init_random", enc, "encoder is NULL");
    const clattn_encoder_config *c = &enc->cfg;
    random_weights r = {seed, c->head_dim_qk * c->nhead == c->d_model &&
                                  c->head_dim_v * c->nhead == c->d_model,
                        NULL, 0, 0, false};
    clattn_status status = load_all(enc, make_random, &r);
    if (r.out_of_memory && status != CLATTN_OK)
        status = clattn__fail(enc->ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                              "clattn_encoder_init_random: out of host memory for the weights");
    for (size_t i = 0; i < r.count; i++)
        free((void *)r.made[i].data);
    free(r.made);
    return status;
}
