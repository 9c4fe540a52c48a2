/* Status codes, OpenCL error names and the last-error messages. */
#include "base/errors.h"
#include "context_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <threads.h>

const char *clattn_strerror(clattn_status status)
{
    switch (status) {
    case CLATTN_OK: return "success";
    case CLATTN_ERROR_INVALID_ARGUMENT: return "invalid argument";
    case CLATTN_ERROR_OUT_OF_HOST_MEMORY: return "out of host memory";
    case CLATTN_ERROR_OUT_OF_DEVICE_MEMORY: return "out of device memory or resources";
    case CLATTN_ERROR_TOO_LARGE: return "size too large";
    case CLATTN_ERROR_DEVICE_NOT_FOUND: return "OpenCL device not found";
    case CLATTN_ERROR_OPENCL: return "OpenCL call failed";
    case CLATTN_ERROR_BUILD_FAILED: return "OpenCL program build failed";
    case CLATTN_ERROR_CLBLAST: return "CLBlast call failed";
    case CLATTN_ERROR_SHAPE_MISMATCH: return "tensor shape mismatch";
    case CLATTN_ERROR_UNSUPPORTED: return "unsupported";
    case CLATTN_ERROR_IO: return "I/O error";
    case CLATTN_ERROR_FORMAT: return "malformed file";
    case CLATTN_ERROR_OUT_OF_RANGE: return "value out of range";
    }
    return "unknown status";
}

const char *clattn_status_name(clattn_status status)
{
    switch (status) {
#define NAME(s) case s: return #s;
    NAME(CLATTN_OK)
    NAME(CLATTN_ERROR_INVALID_ARGUMENT)
    NAME(CLATTN_ERROR_OUT_OF_HOST_MEMORY)
    NAME(CLATTN_ERROR_OUT_OF_DEVICE_MEMORY)
    NAME(CLATTN_ERROR_TOO_LARGE)
    NAME(CLATTN_ERROR_DEVICE_NOT_FOUND)
    NAME(CLATTN_ERROR_OPENCL)
    NAME(CLATTN_ERROR_BUILD_FAILED)
    NAME(CLATTN_ERROR_CLBLAST)
    NAME(CLATTN_ERROR_SHAPE_MISMATCH)
    NAME(CLATTN_ERROR_UNSUPPORTED)
    NAME(CLATTN_ERROR_IO)
    NAME(CLATTN_ERROR_FORMAT)
    NAME(CLATTN_ERROR_OUT_OF_RANGE)
#undef NAME
    }
    return "CLATTN_ERROR_UNKNOWN";
}

const char *clattn__cl_error_name(cl_int err)
{
    switch (err) {
#define NAME(code, value) case value: return #code;
    NAME(CL_SUCCESS, 0)
    NAME(CL_DEVICE_NOT_FOUND, -1)
    NAME(CL_DEVICE_NOT_AVAILABLE, -2)
    NAME(CL_COMPILER_NOT_AVAILABLE, -3)
    NAME(CL_MEM_OBJECT_ALLOCATION_FAILURE, -4)
    NAME(CL_OUT_OF_RESOURCES, -5)
    NAME(CL_OUT_OF_HOST_MEMORY, -6)
    NAME(CL_PROFILING_INFO_NOT_AVAILABLE, -7)
    NAME(CL_MEM_COPY_OVERLAP, -8)
    NAME(CL_IMAGE_FORMAT_MISMATCH, -9)
    NAME(CL_IMAGE_FORMAT_NOT_SUPPORTED, -10)
    NAME(CL_BUILD_PROGRAM_FAILURE, -11)
    NAME(CL_MAP_FAILURE, -12)
    NAME(CL_MISALIGNED_SUB_BUFFER_OFFSET, -13)
    NAME(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST, -14)
    NAME(CL_COMPILE_PROGRAM_FAILURE, -15)
    NAME(CL_LINKER_NOT_AVAILABLE, -16)
    NAME(CL_LINK_PROGRAM_FAILURE, -17)
    NAME(CL_DEVICE_PARTITION_FAILED, -18)
    NAME(CL_KERNEL_ARG_INFO_NOT_AVAILABLE, -19)
    NAME(CL_INVALID_VALUE, -30)
    NAME(CL_INVALID_DEVICE_TYPE, -31)
    NAME(CL_INVALID_PLATFORM, -32)
    NAME(CL_INVALID_DEVICE, -33)
    NAME(CL_INVALID_CONTEXT, -34)
    NAME(CL_INVALID_QUEUE_PROPERTIES, -35)
    NAME(CL_INVALID_COMMAND_QUEUE, -36)
    NAME(CL_INVALID_HOST_PTR, -37)
    NAME(CL_INVALID_MEM_OBJECT, -38)
    NAME(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR, -39)
    NAME(CL_INVALID_IMAGE_SIZE, -40)
    NAME(CL_INVALID_SAMPLER, -41)
    NAME(CL_INVALID_BINARY, -42)
    NAME(CL_INVALID_BUILD_OPTIONS, -43)
    NAME(CL_INVALID_PROGRAM, -44)
    NAME(CL_INVALID_PROGRAM_EXECUTABLE, -45)
    NAME(CL_INVALID_KERNEL_NAME, -46)
    NAME(CL_INVALID_KERNEL_DEFINITION, -47)
    NAME(CL_INVALID_KERNEL, -48)
    NAME(CL_INVALID_ARG_INDEX, -49)
    NAME(CL_INVALID_ARG_VALUE, -50)
    NAME(CL_INVALID_ARG_SIZE, -51)
    NAME(CL_INVALID_KERNEL_ARGS, -52)
    NAME(CL_INVALID_WORK_DIMENSION, -53)
    NAME(CL_INVALID_WORK_GROUP_SIZE, -54)
    NAME(CL_INVALID_WORK_ITEM_SIZE, -55)
    NAME(CL_INVALID_GLOBAL_OFFSET, -56)
    NAME(CL_INVALID_EVENT_WAIT_LIST, -57)
    NAME(CL_INVALID_EVENT, -58)
    NAME(CL_INVALID_OPERATION, -59)
    NAME(CL_INVALID_GL_OBJECT, -60)
    NAME(CL_INVALID_BUFFER_SIZE, -61)
    NAME(CL_INVALID_MIP_LEVEL, -62)
    NAME(CL_INVALID_GLOBAL_WORK_SIZE, -63)
    NAME(CL_INVALID_PROPERTY, -64)
    NAME(CL_INVALID_IMAGE_DESCRIPTOR, -65)
    NAME(CL_INVALID_COMPILER_OPTIONS, -66)
    NAME(CL_INVALID_LINKER_OPTIONS, -67)
    NAME(CL_INVALID_DEVICE_PARTITION_COUNT, -68)
    NAME(CL_INVALID_PIPE_SIZE, -69)
    NAME(CL_INVALID_DEVICE_QUEUE, -70)
    NAME(CL_INVALID_SPEC_ID, -71)
    NAME(CL_MAX_SIZE_RESTRICTION_EXCEEDED, -72)
    NAME(CL_PLATFORM_NOT_FOUND_KHR, -1001)
#undef NAME
    }
    return "unknown OpenCL error";
}

clattn_status clattn__status_from_cl(cl_int err)
{
    switch (err) {
    case CL_SUCCESS: return CLATTN_OK;
    case CL_OUT_OF_HOST_MEMORY: return CLATTN_ERROR_OUT_OF_HOST_MEMORY;
    case CL_MEM_OBJECT_ALLOCATION_FAILURE:
    case CL_OUT_OF_RESOURCES: return CLATTN_ERROR_OUT_OF_DEVICE_MEMORY;
    case CL_BUILD_PROGRAM_FAILURE: return CLATTN_ERROR_BUILD_FAILED;
    case CL_DEVICE_NOT_FOUND:
    case -1001: return CLATTN_ERROR_DEVICE_NOT_FOUND;
    default: return CLATTN_ERROR_OPENCL;
    }
}

/* The thread's last error: a heap string per thread, freed when the thread exits. */
static tss_t thread_error_key;
static once_flag thread_error_once = ONCE_FLAG_INIT;
static bool thread_error_ok;

static void thread_error_init(void)
{
    thread_error_ok = tss_create(&thread_error_key, free) == thrd_success;
}

static const char out_of_memory_message[] = "out of host memory while recording an error message";

static void store_message(char **slot, const char *message)
{
    size_t len = strlen(message);
    char *copy = malloc(len + 1);
    if (copy)
        memcpy(copy, message, len + 1);
    free(*slot);
    *slot = copy; /* NULL on malloc failure: readers then report out_of_memory_message */
}

static void record(clattn_context *ctx, const char *message)
{
    call_once(&thread_error_once, thread_error_init);
    if (thread_error_ok) {
        char *slot = tss_get(thread_error_key);
        store_message(&slot, message);
        tss_set(thread_error_key, slot);
    }
    if (ctx)
        store_message(&ctx->diag.last_error, message);
}

const char *clattn_last_error(const clattn_context *ctx)
{
    if (ctx)
        return ctx->diag.last_error ? ctx->diag.last_error : "";
    call_once(&thread_error_once, thread_error_init);
    if (!thread_error_ok)
        return "";
    const char *message = tss_get(thread_error_key);
    return message ? message : "";
}

/* Formats into a heap string; NULL when out of memory. */
static char *format_message(const char *fmt, va_list args, const char *suffix)
{
    va_list copy;
    va_copy(copy, args);
    int len = vsnprintf(NULL, 0, fmt, copy);
    va_end(copy);
    if (len < 0)
        return NULL;
    size_t suffix_len = suffix ? strlen(suffix) : 0;
    char *buf = malloc((size_t)len + suffix_len + 1);
    if (!buf)
        return NULL;
    vsnprintf(buf, (size_t)len + 1, fmt, args);
    if (suffix)
        memcpy(buf + len, suffix, suffix_len + 1);
    return buf;
}

/* A returned error reaches a log only when someone asked: a log callback, or CLATTN_LOG. The
 * caller has the status and clattn_last_error; the library prints nothing by itself. */
static void log_error(const clattn_context *ctx, const char *text)
{
    if (ctx && ctx->diag.log_callback)
        clattn__log_message(ctx->diag.log_callback, ctx->diag.log_user_data, ctx->diag.log_level,
                            CLATTN_LOG_ERROR, text);
    else if (getenv("CLATTN_LOG"))
        clattn__log_message(NULL, NULL, clattn__log_threshold(CLATTN_LOG_NONE), CLATTN_LOG_ERROR,
                            text);
}

static clattn_status fail_with(clattn_context *ctx, clattn_status status, char *message)
{
    const char *text = message ? message : out_of_memory_message;
    record(ctx, text);
    log_error(ctx, text);
    free(message);
    return status;
}

clattn_status clattn__fail(clattn_context *ctx, clattn_status status, const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    char *message = format_message(fmt, args, NULL);
    va_end(args);
    return fail_with(ctx, status, message);
}

clattn_status clattn__fail_cl(clattn_context *ctx, cl_int err, const char *fmt, ...)
{
    char suffix[96];
    snprintf(suffix, sizeof(suffix), ": %s (%d)", clattn__cl_error_name(err), (int)err);
    va_list args;
    va_start(args, fmt);
    char *message = format_message(fmt, args, suffix);
    va_end(args);
    return fail_with(ctx, clattn__status_from_cl(err), message);
}

clattn_status clattn__fail_in(const char *function, const char *where, clattn_status status,
                              const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    char *detail = format_message(fmt, args, NULL);
    va_end(args);
    clattn_status result = clattn__fail(NULL, status, "%s: %s: %s", function, where,
                                        detail ? detail : out_of_memory_message);
    free(detail);
    return result;
}

clattn_status clattn__fail_arg(clattn_context *ctx, const char *function, const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    char *detail = format_message(fmt, args, NULL);
    va_end(args);
    clattn_status result = clattn__fail(ctx, CLATTN_ERROR_INVALID_ARGUMENT,
                                        "%s: invalid argument: %s", function,
                                        detail ? detail : out_of_memory_message);
    free(detail);
    return result;
}
