/* Pooling token states into one vector per sequence, and L2 normalisation.
 *
 *   mean:  out[b, c] = Σ_n real(b, n)·x[b, n, c] / max(Σ_n real(b, n), 1e-9)
 *          (sentence-transformers' masked mean; real = the padding mask is zero there)
 *   cls:   out[b, c] = x[b, 0, c]
 *
 * x: [B, N, d] contiguous from x_off; pad: [B, N] from pad_off (nonzero = padding) or NULL;
 * out: [B, d] contiguous from out_off. NDRange: (d, B). */
__kernel void clattn_pool_mean(__global const float *x, ulong x_off, __global const float *pad,
                               ulong pad_off, uint batch, uint n, uint d, __global float *out,
                               ulong out_off)
{
    uint c = get_global_id(0), b = get_global_id(1);
    if (c >= d || b >= batch)
        return;
    float sum = 0.0f, count = 0.0f;
    for (uint j = 0; j < n; j++) {
        float real = pad ? (pad[pad_off + (ulong)b * n + j] != 0.0f ? 0.0f : 1.0f) : 1.0f;
        sum += x[x_off + ((ulong)b * n + j) * d + c] * real;
        count += real;
    }
    out[out_off + (ulong)b * d + c] = sum / fmax(count, 1e-9f);
}

/* The padding of right-padded sequences from their lengths: pad[b, j] = 1 where j >= lengths[b],
 * else 0 (the mask the attention and clattn_pool_mean read). lengths: [B]; pad: [B, N] from
 * pad_off. NDRange: (N, B). */
__kernel void clattn_padding_from_lengths(__global const uint *lengths, uint batch, uint n,
                                          __global float *pad, ulong pad_off)
{
    uint j = get_global_id(0), b = get_global_id(1);
    if (j >= n || b >= batch)
        return;
    pad[pad_off + (ulong)b * n + j] = j < lengths[b] ? 0.0f : 1.0f;
}

__kernel void clattn_pool_cls(__global const float *x, ulong x_off, uint batch, uint n, uint d,
                              __global float *out, ulong out_off)
{
    uint c = get_global_id(0), b = get_global_id(1);
    if (c >= d || b >= batch)
        return;
    out[out_off + (ulong)b * d + c] = x[x_off + (ulong)b * n * d + c];
}

/* y[r, :] /= max(‖y[r, :]‖₂, 1e-12) (torch.nn.functional.normalize) on [rows, d] contiguous
 * rows. One work-group of CLATTN_REDUCE_WG work-items per row. NDRange: (rows · CLATTN_REDUCE_WG),
 * local (CLATTN_REDUCE_WG). */
__kernel __attribute__((reqd_work_group_size(CLATTN_REDUCE_WG, 1, 1)))
void clattn_l2_normalize(__global float *y, ulong y_off, uint rows, uint d)
{
    __local float partial[CLATTN_REDUCE_WG];
    uint row = get_group_id(0), t = get_local_id(0);
    if (row >= rows)
        return; /* uniform across the work-group */
    __global float *r = y + y_off + (ulong)row * d;
    float squares = 0.0f;
    for (uint c = t; c < d; c += CLATTN_REDUCE_WG)
        squares += r[c] * r[c];
    float norm = sqrt(clattn_group_sum(squares, partial));
    float inv = 1.0f / fmax(norm, 1e-12f);
    for (uint c = t; c < d; c += CLATTN_REDUCE_WG)
        r[c] = r[c] * inv;
}
