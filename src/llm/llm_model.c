/* A decoder-only model from a GGUF file: loading and running (llm_model.h). */
#include "llm_model.h"
#include "base/constants.h"
#include "base/sizes.h"
#include "ops/linear.h"
#include "ops/positional.h"
#include "runtime/buffers.h"
#include "runtime/context_internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- loading ---- */

/* The token embedding and the output projection (the owner's weights of the stack's load): from
 * a GGUF file the output projection kept quantised and the embedding's rows read from the file
 * as needed, else both float32 on the device. */
static clattn_status load_embeddings(void *owner, const clattn_weight_loader *l)
{
    clattn_llm_model *m = owner;
    size_t shape[2] = {m->cfg.vocab, m->cfg.spec.d_model};
    clattn_status status;
    if (l->quant && m->g) {
        const char *name = m->cfg.tied ? "token_embd.weight" : "output.weight";
        if ((status = clattn__llm_quant_split(&m->quant, name, shape[0], shape[1],
                                              &m->output_split)))
            return status;
        if (m->output_split.count) {
            m->embd = clattn__gguf_tensor(m->g, "token_embd.weight");
            return CLATTN_OK;
        }
    }
    cl_mem embedding = NULL, output = NULL;
    status = clattn__load_tensor(l, "token_embd.weight", 2, shape, &embedding);
    if (status == CLATTN_OK && !m->cfg.tied)
        status = clattn__load_tensor(l, "output.weight", 2, shape, &output);
    if (status != CLATTN_OK) {
        clattn__release_mem(&embedding), clattn__release_mem(&output);
        return status;
    }
    m->embedding = embedding;
    m->output_weight = output;
    m->output = (clattn_gemm_weight){output ? output : embedding, 0, shape[0], shape[1],
                                     shape[1], NULL, NULL, NULL};
    return CLATTN_OK;
}

/* The weights of a GGUF file into m (its configuration read first). */
static clattn_status load_gguf(clattn_llm_model *m, const char *fn, const char *path)
{
    clattn_gguf *g = NULL;
    clattn_status status = clattn__gguf_open(fn, path, &g);
    if (status != CLATTN_OK)
        return status;
    m->g = g; /* kept open: the embedding's rows are read from it (closed with the model) */
    clattn_llm_weight_source src;
    memset(&src, 0, sizeof(src));
    src.g = g;
    src.function = fn;
    m->quant.ctx = m->ctx;
    m->quant.function = fn;
    m->quant.g = g;
    if (!(status = clattn__llm_config_read(fn, g, &m->cfg)) &&
        !(status = clattn__llm_weights_check(fn, g, &m->cfg)) &&
        !(status = clattn__block_stack_init(m->ctx, fn, &m->cfg.spec, &m->stack))) {
        status = clattn__block_stack_load_quant(&m->stack, fn, clattn__llm_weight_lookup, &src,
                                                clattn__llm_quant_weight, &m->quant,
                                                load_embeddings, m);
        /* A failure inside the lookup (a read, host memory) says more than "missing". */
        if (status != CLATTN_OK && src.status != CLATTN_OK)
            status = clattn__fail(m->ctx, src.status, "%s", src.message);
    }
    clattn__llm_weight_source_free(&src);
    return status;
}

/* The weights of a Hugging Face folder into m. */
static clattn_status load_hf(clattn_llm_model *m, const char *fn, const char *dir)
{
    clattn_llm_hf hf;
    clattn_status status = clattn__llm_hf_open(fn, dir, &m->cfg, &hf);
    if (status != CLATTN_OK)
        return status;
    if (!(status = clattn__block_stack_init(m->ctx, fn, &m->cfg.spec, &m->stack)))
        status = clattn__block_stack_load(&m->stack, fn, clattn__llm_hf_lookup, &hf,
                                          load_embeddings, m);
    clattn__llm_hf_close(&hf);
    return status;
}

clattn_status clattn__llm_model_load(clattn_context *ctx, const char *fn, const char *path,
                                     clattn_llm_model **out)
{
    CLATTN_CHECK_ARG(ctx, fn, out, "model is NULL");
    *out = NULL;
    CLATTN_CHECK_ARG(ctx, fn, path, "path is NULL");
    clattn_llm_model *m = calloc(1, sizeof(*m));
    if (!m)
        return clattn__fail(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory", fn);
    m->ctx = ctx;
    struct stat st;
    clattn_status status = stat(path, &st) == 0 && S_ISDIR(st.st_mode) ? load_hf(m, fn, path)
                                                                       : load_gguf(m, fn, path);
    if (status != CLATTN_OK) {
        clattn__llm_model_free(&m);
        return status;
    }
    *out = m;
    return CLATTN_OK;
}

void clattn__llm_model_free(clattn_llm_model **mp)
{
    if (!mp || !*mp)
        return;
    clattn_llm_model *m = *mp;
    clattn__block_stack_release(&m->stack);
    clattn__gemm_weight_release(&m->output);
    clattn__llm_split_release(&m->output_split);
    clattn__llm_quant_release(&m->quant); /* after every weight that points to it */
    clattn__gguf_close(&m->g);
    clattn__release_mem(&m->embedding), clattn__release_mem(&m->output_weight);
    clattn__release_mem(&m->hidden), clattn__release_mem(&m->logits);
    free(m);
    *mp = NULL;
}

clattn_status clattn__llm_state_create(clattn_llm_model *m, const char *fn, size_t sequences,
                                       size_t capacity, bool half, clattn_kv_state **state)
{
    const clattn_block_spec *s = &m->cfg.spec;
    CLATTN_CHECK_ARG(m->ctx, fn, sequences > 0 && capacity > 0,
                     "sequences (%zu) and capacity (%zu) must be positive", sequences, capacity);
    return clattn__kv_state_create(m->ctx, fn, s->num_layers, sequences, capacity,
                                   s->kv_heads * s->head_dim_qk, s->kv_heads * s->head_dim_v,
                                   half, false, state);
}

/* ---- running ---- */

/* *buf holds at least rows rows of `width` floats (grown, contents dropped). */
static clattn_status ensure_rows(clattn_llm_model *m, cl_mem *buf, size_t *have, size_t rows,
                                 size_t width, const char *what)
{
    if (*have >= rows)
        return CLATTN_OK;
    size_t bytes;
    if (!clattn__mul_size(rows, width * sizeof(float), &bytes))
        return clattn__fail(m->ctx, CLATTN_ERROR_TOO_LARGE, "%zu rows of %s are too many", rows,
                            what);
    cl_mem grown;
    clattn_status status = clattn__buffer_create(m->ctx, bytes, &grown, what);
    if (status != CLATTN_OK)
        return status;
    clattn__release_mem(buf);
    *buf = grown;
    *have = rows;
    return CLATTN_OK;
}

/* x [tokens, d] (the workspace's CLATTN_SLOT_LAYER_X) = the token embedding's rows of ids. */
static clattn_status embed(clattn_llm_model *m, const char *fn, const int32_t *ids,
                           size_t tokens, cl_mem *x)
{
    clattn_context *ctx = m->ctx;
    size_t d = m->cfg.spec.d_model;
    for (size_t t = 0; t < tokens; t++)
        if (ids[t] < 0 || (size_t)ids[t] >= m->cfg.vocab)
            return clattn__fail(ctx, CLATTN_ERROR_OUT_OF_RANGE,
                                "%s: token id %d (row %zu) is outside the vocabulary [0, %zu)", fn,
                                (int)ids[t], t, m->cfg.vocab);
    clattn_status status;
    if (m->embd) {
        float *rows = malloc(tokens * d * sizeof(float) + 1);
        if (!rows)
            return clattn__fail(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                                "%s: out of host memory for %zu embeddings", fn, tokens);
        if (!(status = clattn__llm_embed_rows(m->g, fn, m->embd, ids, tokens, rows)) &&
            !(status = clattn__workspace_slot(ctx, CLATTN_SLOT_LAYER_X,
                                              tokens * d * sizeof(float), x)))
            status = clattn__write_bytes(ctx, *x, 0, rows, tokens * d * sizeof(float),
                                         "%s: writing the embeddings", fn);
        free(rows);
        return status;
    }
    clattn_embed_args e = {NULL, m->embedding, 1.0f, NULL, 0, NULL, NULL, NULL};
    if ((status = clattn__workspace_slot(ctx, CLATTN_SLOT_TOKEN_IDS, tokens * sizeof(cl_int),
                                         &e.ids)) ||
        (status = clattn__write_bytes(ctx, e.ids, 0, ids, tokens * sizeof(cl_int),
                                      "%s: writing the token ids", fn)) ||
        (status = clattn__workspace_slot(ctx, CLATTN_SLOT_LAYER_X, tokens * d * sizeof(float),
                                         x)))
        return status;
    return clattn__embed(ctx, &e, tokens, tokens, d, *x);
}

/* m->logits [rows, vocab] = the output projection of `rows` rows of m->hidden from x_offset,
 * ldx apart. */
static clattn_status project(clattn_llm_model *m, size_t rows, size_t x_offset, size_t ldx)
{
    size_t V = m->cfg.vocab;
    if (m->output_split.count)
        return clattn__llm_split_linear(m->ctx, &m->output_split, rows, m->hidden, x_offset, ldx,
                                        m->logits, 0, V);
    return clattn__linear(m->ctx, CLATTN_OP_OTHER, rows, m->hidden, x_offset, ldx, &m->output,
                          NULL, 0, CLATTN_ACT_NONE, m->logits, 0, V);
}

clattn_status clattn__llm_step(clattn_llm_model *m, const char *fn, clattn_kv_state *kv,
                               const size_t *slots, size_t count, size_t n, const int32_t *ids,
                               bool all_rows, float *logits)
{
    clattn_context *ctx = m->ctx;
    CLATTN_CHECK_ARG(ctx, fn, kv && slots && ids, "state, slots or ids is NULL");
    CLATTN_CHECK_ARG(ctx, fn, count > 0 && n > 0, "count (%zu) and n (%zu) must be positive",
                     count, n);
    size_t tokens, d = m->cfg.spec.d_model, V = m->cfg.vocab;
    if (!clattn__mul_size(count, n, &tokens) || tokens > UINT32_MAX)
        return clattn__fail(ctx, CLATTN_ERROR_TOO_LARGE, "%s: %zu x %zu tokens are too many", fn,
                            count, n);
    size_t rows = all_rows ? tokens : count;
    /* The logits' rows that fit one buffer (a large vocabulary's logits of a long prompt may
     * not): computed and read chunk by chunk, each row the same bytes in any chunk. */
    uint64_t row_bytes = (uint64_t)V * sizeof(float), chunk = ctx->info.max_alloc_bytes / row_bytes;
    if (logits && chunk == 0)
        return clattn__fail(ctx, CLATTN_ERROR_TOO_LARGE,
                            "%s: one row of logits (%zu floats) is more than the device's largest "
                            "allocation (CL_DEVICE_MAX_MEM_ALLOC_SIZE) of %llu bytes",
                            fn, V, (unsigned long long)ctx->info.max_alloc_bytes);
    if (chunk > rows)
        chunk = rows;
    clattn_block_run run;
    memset(&run, 0, sizeof(run));
    clattn_status status;
    if ((status = ensure_rows(m, &m->hidden, &m->hidden_rows, tokens, d, "hidden states")) ||
        (logits &&
         (status = ensure_rows(m, &m->logits, &m->logits_rows, (size_t)chunk, V, "logits"))) ||
        (status = embed(m, fn, ids, tokens, &run.x)))
        return status;
    run.tokens = tokens;
    run.self.batch = count, run.self.seq_q = n;
    run.kv = kv;
    run.slots = slots;
    run.out = m->hidden;
    run.function = fn;
    if ((status = clattn__block_stack_run(&m->stack, &run)) || !logits)
        return status;
    /* Every row, or each sequence's last row (rows n apart). */
    size_t ldx = all_rows ? d : n * d;
    for (size_t first = 0; first < rows; first += (size_t)chunk) {
        size_t c = rows - first < chunk ? rows - first : (size_t)chunk;
        size_t x_offset = all_rows ? first * d : (first * n + n - 1) * d;
        if ((status = project(m, c, x_offset, ldx)))
            return status;
        cl_int err = clEnqueueReadBuffer(ctx->queue, m->logits, CL_TRUE, 0, c * V * sizeof(float),
                                         logits + first * V, 0, NULL, NULL);
        if (err != CL_SUCCESS)
            return clattn__fail_cl(ctx, err, "%s: reading the logits", fn);
    }
    return CLATTN_OK;
}

clattn_status clattn__llm_logits(clattn_llm_model *m, const char *fn, const int32_t *ids,
                                 size_t n, float *logits)
{
    CLATTN_CHECK_ARG(m->ctx, fn, n > 0, "no ids");
    clattn_kv_state *kv = NULL;
    size_t slot = 0;
    clattn_status status;
    if (!(status = clattn__llm_state_create(m, fn, 1, n, false, &kv)) &&
        !(status = clattn__kv_state_acquire(kv, fn, &slot)))
        status = clattn__llm_step(m, fn, kv, &slot, 1, n, ids, true, logits);
    clattn__kv_state_destroy(&kv);
    return status;
}
