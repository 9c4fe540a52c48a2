/* Device-aware tuning: defaults from device facts, the per-user cache, the CLATTN_TUNE override. */
#include "tuning.h"
#include "context_internal.h"

#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *const clattn__gemm_parameter_names[CLATTN_GEMM_PARAMETER_COUNT] = {
    "GEMMK", "MWG", "NWG", "KWG", "MDIMC", "NDIMC", "MDIMA", "NDIMB",
    "KWI",   "VWM", "VWN", "STRM", "STRN", "SA", "SB", "KREG"};

/* Xgemm parameters examples/tune found best for PoCL's CPU device on a 2-core AVX-512 EPYC (of
 * its candidates, which include those CLBlast's own tuner found there): about 28-30 G
 * multiply-adds/s on the encoder's projection shapes, 3.5x CLBlast's defaults. */
static const size_t pocl_cpu_xgemm[CLATTN_GEMM_PARAMETER_COUNT] = {0,  128, 128, 64, 16, 16,
                                                                   16, 16,  4,   8,  8,  0,
                                                                   0,  1,   1,   1};

static bool is_pow2(size_t n)
{
    return n && !(n & (n - 1));
}

/* What is out of range in a tuning, written into problem; false when nothing is. */
static bool tuning_problem(const clattn_device_info *info, const clattn_tuning *t, char *problem,
                           size_t size)
{
    if (t->fused_local != 0 && t->fused_local != 1)
        snprintf(problem, size, "fused_local is %d (0 or 1)", t->fused_local);
    else if (t->fused_qpw < 1 || t->fused_qpw > 16)
        snprintf(problem, size, "fused_qpw is %zu (1 to 16)", t->fused_qpw);
    else if (t->fused_tk < 1 || t->fused_tk > 256)
        snprintf(problem, size, "fused_tk is %zu (1 to 256)", t->fused_tk);
    else if (!is_pow2(t->fused_wg) || t->fused_wg > info->max_work_group_size)
        snprintf(problem, size, "fused_wg is %zu (a power of two up to %zu)", t->fused_wg,
                 info->max_work_group_size);
    else if (t->gemm_kernel != 0 && t->gemm_kernel != 1)
        snprintf(problem, size, "gemm_kernel is %d (0 or 1)", t->gemm_kernel);
    else if (t->split_keys < CLATTN_SPLIT_KEYS_AUTO || t->split_keys > CLATTN_SPLIT_KEYS_NEVER)
        snprintf(problem, size, "split_keys is %d (0, 1 or 2)", t->split_keys);
    else if (t->fused_untiled != 0 && t->fused_untiled != 1)
        snprintf(problem, size, "fused_untiled is %d (0 or 1)", t->fused_untiled);
    else
        return false;
    return true;
}

clattn_status clattn__tuning_check(clattn_context *ctx, const clattn_device_info *info,
                                   const clattn_tuning *t, const char *function)
{
    char problem[128];
    if (tuning_problem(info, t, problem, sizeof(problem)))
        return clattn__fail_arg(ctx, function, "%s", problem);
    return CLATTN_OK;
}

static void device_defaults(const clattn_device_info *info, clattn_tuning *t,
                            clattn_gemm_params *gemm)
{
    memset(t, 0, sizeof(*t));
    memset(gemm, 0, sizeof(*gemm));
    size_t max_wg = info->max_work_group_size ? info->max_work_group_size : 1;
    bool pocl_cpu = info->type == CLATTN_DEVICE_TYPE_CPU &&
                    strstr(info->platform_name, "Portable Computing Language") != NULL;
    if (info->local_mem_is_global) {
        /* CPUs: no staging; several queries per work-item reuse each key row from cache
         * (examples/tune's best on PoCL: 8 queries, blocks of 8 keys, one work-item groups).
         * PoCL runs a group's work-items in a loop it vectorises itself: groups of one. Other
         * CPU implementations (Mesa's llvmpipe) run work-items as SIMD lanes, where a group of
         * one leaves all lanes but one idle: groups of 32 (tune on llvmpipe, base layer
         * [1, 512]: 5.3 s with groups of 1, 3.3 s with 8 or 32). */
        t->fused_local = 0;
        t->fused_qpw = 8;
        t->fused_tk = 8;
        t->fused_wg = pocl_cpu ? 1 : 32;
    } else {
        /* GPUs: the work-group shares each block of keys and values through __local memory. */
        t->fused_local = 1;
        t->fused_qpw = 1;
        t->fused_tk = 32;
        t->fused_wg = 64;
    }
    while (t->fused_wg > max_wg)
        t->fused_wg /= 2;
    /* PoCL's CPU devices: the library's GEMM (CLBlast's kernels reach a fifth of the peak there;
     * docs/pocl-cpu-performance.md). Not on Mesa's llvmpipe, which runs work-items as SIMD lanes:
     * there a work-item's register tile is the wrong shape. */
    t->gemm_kernel = pocl_cpu;
    /* The micro-tiled attention variant likewise (on llvmpipe it was 2.8x slower than the plain
     * kernel: one work-item's 8 x 16 register tile is the wrong shape for SIMD lanes). */
    t->fused_untiled = !t->gemm_kernel;
    if (pocl_cpu) {
        gemm->present = 1;
        memcpy(gemm->values, pocl_cpu_xgemm, sizeof(pocl_cpu_xgemm));
    }
}

/* ---- the cache file ---- */

static _Thread_local char cache_path_buffer[1024];

const char *clattn_tuning_cache_path(void)
{
    const char *explicit_path = getenv("CLATTN_TUNING_CACHE");
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int n;
    if (explicit_path && *explicit_path)
        n = snprintf(cache_path_buffer, sizeof(cache_path_buffer), "%s", explicit_path);
    else if (xdg && *xdg)
        n = snprintf(cache_path_buffer, sizeof(cache_path_buffer), "%s/clattn/tuning.json", xdg);
    else if (home && *home)
        n = snprintf(cache_path_buffer, sizeof(cache_path_buffer), "%s/.cache/clattn/tuning.json",
                     home);
    else
        return NULL;
    return n > 0 && (size_t)n < sizeof(cache_path_buffer) ? cache_path_buffer : NULL;
}

static bool same_device(json_t *entry, const clattn_device_info *info)
{
    const char *device = json_string_value(json_object_get(entry, "device"));
    const char *driver = json_string_value(json_object_get(entry, "driver"));
    return device && driver && strcmp(device, info->name) == 0 &&
           strcmp(driver, info->driver_version) == 0;
}

static bool read_size(json_t *object, const char *key, size_t *out)
{
    json_t *v = json_object_get(object, key);
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return false;
    *out = (size_t)json_integer_value(v);
    return true;
}

/* Reads an entry into *t and *gemm; false when a field is missing or mistyped. */
static bool entry_tuning(json_t *entry, clattn_tuning *t, clattn_gemm_params *gemm)
{
    json_t *fused = json_object_get(entry, "fused");
    size_t local;
    if (!json_is_object(fused) || !read_size(fused, "local", &local) ||
        !read_size(fused, "qpw", &t->fused_qpw) || !read_size(fused, "tk", &t->fused_tk) ||
        !read_size(fused, "wg", &t->fused_wg))
        return false;
    t->fused_local = local != 0 ? (int)local : 0;
    size_t kernel;
    if (json_object_get(entry, "gemm_kernel")) { /* absent in older entries: the default stays */
        if (!read_size(entry, "gemm_kernel", &kernel))
            return false;
        t->gemm_kernel = kernel > 1 ? 2 : (int)kernel; /* 2: out of range, refused by the check */
    }
    size_t split;
    if (json_object_get(entry, "split_keys")) { /* absent in older entries: the default stays */
        if (!read_size(entry, "split_keys", &split))
            return false;
        t->split_keys = split > 2 ? 3 : (int)split; /* 3: out of range, refused by the check */
    }
    size_t untiled;
    if (json_object_get(entry, "fused_untiled")) { /* absent in older entries */
        if (!read_size(entry, "fused_untiled", &untiled))
            return false;
        t->fused_untiled = untiled > 1 ? 2 : (int)untiled; /* 2: refused by the check */
    }
    json_t *xgemm = json_object_get(entry, "xgemm");
    gemm->present = json_is_object(xgemm);
    for (int i = 0; gemm->present && i < CLATTN_GEMM_PARAMETER_COUNT; i++)
        if (!read_size(xgemm, clattn__gemm_parameter_names[i], &gemm->values[i]))
            return false;
    return true;
}

/* Applies this device's cache entry over *t and *gemm, if there is a valid one. */
static void apply_cache(clattn_context *ctx, const clattn_device_info *info, clattn_tuning *t,
                        clattn_gemm_params *gemm)
{
    const char *path = clattn_tuning_cache_path();
    if (!path)
        return;
    json_error_t err;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &err);
    if (!root) {
        if (access(path, F_OK) == 0)
            clattn__log(ctx, CLATTN_LOG_WARNING,
                        "tuning cache %s is not valid JSON (%s, line %d); ignored", path, err.text,
                        err.line);
        return;
    }
    json_t *entries = json_object_get(root, "entries");
    if (!json_is_array(entries)) {
        clattn__log(ctx, CLATTN_LOG_WARNING, "tuning cache %s has no \"entries\" array; ignored",
                    path);
        json_decref(root);
        return;
    }
    size_t i;
    json_t *entry;
    char problem[128] = "a missing or mistyped field";
    json_array_foreach(entries, i, entry) {
        if (!json_is_object(entry) || !same_device(entry, info))
            continue;
        const char *library = json_string_value(json_object_get(entry, "library"));
        clattn_tuning candidate = *t;
        clattn_gemm_params candidate_gemm = *gemm;
        if (!library || strcmp(library, CLATTN_VERSION_STRING) != 0) {
            clattn__log(ctx, CLATTN_LOG_WARNING,
                        "tuning cache %s: the entry for %s was made by libclattn %s, not %s; "
                        "ignored (run examples/tune again)",
                        path, info->name, library ? library : "(unknown)",
                        CLATTN_VERSION_STRING);
        } else if (!entry_tuning(entry, &candidate, &candidate_gemm) ||
                   tuning_problem(info, &candidate, problem, sizeof(problem))) {
            clattn__log(ctx, CLATTN_LOG_WARNING,
                        "tuning cache %s: the entry for %s is malformed (%s); ignored", path,
                        info->name, problem);
        } else {
            *t = candidate;
            *gemm = candidate_gemm;
            clattn__log(ctx, CLATTN_LOG_INFO, "tuning from %s applied", path);
        }
    }
    json_decref(root);
}

static json_t *entry_json(const clattn_device_info *info, const clattn_tuning *t,
                          const clattn_gemm_params *gemm)
{
    json_t *fused = json_pack("{s:i, s:I, s:I, s:I}", "local", t->fused_local, "qpw",
                              (json_int_t)t->fused_qpw, "tk", (json_int_t)t->fused_tk, "wg",
                              (json_int_t)t->fused_wg);
    json_t *entry = json_pack("{s:s, s:s, s:s, s:o, s:i, s:i, s:i}", "device", info->name,
                              "driver", info->driver_version, "library", CLATTN_VERSION_STRING,
                              "fused", fused, "gemm_kernel", t->gemm_kernel, "split_keys",
                              t->split_keys, "fused_untiled", t->fused_untiled);
    if (entry && gemm->present) {
        json_t *xgemm = json_object();
        for (int i = 0; i < CLATTN_GEMM_PARAMETER_COUNT; i++)
            json_object_set_new(xgemm, clattn__gemm_parameter_names[i],
                                json_integer((json_int_t)gemm->values[i]));
        json_object_set_new(entry, "xgemm", xgemm);
    }
    return entry;
}

/* mkdir -p of the directory holding `path`. */
static void make_parent_dirs(const char *path)
{
    char dir[1024];
    snprintf(dir, sizeof(dir), "%s", path);
    for (char *p = dir + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            mkdir(dir, 0755);
            *p = '/';
        }
}

static clattn_status cache_write(clattn_context *ctx, const clattn_device_info *info,
                                 const clattn_tuning *t, const clattn_gemm_params *gemm,
                                 const char *fn)
{
    const char *path = clattn_tuning_cache_path();
    if (!path)
        return clattn__fail(ctx, CLATTN_ERROR_IO,
                            "%s: no cache path: set CLATTN_TUNING_CACHE, XDG_CACHE_HOME or HOME",
                            fn);
    char target[1024], temp[1100];
    snprintf(target, sizeof(target), "%s", path);
    json_t *root = json_load_file(target, JSON_REJECT_DUPLICATES, NULL);
    if (!root || !json_is_array(json_object_get(root, "entries"))) {
        json_decref(root);
        root = json_pack("{s:i, s:[]}", "format", 1, "entries");
    }
    json_t *entries = json_object_get(root, "entries");
    for (size_t i = json_array_size(entries); i-- > 0;)
        if (same_device(json_array_get(entries, i), info))
            json_array_remove(entries, i);
    json_t *entry = entry_json(info, t, gemm);
    if (!root || !entry || json_array_append_new(entries, entry) != 0) {
        if (!root) /* json_array_append_new took entry over (and freed it) otherwise */
            json_decref(entry);
        json_decref(root);
        return clattn__fail(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory", fn);
    }
    make_parent_dirs(target);
    snprintf(temp, sizeof(temp), "%s.%ld.tmp", target, (long)getpid());
    int rc = json_dump_file(root, temp, JSON_INDENT(2));
    json_decref(root);
    if (rc != 0 || rename(temp, target) != 0) {
        int saved = errno;
        remove(temp);
        return clattn__fail(ctx, CLATTN_ERROR_IO, "%s: writing %s failed: %s", fn, target,
                            strerror(saved));
    }
    return CLATTN_OK;
}

/* ---- CLATTN_TUNE ---- */

/* Applies one "key=value"; false when it is not understood. */
static bool apply_pair(clattn_tuning *t, const char *key, size_t key_len, const char *value)
{
    char *end;
    unsigned long v = strtoul(value, &end, 10);
    if (end == value || (*end && *end != ',') || value[0] == '-')
        return false;
#define KEY(name) (key_len == strlen(name) && strncmp(key, name, key_len) == 0)
    if (KEY("fused_qpw") && v >= 1 && v <= 16)
        t->fused_qpw = v;
    else if (KEY("fused_tk") && v >= 1 && v <= 256)
        t->fused_tk = v;
    else if (KEY("fused_wg") && is_pow2(v) && v <= 1024)
        t->fused_wg = v;
    else if (KEY("fused_local") && v <= 1)
        t->fused_local = (int)v;
    else if (KEY("gemm_kernel") && v <= 1)
        t->gemm_kernel = (int)v;
    else if (KEY("split_keys") && v <= 2)
        t->split_keys = (int)v;
    else if (KEY("fused_untiled") && v <= 1)
        t->fused_untiled = (int)v;
    else
        return false;
#undef KEY
    return true;
}

static void apply_environment(clattn_context *ctx, const clattn_device_info *info,
                              clattn_tuning *t)
{
    const char *env = getenv("CLATTN_TUNE");
    for (const char *p = env; p && *p;) {
        const char *eq = strchr(p, '='), *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (!eq || (comma && eq > comma) || !apply_pair(t, p, (size_t)(eq - p), eq + 1))
            clattn__log(ctx, CLATTN_LOG_WARNING,
                        "CLATTN_TUNE: ignoring \"%.*s\" (keys: fused_qpw 1-16, fused_tk 1-256, "
                        "fused_wg a power of two, fused_local 0/1, gemm_kernel 0/1, "
                        "split_keys 0/1/2, fused_untiled 0/1)",
                        (int)len, p);
        p = comma ? comma + 1 : p + len;
    }
    while (t->fused_wg > info->max_work_group_size && t->fused_wg > 1)
        t->fused_wg /= 2;
}

void clattn__tuning_choose(clattn_context *ctx, const clattn_device_info *info,
                           clattn_tuning *tuning, clattn_gemm_params *gemm)
{
    device_defaults(info, tuning, gemm);
    apply_cache(ctx, info, tuning, gemm);
    apply_environment(ctx, info, tuning);
}

bool clattn__gemm_params_parse(const char *text, clattn_gemm_params *gemm, char *problem,
                               size_t problem_size)
{
    clattn_gemm_params parsed;
    memset(&parsed, 0, sizeof(parsed));
    bool seen[CLATTN_GEMM_PARAMETER_COUNT] = {false};
    for (const char *p = text; *p;) {
        const char *eq = strchr(p, '='), *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        int index = -1;
        for (int i = 0; eq && (!comma || eq < comma) && i < CLATTN_GEMM_PARAMETER_COUNT; i++)
            if ((size_t)(eq - p) == strlen(clattn__gemm_parameter_names[i]) &&
                strncmp(p, clattn__gemm_parameter_names[i], (size_t)(eq - p)) == 0)
                index = i;
        char *end = NULL;
        unsigned long v = index >= 0 && eq[1] != '-' ? strtoul(eq + 1, &end, 10) : 0;
        if (index < 0 || !end || end == eq + 1 || (*end && *end != ',') || seen[index]) {
            snprintf(problem, problem_size, "\"%.*s\" is not NAME=VALUE with a new CLBlast Xgemm "
                     "parameter name", (int)len, p);
            return false;
        }
        seen[index] = true;
        parsed.values[index] = v;
        p = comma ? comma + 1 : p + len;
    }
    for (int i = 0; i < CLATTN_GEMM_PARAMETER_COUNT; i++)
        if (!seen[i]) {
            snprintf(problem, problem_size, "%s is missing (all 16 Xgemm parameters are needed)",
                     clattn__gemm_parameter_names[i]);
            return false;
        }
    parsed.present = 1;
    *gemm = parsed;
    return true;
}

clattn_status clattn_tuning_cache_store(clattn_context *ctx, const clattn_tuning *tuning,
                                        const char *gemm_parameters)
{
    static const char fn[] = "clattn_tuning_cache_store";
    CLATTN_CHECK_ARG(NULL, fn, ctx, "ctx is NULL");
    CLATTN_CHECK_ARG(ctx, fn, tuning, "tuning is NULL");
    clattn_status status = clattn__tuning_check(ctx, &ctx->info, tuning, fn);
    if (status != CLATTN_OK)
        return status;
    clattn_gemm_params gemm;
    memset(&gemm, 0, sizeof(gemm));
    char problem[160];
    if (gemm_parameters && *gemm_parameters &&
        !clattn__gemm_params_parse(gemm_parameters, &gemm, problem, sizeof(problem)))
        return clattn__fail_arg(ctx, fn, "gemm_parameters: %s", problem);
    return cache_write(ctx, &ctx->info, tuning, &gemm, fn);
}
