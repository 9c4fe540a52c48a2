/* Device buffers: creation, growth, uploads, and the context's workspace of named slots. */
#include "buffers.h"
#include "context_internal.h"

clattn_status clattn__buffer_create(clattn_context *ctx, size_t bytes, cl_mem *buffer,
                                    const char *what)
{
    if (bytes > ctx->info.max_alloc_bytes)
        return clattn__fail(ctx, CLATTN_ERROR_TOO_LARGE,
                            "%s needs %zu bytes, more than the device's maximum allocation of "
                            "%llu bytes",
                            what, bytes, (unsigned long long)ctx->info.max_alloc_bytes);
    cl_int err;
    cl_mem mem = clCreateBuffer(ctx->cl_ctx, CL_MEM_READ_WRITE, bytes ? bytes : 4, NULL, &err);
    if (err != CL_SUCCESS)
        return clattn__fail_cl(ctx, err, "clCreateBuffer(%zu bytes) for %s failed", bytes, what);
    *buffer = mem;
    return CLATTN_OK;
}

static clattn_status grow_buffer(clattn_context *ctx, cl_mem *mem, size_t *have, size_t need,
                                 const char *what)
{
    if (*mem && *have >= need)
        return CLATTN_OK;
    /* Allocate before releasing: on failure the old buffer stays, and oclgrind 21.10 would lose
     * track of initialised memory in a buffer that reuses a just-released one's id. */
    cl_mem grown;
    clattn_status status = clattn__buffer_create(ctx, need, &grown, what);
    if (status != CLATTN_OK)
        return status;
    clattn__release_mem(mem);
    *mem = grown;
    *have = need;
    return CLATTN_OK;
}

clattn_status clattn__write_floats_at(clattn_context *ctx, cl_mem mem, size_t offset,
                                      const float *data, size_t count, const char *what)
{
    cl_int err = clEnqueueWriteBuffer(ctx->queue, mem, CL_TRUE, offset * sizeof(float),
                                      count * sizeof(float), data, 0, NULL, NULL);
    if (err != CL_SUCCESS)
        return clattn__fail_cl(ctx, err, "writing %s to the device", what);
    return CLATTN_OK;
}

clattn_status clattn__upload(clattn_context *ctx, const float *data, size_t count,
                             const char *what, cl_mem *mem)
{
    size_t bytes;
    if (!clattn__mul_size(count, sizeof(float), &bytes))
        return clattn__fail(ctx, CLATTN_ERROR_TOO_LARGE, "%s: %zu floats overflow size_t", what,
                            count);
    cl_mem fresh = NULL;
    clattn_status status = clattn__buffer_create(ctx, bytes, &fresh, what);
    if (status == CLATTN_OK &&
        (status = clattn__write_floats_at(ctx, fresh, 0, data, count, what)) != CLATTN_OK)
        clattn__release_mem(&fresh);
    if (status == CLATTN_OK)
        *mem = fresh;
    return status;
}

static const char *const slot_names[] = {
    "the attention scores",   "the packed keys and values", "the split-key partial states",
    "the Q/K/V projections",
    "the attention output",   "the encoder activations",    "the sub-layer output",
    "the normalised activations", "the feed-forward hidden layer", "the token ids",
    "the token type ids", "the pooled embeddings", "the rotated queries and keys",
    "the position rows", "the relative position bias", "the unpacked weight",
};
/* One name per slot: a slot added without its name would print a NULL string. */
_Static_assert(sizeof(slot_names) / sizeof(slot_names[0]) == CLATTN_SLOT_COUNT,
               "every workspace slot needs its name");

clattn_status clattn__workspace_slot(clattn_context *ctx, clattn_slot slot, size_t bytes,
                                     cl_mem *buffer)
{
    clattn_workspace *ws = &ctx->workspace;
    clattn_status status = grow_buffer(ctx, &ws->mem[slot], &ws->bytes[slot], bytes,
                                       slot_names[slot]);
    if (status == CLATTN_OK)
        *buffer = ws->mem[slot];
    return status;
}

size_t clattn__workspace_bytes(const clattn_workspace *ws)
{
    size_t total = 0;
    for (int i = 0; i < CLATTN_SLOT_COUNT; i++)
        total += ws->mem[i] ? ws->bytes[i] : 0;
    return total;
}

void clattn__workspace_release(clattn_workspace *ws)
{
    for (int i = 0; i < CLATTN_SLOT_COUNT; i++) {
        clattn__release_mem(&ws->mem[i]);
        ws->bytes[i] = 0;
    }
}
