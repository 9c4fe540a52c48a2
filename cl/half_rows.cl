/* Rows of floats stored as IEEE half floats: the half-precision key/value cache. vstore_half is
 * core OpenCL (no cl_khr_fp16 needed; `half` may only be pointed to), rounding to nearest even.
 *
 * For sequence b < batch and row t < rows, columns c < cols:
 *   dst[dst_off + b·dst_sb + t·dst_ld + c] = half(src[src_off + (b·rows + t)·src_ld + c])
 * NDRange (cols, rows, batch). */
__kernel void clattn_rows_to_half(__global const float *src, ulong src_off, ulong src_ld,
                                  __global half *dst, ulong dst_off, ulong dst_sb, ulong dst_ld,
                                  uint cols, uint rows, uint batch)
{
    uint c = get_global_id(0), t = get_global_id(1), b = get_global_id(2);
    if (c >= cols || t >= rows || b >= batch)
        return;
    float x = src[src_off + ((ulong)b * rows + t) * src_ld + c];
    vstore_half_rte(x, dst_off + b * dst_sb + t * dst_ld + c, dst);
}
