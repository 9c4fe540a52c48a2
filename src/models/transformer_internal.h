/* The encoder–decoder model's state and the steps that generation (generate.c) builds on. */
#ifndef CLATTN_TRANSFORMER_INTERNAL_H
#define CLATTN_TRANSFORMER_INTERNAL_H

#include "clattn/transformer.h"

#include "runtime/gemm.h"

struct clattn_transformer {
    clattn_context *ctx;
    clattn_encoder *encoder;
    clattn_decoder *decoder;
    cl_mem tgt_embedding;           /* [V_tgt, E] */
    cl_mem generator_w, generator_b; /* [V_tgt, E] (NULL when tied), [V_tgt] or NULL */
    clattn_gemm_weight generator;   /* the output projection as the GEMMs read it */
    clattn_transformer_info info;
    bool sinusoidal;                /* the embeddings add the sinusoidal table (metadata
                                     * "positional"; else RoPE, ALiBi or nothing) */
};

/* The source through the encoder: memory [B, S, E] (new), and the padding as a float key-padding
 * mask [B, S] (new; NULL without padding). */
clattn_status clattn__transformer_encode(clattn_transformer *m, const char *fn,
                                         const int64_t *src, size_t B, size_t S,
                                         const uint8_t *padding, clattn_tensor **memory,
                                         clattn_tensor **mask);
/* x [B, n, E] = tgt_embedding[ids]·√E (+ PE[offset + t] with m->sinusoidal) for host ids
 * [B, n]. */
clattn_status clattn__transformer_embed(clattn_transformer *m, const char *fn,
                                        const int64_t *ids, size_t B, size_t n, size_t offset,
                                        clattn_tensor *x);
/* logits [rows, V] = h [rows, E]·generatorᵀ + bias. */
clattn_status clattn__transformer_logits(clattn_transformer *m, const clattn_tensor *h,
                                         size_t rows, clattn_tensor *logits);
/* src non-NULL, B and S positive. */
clattn_status clattn__transformer_check_src(clattn_transformer *m, const char *fn,
                                            const int64_t *src, size_t B, size_t S);

#endif /* CLATTN_TRANSFORMER_INTERNAL_H */
