/* MPNet's relative position bias: buckets of relative distances, looked up in the
 * [buckets, heads] table, written as an additive [H, N, N] attention mask. Kept in one place so
 * that the fused kernel's own relative-bucket modifier can replace the mask later. */
#include "relative_bias.h"
#include "runtime/buffers.h"

#include <math.h>
#include <stdlib.h>

size_t clattn__relative_bucket(long long relative, size_t num_buckets, size_t max_distance)
{
    /* transformers: n = -relative; half the buckets per direction, the keys after the query
     * (n < 0) in the upper half; exact buckets below max_exact, then logarithmic ones. */
    size_t half = num_buckets / 2, max_exact = half / 2, ret = 0;
    long long n = -relative;
    if (n < 0)
        ret += half;
    unsigned long long distance = (unsigned long long)(n < 0 ? -n : n);
    if (distance < max_exact)
        return ret + (size_t)distance;
    /* In float32 as torch computes it: log(n.float() / max_exact) / math.log(D / E) (a double
     * rounded to float32) * (B - E), truncated toward zero. */
    float ratio = (float)distance / (float)max_exact;
    float scaled = logf(ratio) / (float)log((double)max_distance / (double)max_exact) *
                   (float)(half - max_exact);
    size_t large = max_exact + (size_t)scaled;
    return ret + (large < half - 1 ? large : half - 1);
}

void clattn__relative_bias_fill(const float *table, size_t num_buckets, size_t heads,
                                size_t max_distance, size_t n, float *bias)
{
    /* One bucket per relative distance -(n-1) .. n-1, then rows of the [H, N, N] mask. */
    size_t span = 2 * n - 1;
    size_t *bucket = malloc(span * sizeof(*bucket));
    for (size_t r = 0; bucket && r < span; r++)
        bucket[r] = clattn__relative_bucket((long long)r - (long long)(n - 1), num_buckets,
                                            max_distance);
    for (size_t h = 0; h < heads; h++)
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < n; j++) {
                size_t b = bucket ? bucket[j + (n - 1) - i]
                                  : clattn__relative_bucket((long long)j - (long long)i,
                                                            num_buckets, max_distance);
                bias[(h * n + i) * n + j] = table[b * heads + h];
            }
    free(bucket);
}

clattn_status clattn__relative_bias_upload(clattn_context *ctx, const float *table,
                                           size_t num_buckets, size_t heads, size_t max_distance,
                                           size_t n, cl_mem bias)
{
    size_t count = heads * n * n;
    float *host = malloc(count * sizeof(float));
    if (!host)
        return clattn__fail(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                            "relative position bias: out of host memory for %zu x %zu x %zu",
                            heads, n, n);
    clattn__relative_bias_fill(table, num_buckets, heads, max_distance, n, host);
    clattn_status status =
        clattn__write_bytes(ctx, bias, 0, host, count * sizeof(float),
                            "writing the relative position bias [%zu, %zu, %zu]", heads, n, n);
    free(host);
    return status;
}
