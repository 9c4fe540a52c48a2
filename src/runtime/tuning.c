/* Device-aware tuning: defaults from device facts, the per-user cache, the CLATTN_TUNE override. */
#include "tuning.h"
#include "context_internal.h"
#include "file_replace.h"
#include "gemm_onednn.h"
#include "host_cpu.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdatomic.h>
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

/* Conservative Xgemm parameters (8 x 8 threads, no local memory, no vectors): the fallback from
 * cached parameters CLBlast cannot build where its own are the default, since CLBlast cannot be
 * given its own back once they are overridden. */
static const size_t conservative_xgemm[CLATTN_GEMM_PARAMETER_COUNT] = {0, 32, 32, 16, 8, 8, 8, 8,
                                                                       2, 1, 1,  0,  0,  0, 0, 1};

static bool is_pow2(size_t n)
{
    return n && !(n & (n - 1));
}

/* ---- CLBlast's Xgemm parameters ---- */

enum { GEMMK, MWG, NWG, KWG, MDIMC, NDIMC, MDIMA, NDIMB, KWI, VWM, VWN, STRM, STRN, SA, SB, KREG };

/* Each parameter's range: tiles and thread counts up to 1024, vector widths OpenCL has, flags. */
static const struct {
    size_t min, max;
    bool pow2;
} xgemm_ranges[CLATTN_GEMM_PARAMETER_COUNT] = {
    [GEMMK] = {0, 1, false},   [MWG] = {1, 1024, false},  [NWG] = {1, 1024, false},
    [KWG] = {1, 1024, false},  [MDIMC] = {1, 1024, false}, [NDIMC] = {1, 1024, false},
    [MDIMA] = {1, 1024, false}, [NDIMB] = {1, 1024, false}, [KWI] = {1, 1024, false},
    [VWM] = {1, 16, true},     [VWN] = {1, 16, true},      [STRM] = {0, 1, false},
    [STRN] = {0, 1, false},    [SA] = {0, 1, false},       [SB] = {0, 1, false},
    [KREG] = {1, 16, true},
};

/* "xgemm.X is v, not a multiple of what" when `value` is not a multiple of `of` (0 never is). */
static bool not_multiple(size_t value, size_t of, int name, const char *what, char *problem,
                         size_t size)
{
    if (of != 0 && value % of == 0)
        return false;
    snprintf(problem, size, "xgemm.%s is %zu, not a multiple of %s = %zu",
             clattn__gemm_parameter_names[name], value, what, of);
    return true;
}

bool clattn__gemm_params_problem(const clattn_device_info *info, const clattn_gemm_params *gemm,
                                 char *problem, size_t size)
{
    const size_t *v = gemm->values;
    for (int i = 0; i < CLATTN_GEMM_PARAMETER_COUNT; i++)
        if (v[i] < xgemm_ranges[i].min || v[i] > xgemm_ranges[i].max ||
            (xgemm_ranges[i].pow2 && !is_pow2(v[i]))) {
            snprintf(problem, size, "xgemm.%s is %zu (%s%zu to %zu)",
                     clattn__gemm_parameter_names[i], v[i],
                     xgemm_ranges[i].pow2 ? "a power of two, " : "", xgemm_ranges[i].min,
                     xgemm_ranges[i].max);
            return true;
        }
    /* The constraints of CLBlast's tuner: outside them the kernel computes wrong results or
     * does not build. */
    size_t threads = v[MDIMC] * v[NDIMC];
    if (not_multiple(v[KWG], v[KWI], KWG, "KWI", problem, size) ||
        not_multiple(v[MWG], v[MDIMC] * v[VWM], MWG, "MDIMC x VWM", problem, size) ||
        not_multiple(v[NWG], v[NDIMC] * v[VWN], NWG, "NDIMC x VWN", problem, size) ||
        not_multiple(v[MWG], v[MDIMA] * v[VWM], MWG, "MDIMA x VWM", problem, size) ||
        not_multiple(v[NWG], v[NDIMB] * v[VWN], NWG, "NDIMB x VWN", problem, size))
        return true;
    if (v[GEMMK] == 0 &&
        (not_multiple(v[KWG], threads / v[MDIMA], KWG, "MDIMC x NDIMC / MDIMA", problem, size) ||
         not_multiple(v[KWG], threads / v[NDIMB], KWG, "MDIMC x NDIMC / NDIMB", problem, size)))
        return true;
    if (v[GEMMK] == 1) {
        if (not_multiple(v[KREG], v[VWN], KREG, "VWN", problem, size))
            return true;
        if (v[MDIMA] != v[MDIMC] || v[NDIMB] != v[NDIMC]) {
            snprintf(problem, size, "xgemm.MDIMA and NDIMB are %zu and %zu, not MDIMC and NDIMC "
                     "(%zu and %zu) as GEMMK 1 needs", v[MDIMA], v[NDIMB], v[MDIMC], v[NDIMC]);
            return true;
        }
    }
    if (threads > info->max_work_group_size) {
        snprintf(problem, size, "xgemm.MDIMC x NDIMC is %zu threads, more than the device's "
                 "work-group size of %zu", threads, info->max_work_group_size);
        return true;
    }
    uint64_t local_bytes = sizeof(float) * (v[SA] * v[KWG] * v[MWG] + v[SB] * v[KWG] * v[NWG]);
    if (local_bytes > info->local_mem_bytes) {
        snprintf(problem, size, "xgemm.SA and SB stage %llu bytes in local memory, more than the "
                 "device's %llu", (unsigned long long)local_bytes,
                 (unsigned long long)info->local_mem_bytes);
        return true;
    }
    return false;
}

/* The largest gemm_kernel the device can use: 2 (oneDNN) on CPU devices in builds with oneDNN
 * (it runs on the host, on the buffers' mapped memory), else 1. */
static int max_gemm_kernel(const clattn_device_info *info)
{
    return clattn__onednn_available() && info->type == CLATTN_DEVICE_TYPE_CPU ? 2 : 1;
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
    else if (t->gemm_kernel < 0 || t->gemm_kernel > max_gemm_kernel(info))
        snprintf(problem, size, "gemm_kernel is %d (0 to %d%s)", t->gemm_kernel,
                 max_gemm_kernel(info),
                 max_gemm_kernel(info) == 2       ? ""
                 : clattn__onednn_available()     ? "; 2, oneDNN, runs on CPU devices only"
                                                  : "; 2 needs a build with oneDNN");
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
    bool pocl_cpu = clattn__is_pocl_cpu(info);
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
    /* CPU devices in builds with oneDNN, where its float32 matmul keeps a row's bytes whatever
     * the row count (brgemm: AVX-512 and newer): its GEMMs on the buffers' host memory
     * (gemm_onednn.h). Else, on PoCL's CPU devices, the library's GEMM (row-invariant; CLBlast's
     * kernels reach a fifth of the peak there; docs/pocl-cpu-performance.md); not on Mesa's
     * llvmpipe, which runs work-items as SIMD lanes: there a work-item's register tile is the
     * wrong shape. */
    t->gemm_kernel =
        max_gemm_kernel(info) == 2 && clattn__onednn_f32_row_invariant() ? 2 : pocl_cpu;
    /* The micro-tiled attention variant on PoCL's CPU devices (on llvmpipe it was 2.8x slower
     * than the plain kernel: one work-item's 8 x 16 register tile is the wrong shape for SIMD
     * lanes). */
    t->fused_untiled = !pocl_cpu;
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

/* Reads the integer `key` of `object` into *out when it lies in [min, max]; otherwise writes
 * into `problem` what is wrong with it, naming it `field`. An absent optional key leaves *out. */
static bool read_field(json_t *object, const char *key, const char *field, json_int_t min,
                       json_int_t max, bool optional, json_int_t *out, char *problem, size_t size)
{
    json_t *v = json_object_get(object, key);
    if (!v && optional)
        return true;
    if (!json_is_integer(v)) {
        snprintf(problem, size, "%s is %s", field, v ? "not an integer" : "missing");
        return false;
    }
    json_int_t n = json_integer_value(v);
    if (n < min || n > max) {
        snprintf(problem, size, "%s is %lld (%lld to %lld)", field, (long long)n, (long long)min,
                 (long long)max);
        return false;
    }
    *out = n;
    return true;
}

/* Reads an entry into *t and *gemm; false with what is wrong in `problem` (the field named as in
 * the file) when a field is missing, mistyped or out of its range. */
static bool entry_tuning(json_t *entry, const clattn_device_info *info, clattn_tuning *t,
                         clattn_gemm_params *gemm, char *problem, size_t size)
{
    json_t *fused = json_object_get(entry, "fused");
    if (!json_is_object(fused)) {
        snprintf(problem, size, "\"fused\" is %s", fused ? "not an object" : "missing");
        return false;
    }
    json_int_t local = t->fused_local, qpw = 0, tk = 0, wg = 0, kernel = t->gemm_kernel,
               split = t->split_keys, untiled = t->fused_untiled;
    json_int_t max_wg = (json_int_t)info->max_work_group_size;
    /* gemm_kernel, split_keys and fused_untiled are absent in older entries: the defaults stay */
    if (!read_field(fused, "local", "fused.local", 0, 1, false, &local, problem, size) ||
        !read_field(fused, "qpw", "fused.qpw", 1, 16, false, &qpw, problem, size) ||
        !read_field(fused, "tk", "fused.tk", 1, 256, false, &tk, problem, size) ||
        !read_field(fused, "wg", "fused.wg", 1, max_wg, false, &wg, problem, size) ||
        !read_field(entry, "gemm_kernel", "gemm_kernel", 0, max_gemm_kernel(info), true, &kernel,
                    problem, size) ||
        !read_field(entry, "split_keys", "split_keys", 0, 2, true, &split, problem, size) ||
        !read_field(entry, "fused_untiled", "fused_untiled", 0, 1, true, &untiled, problem,
                    size))
        return false;
    t->fused_local = (int)local;
    t->fused_qpw = (size_t)qpw;
    t->fused_tk = (size_t)tk;
    t->fused_wg = (size_t)wg;
    t->gemm_kernel = (int)kernel;
    t->split_keys = (int)split;
    t->fused_untiled = (int)untiled;
    json_t *xgemm = json_object_get(entry, "xgemm");
    if (xgemm && !json_is_object(xgemm)) {
        snprintf(problem, size, "\"xgemm\" is not an object");
        return false;
    }
    gemm->present = xgemm != NULL;
    for (int i = 0; gemm->present && i < CLATTN_GEMM_PARAMETER_COUNT; i++) {
        char field[32];
        json_int_t value;
        snprintf(field, sizeof(field), "xgemm.%s", clattn__gemm_parameter_names[i]);
        if (!read_field(xgemm, clattn__gemm_parameter_names[i], field, 0, LLONG_MAX, false,
                        &value, problem, size))
            return false;
        gemm->values[i] = (size_t)value;
    }
    return !gemm->present || !clattn__gemm_params_problem(info, gemm, problem, size);
}

typedef enum cache_state { CACHE_ABSENT, CACHE_LOADED, CACHE_UNUSABLE } cache_state;

/* Loads the cache file at `path` (symbolic links followed), only when it is a regular file:
 * checked before it is opened (opening a device can have effects), opened without blocking (a
 * FIFO would wait forever for a writer) and checked again once open. CACHE_UNUSABLE with the
 * reason in `problem`, after the path in a sentence: not a regular file, unreadable, not JSON. */
static cache_state cache_load(const char *path, json_t **root, char *problem, size_t size)
{
    *root = NULL;
    struct stat st;
    if (stat(path, &st) != 0) {
        if (errno == ENOENT)
            return CACHE_ABSENT;
        snprintf(problem, size, "cannot be read (%s)", strerror(errno));
        return CACHE_UNUSABLE;
    }
    int fd = -1;
    if (S_ISREG(st.st_mode)) {
        fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
        if (fd < 0) {
            snprintf(problem, size, "cannot be read (%s)", strerror(errno));
            return CACHE_UNUSABLE;
        }
        if (fstat(fd, &st) != 0)
            st.st_mode = 0;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(problem, size, "is %s, not a regular file", clattn__file_kind(st.st_mode));
        if (fd >= 0)
            close(fd);
        return CACHE_UNUSABLE;
    }
    json_error_t err;
    *root = json_loadfd(fd, JSON_REJECT_DUPLICATES, &err);
    close(fd);
    if (!*root) {
        snprintf(problem, size, "is not valid JSON (%s, line %d)", err.text, err.line);
        return CACHE_UNUSABLE;
    }
    return CACHE_LOADED;
}

/* Applies this device's cache entry over *t and gemm->params, if there is a valid one. */
static void apply_cache(clattn_context *ctx, const clattn_device_info *info, clattn_tuning *t,
                        clattn_gemm_choice *gemm)
{
    const char *path = clattn_tuning_cache_path();
    if (!path)
        return;
    json_t *root;
    char problem[256];
    cache_state state = cache_load(path, &root, problem, sizeof(problem));
    if (state == CACHE_UNUSABLE)
        clattn__log(ctx, CLATTN_LOG_WARNING, "tuning cache %s %s; ignored", path, problem);
    if (state != CACHE_LOADED)
        return;
    json_t *entries = json_object_get(root, "entries");
    if (!json_is_array(entries)) {
        clattn__log(ctx, CLATTN_LOG_WARNING, "tuning cache %s has no \"entries\" array; ignored",
                    path);
        json_decref(root);
        return;
    }
    size_t i;
    json_t *entry;
    json_array_foreach(entries, i, entry) {
        if (!json_is_object(entry) || !same_device(entry, info))
            continue;
        const char *library = json_string_value(json_object_get(entry, "library"));
        clattn_tuning candidate = *t;
        clattn_gemm_params candidate_gemm = gemm->params;
        snprintf(problem, sizeof(problem), "a missing or mistyped field");
        if (!library || strcmp(library, CLATTN_VERSION_STRING) != 0) {
            clattn__log(ctx, CLATTN_LOG_WARNING,
                        "tuning cache %s: the entry for %s was made by libclattn %s, not %s; "
                        "ignored (run examples/tune again)",
                        path, info->name, library ? library : "(unknown)",
                        CLATTN_VERSION_STRING);
        } else if (!entry_tuning(entry, info, &candidate, &candidate_gemm, problem,
                                 sizeof(problem)) ||
                   tuning_problem(info, &candidate, problem, sizeof(problem))) {
            clattn__log(ctx, CLATTN_LOG_WARNING,
                        "tuning cache %s: the entry for %s is malformed (%s); ignored", path,
                        info->name, problem);
        } else {
            *t = candidate;
            if (candidate_gemm.present) {
                gemm->params = candidate_gemm;
                snprintf(gemm->cache_path, sizeof(gemm->cache_path), "%s", path);
            }
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
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s", path);
    for (char *p = dir + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            mkdir(dir, 0755);
            *p = '/';
        }
}

/* The file to replace for the cache named `path`: `path` itself when it is a regular file or does
 * not exist yet, the file a symbolic link names when that is a regular file. Anything else (a
 * device, a FIFO, a directory) is never replaced: false, with the reason in `problem` after the
 * path in a sentence. */
static bool write_target(const char *path, char *target, size_t size, char *problem,
                         size_t problem_size)
{
    struct stat st;
    if (lstat(path, &st) != 0) {
        if (errno != ENOENT) {
            snprintf(problem, problem_size, "cannot be examined (%s)", strerror(errno));
            return false;
        }
    } else if (S_ISLNK(st.st_mode)) {
        if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) {
            snprintf(problem, problem_size, "is a symbolic link to %s, not to a regular file",
                     errno == ENOENT ? "nothing" : clattn__file_kind(st.st_mode));
            return false;
        }
        char *real = realpath(path, NULL);
        if (!real || strlen(real) >= size) {
            snprintf(problem, problem_size, "cannot be resolved (%s)",
                     real ? "path too long" : strerror(errno));
            free(real);
            return false;
        }
        snprintf(target, size, "%s", real);
        free(real);
        return true;
    } else if (!S_ISREG(st.st_mode)) {
        snprintf(problem, problem_size, "is %s, not a regular file",
                 clattn__file_kind(st.st_mode));
        return false;
    }
    if (strlen(path) >= size) {
        snprintf(problem, problem_size, "is too long a path");
        return false;
    }
    snprintf(target, size, "%s", path);
    return true;
}

/* Creates a new temporary file beside `target` (its name in `temp`), never opening an existing
 * one; -1 with errno set on failure. */
static int create_temp(const char *target, char *temp, size_t size)
{
    static atomic_uint counter;
    for (int attempt = 0; attempt < 100; attempt++) {
        snprintf(temp, size, "%s.%ld.%u.tmp", target, (long)getpid(),
                 atomic_fetch_add(&counter, 1));
        int fd = open(temp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd >= 0 || errno != EEXIST)
            return fd;
    }
    return -1;
}

/* Writes `root` into a temporary file beside `target` and puts it at `target` (a regular file or
 * none, see write_target; clattn__replace_file: also should something else take the name
 * meanwhile): the cache is replaced whole or not at all. */
static clattn_status replace_file(clattn_context *ctx, json_t *root, const char *target,
                                  const char *fn)
{
    char temp[PATH_MAX + 64];
    make_parent_dirs(target);
    int fd = create_temp(target, temp, sizeof(temp));
    if (fd < 0)
        return clattn__fail(ctx, CLATTN_ERROR_IO, "%s: creating a temporary file beside %s failed: "
                            "%s", fn, target, strerror(errno));
    struct stat st;
    if (stat(target, &st) == 0) /* keep the permissions of the file replaced */
        fchmod(fd, st.st_mode & 07777);
    bool written = json_dumpfd(root, fd, JSON_INDENT(2)) == 0 && fsync(fd) == 0;
    int saved = errno;
    if (close(fd) != 0 && written) {
        written = false;
        saved = errno;
    }
    const char *kind = "something else";
    int replaced = written ? clattn__replace_file(temp, target, &kind) : saved ? saved : EIO;
    if (replaced == CLATTN_REPLACE_STRANDED)
        return clattn__fail(ctx, CLATTN_ERROR_IO, "%s: %s took the name %s while the cache was "
                            "written and could not be put back: it lies at %s", fn, kind,
                            target, temp);
    if (replaced != 0)
        unlink(temp);
    if (replaced == CLATTN_REPLACE_REFUSED)
        return clattn__fail(ctx, CLATTN_ERROR_IO, "%s: the tuning cache %s names %s now, which "
                            "took the name while the cache was written: left unchanged", fn,
                            target, kind);
    if (replaced != 0)
        return clattn__fail(ctx, CLATTN_ERROR_IO, "%s: writing %s failed: %s", fn, target,
                            strerror(replaced));
    return CLATTN_OK;
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
    char target[PATH_MAX], problem[256];
    if (!write_target(path, target, sizeof(target), problem, sizeof(problem)))
        return clattn__fail(ctx, CLATTN_ERROR_IO, "%s: the tuning cache %s %s; not replaced", fn,
                            path, problem);
    json_t *root;
    cache_load(target, &root, problem, sizeof(problem)); /* unreadable or not JSON: a new one */
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
    clattn_status status = replace_file(ctx, root, target, fn);
    json_decref(root);
    return status;
}

/* ---- CLATTN_TUNE ---- */

/* Applies one "key=value"; false when it is not understood. */
static bool apply_pair(clattn_tuning *t, const clattn_device_info *info, const char *key,
                       size_t key_len, const char *value)
{
    size_t max_wg = info->max_work_group_size;
    char *end;
    unsigned long v = strtoul(value, &end, 10);
    if (end == value || (*end && *end != ',') || value[0] == '-')
        return false;
#define KEY(name) (key_len == strlen(name) && strncmp(key, name, key_len) == 0)
    if (KEY("fused_qpw") && v >= 1 && v <= 16)
        t->fused_qpw = v;
    else if (KEY("fused_tk") && v >= 1 && v <= 256)
        t->fused_tk = v;
    else if (KEY("fused_wg") && is_pow2(v) && v <= max_wg)
        t->fused_wg = v;
    else if (KEY("fused_local") && v <= 1)
        t->fused_local = (int)v;
    else if (KEY("gemm_kernel") && v <= (unsigned long)max_gemm_kernel(info))
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
        if (!eq || (comma && eq > comma) ||
            !apply_pair(t, info, p, (size_t)(eq - p), eq + 1))
            clattn__log(ctx, CLATTN_LOG_WARNING,
                        "CLATTN_TUNE: ignoring \"%.*s\" (keys: fused_qpw 1-16, fused_tk 1-256, "
                        "fused_wg a power of two up to %zu, fused_local 0/1, gemm_kernel 0-%d, "
                        "split_keys 0/1/2, fused_untiled 0/1)",
                        (int)len, p, info->max_work_group_size, max_gemm_kernel(info));
        p = comma ? comma + 1 : p + len;
    }
}

void clattn__tuning_choose(clattn_context *ctx, const clattn_device_info *info,
                           clattn_tuning *tuning, clattn_gemm_choice *gemm)
{
    memset(gemm, 0, sizeof(*gemm));
    device_defaults(info, tuning, &gemm->params);
    gemm->fallback = gemm->params;
    if (!gemm->fallback.present) {
        gemm->fallback.present = 1;
        memcpy(gemm->fallback.values, conservative_xgemm, sizeof(conservative_xgemm));
    }
    char problem[256];
    if (clattn__gemm_params_problem(info, &gemm->fallback, problem, sizeof(problem)))
        gemm->fallback.present = 0; /* a device too small for them: no fallback */
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
    char problem[256];
    if (gemm_parameters && *gemm_parameters &&
        (!clattn__gemm_params_parse(gemm_parameters, &gemm, problem, sizeof(problem)) ||
         clattn__gemm_params_problem(&ctx->info, &gemm, problem, sizeof(problem))))
        return clattn__fail_arg(ctx, fn, "gemm_parameters: %s", problem);
    return cache_write(ctx, &ctx->info, tuning, &gemm, fn);
}
