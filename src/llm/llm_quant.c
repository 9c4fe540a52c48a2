/* A GGUF file's linear weights kept in their stored types on the device, and the token
 * embedding's rows read from the file as they are needed (llm_model.h). */
#include "llm_model.h"
#include "base/sizes.h"
#include "formats/ggml_dequant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The tensors of a request, at most this many (q|k|v). */
#define MAX_PARTS 4

/* Keeps w in the model's list (the list owns it from here on, whatever happens). */
static clattn_status keep(clattn_llm_quant *q, clattn_gemm_quant *w)
{
    if (q->count == q->capacity) {
        size_t cap = q->capacity ? 2 * q->capacity : 64;
        clattn_gemm_quant **grown = realloc(q->weights, cap * sizeof(*grown));
        if (!grown) {
            clattn__qweight_release(&w->w);
            free(w);
            return clattn__fail(q->ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                                "%s: out of host memory for the weights' list", q->function);
        }
        q->weights = grown;
        q->capacity = cap;
    }
    q->weights[q->count++] = w;
    return CLATTN_OK;
}

/* The rows of t (rows × k values of its type) as `type` into dst: its bytes as stored when the
 * types agree, else dequantised to float32 (exact). */
static clattn_status read_rows(clattn_llm_quant *q, const clattn_gguf_tensor *t, uint32_t type,
                               size_t bytes, void *dst)
{
    if (type == t->type)
        return clattn__gguf_read(q->g, q->function, t, 0, dst, bytes);
    void *raw = malloc(t->bytes ? (size_t)t->bytes : 1);
    if (!raw)
        return clattn__fail_in(q->function, q->g->path, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                               "out of host memory for tensor %s", t->name.data);
    clattn_status status = clattn__gguf_read(q->g, q->function, t, 0, raw, (size_t)t->bytes);
    if (status == CLATTN_OK &&
        !clattn__ggml_dequantize(t->type, raw, (size_t)t->elements, (float *)dst))
        status = clattn__fail_in(q->function, q->g->path, CLATTN_ERROR_FORMAT,
                                 "tensor %s: its type %u cannot be dequantised", t->name.data,
                                 t->type);
    free(raw);
    return status;
}

clattn_status clattn__llm_quant_weight(void *user, const char *const *names, const size_t *rows,
                                       size_t count, size_t k, const clattn_gemm_quant **out)
{
    clattn_llm_quant *q = user;
    *out = NULL;
    if (count == 0 || count > MAX_PARTS)
        return CLATTN_OK;
    const clattn_gguf_tensor *t[MAX_PARTS];
    size_t total_rows = 0;
    bool same = true;
    for (size_t i = 0; i < count; i++) {
        char gname[160];
        if (!clattn__llm_gguf_name(names[i], gname, sizeof(gname)))
            return CLATTN_OK;
        t[i] = clattn__gguf_tensor(q->g, gname);
        /* Anything unexpected is left to the float path, which names it. */
        if (!t[i] || t[i]->n_dims != 2 || t[i]->ne[0] != k || t[i]->ne[1] != rows[i])
            return CLATTN_OK;
        total_rows += rows[i];
        same = same && t[i]->type == t[0]->type;
    }
    /* Parts of different types (a Q4_K_M file's Q6_K attn_v beside Q4_K q and k) are stacked
     * as float32, which the kernels run too. */
    uint32_t type = same ? t[0]->type : CLATTN_GGML_F32;
    size_t block_elements, block_bytes;
    if (!clattn__qlinear_type_supported(type, &block_elements, &block_bytes) ||
        k % block_elements != 0) {
        type = CLATTN_GGML_F32;
        if (!clattn__qlinear_type_supported(type, &block_elements, &block_bytes) ||
            k % block_elements != 0)
            return CLATTN_OK;
    }
    size_t row_bytes = k / block_elements * block_bytes, total;
    if (!clattn__mul_size(total_rows, row_bytes, &total))
        return CLATTN_OK;
    unsigned char *data = malloc(total ? total : 1);
    if (!data)
        return clattn__fail_in(q->function, q->g->path, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                               "out of host memory for tensor %s", t[0]->name.data);
    clattn_status status = CLATTN_OK;
    size_t at = 0;
    for (size_t i = 0; i < count && status == CLATTN_OK; i++) {
        size_t bytes = rows[i] * row_bytes;
        if (type == t[i]->type && t[i]->bytes != bytes)
            status = clattn__fail_in(q->function, q->g->path, CLATTN_ERROR_FORMAT,
                                     "tensor %s holds %llu bytes, not %zu", t[i]->name.data,
                                     (unsigned long long)t[i]->bytes, bytes);
        else
            status = read_rows(q, t[i], type, bytes, data + at);
        at += bytes;
    }
    if (status == CLATTN_OK && !q->prog)
        status = clattn__qlinear_program_create(q->ctx, &q->prog);
    clattn_gemm_quant *w = NULL;
    if (status == CLATTN_OK && !(w = calloc(1, sizeof(*w))))
        status = clattn__fail(q->ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                              "%s: out of host memory", q->function);
    if (status == CLATTN_OK) {
        w->prog = q->prog;
        status = clattn__qweight_upload(q->ctx, type, total_rows, k, data, total, &w->w);
        if (status != CLATTN_OK)
            free(w);
        else if ((status = keep(q, w)) == CLATTN_OK)
            *out = w;
    }
    free(data);
    return status;
}

void clattn__llm_quant_release(clattn_llm_quant *q)
{
    for (size_t i = 0; i < q->count; i++) {
        clattn__qweight_release(&q->weights[i]->w);
        free(q->weights[i]);
    }
    free(q->weights);
    q->weights = NULL;
    q->count = q->capacity = 0;
    clattn__qlinear_program_release(q->prog);
    q->prog = NULL;
}

clattn_status clattn__llm_embed_rows(const clattn_gguf *g, const char *function,
                                     const clattn_gguf_tensor *t, const int32_t *ids, size_t n,
                                     float *dst)
{
    size_t d = (size_t)t->ne[0], block_elements = 0, block_bytes = 0;
    if (!clattn__ggml_type_info(t->type, &block_elements, &block_bytes, NULL) ||
        block_elements == 0 || d % block_elements != 0)
        return clattn__fail_in(function, g->path, CLATTN_ERROR_FORMAT,
                               "tensor %s: rows of %zu values of type %u", t->name.data, d,
                               t->type);
    size_t row_bytes = d / block_elements * block_bytes;
    unsigned char *raw = malloc(row_bytes ? row_bytes : 1);
    if (!raw)
        return clattn__fail_in(function, g->path, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                               "out of host memory for a row of %s", t->name.data);
    clattn_status status = CLATTN_OK;
    for (size_t r = 0; r < n && status == CLATTN_OK; r++) {
        status = clattn__gguf_read(g, function, t, (uint64_t)ids[r] * row_bytes, raw, row_bytes);
        if (status == CLATTN_OK && !clattn__ggml_dequantize(t->type, raw, d, dst + r * d))
            status = clattn__fail_in(function, g->path, CLATTN_ERROR_FORMAT,
                                     "tensor %s: its type %u cannot be dequantised",
                                     t->name.data, t->type);
    }
    free(raw);
    return status;
}
