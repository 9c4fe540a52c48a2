/* Enumerating OpenCL devices, their facts, and resolving a device spec. */
#include "device.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct device_entry {
    cl_platform_id platform;
    cl_device_id device;
    unsigned platform_index, device_index;
} device_entry;

typedef struct device_list {
    device_entry *entries;
    size_t count;
} device_list;

static void device_list_free(device_list *list)
{
    free(list->entries);
    list->entries = NULL;
    list->count = 0;
}

static clattn_status device_list_get(clattn_context *ctx, device_list *list)
{
    list->entries = NULL;
    list->count = 0;

    cl_uint platform_count = 0;
    cl_int err = clGetPlatformIDs(0, NULL, &platform_count);
    if (err == -1001 /* CL_PLATFORM_NOT_FOUND_KHR */ || (err == CL_SUCCESS && platform_count == 0))
        return clattn__fail(ctx, CLATTN_ERROR_DEVICE_NOT_FOUND,
                            "no OpenCL platform found: install an OpenCL driver (ICD), for a CPU "
                            "e.g. Debian's pocl-opencl-icd");
    if (err != CL_SUCCESS)
        return clattn__fail_cl(ctx, err, "clGetPlatformIDs failed");

    cl_platform_id *platforms = calloc(platform_count, sizeof(*platforms));
    if (!platforms)
        return clattn__fail(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "out of memory listing platforms");
    clattn_status status = CLATTN_OK;
    err = clGetPlatformIDs(platform_count, platforms, NULL);
    if (err != CL_SUCCESS) {
        status = clattn__fail_cl(ctx, err, "clGetPlatformIDs failed");
        goto done;
    }
    for (cl_uint p = 0; p < platform_count; p++) {
        cl_uint n = 0;
        err = clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, 0, NULL, &n);
        if (err == CL_DEVICE_NOT_FOUND || n == 0)
            continue;
        if (err != CL_SUCCESS) {
            status = clattn__fail_cl(ctx, err, "clGetDeviceIDs(platform %u) failed", p);
            goto done;
        }
        cl_device_id *ids = calloc(n, sizeof(*ids));
        device_entry *grown = realloc(list->entries, (list->count + n) * sizeof(*grown));
        if (grown)
            list->entries = grown;
        if (!ids || !grown) {
            free(ids);
            status = clattn__fail(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                                  "out of memory listing devices");
            goto done;
        }
        err = clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, n, ids, NULL);
        if (err != CL_SUCCESS) {
            free(ids);
            status = clattn__fail_cl(ctx, err, "clGetDeviceIDs(platform %u) failed", p);
            goto done;
        }
        for (cl_uint d = 0; d < n; d++)
            list->entries[list->count++] = (device_entry){platforms[p], ids[d], p, d};
        free(ids);
    }
done:
    free(platforms);
    if (status != CLATTN_OK)
        device_list_free(list);
    return status;
}

static void copy_truncated(char *dst, size_t cap, const char *src)
{
    size_t len = strlen(src);
    if (len >= cap)
        len = cap - 1;
    memcpy(dst, src, len);
    dst[len] = '\0';
}

/* Reads a string property of any size into a heap string. */
static clattn_status query_string(clattn_context *ctx, cl_device_id device, cl_platform_id platform,
                                  cl_uint param, const char *what, char **out)
{
    size_t size = 0;
    cl_int err = device ? clGetDeviceInfo(device, param, 0, NULL, &size)
                        : clGetPlatformInfo(platform, param, 0, NULL, &size);
    if (err != CL_SUCCESS)
        return clattn__fail_cl(ctx, err, "querying the device's %s", what);
    char *s = calloc(size + 1, 1);
    if (!s)
        return clattn__fail(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "out of memory querying %s", what);
    err = device ? clGetDeviceInfo(device, param, size, s, NULL)
                 : clGetPlatformInfo(platform, param, size, s, NULL);
    if (err != CL_SUCCESS) {
        free(s);
        return clattn__fail_cl(ctx, err, "querying the device's %s", what);
    }
    *out = s;
    return CLATTN_OK;
}

static clattn_status query_string_into(clattn_context *ctx, cl_device_id device,
                                       cl_platform_id platform, cl_uint param, const char *what,
                                       char *dst)
{
    char *s = NULL;
    clattn_status status = query_string(ctx, device, platform, param, what, &s);
    if (status == CLATTN_OK)
        copy_truncated(dst, CLATTN_DEVICE_STRING_SIZE, s);
    free(s);
    return status;
}

/* A testing knob: CLATTN_MAX_ALLOC_BYTES, a positive number of bytes, lowers the device's maximum
 * allocation (CL_DEVICE_MAX_MEM_ALLOC_SIZE) to it, so that tests reach on a CPU the limits of a
 * GPU whose buffers are capped at a fraction of its memory (tests/test_llm_split.c: weights split
 * over several buffers). It never raises the device's own limit. Unset or empty: no change. */
static clattn_status max_alloc_override(clattn_context *ctx, cl_ulong *max_alloc)
{
    const char *env = getenv("CLATTN_MAX_ALLOC_BYTES");
    if (!env || !*env)
        return CLATTN_OK;
    char *end = NULL;
    errno = 0;
    unsigned long long bytes = strtoull(env, &end, 10);
    if (!isdigit((unsigned char)env[0]) || *end || errno == ERANGE || bytes == 0)
        return clattn__fail(ctx, CLATTN_ERROR_INVALID_ARGUMENT,
                            "CLATTN_MAX_ALLOC_BYTES='%s' is not a positive number of bytes", env);
    if (bytes < *max_alloc)
        *max_alloc = (cl_ulong)bytes;
    return CLATTN_OK;
}

#define QUERY_VALUE(param, var, what)                                                       \
    do {                                                                                    \
        cl_int e_ = clGetDeviceInfo(device, param, sizeof(var), &(var), NULL);              \
        if (e_ != CL_SUCCESS)                                                               \
            return clattn__fail_cl(ctx, e_, "querying the device's %s", what);              \
    } while (0)

clattn_status clattn__query_device_info(clattn_context *ctx, cl_device_id device,
                                        clattn_device_info *info)
{
    memset(info, 0, sizeof(*info));
    cl_platform_id platform;
    QUERY_VALUE(CL_DEVICE_PLATFORM, platform, "platform");
    clattn_status status;
    if ((status = query_string_into(ctx, NULL, platform, CL_PLATFORM_NAME, "platform name",
                                    info->platform_name)) ||
        (status = query_string_into(ctx, device, NULL, CL_DEVICE_NAME, "name", info->name)) ||
        (status = query_string_into(ctx, device, NULL, CL_DEVICE_VENDOR, "vendor", info->vendor)) ||
        (status = query_string_into(ctx, device, NULL, CL_DRIVER_VERSION, "driver version",
                                    info->driver_version)) ||
        (status = query_string_into(ctx, device, NULL, CL_DEVICE_VERSION, "OpenCL version",
                                    info->opencl_version)))
        return status;

    cl_device_type type;
    cl_uint compute_units, clock;
    cl_ulong global_mem, local_mem, max_alloc;
    cl_device_local_mem_type local_type;
    size_t max_wg;
    cl_device_fp_config double_config = 0;
    QUERY_VALUE(CL_DEVICE_TYPE, type, "type");
    QUERY_VALUE(CL_DEVICE_MAX_COMPUTE_UNITS, compute_units, "compute units");
    QUERY_VALUE(CL_DEVICE_MAX_CLOCK_FREQUENCY, clock, "clock frequency");
    QUERY_VALUE(CL_DEVICE_GLOBAL_MEM_SIZE, global_mem, "global memory size");
    QUERY_VALUE(CL_DEVICE_LOCAL_MEM_SIZE, local_mem, "local memory size");
    QUERY_VALUE(CL_DEVICE_LOCAL_MEM_TYPE, local_type, "local memory type");
    QUERY_VALUE(CL_DEVICE_MAX_MEM_ALLOC_SIZE, max_alloc, "maximum allocation");
    if ((status = max_alloc_override(ctx, &max_alloc)))
        return status;
    QUERY_VALUE(CL_DEVICE_MAX_WORK_GROUP_SIZE, max_wg, "maximum work-group size");
    /* Optional before OpenCL 1.2's core double support: absence is not an error. */
    clGetDeviceInfo(device, CL_DEVICE_DOUBLE_FP_CONFIG, sizeof(double_config), &double_config,
                    NULL);

    char *extensions = NULL;
    if ((status = query_string(ctx, device, NULL, CL_DEVICE_EXTENSIONS, "extensions",
                               &extensions)))
        return status;
    info->fp16 = strstr(extensions, "cl_khr_fp16") != NULL;
    info->fp64 = strstr(extensions, "cl_khr_fp64") != NULL || double_config != 0;
    free(extensions);

    info->type = (type & CL_DEVICE_TYPE_GPU)           ? CLATTN_DEVICE_TYPE_GPU
                 : (type & CL_DEVICE_TYPE_CPU)         ? CLATTN_DEVICE_TYPE_CPU
                 : (type & CL_DEVICE_TYPE_ACCELERATOR) ? CLATTN_DEVICE_TYPE_ACCELERATOR
                                                       : CLATTN_DEVICE_TYPE_OTHER;
    info->compute_units = compute_units;
    info->max_clock_mhz = clock;
    info->global_mem_bytes = global_mem;
    info->local_mem_bytes = local_mem;
    info->local_mem_is_global = local_type != CL_LOCAL;
    info->max_alloc_bytes = max_alloc;
    info->max_work_group_size = max_wg;
    return CLATTN_OK;
}

const char *clattn_device_type_name(clattn_device_type type)
{
    switch (type) {
    case CLATTN_DEVICE_TYPE_CPU: return "cpu";
    case CLATTN_DEVICE_TYPE_GPU: return "gpu";
    case CLATTN_DEVICE_TYPE_ACCELERATOR: return "accelerator";
    case CLATTN_DEVICE_TYPE_OTHER: break;
    }
    return "other";
}

clattn_status clattn_list_devices(clattn_device_info *infos, size_t capacity, size_t *count)
{
    CLATTN_CHECK_ARG(NULL, "clattn_list_devices", count, "count is NULL");
    CLATTN_CHECK_ARG(NULL, "clattn_list_devices", infos || capacity == 0,
                     "infos is NULL but capacity is %zu",
                     capacity);
    device_list list;
    clattn_status status = device_list_get(NULL, &list);
    if (status != CLATTN_OK)
        return status;
    for (size_t i = 0; i < list.count && i < capacity; i++) {
        status = clattn__query_device_info(NULL, list.entries[i].device, &infos[i]);
        if (status != CLATTN_OK)
            break;
        infos[i].platform_index = list.entries[i].platform_index;
        infos[i].device_index = list.entries[i].device_index;
    }
    if (status == CLATTN_OK)
        *count = list.count;
    device_list_free(&list);
    return status;
}

/* ---- device specs ---- */

static bool contains_ignoring_case(const char *haystack, const char *needle)
{
    size_t n = strlen(needle);
    for (const char *h = haystack; *h; h++) {
        size_t i = 0;
        while (i < n && h[i] && tolower((unsigned char)h[i]) == tolower((unsigned char)needle[i]))
            i++;
        if (i == n)
            return true;
    }
    return n == 0;
}

static bool equals_ignoring_case(const char *a, const char *b)
{
    while (*a && *b && tolower((unsigned char)*a) == tolower((unsigned char)*b))
        a++, b++;
    return *a == *b;
}

/* Parses "P:D" (two decimal numbers). */
static bool parse_index_spec(const char *spec, unsigned *p, unsigned *d)
{
    char *end;
    if (!isdigit((unsigned char)spec[0]))
        return false;
    unsigned long pv = strtoul(spec, &end, 10);
    if (*end != ':' || !isdigit((unsigned char)end[1]))
        return false;
    unsigned long dv = strtoul(end + 1, &end, 10);
    if (*end != '\0' || pv > 0xffff || dv > 0xffff)
        return false;
    *p = (unsigned)pv;
    *d = (unsigned)dv;
    return true;
}

static cl_device_type device_cl_type(cl_device_id device)
{
    cl_device_type type = 0;
    if (clGetDeviceInfo(device, CL_DEVICE_TYPE, sizeof(type), &type, NULL) != CL_SUCCESS)
        return 0;
    return type;
}

/* Index of the first entry whose type includes `type`, or -1. */
static long first_of_type(const device_list *list, cl_device_type type)
{
    for (size_t i = 0; i < list->count; i++)
        if (device_cl_type(list->entries[i].device) & type)
            return (long)i;
    return -1;
}

static long match_spec(const device_list *list, const char *spec)
{
    if (equals_ignoring_case(spec, "gpu"))
        return first_of_type(list, CL_DEVICE_TYPE_GPU);
    if (equals_ignoring_case(spec, "cpu"))
        return first_of_type(list, CL_DEVICE_TYPE_CPU);
    unsigned p, d;
    if (parse_index_spec(spec, &p, &d)) {
        for (size_t i = 0; i < list->count; i++)
            if (list->entries[i].platform_index == p && list->entries[i].device_index == d)
                return (long)i;
        return -1;
    }
    for (size_t i = 0; i < list->count; i++) {
        char name[CLATTN_DEVICE_STRING_SIZE] = "";
        clGetDeviceInfo(list->entries[i].device, CL_DEVICE_NAME, sizeof(name) - 1, name, NULL);
        if (contains_ignoring_case(name, spec))
            return (long)i;
    }
    return -1;
}

/* "[0:0] name (cpu, platform); [0:1] ..." — for error messages. */
static char *describe_devices(const device_list *list)
{
    size_t cap = 64 + list->count * (3 * CLATTN_DEVICE_STRING_SIZE);
    char *out = malloc(cap);
    if (!out)
        return NULL;
    size_t len = 0;
    out[0] = '\0';
    for (size_t i = 0; i < list->count; i++) {
        clattn_device_info info;
        if (clattn__query_device_info(NULL, list->entries[i].device, &info) != CLATTN_OK)
            copy_truncated(info.name, sizeof(info.name), "(unreadable)");
        int n = snprintf(out + len, cap - len, "%s[%u:%u] %s (%s, %s)", i ? "; " : "",
                         list->entries[i].platform_index, list->entries[i].device_index, info.name,
                         clattn_device_type_name(info.type), info.platform_name);
        if (n < 0 || (size_t)n >= cap - len)
            break;
        len += (size_t)n;
    }
    if (list->count == 0)
        snprintf(out, cap, "none");
    return out;
}

clattn_status clattn__select_device(clattn_context *ctx, const char *spec, cl_device_id *device,
                                    cl_platform_id *platform)
{
    const char *origin = "device spec";
    if (!spec || !*spec) {
        const char *env = getenv("CLATTN_DEVICE");
        if (env && *env) {
            spec = env;
            origin = "CLATTN_DEVICE";
        } else {
            spec = NULL;
        }
    }

    device_list list;
    clattn_status status = device_list_get(ctx, &list);
    if (status != CLATTN_OK)
        return status;

    long index;
    if (spec) {
        index = match_spec(&list, spec);
    } else {
        index = first_of_type(&list, CL_DEVICE_TYPE_GPU);
        if (index < 0)
            index = first_of_type(&list, CL_DEVICE_TYPE_CPU);
        if (index < 0 && list.count > 0)
            index = 0;
    }

    if (index < 0) {
        char *found = describe_devices(&list);
        if (spec)
            status = clattn__fail(ctx, CLATTN_ERROR_DEVICE_NOT_FOUND,
                                  "no OpenCL device matches %s '%s' (forms: gpu, cpu, P:D, or part "
                                  "of a device name); devices found: %s",
                                  origin, spec, found ? found : "(out of memory listing them)");
        else
            status = clattn__fail(ctx, CLATTN_ERROR_DEVICE_NOT_FOUND,
                                  "no OpenCL device found on any platform");
        free(found);
    } else {
        *device = list.entries[index].device;
        *platform = list.entries[index].platform;
    }
    device_list_free(&list);
    return status;
}
