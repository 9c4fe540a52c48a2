/*
 * Diagnostics: recording failures (the per-context and per-thread last error) and logging.
 * Every other module reports through these; they call nothing above them.
 */
#ifndef CLATTN_ERRORS_H
#define CLATTN_ERRORS_H

#include "clattn/context.h"

#include <stdarg.h>

#include "sizes.h"

/* Where a context's diagnostics go: part of the context, read and written only by error.c and
 * log.c. */
typedef struct clattn_diagnostics {
    clattn_log_callback log_callback; /* NULL: stderr */
    void *log_user_data;
    clattn_log_level log_level;       /* messages below it are dropped */
    char *last_error;                 /* heap; NULL when there was no failure yet */
} clattn_diagnostics;

/* Records a failure: formats the message, stores it as the context's and the thread's last error,
 * logs it at debug level (the caller gets the status and clattn_last_error; the library does not
 * print errors unless asked), and returns `status` so callers can `return clattn__fail(...)`. */
clattn_status clattn__fail(clattn_context *ctx, clattn_status status, const char *fmt, ...)
    CLATTN_PRINTF(3, 4);
/* Same, for a failed OpenCL call: appends ": CL_NAME (code)" and picks the status from the code. */
clattn_status clattn__fail_cl(clattn_context *ctx, cl_int err, const char *fmt, ...)
    CLATTN_PRINTF(3, 4);
/* For calls without a context (file formats): records "<function>: <where>: <detail>", where is
 * typically the file's path. */
clattn_status clattn__fail_in(const char *function, const char *where, clattn_status status,
                              const char *fmt, ...) CLATTN_PRINTF(4, 5);
/* Records "<function>: invalid argument: <detail>" as CLATTN_ERROR_INVALID_ARGUMENT. */
clattn_status clattn__fail_arg(clattn_context *ctx, const char *function, const char *fmt, ...)
    CLATTN_PRINTF(3, 4);
/* The name of an OpenCL error code ("CL_INVALID_VALUE"), or "unknown OpenCL error". */
const char *clattn__cl_error_name(cl_int err);
/* The status a failed OpenCL call maps to. */
clattn_status clattn__status_from_cl(cl_int err);

/* Validates an argument of a public function: unless `cond` holds, records
 * "<function>: invalid argument: <detail>" and returns CLATTN_ERROR_INVALID_ARGUMENT. */
#define CLATTN_CHECK_ARG(ctx, function, cond, ...)                                        \
    do {                                                                                  \
        if (!(cond))                                                                      \
            return clattn__fail_arg((ctx), (function), __VA_ARGS__);                      \
    } while (0)

/* Logs through the context's callback (or to stderr) when `level` reaches its threshold. Without
 * a context only CLATTN_LOG (the environment variable) can ask for messages. */
void clattn__log(const clattn_context *ctx, clattn_log_level level, const char *fmt, ...)
    CLATTN_PRINTF(3, 4);
/* Delivers one message to `callback` (stderr when NULL) when level >= threshold. */
void clattn__log_message(clattn_log_callback callback, void *user_data, clattn_log_level threshold,
                         clattn_log_level level, const char *message);
/* The threshold the environment asks for: CLATTN_LOG=debug|info|warning|error|none, else
 * `fallback`. */
clattn_log_level clattn__log_threshold(clattn_log_level fallback);

#endif /* CLATTN_ERRORS_H */
