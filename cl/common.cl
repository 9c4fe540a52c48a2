/* Definitions shared by the kernels (embedded after src/base/constants.h, before every other source):
 * the work-group reduction, per-head views, the mask arguments. */

/* Work-group size of the row-reduction kernels (softmax, LayerNorm): a power of two chosen per
 * device by the library. */
#ifndef CLATTN_REDUCE_WG
#define CLATTN_REDUCE_WG CLATTN_REDUCE_WG_MAX
#endif

/* ---- work-group reductions ----
 * One work-group of CLATTN_REDUCE_WG work-items reduces `value` (one per work-item) through
 * `partial` [CLATTN_REDUCE_WG] of __local memory and returns the result to every work-item. Every
 * work-item must call it (it has barriers); `partial` may be reused right after it returns. */
#define CLATTN_DEFINE_GROUP_REDUCE(name, OP)                                                \
    float name(float value, __local float *partial)                                         \
    {                                                                                       \
        uint t = get_local_id(0);                                                           \
        partial[t] = value;                                                                 \
        barrier(CLK_LOCAL_MEM_FENCE);                                                       \
        for (uint span = CLATTN_REDUCE_WG / 2; span > 0; span >>= 1) {                      \
            if (t < span)                                                                   \
                partial[t] = OP(partial[t], partial[t + span]);                             \
            barrier(CLK_LOCAL_MEM_FENCE);                                                   \
        }                                                                                   \
        float result = partial[0];                                                          \
        barrier(CLK_LOCAL_MEM_FENCE); /* everyone has read partial[0] */                    \
        return result;                                                                      \
    }
#define CLATTN_ADD(a, b) ((a) + (b))
CLATTN_DEFINE_GROUP_REDUCE(clattn_group_sum, CLATTN_ADD)
CLATTN_DEFINE_GROUP_REDUCE(clattn_group_max, fmax)

/* ---- per-head views ----
 * A [B, H, N, d] operand anywhere in a buffer: element (b, h, n, c) at
 * x[x_off + b·x_sb + h·x_sh + n·x_sn + c] (the last dimension contiguous). The host sets the five
 * arguments with clattn__head_view_args. */
#define CLATTN_VIEW_PARAMS(x) \
    __global const float *x, ulong x##_off, ulong x##_sb, ulong x##_sh, ulong x##_sn
#define CLATTN_OUT_VIEW_PARAMS(x) \
    __global float *x, ulong x##_off, ulong x##_sb, ulong x##_sh, ulong x##_sn
/* Row n of head (b, h) of the view x. */
#define CLATTN_VIEW_ROW(x, b, h, n) \
    ((x) + x##_off + (ulong)(b) * x##_sb + (ulong)(h) * x##_sh + (ulong)(n) * x##_sn)

/* The (batch, head) pair of a flat pair index bh = b·heads + h. */
#define CLATTN_SPLIT_PAIR(bh, heads, b, h) \
    uint b = (bh) / (heads), h = (bh) % (heads)

/* Transposes the 16 x 16 block x[0..16) in place: x[i].sj becomes the old x[j].si. Four rounds
 * of interleaving rows i and i + 8 (a perfect shuffle), each component swizzle one vector
 * shuffle once compiled: no gathers, no scatters, no private memory. Moves only: the values are
 * the same bits. */
#define CLATTN_ZIP_LO(a, b)                                                                 \
    ((float16)((a).s0, (b).s0, (a).s1, (b).s1, (a).s2, (b).s2, (a).s3, (b).s3, (a).s4,     \
               (b).s4, (a).s5, (b).s5, (a).s6, (b).s6, (a).s7, (b).s7))
#define CLATTN_ZIP_HI(a, b)                                                                 \
    ((float16)((a).s8, (b).s8, (a).s9, (b).s9, (a).sa, (b).sa, (a).sb, (b).sb, (a).sc,     \
               (b).sc, (a).sd, (b).sd, (a).se, (b).se, (a).sf, (b).sf))
void clattn_transpose16(float16 *x)
{
    for (int round = 0; round < 4; round++) {
        float16 y[16];
#pragma unroll
        for (int i = 0; i < 8; i++) {
            y[2 * i] = CLATTN_ZIP_LO(x[i], x[i + 8]);
            y[2 * i + 1] = CLATTN_ZIP_HI(x[i], x[i + 8]);
        }
#pragma unroll
        for (int i = 0; i < 16; i++)
            x[i] = y[i];
    }
}

/* The mask arguments every attention kernel takes, in this order:
 *   am: attention mask, element (b, h, i, j) at am[am_off + b·am_sb + h·am_sh + i·am_si + j·am_sj]
 *       (stride 0 broadcasts); kp: key-padding mask, element (b, j) at kp[kp_off + b·kp_sb +
 *       j·kp_sj]; causal: ignore key j for query i when j > i + causal_shift (the shift places
 *       the queries after causal_shift earlier keys: incremental decoding with a cache). */
#define CLATTN_MASK_PARAMS                                                                  \
    __global const float *am, ulong am_off, ulong am_sb, ulong am_sh, ulong am_si,          \
        ulong am_sj, int am_kind, __global const float *kp, ulong kp_off, ulong kp_sb,      \
        ulong kp_sj, int kp_kind, int causal, uint causal_shift

#define CLATTN_MASK_ARGS \
    am, am_off, am_sb, am_sh, am_si, am_sj, am_kind, kp, kp_off, kp_sb, kp_sj, kp_kind, causal, \
        causal_shift

/* The score of query i against key j after every mask: -INFINITY when the key is ignored. */
float clattn_masked_score(float s, uint b, uint h, uint i, uint j, CLATTN_MASK_PARAMS)
{
    if (causal && j > i + causal_shift)
        return -INFINITY;
    if (am_kind != CLATTN_KMASK_NONE) {
        float m = am[am_off + b * am_sb + h * am_sh + i * am_si + j * am_sj];
        if (am_kind == CLATTN_KMASK_BOOL) {
            if (m != 0.0f)
                return -INFINITY;
        } else {
            s += m;
        }
    }
    if (kp_kind != CLATTN_KMASK_NONE) {
        float m = kp[kp_off + b * kp_sb + j * kp_sj];
        if (kp_kind == CLATTN_KMASK_BOOL) {
            if (m != 0.0f)
                return -INFINITY;
        } else {
            s += m;
        }
    }
    return s;
}

/* ---- score modifiers ----
 * The arguments of the modifiers, in this order: alibi: slopes m_h at alibi[alibi_off + h];
 * rel: the relative-position table [num_buckets, heads] at rel[rel_off + bucket·heads + h], with
 * rel_buckets = num_buckets and rel_log_ratio = log(max_distance / max_exact) (max_exact =
 * num_buckets / 4); window_half = w/2; softcap = c. Unused buffers may be NULL. */
#define CLATTN_MOD_PARAMS                                                                   \
    __global const float *alibi, ulong alibi_off, __global const float *rel, ulong rel_off, \
        uint rel_buckets, float rel_log_ratio, uint window_half, float softcap

#define CLATTN_MOD_ARGS \
    alibi, alibi_off, rel, rel_off, rel_buckets, rel_log_ratio, window_half, softcap

/* T5's and MPNet's bidirectional bucket of the relative position j - i (transformers'
 * _relative_position_bucket / relative_position_bucket): keys after the query in the upper half;
 * distances below max_exact exact, then logarithmic up to max_distance, in float32 as PyTorch
 * computes them. */
uint clattn_relative_bucket(uint i, uint j, uint num_buckets, float log_ratio)
{
    uint side = num_buckets / 2, max_exact = side / 2; /* the buckets of one side */
    uint ret = j > i ? side : 0;
    uint n = j > i ? j - i : i - j;
    if (n < max_exact)
        return ret + n;
    float x = log((float)n / (float)max_exact) / log_ratio * (float)(side - max_exact);
    uint large = max_exact + (uint)x;
    return ret + min(large, side - 1);
}

/* The score s of query position i (causal_shift included) against key j after the modifiers of
 * `mods` (CLATTN_MOD_*; a compile-time constant in the fused programs): soft-capping first (on
 * the scaled dot product), then ALiBi and the relative-position bias, then the window (-INFINITY
 * outside). The masks come after (clattn_masked_score). */
float clattn_modified_score(float s, int mods, uint heads, uint h, uint i, uint j,
                            CLATTN_MOD_PARAMS)
{
    if (mods & CLATTN_MOD_SOFTCAP)
        s = softcap * tanh(s / softcap);
    if (mods & CLATTN_MOD_ALIBI)
        s -= alibi[alibi_off + h] * (float)(j > i ? j - i : i - j);
    if (mods & CLATTN_MOD_RELPOS)
        s += rel[rel_off + (ulong)clattn_relative_bucket(i, j, rel_buckets, rel_log_ratio) * heads
                 + h];
    if ((mods & CLATTN_MOD_WINDOW) && (j > i ? j - i : i - j) > window_half)
        s = -INFINITY;
    return s;
}
