/* ggml's weight types dequantised on the device: one work-item per value (cl/dequant.cl). */
#include "dequant.h"

#include "formats/ggml_dequant.h"
#include "formats/gguf.h"
#include "runtime/launch.h"

/* The buffer's size in bytes, or an error naming the operand. */
static clattn_status buffer_size(clattn_context *ctx, const char *function, const char *what,
                                 cl_mem mem, size_t *bytes)
{
    cl_int err = clGetMemObjectInfo(mem, CL_MEM_SIZE, sizeof(*bytes), bytes, NULL);
    if (err != CL_SUCCESS)
        return clattn__fail_cl(ctx, err, "%s: the %s buffer's size cannot be read", function,
                               what);
    return CLATTN_OK;
}

clattn_status clattn__dequantize(clattn_context *ctx, const char *function, uint32_t type,
                                 cl_mem src, size_t src_offset_bytes, size_t elements, cl_mem dst,
                                 size_t dst_offset_floats)
{
    size_t block_elements, block_bytes;
    const char *name;
    if (!clattn__ggml_type_info(type, &block_elements, &block_bytes, &name))
        return clattn__fail(ctx, CLATTN_ERROR_UNSUPPORTED, "%s: %u is not a ggml type",
                            function, (unsigned)type);
    if (!clattn__ggml_type_supported(type))
        return clattn__fail(ctx, CLATTN_ERROR_UNSUPPORTED,
                            "%s: ggml type %s is not supported (supported: f32, f16, bf16, q8_0, "
                            "q4_0, q4_1, q5_0, q5_1, q4_K, q5_K, q6_K)",
                            function, name);
    CLATTN_CHECK_ARG(ctx, function, elements % block_elements == 0,
                     "%zu %s values are not a whole number of blocks of %zu", elements, name,
                     block_elements);
    if (elements == 0)
        return CLATTN_OK;
    CLATTN_CHECK_ARG(ctx, function, src && dst, "a NULL buffer");
    size_t src_size, dst_size;
    clattn_status status = buffer_size(ctx, function, "source", src, &src_size);
    if (status != CLATTN_OK || (status = buffer_size(ctx, function, "destination", dst,
                                                     &dst_size)) != CLATTN_OK)
        return status;
    size_t dst_floats = dst_size / sizeof(float);
    CLATTN_CHECK_ARG(ctx, function,
                     dst_offset_floats <= dst_floats && elements <= dst_floats - dst_offset_floats,
                     "%zu floats from float %zu run past the destination buffer's %zu floats",
                     elements, dst_offset_floats, dst_floats);
    size_t src_bytes = elements / block_elements * block_bytes; /* <= dst_size: no overflow */
    CLATTN_CHECK_ARG(ctx, function,
                     src_offset_bytes <= src_size && src_bytes <= src_size - src_offset_bytes,
                     "%zu bytes of %s from byte %zu run past the source buffer's %zu bytes",
                     src_bytes, name, src_offset_bytes, src_size);

    cl_ulong src_off = src_offset_bytes, n = elements, dst_off = dst_offset_floats;
    cl_uint type_arg = type;
    clattn_kernel_args args = clattn__kernel_args(ctx, CLATTN_KERNEL_DEQUANTIZE);
    CLATTN_ARG(&args, src);
    CLATTN_ARG(&args, src_off);
    CLATTN_ARG(&args, type_arg);
    CLATTN_ARG(&args, n);
    CLATTN_ARG(&args, dst);
    CLATTN_ARG(&args, dst_off);
    size_t global[1] = {elements};
    return clattn__launch(ctx, &args, "dequantize", 1, global, NULL, CLATTN_OP_OTHER, 0);
}
