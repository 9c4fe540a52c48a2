/* Attention scores for a chunk of (batch, head) pairs bh = bh0 + z, z < pairs:
 *
 *   s[z, i, j] = Σ_c (q[b,h,i,c] · scale) · k[b,h,j,c], then masked (clattn_masked_score).
 *
 * q, k: per-head views straight into the projection output: element (b, h, n, c) at
 *       x[x_off + b·x_sb + h·x_sh + n·x_sn + c] (no split or transpose copies). Query head h
 *       reads key head h / kv_group (grouped-query attention; kv_group 1 otherwise).
 * s:    [pairs, nq, nk] contiguous from s_off.
 * NDRange: (nk, nq, pairs), one score per work-item. */
__kernel void clattn_scores(CLATTN_VIEW_PARAMS(q), CLATTN_VIEW_PARAMS(k), __global float *s,
                            ulong s_off, uint heads, uint kv_group, uint pairs, uint nq, uint nk,
                            uint dk, uint bh0, float scale, CLATTN_MASK_PARAMS)
{
    uint j = get_global_id(0), i = get_global_id(1), z = get_global_id(2);
    if (j >= nk || i >= nq || z >= pairs)
        return;
    CLATTN_SPLIT_PAIR(bh0 + z, heads, b, h);
    __global const float *qi = CLATTN_VIEW_ROW(q, b, h, i);
    __global const float *kj = CLATTN_VIEW_ROW(k, b, h / kv_group, j);
    float acc = 0.0f;
    for (uint c = 0; c < dk; c++)
        acc += (qi[c] * scale) * kj[c];
    s[s_off + ((ulong)z * nq + i) * nk + j] = clattn_masked_score(acc, b, h, i, j, CLATTN_MASK_ARGS);
}
