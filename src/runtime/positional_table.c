/* The paper's sinusoidal table: computed on the host in double precision, kept on the device. */
#include "clattn/encoder.h"
#include "positional_table.h"
#include "buffers.h"
#include "context_internal.h"

#include <math.h>
#include <stdlib.h>

clattn_status clattn_sinusoidal_table(float *table, size_t positions, size_t d_model)
{
    static const char fn[] = "clattn_sinusoidal_table";
    CLATTN_CHECK_ARG(NULL, fn, table, "table is NULL");
    CLATTN_CHECK_ARG(NULL, fn, positions > 0 && d_model > 0,
                     "positions (%zu) and d_model (%zu) must be positive",
                     positions, d_model);
    size_t count;
    CLATTN_CHECK_ARG(NULL, fn, clattn__mul_size(positions, d_model, &count),
                     "positions · d_model overflows");
    /* PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d)). */
    for (size_t c = 0; c < d_model; c++) {
        double inv_freq = 1.0 / pow(10000.0, (double)(c - c % 2) / (double)d_model);
        for (size_t pos = 0; pos < positions; pos++) {
            double angle = (double)pos * inv_freq;
            table[pos * d_model + c] = (float)(c % 2 == 0 ? sin(angle) : cos(angle));
        }
    }
    return CLATTN_OK;
}

clattn_status clattn__positional_table(clattn_context *ctx, size_t positions, size_t d,
                                       cl_mem *out)
{
    clattn_positional_table *t = &ctx->pe_table;
    if (t->mem && t->dim == d && t->positions >= positions) {
        *out = t->mem;
        return CLATTN_OK;
    }
    /* Round up so that slowly growing lengths do not recompute the table every call. */
    size_t rows = (positions + 255) / 256 * 256, count, bytes;
    if (!clattn__mul_size(rows, d, &count) || !clattn__mul_size(count, sizeof(float), &bytes))
        return clattn__fail(ctx, CLATTN_ERROR_TOO_LARGE,
                            "the positional table [%zu, %zu] overflows size_t", positions, d);
    float *host = malloc(bytes);
    if (!host)
        return clattn__fail(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                            "out of host memory for the positional table [%zu, %zu]", rows, d);
    clattn_status status = clattn_sinusoidal_table(host, rows, d);
    cl_mem mem = NULL;
    if (status == CLATTN_OK)
        status = clattn__buffer_create(ctx, bytes, &mem, "the positional table");
    if (status == CLATTN_OK &&
        (status = clattn__write_floats_at(ctx, mem, 0, host, count, "the positional table")))
        clattn__release_mem(&mem);
    free(host);
    if (status != CLATTN_OK)
        return status;
    clattn__release_mem(&t->mem);
    t->mem = mem;
    t->positions = rows;
    t->dim = d;
    *out = mem;
    return CLATTN_OK;
}

void clattn__positional_table_release(clattn_positional_table *t)
{
    clattn__release_mem(&t->mem);
    t->positions = t->dim = 0;
}
