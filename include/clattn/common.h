/*
 * libclattn — Transformer attention on any OpenCL 1.2 device.
 *
 * common.h: what every other header needs: the export macro, the status codes, the log
 * callback and the version. Include <clattn/clattn.h> rather than this file.
 */
#ifndef CLATTN_COMMON_H
#define CLATTN_COMMON_H

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#include <stddef.h>
#include <stdint.h>

#include "clattn/version.h"

#if defined(CLATTN_BUILDING) && defined(__GNUC__)
#define CLATTN_API __attribute__((visibility("default")))
#else
#define CLATTN_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Every fallible call returns a clattn_status: CLATTN_OK (0) on success, a negative code on
 * failure. After a failure, clattn_last_error() gives a message that names the argument, file or
 * OpenCL/CLBlast call at fault. On every error path the library releases what it allocated and
 * leaves its outputs untouched unless the function's documentation says otherwise; it never
 * exits or aborts the process.
 */
typedef enum clattn_status {
    CLATTN_OK = 0,
    /* An argument is NULL, zero, out of range or inconsistent with another. */
    CLATTN_ERROR_INVALID_ARGUMENT = -1,
    /* malloc failed, or OpenCL reported CL_OUT_OF_HOST_MEMORY. */
    CLATTN_ERROR_OUT_OF_HOST_MEMORY = -2,
    /* The device could not allocate a buffer or ran out of resources. */
    CLATTN_ERROR_OUT_OF_DEVICE_MEMORY = -3,
    /* A size overflows, or exceeds the device's maximum allocation or the workspace limit. */
    CLATTN_ERROR_TOO_LARGE = -4,
    /* No OpenCL platform/device, or none matches the device spec (the message lists them). */
    CLATTN_ERROR_DEVICE_NOT_FOUND = -5,
    /* An OpenCL call failed; the message names the call and the CL error (e.g. CL_INVALID_VALUE). */
    CLATTN_ERROR_OPENCL = -6,
    /* A kernel program failed to compile; the message holds the complete build log. */
    CLATTN_ERROR_BUILD_FAILED = -7,
    /* A CLBlast routine failed; the message names the routine and CLBlast's status code. */
    CLATTN_ERROR_CLBLAST = -8,
    /* Tensor shapes do not agree with each other or with a layer's configuration. */
    CLATTN_ERROR_SHAPE_MISMATCH = -9,
    /* A valid request the library (or this device) does not support, e.g. reading a strided view. */
    CLATTN_ERROR_UNSUPPORTED = -10,
    /* A file could not be opened, read or written. */
    CLATTN_ERROR_IO = -11,
    /* A file's contents are malformed (bad header, truncated data, unknown dtype...). */
    CLATTN_ERROR_FORMAT = -12,
    /* A value is outside its allowed range (e.g. a token id not in the embedding table). */
    CLATTN_ERROR_OUT_OF_RANGE = -13,
} clattn_status;

/* A short description of a status code ("invalid argument"); never NULL. */
CLATTN_API const char *clattn_strerror(clattn_status status);

/* The symbolic name of a status code ("CLATTN_ERROR_INVALID_ARGUMENT"); never NULL. */
CLATTN_API const char *clattn_status_name(clattn_status status);

typedef enum clattn_log_level {
    CLATTN_LOG_DEBUG = 0,
    CLATTN_LOG_INFO = 1,
    CLATTN_LOG_WARNING = 2,
    CLATTN_LOG_ERROR = 3,
    CLATTN_LOG_NONE = 4, /* as a threshold: log nothing */
} clattn_log_level;

/*
 * Receives the library's log messages (one complete message per call, no trailing newline).
 * Called on the thread that made the library call. `user_data` is the pointer given in the
 * context params.
 */
typedef void (*clattn_log_callback)(void *user_data, clattn_log_level level, const char *message);

/* The library's version: CLATTN_VERSION_MAJOR * 10000 + MINOR * 100 + PATCH. */
CLATTN_API unsigned clattn_version(void);
/* The library's version as "MAJOR.MINOR.PATCH". */
CLATTN_API const char *clattn_version_string(void);

#ifdef __cplusplus
}
#endif

#endif /* CLATTN_COMMON_H */
