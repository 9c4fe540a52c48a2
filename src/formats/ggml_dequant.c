/* ggml's weight types dequantised on the host, value by value as gguf-py's
 * gguf/quants.py computes them (numpy float32 throughout: every f16 scale converted to float
 * first, then the products and sums in the order written there). cl/dequant.cl decodes the same
 * blocks on the device with the same operations; tests/test_quant.c holds both to gguf-py's
 * values bit for bit.
 *
 * No contraction: a fused multiply-add rounds once where gguf-py rounds twice. Clang contracts
 * a*b + c within one expression unless told not to (the pragma below); GCC contracts only in its
 * GNU modes (-std=gnu11), never under -std=c11, which the project builds with — the #error below
 * keeps it so. (With finite f16 scales the products here are exact in float32 — at most 11 + 8
 * + 6 significant bits — so a fused multiply-add would give the same bits today; the rule keeps
 * the code correct by construction rather than by that arithmetic accident.) */
#include "ggml_dequant.h"

#include "gguf.h"

#include <string.h>

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__) && !defined(__STRICT_ANSI__)
#error "ggml_dequant.c needs -std=c11 (GCC contracts a*b + c into fma in its GNU modes)"
#endif


/* ---- little-endian fields ---- */

static uint16_t u16_at(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static uint32_t u32_at(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
           ((uint32_t)p[3] << 24);
}

static float float_of_bits(uint32_t bits)
{
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* An IEEE half's value, exactly: subnormals become normal floats, ±inf stay, a NaN keeps its
 * payload and is made quiet (as hardware conversions do: F16C, Arm's FCVT). */
static float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exponent = (h >> 10) & 0x1F, mantissa = h & 0x3FF;
    if (exponent == 0x1F)
        return float_of_bits(sign | 0x7F800000u | (mantissa ? 0x400000u : 0) | (mantissa << 13));
    if (exponent != 0)
        return float_of_bits(sign | ((exponent + 112) << 23) | (mantissa << 13));
    /* ±0 and subnormals: mantissa · 2^-24, exact (mantissa < 2^10) */
    float magnitude = (float)mantissa * 0x1p-24f;
    return sign ? -magnitude : magnitude;
}

static float half_at(const uint8_t *p)
{
    return half_to_float(u16_at(p));
}

/* ---- value j of one block, per type (layouts: ggml-common.h's block_* structs) ---- */

/* q4_0: d (f16), qs[16]: value j < 16 is the low nibble of qs[j], j >= 16 the high nibble of
 * qs[j - 16]; d · (q - 8). */
static float q4_0_value(const uint8_t *b, unsigned j)
{
    int q = j < 16 ? (b[2 + j] & 0x0F) : (b[2 + j - 16] >> 4);
    return half_at(b) * (float)(q - 8);
}

/* q4_1: d, m (f16), qs[16] as q4_0; d · q + m. */
static float q4_1_value(const uint8_t *b, unsigned j)
{
    int q = j < 16 ? (b[4 + j] & 0x0F) : (b[4 + j - 16] >> 4);
    float dq = half_at(b) * (float)q;
    return dq + half_at(b + 2);
}

/* The fifth bit of value j of q5_0 / q5_1: bit j of the little-endian uint32 qh. */
static int q5_high_bit(const uint8_t *qh, unsigned j)
{
    return (int)((u32_at(qh) >> j) & 1u);
}

/* q5_0: d, qh[4], qs[16]; d · (q - 16) with q = nibble | high bit << 4. */
static float q5_0_value(const uint8_t *b, unsigned j)
{
    int low = j < 16 ? (b[6 + j] & 0x0F) : (b[6 + j - 16] >> 4);
    int q = low | (q5_high_bit(b + 2, j) << 4);
    return half_at(b) * (float)(q - 16);
}

/* q5_1: d, m, qh[4], qs[16]; d · q + m. */
static float q5_1_value(const uint8_t *b, unsigned j)
{
    int low = j < 16 ? (b[8 + j] & 0x0F) : (b[8 + j - 16] >> 4);
    int q = low | (q5_high_bit(b + 4, j) << 4);
    float dq = half_at(b) * (float)q;
    return dq + half_at(b + 2);
}

/* q8_0: d, qs[32] (int8); q · d. */
static float q8_0_value(const uint8_t *b, unsigned j)
{
    return (float)(int8_t)b[2 + j] * half_at(b);
}

/* The 6-bit scale and minimum of sub-block s (< 8) of q4_K / q5_K, packed in 12 bytes:
 * s < 4: scales[s] & 63 and scales[s + 4] & 63; s >= 4: the low nibbles of scales[s + 4] with
 * the top two bits of scales[s - 4] above them, and its high nibbles with those of scales[s]. */
static void k_scale_min(const uint8_t *scales, unsigned s, int *sc, int *m)
{
    if (s < 4) {
        *sc = scales[s] & 63;
        *m = scales[s + 4] & 63;
    } else {
        *sc = (scales[s + 4] & 0x0F) | ((scales[s - 4] >> 6) << 4);
        *m = (scales[s + 4] >> 4) | ((scales[s] >> 6) << 4);
    }
}

/* q4_K / q5_K's value from its sub-block's scales: (d · sc) · q - dmin · m. */
static float k_value(const uint8_t *b, unsigned j, int q)
{
    int sc, m;
    k_scale_min(b + 4, j / 32, &sc, &m);
    float d = half_at(b) * (float)sc;
    float dm = half_at(b + 2) * (float)m;
    float dq = d * (float)q;
    return dq - dm;
}

/* The 4-bit part of value j of q4_K / q5_K from qs[128]: sub-block s = j / 32 reads
 * qs[32·(s / 2) + j % 32], its low nibble for even s, high for odd. */
static int k_nibble(const uint8_t *qs, unsigned j)
{
    unsigned s = j / 32;
    uint8_t byte = qs[32 * (s / 2) + j % 32];
    return s % 2 ? byte >> 4 : byte & 0x0F;
}

/* q4_K: d, dmin (f16), scales[12], qs[128]. */
static float q4_k_value(const uint8_t *b, unsigned j)
{
    return k_value(b, j, k_nibble(b + 16, j));
}

/* q5_K: d, dmin, scales[12], qh[32], qs[128]; the fifth bit of value j is bit j / 32 of
 * qh[j % 32]. */
static float q5_k_value(const uint8_t *b, unsigned j)
{
    int high = (b[16 + j % 32] >> (j / 32)) & 1;
    return k_value(b, j, k_nibble(b + 48, j) | (high << 4));
}

/* q6_K: ql[128], qh[64], scales[16] (int8), d (f16). Value j lies in half h = j / 128 at
 * e = j % 128: its low four bits are the low (e < 64) or high nibble of ql[64·h + e % 64], its
 * top two bits bits 2·(e / 32) of qh[32·h + e % 32]; (d · scales[j / 16]) · (q - 32). */
static float q6_k_value(const uint8_t *b, unsigned j)
{
    unsigned h = j / 128, e = j % 128;
    uint8_t l = b[64 * h + e % 64];
    int low = e < 64 ? l & 0x0F : l >> 4;
    int high = (b[128 + 32 * h + e % 32] >> (2 * (e / 32))) & 3;
    int q = (low | (high << 4)) - 32;
    float d = half_at(b + 208) * (float)(int8_t)b[192 + j / 16];
    return d * (float)q;
}

typedef float (*value_fn)(const uint8_t *block, unsigned j);

static value_fn value_function(uint32_t type)
{
    switch (type) {
    case CLATTN_GGML_Q4_0: return q4_0_value;
    case CLATTN_GGML_Q4_1: return q4_1_value;
    case CLATTN_GGML_Q5_0: return q5_0_value;
    case CLATTN_GGML_Q5_1: return q5_1_value;
    case CLATTN_GGML_Q8_0: return q8_0_value;
    case CLATTN_GGML_Q4_K: return q4_k_value;
    case CLATTN_GGML_Q5_K: return q5_k_value;
    case CLATTN_GGML_Q6_K: return q6_k_value;
    default: return NULL;
    }
}

bool clattn__ggml_type_supported(uint32_t type)
{
    return type == CLATTN_GGML_F32 || type == CLATTN_GGML_F16 || type == CLATTN_GGML_BF16 ||
           value_function(type) != NULL;
}

bool clattn__ggml_dequantize(uint32_t type, const void *src, size_t elements, float *dst)
{
    size_t block_elements, block_bytes;
    if (!clattn__ggml_type_supported(type) ||
        !clattn__ggml_type_info(type, &block_elements, &block_bytes, NULL) ||
        elements % block_elements != 0)
        return false;
    const uint8_t *bytes = src;
    switch (type) {
    case CLATTN_GGML_F32:
        memcpy(dst, src, elements * sizeof(float));
        return true;
    case CLATTN_GGML_F16:
        for (size_t i = 0; i < elements; i++)
            dst[i] = half_at(bytes + 2 * i);
        return true;
    case CLATTN_GGML_BF16: /* the upper half of a float32 */
        for (size_t i = 0; i < elements; i++)
            dst[i] = float_of_bits((uint32_t)u16_at(bytes + 2 * i) << 16);
        return true;
    default:
        break;
    }
    value_fn value = value_function(type);
    for (size_t block = 0; block < elements / block_elements; block++) {
        const uint8_t *b = bytes + block * block_bytes;
        for (unsigned j = 0; j < block_elements; j++)
            dst[block * block_elements + j] = value(b, j);
    }
    return true;
}
