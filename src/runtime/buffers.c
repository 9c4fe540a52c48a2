/* Device buffers: creation, growth, uploads, and the context's workspace of named slots. */
#include "buffers.h"
#include "context_internal.h"
#include "host_cpu.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* On PoCL's CPU device a buffer's memory is the process's memory, allocated with malloc: a
 * buffer released is kept by the heap (after a large block was freed, glibc serves large blocks
 * from the heap and keeps its free space resident), and a freed buffer's space is not always
 * reused by the next one (a second key/value cache of the same size took new pages: +27 MiB).
 * Buffers of at least this many bytes therefore get pages of their own (mmap, used in place
 * through CL_MEM_USE_HOST_PTR), returned to the system when the buffer is released, so resident
 * memory follows the buffers alive. Pages are mapped as they are first written, as the heap's
 * are. Other implementations keep their own copy of a host pointer's memory (Mesa's rusticl on
 * llvmpipe did: the pages would be paid twice), and a GPU's buffers are not the process's. */
#define OWN_PAGES_MIN_BYTES ((size_t)256 << 10)

typedef struct own_pages {
    void *base;
    size_t bytes;
} own_pages;

/* Called by the implementation once the buffer is gone (its memory no longer used). */
static void CL_CALLBACK release_own_pages(cl_mem mem, void *user)
{
    (void)mem;
    own_pages *pages = user;
    munmap(pages->base, pages->bytes);
    free(pages);
}

/* A buffer of `bytes` on pages of its own, or NULL when the device or the system says no (the
 * caller then allocates as usual). */
static cl_mem create_on_own_pages(clattn_context *ctx, size_t bytes)
{
    if (!clattn__is_pocl_cpu(&ctx->info) || bytes < OWN_PAGES_MIN_BYTES)
        return NULL;
    own_pages *pages = malloc(sizeof(*pages));
    if (!pages)
        return NULL;
    pages->bytes = bytes;
    pages->base = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (pages->base == MAP_FAILED) {
        free(pages);
        return NULL;
    }
    cl_int err;
    cl_mem mem = clCreateBuffer(ctx->cl_ctx, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, bytes,
                                pages->base, &err);
    if (err == CL_SUCCESS &&
        clSetMemObjectDestructorCallback(mem, release_own_pages, pages) == CL_SUCCESS)
        return mem;
    if (err == CL_SUCCESS)
        clReleaseMemObject(mem); /* never used by any command: its pages are free at once */
    munmap(pages->base, bytes);
    free(pages);
    return NULL;
}

clattn_status clattn__buffer_create(clattn_context *ctx, size_t bytes, cl_mem *buffer,
                                    const char *what)
{
    if (bytes > ctx->info.max_alloc_bytes)
        return clattn__fail(ctx, CLATTN_ERROR_TOO_LARGE,
                            "%s needs %zu bytes, more than the device's maximum allocation of "
                            "%llu bytes",
                            what, bytes, (unsigned long long)ctx->info.max_alloc_bytes);
    cl_mem own = create_on_own_pages(ctx, bytes);
    if (own) {
        *buffer = own;
        return CLATTN_OK;
    }
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

/* The error of a failed transfer: the caller's message, then the OpenCL error. */
static clattn_status transfer_failed(clattn_context *ctx, cl_int err, const char *fmt,
                                     va_list args)
{
    char message[512];
    vsnprintf(message, sizeof message, fmt, args);
    return clattn__fail_cl(ctx, err, "%s", message);
}

/* Returns from a helper taking (fmt, ...): CLATTN_OK when err is CL_SUCCESS, else the failure
 * recorded with the caller's message. */
#define RETURN_TRANSFER_STATUS(ctx, err, fmt)                                    \
    do {                                                                         \
        if ((err) == CL_SUCCESS)                                                 \
            return CLATTN_OK;                                                    \
        va_list args_;                                                           \
        va_start(args_, fmt);                                                    \
        clattn_status failed_ = transfer_failed((ctx), (err), (fmt), args_);     \
        va_end(args_);                                                           \
        return failed_;                                                          \
    } while (0)

clattn_status clattn__write_bytes(clattn_context *ctx, cl_mem mem, size_t offset, const void *host,
                                  size_t bytes, const char *fmt, ...)
{
    cl_int err = clEnqueueWriteBuffer(ctx->queue, mem, CL_TRUE, offset, bytes, host, 0, NULL,
                                      NULL);
    RETURN_TRANSFER_STATUS(ctx, err, fmt);
}

clattn_status clattn__copy_bytes(clattn_context *ctx, cl_mem src, size_t src_offset, cl_mem dst,
                                 size_t dst_offset, size_t bytes, const char *fmt, ...)
{
    cl_int err = clEnqueueCopyBuffer(ctx->queue, src, dst, src_offset, dst_offset, bytes, 0, NULL,
                                     NULL);
    RETURN_TRANSFER_STATUS(ctx, err, fmt);
}

clattn_status clattn__fill_bytes(clattn_context *ctx, cl_mem mem, const void *pattern,
                                 size_t pattern_size, size_t offset, size_t bytes,
                                 const char *fmt, ...)
{
    cl_int err = clEnqueueFillBuffer(ctx->queue, mem, pattern, pattern_size, offset, bytes, 0,
                                     NULL, NULL);
    RETURN_TRANSFER_STATUS(ctx, err, fmt);
}

clattn_status clattn__wait(clattn_context *ctx, clattn_status status, const char *fmt, ...)
{
    cl_int err = clFinish(ctx->queue);
    if (status != CLATTN_OK)
        return status;
    RETURN_TRANSFER_STATUS(ctx, err, fmt);
}

clattn_status clattn__copy_rect(clattn_context *ctx, cl_mem src, cl_mem dst,
                                const clattn_rect_copy *rect, const char *fmt, ...)
{
    cl_int err = clEnqueueCopyBufferRect(ctx->queue, src, dst, rect->src_origin, rect->dst_origin,
                                         rect->region, rect->src_row_pitch, rect->src_slice_pitch,
                                         rect->dst_row_pitch, rect->dst_slice_pitch, 0, NULL,
                                         NULL);
    RETURN_TRANSFER_STATUS(ctx, err, fmt);
}

clattn_status clattn__write_floats_at(clattn_context *ctx, cl_mem mem, size_t offset,
                                      const float *data, size_t count, const char *what)
{
    return clattn__write_bytes(ctx, mem, offset * sizeof(float), data, count * sizeof(float),
                               "writing %s to the device", what);
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
    "the token type ids", "the pooled embeddings", "the padding mask to pool with",
    "the lengths of the texts",
    "the encoder states to pool", "the rotated queries and keys",
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

uint64_t clattn__workspace_limit(const clattn_context *ctx)
{
    return ctx->workspace_limit;
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
