#include "weight_bank.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static float *add_tensor(weight_bank *b, const char *name, int ndim, size_t d0, size_t d1,
                         float lo, float hi, uint64_t seed)
{
    assert_true(b->count < BANK_MAX);
    size_t n = ndim == 2 ? d0 * d1 : d0;
    float *data = malloc(n * sizeof(float));
    assert_non_null(data);
    test_fill_uniform(data, n, seed, lo, hi);
    snprintf(b->names[b->count], sizeof(b->names[0]), "%s", name);
    clattn_host_tensor *t = &b->tensors[b->count++];
    memset(t, 0, sizeof(*t));
    t->data = data;
    t->ndim = ndim;
    t->shape[0] = d0;
    t->shape[1] = ndim == 2 ? d1 : 0;
    return data;
}

void bank_init(weight_bank *b, const clattn_encoder_config *c, bool packed, uint64_t seed)
{
    memset(b, 0, sizeof(*b));
    size_t d = c->d_model, h = c->nhead, ff = c->dim_feedforward;
    size_t dk = c->head_dim_qk ? c->head_dim_qk : d / h, dv = c->head_dim_v ? c->head_dim_v : d / h;
    size_t qk = h * dk, vw = h * dv, P = 2 * qk + vw;
    float wb = 1.0f / sqrtf((float)d), fb = 1.0f / sqrtf((float)ff);
    assert_true(c->num_layers <= 16);
    char name[96];
    for (size_t i = 0; i < c->num_layers; i++) {
        ref_encoder_layer *l = &b->layers[i];
        uint64_t s = seed + 100 * i;
#define NAME(fmt) (snprintf(name, sizeof(name), "layers.%zu." fmt, i), name)
        if (packed) {
            float *w = add_tensor(b, NAME("self_attn.in_proj_weight"), 2, P, d, -wb, wb, s + 1);
            l->wq = w, l->wk = w + qk * d, l->wv = w + 2 * qk * d;
        } else {
            l->wq = add_tensor(b, NAME("self_attn.q_proj_weight"), 2, qk, d, -wb, wb, s + 1);
            l->wk = add_tensor(b, NAME("self_attn.k_proj_weight"), 2, qk, d, -wb, wb, s + 2);
            l->wv = add_tensor(b, NAME("self_attn.v_proj_weight"), 2, vw, d, -wb, wb, s + 3);
        }
        l->in_bias = add_tensor(b, NAME("self_attn.in_proj_bias"), 1, P, 0, -0.2f, 0.2f, s + 4);
        l->out_w = add_tensor(b, NAME("self_attn.out_proj.weight"), 2, d, vw, -wb, wb, s + 5);
        l->out_b = add_tensor(b, NAME("self_attn.out_proj.bias"), 1, d, 0, -0.2f, 0.2f, s + 6);
        l->w1 = add_tensor(b, NAME("linear1.weight"), 2, ff, d, -wb, wb, s + 7);
        l->b1 = add_tensor(b, NAME("linear1.bias"), 1, ff, 0, -0.2f, 0.2f, s + 8);
        l->w2 = add_tensor(b, NAME("linear2.weight"), 2, d, ff, -fb, fb, s + 9);
        l->b2 = add_tensor(b, NAME("linear2.bias"), 1, d, 0, -0.2f, 0.2f, s + 10);
        l->norm1_w = add_tensor(b, NAME("norm1.weight"), 1, d, 0, 0.5f, 1.5f, s + 11);
        l->norm1_b = add_tensor(b, NAME("norm1.bias"), 1, d, 0, -0.2f, 0.2f, s + 12);
        l->norm2_w = add_tensor(b, NAME("norm2.weight"), 1, d, 0, 0.5f, 1.5f, s + 13);
        l->norm2_b = add_tensor(b, NAME("norm2.bias"), 1, d, 0, -0.2f, 0.2f, s + 14);
#undef NAME
    }
    ref_encoder *e = &b->ref;
    e->d = d, e->h = h, e->dk = dk, e->dv = dv, e->ff = ff, e->layers = c->num_layers;
    e->gelu = c->activation == CLATTN_ACTIVATION_GELU;
    e->norm_first = c->norm_first != 0;
    e->sinusoidal = c->positional == CLATTN_POSITIONAL_SINUSOIDAL;
    e->eps = c->layer_norm_eps;
    e->layer = b->layers;
    if (c->final_norm) {
        e->norm_w = add_tensor(b, "norm.weight", 1, d, 0, 0.5f, 1.5f, seed + 7001);
        e->norm_b = add_tensor(b, "norm.bias", 1, d, 0, -0.2f, 0.2f, seed + 7002);
    }
    if (c->vocab_size)
        e->embedding = add_tensor(b, "embedding.weight", 2, c->vocab_size, d, -1, 1, seed + 7003);
}

void bank_free(weight_bank *b)
{
    for (size_t i = 0; i < b->count; i++)
        free((void *)b->tensors[i].data);
    b->count = 0;
}

clattn_host_tensor *bank_find(weight_bank *b, const char *name)
{
    for (size_t i = 0; i < b->count; i++)
        if (strcmp(b->names[i], name) == 0 && b->tensors[i].data)
            return &b->tensors[i];
    return NULL;
}

const clattn_host_tensor *bank_lookup(void *bank, const char *name)
{
    return bank_find(bank, name);
}

void bank_remove(weight_bank *b, const char *name)
{
    for (size_t i = 0; i < b->count; i++)
        if (strcmp(b->names[i], name) == 0)
            b->names[i][0] = '\0'; /* the data stays owned by the bank */
}
