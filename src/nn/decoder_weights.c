/* Loading the decoder's weights by their nn.TransformerDecoder names; seeded random weights. */
#include "decoder_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char fn_load[] = "clattn_decoder_load_weights";

void clattn__decoder_weights_release(clattn_decoder_weights *w, size_t num_layers)
{
    for (size_t i = 0; w->layers && i < num_layers; i++) {
        clattn_decoder_layer *l = &w->layers[i];
        clattn_mha_destroy(&l->self_attn), clattn_mha_destroy(&l->cross_attn);
        clattn__ffn_release(&l->ffn);
        clattn__norm_release(&l->norm1), clattn__norm_release(&l->norm2);
        clattn__norm_release(&l->norm3);
    }
    free(w->layers);
    w->layers = NULL;
    clattn__norm_release(&w->norm);
}

static clattn_status load_layer(const clattn_weight_loader *l, const clattn_decoder_config *c,
                                size_t i, clattn_decoder_layer *layer)
{
    char prefix[64], self[64], cross[64], norm[3][64];
    snprintf(prefix, sizeof(prefix), "layers.%zu.", i);
    snprintf(self, sizeof(self), "layers.%zu.self_attn", i);
    snprintf(cross, sizeof(cross), "layers.%zu.multihead_attn", i);
    for (int n = 0; n < 3; n++)
        snprintf(norm[n], sizeof(norm[n]), "layers.%zu.norm%d", i, n + 1);
    clattn_status status;
    if ((status = clattn__load_attention(l, self, c->d_model, c->nhead, c->num_kv_heads,
                                         c->head_dim_qk, c->head_dim_v, true, &layer->self_attn)) ||
        (status = clattn__load_attention(l, cross, c->d_model, c->nhead, c->num_kv_heads,
                                         c->head_dim_qk, c->head_dim_v, true,
                                         &layer->cross_attn)) ||
        (status = clattn__load_ffn(l, prefix, c->d_model, c->dim_feedforward, false, true,
                                   &layer->ffn)) ||
        (status = clattn__load_norm(l, norm[0], c->d_model, true, &layer->norm1)) ||
        (status = clattn__load_norm(l, norm[1], c->d_model, true, &layer->norm2)))
        return status;
    return clattn__load_norm(l, norm[2], c->d_model, true, &layer->norm3);
}

static clattn_status load_all(clattn_decoder *dec, clattn_weight_provider provide, void *user)
{
    const clattn_decoder_config *c = &dec->cfg;
    clattn_weight_loader l = {dec->ctx, fn_load, provide, user};
    clattn_decoder_weights w;
    memset(&w, 0, sizeof(w));
    w.layers = calloc(c->num_layers, sizeof(*w.layers));
    if (!w.layers)
        return clattn__fail(dec->ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory",
                            fn_load);
    clattn_status status = CLATTN_OK;
    for (size_t i = 0; i < c->num_layers && status == CLATTN_OK; i++)
        status = load_layer(&l, c, i, &w.layers[i]);
    if (status == CLATTN_OK && c->final_norm)
        status = clattn__load_norm(&l, "norm", c->d_model, true, &w.norm);
    if (status != CLATTN_OK) {
        clattn__decoder_weights_release(&w, c->num_layers);
        return status;
    }
    clattn__decoder_weights_release(&dec->weights, c->num_layers);
    dec->weights = w;
    dec->loaded = true;
    return CLATTN_OK;
}

clattn_status clattn_decoder_load_weights(clattn_decoder *dec, clattn_weight_lookup lookup,
                                          void *user_data)
{
    CLATTN_CHECK_ARG(NULL, fn_load, dec, "decoder is NULL");
    CLATTN_CHECK_ARG(dec->ctx, fn_load, lookup, "lookup is NULL");
    clattn_lookup_adapter a = {lookup, user_data};
    return load_all(dec, clattn__lookup_weight, &a);
}

clattn_status clattn_decoder_init_random(clattn_decoder *dec, uint64_t seed)
{
    CLATTN_CHECK_ARG(NULL, "clattn_decoder_init_random", dec, "decoder is NULL");
    const clattn_decoder_config *c = &dec->cfg;
    clattn_random_weights r = {seed, c->head_dim_qk * c->nhead == c->d_model &&
                                         c->head_dim_v * c->nhead == c->d_model,
                               NULL, 0, 0, false};
    clattn_status status = load_all(dec, clattn__random_weight, &r);
    if (r.out_of_memory && status != CLATTN_OK)
        status = clattn__fail(dec->ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                              "clattn_decoder_init_random: out of host memory for the weights");
    clattn__random_weights_free(&r);
    return status;
}
