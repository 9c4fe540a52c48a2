/* Sets every element of a (possibly strided) tensor to one value.
 * data: the tensor seen as 4-D [n0, n1, n2, n3] with strides s0..s3, starting at `offset`.
 * One work-item per element, in row-major order. */
__kernel void clattn_fill(__global float *data, ulong offset,
                          ulong n0, ulong n1, ulong n2, ulong n3,
                          ulong s0, ulong s1, ulong s2, ulong s3, float value)
{
    ulong i = get_global_id(0);
    if (i >= n0 * n1 * n2 * n3)
        return;
    ulong i3 = i % n3;
    i /= n3;
    ulong i2 = i % n2;
    i /= n2;
    ulong i1 = i % n1;
    ulong i0 = i / n1;
    data[offset + i0 * s0 + i1 * s1 + i2 * s2 + i3 * s3] = value;
}
