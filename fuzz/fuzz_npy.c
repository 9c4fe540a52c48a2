/*
 * Fuzz harness: the .npy readers (clattn_npy_parse_f32, clattn_npy_parse_i64) and the writer.
 * Invariants beyond "no crash, no sanitizer report":
 *   - on error the array is left all zero (nothing allocated) and the message names the
 *     function and "<memory>";
 *   - on success exactly the reader's pointer is set, numel is the product of the shape (1 for a
 *     0-d array), the dimensions past ndim are 0, and the data the shape needs is in the input
 *     (numel * the stored element size <= the input's size: npy.h's allocation bound);
 *   - both readers agree on the shape, and for integer and bool data f32[i] == (float)i64[i];
 *   - clattn_npy_write_f32 then clattn_npy_read_f32 gives back the shape and the float bits.
 */
#include "fuzz_util.h"

#include <clattn/clattn.h>

#include <stdbool.h>
#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    return 0;
}

static size_t stored_size(clattn_npy_dtype d)
{
    switch (d) {
    case CLATTN_NPY_BOOL: case CLATTN_NPY_INT8: case CLATTN_NPY_UINT8: return 1;
    case CLATTN_NPY_INT16: case CLATTN_NPY_UINT16: return 2;
    case CLATTN_NPY_FLOAT32: case CLATTN_NPY_INT32: case CLATTN_NPY_UINT32: return 4;
    case CLATTN_NPY_FLOAT64: case CLATTN_NPY_INT64: case CLATTN_NPY_UINT64: return 8;
    }
    fuzz_fail("unknown source dtype %d", (int)d);
}

static void check(const char *fn, clattn_status s, const clattn_npy_array *a, size_t size,
                  bool want_f32)
{
    if (s != CLATTN_OK) {
        FUZZ_CHECK(a == NULL, "%s: error %s but the array pointer is not NULL", fn,
                   clattn_status_name(s));
        const char *msg = clattn_last_error(NULL);
        FUZZ_CHECK(strncmp(msg, fn, strlen(fn)) == 0 && strstr(msg, ": <memory>: "),
                   "%s: the message does not name the function and source: %s", fn, msg);
        return;
    }
    FUZZ_CHECK(want_f32 ? (a->f32 && !a->i64) : (a->i64 && !a->f32), "%s: wrong pointers set", fn);
    FUZZ_CHECK(a->ndim >= 0 && a->ndim <= CLATTN_NPY_MAX_DIMS, "%s: ndim %d", fn, a->ndim);
    unsigned long long n = 1;
    for (int d = 0; d < a->ndim; d++)
        n *= a->shape[d];
    for (int d = a->ndim; d < CLATTN_NPY_MAX_DIMS; d++)
        FUZZ_CHECK(a->shape[d] == 0, "%s: shape[%d] past ndim is %zu", fn, d, a->shape[d]);
    FUZZ_CHECK(n == a->numel, "%s: numel %zu is not the shape's product %llu", fn, a->numel, n);
    FUZZ_CHECK(a->numel <= size / stored_size(a->source_dtype),
               "%s: %zu elements of %zu bytes from a %zu-byte input", fn, a->numel,
               stored_size(a->source_dtype), size);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static clattn_npy_array poison; /* the readers must overwrite the out-pointer */
    clattn_npy_array *f = &poison, *i = &poison;
    clattn_status sf = clattn_npy_parse_f32(&f, data, size);
    check("clattn_npy_parse_f32", sf, f, size, true);
    clattn_status si = clattn_npy_parse_i64(&i, data, size);
    check("clattn_npy_parse_i64", si, i, size, false);
    if (sf == CLATTN_OK && si == CLATTN_OK) {
        FUZZ_CHECK(f->ndim == i->ndim && f->numel == i->numel &&
                       memcmp(f->shape, i->shape, sizeof(f->shape)) == 0 &&
                       f->source_dtype == i->source_dtype,
                   "the f32 and i64 readers disagree on the array");
        for (size_t k = 0; k < f->numel; k++)
            FUZZ_CHECK(f->f32[k] == (float)i->i64[k], "element %zu: f32 %g but i64 %lld", k,
                       (double)f->f32[k], (long long)i->i64[k]);
    }
    if (sf == CLATTN_OK) {
        const char *path = fuzz_temp_path("round_trip.npy");
        clattn_status s = clattn_npy_write_f32(path, f->f32, f->ndim, f->shape);
        FUZZ_CHECK(s == CLATTN_OK, "writing what the reader returned failed: %s",
                   clattn_last_error(NULL));
        clattn_npy_array *back = NULL;
        s = clattn_npy_read_f32(&back, path);
        FUZZ_CHECK(s == CLATTN_OK, "reading back failed: %s", clattn_last_error(NULL));
        FUZZ_CHECK(back->ndim == f->ndim && back->numel == f->numel &&
                       memcmp(back->shape, f->shape, sizeof(f->shape)) == 0 &&
                       back->source_dtype == CLATTN_NPY_FLOAT32,
                   "the shape changed in the round trip");
        FUZZ_CHECK(memcmp(back->f32, f->f32, f->numel * sizeof(float)) == 0,
                   "the data changed in the round trip");
        clattn_npy_array_destroy(&back);
    }
    clattn_npy_array_destroy(&f);
    clattn_npy_array_destroy(&i);
    return 0;
}
