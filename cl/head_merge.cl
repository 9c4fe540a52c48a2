/* Attention weights times values, written in the concatenated-heads layout:
 *
 *   o[b, h, i, c] = Σ_m p[z, i, m] · v[b, h, m, c]      for bh = bh0 + z, z < pairs
 *
 * p: [pairs, nq, nk] probabilities, contiguous from p_off.
 * v, o: per-head views (see scores.cl); with o_sh = d_v and o_sn = h·d_v the output is the
 *       [B, Nq, h·d_v] matrix that the output projection consumes.
 * NDRange: (dv, nq, pairs). */
__kernel void clattn_head_merge(__global const float *p, ulong p_off, CLATTN_VIEW_PARAMS(v),
                                CLATTN_OUT_VIEW_PARAMS(o), uint heads, uint kv_group, uint pairs,
                                uint nq, uint nk, uint dv, uint bh0)
{
    uint c = get_global_id(0), i = get_global_id(1), z = get_global_id(2);
    if (c >= dv || i >= nq || z >= pairs)
        return;
    CLATTN_SPLIT_PAIR(bh0 + z, heads, b, h);
    __global const float *pi = p + p_off + ((ulong)z * nq + i) * nk;
    __global const float *vc = CLATTN_VIEW_ROW(v, b, h / kv_group, 0) + c; /* GQA: its kv head */
    float acc = 0.0f;
    for (uint m = 0; m < nk; m++)
        acc += pi[m] * vc[m * v_sn];
    CLATTN_VIEW_ROW(o, b, h, i)[c] = acc;
}

/* Adds the head-average of a chunk's probabilities to avg (which starts zeroed):
 *
 *   avg[b, i, j] += (Σ over the chunk's heads h of batch b of p[z(b,h), i, j]) / heads
 *
 * p: [pairs, nq, nk] for bh = bh0 + z; avg: [B, nq, nk] contiguous from avg_off.
 * NDRange: (nk, nq, batches touched by the chunk), batch b = bh0 / heads + get_global_id(2). */
__kernel void clattn_average_heads(__global const float *p, ulong p_off, __global float *avg,
                                   ulong avg_off, uint heads, uint pairs, uint nq, uint nk,
                                   uint bh0)
{
    uint j = get_global_id(0), i = get_global_id(1);
    uint b = bh0 / heads + get_global_id(2);
    if (j >= nk || i >= nq)
        return;
    uint first = max(bh0, b * heads), end = min(bh0 + pairs, (b + 1) * heads);
    if (first >= end)
        return;
    float sum = 0.0f;
    for (uint bh = first; bh < end; bh++)
        sum += p[p_off + ((ulong)(bh - bh0) * nq + i) * nk + j];
    avg[avg_off + ((ulong)b * nq + i) * nk + j] += sum / (float)heads;
}
