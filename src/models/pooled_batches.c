/* Token rows through an encoder in sorted, planned batches, pooled on the device
 * (pooled_batches.h). */
#include "pooled_batches.h"

#include "base/errors.h"
#include "nn/encoder_internal.h"
#include "ops/pooling.h"
#include "runtime/buffers.h"
#include "runtime/tensor_internal.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local const size_t *sort_lengths; /* qsort has no context argument */

static int by_length(const void *a, const void *b)
{
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    if (sort_lengths[i] != sort_lengths[j])
        return sort_lengths[i] < sort_lengths[j] ? -1 : 1;
    return i < j ? -1 : i > j; /* stable: input order among equal lengths */
}

/* The device buffers of a run: workspace slots borrowed for the run, grown once for its largest
 * batch; each batch wraps tensors of its shape over their starts. */
typedef struct batch_buffers {
    cl_mem lengths; /* [rows]: uint32 lengths (CLATTN_SLOT_POOL_LENGTHS) */
    cl_mem mask;    /* [cells]: 1 = padding, made on the device from the lengths
                       (CLATTN_SLOT_POOL_MASK) */
    cl_mem states;  /* [cells · d]: the encoder's output (CLATTN_SLOT_POOL_STATES) */
    cl_mem vectors; /* [rows · d]: the pooled rows (CLATTN_SLOT_POOLED) */
} batch_buffers;

/* One batch: rows order[0 .. count) (their longest is `len` ids), right-padded; the ids go to
 * the encoder as int32, checked there once; the padding mask the attention and the pooling read
 * is made on the device from the rows' lengths. */
static clattn_status run_batch(clattn_context *ctx, clattn_encoder *enc, const char *fn,
                               const token_rows *rows, const size_t *order, size_t count,
                               size_t len, size_t d, const pooled_batches_params *p,
                               const batch_buffers *buffers, float *out)
{
    size_t cells = count * len;
    int32_t *ids = malloc(cells * sizeof(int32_t));                       /* [count, len] */
    int32_t *types = rows->type_ids ? malloc(cells * sizeof(int32_t)) : NULL; /* [count, len] */
    uint32_t *lengths = malloc(count * sizeof(uint32_t)); /* [count] */
    float *pooled = malloc(count * d * sizeof(float));   /* [count, d] */
    clattn_tensor *mask = NULL, *states = NULL, *vectors = NULL;
    clattn_status status = CLATTN_OK;
    if (!ids || !lengths || !pooled || (rows->type_ids && !types))
        status = clattn__fail(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory",
                              fn);
    for (size_t b = 0; status == CLATTN_OK && b < count; b++) {
        size_t row = order[b];
        lengths[b] = (uint32_t)rows->lengths[row];
        for (size_t j = 0; j < len; j++) {
            bool real = j < rows->lengths[row];
            ids[b * len + j] = real ? rows->ids[row][j] : p->pad_id;
            if (types)
                types[b * len + j] = real ? rows->type_ids[row][j] : 0;
        }
    }
    clattn_encoder_forward_params params;
    clattn_encoder_forward_params_default(&params);
    if (status == CLATTN_OK &&
        !(status = clattn__write_bytes(ctx, buffers->lengths, 0, lengths,
                                       count * sizeof(uint32_t), "%s: writing the lengths",
                                       fn)) &&
        !(status = clattn__padding_from_lengths(ctx, buffers->lengths, count, len,
                                                buffers->mask, 0)) &&
        !(status = clattn_tensor_wrap(ctx, &mask, buffers->mask, 0, 2, (size_t[]){count, len})) &&
        !(status = clattn_tensor_wrap(ctx, &states, buffers->states, 0, 3,
                                      (size_t[]){count, len, d})) &&
        !(status = clattn_tensor_wrap(ctx, &vectors, buffers->vectors, 0, 2,
                                      (size_t[]){count, d}))) {
        params.key_padding_mask = mask;
        params.key_padding_mask_kind = CLATTN_MASK_BOOL;
        if (!(status = clattn__encoder_forward_ids32(enc, fn, ids, types, count, len, states,
                                                     &params)) &&
            !(status = clattn__pool(ctx, states->mem, states->offset, mask->mem, mask->offset,
                                    count, len, d, p->pooling, p->normalize, vectors->mem,
                                    vectors->offset)))
            status = clattn_tensor_read(vectors, pooled, count * d);
    }
    for (size_t b = 0; status == CLATTN_OK && b < count; b++)
        memcpy(out + order[b] * d, pooled + b * d, d * sizeof(float));
    clattn_tensor_destroy(&mask), clattn_tensor_destroy(&states), clattn_tensor_destroy(&vectors);
    free(ids), free(types), free(lengths), free(pooled);
    return status;
}

embed_batch_costs clattn__pooled_batch_costs(clattn_context *ctx,
                                             const clattn_encoder_config *cfg)
{
    clattn_device_info device;
    embed_batch_costs costs = {
        .overhead = embed_batch_overhead(
            clattn_context_device_info(ctx, &device) == CLATTN_OK ? &device : NULL),
        .attention_width = 2.0 * (double)cfg->d_model + (double)cfg->dim_feedforward,
    };
    return costs;
}

clattn_status clattn__pooled_batches_run(clattn_context *ctx, clattn_encoder *enc, const char *fn,
                                         const token_rows *rows,
                                         const pooled_batches_params *params, float *out)
{
    clattn_encoder_config cfg;
    clattn_status status = clattn_encoder_get_config(enc, &cfg);
    if (status != CLATTN_OK)
        return status;
    size_t count = rows->count, slots = count ? count : 1;
    size_t *order = malloc(slots * sizeof(size_t));          /* rows sorted by length */
    size_t *sorted_lengths = malloc(slots * sizeof(size_t)); /* lengths[order[i]] */
    size_t *ends = malloc(slots * sizeof(size_t));           /* one past each batch's last */
    size_t batches = (size_t)-1;
    if (order && sorted_lengths && ends) {
        for (size_t i = 0; i < count; i++)
            order[i] = i;
        sort_lengths = rows->lengths;
        qsort(order, count, sizeof(size_t), by_length);
        sort_lengths = NULL;
        for (size_t i = 0; i < count; i++)
            sorted_lengths[i] = rows->lengths[order[i]];
        batches = embed_batches_plan(sorted_lengths, count, &params->costs, ends);
    }
    if (batches == (size_t)-1)
        status = clattn__fail(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory", fn);
    /* The largest batch's cells and rows size the buffers every batch uses. */
    size_t most_cells = 0, most_rows = 0, d = cfg.d_model;
    for (size_t b = 0, first = 0; status == CLATTN_OK && b < batches; first = ends[b++]) {
        size_t n = ends[b] - first, cells = n * sorted_lengths[ends[b] - 1];
        most_cells = cells > most_cells ? cells : most_cells;
        most_rows = n > most_rows ? n : most_rows;
    }
    batch_buffers buffers = {NULL, NULL, NULL, NULL};
    if (status == CLATTN_OK && batches > 0 &&
        !(status = clattn__workspace_slot(ctx, CLATTN_SLOT_POOL_LENGTHS,
                                          most_rows * sizeof(uint32_t), &buffers.lengths)) &&
        !(status = clattn__workspace_slot(ctx, CLATTN_SLOT_POOL_MASK, most_cells * sizeof(float),
                                          &buffers.mask)) &&
        !(status = clattn__workspace_slot(ctx, CLATTN_SLOT_POOL_STATES,
                                          most_cells * d * sizeof(float), &buffers.states)))
        status = clattn__workspace_slot(ctx, CLATTN_SLOT_POOLED, most_rows * d * sizeof(float),
                                        &buffers.vectors);
    for (size_t b = 0, first = 0; status == CLATTN_OK && b < batches; b++) {
        size_t n = ends[b] - first, longest = sorted_lengths[ends[b] - 1];
        status = run_batch(ctx, enc, fn, rows, order + first, n, longest, d, params, &buffers,
                           out);
        first = ends[b];
        if (status == CLATTN_OK && params->progress)
            params->progress(params->progress_user_data, first, count);
    }
    free(order), free(sorted_lengths), free(ends);
    return status;
}
