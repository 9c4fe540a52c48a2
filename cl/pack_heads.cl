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

/* Copies a per-head view of keys into tiles of CLATTN_KEY_TILE keys stored transposed, the
 * layout of the fused kernel's micro-tiled variant (one vector load gives one component of 16
 * keys):
 *
 *   out[bh, tile, c, t] = x[b, h, tile·16 + t, c]   (0 past the n keys)
 *
 * (clattn_pack_keys_tiled16 below: the same, faster, where d is a multiple of 16.)
 * NDRange: (d, tiles·16, pairs). */
__kernel void clattn_pack_keys_tiled(CLATTN_VIEW_PARAMS(x), __global float *out, ulong out_off,
                                     uint heads, uint pairs, uint n, uint d)
{
    uint c = get_global_id(0), j = get_global_id(1), bh = get_global_id(2);
    uint tiles = (n + CLATTN_KEY_TILE - 1) / CLATTN_KEY_TILE;
    if (c >= d || j >= tiles * CLATTN_KEY_TILE || bh >= pairs)
        return;
    CLATTN_SPLIT_PAIR(bh, heads, b, h);
    uint tile = j / CLATTN_KEY_TILE, t = j % CLATTN_KEY_TILE;
    ulong at = out_off + (((ulong)bh * tiles + tile) * d + c) * CLATTN_KEY_TILE + t;
    out[at] = j < n ? CLATTN_VIEW_ROW(x, b, h, j)[c] : 0.0f;
}

/* The same for d a multiple of 16, a 16 x 16 block per work-item: 16 keys' components c0 ..
 * c0 + 15 read as rows and transposed in registers (clattn_transpose16), so that both the reads
 * and the writes are whole vectors. NDRange: (d / 16, tiles, pairs). */
__kernel void clattn_pack_keys_tiled16(CLATTN_VIEW_PARAMS(x), __global float *out, ulong out_off,
                                       uint heads, uint pairs, uint n, uint d)
{
    uint c0 = get_global_id(0) * 16, tile = get_global_id(1), bh = get_global_id(2);
    uint tiles = (n + CLATTN_KEY_TILE - 1) / CLATTN_KEY_TILE;
    if (c0 >= d || tile >= tiles || bh >= pairs)
        return;
    CLATTN_SPLIT_PAIR(bh, heads, b, h);
    float16 block[16];
    for (int t = 0; t < 16; t++) {
        uint j = tile * CLATTN_KEY_TILE + t;
        block[t] = j < n ? vload16(0, CLATTN_VIEW_ROW(x, b, h, j) + c0) : (float16)(0.0f);
    }
    clattn_transpose16(block);
    __global float *to = out + out_off + (((ulong)bh * tiles + tile) * d + c0) * CLATTN_KEY_TILE;
    for (int c = 0; c < 16; c++)
        vstore16(block[c], c, to);
}
