/* Rotary position embeddings (RoPE) of one [B, H, N, d] operand into a contiguous copy:
 *
 *   position p = pos0 + n; angle a_k = p · θ^(-2k / r) for the pair k < r / 2 (r = rot_dim)
 *   half-split (GPT-NeoX, Llama): channel c < r/2 pairs with c + r/2, k = c mod r/2:
 *       y[c] = x[c]·cos a_k - x[c + r/2]·sin a_k,   y[c + r/2] = x[c + r/2]·cos a_k + x[c]·sin a_k
 *   interleaved (GPT-J, RoFormer): channels 2k and 2k + 1:
 *       y[2k] = x[2k]·cos a_k - x[2k + 1]·sin a_k,  y[2k + 1] = x[2k + 1]·cos a_k + x[2k]·sin a_k
 *   channels c >= r are copied.
 * x:     a head view (cl/common.cl) of `heads` heads; pair z = b·heads + h.
 * y:     [pairs, n, d] contiguous from y_off.
 * table: [rows, r / 2] pairs (cos a_k, sin a_k) of float32 angles for a window of positions,
 *        computed on the host (src/runtime/rotary_table.c); row0 is its row of position pos0,
 *        so that row n of x reads table row row0 + n (row0 + n - 1 < rows).
 * NDRange: (d, n, pairs). */
__kernel void clattn_rotary(CLATTN_VIEW_PARAMS(x), __global float *y, ulong y_off, uint heads,
                            uint pairs, uint n, uint d, uint rot_dim, int interleaved,
                            __global const float *table, uint row0)
{
    uint c = get_global_id(0), row = get_global_id(1), z = get_global_id(2);
    if (c >= d || row >= n || z >= pairs)
        return;
    CLATTN_SPLIT_PAIR(z, heads, b, h);
    __global const float *xr = CLATTN_VIEW_ROW(x, b, h, row);
    float out = xr[c];
    if (c < rot_dim) {
        uint half_r = rot_dim / 2;
        uint k = interleaved ? c / 2 : c % half_r;
        float2 cs = vload2((ulong)(row0 + row) * half_r + k, table);
        float other;
        if (interleaved)
            other = c % 2 == 0 ? -xr[c + 1] : xr[c - 1];
        else
            other = c < half_r ? -xr[c + half_r] : xr[c - half_r];
        out = xr[c] * cs.x + other * cs.y;
    }
    y[y_off + ((ulong)z * n + row) * d + c] = out;
}

/* The same rotation in place on a head view x (a [B, H, N, d] operand anywhere in a buffer, e.g.
 * the projections of new tokens before their keys are cached): one work-item per rotated pair
 * reads both channels before it writes them, so no work-item reads what another writes.
 * Channels c >= rot_dim are not touched. NDRange: (rot_dim / 2, n, pairs). */
__kernel void clattn_rotary_in_place(CLATTN_OUT_VIEW_PARAMS(x), uint heads, uint pairs, uint n,
                                     uint rot_dim, int interleaved, __global const float *table,
                                     uint row0)
{
    uint k = get_global_id(0), row = get_global_id(1), z = get_global_id(2);
    uint half_r = rot_dim / 2;
    if (k >= half_r || row >= n || z >= pairs)
        return;
    CLATTN_SPLIT_PAIR(z, heads, b, h);
    __global float *xr = CLATTN_VIEW_ROW(x, b, h, row);
    uint a = interleaved ? 2 * k : k, c = interleaved ? 2 * k + 1 : k + half_r;
    float2 cs = vload2((ulong)(row0 + row) * half_r + k, table);
    float xa = xr[a], xc = xr[c];
    xr[a] = xa * cs.x - xc * cs.y;
    xr[c] = xc * cs.x + xa * cs.y;
}

/* A decoding step's new tokens into a float key/value cache, one launch: their queries rotated
 * in place, their keys rotated into the key cache, their values copied into the value cache.
 * The same bytes as clattn_rotary_in_place on the queries and the keys, then copies of the keys
 * and values (the same expressions on the same values).
 * proj:  rows (b, row) at proj_off + (b·n + row)·pitch: heads query heads of d floats, then
 *        kv_heads key heads of d, then kv_heads value heads of dv.
 * k_cache: row `row` of sequence b at k_at + b·k_sb + row·(kv_heads·d); v_cache likewise with
 *        v_at, v_sb and kv_heads·dv.
 * table, row0: as clattn_rotary's (row `row` at position row0 + row of the table).
 * NDRange: (heads + 2·kv_heads, n, batch): one work-item per head of a row. */
__kernel void clattn_rope_append(__global float *proj, ulong proj_off, ulong pitch, uint heads,
                                 uint kv_heads, uint d, uint dv, uint n, uint rot_dim,
                                 int interleaved, __global const float *table, uint row0,
                                 __global float *k_cache, ulong k_at, ulong k_sb,
                                 __global float *v_cache, ulong v_at, ulong v_sb)
{
    uint z = get_global_id(0), row = get_global_id(1), b = get_global_id(2);
    if (z >= heads + 2 * kv_heads || row >= n)
        return;
    __global float *pr = proj + proj_off + ((ulong)b * n + row) * pitch;
    if (z >= heads + kv_heads) { /* a value head: copied */
        uint g = z - heads - kv_heads;
        __global const float *x = pr + (ulong)(heads + kv_heads) * d + (ulong)g * dv;
        __global float *y = v_cache + v_at + b * v_sb + (ulong)row * kv_heads * dv + g * dv;
        for (uint c = 0; c < dv; c++)
            y[c] = x[c];
        return;
    }
    uint half_r = rot_dim / 2;
    __global float *x = pr + (ulong)z * d;
    __global float *y = x; /* a query head: in place */
    if (z >= heads) {      /* a key head: into the cache */
        uint g = z - heads;
        y = k_cache + k_at + b * k_sb + (ulong)row * kv_heads * d + g * d;
        for (uint c = rot_dim; c < d; c++)
            y[c] = x[c];
    }
    for (uint k = 0; k < half_r; k++) {
        uint a = interleaved ? 2 * k : k, c = interleaved ? 2 * k + 1 : k + half_r;
        float2 cs = vload2((ulong)(row0 + row) * half_r + k, table);
        float xa = x[a], xc = x[c];
        y[a] = xa * cs.x - xc * cs.y;
        y[c] = xc * cs.x + xa * cs.y;
    }
}
