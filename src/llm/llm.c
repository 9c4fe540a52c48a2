/* The public decoder-only LLM (clattn/llm.h) over llm_model.h. */
#include "clattn/llm.h"
#include "llm_model.h"
#include "llm_text_internal.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct clattn_llm {
    clattn_llm_model *model;
};

struct clattn_llm_cache {
    clattn_llm *llm;
    clattn_kv_state *kv;
};

clattn_status clattn_llm_load(clattn_context *ctx, const char *path, clattn_llm **out)
{
    static const char fn[] = "clattn_llm_load";
    CLATTN_CHECK_ARG(ctx, fn, ctx, "ctx is NULL");
    CLATTN_CHECK_ARG(ctx, fn, out, "llm is NULL");
    *out = NULL;
    clattn_llm *llm = calloc(1, sizeof(*llm));
    if (!llm)
        return clattn__fail(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory", fn);
    clattn_status status = clattn__llm_model_load(ctx, fn, path, &llm->model);
    if (status != CLATTN_OK) {
        free(llm);
        return status;
    }
    *out = llm;
    return CLATTN_OK;
}

void clattn_llm_destroy(clattn_llm **llm)
{
    if (!llm || !*llm)
        return;
    clattn__llm_model_free(&(*llm)->model);
    free(*llm);
    *llm = NULL;
}

clattn_status clattn_llm_set_precision(clattn_llm *llm, clattn_precision precision)
{
    static const char fn[] = "clattn_llm_set_precision";
    CLATTN_CHECK_ARG(NULL, fn, llm, "llm is NULL");
    clattn_context *ctx = llm->model->ctx;
    CLATTN_CHECK_ARG(ctx, fn,
                     precision == CLATTN_PRECISION_FP32 || precision == CLATTN_PRECISION_BF16 ||
                         precision == CLATTN_PRECISION_INT8,
                     "precision %d is not a clattn_precision", (int)precision);
    if (precision == CLATTN_PRECISION_BF16)
        return clattn__fail(ctx, CLATTN_ERROR_UNSUPPORTED,
                            "%s: an LLM's activations are fp32 or int8, not bf16", fn);
    const clattn_llm_quant *quant = &llm->model->quant;
    bool blocks = false;
    for (size_t i = 0; i < quant->count; i++)
        blocks = blocks || clattn__qlinear_type_int8(quant->weights[i]->w.type);
    clattn_qlinear_program *prog = quant->prog;
    if (!prog || !blocks) {
        if (precision == CLATTN_PRECISION_FP32)
            return CLATTN_OK;
        return clattn__fail(ctx, CLATTN_ERROR_UNSUPPORTED,
                            "%s: int8 activations need weights in a block type (Q4_0, Q4_1, "
                            "Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K); this model's are float",
                            fn);
    }
    return clattn__qlinear_set_activations(
        ctx, prog,
        precision == CLATTN_PRECISION_INT8 ? CLATTN_QLINEAR_INT8 : CLATTN_QLINEAR_FLOAT);
}

const clattn_gguf *clattn__llm_gguf(const clattn_llm *llm) { return llm->model->g; }

clattn_status clattn_llm_get_info(const clattn_llm *llm, clattn_llm_info *info)
{
    static const char fn[] = "clattn_llm_get_info";
    CLATTN_CHECK_ARG(NULL, fn, llm, "llm is NULL");
    CLATTN_CHECK_ARG(llm->model->ctx, fn, info, "info is NULL");
    const clattn_llm_config *c = &llm->model->cfg;
    memset(info, 0, sizeof(*info));
    info->architecture = c->arch;
    info->vocab_size = c->vocab;
    info->context_length = c->context_length;
    info->num_layers = c->spec.num_layers;
    info->d_model = c->spec.d_model;
    info->d_ff = c->spec.d_ff;
    info->num_heads = c->spec.nhead;
    info->num_kv_heads = c->spec.kv_heads;
    info->head_dim = c->spec.head_dim_qk;
    info->tied_embeddings = c->tied;
    return CLATTN_OK;
}

clattn_status clattn_llm_logits(clattn_llm *llm, const int32_t *ids, size_t n, float *logits)
{
    static const char fn[] = "clattn_llm_logits";
    CLATTN_CHECK_ARG(NULL, fn, llm, "llm is NULL");
    clattn_context *ctx = llm->model->ctx;
    CLATTN_CHECK_ARG(ctx, fn, ids && logits, "ids or logits is NULL");
    CLATTN_CHECK_ARG(ctx, fn, n > 0, "n is 0");
    return clattn__llm_logits(llm->model, fn, ids, n, logits);
}

clattn_status clattn_llm_cache_create(clattn_llm *llm, size_t max_sequences, size_t capacity,
                                      clattn_llm_cache_type type, clattn_llm_cache **out)
{
    static const char fn[] = "clattn_llm_cache_create";
    CLATTN_CHECK_ARG(NULL, fn, llm, "llm is NULL");
    clattn_context *ctx = llm->model->ctx;
    CLATTN_CHECK_ARG(ctx, fn, out, "cache is NULL");
    *out = NULL;
    CLATTN_CHECK_ARG(ctx, fn, type == CLATTN_LLM_CACHE_FLOAT || type == CLATTN_LLM_CACHE_HALF,
                     "type is %d", (int)type);
    clattn_llm_cache *cache = calloc(1, sizeof(*cache));
    if (!cache)
        return clattn__fail(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory", fn);
    cache->llm = llm;
    clattn_status status = clattn__llm_state_create(llm->model, fn, max_sequences, capacity,
                                                    type == CLATTN_LLM_CACHE_HALF, &cache->kv);
    if (status != CLATTN_OK) {
        free(cache);
        return status;
    }
    *out = cache;
    return CLATTN_OK;
}

void clattn_llm_cache_destroy(clattn_llm_cache **cache)
{
    if (!cache || !*cache)
        return;
    clattn__kv_state_destroy(&(*cache)->kv);
    free(*cache);
    *cache = NULL;
}

clattn_status clattn_llm_sequence_add(clattn_llm_cache *cache, size_t *seq)
{
    static const char fn[] = "clattn_llm_sequence_add";
    CLATTN_CHECK_ARG(NULL, fn, cache, "cache is NULL");
    CLATTN_CHECK_ARG(cache->kv->ctx, fn, seq, "seq is NULL");
    return clattn__kv_state_acquire(cache->kv, fn, seq);
}

clattn_status clattn_llm_sequence_remove(clattn_llm_cache *cache, size_t seq)
{
    static const char fn[] = "clattn_llm_sequence_remove";
    CLATTN_CHECK_ARG(NULL, fn, cache, "cache is NULL");
    return clattn__kv_state_release_slot(cache->kv, fn, seq);
}

clattn_status clattn_llm_sequence_length(const clattn_llm_cache *cache, size_t seq,
                                         size_t *length)
{
    static const char fn[] = "clattn_llm_sequence_length";
    CLATTN_CHECK_ARG(NULL, fn, cache, "cache is NULL");
    const clattn_kv_state *kv = cache->kv;
    CLATTN_CHECK_ARG(kv->ctx, fn, length, "length is NULL");
    CLATTN_CHECK_ARG(kv->ctx, fn, seq < kv->batch && kv->in_use[seq],
                     "sequence %zu is not in the cache (%zu sequences)", seq, kv->batch);
    *length = kv->lengths[seq];
    return CLATTN_OK;
}

clattn_status clattn_llm_cache_get_capacity(const clattn_llm_cache *cache,
                                            size_t *max_sequences, size_t *capacity)
{
    static const char fn[] = "clattn_llm_cache_get_capacity";
    CLATTN_CHECK_ARG(NULL, fn, cache, "cache is NULL");
    if (max_sequences)
        *max_sequences = cache->kv->batch;
    if (capacity)
        *capacity = cache->kv->capacity;
    return CLATTN_OK;
}

clattn_status clattn_llm_sequence_room(const clattn_llm_cache *cache, size_t seq, size_t *room)
{
    static const char fn[] = "clattn_llm_sequence_room";
    CLATTN_CHECK_ARG(NULL, fn, cache, "cache is NULL");
    const clattn_kv_state *kv = cache->kv;
    CLATTN_CHECK_ARG(kv->ctx, fn, room, "room is NULL");
    CLATTN_CHECK_ARG(kv->ctx, fn, seq < kv->batch && kv->in_use[seq],
                     "sequence %zu is not in the cache (%zu sequences)", seq, kv->batch);
    *room = kv->capacity - kv->lengths[seq];
    return CLATTN_OK;
}

clattn_status clattn_llm_sequence_truncate(clattn_llm_cache *cache, size_t seq, size_t length)
{
    static const char fn[] = "clattn_llm_sequence_truncate";
    CLATTN_CHECK_ARG(NULL, fn, cache, "cache is NULL");
    return clattn__kv_state_truncate(cache->kv, fn, seq, length);
}

clattn_status clattn_llm_sequence_copy(clattn_llm_cache *cache, size_t from, size_t to)
{
    static const char fn[] = "clattn_llm_sequence_copy";
    CLATTN_CHECK_ARG(NULL, fn, cache, "cache is NULL");
    return clattn__kv_state_copy(cache->kv, fn, from, to);
}

clattn_status clattn_llm_prompt(clattn_llm_cache *cache, size_t seq, const int32_t *ids,
                                size_t n, float *logits)
{
    static const char fn[] = "clattn_llm_prompt";
    CLATTN_CHECK_ARG(NULL, fn, cache, "cache is NULL");
    clattn_context *ctx = cache->kv->ctx;
    CLATTN_CHECK_ARG(ctx, fn, ids, "ids is NULL");
    CLATTN_CHECK_ARG(ctx, fn, n > 0, "n is 0");
    return clattn__llm_step(cache->llm->model, fn, cache->kv, &seq, 1, n, ids, false, logits);
}

clattn_status clattn_llm_decode(clattn_llm_cache *cache, const size_t *seqs, const int32_t *ids,
                                size_t count, float *logits)
{
    static const char fn[] = "clattn_llm_decode";
    CLATTN_CHECK_ARG(NULL, fn, cache, "cache is NULL");
    clattn_context *ctx = cache->kv->ctx;
    CLATTN_CHECK_ARG(ctx, fn, seqs && ids && logits, "seqs, ids or logits is NULL");
    CLATTN_CHECK_ARG(ctx, fn, count > 0, "count is 0");
    return clattn__llm_step(cache->llm->model, fn, cache->kv, seqs, count, 1, ids, false,
                            logits);
}
