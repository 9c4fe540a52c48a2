/* Bias and activation on a GEMM result, in place:
 *
 *   y[r, c] = act(y[r, c] + bias[c])      for r < rows, c < cols
 *
 * y: [rows, cols] with leading dimension ld, from y_off. bias: [cols] from b_off, or NULL.
 * act: 0 identity, 1 relu, 2 gelu with erf (PyTorch's default gelu).
 * NDRange: (cols, rows). */
#define CLATTN_ACT_NONE 0
#define CLATTN_ACT_RELU 1
#define CLATTN_ACT_GELU 2

__kernel void clattn_bias_act(__global float *y, ulong y_off, ulong ld, uint rows, uint cols,
                              __global const float *bias, ulong b_off, int act)
{
    uint c = get_global_id(0), r = get_global_id(1);
    if (c >= cols || r >= rows)
        return;
    ulong at = y_off + r * ld + c;
    float x = y[at];
    if (bias)
        x += bias[b_off + c];
    if (act == CLATTN_ACT_RELU)
        x = fmax(x, 0.0f);
    else if (act == CLATTN_ACT_GELU)
        x = 0.5f * x * (1.0f + erf(x * M_SQRT1_2_F));
    y[at] = x;
}
