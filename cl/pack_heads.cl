/* Packing keys and values for the fused attention kernel. */

/* Copies a per-head view into a contiguous [pairs, n, d] block (the fused kernel streams keys and
 * values many times; rows strided by the packed projection's width cost a page each):
 *
 *   out[bh, i, c] = x[b, h, i, c]      for bh = b·heads + h < pairs
 *
 * NDRange: (d, n, pairs). */
__kernel void clattn_pack_heads(CLATTN_VIEW_PARAMS(x), __global float *out, ulong out_off,
                                uint heads, uint pairs, uint n, uint d)
{
    uint c = get_global_id(0), i = get_global_id(1), bh = get_global_id(2);
    if (c >= d || i >= n || bh >= pairs)
        return;
    CLATTN_SPLIT_PAIR(bh, heads, b, h);
    out[out_off + ((ulong)bh * n + i) * d + c] = CLATTN_VIEW_ROW(x, b, h, i)[c];
}
