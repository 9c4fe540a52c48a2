/* Definitions shared by the attention kernels (embedded first, before every other source). */

/* Work-group size of the row-reduction kernels (softmax, LayerNorm): a power of two chosen per
 * device by the library. */
#ifndef CLATTN_REDUCE_WG
#define CLATTN_REDUCE_WG 64
#endif

/* Mask kinds as the kernels see them. */
#define CLATTN_KMASK_NONE 0
#define CLATTN_KMASK_BOOL 1     /* nonzero = ignore */
#define CLATTN_KMASK_ADDITIVE 2 /* added to the score */

/* The mask arguments every attention kernel takes, in this order:
 *   am: attention mask, element (b, h, i, j) at am[am_off + b·am_sb + h·am_sh + i·am_si + j·am_sj]
 *       (stride 0 broadcasts); kp: key-padding mask, element (b, j) at kp[kp_off + b·kp_sb +
 *       j·kp_sj]; causal: ignore key j for query i when j > i. */
#define CLATTN_MASK_PARAMS                                                                  \
    __global const float *am, ulong am_off, ulong am_sb, ulong am_sh, ulong am_si,          \
        ulong am_sj, int am_kind, __global const float *kp, ulong kp_off, ulong kp_sb,      \
        ulong kp_sj, int kp_kind, int causal

#define CLATTN_MASK_ARGS \
    am, am_off, am_sb, am_sh, am_si, am_sj, am_kind, kp, kp_off, kp_sb, kp_sj, kp_kind, causal

/* The score of query i against key j after every mask: -INFINITY when the key is ignored. */
float clattn_masked_score(float s, uint b, uint h, uint i, uint j, CLATTN_MASK_PARAMS)
{
    if (causal && j > i)
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
