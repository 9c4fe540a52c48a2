/* npy_compare A.npy B.npy TOL: exit 0 when both hold the same shape and max |a - b| <= TOL,
 * else 1 with the reason. A test helper for the end-to-end tests of the example programs. */
#include <clattn/clattn.h>

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

/* "(2, 3)", "(5,)", "()". */
static const char *format_shape(char *buf, size_t cap, const clattn_npy_array *a)
{
    size_t used = (size_t)snprintf(buf, cap, "(");
    for (int d = 0; d < a->ndim && used < cap; d++)
        used += (size_t)snprintf(buf + used, cap - used, d ? ", %zu" : "%zu", a->shape[d]);
    if (used < cap)
        snprintf(buf + used, cap - used, a->ndim == 1 ? ",)" : ")");
    return buf;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: npy_compare A.npy B.npy TOLERANCE\n");
        return 2;
    }
    clattn_npy_array *a = NULL, *b = NULL;
    if (clattn_npy_read_f32(&a, argv[1]) != CLATTN_OK || clattn_npy_read_f32(&b, argv[2]) != CLATTN_OK) {
        fprintf(stderr, "npy_compare: %s\n", clattn_last_error(NULL));
        return 1;
    }
    int rc = 0;
    bool same_shape = a->ndim == b->ndim;
    for (int d = 0; same_shape && d < a->ndim; d++)
        same_shape = a->shape[d] == b->shape[d];
    if (!same_shape) {
        char sa[256], sb[256];
        fprintf(stderr, "npy_compare: shapes differ: %s is %s, %s is %s\n", argv[1],
                format_shape(sa, sizeof(sa), a), argv[2], format_shape(sb, sizeof(sb), b));
        rc = 1;
    } else {
        double worst = 0.0;
        for (size_t i = 0; i < a->numel; i++) {
            double d = fabs((double)a->f32[i] - b->f32[i]);
            if (!(d <= worst))
                worst = isnan(d) ? INFINITY : d;
        }
        printf("max abs difference %.3g over %zu elements\n", worst, a->numel);
        rc = worst <= atof(argv[3]) ? 0 : 1;
    }
    clattn_npy_array_destroy(&a);
    clattn_npy_array_destroy(&b);
    return rc;
}
