/* npy_compare A.npy B.npy TOL: exit 0 when both hold the same shape and max |a - b| <= TOL,
 * else 1 with the reason. A test helper for the end-to-end tests of the example programs. */
#include <clattn/clattn.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

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
    if (a->numel != b->numel) {
        fprintf(stderr, "npy_compare: %zu vs %zu elements\n", a->numel, b->numel);
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
