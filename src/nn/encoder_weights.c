/* Loading the encoder's weights by their PyTorch names (the layers through the block stack,
 * the embeddings here), and seeded random initialisation. */
#include "encoder_internal.h"
#include "runtime/buffers.h"

#include <string.h>

static const char fn_load[] = "clattn_encoder_load_weights";

void clattn__encoder_weights_release(clattn_encoder_weights *w)
{
    clattn__release_mem(&w->embedding), clattn__release_mem(&w->pos_embedding);
    clattn__release_mem(&w->type_embedding);
    clattn__norm_release(&w->embedding_norm);
}

/* The tables before the first layer, loaded after the stack's weights: they replace the
 * encoder's when all of them load. */
static clattn_status load_embeddings(void *owner, const clattn_weight_loader *l)
{
    clattn_encoder *enc = owner;
    const clattn_encoder_config *c = &enc->cfg;
    size_t d = c->d_model;
    clattn_encoder_weights w;
    memset(&w, 0, sizeof(w));
    clattn_status status = CLATTN_OK;
    if (c->vocab_size)
        status = clattn__load_tensor(l, "embedding.weight", 2, (size_t[]){c->vocab_size, d},
                                     &w.embedding);
    if (status == CLATTN_OK && (c->positional == CLATTN_POSITIONAL_LEARNED ||
                                c->positional == CLATTN_POSITIONAL_LEARNED_PADDED))
        status = clattn__load_tensor(l, "pos_embedding.weight", 2,
                                     (size_t[]){c->max_positions, d}, &w.pos_embedding);
    if (status == CLATTN_OK && c->type_vocab_size)
        status = clattn__load_tensor(l, "token_type_embedding.weight", 2,
                                     (size_t[]){c->type_vocab_size, d}, &w.type_embedding);
    if (status == CLATTN_OK && c->embedding_norm)
        status = clattn__load_norm(l, "embedding_norm", d, !c->norm_no_bias, &w.embedding_norm);
    if (status != CLATTN_OK) {
        clattn__encoder_weights_release(&w);
        return status;
    }
    clattn__encoder_weights_release(&enc->weights);
    enc->weights = w;
    return CLATTN_OK;
}

clattn_status clattn_encoder_load_weights(clattn_encoder *enc, clattn_weight_lookup lookup,
                                          void *user_data)
{
    CLATTN_CHECK_ARG(NULL, fn_load, enc, "encoder is NULL");
    return clattn__block_stack_load(&enc->stack, fn_load, lookup, user_data, load_embeddings, enc);
}

clattn_status clattn_encoder_init_random(clattn_encoder *enc, uint64_t seed)
{
    static const char fn[] = "clattn_encoder_init_random";
    CLATTN_CHECK_ARG(NULL, fn, enc, "encoder is NULL");
    return clattn__block_stack_init_random(&enc->stack, fn, fn_load, seed, load_embeddings, enc);
}
