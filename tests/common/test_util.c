#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <errno.h>
#include <unistd.h>

void test_require_device(void)
{
    size_t count = 0;
    clattn_status status = clattn_list_devices(NULL, 0, &count);
    if (status == CLATTN_ERROR_DEVICE_NOT_FOUND || (status == CLATTN_OK && count == 0)) {
        fprintf(stderr, "SKIP: no OpenCL device on this machine (%s)\n", clattn_last_error(NULL));
        exit(TEST_SKIP_EXIT);
    }
}

void test_log_callback(void *user_data, clattn_log_level level, const char *message)
{
    test_log *log = user_data;
    log->count++;
    if (level == CLATTN_LOG_ERROR)
        log->errors++;
    snprintf(log->last, sizeof(log->last), "%s", message);
}

clattn_context *test_context_create(test_log *log)
{
    clattn_context_params params;
    clattn_context_params_default(&params);
    if (log) {
        memset(log, 0, sizeof(*log));
        params.log_callback = test_log_callback;
        params.log_user_data = log;
        params.log_level = CLATTN_LOG_WARNING;
    } else {
        params.log_level = CLATTN_LOG_NONE;
    }
    clattn_context *ctx = NULL;
    clattn_status status = clattn_context_create(&ctx, &params);
    if (status != CLATTN_OK) {
        fprintf(stderr, "clattn_context_create failed: %s\n", clattn_last_error(NULL));
        return NULL;
    }
    if (test_check_fused_variant(ctx) != 0) {
        clattn_context_destroy(&ctx);
        return NULL;
    }
    return ctx;
}

int test_check_fused_variant(const clattn_context *ctx)
{
    const char *want = getenv("CLATTN_TEST_FUSED_LOCAL");
    if (!want || !*want)
        return 0;
    clattn_tuning t;
    if (clattn_context_get_tuning(ctx, &t) != CLATTN_OK) {
        fprintf(stderr, "clattn_context_get_tuning failed: %s\n", clattn_last_error(ctx));
        return -1;
    }
    int expected = strcmp(want, "0") != 0;
    if (t.fused_local != expected) {
        fprintf(stderr,
                "CLATTN_TEST_FUSED_LOCAL=%s but the context's fused kernel variant is %s "
                "(fused_local=%d): CLATTN_TUNE (\"%s\") was not applied\n",
                want, t.fused_local ? "local" : "global", t.fused_local,
                getenv("CLATTN_TUNE") ? getenv("CLATTN_TUNE") : "");
        return -1;
    }
    return 0;
}

int test_fixture_setup(void **state)
{
    test_require_device();
    test_fixture *f = calloc(1, sizeof(*f));
    if (!f)
        return -1;
    f->ctx = test_context_create(NULL);
    *state = f;
    return f->ctx ? 0 : -1;
}

int test_fixture_teardown(void **state)
{
    test_fixture *f = *state;
    clattn_context_destroy(&f->ctx);
    free(f);
    return 0;
}

uint64_t test_rng_next(test_rng *rng)
{
    uint64_t z = (rng->state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

float test_rng_uniform(test_rng *rng, float lo, float hi)
{
    double u = (double)(test_rng_next(rng) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(lo + (hi - lo) * u);
}

void test_fill_uniform(float *x, size_t n, uint64_t seed, float lo, float hi)
{
    test_rng rng = {seed};
    for (size_t i = 0; i < n; i++)
        x[i] = test_rng_uniform(&rng, lo, hi);
}

static double diff_at(float a, float b)
{
    if (isnan(a) || isnan(b))
        return isnan(a) && isnan(b) ? 0.0 : INFINITY;
    if (isinf(a) || isinf(b))
        return a == b ? 0.0 : INFINITY;
    return fabs((double)a - (double)b);
}

double test_max_abs_diff(const float *a, const float *b, size_t n)
{
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = diff_at(a[i], b[i]);
        if (d > worst)
            worst = d;
    }
    return worst;
}

void test_assert_close(const float *a, const float *b, size_t n, double tol, const char *file,
                       int line)
{
    double worst = -1.0;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        double d = diff_at(a[i], b[i]);
        if (d > worst) {
            worst = d;
            at = i;
        }
    }
    if (n > 0 && !(worst <= tol)) {
        print_error("max abs diff %.3g > tolerance %.3g at index %zu of %zu: %.9g vs %.9g\n",
                       worst, tol, at, n, (double)a[at], (double)b[at]);
        _fail(file, line);
    }
}

void test_assert_status_msg(const clattn_context *ctx, clattn_status got, clattn_status expected,
                            const char *needle, const char *call, const char *file, int line)
{
    if (got != expected) {
        print_error("%s returned %s, expected %s (last error: %s)\n", call,
                       clattn_status_name(got), clattn_status_name(expected),
                       clattn_last_error(ctx));
        _fail(file, line);
    }
    if (needle && !strstr(clattn_last_error(ctx), needle)) {
        print_error("%s: last error \"%s\" does not mention \"%s\"\n", call,
                       clattn_last_error(ctx), needle);
        _fail(file, line);
    }
}

clattn_tensor *test_tensor_from(clattn_context *ctx, int ndim, const size_t *shape,
                                const float *data)
{
    clattn_tensor *t = NULL;
    clattn_status status = clattn_tensor_create(ctx, &t, ndim, shape);
    if (status != CLATTN_OK) {
        print_error("clattn_tensor_create: %s\n", clattn_last_error(ctx));
        fail();
    }
    if (data) {
        status = clattn_tensor_write(t, data, clattn_tensor_numel(t));
        if (status != CLATTN_OK) {
            print_error("clattn_tensor_write: %s\n", clattn_last_error(ctx));
            fail();
        }
    }
    return t;
}

float *test_tensor_to_host(const clattn_tensor *t)
{
    size_t n = clattn_tensor_numel(t);
    float *host = malloc(n * sizeof(float));
    assert_non_null(host);
    clattn_status status = clattn_tensor_read(t, host, n);
    if (status != CLATTN_OK) {
        print_error("clattn_tensor_read: %s\n", clattn_last_error(NULL));
        free(host);
        fail();
    }
    return host;
}

float *test_expand_mask(const float *mask, int ndim, const size_t *shape, int three_d_is_bh,
                        size_t B, size_t H, size_t Nq, size_t Nk)
{
    float *full = malloc(B * H * Nq * Nk * sizeof(float));
    assert_non_null(full);
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++)
            for (size_t i = 0; i < Nq; i++)
                for (size_t j = 0; j < Nk; j++) {
                    size_t idx[4], n = 0;
                    if (ndim == 2) {
                        idx[0] = i, idx[1] = j;
                    } else if (ndim == 3 && three_d_is_bh) {
                        idx[0] = b * H + h, idx[1] = i, idx[2] = j;
                    } else if (ndim == 3) { /* right-aligned: [H, Nq, Nk] */
                        idx[0] = h, idx[1] = i, idx[2] = j;
                    } else {
                        idx[0] = b, idx[1] = h, idx[2] = i, idx[3] = j;
                    }
                    for (int d = 0; d < ndim; d++)
                        n = n * shape[d] + (shape[d] == 1 ? 0 : idx[d]);
                    full[((b * H + h) * Nq + i) * Nk + j] = mask[n];
                }
    return full;
}

int test_small_mode(void)
{
    const char *v = getenv("CLATTN_TEST_SMALL");
    return v && *v && strcmp(v, "0") != 0;
}

int test_temp_dir_create(char *dir, size_t size, const char *prefix)
{
    const char *base = getenv("TMPDIR");
    if (!base || !*base)
        base = "/tmp";
    int n = snprintf(dir, size, "%s/%sXXXXXX", base, prefix);
    return n > 0 && (size_t)n < size && mkdtemp(dir) ? 0 : -1;
}

void test_temp_dir_remove(const char *dir)
{
    DIR *d = opendir(dir);
    char path[4096];
    for (struct dirent *e; d && (e = readdir(d)) != NULL;)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
            snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
            unlink(path);
        }
    if (d)
        closedir(d);
    rmdir(dir);
}

unsigned char *test_read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        print_error("cannot open %s: %s\n", path, strerror(errno));
        fail();
    }
    unsigned char *buf = NULL;
    size_t len = 0, cap = 0;
    int c;
    while ((c = fgetc(f)) != EOF) {
        if (len == cap) {
            cap = cap ? 2 * cap : 256;
            buf = realloc(buf, cap);
            assert_non_null(buf);
        }
        buf[len++] = (unsigned char)c;
    }
    fclose(f);
    unsigned char *exact = malloc(len ? len : 1);
    assert_non_null(exact);
    if (len)
        memcpy(exact, buf, len);
    free(buf);
    *size = len;
    return exact;
}

void test_write_file(const char *path, const void *bytes, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f) {
        print_error("cannot create %s: %s\n", path, strerror(errno));
        fail();
    }
    assert_int_equal(fwrite(bytes, 1, size, f), size);
    assert_int_equal(fclose(f), 0);
}

const char *test_real_model_or_skip(void)
{
    static char model_dir[4096];
    const char *env = getenv("CLATTN_TEST_MODEL_DIR");
    const char *cache = getenv("CLATTN_MODEL_CACHE");
    const char *home = getenv("HOME");
    if (env && *env)
        snprintf(model_dir, sizeof(model_dir), "%s", env);
    else if (cache && *cache)
        snprintf(model_dir, sizeof(model_dir), "%s/all-MiniLM-L6-v2", cache);
    else
        snprintf(model_dir, sizeof(model_dir), "%s/.cache/clattn/all-MiniLM-L6-v2",
                 home ? home : "");
    char path[4200];
    snprintf(path, sizeof(path), "%s/tokenizer.json", model_dir);
    FILE *f = fopen(path, "rb");
    if (f) {
        fclose(f);
        return model_dir;
    }
    print_message("real model not found at %s: run tools/fetch-model.sh\n", model_dir);
    const char *required = getenv("CLATTN_REQUIRE_REAL_MODEL");
    if (required && strcmp(required, "1") == 0) {
        print_error("CLATTN_REQUIRE_REAL_MODEL=1: the real model is required\n");
        fail();
    }
    skip();
    return NULL;
}
