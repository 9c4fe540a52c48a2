/* Element-wise kernels around the GEMMs: bias and activation, the gated feed-forward's product,
 * and the residual add.
 *
 * Bias and activation on a GEMM result, in place:
 *
 *   y[r, c] = act(y[r, c] + bias[c])      for r < rows, c < cols
 *
 * y: [rows, cols] with leading dimension ld, from y_off. bias: [cols] from b_off, or NULL.
 * act: CLATTN_ACT_NONE, CLATTN_ACT_RELU, CLATTN_ACT_GELU (with erf, PyTorch's default gelu) or
 * CLATTN_ACT_GELU_TANH (the tanh approximation) or CLATTN_ACT_SILU (x·sigmoid(x));
 * src/base/constants.h. NDRange: (cols, rows). */
static float activate(float x, int act)
{
    if (act == CLATTN_ACT_RELU)
        return fmax(x, 0.0f);
    if (act == CLATTN_ACT_GELU)
        return 0.5f * x * (1.0f + erf(x * M_SQRT1_2_F));
    if (act == CLATTN_ACT_GELU_TANH) /* sqrt(2/pi) = 0.7978845608... */
        return 0.5f * x * (1.0f + tanh(0.7978845608028654f * (x + 0.044715f * x * x * x)));
    if (act == CLATTN_ACT_SILU)
        return x / (1.0f + exp(-x));
    return x;
}

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
    y[at] = activate(x, act);
}

/* The gated feed-forward's product, in place on the fused projection's output:
 *
 *   h[r, c] = act(h[r, c]) · h[r, cols + c]      for r < rows, c < cols
 *
 * h: [rows, 2·cols] (leading dimension 2·cols): the gate in the first cols columns, the up
 * projection in the last cols. NDRange: (cols, rows). */
__kernel void clattn_glu(__global float *h, uint rows, uint cols, int act)
{
    uint c = get_global_id(0), r = get_global_id(1);
    if (c >= cols || r >= rows)
        return;
    ulong at = (ulong)r * (2 * (ulong)cols) + c;
    h[at] = activate(h[at], act) * h[at + cols];
}

/* The residual add of pre-LN layers: y[r, c] += x[r, c] + bias[c] (bias may be NULL) for n = rows ·
 * width elements. NDRange: (n). */
__kernel void clattn_add(__global float *y, ulong y_off, __global const float *x, ulong x_off,
                         __global const float *bias, uint width, ulong n)
{
    ulong i = get_global_id(0);
    if (i >= n)
        return;
    float v = x[x_off + i];
    if (bias)
        v += bias[i % width];
    y[y_off + i] += v;
}
