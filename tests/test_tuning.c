/*
 * Tuning: device defaults, the per-user cache (round trip, other devices' entries kept, corrupt
 * files and stale or malformed entries ignored with a warning naming the field, FIFOs and devices
 * never opened or replaced), CLATTN_TUNE over the cache, clattn_context_set_tuning (results
 * unchanged, invalid values refused), cached GEMM parameters CLBlast cannot build.
 */
#include "common/test_util.h"

#include "runtime/context_internal.h"
#include "runtime/gemm.h"
#include "runtime/tuning.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
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
    bool pocl_cpu = info.type == CLATTN_DEVICE_TYPE_CPU &&
                    strstr(info.platform_name, "Portable Computing Language") != NULL;
    assert_int_equal(t.fused_untiled, !pocl_cpu); /* the micro-tiled attention: PoCL's CPUs */
    /* Groups of one on PoCL's CPUs (it loops over a group's items); SIMD-lane groups on other
     * CPU implementations (llvmpipe). */
    if (info.local_mem_is_global)
        assert_int_equal(t.fused_wg, pocl_cpu ? 1 : 32);
    /* The GEMM: oneDNN (2) on CPU devices where this build has it, else the library's CPU GEMM
     * (1) on PoCL's CPUs and CLBlast (0) elsewhere. */
    if (info.type != CLATTN_DEVICE_TYPE_CPU)
        assert_int_equal(t.gemm_kernel, 0);
    else if (t.gemm_kernel != 2)
        assert_int_equal(t.gemm_kernel, pocl_cpu ? 1 : 0);
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
    if (!strstr(log.last, needle) || !strstr(log.last, f->cache))
        print_error("log \"%s\" lacks \"%s\" or the cache's path\n", log.last, needle);
    assert_non_null(strstr(log.last, needle));
    assert_non_null(strstr(log.last, f->cache));
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

/* An entry for this device whose fused part is `fused` and whose xgemm part is `xgemm` (NULL:
 * none). */
static void entry_text(char *text, size_t size, const clattn_device_info *info, const char *fused,
                       const char *xgemm)
{
    snprintf(text, size,
             "{\"entries\": [{\"device\": \"%s\", \"driver\": \"%s\", \"library\": \"%s\", "
             "\"fused\": %s, \"gemm_kernel\": 0%s%s}]}",
             info->name, info->driver_version, CLATTN_VERSION_STRING, fused,
             xgemm ? ", \"xgemm\": " : "", xgemm ? xgemm : "");
}

/* Every numeric field is checked against its range (2^62 once passed as 0), and CLBlast's
 * parameters against CLBlast's constraints: the warning names the field and the cache. */
static void out_of_range_fields_are_named(void **state)
{
    fixture *f = *state;
    clattn_context *ctx = test_context_create(NULL);
    clattn_device_info info;
    clattn_context_device_info(ctx, &info);
    clattn_context_destroy(&ctx);
    static const char fused[] = "{\"local\": 0, \"qpw\": 2, \"tk\": 2, \"wg\": 1}";
    char text[2048], needle[128], big_wg[128];
    entry_text(text, sizeof(text), &info,
               "{\"local\": 4611686018427387904, \"qpw\": 2, \"tk\": 2, \"wg\": 1}", NULL);
    expect_ignored(f, text, "fused.local is 4611686018427387904 (0 to 1)");
    entry_text(text, sizeof(text), &info,
               "{\"local\": 0, \"qpw\": 2, \"tk\": 4611686018427387904, \"wg\": 1}", NULL);
    expect_ignored(f, text, "fused.tk is 4611686018427387904 (1 to 256)");
    snprintf(big_wg, sizeof(big_wg), "{\"local\": 0, \"qpw\": 2, \"tk\": 2, \"wg\": %zu}",
             info.max_work_group_size * 2);
    entry_text(text, sizeof(text), &info, big_wg, NULL);
    snprintf(needle, sizeof(needle), "fused.wg is %zu (1 to %zu)", info.max_work_group_size * 2,
             info.max_work_group_size);
    expect_ignored(f, text, needle);
    entry_text(text, sizeof(text), &info, fused, NULL);
    char *split = strstr(text, "\"gemm_kernel\": 0");
    memcpy(split, "\"split_keys\": 90", strlen("\"split_keys\": 90")); /* same length */
    expect_ignored(f, text, "split_keys is 90 (0 to 2)");
    static const char *const xgemm[][2] = {
        {"{\"GEMMK\": 0, \"MWG\": 4611686018427387904, \"NWG\": 64, \"KWG\": 32, \"MDIMC\": 8, "
         "\"NDIMC\": 8, \"MDIMA\": 8, \"NDIMB\": 8, \"KWI\": 2, \"VWM\": 1, \"VWN\": 1, "
         "\"STRM\": 0, \"STRN\": 0, \"SA\": 0, \"SB\": 0, \"KREG\": 1}",
         "xgemm.MWG is 4611686018427387904 (1 to 1024)"},
        /* No 3-wide vectors in OpenCL C: CLBlast's kernel does not build. */
        {"{\"GEMMK\": 0, \"MWG\": 96, \"NWG\": 64, \"KWG\": 32, \"MDIMC\": 8, "
         "\"NDIMC\": 8, \"MDIMA\": 8, \"NDIMB\": 8, \"KWI\": 2, \"VWM\": 3, \"VWN\": 1, "
         "\"STRM\": 0, \"STRN\": 0, \"SA\": 0, \"SB\": 0, \"KREG\": 1}",
         "xgemm.VWM is 3 (a power of two, 1 to 16)"},
        /* Builds, and computes wrong results: tiles must split into whole vectors per thread. */
        {"{\"GEMMK\": 0, \"MWG\": 100, \"NWG\": 64, \"KWG\": 32, \"MDIMC\": 8, "
         "\"NDIMC\": 8, \"MDIMA\": 8, \"NDIMB\": 8, \"KWI\": 2, \"VWM\": 1, \"VWN\": 1, "
         "\"STRM\": 0, \"STRN\": 0, \"SA\": 0, \"SB\": 0, \"KREG\": 1}",
         "xgemm.MWG is 100, not a multiple of MDIMC x VWM = 8"},
        {"{\"GEMMK\": 0, \"MWG\": 64, \"NWG\": 64, \"KWG\": 32, \"MDIMC\": 8, "
         "\"NDIMC\": 8, \"MDIMA\": 8, \"NDIMB\": 8, \"KWI\": 2, \"VWM\": 1, \"VWN\": 1, "
         "\"STRM\": 0, \"STRN\": 0, \"SA\": 0, \"SB\": 0, \"KREG\": -1}",
         "xgemm.KREG is -1 (0 to"},
    };
    for (size_t i = 0; i < sizeof(xgemm) / sizeof(xgemm[0]); i++) {
        entry_text(text, sizeof(text), &info, fused, xgemm[i][0]);
        expect_ignored(f, text, xgemm[i][1]);
    }
    /* The library's own defaults for PoCL pass the same checks. */
    clattn_gemm_choice choice;
    clattn_tuning t;
    ctx = test_context_create(NULL);
    clattn__tuning_choose(ctx, &info, &t, &choice);
    char problem[256] = "";
    assert_false(choice.params.present &&
                 clattn__gemm_params_problem(&info, &choice.params, problem, sizeof(problem)));
    assert_true(choice.fallback.present);
    assert_false(clattn__gemm_params_problem(&info, &choice.fallback, problem, sizeof(problem)));
    clattn_context_destroy(&ctx);
}

/* One limit for fused_wg, the device's work-group size, in CLATTN_TUNE as in the cache. */
static void tune_variable_takes_work_groups_up_to_the_device_limit(void **state)
{
    (void)state;
    clattn_context *ctx = test_context_create(NULL);
    clattn_device_info info;
    clattn_context_device_info(ctx, &info);
    clattn_context_destroy(&ctx);
    size_t max_wg = 1;
    while (max_wg * 2 <= info.max_work_group_size)
        max_wg *= 2;
    char tune[64], needle[64];
    snprintf(tune, sizeof(tune), "fused_wg=%zu", max_wg);
    setenv("CLATTN_TUNE", tune, 1);
    test_log log;
    ctx = test_context_create(&log);
    clattn_tuning got;
    assert_int_equal(clattn_context_get_tuning(ctx, &got), CLATTN_OK);
    assert_int_equal(got.fused_wg, max_wg);
    assert_int_equal(log.count, 0);
    clattn_context_destroy(&ctx);
    snprintf(tune, sizeof(tune), "fused_wg=%zu", max_wg * 2);
    setenv("CLATTN_TUNE", tune, 1);
    ctx = test_context_create(&log);
    unsetenv("CLATTN_TUNE");
    snprintf(needle, sizeof(needle), "fused_wg a power of two up to %zu",
             info.max_work_group_size);
    assert_non_null(strstr(log.last, tune));
    assert_non_null(strstr(log.last, needle));
    clattn_context_destroy(&ctx);
}

/* A FIFO, a device or a directory as the cache: never opened for reading (a FIFO blocked every
 * context creation forever) nor replaced (a device node was once replaced by a regular file).
 * alarm(): without the fix the test dies instead of hanging. */
static void special_files_as_cache_are_ignored_and_never_replaced(void **state)
{
    fixture *f = *state;
    char fifo[400], device[400];
    snprintf(fifo, sizeof(fifo), "%s/fifo.json", f->dir);
    snprintf(device, sizeof(device), "%s/full.json", f->dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    /* The numbers of /dev/full; mknod needs root (CI runs as root). */
    bool have_device = mknod(device, S_IFCHR | 0600, makedev(1, 7)) == 0;
    if (!have_device)
        print_message("mknod %s: %s: the character-device case is not run\n", device,
                      strerror(errno));
    const char *const paths[] = {fifo, f->dir, have_device ? device : NULL};
    const char *const kinds[] = {"a FIFO", "a directory", "a character device"};
    const mode_t types[] = {S_IFIFO, S_IFDIR, S_IFCHR};
    clattn_tuning want = defaults_of();
    for (int i = 0; i < 3; i++) {
        if (!paths[i])
            continue;
        setenv("CLATTN_TUNING_CACHE", paths[i], 1);
        test_log log;
        alarm(120);
        clattn_context *ctx = test_context_create(&log);
        alarm(0);
        assert_non_null(ctx);
        print_message("%s\n", log.last);
        assert_non_null(strstr(log.last, paths[i]));
        assert_non_null(strstr(log.last, kinds[i]));
        assert_non_null(strstr(log.last, "not a regular file; ignored"));
        clattn_tuning got;
        assert_int_equal(clattn_context_get_tuning(ctx, &got), CLATTN_OK);
        assert_int_equal(got.fused_qpw, want.fused_qpw);
        assert_int_equal(got.fused_wg, want.fused_wg);
        alarm(120);
        clattn_status status = clattn_tuning_cache_store(ctx, &got, NULL);
        alarm(0);
        assert_int_equal(status, CLATTN_ERROR_IO);
        print_message("%s\n", clattn_last_error(ctx));
        assert_non_null(strstr(clattn_last_error(ctx), paths[i]));
        assert_non_null(strstr(clattn_last_error(ctx), "not a regular file; not replaced"));
        struct stat st;
        assert_int_equal(lstat(paths[i], &st), 0);
        assert_int_equal(st.st_mode & S_IFMT, types[i]);
        clattn_context_destroy(&ctx);
    }
    unlink(fifo);
    unlink(device);
    setenv("CLATTN_TUNING_CACHE", f->cache, 1);
}

/* A symbolic link to a regular file: the file it names is replaced, the link kept. */
static void cache_behind_a_symbolic_link_is_written_through_it(void **state)
{
    fixture *f = *state;
    char link_path[400];
    snprintf(link_path, sizeof(link_path), "%s/link.json", f->dir);
    write_file(f->cache, "{\"format\": 1, \"entries\": []}");
    assert_int_equal(symlink(f->cache, link_path), 0);
    setenv("CLATTN_TUNING_CACHE", link_path, 1);
    clattn_context *ctx = test_context_create(NULL);
    clattn_tuning t;
    assert_int_equal(clattn_context_get_tuning(ctx, &t), CLATTN_OK);
    t.fused_qpw = 3;
    assert_int_equal(clattn_tuning_cache_store(ctx, &t, NULL), CLATTN_OK);
    clattn_context_destroy(&ctx);
    struct stat st;
    assert_int_equal(lstat(link_path, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    assert_non_null(strstr(read_file(f->cache), "\"qpw\": 3"));
    unlink(link_path);
    unlink(f->cache);
    setenv("CLATTN_TUNING_CACHE", f->cache, 1);
}

/* Cached Xgemm parameters CLBlast cannot build (VWM 3: no 3-wide vectors; the checks of the cache
 * refuse it, so it is applied here as context creation would apply a cache's): the GEMM falls
 * back to the defaults with a warning naming the cache, and succeeds. The caller's own parameters
 * (clattn_context_set_gemm_parameters) get no fallback. */
static void unbuildable_cached_gemm_parameters_fall_back_to_the_defaults(void **state)
{
    fixture *f = *state;
    test_log log;
    clattn_context *ctx = test_context_create(&log);
    clattn_device_info info;
    clattn_context_device_info(ctx, &info);
    clattn_gemm_choice choice;
    clattn_tuning t;
    clattn__tuning_choose(ctx, &info, &t, &choice);
    assert_true(choice.fallback.present);
    static const size_t unbuildable[CLATTN_GEMM_PARAMETER_COUNT] = {0, 96, 64, 32, 8, 8, 8, 8,
                                                                    2, 3, 1, 0, 0, 0, 0, 1};
    choice.params.present = 1;
    memcpy(choice.params.values, unbuildable, sizeof(unbuildable));
    snprintf(choice.cache_path, sizeof(choice.cache_path), "%s", f->cache);
    assert_null(clattn__gemm_apply_chosen(ctx->device, &choice));

    /* Large enough for CLBlast's tiled kernel (smaller GEMMs take its direct one). */
    enum { N = 512 };
    size_t shape[2] = {N, N};
    float *a = malloc(sizeof(float) * N * N), *b = malloc(sizeof(float) * N * N);
    float *want = calloc(N * N, sizeof(float));
    test_fill_uniform(a, N * N, 1, -1, 1);
    test_fill_uniform(b, N * N, 2, -1, 1);
    for (size_t i = 0; i < N; i++)
        for (size_t j = 0; j < N; j++)
            for (size_t k = 0; k < N; k++)
                want[i * N + j] += a[i * N + k] * b[j * N + k];
    clattn_tensor *ta = test_tensor_from(ctx, 2, shape, a), *tb = test_tensor_from(ctx, 2, shape, b);
    clattn_tensor *tc = test_tensor_from(ctx, 2, shape, NULL);
    cl_mem ma = clattn_tensor_buffer(ta), mb = clattn_tensor_buffer(tb), mc = clattn_tensor_buffer(tc);
    log.count = 0;
    assert_int_equal(clattn__gemm_nt(ctx, CLATTN_OP_OTHER, N, N, N, ma, 0, N, mb, 0, N, 0.0f, mc,
                                     0, N),
                     CLATTN_OK);
    print_message("%s\n", log.last);
    assert_int_equal(log.count, 1);
    assert_non_null(strstr(log.last, f->cache));
    assert_non_null(strstr(log.last, "CLBlastOpenCLBuildProgramFailure"));
    assert_non_null(strstr(log.last, "using the defaults"));
    float *got = test_tensor_to_host(tc);
    assert_close(got, want, N * N, 1e-3);
    free(got);

    /* The caller's own unbuildable parameters: CLBlast's error, no fallback, no cache named. */
    char text[512];
    size_t used = 0;
    for (int i = 0; i < CLATTN_GEMM_PARAMETER_COUNT; i++)
        used += (size_t)snprintf(text + used, sizeof(text) - used, "%s%s=%zu", i ? "," : "",
                                 clattn__gemm_parameter_names[i], unbuildable[i]);
    /* clattn_context_set_gemm_parameters refuses them up front, naming the parameter; applied
     * anyway (the internal entry, as a caller's own that CLBlast cannot build would be): */
    assert_status_msg(ctx, clattn_context_set_gemm_parameters(ctx, text),
                      CLATTN_ERROR_INVALID_ARGUMENT, "VWM");
    clattn_gemm_params own = {0};
    own.present = 1;
    memcpy(own.values, unbuildable, sizeof(unbuildable));
    assert_null(clattn__gemm_apply_params(ctx->device, &own));
    assert_status_msg(ctx,
                      clattn__gemm_nt(ctx, CLATTN_OP_OTHER, N, N, N, ma, 0, N, mb, 0, N, 0.0f, mc,
                                      0, N),
                      CLATTN_ERROR_CLBLAST, "CLBlastOpenCLBuildProgramFailure");
    assert_null(strstr(clattn_last_error(ctx), f->cache));
    assert_null(clattn__gemm_apply_params(ctx->device, &choice.fallback));
    clattn_tensor_destroy(&ta), clattn_tensor_destroy(&tb), clattn_tensor_destroy(&tc);
    free(a), free(b), free(want);
    clattn_context_destroy(&ctx);
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
        cmocka_unit_test(out_of_range_fields_are_named),
        cmocka_unit_test(tune_variable_takes_work_groups_up_to_the_device_limit),
        cmocka_unit_test(special_files_as_cache_are_ignored_and_never_replaced),
        cmocka_unit_test(cache_behind_a_symbolic_link_is_written_through_it),
        cmocka_unit_test(unbuildable_cached_gemm_parameters_fall_back_to_the_defaults),
        cmocka_unit_test(set_tuning_keeps_results_and_refuses_bad_values),
        cmocka_unit_test(cache_path_follows_the_environment),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
