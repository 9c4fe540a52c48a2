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
