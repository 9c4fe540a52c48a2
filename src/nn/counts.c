/* Analytic operation and parameter counts, with the convention of the context's counters. */
#include "clattn/transformer.h"
#include "clattn/encoder.h"
#include "base/errors.h"

#include <string.h>

clattn_status clattn_mha_count_macs(const clattn_mha_config *config, size_t batch, size_t seq_q,
                                    size_t seq_k, uint64_t *macs)
{
    static const char fn[] = "clattn_mha_count_macs";
    CLATTN_CHECK_ARG(NULL, fn, config && macs, "config or macs is NULL");
    CLATTN_CHECK_ARG(NULL, fn, config->embed_dim > 0 && config->num_heads > 0,
                     "embed_dim and num_heads must be positive");
    uint64_t E = config->embed_dim, h = config->num_heads;
    uint64_t dk = config->head_dim_qk ? config->head_dim_qk : E / h;
    uint64_t dv = config->head_dim_v ? config->head_dim_v : E / h;
    uint64_t kdim = config->kdim ? config->kdim : E, vdim = config->vdim ? config->vdim : E;
    uint64_t hkv = config->num_kv_heads ? config->num_kv_heads : h; /* grouped-query attention */
    uint64_t B = batch, Nq = seq_q, Nk = seq_k;
    memset(macs, 0, CLATTN_OP_COUNT * sizeof(*macs));
    macs[CLATTN_OP_IN_PROJECTION] =
        B * Nq * E * h * dk + B * Nk * kdim * hkv * dk + B * Nk * vdim * hkv * dv;
    macs[CLATTN_OP_SCORES] = B * h * Nq * Nk * dk;
    macs[CLATTN_OP_WEIGHTS_V] = B * h * Nq * Nk * dv;
    macs[CLATTN_OP_OUT_PROJECTION] = config->out_proj ? B * Nq * h * dv * E : 0;
    return CLATTN_OK;
}

static void encoder_mha_config(const clattn_encoder_config *c, clattn_mha_config *m)
{
    clattn_mha_config_default(m, c->d_model, c->nhead);
    m->head_dim_qk = c->head_dim_qk;
    m->head_dim_v = c->head_dim_v;
}

static clattn_status check_encoder_config(const clattn_encoder_config *c, const char *fn)
{
    CLATTN_CHECK_ARG(NULL, fn, c, "config is NULL");
    CLATTN_CHECK_ARG(NULL, fn, c->d_model > 0 && c->nhead > 0 && c->num_layers > 0,
                     "d_model, nhead and num_layers must be positive");
    return CLATTN_OK;
}

clattn_status clattn_encoder_count_macs(const clattn_encoder_config *config, size_t batch,
                                        size_t seq, uint64_t *macs)
{
    static const char fn[] = "clattn_encoder_count_macs";
    clattn_status status = check_encoder_config(config, fn);
    if (status != CLATTN_OK)
        return status;
    CLATTN_CHECK_ARG(NULL, fn, macs, "macs is NULL");
    clattn_mha_config m;
    encoder_mha_config(config, &m);
    if ((status = clattn_mha_count_macs(&m, batch, seq, seq, macs)))
        return status;
    for (int op = 0; op < CLATTN_OP_COUNT; op++)
        macs[op] *= config->num_layers;
    /* linear1 and linear2, and linear1_gate when gated */
    uint64_t linears = config->ffn_gated ? 3 : 2;
    macs[CLATTN_OP_FEED_FORWARD] = (uint64_t)config->num_layers * linears * batch * seq *
                                   config->d_model * config->dim_feedforward;
    return CLATTN_OK;
}

/* One layer's parts: an attention block (projections with biases), the feed-forward block. */
static uint64_t attention_params(const clattn_encoder_config *c)
{
    uint64_t d = c->d_model, h = c->nhead;
    uint64_t dk = c->head_dim_qk ? c->head_dim_qk : d / h;
    uint64_t dv = c->head_dim_v ? c->head_dim_v : d / h;
    uint64_t P = h * (2 * dk + dv);
    return P * d + d * h * dv + (c->linear_no_bias ? 0 : P + d);
}

static uint64_t feed_forward_params(const clattn_encoder_config *c)
{
    uint64_t d = c->d_model, ff = c->dim_feedforward, up = c->ffn_gated ? 2 * ff : ff;
    return up * d + d * ff + (c->linear_no_bias ? 0 : up + d);
}

clattn_status clattn_encoder_count_params(const clattn_encoder_config *config, uint64_t *params)
{
    static const char fn[] = "clattn_encoder_count_params";
    clattn_status status = check_encoder_config(config, fn);
    if (status != CLATTN_OK)
        return status;
    CLATTN_CHECK_ARG(NULL, fn, params, "params is NULL");
    uint64_t d = config->d_model;
    uint64_t norm = config->norm_no_bias ? d : 2 * d; /* weight, and bias unless dropped */
    *params = config->num_layers *
                  (attention_params(config) + feed_forward_params(config) + 2 * norm) +
              (config->final_norm ? norm : 0) + config->vocab_size * d -
              (config->first_norm1_identity ? norm : 0); /* layer 0 without norm1 */
    return CLATTN_OK;
}

clattn_status clattn_transformer_count_params(const clattn_encoder_config *config, size_t vocab,
                                              uint64_t *params)
{
    static const char fn[] = "clattn_transformer_count_params";
    clattn_status status = check_encoder_config(config, fn);
    if (status != CLATTN_OK)
        return status;
    CLATTN_CHECK_ARG(NULL, fn, params, "params is NULL");
    uint64_t d = config->d_model, N = config->num_layers;
    uint64_t encoder_layer = attention_params(config) + feed_forward_params(config) + 4 * d;
    uint64_t decoder_layer = 2 * attention_params(config) + feed_forward_params(config) + 6 * d;
    *params = N * (encoder_layer + decoder_layer) + 4 * d /* encoder.norm, decoder.norm */ +
              (uint64_t)vocab * d /* one embedding matrix, shared */;
    return CLATTN_OK;
}
