/*
 * Linear layers on quantised weights with 8-bit activations (src/ops/qlinear.c, when the
 * program's activations are CLATTN_QLINEAR_INT8; this file follows cl/qlinear.cl in the same
 * program and uses its helpers): the weight's integer values times the activations' integer
 * values, summed exactly in integers, then scaled in float32 once per block, as llama.cpp's
 * CPU backend does. For Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K and Q6_K (F32, F16 and BF16
 * weights keep float32 activations).
 *
 * ACTIVATIONS (clattn_qlinear_quantize). Row r of x, in blocks of QB values (QB: the weight
 * type's block, 32, or 256 for the K-quants; llama.cpp's Q8_0 and Q8_K), becomes int8 values
 * xq, one float scale dx per block and the sums xs of xq over each 16 values:
 *   amax = max |x_i| over the block, dx = amax / 127, id = dx ≠ 0 ? 1 / dx : 0,
 *   xq_i = round(x_i · id) (half away from zero).
 * In blocks of 256, xq keeps each 64 values' pieces of 16 in the order 0, 2, 1, 3
 * (cl/act_quant.cl's qi_piece): the first halves of two sub-blocks of 32, then their second.
 *
 * WEIGHTS. Every type writes value i of a block as D·S_i·u_i + O·T_i, with u_i the stored
 * integer (unsigned; Q8_0's signed), S_i and T_i integers per 16 values, D and O the block's
 * floats:
 *   Q4_0  u: 4 bits, S 1, T −8, O = D = d            Q4_1  u: 4 bits, S 1, T 1, D d, O m
 *   Q5_0  u: 5 bits, S 1, T −16, O = D = d           Q5_1  u: 5 bits, S 1, T 1, D d, O m
 *   Q8_0  u: int8, S 1, T 0, D d, O 0
 *   Q4_K, Q5_K  u: 4 or 5 bits, S the sub-block's 6-bit scale, T −(its 6-bit min), D d, O dmin
 *   Q6_K  u: 6 bits, S the 16 values' int8 scale, T −32·S, D = O = d
 *
 * ONE ORDER (batch invariance, and the tests' reference, tests/ref/ref_qlinear_int8.c). For
 * output element (r, j), acc[0..7] and off start at +0.0f; for each block in order:
 *   A[l] = Σ S_i·u_i·xq_i over the values i of lane l (lane l of each 32 values: values 4l ..
 *          4l + 3; Q4_K's and Q5_K's: of sub-blocks 2p + (l ≥ 4), values 4(l mod 4) ..
 *          4(l mod 4) + 3 and 16 more than those, so that a sub-block's halves add in 16 bits
 *          before its scale), and B = Σ T_i·xs_h over the block's 16-value groups h (T of the
 *          group): exact integers;
 *   acc[l] = fma((float)A[l], D·dx, acc[l]),  off = fma(O·dx, (float)B, off);
 * then y = ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]))
 * + off, i.e. q[i] = acc[i] + acc[i + 4], s[i] = q[i] + q[i + 2], y = (s[0] + s[1]) + off.
 * Integer sums are exact whatever the instructions, so every kernel and device that follows
 * this gives the same bytes: with x86's AVX2 (PoCL: vpmaddubsw, vpmaddwd; no product or pair
 * sum can saturate their 16 bits: |u·xq| ≤ 128·127), AVX512BW's 64-byte forms of the same (the
 * two-column matrix–matrix tiles) or the portable integer code.
 *
 * Kernels per type: clattn_qlinear_i8_mv_<type>, _mm_, _swiglu_mv_, _swiglu_mm_, the float
 * kernels' paths and tiles (QL_MV_R, QL_MV_C_<type>, QL_MV_SC_<type> for the fused SwiGLU;
 * QI_MM_R × QI_MM_C for the matrix–matrix path), on the quantised rows (xq [m, k], dx [m, k / QB], xs [m, k / 16]).
 *
 * QI_VNNI (-D, set by src/ops/qlinear.c on PoCL's CPU device where the host CPU has
 * AVX512-VNNI: PoCL 3.1 compiles for skylake-avx512 whatever the CPU): each kernel's body is
 * a function compiled for AVX512-VNNI (a target attribute; not inlined into PoCL's work-group
 * function, which lacks the feature), so that a vpmaddwd and the add after it become one
 * vpdpwssd, and the types of 32-value blocks take vpdpbusd for their vpmaddubsw and vpmaddwd
 * by ones: the same integers (no sum saturates, above), one or two operations fewer per row and
 * block on the port that is the int8 tiles' bound.
 */

#ifndef QI_MM_R
#define QI_MM_R 4
#endif
#ifndef QI_MM_C
#define QI_MM_C 2
#endif
/* Functions that use AVX512-VNNI's instructions (the header's QI_VNNI). */
#if defined(QI_VNNI)
#define QI_VNNI_TARGET __attribute__((target("avx512vnni")))
#else
#define QI_VNNI_TARGET
#endif

/* ---- Activations. -------------------------------------------------------------------------- */

/* The prompt path's quantisation: one work-item per (block, row), global size {k / qb, m}; row
 * r into xq + r·k, xd + r·(k / qb), xs + r·(k / 16), and blocks of 256 into xt
 * (qi_transpose_block) unless it is NULL. */
__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void clattn_qlinear_quantize(
    uint m, uint k, uint qb, const __global float *x, ulong x_off, uint ldx, __global char *xq,
    __global float *xd, __global short *xs, __global float *xt)
{
    const uint blk = get_global_id(0), r = get_global_id(1);
    if (blk >= k / qb || r >= m)
        return;
    qi_quantize_block(x + x_off + (ulong)r * ldx, blk, qb, xq + (ulong)r * k,
                      xd + (ulong)r * (k / qb), xs + (ulong)r * (k / 16));
    if (xt && qb == 256)
        qi_transpose_block(xt, r, m, k / qb, blk, xs + (ulong)r * (k / 16) + (ulong)blk * 16,
                           xd[(ulong)r * (k / qb) + blk]);
}

/* ---- The integer dot products of 32 values: lane l = Σ over values 4l .. 4l + 3. ----------- */

#if defined(__AVX2__)
typedef char qi_bytes32 __attribute__((vector_size(32)));
typedef short qi_shorts16 __attribute__((vector_size(32)));
#define QI_CAT32(A, B)                                                                            \
    __builtin_shufflevector(A, B, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17,   \
                            18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31)
#define QI_CAT16(A, B)                                                                            \
    __builtin_shufflevector(A, B, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)
#endif

/* Unsigned values u (ulo: values 0-15, uhi: 16-31), signed xq, the pair sums of values 2i, 2i + 1
 * times s[i] (slo: i < 8, shi: i ≥ 8), added in lanes of two pairs. */
inline int8 qi_dot32(uchar16 ulo, uchar16 uhi, char16 xlo, char16 xhi, short8 slo, short8 shi)
{
#if defined(__AVX2__)
    qi_shorts16 p = __builtin_ia32_pmaddubsw256((qi_bytes32)QI_CAT32(ulo, uhi),
                                                (qi_bytes32)QI_CAT32(xlo, xhi));
    return as_int8(__builtin_ia32_pmaddwd256(p, (qi_shorts16)QI_CAT16(slo, shi)));
#else
    int16 a = convert_int16(ulo) * convert_int16(xlo), b = convert_int16(uhi) * convert_int16(xhi);
    int8 s = convert_int8(slo), t = convert_int8(shi);
    return (int8)((a.s0 + a.s1) * s.s0 + (a.s2 + a.s3) * s.s1,
                  (a.s4 + a.s5) * s.s2 + (a.s6 + a.s7) * s.s3,
                  (a.s8 + a.s9) * s.s4 + (a.sa + a.sb) * s.s5,
                  (a.sc + a.sd) * s.s6 + (a.se + a.sf) * s.s7,
                  (b.s0 + b.s1) * t.s0 + (b.s2 + b.s3) * t.s1,
                  (b.s4 + b.s5) * t.s2 + (b.s6 + b.s7) * t.s3,
                  (b.s8 + b.s9) * t.s4 + (b.sa + b.sb) * t.s5,
                  (b.sc + b.sd) * t.s6 + (b.se + b.sf) * t.s7);
#endif
}

/* The same for signed values (Q8_0; the bytes of ulo, uhi are int8) with every s 1: x86 takes
 * |u| times xq with u's sign (|u| ≤ 128, |xq| ≤ 127: no pair sum saturates). */
inline int8 qi_dot32_signed(uchar16 ulo, uchar16 uhi, char16 xlo, char16 xhi, short8 slo,
                            short8 shi)
{
#if defined(__AVX2__)
    qi_bytes32 w = (qi_bytes32)QI_CAT32(ulo, uhi), x = (qi_bytes32)QI_CAT32(xlo, xhi);
    qi_shorts16 p = __builtin_ia32_pmaddubsw256(__builtin_ia32_psignb256(w, w),
                                                __builtin_ia32_psignb256(x, w));
    qi_shorts16 one = (qi_shorts16)QI_CAT16((short8)1, (short8)1);
    return as_int8(__builtin_ia32_pmaddwd256(p, one));
#else
    int16 a = convert_int16(as_char16(ulo)) * convert_int16(xlo);
    int16 b = convert_int16(as_char16(uhi)) * convert_int16(xhi);
    return (int8)(a.s0 + a.s1 + a.s2 + a.s3, a.s4 + a.s5 + a.s6 + a.s7,
                  a.s8 + a.s9 + a.sa + a.sb, a.sc + a.sd + a.se + a.sf,
                  b.s0 + b.s1 + b.s2 + b.s3, b.s4 + b.s5 + b.s6 + b.s7,
                  b.s8 + b.s9 + b.sa + b.sb, b.sc + b.sd + b.se + b.sf);
#endif
}

/* Whether the two 16-value halves of a 32-value group can have different S (Q6_K only). */
#define QI_HALF_SCALES_q4_0 0
#define QI_HALF_SCALES_q4_1 0
#define QI_HALF_SCALES_q5_0 0
#define QI_HALF_SCALES_q5_1 0
#define QI_HALF_SCALES_q8_0 0
#define QI_HALF_SCALES_q6_k 1

#define QI_DOT_q4_0 qi_dot32
#define QI_DOT_q4_1 qi_dot32
#define QI_DOT_q5_0 qi_dot32
#define QI_DOT_q5_1 qi_dot32
#define QI_DOT_q8_0 qi_dot32_signed
#define QI_DOT_q6_k qi_dot32

/* ---- Per type: the block's (D, O), its S and T per 16 values, the values of 32-value group g. */

/* (D, O) from the float16 bits at byte offsets od and oo of the block (oo < 0: O = D; O 0 where
 * none: oo = -2). */
inline float2 qi_head(const __global uchar *b, int od, int oo)
{
    uint hd = *(const __global ushort *)(b + od);
    uint ho = oo >= 0 ? (uint)*(const __global ushort *)(b + oo) : 0u;
    float2 f = ql_half8((uint8)(hd, ho, 0u, 0u, 0u, 0u, 0u, 0u)).s01;
    return oo == -1 ? f.xx : f;
}

inline float2 qi_head_q4_0(const __global uchar *b) { return qi_head(b, 0, -1); }
inline float2 qi_head_q4_1(const __global uchar *b) { return qi_head(b, 0, 2); }
inline float2 qi_head_q5_0(const __global uchar *b) { return qi_head(b, 0, -1); }
inline float2 qi_head_q5_1(const __global uchar *b) { return qi_head(b, 0, 2); }
inline float2 qi_head_q8_0(const __global uchar *b) { return qi_head(b, 0, -2); }
inline float2 qi_head_q4_k(const __global uchar *b) { return qi_head(b, 0, 2); }
inline float2 qi_head_q5_k(const __global uchar *b) { return qi_head(b, 0, 2); }
inline float2 qi_head_q6_k(const __global uchar *b) { return qi_head(b, 208, -1); }

/* s[h], t[h]: S and T of the block's 16-value group h. */
inline void qi_scales_32(int t0, int *s, int *t)
{
    s[0] = s[1] = 1;
    t[0] = t[1] = t0;
}
inline void qi_scales_q4_0(const __global uchar *b, int *s, int *t) { qi_scales_32(-8, s, t); }
inline void qi_scales_q4_1(const __global uchar *b, int *s, int *t) { qi_scales_32(1, s, t); }
inline void qi_scales_q5_0(const __global uchar *b, int *s, int *t) { qi_scales_32(-16, s, t); }
inline void qi_scales_q5_1(const __global uchar *b, int *s, int *t) { qi_scales_32(1, s, t); }
inline void qi_scales_q8_0(const __global uchar *b, int *s, int *t) { qi_scales_32(0, s, t); }

/* Q4_K and Q5_K: the 6-bit scales and mins of the 8 sub-blocks (ggml's get_scale_min_k4, on
 * words as ql_subscales_k4), each for both of its 16-value groups. */
inline void qi_scales_k4(const __global uchar *b, int *s, int *t)
{
    uint lo = ql_u32(b + 4), mid = ql_u32(b + 8), hi = ql_u32(b + 12);
    uint scale_lo = lo & 0x3F3F3F3Fu, scale_hi = (hi & 0x0F0F0F0Fu) | ((lo >> 2) & 0x30303030u);
    uint min_lo = mid & 0x3F3F3F3Fu;
    uint min_hi = ((hi >> 4) & 0x0F0F0F0Fu) | ((mid >> 2) & 0x30303030u);
    const uint16 byte = (uint16)(0, 0, 8, 8, 16, 16, 24, 24, 0, 0, 8, 8, 16, 16, 24, 24);
    const uint16 upper = (uint16)(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    uint16 sc = select((uint16)scale_lo, (uint16)scale_hi, upper == (uint16)1u);
    uint16 mn = select((uint16)min_lo, (uint16)min_hi, upper == (uint16)1u);
    vstore16(as_int16((sc >> byte) & (uint16)0xFFu), 0, s);
    vstore16(-as_int16((mn >> byte) & (uint16)0xFFu), 0, t);
}
inline void qi_scales_q4_k(const __global uchar *b, int *s, int *t) { qi_scales_k4(b, s, t); }
inline void qi_scales_q5_k(const __global uchar *b, int *s, int *t) { qi_scales_k4(b, s, t); }

inline void qi_scales_q6_k(const __global uchar *b, int *s, int *t)
{
    int16 sc = convert_int16(vload16(0, (const __global char *)(b + 192)));
    vstore16(sc, 0, s);
    vstore16(sc * (int16)(-32), 0, t);
}

/* (nibbles of q: the low ones, or the high where `high`) | ((h >> shift) & mask) << 4, for 32
 * bytes q (qlo, qhi) and h (hlo, hhi): values 0-15 and 16-31 (mask 0: the nibbles alone). On x86
 * as one 32-byte vector (the halves re-join in qi_dot32 without a shuffle). */
inline void qi_unpack(uchar16 qlo, uchar16 qhi, uint high, uchar16 hlo, uchar16 hhi, uint shift,
                      uint mask, uchar16 *ulo, uchar16 *uhi)
{
#if defined(__AVX2__)
    typedef uchar qi_ubytes32 __attribute__((ext_vector_type(32)));
    qi_ubytes32 q = QI_CAT32(qlo, qhi), h = QI_CAT32(hlo, hhi);
    qi_ubytes32 low4 = QI_CAT32((uchar16)15, (uchar16)15);
    qi_ubytes32 v = (high ? q >> (qi_ubytes32)4 : q) & low4;
    v |= ((h >> (qi_ubytes32)(uchar)shift) & (qi_ubytes32)(uchar)mask) << (qi_ubytes32)4;
    *ulo = v.lo;
    *uhi = v.hi;
#else
    *ulo = (high ? qlo >> (uchar16)4 : qlo & (uchar16)0x0F) |
           (((hlo >> (uchar16)shift) & (uchar16)mask) << (uchar16)4);
    *uhi = (high ? qhi >> (uchar16)4 : qhi & (uchar16)0x0F) |
           (((hhi >> (uchar16)shift) & (uchar16)mask) << (uchar16)4);
#endif
}

inline void qi_values_q4_0(const __global uchar *b, uint g, uchar16 *ulo, uchar16 *uhi)
{
    uchar16 qs = ql_load16(b + 2);
    *ulo = qs & (uchar16)0x0F;
    *uhi = qs >> (uchar16)4;
}

inline void qi_values_q4_1(const __global uchar *b, uint g, uchar16 *ulo, uchar16 *uhi)
{
    uchar16 qs = ql_load16(b + 4);
    *ulo = qs & (uchar16)0x0F;
    *uhi = qs >> (uchar16)4;
}
inline void qi_values_q5(const __global uchar *qhp, const __global uchar *qsp, uchar16 *ulo,
                         uchar16 *uhi)
{
    uint qh = ql_u32(qhp);
    uchar16 qs = ql_load16(qsp);
    *ulo = (qs & (uchar16)0x0F) | (convert_uchar16(ql_bits16(qh, 0)) << (uchar16)4);
    *uhi = (qs >> (uchar16)4) | (convert_uchar16(ql_bits16(qh, 16)) << (uchar16)4);
}
inline void qi_values_q5_0(const __global uchar *b, uint g, uchar16 *ulo, uchar16 *uhi)
{
    qi_values_q5(b + 2, b + 6, ulo, uhi);
}
inline void qi_values_q5_1(const __global uchar *b, uint g, uchar16 *ulo, uchar16 *uhi)
{
    qi_values_q5(b + 4, b + 8, ulo, uhi);
}
inline void qi_values_q8_0(const __global uchar *b, uint g, uchar16 *ulo, uchar16 *uhi)
{
    *ulo = ql_load16(b + 2);
    *uhi = ql_load16(b + 18);
}
/* Q6_K: values 32g .. 32g + 31 (cl/qlinear.cl's ql_decode_q6_k without the − 32). */
inline void qi_values_q6_k(const __global uchar *b, uint g, uchar16 *ulo, uchar16 *uhi)
{
    const uint h = g >> 2, r = 32 * (g & 3);
    const __global uchar *ql = b + 64 * h + (r & 63), *qh = b + 128 + 32 * h;
    qi_unpack(ql_load16(ql), ql_load16(ql + 16), r & 64, ql_load16(qh), ql_load16(qh + 16),
              2 * (g & 3), 3, ulo, uhi);
}

/* Q4_K's and Q5_K's sub-blocks 2j and 2j + 1 by halves: half h holds values 16h .. 16h + 15 of
 * sub-block 2j (e), then of 2j + 1 (o) — qs[32j + 16h ..]'s low and high nibbles. On x86 one
 * 32-byte vector: the 16 bytes twice, shifted by 0 and 4 as 32-bit lanes. */
#if defined(__AVX2__)
typedef qi_bytes32 qi_half_pair;
#define QI_NIBBLE_SHIFTS8 (uint8)(0, 0, 0, 0, 4, 4, 4, 4)
inline uint8 qi_twice16(const __global uchar *p)
{
    const uchar16 q = ql_load16(p);
    return as_uint8(QI_CAT32(q, q));
}
inline qi_half_pair qi_half_pair_q4_k(const __global uchar *b, uint j, uint h)
{
    const uint8 q = qi_twice16(b + 16 + 32 * j + 16 * h);
    return (qi_half_pair)((q >> QI_NIBBLE_SHIFTS8) & (uint8)0x0F0F0F0Fu);
}
inline qi_half_pair qi_half_pair_q5_k(const __global uchar *b, uint j, uint h)
{
    const uint8 q = qi_twice16(b + 48 + 32 * j + 16 * h), qh = qi_twice16(b + 16 + 16 * h);
    const uint e = 2 * j, o = 2 * j + 1;
    const uint8 bit = (uint8)(e, e, e, e, o, o, o, o);
    return (qi_half_pair)(((q >> QI_NIBBLE_SHIFTS8) & (uint8)0x0F0F0F0Fu) |
                          (((qh >> bit) & (uint8)0x01010101u) << (uint8)4));
}
#else
typedef struct qi_half_pair {
    uchar16 e, o;
} qi_half_pair;
inline qi_half_pair qi_half_pair_q4_k(const __global uchar *b, uint j, uint h)
{
    const uchar16 q = ql_load16(b + 16 + 32 * j + 16 * h);
    qi_half_pair v = {q & (uchar16)0x0F, q >> (uchar16)4};
    return v;
}
inline qi_half_pair qi_half_pair_q5_k(const __global uchar *b, uint j, uint h)
{
    const uchar16 q = ql_load16(b + 48 + 32 * j + 16 * h), qh = ql_load16(b + 16 + 16 * h);
    const uchar16 one = (uchar16)1, four = (uchar16)4;
    qi_half_pair v = {(q & (uchar16)0x0F) | (((qh >> (uchar16)(2 * j)) & one) << four),
                      (q >> four) | (((qh >> (uchar16)(2 * j + 1)) & one) << four)};
    return v;
}
#endif

/* The lanes of sub-blocks 2j and 2j + 1 (Q4_K, Q5_K; S s0 and s1) from their halves a (h = 0)
 * and b (h = 1) and the row's 64 values at x (qi_piece's order: both sub-blocks' first halves,
 * then their second): lane i < 4 = s0 · Σ of values 4i .. 4i + 3 and 16 + 4i .. 16 + 4i + 3 of
 * sub-block 2j, lane 4 + i the same of 2j + 1. On x86 the halves' pair sums add in 16 bits
 * before one vpmaddwd (|sum| ≤ 2·2·31·127 < 2^15). */
inline int8 qi_dot_pair(qi_half_pair a, qi_half_pair b, const __global char *x, short s0, short s1)
{
#if defined(__AVX2__)
    typedef char qi_xbytes32 __attribute__((vector_size(32), aligned(1)));
    const qi_bytes32 xa = *(const __global qi_xbytes32 *)x;
    const qi_bytes32 xb = *(const __global qi_xbytes32 *)(x + 32);
    qi_shorts16 p = __builtin_ia32_pmaddubsw256(a, xa) + __builtin_ia32_pmaddubsw256(b, xb);
    return as_int8(__builtin_ia32_pmaddwd256(p, (qi_shorts16)QI_CAT16((short8)s0, (short8)s1)));
#else
    int16 e = convert_int16(a.e) * convert_int16(vload16(0, x)) +
              convert_int16(b.e) * convert_int16(vload16(2, x));
    int16 o = convert_int16(a.o) * convert_int16(vload16(1, x)) +
              convert_int16(b.o) * convert_int16(vload16(3, x));
    const int t = s0, u = s1;
    return (int8)(((e.s0 + e.s1) + (e.s2 + e.s3)) * t, ((e.s4 + e.s5) + (e.s6 + e.s7)) * t,
                  ((e.s8 + e.s9) + (e.sa + e.sb)) * t, ((e.sc + e.sd) + (e.se + e.sf)) * t,
                  ((o.s0 + o.s1) + (o.s2 + o.s3)) * u, ((o.s4 + o.s5) + (o.s6 + o.s7)) * u,
                  ((o.s8 + o.s9) + (o.sa + o.sb)) * u, ((o.sc + o.sd) + (o.se + o.sf)) * u);
#endif
}

/* B: Σ_h t[h]·xs[h] over the block's QK / 16 groups (the 16 of a K-quant block as vectors; an
 * exact integer in any order: on x86 one vpmaddwd of the 16-bit values, |t| ≤ 32·128, |xs| ≤
 * 16·127, then the eight 32-bit lanes halved three times). */
inline int qi_offset_sum(uint qk, const int *t, const __global short *xs)
{
    if (qk == 32)
        return t[0] * xs[0] + t[1] * xs[1];
#if defined(__AVX2__)
    short16 ts = convert_short16(vload16(0, t)), xv = vload16(0, xs);
    int8 p = as_int8(__builtin_ia32_pmaddwd256((qi_shorts16)ts, (qi_shorts16)xv));
    int4 q = p.lo + p.hi;
    int2 r = q.lo + q.hi;
    return r.x + r.y;
#else
    int16 p = vload16(0, t) * convert_int16(vload16(0, xs));
    return ((p.s0 + p.s1) + (p.s2 + p.s3)) + ((p.s4 + p.s5) + (p.s6 + p.s7)) +
           ((p.s8 + p.s9) + (p.sa + p.sb)) + ((p.sc + p.sd) + (p.se + p.sf));
#endif
}

/* The tile's rows of x (r0 .. r0 + R − 1, clamped to rend − 1): their quantised values, block
 * scales (blocks of QK) and sums per 16 values. */
#define QI_ROW_POINTERS(QK, R)                                                                    \
    const __global char *xq_r[R];                                                                 \
    const __global float *xd_r[R];                                                                \
    const __global short *xs_r[R];                                                                \
    QL_UNROLL for (uint r = 0; r < R; ++r) {                                                      \
        const ulong row_ = min(r0 + r, rend - 1);                                                 \
        xq_r[r] = xq + row_ * k;                                                                  \
        xd_r[r] = xd + row_ * (k / (QK));                                                         \
        xs_r[r] = xs + row_ * (k / 16);                                                           \
    }

/* acc[R][C] (8 lanes) and off[R][C], all +0.0f. */
#define QI_ACCUMULATORS(R, C)                                                                     \
    float8 acc[R][C];                                                                             \
    float off[R][C];                                                                              \
    QL_UNROLL for (uint r = 0; r < R; ++r)                                                        \
        QL_UNROLL for (uint c = 0; c < C; ++c) {                                                  \
            acc[r][c] = (float8)0.0f;                                                             \
            off[r][c] = 0.0f;                                                                     \
        }

/* The order's last step, component by component. */
inline float qi_combine8(float8 a, float off)
{
    float q0 = a.s0 + a.s4, q1 = a.s1 + a.s5, q2 = a.s2 + a.s6, q3 = a.s3 + a.s7;
    float s0 = q0 + q2, s1 = q1 + q3;
    return (s0 + s1) + off;
}

/* The same for two columns' lanes in one vector (lanes 0-7 column 0's, 8-15 column 1's), the
 * same additions on vectors: a few instructions per row instead of a dozen per output. */
inline float2 qi_combine2x8(float16 a, float2 off)
{
    const float8 q = (float8)(a.s0123, a.s89ab) + (float8)(a.s4567, a.scdef);
    const float4 s = (float4)(q.s01, q.s45) + (float4)(q.s23, q.s67);
    return (s.s02 + s.s13) + off;
}

/* The block's float step for element (r, c) from its lanes' integer sums A (int8) and B. */
#define QI_BLOCK_STEP(r, c, A, B)                                                                 \
    acc[r][c] = fma(convert_float8(A), (float8)(head[c].x * dx), acc[r][c]);                      \
    off[r][c] = fma(head[c].y * dx, (float)(B), off[r][c]);

/* ---- The K-quants' 512-bit path (x86 with AVX512BW: PoCL's skylake-avx512 and later). -------
 * The same order as above, two columns in one 16-lane vector per row (lanes 0-7 column 0's,
 * 8-15 column 1's), so that the block's float step is a few 16-lane instructions per row.
 * Q4_K and Q5_K: pair j of sub-blocks takes two 64-byte vectors of both columns, the halves of
 * 16 values (qi_halves_<type>), against x's two 32-byte halves of the pair twice (qi_piece put
 * them in order), two vpmaddubsw added in 16 bits, one vpmaddwd by the sub-blocks' S: already
 * the lanes of the order, with no fold. Q6_K (S per 16 values): a 64-value pair of 32-value
 * groups per column takes one vpmaddubsw and one vpmaddwd, the values in x's order of pieces
 * (0, 2, 1, 3), the block's lanes folded (exact integers) before its float step. */
#if defined(__AVX512BW__)
typedef char qi_bytes64 __attribute__((vector_size(64)));
typedef short qi_shorts32 __attribute__((vector_size(64)));
typedef uchar qi_ubytes32v __attribute__((vector_size(32), aligned(1)));
typedef char qi_xbytes64 __attribute__((vector_size(64), aligned(1)));

inline int16 qi_dot64(qi_bytes64 u, qi_bytes64 x, qi_shorts32 s)
{
    return as_int16(__builtin_ia32_pmaddwd512(__builtin_ia32_pmaddubsw512(u, x), s));
}

inline qi_ubytes32v qi_load32(const __global uchar *p)
{
    return *(const __global qi_ubytes32v *)p;
}

#define QI_CAT64(A, B)                                                                            \
    __builtin_shufflevector(A, B, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17,   \
                            18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34,   \
                            35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51,   \
                            52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63)

/* The 32 bytes at p, twice. */
inline qi_bytes64 qi_twice32(const __global char *p)
{
    typedef char qi_xbytes32 __attribute__((vector_size(32), aligned(1)));
    const qi_xbytes32 v = *(const __global qi_xbytes32 *)p;
    return (qi_bytes64)QI_CAT64(v, v);
}

/* The block's S and T per 16-value group as vectors. */
inline void qi_scales16_k4(const __global uchar *b, short16 *s, short16 *t)
{
    int sv[16], tv[16];
    qi_scales_k4(b, sv, tv);
    *s = convert_short16(vload16(0, sv));
    *t = convert_short16(vload16(0, tv));
}
inline void qi_scales16_q4_k(const __global uchar *b, short16 *s, short16 *t)
{
    qi_scales16_k4(b, s, t);
}
inline void qi_scales16_q5_k(const __global uchar *b, short16 *s, short16 *t)
{
    qi_scales16_k4(b, s, t);
}
inline void qi_scales16_q6_k(const __global uchar *b, short16 *s, short16 *t)
{
    *s = convert_short16(vload16(0, (const __global char *)(b + 192)));
    *t = *s * (short16)(-32);
}

/* ---- Q4_K and Q5_K. */

/* Half h of sub-blocks 2j and 2j + 1 of two columns' blocks b0, b1 (qi_pair_values_<type>'s a
 * for h = 0, b for h = 1): (column 0's 16 values of 2j, of 2j + 1, column 1's of 2j, of
 * 2j + 1), the nibbles of each 16 bytes loaded twice and shifted by 0 and 4 as 32-bit lanes. */
#define QI_NIBBLE_SHIFTS (uint16)(0, 0, 0, 0, 4, 4, 4, 4, 0, 0, 0, 0, 4, 4, 4, 4)
inline uint16 qi_twice16x2(const __global uchar *p0, const __global uchar *p1)
{
    const uchar16 q0 = ql_load16(p0), q1 = ql_load16(p1);
    return as_uint16(QI_CAT64(QI_CAT32(q0, q0), QI_CAT32(q1, q1)));
}
inline qi_bytes64 qi_halves_q4_k(const __global uchar *b0, const __global uchar *b1, uint j,
                                 uint h)
{
    const uint16 q = qi_twice16x2(b0 + 16 + 32 * j + 16 * h, b1 + 16 + 32 * j + 16 * h);
    return (qi_bytes64)((q >> QI_NIBBLE_SHIFTS) & (uint16)0x0F0F0F0Fu);
}
inline qi_bytes64 qi_halves_q5_k(const __global uchar *b0, const __global uchar *b1, uint j,
                                 uint h)
{
    const uint16 q = qi_twice16x2(b0 + 48 + 32 * j + 16 * h, b1 + 48 + 32 * j + 16 * h);
    const uint16 qh = qi_twice16x2(b0 + 16 + 16 * h, b1 + 16 + 16 * h);
    const uint e = 2 * j, o = 2 * j + 1;
    const uint16 bit = (uint16)(e, e, e, e, o, o, o, o, e, e, e, e, o, o, o, o);
    return (qi_bytes64)(((q >> QI_NIBBLE_SHIFTS) & (uint16)0x0F0F0F0Fu) |
                        (((qh >> bit) & (uint16)0x01010101u) << (uint16)4));
}

/* vpmaddwd's factors for pair J from both columns' S per 16 values S2 (column 1's at 16-31):
 * S of sub-blocks 2J and 2J + 1 of column 0, then of column 1, each 8 times. */
#define QI_HALVES_SCALES(S2, J)                                                                   \
    __builtin_shufflevector(S2, S2, 4 * (J), 4 * (J), 4 * (J), 4 * (J), 4 * (J), 4 * (J), 4 *     \
                            (J), 4 * (J), 4 * (J) + 2, 4 * (J) + 2, 4 * (J) + 2, 4 * (J) + 2, 4 * \
                            (J) + 2, 4 * (J) + 2, 4 * (J) + 2, 4 * (J) + 2, 16 + 4 * (J), 16 + 4  \
                            * (J), 16 + 4 * (J), 16 + 4 * (J), 16 + 4 * (J), 16 + 4 * (J), 16 + 4 \
                            * (J), 16 + 4 * (J), 18 + 4 * (J), 18 + 4 * (J), 18 + 4 * (J), 18 + 4 \
                            * (J), 18 + 4 * (J), 18 + 4 * (J), 18 + 4 * (J), 18 + 4 * (J))

/* Two vpmaddubsw (the halves), added in 16 bits (|sum| ≤ 2·2·31·127 < 2^15), one vpmaddwd. */
inline int16 qi_dot64_halves(qi_bytes64 a, qi_bytes64 xa, qi_bytes64 b, qi_bytes64 xb,
                             qi_shorts32 s)
{
    return as_int16(__builtin_ia32_pmaddwd512(
        __builtin_ia32_pmaddubsw512(a, xa) + __builtin_ia32_pmaddubsw512(b, xb), s));
}

/* Pair J of the two columns' blocks (b0_, b1_) against each row: lanes[r] += its lanes. */
#define QI_HALVES_PAIR(TYPE, QK, R, J)                                                            \
    {                                                                                             \
        const qi_bytes64 a_ = qi_halves_##TYPE(b0_, b1_, J, 0);                                   \
        const qi_bytes64 b_ = qi_halves_##TYPE(b0_, b1_, J, 1);                                   \
        const qi_shorts32 sv_ = (qi_shorts32)QI_HALVES_SCALES(sc2_, J);                           \
        QL_UNROLL for (uint r = 0; r < R; ++r) {                                                  \
            const __global char *x_ = xq_r[r] + (ulong)blk * (QK) + 64 * (J);                     \
            lanes[r] += qi_dot64_halves(a_, qi_twice32(x_), b_, qi_twice32(x_ + 32), sv_);        \
        }                                                                                         \
    }

/* The block's lanes[R] of both columns (Q4_K, Q5_K). */
#define QI_WIDE_HALVES(TYPE, QK, BYTES, R)                                                        \
    {                                                                                             \
        const __global uchar *b0_ = w_rows[0] + (ulong)blk * (BYTES);                             \
        const __global uchar *b1_ = w_rows[1] + (ulong)blk * (BYTES);                             \
        const qi_shorts32 sc2_ = (qi_shorts32)QI_CAT32(sc[0], sc[1]);                             \
        QL_UNROLL for (uint r = 0; r < R; ++r)                                                    \
            lanes[r] = (int16)0;                                                                  \
        QI_HALVES_PAIR(TYPE, QK, R, 0)                                                            \
        QI_HALVES_PAIR(TYPE, QK, R, 1)                                                            \
        QI_HALVES_PAIR(TYPE, QK, R, 2)                                                            \
        QI_HALVES_PAIR(TYPE, QK, R, 3)                                                            \
    }

/* ---- Q6_K. */

/* S per 16-value group of the pair's 64 values in x's order of pieces (0, 2, 1, 3; vpmaddwd's
 * 32 factors: 8 per piece). */
#define QI_PAIR_SCALES(S, P)                                                                      \
    __builtin_shufflevector(S, S, 4 * (P), 4 * (P), 4 * (P), 4 * (P), 4 * (P), 4 * (P), 4 * (P),  \
                            4 * (P), 4 * (P) + 2, 4 * (P) + 2, 4 * (P) + 2, 4 * (P) + 2, 4 * (P)  \
                            + 2, 4 * (P) + 2, 4 * (P) + 2, 4 * (P) + 2, 4 * (P) + 1, 4 * (P) + 1, \
                            4 * (P) + 1, 4 * (P) + 1, 4 * (P) + 1, 4 * (P) + 1, 4 * (P) + 1, 4 *  \
                            (P) + 1, 4 * (P) + 3, 4 * (P) + 3, 4 * (P) + 3, 4 * (P) + 3, 4 * (P)  \
                            + 3, 4 * (P) + 3, 4 * (P) + 3, 4 * (P) + 3)

/* The values of groups 2p and 2p + 1 (qi_values_q6_k of both) in x's order of pieces. */
inline qi_bytes64 qi_pair_q6_k(const __global uchar *b, uint p)
{
    const uint h = p >> 1, high = p & 1, shift = 4 * (p & 1);
    qi_ubytes32v q0 = qi_load32(b + 64 * h), q1 = qi_load32(b + 64 * h + 32);
    qi_ubytes32v qh = qi_load32(b + 128 + 32 * h);
    qi_ubytes32v lo = (high ? q0 >> (uchar)4 : q0 & (uchar)15) |
                      (((qh >> (uchar)shift) & (uchar)3) << (uchar)4);
    qi_ubytes32v hi = (high ? q1 >> (uchar)4 : q1 & (uchar)15) |
                      (((qh >> (uchar)(shift + 2)) & (uchar)3) << (uchar)4);
    return (qi_bytes64)__builtin_shufflevector(
        lo, hi, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 32, 33, 34, 35, 36, 37, 38,
        39, 40, 41, 42, 43, 44, 45, 46, 47, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29,
        30, 31, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63);
}

/* Pair P of the block: the two columns' values and scales, against each row's 64 bytes of x. */
#define QI_WIDE_PAIR(TYPE, QK, BYTES, R, P)                                                       \
    QL_UNROLL for (uint c = 0; c < 2; ++c) {                                                      \
        const qi_bytes64 u_ = qi_pair_##TYPE(w_rows[c] + (ulong)blk * (BYTES), P);                \
        const qi_shorts32 sv_ = (qi_shorts32)QI_PAIR_SCALES(sc[c], P);                            \
        QL_UNROLL for (uint r = 0; r < R; ++r) {                                                  \
            const qi_bytes64 x_ =                                                                 \
                (qi_bytes64) * (const __global qi_xbytes64 *)(xq_r[r] + (ulong)blk * (QK) +       \
                                                               64 * (P));                         \
            dot[r][c] += qi_dot64(u_, x_, sv_);                                                   \
        }                                                                                         \
    }

/* Both columns' sums a, b (16 lanes each, pieces 0, 2, 1, 3 of every 64 values) folded to the
 * order's lanes: lane l < 4 of a column is lanes l and l + 4, lane l ≥ 4 lanes l + 4 and l + 8;
 * lanes 0-7 column 0's, 8-15 column 1's. */
inline int16 qi_fold_pieces(int16 a, int16 b)
{
    return __builtin_shufflevector(a, b, 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26,
                                   27) +
           __builtin_shufflevector(a, b, 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30,
                                   31);
}

/* The block's lanes[R] of both columns (Q6_K). */
#define QI_WIDE_FOLDED(TYPE, QK, BYTES, R)                                                        \
    {                                                                                             \
        int16 dot[R][2];                                                                          \
        QL_UNROLL for (uint r = 0; r < R; ++r)                                                    \
            dot[r][0] = dot[r][1] = (int16)0;                                                     \
        QI_WIDE_PAIR(TYPE, QK, BYTES, R, 0)                                                       \
        QI_WIDE_PAIR(TYPE, QK, BYTES, R, 1)                                                       \
        QI_WIDE_PAIR(TYPE, QK, BYTES, R, 2)                                                       \
        QI_WIDE_PAIR(TYPE, QK, BYTES, R, 3)                                                       \
        QL_UNROLL for (uint r = 0; r < R; ++r)                                                    \
            lanes[r] = qi_fold_pieces(dot[r][0], dot[r][1]);                                      \
    }

#define QI_WIDE_LANES_q4_k QI_WIDE_HALVES
#define QI_WIDE_LANES_q5_k QI_WIDE_HALVES
#define QI_WIDE_LANES_q6_k QI_WIDE_FOLDED

/* B of two rows' two columns from their vpmaddwd products p (row r) and q (row r + 1), each with
 * lanes 0-7 column 0's and 8-15 column 1's: (B(r, 0), B(r, 1), B(r + 1, 0), B(r + 1, 1)), the
 * sums of 8 lanes halved three times (exact integers). */
inline int4 qi_offset_sums2x2(int16 p, int16 q)
{
    int16 a = __builtin_shufflevector(p, q, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28,
                                      30) +
              __builtin_shufflevector(p, q, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29,
                                      31);
    int8 b = __builtin_shufflevector(a, a, 0, 2, 4, 6, 8, 10, 12, 14) +
             __builtin_shufflevector(a, a, 1, 3, 5, 7, 9, 11, 13, 15);
    return __builtin_shufflevector(b, b, 0, 2, 4, 6) + __builtin_shufflevector(b, b, 1, 3, 5, 7);
}

/* The offset term of the K-quants' 512-bit tile, two ways; each gives B exactly and the order's
 * off = fma(O·dx, (float)B, off) per output, so the same bytes.
 *
 * QI_OFFSET_INT: B of each row's two columns by one vpmaddwd of T against the row's xs, its 8
 * lanes a column halved three times two rows at a time (qi_offset_sums2x2); off in float4 per
 * two rows.
 *
 * QI_OFFSET_XT (Q4_K and Q5_K, whose T is one per 32 values, in the tile of 8 rows × 2): B in
 * float32 fused multiply-adds, exact (|T| ≤ 63, the sums of 32 ≤ 32 · 127: every partial sum an
 * integer below 2^21), for all 16 outputs at once: for each sub-block j, T_j of both columns
 * (lanes 2i, 2i + 1 of row i) times the rows' sums of 32, read from the copy the quantisation
 * wrote for these 8 rows (cl/act_quant.cl's qi_transpose_block: each sum twice, then each dx
 * twice); off in one float16, lanes 2i, 2i + 1 row i's. Without multiplies on the integer
 * port (p0 on x86, which the vpmaddubsw and vpmaddwd of the values keep busy): Q4_K layers 5-8 %
 * faster (Qwen3-0.6B shape, m 512). */
#define QI_OFFSET_INT_DECLARE(R)                                                                  \
    float4 off4[((R) + 1) / 2];                                                                   \
    QL_UNROLL for (uint h = 0; h < ((R) + 1) / 2; ++h)                                            \
        off4[h] = (float4)0.0f;
#define QI_OFFSET_INT_BLOCK(QK, R)                                                                \
    {                                                                                             \
        const qi_shorts32 t2_ = (qi_shorts32)QI_CAT32(tc[0], tc[1]);                              \
        int16 tx[R];                                                                              \
        QL_UNROLL for (uint r = 0; r < R; ++r) {                                                  \
            const short16 xsb_ = vload16(0, xs_r[r] + (ulong)blk * ((QK) / 16));                  \
            tx[r] = as_int16(__builtin_ia32_pmaddwd512(t2_, (qi_shorts32)QI_CAT32(xsb_, xsb_)));  \
        }                                                                                         \
        QL_UNROLL for (uint h = 0; h < ((R) + 1) / 2; ++h) {                                      \
            const uint r1_ = min(2 * h + 1, (uint)(R) - 1);                                       \
            const float4 dx4_ = (float4)(dx[2 * h], dx[2 * h], dx[r1_], dx[r1_]);                 \
            const int4 b4_ = qi_offset_sums2x2(tx[2 * h], tx[r1_]);                               \
            off4[h] = fma(o2_.xyxy * dx4_, convert_float4(b4_), off4[h]);                         \
        }                                                                                         \
    }
#define QI_OFFSET_INT_ROW(r) ((r) & 1 ? off4[(r) / 2].zw : off4[(r) / 2].xy)

#define QI_XT_T(J)                                                                                \
    __builtin_shufflevector(tf_, tf_, J, 8 + J, J, 8 + J, J, 8 + J, J, 8 + J, J, 8 + J, J, 8 + J, \
                            J, 8 + J, J, 8 + J)
#define QI_OFFSET_XT_DECLARE(R)                                                                   \
    float16 off16 = (float16)0.0f;                                                                \
    float offs_[16];                                                                              \
    const __global float *xt_g = xt + (ulong)(r0 / QI_XT_ROWS) * (k / 256) * QI_XT_FLOATS;
#define QI_OFFSET_XT_BLOCK(QK, R)                                                                 \
    {                                                                                             \
        const __global float *xt_ = xt_g + (ulong)blk * QI_XT_FLOATS;                             \
        const float16 tf_ = (float16)(convert_float8(tc[0].even), convert_float8(tc[1].even));    \
        float16 b_ = QI_XT_T(0) * vload16(0, xt_);                                                \
        b_ = fma(QI_XT_T(1), vload16(1, xt_), b_);                                                \
        b_ = fma(QI_XT_T(2), vload16(2, xt_), b_);                                                \
        b_ = fma(QI_XT_T(3), vload16(3, xt_), b_);                                                \
        b_ = fma(QI_XT_T(4), vload16(4, xt_), b_);                                                \
        b_ = fma(QI_XT_T(5), vload16(5, xt_), b_);                                                \
        b_ = fma(QI_XT_T(6), vload16(6, xt_), b_);                                                \
        b_ = fma(QI_XT_T(7), vload16(7, xt_), b_);                                                \
        const float16 o16_ = __builtin_shufflevector(o2_, o2_, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0,   \
                                                     1, 0, 1, 0, 1);                              \
        off16 = fma(o16_ * vload16(8, xt_), b_, off16);                                           \
    }
#define QI_OFFSET_XT_ROW(r) (vstore16(off16, 0, offs_), vload2(r, offs_))

/* The K-quants' tile for C = 2 (the default tile, and the SwiGLU kernels' gate and up rows;
 * other tilings take QI_TILE_THEN): a row's two columns in one vector (lanes 0-7 column 0, 8-15
 * column 1), so that the block's float step is a few 16-lane instructions per row and the
 * tile's accumulators stay in registers; the offset term as OFFSET (above). */
#define QI_WIDE2_TILE_THEN(TYPE, QK, BYTES, R, C, STORE, AHEAD)                                   \
    {                                                                                             \
        QI_ROW_POINTERS(QK, R)                                                                    \
        float16 acc2[R];                                                                          \
        QL_UNROLL for (uint r = 0; r < R; ++r)                                                    \
            acc2[r] = (float16)0.0f;                                                              \
        QI_OFFSET_DECLARE_##TYPE(R)                                                               \
        const uint blocks = k / (QK);                                                             \
        for (uint blk = 0; blk < blocks; ++blk) {                                                 \
            float2 head[2];                                                                       \
            short16 sc[2], tc[2];                                                                 \
            QL_UNROLL for (uint c = 0; c < 2; ++c) {                                              \
                const __global uchar *b_ = w_rows[c] + (ulong)blk * (BYTES);                      \
                QL_PREFETCH_SPAN(b_, BYTES, AHEAD)                                                \
                head[c] = qi_head_##TYPE(b_);                                                     \
                qi_scales16_##TYPE(b_, &sc[c], &tc[c]);                                           \
            }                                                                                     \
            int16 lanes[R];                                                                       \
            QI_WIDE_LANES_##TYPE(TYPE, QK, BYTES, R)                                              \
            const float16 d2_ = (float16)((float8)head[0].x, (float8)head[1].x);                  \
            const float2 o2_ = (float2)(head[0].y, head[1].y);                                    \
            float dx[R];                                                                          \
            QL_UNROLL for (uint r = 0; r < R; ++r) {                                              \
                dx[r] = xd_r[r][blk];                                                             \
                acc2[r] = fma(convert_float16(lanes[r]), d2_ * dx[r], acc2[r]);                   \
            }                                                                                     \
            QI_OFFSET_BLOCK_##TYPE(QK, R)                                                         \
        }                                                                                         \
        float comb_[R][2];                                                                        \
        QL_UNROLL for (uint r = 0; r < R; ++r) {                                                  \
            const float2 y2_ = qi_combine2x8(acc2[r], QI_OFFSET_ROW_##TYPE(r));                   \
            comb_[r][0] = y2_.x;                                                                  \
            comb_[r][1] = y2_.y;                                                                  \
        }                                                                                         \
        STORE(R, C)                                                                               \
    }

/* Which offset each K-quant's 512-bit tile takes (QI_OFFSET_XT where src/ops/qlinear.c's
 * xt_wanted gives the kernels the copy: the tile of 8 × 2). */
#if QI_MM_R == QI_XT_ROWS && QI_MM_C == 2
#define QI_OFFSET_DECLARE_q4_k QI_OFFSET_XT_DECLARE
#define QI_OFFSET_BLOCK_q4_k QI_OFFSET_XT_BLOCK
#define QI_OFFSET_ROW_q4_k QI_OFFSET_XT_ROW
#define QI_OFFSET_DECLARE_q5_k QI_OFFSET_XT_DECLARE
#define QI_OFFSET_BLOCK_q5_k QI_OFFSET_XT_BLOCK
#define QI_OFFSET_ROW_q5_k QI_OFFSET_XT_ROW
#else
#define QI_OFFSET_DECLARE_q4_k QI_OFFSET_INT_DECLARE
#define QI_OFFSET_BLOCK_q4_k QI_OFFSET_INT_BLOCK
#define QI_OFFSET_ROW_q4_k QI_OFFSET_INT_ROW
#define QI_OFFSET_DECLARE_q5_k QI_OFFSET_INT_DECLARE
#define QI_OFFSET_BLOCK_q5_k QI_OFFSET_INT_BLOCK
#define QI_OFFSET_ROW_q5_k QI_OFFSET_INT_ROW
#endif
#define QI_OFFSET_DECLARE_q6_k QI_OFFSET_INT_DECLARE
#define QI_OFFSET_BLOCK_q6_k QI_OFFSET_INT_BLOCK
#define QI_OFFSET_ROW_q6_k QI_OFFSET_INT_ROW

/* The K-quants' matrix–matrix tiles: plain (QI_MM_C columns) and SwiGLU (gate and up rows). */
#if QI_MM_C == 2
#define QI_WIDE_MM_TILE QI_WIDE2_TILE_THEN
#else
#define QI_WIDE_MM_TILE QI_TILE_THEN
#endif
#if QI_MM_C <= 2
#define QI_WIDE_SWIGLU_MM_TILE QI_WIDE2_TILE_THEN
#else
#define QI_WIDE_SWIGLU_MM_TILE QI_TILE_THEN
#endif
#define QI_MM_TILE_q4_k QI_WIDE_MM_TILE
#define QI_MM_TILE_q5_k QI_WIDE_MM_TILE
#define QI_MM_TILE_q6_k QI_WIDE_MM_TILE
#define QI_SWIGLU_MM_TILE_q4_k QI_WIDE_SWIGLU_MM_TILE
#define QI_SWIGLU_MM_TILE_q5_k QI_WIDE_SWIGLU_MM_TILE
#define QI_SWIGLU_MM_TILE_q6_k QI_WIDE_SWIGLU_MM_TILE

/* ---- The 32-value block types' two-column tile on x86 with AVX512BW. ----------------------
 * A block of both columns in one 64-byte vector (column 0's 32 values, then column 1's) against
 * the row's 32 bytes of x twice: one vpmaddubsw and one vpmaddwd (by ones: S is 1) give column
 * 0's A in lanes 0-7 and column 1's in 8-15, already the layout of the row's two accumulators;
 * each block's float step in the order above. Q8_0's signed values as qi_dot32_signed: |u|
 * times xq with u's sign, the sign taken as one masked subtraction per row (u's sign bits as a
 * mask, vpmovb2m, once per block; AVX-512 has no 64-byte vpsignb): 6 vector operations per row
 * and block instead of 7, the same integers. */
QI_VNNI_TARGET inline int16 qi_dot64_ones(qi_bytes64 u, qi_bytes64 x)
{
#if defined(QI_VNNI)
    return __builtin_ia32_vpdpbusd512((int16)0, as_int16(u), as_int16(x));
#else
    const qi_shorts32 one = (qi_shorts32)QI_CAT32(QI_CAT16((short8)1, (short8)1),
                                                  QI_CAT16((short8)1, (short8)1));
    return qi_dot64(u, x, one);
#endif
}
QI_VNNI_TARGET inline int16 qi_dot64_signed(qi_bytes64 u, qi_bytes64 x)
{
    const qi_bytes64 neg = (qi_bytes64)(u < (char)0);
    const ulong negative = __builtin_ia32_cvtb2mask512(u);
    return qi_dot64_ones((u ^ neg) - neg, __builtin_ia32_selectb_512(negative, (x - x) - x, x));
}
#define QI_DOT64_q4_0 qi_dot64_ones
#define QI_DOT64_q4_1 qi_dot64_ones
#define QI_DOT64_q5_0 qi_dot64_ones
#define QI_DOT64_q5_1 qi_dot64_ones
#define QI_DOT64_q8_0 qi_dot64_signed
/* Whether the type has an offset term (Q8_0's O and T are 0: fma(0 · dx, 0, off) leaves off
 * as it is for every finite dx, so its tile skips it). */
#define QI_HAS_OFFSET_q4_0 1
#define QI_HAS_OFFSET_q4_1 1
#define QI_HAS_OFFSET_q5_0 1
#define QI_HAS_OFFSET_q5_1 1
#define QI_HAS_OFFSET_q8_0 0

#define QI_WIDE32_TILE_THEN(TYPE, QK, BYTES, R, C, STORE, AHEAD)                                  \
    {                                                                                             \
        QI_ROW_POINTERS(32, R)                                                                    \
        float16 acc2[R];                                                                          \
        float2 off2[R];                                                                           \
        QL_UNROLL for (uint r = 0; r < R; ++r) {                                                  \
            acc2[r] = (float16)0.0f;                                                              \
            off2[r] = (float2)0.0f;                                                               \
        }                                                                                         \
        const uint blocks = k / 32;                                                               \
        for (uint blk = 0; blk < blocks; ++blk) {                                                 \
            float2 head[2];                                                                       \
            uchar16 v_[2][2];                                                                     \
            QL_UNROLL for (uint c = 0; c < 2; ++c) {                                              \
                const __global uchar *b_ = w_rows[c] + (ulong)blk * (BYTES);                      \
                QL_PREFETCH_SPAN(b_, BYTES, AHEAD)                                                \
                head[c] = qi_head_##TYPE(b_);                                                     \
                qi_values_##TYPE(b_, 0, &v_[c][0], &v_[c][1]);                                    \
            }                                                                                     \
            const qi_bytes64 u_ =                                                                 \
                (qi_bytes64)QI_CAT64(QI_CAT32(v_[0][0], v_[0][1]), QI_CAT32(v_[1][0], v_[1][1])); \
            int s_[2], t_[2];                                                                     \
            qi_scales_##TYPE(w_rows[0], s_, t_);                                                  \
            const float16 d2_ = (float16)((float8)head[0].x, (float8)head[1].x);                  \
            const float2 o2_ = (float2)(head[0].y, head[1].y);                                    \
            QL_UNROLL for (uint r = 0; r < R; ++r) {                                              \
                const int16 e_ = QI_DOT64_##TYPE(u_, qi_twice32(xq_r[r] + (ulong)blk * 32));      \
                const float dx = xd_r[r][blk];                                                    \
                const int b_ = qi_offset_sum(32, t_, xs_r[r] + (ulong)blk * 2);                   \
                acc2[r] = fma(convert_float16(e_), d2_ * dx, acc2[r]);                            \
                if (QI_HAS_OFFSET_##TYPE)                                                         \
                    off2[r] = fma(o2_ * dx, (float2)(float)b_, off2[r]);                          \
            }                                                                                     \
        }                                                                                         \
        float comb_[R][2];                                                                        \
        QL_UNROLL for (uint r = 0; r < R; ++r) {                                                  \
            const float2 y2_ = qi_combine2x8(acc2[r], off2[r]);                                   \
            comb_[r][0] = y2_.x;                                                                  \
            comb_[r][1] = y2_.y;                                                                  \
        }                                                                                         \
        STORE(R, C)                                                                               \
    }

#if QI_MM_C == 2
#define QI_WIDE32_MM_TILE QI_WIDE32_TILE_THEN
#else
#define QI_WIDE32_MM_TILE QI_TILE_THEN
#endif
#if QI_MM_C <= 2
#define QI_WIDE32_SWIGLU_MM_TILE QI_WIDE32_TILE_THEN
#else
#define QI_WIDE32_SWIGLU_MM_TILE QI_TILE_THEN
#endif
#define QI_MM_TILE_q4_0 QI_WIDE32_MM_TILE
#define QI_MM_TILE_q4_1 QI_WIDE32_MM_TILE
#define QI_MM_TILE_q5_0 QI_WIDE32_MM_TILE
#define QI_MM_TILE_q5_1 QI_WIDE32_MM_TILE
#define QI_MM_TILE_q8_0 QI_WIDE32_MM_TILE
#define QI_SWIGLU_MM_TILE_q4_0 QI_WIDE32_SWIGLU_MM_TILE
#define QI_SWIGLU_MM_TILE_q4_1 QI_WIDE32_SWIGLU_MM_TILE
#define QI_SWIGLU_MM_TILE_q5_0 QI_WIDE32_SWIGLU_MM_TILE
#define QI_SWIGLU_MM_TILE_q5_1 QI_WIDE32_SWIGLU_MM_TILE
#define QI_SWIGLU_MM_TILE_q8_0 QI_WIDE32_SWIGLU_MM_TILE
#else
#define QI_MM_TILE_q4_k QI_TILE_THEN
#define QI_MM_TILE_q5_k QI_TILE_THEN
#define QI_MM_TILE_q6_k QI_TILE_THEN
#define QI_SWIGLU_MM_TILE_q4_k QI_TILE_THEN
#define QI_SWIGLU_MM_TILE_q5_k QI_TILE_THEN
#define QI_SWIGLU_MM_TILE_q6_k QI_TILE_THEN
#define QI_MM_TILE_q4_0 QI_TILE_THEN
#define QI_MM_TILE_q4_1 QI_TILE_THEN
#define QI_MM_TILE_q5_0 QI_TILE_THEN
#define QI_MM_TILE_q5_1 QI_TILE_THEN
#define QI_MM_TILE_q8_0 QI_TILE_THEN
#define QI_SWIGLU_MM_TILE_q4_0 QI_TILE_THEN
#define QI_SWIGLU_MM_TILE_q4_1 QI_TILE_THEN
#define QI_SWIGLU_MM_TILE_q5_0 QI_TILE_THEN
#define QI_SWIGLU_MM_TILE_q5_1 QI_TILE_THEN
#define QI_SWIGLU_MM_TILE_q8_0 QI_TILE_THEN
#endif

/* ---- The kernels. ---------------------------------------------------------------------------- */

/* A block's integer sums dot[R][C] (the generic tile's): each 32-value group g of the C columns
 * against the R rows (x's 16-value pieces where qi_piece puts them). */
#define QI_GROUPS32(TYPE, QK, BYTES, R, C)                                                        \
    QL_UNROLL for (uint g = 0; g < (QK) / 32; ++g) {                                              \
        QL_UNROLL for (uint c = 0; c < C; ++c) {                                                  \
            uchar16 ulo, uhi;                                                                     \
            qi_values_##TYPE(w_rows[c] + (ulong)blk * (BYTES), g, &ulo, &uhi);                    \
            const short8 slo = (short8)(short)s[c][2 * g];                                        \
            const short8 shi = QI_HALF_SCALES_##TYPE ? (short8)(short)s[c][2 * g + 1] : slo;      \
            QL_UNROLL for (uint r = 0; r < R; ++r) {                                              \
                const __global char *xg_ = xq_r[r] + (ulong)blk * (QK);                           \
                dot[r][c] += QI_DOT_##TYPE(ulo, uhi, vload16(qi_piece(QK, 2 * g), xg_),           \
                                           vload16(qi_piece(QK, 2 * g + 1), xg_), slo, shi);      \
            }                                                                                     \
        }                                                                                         \
    }

/* Q4_K's and Q5_K's: sub-blocks 2j and 2j + 1 together (qi_dot_pair), whose halves of 16 values
 * x holds as 64 contiguous bytes (qi_piece). */
#define QI_GROUP_PAIRS(TYPE, QK, BYTES, R, C)                                                     \
    QL_UNROLL for (uint j = 0; j < (QK) / 64; ++j) {                                              \
        QL_UNROLL for (uint c = 0; c < C; ++c) {                                                  \
            const __global uchar *b_ = w_rows[c] + (ulong)blk * (BYTES);                          \
            const qi_half_pair a_ = qi_half_pair_##TYPE(b_, j, 0);                                \
            const qi_half_pair h_ = qi_half_pair_##TYPE(b_, j, 1);                                \
            QL_UNROLL for (uint r = 0; r < R; ++r)                                                \
                dot[r][c] += qi_dot_pair(a_, h_, xq_r[r] + (ulong)blk * (QK) + 64 * j,            \
                                         (short)s[c][4 * j], (short)s[c][4 * j + 2]);             \
        }                                                                                         \
    }

#define QI_GROUPS_q4_0 QI_GROUPS32
#define QI_GROUPS_q4_1 QI_GROUPS32
#define QI_GROUPS_q5_0 QI_GROUPS32
#define QI_GROUPS_q5_1 QI_GROUPS32
#define QI_GROUPS_q8_0 QI_GROUPS32
#define QI_GROUPS_q4_k QI_GROUP_PAIRS
#define QI_GROUPS_q5_k QI_GROUP_PAIRS
#define QI_GROUPS_q6_k QI_GROUPS32

/* Rows r0 .. r0 + R − 1 (clamped to rend − 1) × the C weight rows at w_rows[]: the order above;
 * then STORE(R, C) writes the tile's outputs comb_[R][C] (acc and off combined); the weight rows
 * prefetched AHEAD bytes ahead (cl/qlinear.cl's QL_PREFETCH_SPAN; 0: not at all). */
#define QI_TILE_THEN(TYPE, QK, BYTES, R, C, STORE, AHEAD)                                         \
    {                                                                                             \
        QI_ROW_POINTERS(QK, R)                                                                    \
        QI_ACCUMULATORS(R, C)                                                                     \
        const uint blocks = k / (QK);                                                             \
        for (uint blk = 0; blk < blocks; ++blk) {                                                 \
            float2 head[C];                                                                       \
            int s[C][(QK) / 16], t[C][(QK) / 16];                                                 \
            int8 dot[R][C];                                                                       \
            QL_UNROLL for (uint c = 0; c < C; ++c) {                                              \
                const __global uchar *b_ = w_rows[c] + (ulong)blk * (BYTES);                      \
                QL_PREFETCH_SPAN(b_, BYTES, AHEAD)                                                \
                head[c] = qi_head_##TYPE(b_);                                                     \
                qi_scales_##TYPE(b_, s[c], t[c]);                                                 \
                QL_UNROLL for (uint r = 0; r < R; ++r)                                            \
                    dot[r][c] = (int8)0;                                                          \
            }                                                                                     \
            QI_GROUPS_##TYPE(TYPE, QK, BYTES, R, C)                                               \
            QL_UNROLL for (uint r = 0; r < R; ++r) {                                              \
                const float dx = xd_r[r][blk];                                                    \
                const __global short *xsb_ = xs_r[r] + (ulong)blk * ((QK) / 16);                  \
                QL_UNROLL for (uint c = 0; c < C; ++c) {                                          \
                    const int bsum = qi_offset_sum(QK, t[c], xsb_);                               \
                    QI_BLOCK_STEP(r, c, dot[r][c], bsum)                                          \
                }                                                                                 \
            }                                                                                     \
        }                                                                                         \
        float comb_[R][C];                                                                        \
        QL_UNROLL for (uint r = 0; r < R; ++r)                                                    \
            QL_UNROLL for (uint c = 0; c < C; ++c)                                                \
                comb_[r][c] = qi_combine8(acc[r][c], off[r][c]);                                  \
        STORE(R, C)                                                                               \
    }

/* The tile's outputs comb_[R][C] (every tile computes them, in the order's last step) to y. */
#define QI_STORE(R, C)                                                                            \
    QL_UNROLL for (uint r = 0; r < R; ++r)                                                        \
        QL_UNROLL for (uint c = 0; c < C; ++c)                                                    \
            if (r0 + r < rend && j0 + c < n)                                                      \
                y[y_off + (ulong)(r0 + r) * ldy + j0 + c] = comb_[r][c];

#define QI_COMBINE(r, c) comb_[r][c]
#define QI_STORE_SWIGLU(R, C) QL_STORE_SWIGLU_ROWS(R, C, QI_COMBINE)

#define QI_MM_SWIGLU_C ((QI_MM_C + 1) / 2)

#define QI_ARGS                                                                                   \
    uint m, uint n, uint k, const __global char *xq, const __global float *xd,                    \
        const __global short *xs, const __global float *xt, const __global uchar *w,              \
        ulong row_bytes, __global float *y, ulong y_off, uint ldy, uint rows_per_item

/* The matrix–vector kernels walk their run of column tiles as cl/qlinear.cl's do (the bodies of
 * QI_KERNEL: gid0_, gid1_ and gsize0_ are the work-item's ids and the global size). */
#define QI_MV_BODY(TYPE, QK, BYTES, COLS, ROWS, TILE_C, STORE)                                    \
    const uint groups = (n + (COLS) - 1) / (COLS);                                                \
    const uint per_item = (groups + gsize0_ - 1) / gsize0_;                                       \
    const uint gend = min(groups, gid0_ * per_item + per_item);                                   \
    const uint rbegin = gid1_ * rows_per_item;                                                    \
    const uint rend = min(m, rbegin + rows_per_item);                                             \
    for (uint g0 = gid0_ * per_item; g0 < gend; ++g0) {                                           \
        const uint j0 = g0 * (COLS);                                                              \
        ROWS(COLS)                                                                                \
        uint r0 = rbegin;                                                                         \
        for (; r0 + QL_MV_R <= rend; r0 += QL_MV_R)                                               \
            QI_TILE_THEN(TYPE, QK, BYTES, QL_MV_R, TILE_C, STORE, QL_PREFETCH)                    \
        for (; r0 < rend; ++r0)                                                                   \
            QI_TILE_THEN(TYPE, QK, BYTES, 1, TILE_C, STORE, QL_PREFETCH)                          \
    }

#define QI_MM_BODY(TYPE, QK, BYTES, COLS, ROWS, TILE, TILE_C, STORE)                              \
    const uint j0 = gid0_ * (COLS);                                                               \
    const uint rbegin = gid1_ * rows_per_item;                                                    \
    const uint rend = min(m, rbegin + rows_per_item);                                             \
    ROWS(COLS)                                                                                    \
    for (uint r0 = rbegin; r0 < rend; r0 += QI_MM_R)                                              \
        TILE(TYPE, QK, BYTES, QI_MM_R, TILE_C, STORE, 0)

#define QI_ARG_NAMES m, n, k, xq, xd, xs, xt, w, row_bytes, y, y_off, ldy, rows_per_item

/* Kernel NAME(QI_ARGS) whose BODY runs in a function of its own, NAME_body, given the work-item's
 * ids (gid0_, gid1_) and the global size gsize0_: compiled for AVX512-VNNI where QI_VNNI is set
 * (the header says why), an ordinary inlined function elsewhere. */
#if defined(QI_VNNI)
#define QI_BODY_TARGET QI_VNNI_TARGET __attribute__((noinline))
#else
#define QI_BODY_TARGET
#endif
#define QI_KERNEL(NAME, BODY)                                                                     \
    QI_BODY_TARGET void NAME##_body(QI_ARGS, uint gid0_, uint gid1_, uint gsize0_)                \
    {                                                                                             \
        BODY                                                                                      \
    }                                                                                             \
    __kernel __attribute__((reqd_work_group_size(1, 1, 1))) void NAME(QI_ARGS)                    \
    {                                                                                             \
        NAME##_body(QI_ARG_NAMES, get_global_id(0), get_global_id(1), get_global_size(0));        \
    }

#define QI_KERNELS(TYPE, QK, BYTES)                                                               \
    QI_KERNEL(clattn_qlinear_i8_mv_##TYPE,                                                        \
              QI_MV_BODY(TYPE, QK, BYTES, QL_MV_COLS(TYPE), QL_ROWS, QL_MV_COLS(TYPE), QI_STORE)) \
    QI_KERNEL(clattn_qlinear_i8_mm_##TYPE,                                                        \
              QI_MM_BODY(TYPE, QK, BYTES, QI_MM_C, QL_ROWS, QI_MM_TILE_##TYPE, QI_MM_C,           \
                         QI_STORE))                                                               \
    QI_KERNEL(clattn_qlinear_i8_swiglu_mv_##TYPE,                                                 \
              QI_MV_BODY(TYPE, QK, BYTES, QL_MV_SWIGLU_COLS(TYPE), QL_ROWS_SWIGLU,                \
                         2 * QL_MV_SWIGLU_COLS(TYPE), QI_STORE_SWIGLU))                           \
    QI_KERNEL(clattn_qlinear_i8_swiglu_mm_##TYPE,                                                 \
              QI_MM_BODY(TYPE, QK, BYTES, QI_MM_SWIGLU_C, QL_ROWS_SWIGLU,                         \
                         QI_SWIGLU_MM_TILE_##TYPE, 2 * QI_MM_SWIGLU_C, QI_STORE_SWIGLU))

QI_KERNELS(q4_0, 32, 18)
QI_KERNELS(q4_1, 32, 20)
QI_KERNELS(q5_0, 32, 22)
QI_KERNELS(q5_1, 32, 24)
QI_KERNELS(q8_0, 32, 34)
QI_KERNELS(q4_k, 256, 144)
QI_KERNELS(q5_k, 256, 176)
QI_KERNELS(q6_k, 256, 210)
