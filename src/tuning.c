/* Device-aware tuning: defaults from device facts, the per-user cache, the CLATTN_TUNE override. */
#include "internal.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const xgemm_names[CLATTN_XGEMM_PARAMETER_COUNT] = CLATTN_XGEMM_PARAMETER_NAMES;

/* Xgemm parameters examples/tune found best for PoCL's CPU device on a 2-core AVX-512 EPYC (of
 * its candidates, which include those CLBlast's own tuner found there): about 28-30 G
 * multiply-adds/s on the encoder's projection shapes, 3.5x CLBlast's defaults. */
static const size_t pocl_cpu_xgemm[CLATTN_XGEMM_PARAMETER_COUNT] = {0,  128, 128, 64, 16, 16,
                                                                   16, 16,  4,   8,  8,  0,
                                                                   0,  1,   1,   1};

static bool is_pow2(size_t n)
{
    return n && !(n & (n - 1));
}

/* What is out of range in a tuning, written into problem; false when nothing is. */
static bool tuning_problem(const clattn_context *ctx, const clattn_tuning *t, char *problem,
                           size_t size)
{
    if (t->fused_local != 0 && t->fused_local != 1)
        snprintf(problem, size, "fused_local is %d (0 or 1)", t->fused_local);
    else if (t->fused_qpw < 1 || t->fused_qpw > 16)
        snprintf(problem, size, "fused_qpw is %zu (1 to 16)", t->fused_qpw);
    else if (t->fused_tk < 1 || t->fused_tk > 256)
        snprintf(problem, size, "fused_tk is %zu (1 to 256)", t->fused_tk);
    else if (!is_pow2(t->fused_wg) || t->fused_wg > ctx->info.max_work_group_size)
        snprintf(problem, size, "fused_wg is %zu (a power of two up to %zu)", t->fused_wg,
                 ctx->info.max_work_group_size);
    else if (t->has_xgemm != 0 && t->has_xgemm != 1)
        snprintf(problem, size, "has_xgemm is %d", t->has_xgemm);
    else
        return false;
    return true;
}

/* Records CLATTN_ERROR_INVALID_ARGUMENT for an out-of-range tuning. */
static clattn_status check_tuning(clattn_context *ctx, const clattn_tuning *t, const char *where)
{
    char problem[128];
    if (tuning_problem(ctx, t, problem, sizeof(problem)))
        return clattn__fail(ctx, CLATTN_ERROR_INVALID_ARGUMENT, "%s: invalid argument: %s",
                            where, problem);
    return CLATTN_OK;
}

static void device_defaults(const clattn_context *ctx, clattn_tuning *t)
{
    memset(t, 0, sizeof(*t));
    size_t max_wg = ctx->info.max_work_group_size ? ctx->info.max_work_group_size : 1;
    if (ctx->info.local_mem_is_global) {
        /* CPUs: no staging; several queries per work-item reuse each key row from cache
         * (examples/tune's best on PoCL: 8 queries, blocks of 8 keys, one work-item groups). */
        t->fused_local = 0;
        t->fused_qpw = 8;
        t->fused_tk = 8;
        t->fused_wg = 1;
    } else {
        /* GPUs: the work-group shares each block of keys and values through __local memory. */
        t->fused_local = 1;
        t->fused_qpw = 1;
        t->fused_tk = 32;
        t->fused_wg = 64;
    }
    while (t->fused_wg > max_wg)
        t->fused_wg /= 2;
    if (ctx->info.type == CLATTN_DEVICE_TYPE_CPU &&
        strstr(ctx->info.platform_name, "Portable Computing Language")) {
        t->has_xgemm = 1;
        memcpy(t->xgemm, pocl_cpu_xgemm, sizeof(pocl_cpu_xgemm));
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

static bool same_device(json_t *entry, const clattn_context *ctx)
{
    const char *device = json_string_value(json_object_get(entry, "device"));
    const char *driver = json_string_value(json_object_get(entry, "driver"));
    return device && driver && strcmp(device, ctx->info.name) == 0 &&
           strcmp(driver, ctx->info.driver_version) == 0;
}

static bool read_size(json_t *object, const char *key, size_t *out)
{
    json_t *v = json_object_get(object, key);
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return false;
    *out = (size_t)json_integer_value(v);
    return true;
}

/* Reads an entry into *t; false when a field is missing or mistyped. */
static bool entry_tuning(json_t *entry, clattn_tuning *t)
{
    json_t *fused = json_object_get(entry, "fused");
    size_t local;
    if (!json_is_object(fused) || !read_size(fused, "local", &local) ||
        !read_size(fused, "qpw", &t->fused_qpw) || !read_size(fused, "tk", &t->fused_tk) ||
        !read_size(fused, "wg", &t->fused_wg))
        return false;
    t->fused_local = local != 0 ? (int)local : 0;
    json_t *xgemm = json_object_get(entry, "xgemm");
    t->has_xgemm = json_is_object(xgemm);
    for (int i = 0; t->has_xgemm && i < CLATTN_XGEMM_PARAMETER_COUNT; i++)
        if (!read_size(xgemm, xgemm_names[i], &t->xgemm[i]))
            return false;
    return true;
}

/* Applies this device's cache entry over *t, if there is a valid one. */
static void apply_cache(clattn_context *ctx, clattn_tuning *t)
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
        if (!json_is_object(entry) || !same_device(entry, ctx))
            continue;
        const char *library = json_string_value(json_object_get(entry, "library"));
        clattn_tuning candidate = *t;
        if (!library || strcmp(library, CLATTN_VERSION_STRING) != 0) {
            clattn__log(ctx, CLATTN_LOG_WARNING,
                        "tuning cache %s: the entry for %s was made by libclattn %s, not %s; "
                        "ignored (run examples/tune again)",
                        path, ctx->info.name, library ? library : "(unknown)",
                        CLATTN_VERSION_STRING);
        } else if (!entry_tuning(entry, &candidate) ||
                   tuning_problem(ctx, &candidate, problem, sizeof(problem))) {
            clattn__log(ctx, CLATTN_LOG_WARNING,
                        "tuning cache %s: the entry for %s is malformed (%s); ignored", path,
                        ctx->info.name, problem);
        } else {
            *t = candidate;
            clattn__log(ctx, CLATTN_LOG_INFO, "tuning from %s applied", path);
        }
    }
    json_decref(root);
}

static json_t *entry_json(const clattn_context *ctx, const clattn_tuning *t)
{
    json_t *fused = json_pack("{s:i, s:I, s:I, s:I}", "local", t->fused_local, "qpw",
                              (json_int_t)t->fused_qpw, "tk", (json_int_t)t->fused_tk, "wg",
                              (json_int_t)t->fused_wg);
    json_t *entry = json_pack("{s:s, s:s, s:s, s:o}", "device", ctx->info.name, "driver",
                              ctx->info.driver_version, "library", CLATTN_VERSION_STRING,
                              "fused", fused);
    if (entry && t->has_xgemm) {
        json_t *xgemm = json_object();
        for (int i = 0; i < CLATTN_XGEMM_PARAMETER_COUNT; i++)
            json_object_set_new(xgemm, xgemm_names[i], json_integer((json_int_t)t->xgemm[i]));
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

clattn_status clattn_tuning_cache_store(clattn_context *ctx, const clattn_tuning *t)
{
    static const char fn[] = "clattn_tuning_cache_store";
    CLATTN_CHECK_ARG(NULL, ctx, "%s: invalid argument: ctx is NULL", fn);
    CLATTN_CHECK_ARG(ctx, t, "%s: invalid argument: tuning is NULL", fn);
    clattn_status status = check_tuning(ctx, t, fn);
    if (status != CLATTN_OK)
        return status;
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
        if (same_device(json_array_get(entries, i), ctx))
            json_array_remove(entries, i);
    json_t *entry = entry_json(ctx, t);
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
    else
        return false;
#undef KEY
    return true;
}

static void apply_environment(clattn_context *ctx, clattn_tuning *t)
{
    const char *env = getenv("CLATTN_TUNE");
    for (const char *p = env; p && *p;) {
        const char *eq = strchr(p, '='), *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (!eq || (comma && eq > comma) || !apply_pair(t, p, (size_t)(eq - p), eq + 1))
            clattn__log(ctx, CLATTN_LOG_WARNING,
                        "CLATTN_TUNE: ignoring \"%.*s\" (keys: fused_qpw 1-16, fused_tk 1-256, "
                        "fused_wg a power of two, fused_local 0/1)",
                        (int)len, p);
        p = comma ? comma + 1 : p + len;
    }
    while (t->fused_wg > ctx->info.max_work_group_size && t->fused_wg > 1)
        t->fused_wg /= 2;
}

void clattn__tuning_init(clattn_context *ctx)
{
    clattn_tuning t;
    device_defaults(ctx, &t);
    apply_cache(ctx, &t);
    apply_environment(ctx, &t);
    ctx->tuning = t;
    const char *refused = clattn__gemm_override(ctx);
    if (refused) { /* CLBlast keeps its own parameters: a warning, not an error */
        ctx->tuning.has_xgemm = 0;
        clattn__log(ctx, CLATTN_LOG_WARNING,
                    "CLBlast refused the tuning's Xgemm parameters (%s); continuing with its own",
                    refused);
    }
}

clattn_status clattn_context_get_tuning(const clattn_context *ctx, clattn_tuning *tuning)
{
    CLATTN_CHECK_ARG(NULL, ctx, "clattn_context_get_tuning: invalid argument: ctx is NULL");
    CLATTN_CHECK_ARG((clattn_context *)ctx, tuning,
                     "clattn_context_get_tuning: invalid argument: tuning is NULL");
    *tuning = ctx->tuning;
    return CLATTN_OK;
}

clattn_status clattn_context_set_tuning(clattn_context *ctx, const clattn_tuning *tuning)
{
    static const char fn[] = "clattn_context_set_tuning";
    CLATTN_CHECK_ARG(NULL, ctx, "%s: invalid argument: ctx is NULL", fn);
    CLATTN_CHECK_ARG(ctx, tuning, "%s: invalid argument: tuning is NULL", fn);
    CLATTN_CHECK_ARG(ctx, clattn__reserved_is_zero(tuning->reserved, sizeof(tuning->reserved)),
                     "%s: invalid argument: tuning->reserved is not zero", fn);
    clattn_status status = check_tuning(ctx, tuning, fn);
    if (status != CLATTN_OK)
        return status;
    clattn_tuning previous = ctx->tuning;
    ctx->tuning = *tuning;
    if (tuning->has_xgemm && (status = clattn__gemm_apply_tuning(ctx)) != CLATTN_OK) {
        ctx->tuning = previous;
        return status;
    }
    /* Specialised fused programs follow the new parameters on their next use. */
    clattn_status finished = clattn_context_finish(ctx);
    for (size_t i = 0; i < ctx->fused_count; i++)
        clattn__fused_release(&ctx->fused[i]);
    ctx->fused_count = 0;
    return finished;
}
