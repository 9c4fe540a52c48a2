/* npy_compare [--rows ORDER | --min-cosine] A.npy B.npy TOL: exit 0 when both hold the same shape
 * and max |a - b| <= TOL, else 1 with the reason. With --rows, ORDER is a text file of one 1-based
 * row number of B per row of A: row i of A is compared with that row of B (A's rows are B's in
 * another order). With --min-cosine, the arrays are 2-D and every row of A must have a cosine of
 * at least TOL with B's (the worst and the mean printed). A test helper for the end-to-end tests
 * of the example programs. */
#include <clattn/clattn.h>

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* Reads ORDER's row numbers (1-based, one per row of a) into *order (0-based); false with the
 * reason when there are too few, too many or out-of-range ones. */
static bool read_order_into(const char *path, const clattn_npy_array *a, size_t **order)
{
    size_t rows = a->ndim ? a->shape[0] : 1, count = 0;
    FILE *f = fopen(path, "r");
    *order = calloc(rows ? rows : 1, sizeof(size_t));
    if (!f || !*order) {
        fprintf(stderr, "npy_compare: cannot read %s\n", path);
        if (f)
            fclose(f);
        return false;
    }
    unsigned long long v;
    while (fscanf(f, "%llu", &v) == 1) {
        if (count == rows || v < 1 || v > rows) {
            fprintf(stderr, "npy_compare: %s: row %llu is out of range or one too many\n", path, v);
            fclose(f);
            return false;
        }
        (*order)[count++] = (size_t)(v - 1);
    }
    fclose(f);
    if (count != rows)
        fprintf(stderr, "npy_compare: %s holds %zu rows, not %zu\n", path, count, rows);
    return count == rows;
}
#define read_order(path, a, order) read_order_into((path), (a), &(order))

int main(int argc, char **argv)
{
    const char *order_path = NULL;
    bool cosines = false;
    if (argc == 6 && strcmp(argv[1], "--rows") == 0) {
        order_path = argv[2];
        argv += 2, argc -= 2;
    } else if (argc == 5 && strcmp(argv[1], "--min-cosine") == 0) {
        cosines = true;
        argv += 1, argc -= 1;
    }
    if (argc != 4) {
        fprintf(stderr, "usage: npy_compare [--rows ORDER | --min-cosine] A.npy B.npy TOLERANCE\n");
        return 2;
    }
    clattn_npy_array *a = NULL, *b = NULL;
    if (clattn_npy_read_f32(&a, argv[1]) != CLATTN_OK || clattn_npy_read_f32(&b, argv[2]) != CLATTN_OK) {
        fprintf(stderr, "npy_compare: %s\n", clattn_last_error(NULL));
        return 1;
    }
    int rc = 0;
    size_t *order = NULL;
    bool same_shape = a->ndim == b->ndim;
    for (int d = 0; same_shape && d < a->ndim; d++)
        same_shape = a->shape[d] == b->shape[d];
    if (!same_shape) {
        char sa[256], sb[256];
        fprintf(stderr, "npy_compare: shapes differ: %s is %s, %s is %s\n", argv[1],
                format_shape(sa, sizeof(sa), a), argv[2], format_shape(sb, sizeof(sb), b));
        rc = 1;
    } else if (order_path && !read_order(order_path, a, order)) {
        rc = 1;
    } else if (cosines && a->ndim != 2) {
        fprintf(stderr, "npy_compare: --min-cosine compares the rows of 2-D arrays\n");
        rc = 1;
    } else if (cosines) {
        double worst = 1.0, sum = 0.0;
        size_t rows = a->shape[0], width = a->shape[1], worst_row = 0;
        for (size_t r = 0; r < rows; r++) {
            double ab = 0, aa = 0, bb = 0;
            for (size_t i = r * width; i < (r + 1) * width; i++)
                ab += (double)a->f32[i] * b->f32[i], aa += (double)a->f32[i] * a->f32[i],
                    bb += (double)b->f32[i] * b->f32[i];
            double c = ab / sqrt(aa * bb);
            if (!(c >= worst)) /* NaN (a zero row) is the worst */
                worst = isnan(c) ? -INFINITY : c, worst_row = r;
            sum += c;
        }
        printf("cosine worst %.6f (row %zu), mean %.6f over %zu rows\n", worst, worst_row + 1,
               rows ? sum / (double)rows : 1.0, rows);
        rc = worst >= atof(argv[3]) ? 0 : 1;
    } else {
        double worst = 0.0;
        size_t width = a->ndim ? a->numel / a->shape[0] : 1;
        for (size_t i = 0; i < a->numel; i++) {
            size_t j = order_path ? order[i / width] * width + i % width : i;
            double d = fabs((double)a->f32[i] - b->f32[j]);
            if (!(d <= worst))
                worst = isnan(d) ? INFINITY : d;
        }
        printf("max abs difference %.3g over %zu elements\n", worst, a->numel);
        rc = worst <= atof(argv[3]) ? 0 : 1;
    }
    clattn_npy_array_destroy(&a);
    clattn_npy_array_destroy(&b);
    free(order);
    return rc;
}
