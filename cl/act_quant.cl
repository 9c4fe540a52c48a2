/* 8-bit activations: a row of float32 values quantised block by block for the quantised linear
 * layers' integer kernels (cl/qlinear_int8.cl, whose header gives the rule: per block of qb
 * values, dx = amax / 127, xq = round(x / dx) half away from zero, and the sums of xq over each
 * 16 values). In the quantised-linear program (clattn_qlinear_quantize) and in the base program
 * (clattn_add_rmsnorm_quantize, cl/rmsnorm.cl: a pre-norm layer's norm that writes its rows
 * already quantised), so that both give the same bytes. */

/* The largest of 16 magnitudes (as integers: non-negative floats order as their bits) and the
 * sum of 16 lanes, component by component (oclgrind 21.10 misreads .lo/.hi of 16-wide
 * vectors). */
inline float qi_max16(int16 v)
{
    int a = max(max(max(v.s0, v.s1), max(v.s2, v.s3)), max(max(v.s4, v.s5), max(v.s6, v.s7)));
    int b = max(max(max(v.s8, v.s9), max(v.sa, v.sb)), max(max(v.sc, v.sd), max(v.se, v.sf)));
    return as_float(max(a, b));
}

inline int qi_sum16(int16 v)
{
    return (((v.s0 + v.s1) + (v.s2 + v.s3)) + ((v.s4 + v.s5) + (v.s6 + v.s7))) +
           (((v.s8 + v.s9) + (v.sa + v.sb)) + ((v.sc + v.sd) + (v.se + v.sf)));
}

/* Where 16-value piece h of a block (values 16h .. 16h + 15) sits in the quantised row: in
 * order, except in blocks of 256 (the K-quants'), where each 64 values store their pieces in the
 * order 0, 2, 1, 3 — so that the first 16 values of two consecutive 32-value sub-blocks are 32
 * contiguous bytes, and their last 16 the next 32 (cl/qlinear_int8.cl's Q4_K and Q5_K sum a
 * sub-block's two halves in 16 bits before its scale). The sums s stay in order. */
inline uint qi_piece(uint qb, uint h)
{
    return qb == 256 ? (h & ~3u) | ((h & 1u) << 1) | ((h >> 1) & 1u) : h;
}

/* Block blk of the row at xr (qb values) into q, d, s (the row's own arrays; q 16-byte
 * aligned), 16 values at a time (the callers copy blocks of 256 with qi_transpose_block, below,
 * where the tile that reads them asks for it). round(v) as trunc(v + copysign(0.5 − 2^-25, v)): the same for
 * every |v| < 2^23 (here |v| ≤ 127), without a library call. */
inline void qi_quantize_block(const __global float *xr, uint blk, uint qb, __global char *q,
                              __global float *d, __global short *s)
{
    xr += (ulong)blk * qb;
    int16 peak = (int16)0;
    for (uint h = 0; h < qb / 16; ++h)
        peak = max(peak, as_int16(fabs(vload16(h, xr))));
    const float scale = qi_max16(peak) / 127.0f;
    const float id = scale != 0.0f ? 1.0f / scale : 0.0f;
    q += (ulong)blk * qb;
    for (uint h = 0; h < qb / 16; ++h) {
        const float16 v = vload16(h, xr) * (float16)id;
        const int16 r = convert_int16(v + copysign((float16)0x1.fffffep-2f, v));
        *(__global char16 *)(q + 16 * qi_piece(qb, h)) = convert_char16(r);
        s[(ulong)blk * (qb / 16) + h] = (short)qi_sum16(r);
    }
    d[blk] = scale;
}

/* The 512-bit K-quant tile's copy of a block of 256's sums and scale (cl/qlinear_int8.cl's
 * offset term in float32): rows in groups of QI_XT_ROWS; block blk of the group of row r at
 * xt + (⌊r / QI_XT_ROWS⌋ · blocks + blk) · QI_XT_FLOATS holds, for each sub-block j < 8 of 32
 * values, the group's rows' sums xs[2j] + xs[2j + 1] as floats (exact: |sum| ≤ 32 · 127), each
 * twice (16 floats at 16j, row i's at 16j + 2i), then the rows' dx, each twice (at 128). Row r
 * of m writes its own slot; the last row also the group's slots past m (the tiles read whole
 * groups; those rows are never stored). s: the row's sums of the block (16), d its scale. */
#define QI_XT_ROWS 8
#define QI_XT_FLOATS (9 * 2 * QI_XT_ROWS)
inline void qi_transpose_block(__global float *xt, uint r, uint m, uint blocks, uint blk,
                               const __global short *s, float d)
{
    __global float *t = xt + ((ulong)(r / QI_XT_ROWS) * blocks + blk) * QI_XT_FLOATS;
    const uint last = r + 1 == m ? QI_XT_ROWS : r % QI_XT_ROWS + 1;
    for (uint slot = r % QI_XT_ROWS; slot < last; ++slot) {
        for (uint j = 0; j < 8; ++j)
            vstore2((float2)(float)(s[2 * j] + s[2 * j + 1]), 0,
                    t + 2 * QI_XT_ROWS * j + 2 * slot);
        vstore2((float2)d, 0, t + 16 * QI_XT_ROWS + 2 * slot);
    }
}
