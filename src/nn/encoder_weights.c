/* Loading the encoder's weights by their PyTorch names, and seeded random initialisation. */
#include "encoder_internal.h"
#include "mha_internal.h"
#include "runtime/buffers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char fn_load[] = "clattn_encoder_load_weights";

void clattn__encoder_weights_release(clattn_encoder_weights *w, size_t num_layers)
{
    for (size_t i = 0; w->layers && i < num_layers; i++) {
        clattn_encoder_layer *l = &w->layers[i];
        clattn_mha_destroy(&l->attn);
        clattn__ffn_release(&l->ffn);
        clattn__norm_release(&l->norm1), clattn__norm_release(&l->norm2);
    }
    free(w->layers);
    w->layers = NULL;
    clattn__norm_release(&w->norm);
    clattn__release_mem(&w->embedding), clattn__release_mem(&w->pos_embedding);
    clattn__release_mem(&w->type_embedding);
    clattn__norm_release(&w->embedding_norm);
    free(w->relative_bias);
    w->relative_bias = NULL;
}

static clattn_status load_layer(const clattn_weight_loader *l, const clattn_encoder_config *c,
                                size_t i, clattn_encoder_layer *layer)
{
    char prefix[64], attn[64], norm1[64], norm2[64];
    snprintf(prefix, sizeof(prefix), "layers.%zu.", i);
    snprintf(attn, sizeof(attn), "layers.%zu.self_attn", i);
    snprintf(norm1, sizeof(norm1), "layers.%zu.norm1", i);
    snprintf(norm2, sizeof(norm2), "layers.%zu.norm2", i);
    clattn_status status;
    bool bias = !c->linear_no_bias, norm_bias = !c->norm_no_bias;
    if ((status = clattn__load_attention(l, attn, c->d_model, c->nhead, c->nhead, c->head_dim_qk,
                                         c->head_dim_v, bias, &layer->attn)) ||
        (status = clattn__load_ffn(l, prefix, c->d_model, c->dim_feedforward, c->ffn_gated, bias,
                                   &layer->ffn)) ||
        (!(i == 0 && c->first_norm1_identity) &&
         (status = clattn__load_norm(l, norm1, c->d_model, norm_bias, &layer->norm1))) ||
        (status = clattn__load_norm(l, norm2, c->d_model, norm_bias, &layer->norm2)))
        return status;
    /* On the CPU GEMM the layer's linear weights are held once, packed (not also as loaded);
     * packed layer by layer, so the next layer's uploads reuse the memory released here. */
    if ((status = clattn__mha_keep_packed_only(layer->attn)))
        return status;
    return clattn__ffn_keep_packed_only(l->ctx, &layer->ffn);
}

static clattn_status load_all(clattn_encoder *enc, clattn_weight_provider provide, void *user)
{
    const clattn_encoder_config *c = &enc->cfg;
    clattn_weight_loader l = {enc->ctx, fn_load, provide, user};
    clattn_encoder_weights w;
    memset(&w, 0, sizeof(w));
    w.layers = calloc(c->num_layers, sizeof(*w.layers));
    if (!w.layers)
        return clattn__fail(enc->ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                            "%s: out of host memory", fn_load);
    clattn_status status = CLATTN_OK;
    size_t d = c->d_model;
    for (size_t i = 0; i < c->num_layers && status == CLATTN_OK; i++)
        status = load_layer(&l, c, i, &w.layers[i]);
    if (status == CLATTN_OK && c->final_norm)
        status = clattn__load_norm(&l, "norm", d, !c->norm_no_bias, &w.norm);
    if (status == CLATTN_OK && c->vocab_size)
        status = clattn__load_tensor(&l, "embedding.weight", 2, (size_t[]){c->vocab_size, d},
                                     &w.embedding);
    if (status == CLATTN_OK && (c->positional == CLATTN_POSITIONAL_LEARNED ||
                                c->positional == CLATTN_POSITIONAL_LEARNED_PADDED))
        status = clattn__load_tensor(&l, "pos_embedding.weight", 2,
                                     (size_t[]){c->max_positions, d}, &w.pos_embedding);
    if (status == CLATTN_OK && c->type_vocab_size)
        status = clattn__load_tensor(&l, "token_type_embedding.weight", 2,
                                     (size_t[]){c->type_vocab_size, d}, &w.type_embedding);
    if (status == CLATTN_OK && c->embedding_norm)
        status = clattn__load_norm(&l, "embedding_norm", d, !c->norm_no_bias,
                                   &w.embedding_norm);
    if (status == CLATTN_OK && c->relative_attention_buckets)
        status = clattn__load_host_tensor(&l, "relative_attention_bias.weight", 2,
                                          (size_t[]){c->relative_attention_buckets, c->nhead},
                                          &w.relative_bias);
    if (status != CLATTN_OK) {
        clattn__encoder_weights_release(&w, c->num_layers);
        return status;
    }
    clattn__encoder_weights_release(&enc->weights, c->num_layers);
    enc->weights = w;
    enc->loaded = true;
    return CLATTN_OK;
}

clattn_status clattn_encoder_load_weights(clattn_encoder *enc, clattn_weight_lookup lookup,
                                          void *user_data)
{
    CLATTN_CHECK_ARG(NULL, fn_load, enc, "encoder is NULL");
    CLATTN_CHECK_ARG(enc->ctx, fn_load, lookup, "lookup is NULL");
    clattn_lookup_adapter a = {lookup, user_data};
    return load_all(enc, clattn__lookup_weight, &a);
}

clattn_status clattn_encoder_init_random(clattn_encoder *enc, uint64_t seed)
{
    CLATTN_CHECK_ARG(NULL, "clattn_encoder_init_random", enc, "encoder is NULL");
    const clattn_encoder_config *c = &enc->cfg;
    clattn_random_weights r = {seed, c->head_dim_qk * c->nhead == c->d_model &&
                                         c->head_dim_v * c->nhead == c->d_model,
                               NULL, 0, 0, false};
    clattn_status status = load_all(enc, clattn__random_weight, &r);
    if (r.out_of_memory && status != CLATTN_OK)
        status = clattn__fail(enc->ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                              "clattn_encoder_init_random: out of host memory for the weights");
    clattn__random_weights_free(&r);
    return status;
}
