/* Row-wise softmax, in place, numerically stable:
 *
 *   x[r, j] = exp(x[r, j] - max_j x[r, :]) / Σ_j exp(x[r, j] - max_j x[r, :])
 *
 * A row whose entries are all -inf (every key masked) becomes all zeros, not NaN.
 * x: [rows, n] contiguous from off. One work-group of CLATTN_REDUCE_WG work-items per row
 * (a power of two, chosen per device). NDRange: (rows · CLATTN_REDUCE_WG), local
 * (CLATTN_REDUCE_WG). */

__kernel __attribute__((reqd_work_group_size(CLATTN_REDUCE_WG, 1, 1)))
void clattn_softmax(__global float *x, ulong off, uint rows, uint n)
{
    __local float partial[CLATTN_REDUCE_WG];
    uint row = get_group_id(0), t = get_local_id(0);
    if (row >= rows)
        return; /* uniform across the work-group */
    __global float *r = x + off + (ulong)row * n;

    float m = -INFINITY;
    for (uint j = t; j < n; j += CLATTN_REDUCE_WG)
        m = fmax(m, r[j]);
    m = clattn_group_max(m, partial);

    if (m == -INFINITY) { /* every key masked; uniform across the work-group */
        for (uint j = t; j < n; j += CLATTN_REDUCE_WG)
            r[j] = 0.0f;
        return;
    }

    float sum = 0.0f;
    for (uint j = t; j < n; j += CLATTN_REDUCE_WG) {
        float e = exp(r[j] - m);
        r[j] = e;
        sum += e;
    }
    float total = clattn_group_sum(sum, partial);
    for (uint j = t; j < n; j += CLATTN_REDUCE_WG)
        r[j] = r[j] / total;
}
