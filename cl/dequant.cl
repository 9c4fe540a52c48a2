/* ggml's weight types decoded on the device (src/ops/dequant.c), value by value exactly as
 * gguf-py's gguf/quants.py computes them (src/formats/ggml_dequant.c is the same code on the
 * host): every f16 scale converted to float first, then float32 products and sums in gguf-py's
 * order, with no contraction — each function doing arithmetic starts with
 * `#pragma OPENCL FP_CONTRACT OFF`, which holds to the end of its body (so that this file, part
 * of the base program, leaves the other files' contraction as it was).
 *
 * clattn_<type>_value(block, j): value j of one block at `block` (its first byte), for the
 * quantised types; kernels that read weights in these types can call them. Blocks need no
 * alignment (every field is read byte by byte).
 *
 * ggml's type numbers (src/formats/gguf.h's clattn_ggml_type). */
#define CLATTN_QTYPE_F32 0
#define CLATTN_QTYPE_F16 1
#define CLATTN_QTYPE_Q4_0 2
#define CLATTN_QTYPE_Q4_1 3
#define CLATTN_QTYPE_Q5_0 6
#define CLATTN_QTYPE_Q5_1 7
#define CLATTN_QTYPE_Q8_0 8
#define CLATTN_QTYPE_Q4_K 12
#define CLATTN_QTYPE_Q5_K 13
#define CLATTN_QTYPE_Q6_K 14
#define CLATTN_QTYPE_BF16 30

uint clattn_u16_at(const __global uchar *p)
{
    return (uint)p[0] | ((uint)p[1] << 8);
}

uint clattn_u32_at(const __global uchar *p)
{
    return (uint)p[0] | ((uint)p[1] << 8) | ((uint)p[2] << 16) | ((uint)p[3] << 24);
}

/* An IEEE half's value, exactly (integer operations, so no device's denormal mode can flush a
 * subnormal half): ±inf stay, a NaN keeps its payload and is made quiet. */
float clattn_half_bits_to_float(uint h)
{
#pragma OPENCL FP_CONTRACT OFF
    uint sign = (h & 0x8000u) << 16;
    uint exponent = (h >> 10) & 0x1Fu, mantissa = h & 0x3FFu;
    if (exponent == 0x1Fu)
        return as_float(sign | 0x7F800000u | (mantissa ? 0x400000u : 0u) | (mantissa << 13));
    if (exponent != 0u)
        return as_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
    /* ±0 and subnormals: mantissa · 2^-24, exact (mantissa < 2^10; the result is normal) */
    float magnitude = (float)mantissa * 0x1p-24f;
    return sign ? -magnitude : magnitude;
}

float clattn_half_at(const __global uchar *p)
{
    return clattn_half_bits_to_float(clattn_u16_at(p));
}

/* q4_0: d (f16), qs[16]: value j < 16 is the low nibble of qs[j], j >= 16 the high nibble of
 * qs[j - 16]; d · (q - 8). 18 bytes, 32 values. */
float clattn_q4_0_value(const __global uchar *b, uint j)
{
#pragma OPENCL FP_CONTRACT OFF
    int q = j < 16 ? (b[2 + j] & 0x0F) : (b[2 + j - 16] >> 4);
    return clattn_half_at(b) * (float)(q - 8);
}

/* q4_1: d, m (f16), qs[16] as q4_0; d · q + m. 20 bytes, 32 values. */
float clattn_q4_1_value(const __global uchar *b, uint j)
{
#pragma OPENCL FP_CONTRACT OFF
    int q = j < 16 ? (b[4 + j] & 0x0F) : (b[4 + j - 16] >> 4);
    float dq = clattn_half_at(b) * (float)q;
    return dq + clattn_half_at(b + 2);
}

/* q5_0: d, qh[4], qs[16]; q = nibble | (bit j of the little-endian uint32 qh) << 4;
 * d · (q - 16). 22 bytes, 32 values. */
float clattn_q5_0_value(const __global uchar *b, uint j)
{
#pragma OPENCL FP_CONTRACT OFF
    int low = j < 16 ? (b[6 + j] & 0x0F) : (b[6 + j - 16] >> 4);
    int q = low | (int)(((clattn_u32_at(b + 2) >> j) & 1u) << 4);
    return clattn_half_at(b) * (float)(q - 16);
}

/* q5_1: d, m, qh[4], qs[16]; d · q + m. 24 bytes, 32 values. */
float clattn_q5_1_value(const __global uchar *b, uint j)
{
#pragma OPENCL FP_CONTRACT OFF
    int low = j < 16 ? (b[8 + j] & 0x0F) : (b[8 + j - 16] >> 4);
    int q = low | (int)(((clattn_u32_at(b + 4) >> j) & 1u) << 4);
    float dq = clattn_half_at(b) * (float)q;
    return dq + clattn_half_at(b + 2);
}

/* q8_0: d, qs[32] (int8); q · d. 34 bytes, 32 values. */
float clattn_q8_0_value(const __global uchar *b, uint j)
{
#pragma OPENCL FP_CONTRACT OFF
    return (float)as_char(b[2 + j]) * clattn_half_at(b);
}

/* The 6-bit scale and minimum of sub-block s (< 8) of q4_K / q5_K, packed in 12 bytes:
 * s < 4: scales[s] & 63 and scales[s + 4] & 63; s >= 4: the low nibbles of scales[s + 4] with
 * the top two bits of scales[s - 4] above them, and its high nibbles with those of scales[s]. */
int2 clattn_k_scale_min(const __global uchar *scales, uint s)
{
    if (s < 4)
        return (int2)(scales[s] & 63, scales[s + 4] & 63);
    return (int2)((scales[s + 4] & 0x0F) | ((scales[s - 4] >> 6) << 4),
                  (scales[s + 4] >> 4) | ((scales[s] >> 6) << 4));
}

/* q4_K / q5_K's value j from its 4- or 5-bit q: (d · sc) · q - dmin · m. */
float clattn_k_value(const __global uchar *b, uint j, int q)
{
#pragma OPENCL FP_CONTRACT OFF
    int2 sm = clattn_k_scale_min(b + 4, j / 32);
    float d = clattn_half_at(b) * (float)sm.x;
    float dm = clattn_half_at(b + 2) * (float)sm.y;
    float dq = d * (float)q;
    return dq - dm;
}

/* The 4-bit part of value j of q4_K / q5_K from qs[128]: sub-block s = j / 32 reads
 * qs[32·(s / 2) + j % 32], its low nibble for even s, high for odd. */
int clattn_k_nibble(const __global uchar *qs, uint j)
{
    uint s = j / 32;
    uchar byte = qs[32 * (s / 2) + j % 32];
    return s % 2 ? byte >> 4 : byte & 0x0F;
}

/* q4_K: d, dmin (f16), scales[12], qs[128]. 144 bytes, 256 values. */
float clattn_q4_k_value(const __global uchar *b, uint j)
{
    return clattn_k_value(b, j, clattn_k_nibble(b + 16, j));
}

/* q5_K: d, dmin, scales[12], qh[32], qs[128]; the fifth bit of value j is bit j / 32 of
 * qh[j % 32]. 176 bytes, 256 values. */
float clattn_q5_k_value(const __global uchar *b, uint j)
{
    int high = (b[16 + j % 32] >> (j / 32)) & 1;
    return clattn_k_value(b, j, clattn_k_nibble(b + 48, j) | (high << 4));
}

/* q6_K: ql[128], qh[64], scales[16] (int8), d (f16). Value j lies in half h = j / 128 at
 * e = j % 128: its low four bits are the low (e < 64) or high nibble of ql[64·h + e % 64], its
 * top two bits bits 2·(e / 32) of qh[32·h + e % 32]; (d · scales[j / 16]) · (q - 32).
 * 210 bytes, 256 values. */
float clattn_q6_k_value(const __global uchar *b, uint j)
{
#pragma OPENCL FP_CONTRACT OFF
    uint h = j / 128, e = j % 128;
    uchar l = b[64 * h + e % 64];
    int low = e < 64 ? l & 0x0F : l >> 4;
    int high = (b[128 + 32 * h + e % 32] >> (2 * (e / 32))) & 3;
    int q = (low | (high << 4)) - 32;
    float d = clattn_half_at(b + 208) * (float)as_char(b[192 + j / 16]);
    return d * (float)q;
}

/* dst[dst_off + i] = value i of the elements of `type` stored from byte src_off of src, for
 * i < n (n a whole number of blocks; the host checks). NDRange: (n). */
__kernel void clattn_dequantize(__global const uchar *src, ulong src_off, uint type, ulong n,
                                __global float *dst, ulong dst_off)
{
    ulong i = get_global_id(0);
    if (i >= n)
        return;
    const __global uchar *s = src + src_off;
    __global uint *dst_bits = (__global uint *)dst; /* bits moved, never a float NaN loaded */
    float v;
    switch (type) {
    case CLATTN_QTYPE_F32:
        dst_bits[dst_off + i] = clattn_u32_at(s + 4 * i);
        return;
    case CLATTN_QTYPE_BF16: /* the upper half of a float32 */
        dst_bits[dst_off + i] = clattn_u16_at(s + 2 * i) << 16;
        return;
    case CLATTN_QTYPE_F16:
        v = clattn_half_at(s + 2 * i);
        break;
    case CLATTN_QTYPE_Q4_0:
        v = clattn_q4_0_value(s + i / 32 * 18, (uint)(i % 32));
        break;
    case CLATTN_QTYPE_Q4_1:
        v = clattn_q4_1_value(s + i / 32 * 20, (uint)(i % 32));
        break;
    case CLATTN_QTYPE_Q5_0:
        v = clattn_q5_0_value(s + i / 32 * 22, (uint)(i % 32));
        break;
    case CLATTN_QTYPE_Q5_1:
        v = clattn_q5_1_value(s + i / 32 * 24, (uint)(i % 32));
        break;
    case CLATTN_QTYPE_Q8_0:
        v = clattn_q8_0_value(s + i / 32 * 34, (uint)(i % 32));
        break;
    case CLATTN_QTYPE_Q4_K:
        v = clattn_q4_k_value(s + i / 256 * 144, (uint)(i % 256));
        break;
    case CLATTN_QTYPE_Q5_K:
        v = clattn_q5_k_value(s + i / 256 * 176, (uint)(i % 256));
        break;
    case CLATTN_QTYPE_Q6_K:
        v = clattn_q6_k_value(s + i / 256 * 210, (uint)(i % 256));
        break;
    default:
        v = as_float(0x7FC00000u); /* not reached: the host refuses other types */
        break;
    }
    dst[dst_off + i] = v;
}
