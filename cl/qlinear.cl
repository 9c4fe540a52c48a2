/*
 * Linear layers on weights kept in ggml's block types (src/ops/qlinear.c):
 *
 *   y[r, j] = Σ_l x[r, l] · W[j, l]      x [m, k] float32, W [n, k] in ggml blocks, y [m, n]
 *
 * The weight stays as the file stores it (rows of k values, each row whole blocks) and is
 * decoded while it is read, 16 values at a time (a "chunk": every ggml block is a whole number
 * of chunks, and a chunk never straddles two sub-block scales).
 *
 * ONE REDUCTION ORDER (batch invariance). Every kernel of this file computes every output
 * element in exactly this order, so that row r's bytes never depend on m, on the other rows,
 * or on which kernel ran:
 *   1. 16 partial sums p[0..15] start at +0.0f; for chunk c = 0, 1, …, k/16 − 1 in order,
 *      p[i] = fma(x[r, 16c + i], w[j, 16c + i], p[i])  (one correctly rounded fma per term);
 *   2. the partials are combined in a fixed tree: q[i] = p[i] + p[i + 8] (i < 8),
 *      s[i] = q[i] + q[i + 4] (i < 4), t[i] = s[i] + s[i + 2] (i < 2), y = t[0] + t[1].
 * The weights decode as gguf-py's dequantize does, with one difference: where it multiplies
 * and then adds (d·q + m of Q4_1/Q5_1, (d·sc)·q − dmin·min of Q4_K/Q5_K) the kernels call fma,
 * so that no compiler can choose differently per kernel whether to fuse the two (FP_CONTRACT
 * is off, but an implementation that goes through SPIR-V, as Mesa's rusticl does, may not
 * carry the pragma, and then fusing is its choice per kernel). Those values then differ from
 * gguf-py's by at most a rounding (tests/test_qlinear.c's bound counts it); the other types'
 * values are gguf-py's bit for bit. A kernel may vectorise or tile however it likes as long as
 * each element follows 1–2.
 *
 * Two kernels per type, one template with a tile of R rows × C columns per work-item:
 *   clattn_qlinear_mv_<type>  decode (small m): the output columns are cut into tiles of
 *                             QL_MV_C_<type> columns, and each work-item takes a contiguous run
 *                             of ⌈tiles / global size 0⌉ of them (a few work-items per compute
 *                             unit, not one per tile: its weight rows stream from memory in
 *                             order). For each tile it walks every row of x (up to
 *                             `rows_per_item`, the host's mv_max_m), in groups of QL_MV_R and
 *                             then one by one, so each weight byte is read from memory once per
 *                             call for all rows (later groups hit the cache). The tile's
 *                             columns per type (the host's mv_cols, and mv_cols_wide for types
 *                             of 6.5 bits per weight or more) are one by default: a work-item
 *                             then reads its weight rows as one stream in memory order;
 *   clattn_qlinear_mm_<type>  prompt processing (large m): one work-item per C =
 *                             QL_MM_C_<type> output columns and `rows_per_item` rows (global
 *                             size {⌈n/C⌉, ⌈m/rows_per_item⌉}), in tiles of QL_MM_R_<type> rows
 *                             (the host's mm_rows × mm_cols, and mm_rows_wide × mm_cols_wide
 *                             for types of 6.5 bits per weight or more): its C weight rows
 *                             stay in the cache while x streams past them, so that a weight
 *                             larger than the caches (the output projection) is read from memory
 *                             once, not once per row tile.
 *   clattn_qlinear_mm_staged_<type>  the same work-items where the host stages (its mm_stage:
 *                             local memory that is ordinary cached memory, and the rows fit):
 *                             each first decodes its QL_MMS_C weight rows whole into `stage`
 *                             (__local, QL_MMS_C · k floats), then runs its row tiles of QL_MMS_R
 *                             rows on those floats — each weight value decoded once per
 *                             work-item instead of once per row tile, the same values summed in
 *                             the same order (the same bytes). One tile for every type: the
 *                             inner loop reads floats whatever the type.
 * And two per type with SwiGLU in the epilogue, for a gated feed-forward's stacked gate|up
 * weight [gate rows; up rows] (2n rows):
 *   clattn_qlinear_swiglu_mv_<type>, clattn_qlinear_swiglu_mm_<type>  the same two paths, whose
 *                             tile takes QL_MV_SC_<type> output columns on the matrix–vector path
 *                             (QL_MV_SWIGLU_COLS) and half the plain tile's on the matrix–matrix
 *                             path (QL_MM_SWIGLU_COLS), and for each column j both gate row j and
 *                             up row n + j, each summed in the order above, then stores
 *                             silu(gate)·up with clattn_glu's float expression (ql_swiglu): the
 *                             bytes of the plain kernel followed by cl/elementwise.cl's clattn_glu;
 *   clattn_qlinear_swiglu_mm_staged_<type>  its staged matrix–matrix kernel: (QL_MMS_C + 1) / 2
 *                             output columns, their gate and up rows staged.
 * Rows and columns past the edge (of the matrix, or of a work-item's rows) are computed on
 * clamped indices and not stored.
 *
 * Parameters (-D, chosen by src/ops/qlinear.c from device facts): QL_MV_R, QL_MV_C, QL_MMS_R,
 * QL_MMS_C, QL_MV_C_<type>, and QL_MV_SC_<type>, QL_MM_R_<type> and QL_MM_C_<type> for every type
 * (no default).
 */
#pragma OPENCL FP_CONTRACT OFF

#ifndef QL_MV_R
#define QL_MV_R 1
#endif
#ifndef QL_MV_C
#define QL_MV_C 1
#endif
/* The matrix–vector tile's columns per type (QL_MV_C_<type>, set by the host per type; QL_MV_C
 * where it is not). */
#define QL_MV_COLS(TYPE) QL_MV_C_##TYPE
#ifndef QL_MV_C_f32
#define QL_MV_C_f32 QL_MV_C
#endif
#ifndef QL_MV_C_f16
#define QL_MV_C_f16 QL_MV_C
#endif
#ifndef QL_MV_C_bf16
#define QL_MV_C_bf16 QL_MV_C
#endif
#ifndef QL_MV_C_q4_0
#define QL_MV_C_q4_0 QL_MV_C
#endif
#ifndef QL_MV_C_q4_1
#define QL_MV_C_q4_1 QL_MV_C
#endif
#ifndef QL_MV_C_q5_0
#define QL_MV_C_q5_0 QL_MV_C
#endif
#ifndef QL_MV_C_q5_1
#define QL_MV_C_q5_1 QL_MV_C
#endif
#ifndef QL_MV_C_q8_0
#define QL_MV_C_q8_0 QL_MV_C
#endif
#ifndef QL_MV_C_q4_k
#define QL_MV_C_q4_k QL_MV_C
#endif
#ifndef QL_MV_C_q5_k
#define QL_MV_C_q5_k QL_MV_C
#endif
#ifndef QL_MV_C_q6_k
#define QL_MV_C_q6_k QL_MV_C
#endif
/* The matrix–matrix tile per type: QL_MM_R_<type> rows × QL_MM_C_<type> columns. */
#define QL_MM_ROWS(TYPE) QL_MM_R_##TYPE
#define QL_MM_COLS(TYPE) QL_MM_C_##TYPE

#ifndef QL_PREFETCH
#define QL_PREFETCH 0
#endif
#ifndef QL_LINE
#define QL_LINE 64
#endif
/* The weight bytes [p + AHEAD, p + AHEAD + bytes) asked for ahead of their use, one prefetch per
 * QL_LINE-byte cache line. The matrix–vector tiles pass AHEAD = QL_PREFETCH, which the host sets
 * on CPUs (whose hardware prefetchers alone leave those tiles waiting on memory); the
 * matrix–matrix tiles, which read their weight rows from the cache, 0 (prefetching there cost a
 * fifth of SmolLM2's prompt speed). Nothing where AHEAD is 0 or the compiler targets no CPU. A
 * prefetch never faults, so it may reach past the weight. */
#if defined(__x86_64__) || defined(__aarch64__)
#define QL_PREFETCH_SPAN(p, bytes, AHEAD)                                                         \
    if ((AHEAD) > 0)                                                                              \
        for (uint pl_ = 0; pl_ < ((bytes) + QL_LINE - 1) / QL_LINE; ++pl_)                        \
            __builtin_prefetch((p) + (AHEAD) + QL_LINE * pl_, 0, 3);
#else
#define QL_PREFETCH_SPAN(p, bytes, AHEAD)
#endif

/* Step 2 of the order, component by component (oclgrind 21.10 misreads .lo/.hi of 16-wide
 * vectors). */
inline float ql_combine16(float16 p)
{
    float q0 = p.s0 + p.s8, q1 = p.s1 + p.s9, q2 = p.s2 + p.sa, q3 = p.s3 + p.sb;
    float q4 = p.s4 + p.sc, q5 = p.s5 + p.sd, q6 = p.s6 + p.se, q7 = p.s7 + p.sf;
    float s0 = q0 + q4, s1 = q1 + q5, s2 = q2 + q6, s3 = q3 + q7;
    float t0 = s0 + s2, t1 = s1 + s3;
    return t0 + t1;
}

/* ql_combine16 of sixteen vectors at once: lane i is ql_combine16(v[i]), the same additions in
 * the same tree (each level adds the halves of two vectors' lanes, gathered by a two-vector
 * shuffle), about three operations per sum instead of a scalar tree's twenty or so: a tile of
 * 6 × 4 sums at k = 1024 spent a fifth of its instructions in ql_combine16. */
inline __attribute__((always_inline)) float16 ql_combine16x16(const float16 *v)
{
    const uint16 lo8 = (uint16)(0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
    const uint16 lo4 = (uint16)(0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27);
    const uint16 lo2 = (uint16)(0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24, 25, 28, 29);
    const uint16 even = (uint16)(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    float16 q[8], s[4], t[2];
    _Pragma("unroll") for (uint i = 0; i < 8; ++i) /* [q of v[2i] (8 lanes), q of v[2i + 1]] */
        q[i] = shuffle2(v[2 * i], v[2 * i + 1], lo8) +
               shuffle2(v[2 * i], v[2 * i + 1], lo8 + (uint16)8);
    _Pragma("unroll") for (uint i = 0; i < 4; ++i) /* [s of v[4i] (4 lanes), .., s of v[4i + 3]] */
        s[i] = shuffle2(q[2 * i], q[2 * i + 1], lo4) +
               shuffle2(q[2 * i], q[2 * i + 1], lo4 + (uint16)4);
    _Pragma("unroll") for (uint i = 0; i < 2; ++i) /* [t of v[8i] (2 lanes), .., t of v[8i + 7]] */
        t[i] = shuffle2(s[2 * i], s[2 * i + 1], lo2) +
               shuffle2(s[2 * i], s[2 * i + 1], lo2 + (uint16)2);
    return shuffle2(t[0], t[1], even) + shuffle2(t[0], t[1], even + (uint16)1);
}

inline uint ql_u32(const __global uchar *p)
{
    return (uint)p[0] | ((uint)p[1] << 8) | ((uint)p[2] << 16) | ((uint)p[3] << 24);
}

/* 16 weight bytes at p (any alignment). On x86 one unaligned load: through vload16, LLVM
 * assembled some tiles' bytes from eight 16-bit inserts (the int8 SwiGLU kernels' Q4_1 nibbles;
 * the float32 Q4_K matrix–vector tile of two weight rows, where they took longer than the rest
 * of the tile). */
#if defined(__AVX2__)
typedef uchar ql_unaligned16 __attribute__((ext_vector_type(16), aligned(1)));
#endif
inline uchar16 ql_load16(const __global uchar *p)
{
#if defined(__AVX2__)
    return *(const __global ql_unaligned16 *)p;
#else
    return vload16(0, p);
#endif
}

/* Bits `shift` .. shift + 15 of `bits`, one per lane, as 0 or 1. */
inline uint16 ql_bits16(uint bits, uint shift)
{
    const uint16 lane = (uint16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    return ((uint16)(bits >> shift) >> lane) & (uint16)1u;
}

/* ---- Decoders: chunk `c` (16 values) of the block at `b`. ---------------------------------- */

/* Each type: ql_decode_<type>(b, c, hd, sc), chunk c of the block at b, given the block's
 * float16 scales hd = (d, m or dmin), which the tiles read once per block (QL_HEADS; zero where
 * the type has none), and for the K-quants the chunk's sub-block scale sc (below; zero for the
 * other types). */

/* F32: a "block" of 16 values. */
inline float16 ql_decode_f32(const __global uchar *b, uint c, float2 hd, float2 sc)
{
    return vload16(0, (const __global float *)b);
}

/* F16: 16 values converted exactly (normal, subnormal, infinite/NaN lanes selected; a subnormal
 * mant · 2^-24 is a normal float32, so the product is exact in any denormal mode). */
inline float16 ql_decode_f16(const __global uchar *b, uint c, float2 hd, float2 sc)
{
    uint16 h = convert_uint16(vload16(0, (const __global ushort *)b));
    uint16 sign = (h & (uint16)0x8000u) << (uint16)16u, e = h & (uint16)0x7c00u;
    uint16 mant = h & (uint16)0x03ffu;
    float16 sub = convert_float16(mant) * (float16)0x1.0p-24f;
    uint16 bits = select(((h & (uint16)0x7fffu) << (uint16)13u) + (uint16)0x38000000u,
                         (uint16)0x7f800000u | (mant << (uint16)13u),
                         (int16)(e == (uint16)0x7c00u));
    bits = select(bits, as_uint16(sub), (int16)(e == (uint16)0u));
    return as_float16(sign | bits);
}

/* BF16: the upper 16 bits of a float32. */
inline float16 ql_decode_bf16(const __global uchar *b, uint c, float2 hd, float2 sc)
{
    ushort16 h = vload16(0, (const __global ushort *)b);
    return as_float16(convert_uint16(h) << (uint16)16u);
}

/* Where each type's float16 scales sit in its block: d (QL_D_*) and m or dmin (QL_M_*); -1
 * for none. The tiles convert them with ql_half8, four at a time (QL_HEADS). */
#define QL_D_f32 (-1)
#define QL_M_f32 (-1)
#define QL_D_f16 (-1)
#define QL_M_f16 (-1)
#define QL_D_bf16 (-1)
#define QL_M_bf16 (-1)
#define QL_D_q4_0 0
#define QL_M_q4_0 (-1)
#define QL_D_q4_1 0
#define QL_M_q4_1 2
#define QL_D_q5_0 0
#define QL_M_q5_0 (-1)
#define QL_D_q5_1 0
#define QL_M_q5_1 2
#define QL_D_q8_0 0
#define QL_M_q8_0 (-1)
#define QL_D_q4_k 0
#define QL_M_q4_k 2
#define QL_D_q5_k 0
#define QL_M_q5_k 2
#define QL_D_q6_k 208
#define QL_M_q6_k (-1)

/* Q4_0 (18 bytes): d, qs[16]; value i: d · ((low nibble of qs[i] | high nibble of qs[i − 16]) − 8). */
inline float16 ql_decode_q4_0(const __global uchar *b, uint c, float2 hd, float2 sc)
{
    uchar16 qs = ql_load16(b + 2);
    uchar16 q = c ? (qs >> (uchar16)4) : (qs & (uchar16)0x0F);
    return (float16)hd.x * convert_float16(convert_int16(q) - (int16)8);
}

/* Q4_1 (20 bytes): d, m, qs[16]; value: fma(d, q, m). */
inline float16 ql_decode_q4_1(const __global uchar *b, uint c, float2 hd, float2 sc)
{
    uchar16 qs = ql_load16(b + 4);
    uchar16 q = c ? (qs >> (uchar16)4) : (qs & (uchar16)0x0F);
    return fma((float16)hd.x, convert_float16(q), (float16)hd.y);
}

/* Q5_0 (22 bytes): d, qh (32 bits), qs[16]; value i: d · ((nibble | bit i of qh << 4) − 16). */
inline float16 ql_decode_q5_0(const __global uchar *b, uint c, float2 hd, float2 sc)
{
    uint qh = ql_u32(b + 2);
    uchar16 qs = ql_load16(b + 6);
    uint16 q = convert_uint16(c ? (qs >> (uchar16)4) : (qs & (uchar16)0x0F));
    q |= ql_bits16(qh, 16 * c) << (uint16)4u;
    return (float16)hd.x * convert_float16(convert_int16(q) - (int16)16);
}

/* Q5_1 (24 bytes): d, m, qh, qs[16]; value: fma(d, q, m). */
inline float16 ql_decode_q5_1(const __global uchar *b, uint c, float2 hd, float2 sc)
{
    uint qh = ql_u32(b + 4);
    uchar16 qs = ql_load16(b + 8);
    uint16 q = convert_uint16(c ? (qs >> (uchar16)4) : (qs & (uchar16)0x0F));
    q |= ql_bits16(qh, 16 * c) << (uint16)4u;
    return fma((float16)hd.x, convert_float16(q), (float16)hd.y);
}

/* Q8_0 (34 bytes): d, qs[32] (int8); value: q · d. */
inline float16 ql_decode_q8_0(const __global uchar *b, uint c, float2 hd, float2 sc)
{
    char16 q = as_char16(ql_load16(b + 2 + 16 * c));
    return convert_float16(q) * (float16)hd.x;
}

/* The K-quants' sub-block scales: sc = (the factor the chunk's values are multiplied by, the
 * term added (Q4_K/Q5_K) or zero (Q6_K)), per family of types (QL_SCALES_<type>: none, k4 for
 * Q4_K/Q5_K, k6 for Q6_K): ql_subscale_<family>(sb, c), element c of
 * sb[16] = ql_subscales_<family>(b, hd), all of a block's at once with vector operations
 *   k4: d · scale[s] in 0-7, −(dmin · min[s]) in 8-15, for the sub-blocks s, the 6-bit scales
 *       and mins packed in the 12 bytes q[] after d and dmin: for s < 4 scale q[s] & 63 and min
 *       q[s + 4] & 63, for s ≥ 4 scale (q[s + 4] & 15) | (q[s − 4] >> 6) << 4 and min
 *       (q[s + 4] >> 4) | (q[s] >> 6) << 4 (ggml's get_scale_min_k4);
 *   k6: d · scales[c], int8.
 * Every tile takes them so, once per block (a chunk's alone, from the block's bytes with scalar
 * operations, cost more: Q4_K 14-26 % more CPU per 512-row call, Q6_K 5-19 %; in the one-row
 * decode tiles, where the chunk's position is a constant, Q4_K's matrix–vector kernels of a
 * Qwen3-shaped Q4_K_M decode step 26.1 → 24.2 ms and its SwiGLU kernels 9.6 → 7.2 ms on a Xeon). */
#define QL_SCALES_f32 none
#define QL_SCALES_f16 none
#define QL_SCALES_bf16 none
#define QL_SCALES_q4_0 none
#define QL_SCALES_q4_1 none
#define QL_SCALES_q5_0 none
#define QL_SCALES_q5_1 none
#define QL_SCALES_q8_0 none
#define QL_SCALES_q4_k k4
#define QL_SCALES_q5_k k4
#define QL_SCALES_q6_k k6

/* PREFIX followed by TYPE's family, expanded (QL_SCALES_<type> is itself a macro). */
#define QL_SCALES_NAME(PREFIX, TYPE) QL_PASTE(PREFIX, QL_SCALES_##TYPE)
#define QL_PASTE(A, B) QL_PASTE_(A, B)
#define QL_PASTE_(A, B) A##B

inline void ql_subscales_none(const __global uchar *b, float2 hd, float *sb)
{
}

inline float2 ql_subscale_none(const float *sb, uint c)
{
    return (float2)0.0f;
}

inline void ql_subscales_k4(const __global uchar *b, float2 hd, float *sb)
{
    uint lo = ql_u32(b + 4), mid = ql_u32(b + 8), hi = ql_u32(b + 12);
    uint scale_lo = lo & 0x3F3F3F3Fu, scale_hi = (hi & 0x0F0F0F0Fu) | ((lo >> 2) & 0x30303030u);
    uint min_lo = mid & 0x3F3F3F3Fu, min_hi = ((hi >> 4) & 0x0F0F0F0Fu) | ((mid >> 2) & 0x30303030u);
    const uint8 byte = (uint8)(0, 8, 16, 24, 0, 8, 16, 24);
    uint8 scale = ((uint8)(scale_lo, scale_lo, scale_lo, scale_lo, scale_hi, scale_hi, scale_hi,
                           scale_hi) >> byte) & (uint8)0xFFu;
    uint8 min = ((uint8)(min_lo, min_lo, min_lo, min_lo, min_hi, min_hi, min_hi, min_hi) >> byte) &
                (uint8)0xFFu;
    vstore8((float8)hd.x * convert_float8(scale), 0, sb);
    vstore8(-((float8)hd.y * convert_float8(min)), 1, sb);
}

inline float2 ql_subscale_k4(const float *sb, uint c)
{
    return (float2)(sb[c >> 1], sb[8 + (c >> 1)]);
}

inline void ql_subscales_k6(const __global uchar *b, float2 hd, float *sb)
{
    vstore16((float16)hd.x * convert_float16(as_char16(ql_load16(b + 192))), 0, sb);
}

inline float2 ql_subscale_k6(const float *sb, uint c)
{
    return (float2)(sb[c], 0.0f);
}

/* Q4_K (144 bytes, 256 values): d, dmin, scales[12], qs[128]; sub-block s of 32 values reads
 * qs[32·(s/2) ..] (low nibbles for even s, high for odd); value: fma(d·sc, q, −(dmin·min)). With
 * AVX-512 the 16 possible values of the sub-block are computed so and picked by q (vpermps reads
 * an index's low 4 bits: no mask for the low nibbles, no conversion to float): the same values,
 * one operation fewer per 16; Q4_K matrix–vector products 6-8 % faster (Qwen3 shape, Xeon). */
inline float16 ql_decode_q4_k(const __global uchar *b, uint c, float2 hd, float2 sc)
{
    uint s = c >> 1;
    uchar16 qs = ql_load16(b + 16 + 32 * (s >> 1) + 16 * (c & 1));
#if defined(__AVX512F__)
    const float16 table = fma((float16)sc.x,
                              (float16)(0.0f, 1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f, 9.0f,
                                        10.0f, 11.0f, 12.0f, 13.0f, 14.0f, 15.0f),
                              (float16)sc.y);
    uint16 q = convert_uint16(qs);
    q = (s & 1) ? q >> (uint16)4 : q;
    return __builtin_ia32_permvarsf512(table, as_int16(q));
#else
    uchar16 q = (s & 1) ? (qs >> (uchar16)4) : (qs & (uchar16)0x0F);
    return fma((float16)sc.x, convert_float16(q), (float16)sc.y);
#endif
}

/* Q5_K (176 bytes): d, dmin, scales[12], qh[32], qs[128]; as Q4_K with bit s of qh[i] as the
 * fifth bit of value i of sub-block s. */
inline float16 ql_decode_q5_k(const __global uchar *b, uint c, float2 hd, float2 sc)
{
    uint s = c >> 1;
    uchar16 qh = ql_load16(b + 16 + 16 * (c & 1));
    uchar16 qs = ql_load16(b + 48 + 32 * (s >> 1) + 16 * (c & 1));
    uchar16 q = (s & 1) ? (qs >> (uchar16)4) : (qs & (uchar16)0x0F);
    q |= ((qh >> (uchar16)s) & (uchar16)1) << (uchar16)4;
    return fma((float16)sc.x, convert_float16(q), (float16)sc.y);
}

/* Q6_K (210 bytes): ql[128], qh[64], scales[16] (int8), d; value e (h = e/128, r = e%128):
 * ((nibble r/64 of ql[64h + r%64]) | (bits 2·(r/32) of qh[32h + r%32]) << 4) − 32, times
 * d · scales[e/16]. */
inline float16 ql_decode_q6_k(const __global uchar *b, uint c, float2 hd, float2 sc)
{
    uint e = 16 * c, h = e >> 7, r = e & 127;
    uchar16 ql = ql_load16(b + 64 * h + (r & 63));
    uchar16 qh = ql_load16(b + 128 + 32 * h + (r & 31));
    uchar16 lo = (r & 64) ? (ql >> (uchar16)4) : (ql & (uchar16)0x0F);
    uchar16 hi = (qh >> (uchar16)(2 * (r >> 5))) & (uchar16)3;
    int16 q = convert_int16(lo | (hi << (uchar16)4)) - (int16)32;
    return (float16)sc.x * convert_float16(q);
}

/* ---- The kernels. ---------------------------------------------------------------------------- */

#define QL_UNROLL _Pragma("unroll")
/* A tile's chunks of a block (WHOLE, a tile's parameter): 1 unrolls them whole, in the one-row
 * tiles of the matrix–vector kernels (a single sequence's decode step: a K-quant block's 16
 * chunks then find their sub-block scales and bit positions at constant offsets, half the time
 * of a Q4_K row); 0 two at a time, in the larger tiles (unrolled whole, their bodies made the
 * program's compilation half as long again). */
#define QL_CHUNKS_UNROLL(WHOLE) QL_CHUNKS_UNROLL_##WHOLE
#define QL_CHUNKS_UNROLL_1 _Pragma("unroll")
#define QL_CHUNKS_UNROLL_0 _Pragma("unroll 2")

/* Eight float16 bit patterns (blocks' scales) converted exactly as ql_decode_f16 converts its
 * values, with integer operations and selects (PoCL's vload_half is a scalar software routine):
 * the tiles convert the scales (d, m) of four weight rows or blocks at a time. */
inline float8 ql_half8(uint8 h)
{
#if defined(__F16C__)
    /* x86's F16C conversion: the same values in one instruction (exact for every finite float16,
     * subnormals included; NaN stays NaN). */
    return __builtin_ia32_vcvtph2ps256(as_short8(convert_ushort8(h)));
#else
    uint8 sign = (h & (uint8)0x8000u) << (uint8)16u, e = h & (uint8)0x7c00u;
    uint8 mant = h & (uint8)0x03ffu;
    float8 sub = convert_float8(mant) * (float8)0x1.0p-24f;
    uint8 bits = select(((h & (uint8)0x7fffu) << (uint8)13u) + (uint8)0x38000000u,
                        (uint8)0x7f800000u | (mant << (uint8)13u), (int8)(e == (uint8)0x7c00u));
    bits = select(bits, as_uint8(sub), (int8)(e == (uint8)0u));
    return as_float8(sign | bits);
#endif
}

/* Blocks whose scales a tile converts together: four weight rows' (d, m) fill a ql_half8, so a
 * tile of fewer rows takes the scales of 4 / C consecutive blocks at a time. */
#define QL_HEAD_BLOCKS(C) ((C) >= 4 ? 1u : 4u / (C))

/* The float16 bits of scale DM (D or M: 0 where the type has none) of head i of the tile's
 * current group: weight row i / HB_, block blk0 + i % HB_ (i clamped to the last head, the
 * block to the last of the row). */
#define QL_HEAD_BITS(TYPE, BYTES, i, DM)                                                          \
    (QL_##DM##_##TYPE >= 0                                                                        \
         ? (uint)*(const __global ushort *)(w_rows[min((uint)(i), NH_ - 1u) / HB_] +              \
                                            (ulong)min(blk0 + min((uint)(i), NH_ - 1u) % HB_,     \
                                                       blocks - 1u) * (BYTES) +                   \
                                            max(QL_##DM##_##TYPE, 0))                             \
         : 0u)

/* hd[c · HB + b] = the scales (d, m) of block blk0 + b of weight row c, for c < C, b < HB
 * (QL_HEAD_BLOCKS(C)): four heads per ql_half8. */
#define QL_HEADS(TYPE, BYTES, C)                                                                  \
    QL_UNROLL for (uint i0 = 0; i0 < (C) * QL_HEAD_BLOCKS(C); i0 += 4) {                          \
        const uint HB_ = QL_HEAD_BLOCKS(C), NH_ = (C) * QL_HEAD_BLOCKS(C);                        \
        float8 f = ql_half8((uint8)(                                                              \
            QL_HEAD_BITS(TYPE, BYTES, i0, D), QL_HEAD_BITS(TYPE, BYTES, i0, M),                   \
            QL_HEAD_BITS(TYPE, BYTES, i0 + 1, D), QL_HEAD_BITS(TYPE, BYTES, i0 + 1, M),           \
            QL_HEAD_BITS(TYPE, BYTES, i0 + 2, D), QL_HEAD_BITS(TYPE, BYTES, i0 + 2, M),           \
            QL_HEAD_BITS(TYPE, BYTES, i0 + 3, D), QL_HEAD_BITS(TYPE, BYTES, i0 + 3, M)));         \
        hd[min(i0, NH_ - 1u)] = f.s01;                                                            \
        hd[min(i0 + 1u, NH_ - 1u)] = i0 + 1u < NH_ ? f.s23 : hd[min(i0 + 1u, NH_ - 1u)];          \
        hd[min(i0 + 2u, NH_ - 1u)] = i0 + 2u < NH_ ? f.s45 : hd[min(i0 + 2u, NH_ - 1u)];          \
        hd[min(i0 + 3u, NH_ - 1u)] = i0 + 3u < NH_ ? f.s67 : hd[min(i0 + 3u, NH_ - 1u)];          \
    }

/* The C weight rows at w_rows[] walked block by block and chunk by chunk, in order: each chunk
 * of 16 values of every row decoded into wv[c], then USE(R, C) with wv and l (the chunk's first
 * value's index in the row). The weight rows are prefetched AHEAD bytes ahead
 * (QL_PREFETCH_SPAN; 0: not at all). */
#define QL_DECODE_CHUNKS(TYPE, QK, BYTES, R, C, WHOLE, AHEAD, USE)                                \
    const uint blocks = k / (QK);                                                                 \
    for (uint blk0 = 0; blk0 < blocks; blk0 += QL_HEAD_BLOCKS(C)) {                               \
        float2 hd[(C) * QL_HEAD_BLOCKS(C)];                                                       \
        QL_HEADS(TYPE, BYTES, C)                                                                  \
        for (uint c = 0; c < C; ++c) {                                                            \
            QL_PREFETCH_SPAN(w_rows[c] + (ulong)blk0 * (BYTES), QL_HEAD_BLOCKS(C) * (BYTES),      \
                             AHEAD)                                                               \
        }                                                                                         \
        QL_UNROLL for (uint hb = 0; hb < QL_HEAD_BLOCKS(C); ++hb) {                               \
            const uint blk = blk0 + hb;                                                           \
            if (QL_HEAD_BLOCKS(C) > 1u && blk >= blocks)                                          \
                break;                                                                            \
            float sb[C][16];                                                                      \
            QL_UNROLL for (uint c = 0; c < C; ++c)                                                \
                QL_SCALES_NAME(ql_subscales_, TYPE)(w_rows[c] + (ulong)blk * (BYTES),             \
                                                    hd[c * QL_HEAD_BLOCKS(C) + hb], sb[c]);       \
            QL_CHUNKS_UNROLL(WHOLE) for (uint ch = 0; ch < (QK) / 16; ++ch) {                     \
                float16 wv[C];                                                                    \
                QL_UNROLL for (uint c = 0; c < C; ++c) {                                          \
                    const __global uchar *b_ = w_rows[c] + (ulong)blk * (BYTES);                  \
                    const float2 hd_ = hd[c * QL_HEAD_BLOCKS(C) + hb];                            \
                    wv[c] = ql_decode_##TYPE(b_, ch, hd_,                                         \
                                             QL_SCALES_NAME(ql_subscale_, TYPE)(sb[c], ch));      \
                }                                                                                 \
                const uint l = blk * (QK) + 16 * ch;                                              \
                USE(R, C)                                                                         \
            }                                                                                     \
        }                                                                                         \
    }

/* acc[r][c] = fma(x[row r, l ..], wv[c], acc[r][c]): step 1 of the order for one chunk. */
#define QL_USE_FMA(R, C)                                                                          \
    QL_UNROLL for (uint r = 0; r < R; ++r) {                                                      \
        float16 xv = vload16(0, xr[r] + l);                                                       \
        QL_UNROLL for (uint c = 0; c < C; ++c)                                                    \
            acc[r][c] = fma(xv, wv[c], acc[r][c]);                                                \
    }

/* A tile's rows of x, xr[r] = row min(r0 + r, rend − 1), and its sums acc[R][C] at +0.0f. */
#define QL_TILE_BEGIN(R, C)                                                                       \
    const __global float *xr[R];                                                                  \
    QL_UNROLL for (uint r = 0; r < R; ++r)                                                        \
        xr[r] = x + x_off + (ulong)min(r0 + r, rend - 1) * ldx;                                   \
    float16 acc[R][C];                                                                            \
    QL_UNROLL for (uint r = 0; r < R; ++r)                                                        \
        QL_UNROLL for (uint c = 0; c < C; ++c)                                                    \
            acc[r][c] = (float16)0.0f;

/* Rows r0 .. r0 + R − 1 (clamped to rend − 1) × the C weight rows at w_rows[]: the order
 * above; then STORE(R, C) writes the tile's outputs from acc[R][C]. The weight rows are
 * prefetched AHEAD bytes ahead (QL_PREFETCH_SPAN; 0: not at all). */
#define QL_TILE_THEN(TYPE, QK, BYTES, R, C, STORE, WHOLE, AHEAD)                                  \
    {                                                                                             \
        QL_TILE_BEGIN(R, C)                                                                       \
        QL_DECODE_CHUNKS(TYPE, QK, BYTES, R, C, WHOLE, AHEAD, QL_USE_FMA)                         \
        STORE(R, C)                                                                               \
    }

/* The chunk's values of row c stored at stage + c·k + l. */
#define QL_USE_STAGE(R, C)                                                                        \
    QL_UNROLL for (uint c = 0; c < C; ++c)                                                        \
        vstore16(wv[c], 0, stage + c * k + l);

/* The C weight rows at w_rows[] decoded whole into `stage` (row c at stage + c·k, float32):
 * the values QL_TILE_THEN decodes, so that a tile on them sums the same terms in the same order. */
#define QL_STAGE_ROWS(TYPE, QK, BYTES, C)                                                         \
    {                                                                                             \
        QL_DECODE_CHUNKS(TYPE, QK, BYTES, 1, C, 0, 0, QL_USE_STAGE)                               \
    }

/* QL_TILE_THEN's sums on weight rows staged by QL_STAGE_ROWS: rows r0 .. r0 + R − 1 × the C
 * staged rows, the same order; then STORE(R, C). */
#define QL_STAGED_TILE_THEN(R, C, STORE)                                                          \
    {                                                                                             \
        QL_TILE_BEGIN(R, C)                                                                       \
        _Pragma("unroll 2") for (uint l = 0; l < k; l += 16) {                                    \
            float16 wv[C];                                                                        \
            QL_UNROLL for (uint c = 0; c < C; ++c)                                                \
                wv[c] = vload16(0, stage + c * k + l);                                            \
            QL_USE_FMA(R, C)                                                                      \
        }                                                                                         \
        STORE(R, C)                                                                               \
    }

/* sum_[r · sum_cols_ + c] = ql_combine16(acc[r][c]) for the tile's R × C sums (sum_cols_ = C):
 * sixteen at a time (ql_combine16x16) where the device compiler targets AVX-512, one by one
 * elsewhere (the same bytes; Mesa's llvmpipe took about two minutes longer to compile the shuffles). */
#if defined(__AVX512F__)
#define QL_SUMS(R, C)                                                                             \
    float sum_[((R) * (C) + 15) / 16 * 16];                                                       \
    const uint sum_cols_ = (C);                                                                   \
    QL_UNROLL for (uint g_ = 0; g_ < (R) * (C); g_ += 16) {                                       \
        float16 v_[16];                                                                           \
        QL_UNROLL for (uint i_ = 0; i_ < 16; ++i_) {                                              \
            const uint e_ = min(g_ + i_, (uint)((R) * (C)) - 1u);                                 \
            v_[i_] = g_ + i_ < (R) * (C) ? acc[e_ / (C)][e_ % (C)] : (float16)0.0f;               \
        }                                                                                         \
        vstore16(ql_combine16x16(v_), 0, sum_ + g_);                                              \
    }
#else
#define QL_SUMS(R, C)                                                                             \
    float sum_[(R) * (C)];                                                                        \
    const uint sum_cols_ = (C);                                                                   \
    QL_UNROLL for (uint r_ = 0; r_ < (R); ++r_)                                                   \
        QL_UNROLL for (uint c_ = 0; c_ < (C); ++c_)                                               \
            sum_[r_ * (C) + c_] = ql_combine16(acc[r_][c_]);
#endif

/* y[r, j0 + c] = the sum of acc[r][c], for the rows and columns inside the matrix. */
#define QL_STORE(R, C)                                                                            \
    QL_SUMS(R, C)                                                                                 \
    QL_UNROLL for (uint r = 0; r < R; ++r)                                                        \
        QL_UNROLL for (uint c = 0; c < C; ++c)                                                    \
            if (r0 + r < rend && j0 + c < n)                                                      \
                y[y_off + (ulong)(r0 + r) * ldy + j0 + c] = sum_[r * (C) + c];

#define QL_TILE(TYPE, QK, BYTES, R, C, WHOLE, AHEAD)                                              \
    QL_TILE_THEN(TYPE, QK, BYTES, R, C, QL_STORE, WHOLE, AHEAD)

/* e^x in float32 within 1 ulp, on vectors of eight. On x86 CPU devices (PoCL, where the kernels
 * see __AVX2__): SLEEF's expf (its 1-ulp variant, xexpf) written out — x = q·ln 2 + s with
 * q = x / ln 2 rounded to the nearest integer (ties to even: adding and subtracting 1.5·2^23
 * rounds it so), ln 2 in two parts, e^s by a degree-7 polynomial (Horner's rule in fma), times
 * 2^q as two powers of two (q up to ±150 without overflowing an exponent field); 0 below −104,
 * +inf above 100, NaN for NaN: the float32 Q4_K_M prompt's SwiGLU layers (Qwen3 shape) 6 %
 * faster than with PoCL's exp of a vector. Elsewhere the device's exp (Mesa's rusticl compiled
 * the written-out form into every SwiGLU kernel several times slower). */
inline float8 ql_exp8(float8 x)
{
#if !defined(__AVX2__)
    return exp(x);
#else
    const float8 t = x * 1.442695040888963407f;
    const float8 q = clamp((t + 12582912.0f) - 12582912.0f, -150.0f, 150.0f);
    const float8 s = fma(q, -1.428606765330187045e-06f, fma(q, -0.693145751953125f, x));
    float8 u = (float8)0.000198527617612853646278381f;
    u = fma(u, s, 0.00139304355252534151077271f);
    u = fma(u, s, 0.00833336077630519866943359f);
    u = fma(u, s, 0.0416664853692054748535156f);
    u = fma(u, s, 0.166666671633720397949219f);
    u = fma(u, s, 0.5f);
    u = 1.0f + fma(s * s, u, s);
    const int8 e = convert_int8(q), h = e >> 1;
    u = u * as_float8((h + 127) << 23) * as_float8((e - h + 127) << 23);
    u = select(u, (float8)0.0f, x < -104.0f);
    return select(u, (float8)INFINITY, x > 100.0f);
#endif
}

/* SwiGLU's product of gate and up values, eight at a time: silu(gate) · up, with silu as
 * cl/elementwise.cl's activate writes it (x / (1 + e^−x)) and e^x as ql_exp8. Every SwiGLU of a
 * quantised gate|up layer goes through it — fused into the kernels below, or after a split
 * layer (clattn_qlinear_glu) — so that all give the same bytes (one value at a time it took a
 * quarter of the fused matrix–matrix tile's time). Lanes are independent. */
inline float8 ql_swiglu8(float8 gate, float8 up)
{
    return (gate / (1.0f + ql_exp8(-gate))) * up;
}

/* The fused tiles' store: COMBINE(r, c) gives row r's tile column c summed in its order (gate
 * column j0 + c is tile column c, its up column tile column C / 2 + c); y[r, j0 + c] = silu(gate)
 * · up, rows in vectors of eight (the rows past R are zeros, never stored). */
#define QL_SWIGLU_ROWS(R) (((R) + 7) / 8 * 8)
#define QL_STORE_SWIGLU_ROWS(R, C, COMBINE)                                                       \
    QL_UNROLL for (uint c = 0; c < (C) / 2; ++c) {                                                \
        float gate_[QL_SWIGLU_ROWS(R)], up_[QL_SWIGLU_ROWS(R)], out_[QL_SWIGLU_ROWS(R)];          \
        QL_UNROLL for (uint r = 0; r < QL_SWIGLU_ROWS(R); ++r) {                                  \
            const uint rr_ = min(r, (uint)(R) - 1);                                               \
            gate_[r] = r < (R) ? COMBINE(rr_, c) : 0.0f;                                          \
            up_[r] = r < (R) ? COMBINE(rr_, (C) / 2 + c) : 0.0f;                                  \
        }                                                                                         \
        QL_UNROLL for (uint v = 0; v < QL_SWIGLU_ROWS(R) / 8; ++v)                                \
            vstore8(ql_swiglu8(vload8(v, gate_), vload8(v, up_)), v, out_);                       \
        QL_UNROLL for (uint r = 0; r < R; ++r)                                                    \
            if (r0 + r < rend && j0 + c < n)                                                      \
                y[y_off + (ulong)(r0 + r) * ldy + j0 + c] = out_[r];                              \
    }

#define QL_COMBINE(r, c) sum_[(r) * sum_cols_ + (c)]
#define QL_STORE_SWIGLU(R, C)                                                                     \
    QL_SUMS(R, C)                                                                                 \
    QL_STORE_SWIGLU_ROWS(R, C, QL_COMBINE)

/* The C weight rows of this work-item (clamped to n − 1). */
#define QL_ROWS(C)                                                                                \
    const __global uchar *w_rows[C];                                                              \
    for (uint c = 0; c < C; ++c)                                                                  \
        w_rows[c] = w + (ulong)min(j0 + c, n - 1) * row_bytes;

/* The fused kernels' 2·C weight rows: gate rows j0 .. j0 + C − 1, then the up rows n + j0 ..
 * (the weight stacks [gate rows; up rows], n each; clamped to n − 1 as above). */
#define QL_ROWS_SWIGLU(C)                                                                         \
    const __global uchar *w_rows[2 * (C)];                                                        \
    for (uint c = 0; c < C; ++c) {                                                                \
        w_rows[c] = w + (ulong)min(j0 + c, n - 1) * row_bytes;                                    \
        w_rows[(C) + c] = w + ((ulong)n + min(j0 + c, n - 1)) * row_bytes;                        \
    }

/* The fused kernels' output columns per tile: on the matrix–vector path QL_MV_SC_<type>, set by
 * the host for every type (no default); on the matrix–matrix path half the plain kernels'
 * weight rows (rounded up), so that a tile streams about as many weight rows as the plain one. */
#define QL_MV_SWIGLU_COLS(TYPE) QL_MV_SC_##TYPE
#define QL_MM_SWIGLU_COLS(TYPE) ((QL_MM_COLS(TYPE) + 1) / 2)
#define QL_MMS_SWIGLU_COLS ((QL_MMS_C + 1) / 2)

/* A staged matrix-matrix kernel NAME: COLS output columns per work-item, its TROWS weight rows
 * (ROWS(COLS) sets them) staged, then its rows in tiles of QL_MMS_R, stored by STORE. */
#define QL_STAGED_KERNEL(NAME, TYPE, QK, BYTES, COLS, ROWS, TROWS, STORE)                         \
    __kernel __attribute__((reqd_work_group_size(1, 1, 1))) void NAME(                            \
        uint m, uint n, uint k, const __global float *x, ulong x_off, uint ldx,                   \
        const __global uchar *w, ulong row_bytes, __global float *y, ulong y_off, uint ldy,       \
        uint rows_per_item, __local float *stage)                                                 \
    {                                                                                             \
        const uint j0 = get_global_id(0) * (COLS);                                                \
        const uint rbegin = get_global_id(1) * rows_per_item;                                     \
        const uint rend = min(m, rbegin + rows_per_item);                                         \
        ROWS(COLS)                                                                                \
        QL_STAGE_ROWS(TYPE, QK, BYTES, TROWS)                                                     \
        for (uint r0 = rbegin; r0 < rend; r0 += QL_MMS_R)                                         \
            QL_STAGED_TILE_THEN(QL_MMS_R, TROWS, STORE)                                           \
    }

#define QL_KERNELS(TYPE, QK, BYTES)                                                               \
    __kernel __attribute__((reqd_work_group_size(1, 1, 1))) void clattn_qlinear_mv_##TYPE(        \
        uint m, uint n, uint k, const __global float *x, ulong x_off, uint ldx,                   \
        const __global uchar *w, ulong row_bytes, __global float *y, ulong y_off, uint ldy,       \
        uint rows_per_item)                                                                       \
    {                                                                                             \
        const uint groups = (n + QL_MV_COLS(TYPE) - 1) / QL_MV_COLS(TYPE);                        \
        const uint per_item = (groups + get_global_size(0) - 1) / get_global_size(0);             \
        const uint gend = min(groups, (uint)get_global_id(0) * per_item + per_item);              \
        const uint rbegin = get_global_id(1) * rows_per_item;                                     \
        const uint rend = min(m, rbegin + rows_per_item);                                         \
        for (uint g = get_global_id(0) * per_item; g < gend; ++g) {                               \
            const uint j0 = g * QL_MV_COLS(TYPE);                                                 \
            QL_ROWS(QL_MV_COLS(TYPE))                                                             \
            uint r0 = rbegin;                                                                     \
            for (; r0 + QL_MV_R <= rend; r0 += QL_MV_R)                                           \
                QL_TILE(TYPE, QK, BYTES, QL_MV_R, QL_MV_COLS(TYPE), 0, QL_PREFETCH)               \
            for (; r0 < rend; ++r0)                                                               \
                QL_TILE(TYPE, QK, BYTES, 1, QL_MV_COLS(TYPE), 1, QL_PREFETCH)                     \
        }                                                                                         \
    }                                                                                             \
    __kernel __attribute__((reqd_work_group_size(1, 1, 1))) void clattn_qlinear_mm_##TYPE(        \
        uint m, uint n, uint k, const __global float *x, ulong x_off, uint ldx,                   \
        const __global uchar *w, ulong row_bytes, __global float *y, ulong y_off, uint ldy,       \
        uint rows_per_item)                                                                       \
    {                                                                                             \
        const uint j0 = get_global_id(0) * QL_MM_COLS(TYPE);                                      \
        const uint rbegin = get_global_id(1) * rows_per_item;                                     \
        const uint rend = min(m, rbegin + rows_per_item);                                         \
        QL_ROWS(QL_MM_COLS(TYPE))                                                                 \
        for (uint r0 = rbegin; r0 < rend; r0 += QL_MM_ROWS(TYPE))                                 \
            QL_TILE(TYPE, QK, BYTES, QL_MM_ROWS(TYPE), QL_MM_COLS(TYPE), 0, 0)                    \
    }                                                                                             \
    QL_STAGED_KERNEL(clattn_qlinear_mm_staged_##TYPE, TYPE, QK, BYTES, QL_MMS_C, QL_ROWS,         \
                     QL_MMS_C, QL_STORE)

/* The gated feed-forward's first layer with SwiGLU in its epilogue: w holds 2·n rows, [gate
 * rows; up rows], and y[r, j] = silu(gate[r, j]) · up[r, j] for j < n, each of gate and up summed
 * in the order above; the same paths, tiles of QL_MV_SWIGLU_COLS and QL_MM_SWIGLU_COLS output
 * columns (each two weight rows). Row r's bytes are those of the plain kernel into [r, 2n] followed by clattn_glu. */
#define QL_SWIGLU_KERNELS(TYPE, QK, BYTES)                                                        \
    __kernel __attribute__((reqd_work_group_size(1, 1, 1))) void clattn_qlinear_swiglu_mv_##TYPE( \
        uint m, uint n, uint k, const __global float *x, ulong x_off, uint ldx,                   \
        const __global uchar *w, ulong row_bytes, __global float *y, ulong y_off, uint ldy,       \
        uint rows_per_item)                                                                       \
    {                                                                                             \
        const uint groups = (n + QL_MV_SWIGLU_COLS(TYPE) - 1) / QL_MV_SWIGLU_COLS(TYPE);          \
        const uint per_item = (groups + get_global_size(0) - 1) / get_global_size(0);             \
        const uint gend = min(groups, (uint)get_global_id(0) * per_item + per_item);              \
        const uint rbegin = get_global_id(1) * rows_per_item;                                     \
        const uint rend = min(m, rbegin + rows_per_item);                                         \
        for (uint g = get_global_id(0) * per_item; g < gend; ++g) {                               \
            const uint j0 = g * QL_MV_SWIGLU_COLS(TYPE);                                          \
            QL_ROWS_SWIGLU(QL_MV_SWIGLU_COLS(TYPE))                                               \
            uint r0 = rbegin;                                                                     \
            for (; r0 + QL_MV_R <= rend; r0 += QL_MV_R)                                           \
                QL_TILE_THEN(TYPE, QK, BYTES, QL_MV_R, 2 * QL_MV_SWIGLU_COLS(TYPE),               \
                             QL_STORE_SWIGLU, 0, QL_PREFETCH)                                     \
            for (; r0 < rend; ++r0)                                                               \
                QL_TILE_THEN(TYPE, QK, BYTES, 1, 2 * QL_MV_SWIGLU_COLS(TYPE), QL_STORE_SWIGLU,    \
                             1, QL_PREFETCH)                                                      \
        }                                                                                         \
    }                                                                                             \
    __kernel __attribute__((reqd_work_group_size(1, 1, 1))) void clattn_qlinear_swiglu_mm_##TYPE( \
        uint m, uint n, uint k, const __global float *x, ulong x_off, uint ldx,                   \
        const __global uchar *w, ulong row_bytes, __global float *y, ulong y_off, uint ldy,       \
        uint rows_per_item)                                                                       \
    {                                                                                             \
        const uint j0 = get_global_id(0) * QL_MM_SWIGLU_COLS(TYPE);                               \
        const uint rbegin = get_global_id(1) * rows_per_item;                                     \
        const uint rend = min(m, rbegin + rows_per_item);                                         \
        QL_ROWS_SWIGLU(QL_MM_SWIGLU_COLS(TYPE))                                                   \
        for (uint r0 = rbegin; r0 < rend; r0 += QL_MM_ROWS(TYPE))                                 \
            QL_TILE_THEN(TYPE, QK, BYTES, QL_MM_ROWS(TYPE), 2 * QL_MM_SWIGLU_COLS(TYPE),          \
                         QL_STORE_SWIGLU, 0, 0)                                                   \
    }                                                                                             \
    QL_STAGED_KERNEL(clattn_qlinear_swiglu_mm_staged_##TYPE, TYPE, QK, BYTES,                     \
                     QL_MMS_SWIGLU_COLS, QL_ROWS_SWIGLU, 2 * QL_MMS_SWIGLU_COLS, QL_STORE_SWIGLU)

#define QL_ALL_KERNELS(TYPE, QK, BYTES)                                                           \
    QL_KERNELS(TYPE, QK, BYTES)                                                                   \
    QL_SWIGLU_KERNELS(TYPE, QK, BYTES)

/* QL_HELPERS_ONLY: the helpers alone, for the program of cl/qlinear_int8.cl. */
#ifndef QL_HELPERS_ONLY
/* The SwiGLU after a gate|up layer split over buffers (src/ops/qlinear.c's clattn__qlinear_glu):
 * h [rows, 2·cols] (gate columns, then up columns) becomes silu(gate) · up in its first cols
 * columns, rows in vectors of eight as the fused kernels store them. NDRange (cols, ⌈rows / 8⌉).
 */
__kernel void clattn_qlinear_glu(__global float *h, uint rows, uint cols)
{
    const uint j = get_global_id(0), r0 = 8 * get_global_id(1);
    if (j >= cols || r0 >= rows)
        return;
    float gate[8], up[8], out[8];
    for (uint i = 0; i < 8; ++i) {
        const ulong at = (ulong)min(r0 + i, rows - 1) * 2 * cols + j;
        gate[i] = h[at];
        up[i] = h[at + cols];
    }
    vstore8(ql_swiglu8(vload8(0, gate), vload8(0, up)), 0, out);
    for (uint i = 0; i < 8 && r0 + i < rows; ++i)
        h[(ulong)(r0 + i) * 2 * cols + j] = out[i];
}

QL_ALL_KERNELS(f32, 16, 64)
QL_ALL_KERNELS(f16, 16, 32)
QL_ALL_KERNELS(bf16, 16, 32)
QL_ALL_KERNELS(q4_0, 32, 18)
QL_ALL_KERNELS(q4_1, 32, 20)
QL_ALL_KERNELS(q5_0, 32, 22)
QL_ALL_KERNELS(q5_1, 32, 24)
QL_ALL_KERNELS(q8_0, 32, 34)
QL_ALL_KERNELS(q4_k, 256, 144)
QL_ALL_KERNELS(q5_k, 256, 176)
QL_ALL_KERNELS(q6_k, 256, 210)
#endif
