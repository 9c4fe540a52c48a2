/* Helpers shared by the cmocka tests: device context, seeded random data, comparisons. */
#ifndef CLATTN_TEST_UTIL_H
#define CLATTN_TEST_UTIL_H

#include <clattn/clattn.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

/* Exit code that tells meson a test was skipped. */
#define TEST_SKIP_EXIT 77

/* Exits with 77 (skip) when the machine has no OpenCL device at all; prints why. */
void test_require_device(void);

/* The messages a context logged, captured by test_log_callback. */
typedef struct test_log {
    int count;
    int errors;
    char last[8192];
} test_log;

void test_log_callback(void *user_data, clattn_log_level level, const char *message);

/* Creates a context on the default device that logs into *log (may be NULL: logs nothing).
 * Fails (NULL) when test_check_fused_variant fails. */
clattn_context *test_context_create(test_log *log);

/* When CLATTN_TEST_FUSED_LOCAL is set (the "-fused-local" test entries set it together with
 * CLATTN_TUNE=fused_local=1,...): 0 if ctx's fused kernel variant is the one it names (1 =
 * staged through __local memory, 0 = global), else prints why and returns -1. Unset: 0. */
int test_check_fused_variant(const clattn_context *ctx);

/* The usual cmocka group state: a context on the default device (skips without a device). */
typedef struct test_fixture {
    clattn_context *ctx;
} test_fixture;
int test_fixture_setup(void **state);
int test_fixture_teardown(void **state);

/* Seeded pseudo-random numbers (splitmix64), identical on every platform. */
typedef struct test_rng {
    uint64_t state;
} test_rng;
uint64_t test_rng_next(test_rng *rng);
/* Uniform in [lo, hi). */
float test_rng_uniform(test_rng *rng, float lo, float hi);
void test_fill_uniform(float *x, size_t n, uint64_t seed, float lo, float hi);

/* Largest |a[i] - b[i]|; NaN or infinity in either counts as a failure (returns INFINITY)
 * unless both hold the same non-finite value. */
double test_max_abs_diff(const float *a, const float *b, size_t n);

/* Asserts max |a - b| <= tol, printing the worst index and values when it fails. */
#define assert_close(a, b, n, tol) test_assert_close((a), (b), (n), (tol), __FILE__, __LINE__)
void test_assert_close(const float *a, const float *b, size_t n, double tol, const char *file,
                       int line);

/* Asserts that `call` returns `expected` and that the last error message contains `needle`. */
#define assert_status_msg(ctx, call, expected, needle)                                     \
    test_assert_status_msg((ctx), (call), (expected), (needle), #call, __FILE__, __LINE__)
void test_assert_status_msg(const clattn_context *ctx, clattn_status got, clattn_status expected,
                            const char *needle, const char *call, const char *file, int line);

/* Creates a tensor and writes `data` (numel floats) into it; fails the test on error. */
clattn_tensor *test_tensor_from(clattn_context *ctx, int ndim, const size_t *shape,
                                const float *data);
/* Reads a whole contiguous tensor into a new malloc'd array. */
float *test_tensor_to_host(const clattn_tensor *t);

/* Expands a mask of shape shape[0..ndim-1] to a full [B, H, Nq, Nk] array by broadcasting
 * (size-1 dimensions repeat). ndim 2: [Nq, Nk]; ndim 3: [H, Nq, Nk] (right-aligned, as torch broadcasts), or [B·H, Nq, Nk] when
 * three_d_is_bh (PyTorch's MultiheadAttention form); ndim 4: [B, H, Nq, Nk]. */
float *test_expand_mask(const float *mask, int ndim, const size_t *shape, int three_d_is_bh,
                        size_t B, size_t H, size_t Nq, size_t Nk);

/* Small-shape mode (set by the oclgrind wrapper): tests shrink their grids. */
int test_small_mode(void);

/* A fresh directory "<$TMPDIR or /tmp>/<prefix>XXXXXX" written into dir; 0 on success. */
int test_temp_dir_create(char *dir, size_t size, const char *prefix);
/* Removes the plain files directly inside dir, then dir. */
void test_temp_dir_remove(const char *dir);
/* The whole file in a malloc'd buffer of exactly its size (at least 1 byte allocated); fails the
 * test when the file cannot be read. */
unsigned char *test_read_file(const char *path, size_t *size);
/* Writes `size` bytes to path (creating or truncating it); fails the test on error. */
void test_write_file(const char *path, const void *bytes, size_t size);

/* The real all-MiniLM-L6-v2 folder (tools/fetch-model.sh): $CLATTN_TEST_MODEL_DIR, else
 * ${CLATTN_MODEL_CACHE:-$HOME/.cache/clattn}/all-MiniLM-L6-v2. When it is absent, prints so and
 * skips the calling cmocka test, or fails it when CLATTN_REQUIRE_REAL_MODEL=1 (CI). */
const char *test_real_model_or_skip(void);

#endif
