/*
 * Tuning: device defaults, the per-user cache (round trip, other devices' entries kept, corrupt
 * files and stale or malformed entries ignored with a warning), CLATTN_TUNE over the cache,
 * clattn_context_set_tuning (results unchanged, invalid values refused).
 */
#include "common/test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct fixture {
    char dir[256];
    char cache[320];
} fixture;

static int setup(void **state)
{
    test_require_device();
    fixture *f = calloc(1, sizeof(*f));
    const char *tmp = getenv("TMPDIR");
    snprintf(f->dir, sizeof(f->dir), "%s/clattn-tuning-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(f->dir))
        return -1;
    snprintf(f->cache, sizeof(f->cache), "%s/sub/tuning.json", f->dir);
    setenv("CLATTN_TUNING_CACHE", f->cache, 1);
    unsetenv("CLATTN_TUNE");
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    unlink(f->cache);
    char sub[300];
    snprintf(sub, sizeof(sub), "%s/sub", f->dir);
    rmdir(sub);
    rmdir(f->dir);
    free(f);
    return 0;
}

static void write_file(const char *path, const char *text)
{
    char dir[320];
    snprintf(dir, sizeof(dir), "%s", path);
    *strrchr(dir, '/') = '\0';
    mkdir(dir, 0755);
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
}

static char *read_file(const char *path)
{
    FILE *fp = fopen(path, "r");
    assert_non_null(fp);
    static char text[16384];
    size_t n = fread(text, 1, sizeof(text) - 1, fp);
    text[n] = '\0';
    fclose(fp);
    return text;
}

static clattn_tuning defaults_of(void)
{
    char saved[512] = "";
    const char *cache = getenv("CLATTN_TUNING_CACHE");
    snprintf(saved, sizeof(saved), "%s", cache ? cache : "");
    setenv("CLATTN_TUNING_CACHE", "/nonexistent/clattn/tuning.json", 1);
    clattn_context *ctx = test_context_create(NULL);
    setenv("CLATTN_TUNING_CACHE", saved, 1);
    clattn_tuning t;
    assert_int_equal(clattn_context_get_tuning(ctx, &t), CLATTN_OK);
    clattn_context_destroy(&ctx);
    return t;
}

static void defaults_follow_the_device(void **state)
{
    (void)state;
    clattn_context *ctx = test_context_create(NULL);
    clattn_device_info info;
    clattn_context_device_info(ctx, &info);
    clattn_tuning t = defaults_of();
    assert_int_equal(t.fused_local, info.local_mem_is_global ? 0 : 1);
    assert_true(t.fused_qpw >= 1 && t.fused_tk >= 1 && t.fused_wg >= 1);
    assert_true(t.fused_wg <= info.max_work_group_size);
    assert_int_equal(t.split_keys, CLATTN_SPLIT_KEYS_AUTO);
    assert_int_equal(t.fused_untiled, !t.gemm_kernel); /* tiled where the CPU GEMM is: PoCL */
    /* Groups of one on PoCL's CPUs (it loops over a group's items); SIMD-lane groups on other
     * CPU implementations (llvmpipe). */
    if (info.local_mem_is_global)
        assert_int_equal(t.fused_wg, t.gemm_kernel ? 1 : 32);
    clattn_context_destroy(&ctx);
}

static void cache_round_trip_keeps_other_devices(void **state)
{
    fixture *f = *state;
    write_file(f->cache, "{\"format\": 1, \"entries\": [{\"device\": \"some other device\", "
                         "\"driver\": \"9\", \"library\": \"0.1.0\", \"fused\": {\"local\": 1, "
                         "\"qpw\": 1, \"tk\": 32, \"wg\": 64}}]}");
    clattn_context *ctx = test_context_create(NULL);
    clattn_tuning t;
    assert_int_equal(clattn_context_get_tuning(ctx, &t), CLATTN_OK);
    t.fused_local = 0;
    t.fused_qpw = 3;
    t.fused_tk = 5;
    t.fused_wg = 2;
    t.split_keys = CLATTN_SPLIT_KEYS_NEVER;
    t.fused_untiled = 1;
    static const char gemm[] = "GEMMK=0,MWG=64,NWG=64,KWG=32,MDIMC=8,NDIMC=16,MDIMA=8,NDIMB=16,"
                               "KWI=2,VWM=4,VWN=2,STRM=0,STRN=0,SA=1,SB=1,KREG=1";
    assert_int_equal(clattn_tuning_cache_store(ctx, &t, gemm), CLATTN_OK);
    clattn_context_destroy(&ctx);
    const char *text = read_file(f->cache);
    /* The GEMM parameters are kept in the cache (not in clattn_tuning). */
    assert_non_null(strstr(text, "\"NDIMC\": 16"));
    assert_non_null(strstr(text, "\"VWN\": 2"));
    assert_non_null(strstr(text, "some other device"));
    assert_non_null(strstr(text, CLATTN_VERSION_STRING));
    /* A new context applies the stored entry. */
    ctx = test_context_create(NULL);
    clattn_tuning got;
    assert_int_equal(clattn_context_get_tuning(ctx, &got), CLATTN_OK);
    assert_int_equal(got.fused_local, 0);
    assert_int_equal(got.fused_qpw, 3);
    assert_int_equal(got.fused_tk, 5);
    assert_int_equal(got.fused_wg, 2);
    assert_int_equal(got.split_keys, CLATTN_SPLIT_KEYS_NEVER);
    assert_int_equal(got.fused_untiled, 1);
    /* Storing again replaces this device's entry rather than adding one. */
    assert_int_equal(clattn_tuning_cache_store(ctx, &got, NULL), CLATTN_OK);
    text = read_file(f->cache);
    const char *first = strstr(text, "\"qpw\": 3"), *second = first ? strstr(first + 1, "\"qpw\": 3") : NULL;
    assert_non_null(first);
    assert_null(second);
    /* CLATTN_TUNE wins over the cache. */
    clattn_context_destroy(&ctx);
    setenv("CLATTN_TUNE", "fused_qpw=6,split_keys=1", 1);
    ctx = test_context_create(NULL);
    unsetenv("CLATTN_TUNE");
    assert_int_equal(clattn_context_get_tuning(ctx, &got), CLATTN_OK);
    assert_int_equal(got.fused_qpw, 6);
    assert_int_equal(got.split_keys, CLATTN_SPLIT_KEYS_ALWAYS);
    assert_int_equal(got.fused_tk, 5);
    clattn_context_destroy(&ctx);
    unlink(f->cache);
}

/* Creates a context with `cache_text` in the cache and checks it warns with `needle` and keeps
 * the defaults. */
static void expect_ignored(fixture *f, const char *cache_text, const char *needle)
{
    write_file(f->cache, cache_text);
    test_log log;
    clattn_context *ctx = test_context_create(&log);
    assert_non_null(ctx);
    assert_true(log.count >= 1);
    if (!strstr(log.last, needle))
        print_error("log \"%s\" lacks \"%s\"\n", log.last, needle);
    assert_non_null(strstr(log.last, needle));
    assert_int_equal(log.errors, 0); /* a warning, not an error... */
    assert_string_equal(clattn_last_error(ctx), ""); /* ...and nothing recorded as a failure */
    clattn_tuning got, want = defaults_of();
    assert_int_equal(clattn_context_get_tuning(ctx, &got), CLATTN_OK);
    assert_int_equal(got.fused_qpw, want.fused_qpw);
    assert_int_equal(got.fused_tk, want.fused_tk);
    clattn_context_destroy(&ctx);
    unlink(f->cache);
}

static void bad_caches_are_ignored_with_a_warning(void **state)
{
    fixture *f = *state;
    clattn_context *ctx = test_context_create(NULL);
    clattn_device_info info;
    clattn_context_device_info(ctx, &info);
    clattn_context_destroy(&ctx);
    char text[2048];
    expect_ignored(f, "{not json", "is not valid JSON");
    expect_ignored(f, "{\"entries\": 3}", "has no \"entries\" array");
    snprintf(text, sizeof(text),
             "{\"entries\": [{\"device\": \"%s\", \"driver\": \"%s\", \"library\": \"0.0.1\", "
             "\"fused\": {\"local\": 0, \"qpw\": 2, \"tk\": 2, \"wg\": 1}}]}",
             info.name, info.driver_version);
    expect_ignored(f, text, "made by libclattn 0.0.1");
    snprintf(text, sizeof(text),
             "{\"entries\": [{\"device\": \"%s\", \"driver\": \"%s\", \"library\": \"%s\", "
             "\"fused\": {\"local\": 0, \"qpw\": 0, \"tk\": 2, \"wg\": 1}}]}",
             info.name, info.driver_version, CLATTN_VERSION_STRING);
    expect_ignored(f, text, "is malformed");
    snprintf(text, sizeof(text),
             "{\"entries\": [{\"device\": \"%s\", \"driver\": \"%s\", \"library\": \"%s\", "
             "\"fused\": {\"local\": 0, \"qpw\": 2, \"tk\": 2, \"wg\": 1}, \"xgemm\": {\"MWG\": 64}}]}",
             info.name, info.driver_version, CLATTN_VERSION_STRING);
    expect_ignored(f, text, "is malformed");
}

static void set_tuning_keeps_results_and_refuses_bad_values(void **state)
{
    (void)state;
    clattn_context *ctx = test_context_create(NULL);
    size_t shape[4] = {2, 2, 9, 8};
    float q[288];
    test_fill_uniform(q, 288, 5, -1, 1);
    clattn_tensor *tq = test_tensor_from(ctx, 4, shape, q);
    clattn_tensor *o = test_tensor_from(ctx, 4, shape, NULL);
    assert_int_equal(clattn_sdpa(ctx, tq, tq, tq, o, NULL), CLATTN_OK);
    float *before = test_tensor_to_host(o);
    clattn_tuning t;
    assert_int_equal(clattn_context_get_tuning(ctx, &t), CLATTN_OK);
    t.fused_local = !t.fused_local;
    t.fused_qpw = 2;
    t.fused_tk = 4;
    t.fused_wg = 4;
    assert_int_equal(clattn_context_set_tuning(ctx, &t), CLATTN_OK);
    assert_int_equal(clattn_tensor_fill(o, 0.0f), CLATTN_OK);
    assert_int_equal(clattn_sdpa(ctx, tq, tq, tq, o, NULL), CLATTN_OK);
    float *after = test_tensor_to_host(o);
    assert_close(after, before, 288, 1e-6);
    free(before), free(after);

    clattn_tuning bad = t;
    assert_status_msg(NULL, clattn_context_set_tuning(NULL, &t), CLATTN_ERROR_INVALID_ARGUMENT,
                      "ctx is NULL");
    assert_status_msg(ctx, clattn_context_set_tuning(ctx, NULL), CLATTN_ERROR_INVALID_ARGUMENT,
                      "tuning is NULL");
    bad.fused_qpw = 0;
    assert_status_msg(ctx, clattn_context_set_tuning(ctx, &bad), CLATTN_ERROR_INVALID_ARGUMENT,
                      "fused_qpw is 0");
    bad = t, bad.fused_tk = 300;
    assert_status_msg(ctx, clattn_context_set_tuning(ctx, &bad), CLATTN_ERROR_INVALID_ARGUMENT,
                      "fused_tk is 300");
    bad = t, bad.fused_wg = 3;
    assert_status_msg(ctx, clattn_context_set_tuning(ctx, &bad), CLATTN_ERROR_INVALID_ARGUMENT,
                      "fused_wg is 3");
    bad = t, bad.fused_local = 2;
    assert_status_msg(ctx, clattn_context_set_tuning(ctx, &bad), CLATTN_ERROR_INVALID_ARGUMENT,
                      "fused_local is 2");
    bad = t, bad.fused_untiled = 2;
    assert_status_msg(ctx, clattn_context_set_tuning(ctx, &bad), CLATTN_ERROR_INVALID_ARGUMENT,
                      "fused_untiled is 2 (0 or 1)");
    bad = t, bad.split_keys = 3;
    assert_status_msg(ctx, clattn_context_set_tuning(ctx, &bad), CLATTN_ERROR_INVALID_ARGUMENT,
                      "split_keys is 3 (0, 1 or 2)");
    bad = t, bad.reserved[2] = 1;
    assert_status_msg(ctx, clattn_context_set_tuning(ctx, &bad), CLATTN_ERROR_INVALID_ARGUMENT,
                      "reserved");
    bad = t, bad.fused_tk = 0;
    assert_status_msg(ctx, clattn_tuning_cache_store(ctx, &bad, NULL),
                      CLATTN_ERROR_INVALID_ARGUMENT, "fused_tk is 0");
    assert_status_msg(NULL, clattn_tuning_cache_store(NULL, &t, NULL),
                      CLATTN_ERROR_INVALID_ARGUMENT, "ctx is NULL");
    assert_status_msg(ctx, clattn_tuning_cache_store(ctx, &t, "MWG=64"),
                      CLATTN_ERROR_INVALID_ARGUMENT, "GEMMK is missing");
    assert_status_msg(ctx, clattn_context_set_gemm_parameters(ctx, "MWG=64,MWG=32"),
                      CLATTN_ERROR_INVALID_ARGUMENT, "\"MWG=32\" is not NAME=VALUE");
    assert_status_msg(ctx, clattn_context_set_gemm_parameters(ctx, "NOPE=1"),
                      CLATTN_ERROR_INVALID_ARGUMENT,
                      "clattn_context_set_gemm_parameters: invalid argument: \"NOPE=1\"");
    assert_status_msg(ctx, clattn_context_set_gemm_parameters(ctx, NULL),
                      CLATTN_ERROR_INVALID_ARGUMENT, "parameters is NULL");
    assert_status_msg(NULL, clattn_context_get_tuning(NULL, &t), CLATTN_ERROR_INVALID_ARGUMENT,
                      "ctx is NULL");
    assert_status_msg(ctx, clattn_context_get_tuning(ctx, NULL), CLATTN_ERROR_INVALID_ARGUMENT,
                      "tuning is NULL");
    clattn_tensor_destroy(&tq), clattn_tensor_destroy(&o);
    clattn_context_destroy(&ctx);
}

static void cache_path_follows_the_environment(void **state)
{
    fixture *f = *state;
    assert_string_equal(clattn_tuning_cache_path(), f->cache);
    unsetenv("CLATTN_TUNING_CACHE");
    setenv("XDG_CACHE_HOME", "/x/cache", 1);
    assert_string_equal(clattn_tuning_cache_path(), "/x/cache/clattn/tuning.json");
    unsetenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    if (home && *home) {
        char want[512];
        snprintf(want, sizeof(want), "%s/.cache/clattn/tuning.json", home);
        assert_string_equal(clattn_tuning_cache_path(), want);
    }
    setenv("CLATTN_TUNING_CACHE", f->cache, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(defaults_follow_the_device),
        cmocka_unit_test(cache_round_trip_keeps_other_devices),
        cmocka_unit_test(bad_caches_are_ignored_with_a_warning),
        cmocka_unit_test(set_tuning_keeps_results_and_refuses_bad_values),
        cmocka_unit_test(cache_path_follows_the_environment),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
