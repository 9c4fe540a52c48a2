/* The engines of engine.h: each adapts one library model to the scheduler's one call. */
#include "engine.h"

static clattn_status run_sentence_model(void *model, const int32_t *const *ids,
                                        const int32_t *const *type_ids, const size_t *lengths,
                                        size_t count, int normalize, size_t max_batch_tokens,
                                        float *rows)
{
    (void)type_ids;
    clattn_embed_params params;
    clattn_embed_params_default(&params);
    params.max_batch_tokens = max_batch_tokens;
    params.normalize = normalize;
    return clattn_sentence_model_embed_ids(model, ids, lengths, count, rows, &params, NULL);
}

clattn_status serve_engine_of_sentence_model(serve_engine *engine, clattn_sentence_model *model)
{
    clattn_sentence_model_info info;
    clattn_status status = clattn_sentence_model_get_info(model, &info);
    if (status != CLATTN_OK)
        return status;
    *engine = (serve_engine){.model = model,
                             .run = run_sentence_model,
                             .width = info.hidden_size,
                             .max_length = info.max_length,
                             .vocab_size = info.vocab_size,
                             .normalize = info.normalize != 0};
    return CLATTN_OK;
}

static clattn_status run_cross_encoder(void *model, const int32_t *const *ids,
                                       const int32_t *const *type_ids, const size_t *lengths,
                                       size_t count, int normalize, size_t max_batch_tokens,
                                       float *rows)
{
    (void)normalize;
    clattn_cross_encoder_params params;
    clattn_cross_encoder_params_default(&params);
    params.max_batch_tokens = max_batch_tokens;
    params.activation = CLATTN_SCORES_RAW;
    return clattn_cross_encoder_score_ids(model, ids, type_ids, lengths, count, rows, &params,
                                          NULL);
}

clattn_status serve_engine_of_cross_encoder(serve_engine *engine, clattn_cross_encoder *model)
{
    clattn_cross_encoder_info info;
    clattn_status status = clattn_cross_encoder_get_info(model, &info);
    if (status != CLATTN_OK)
        return status;
    *engine = (serve_engine){.model = model,
                             .run = run_cross_encoder,
                             .width = info.num_labels,
                             .max_length = info.max_length,
                             .vocab_size = info.vocab_size,
                             .normalize = 0};
    return CLATTN_OK;
}
