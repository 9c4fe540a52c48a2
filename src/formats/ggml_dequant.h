/*
 * ggml's weight types on the host (ggml_dequant.c): which types the library runs, and their
 * dequantisation to float32, equal bit for bit to gguf-py's (gguf.quants.dequantize), which
 * follows ggml's reference code. Block layouts: clattn__ggml_type_info (gguf.h).
 */
#ifndef CLATTN_GGML_DEQUANT_H
#define CLATTN_GGML_DEQUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Whether the library runs weights of `type`: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1,
 * Q4_K, Q5_K, Q6_K. Others (IQ*, Q2_K, Q3_K, TQ*, …) are refused at load, naming the type
 * and the tensor. */
bool clattn__ggml_type_supported(uint32_t type);

/* dst[0 .. elements) = the values of `elements` (a whole number of blocks) elements of `type`
 * (supported) stored at src. Returns false (dst untouched) for an unsupported type or a count
 * that is not a whole number of blocks. */
bool clattn__ggml_dequantize(uint32_t type, const void *src, size_t elements, float *dst);

#endif /* CLATTN_GGML_DEQUANT_H */
