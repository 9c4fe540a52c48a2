/* ggml's weight types dequantised on the device (dequant.c, cl/dequant.cl): the values equal
 * gguf-py's (gguf.quants.dequantize) bit for bit, as the host's clattn__ggml_dequantize
 * (formats/ggml_dequant.h) does. */
#ifndef CLATTN_DEQUANT_H
#define CLATTN_DEQUANT_H

#include <stddef.h>
#include <stdint.h>

#include "base/errors.h"

/* dst[dst_offset_floats + i] = value i of the `elements` values of ggml type `type` stored from
 * byte src_offset_bytes of src, for i < elements (enqueued on the context's queue). Refused, with
 * a message starting with `function`: a type the library does not run (CLATTN_ERROR_UNSUPPORTED,
 * naming it by ggml's name: "q2_K"), a count that is not a whole number of blocks, or a range
 * past the end of either buffer (CLATTN_ERROR_INVALID_ARGUMENT). elements = 0 does nothing. */
clattn_status clattn__dequantize(clattn_context *ctx, const char *function, uint32_t type,
                                 cl_mem src, size_t src_offset_bytes, size_t elements, cl_mem dst,
                                 size_t dst_offset_floats);

#endif /* CLATTN_DEQUANT_H */
