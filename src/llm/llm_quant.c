/* A GGUF file's linear weights kept in their stored types on the device, each split by rows
 * over buffers within the device's largest allocation where it is larger, and the token
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

/* Rows [first, first + rows) of t (k values each) as `type` into dst: its bytes as stored when
 * the types agree, else dequantised to float32 (exact). */
static clattn_status read_rows(clattn_llm_quant *q, const clattn_gguf_tensor *t, uint32_t type,
                               size_t first, size_t rows, size_t k, void *dst)
{
    size_t block_elements = 0, block_bytes = 0, bytes = 0;
    if (!clattn__ggml_type_info(t->type, &block_elements, &block_bytes, NULL) ||
        block_elements == 0 || k % block_elements != 0 ||
        !clattn__mul_size(rows, k / block_elements * block_bytes, &bytes))
        return clattn__fail_in(q->function, q->g->path, CLATTN_ERROR_FORMAT,
                               "tensor %s: rows of %zu values of type %u", t->name.data, k,
                               t->type);
    uint64_t offset = (uint64_t)first * (k / block_elements * block_bytes);
    if (type == t->type)
        return clattn__gguf_read(q->g, q->function, t, offset, dst, bytes);
    void *raw = malloc(bytes ? bytes : 1);
    if (!raw)
        return clattn__fail_in(q->function, q->g->path, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                               "out of host memory for tensor %s", t->name.data);
    clattn_status status = clattn__gguf_read(q->g, q->function, t, offset, raw, bytes);
    if (status == CLATTN_OK && !clattn__ggml_dequantize(t->type, raw, rows * k, (float *)dst))
        status = clattn__fail_in(q->function, q->g->path, CLATTN_ERROR_FORMAT,
                                 "tensor %s: its type %u cannot be dequantised", t->name.data,
                                 t->type);
    free(raw);
    return status;
}

/* The tensors of a request, resolved: each in the file with ne {k, rows[i]}, and the type they
 * are kept in (theirs when they share one the kernels run, else float32) with its row size.
 * False: leave the request to the float path (which names what is wrong). */
typedef struct request {
    const clattn_gguf_tensor *t[MAX_PARTS];
    size_t count, total_rows, row_bytes;
    uint32_t type;
} request;

static bool resolve(clattn_llm_quant *q, const char *const *names, const size_t *rows,
                    size_t count, size_t k, request *r)
{
    memset(r, 0, sizeof(*r));
    if (count == 0 || count > MAX_PARTS)
        return false;
    bool same = true;
    for (size_t i = 0; i < count; i++) {
        char gname[160];
        if (!clattn__llm_gguf_name(names[i], gname, sizeof(gname)))
            return false;
        r->t[i] = clattn__gguf_tensor(q->g, gname);
        if (!r->t[i] || r->t[i]->n_dims != 2 || r->t[i]->ne[0] != k || r->t[i]->ne[1] != rows[i])
            return false;
        r->total_rows += rows[i];
        same = same && r->t[i]->type == r->t[0]->type;
    }
    r->count = count;
    /* Parts of different types are stacked as float32, which the kernels run too, unless
     * clattn__llm_quant_weight keeps each type's run as its own chain. */
    r->type = same ? r->t[0]->type : CLATTN_GGML_F32;
    size_t block_elements, block_bytes;
    if (!clattn__qlinear_type_supported(r->type, &block_elements, &block_bytes) ||
        k % block_elements != 0) {
        r->type = CLATTN_GGML_F32;
        if (!clattn__qlinear_type_supported(r->type, &block_elements, &block_bytes) ||
            k % block_elements != 0)
            return false;
    }
    r->row_bytes = k / block_elements * block_bytes;
    return true;
}

/* Rows [first, first + rows) of the request's stacked weight (k values each) uploaded as one
 * weight kept in the model's list: *out. */
static clattn_status upload_rows(clattn_llm_quant *q, const request *r, size_t first, size_t rows,
                                 size_t k, clattn_gemm_quant **out)
{
    size_t total = rows * r->row_bytes; /* within the device's largest allocation */
    unsigned char *data = malloc(total ? total : 1);
    if (!data)
        return clattn__fail_in(q->function, q->g->path, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                               "out of host memory for tensor %s", r->t[0]->name.data);
    clattn_status status = CLATTN_OK;
    size_t at = 0, start = 0; /* start: the first stacked row of tensor i */
    for (size_t i = 0; i < r->count && status == CLATTN_OK; i++) {
        size_t n = (size_t)r->t[i]->ne[1];
        size_t lo = first > start ? first : start;
        size_t hi = first + rows < start + n ? first + rows : start + n;
        if (lo < hi) {
            if (r->type == r->t[i]->type && r->t[i]->bytes != n * r->row_bytes)
                status = clattn__fail_in(q->function, q->g->path, CLATTN_ERROR_FORMAT,
                                         "tensor %s holds %llu bytes, not %zu", r->t[i]->name.data,
                                         (unsigned long long)r->t[i]->bytes, n * r->row_bytes);
            else
                status = read_rows(q, r->t[i], r->type, lo - start, hi - lo, k, data + at);
            at += (hi - lo) * r->row_bytes;
        }
        start += n;
    }
    if (status == CLATTN_OK && !q->prog)
        status = clattn__qlinear_program_create(q->ctx, &q->prog);
    clattn_gemm_quant *w = NULL;
    if (status == CLATTN_OK && !(w = calloc(1, sizeof(*w))))
        status = clattn__fail(q->ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                              "%s: out of host memory", q->function);
    if (status == CLATTN_OK) {
        w->prog = q->prog;
        status = clattn__qweight_upload(q->ctx, r->type, rows, k, data, total, &w->w);
        if (status != CLATTN_OK)
            free(w);
        else if ((status = keep(q, w)) == CLATTN_OK)
            *out = w;
    }
    free(data);
    return status;
}

/* The device's largest allocation in bytes. */
static uint64_t max_alloc(clattn_llm_quant *q)
{
    clattn_device_info info;
    if (clattn_context_device_info(q->ctx, &info) != CLATTN_OK)
        return 0;
    return info.max_alloc_bytes;
}

size_t clattn__llm_split_parts(size_t rows, size_t row_bytes, uint64_t cap)
{
    if (row_bytes == 0 || rows == 0)
        return 1;
    uint64_t fit = cap / row_bytes; /* rows per buffer */
    if (fit == 0)
        return 0;
    return (size_t)(((uint64_t)rows + fit - 1) / fit);
}

size_t clattn__llm_split_first(size_t rows, size_t parts, size_t p)
{
    return (size_t)((uint64_t)rows * p / parts);
}

/* The request's rows over as many buffers as the device's largest allocation needs, chained in
 * order (ops/linear.h's clattn_gemm_quant.next) and appended to the chain *first .. *last (both
 * NULL for a new chain; both updated); *parts their number. One row larger than the allocation
 * is refused naming the tensors and the numbers. */
static clattn_status upload_chain(clattn_llm_quant *q, const request *r, size_t k,
                                  const clattn_gemm_quant **first, clattn_gemm_quant **last,
                                  size_t *parts)
{
    uint64_t cap = max_alloc(q);
    size_t count = clattn__llm_split_parts(r->total_rows, r->row_bytes, cap);
    if (count == 0) {
        char list[MAX_PARTS * 160] = "";
        for (size_t i = 0, used = 0; i < r->count && used < sizeof(list); i++)
            used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%s", i ? " | " : "",
                                     r->t[i]->name.data);
        return clattn__fail_in(q->function, q->g->path, CLATTN_ERROR_TOO_LARGE,
                               "%s: one row of %zu bytes is more than the device's largest "
                               "allocation (CL_DEVICE_MAX_MEM_ALLOC_SIZE) of %llu bytes",
                               list, r->row_bytes, (unsigned long long)cap);
    }
    for (size_t p = 0; p < count; p++) {
        size_t lo = clattn__llm_split_first(r->total_rows, count, p);
        size_t hi = clattn__llm_split_first(r->total_rows, count, p + 1);
        clattn_gemm_quant *w = NULL;
        /* On a failure the parts uploaded are in the model's list, released with it. */
        clattn_status status = upload_rows(q, r, lo, hi - lo, k, &w);
        if (status != CLATTN_OK)
            return status;
        if (*last)
            (*last)->next = w;
        else
            *first = w;
        *last = w;
    }
    *parts = count;
    return CLATTN_OK;
}

clattn_status clattn__llm_quant_weight(void *user, const char *const *names, const size_t *rows,
                                       size_t count, size_t k, const clattn_gemm_quant **out)
{
    clattn_llm_quant *q = user;
    *out = NULL;
    request all;
    if (!resolve(q, names, rows, count, k, &all))
        return CLATTN_OK;
    /* Parts of different types (a Q4_K_M file's Q6_K attn_v beside Q4_K q and k): each run of
     * consecutive tensors of one type is a chain of its own, and the chains are linked in
     * order, each part writing its own columns (as a split weight's parts do). All runs are
     * resolved before any is uploaded: one the kernels cannot run leaves the whole request to
     * resolve's float32 stack. */
    bool mixed = false;
    for (size_t i = 1; i < all.count; i++)
        mixed = mixed || all.t[i]->type != all.t[0]->type;
    request runs[MAX_PARTS];
    size_t n_runs = 0;
    for (size_t i = 0, j; mixed && i < all.count; i = j) {
        for (j = i + 1; j < all.count && all.t[j]->type == all.t[i]->type; j++)
            ;
        if (!resolve(q, names + i, rows + i, j - i, k, &runs[n_runs]) ||
            runs[n_runs].type != all.t[i]->type) {
            n_runs = 0; /* a run the kernels cannot run in its own type */
            break;
        }
        n_runs++;
    }
    if (n_runs < 2) {
        runs[0] = all;
        n_runs = 1;
    }
    const clattn_gemm_quant *first = NULL;
    clattn_gemm_quant *last = NULL;
    for (size_t i = 0; i < n_runs; i++) {
        size_t parts = 0;
        /* On a failure the parts uploaded are in the model's list, released with it. */
        clattn_status status = upload_chain(q, &runs[i], k, &first, &last, &parts);
        if (status != CLATTN_OK)
            return status;
    }
    *out = first;
    return CLATTN_OK;
}

clattn_status clattn__llm_quant_split(clattn_llm_quant *q, const char *name, size_t rows,
                                      size_t k, clattn_llm_split *out)
{
    memset(out, 0, sizeof(*out));
    request r;
    if (!resolve(q, &name, &rows, 1, k, &r))
        return CLATTN_OK;
    const clattn_gemm_quant *first = NULL;
    clattn_gemm_quant *last = NULL;
    size_t parts = 0;
    clattn_status status = upload_chain(q, &r, k, &first, &last, &parts);
    if (status == CLATTN_OK)
        *out = (clattn_llm_split){first, parts};
    return status;
}

clattn_status clattn__llm_split_linear(clattn_context *ctx, const clattn_llm_split *s, size_t m,
                                       cl_mem x, size_t x_offset, size_t ldx, cl_mem y,
                                       size_t y_offset, size_t ldy)
{
    size_t k = s->first->w.k;
    clattn_gemm_weight w = {NULL, 0, clattn__gemm_quant_rows(s->first, k), k, k, NULL, NULL,
                            s->first};
    return clattn__linear(ctx, CLATTN_OP_OTHER, m, x, x_offset, ldx, &w, NULL, 0,
                          CLATTN_ACT_NONE, y, y_offset, ldy);
}

void clattn__llm_split_release(clattn_llm_split *s)
{
    s->first = NULL; /* the parts are in the model's list, released with it */
    s->count = 0;
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
