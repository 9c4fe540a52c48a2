/* Logging through the context's callback, or to stderr. */
#include "base/errors.h"
#include "context_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

clattn_log_level clattn__log_threshold(clattn_log_level fallback)
{
    static const char *const names[] = {"debug", "info", "warning", "error", "none"};
    const char *env = getenv("CLATTN_LOG");
    for (int i = 0; env && i < 5; i++)
        if (strcmp(env, names[i]) == 0)
            return (clattn_log_level)i;
    return fallback;
}

static const char *level_name(clattn_log_level level)
{
    switch (level) {
    case CLATTN_LOG_DEBUG: return "debug";
    case CLATTN_LOG_INFO: return "info";
    case CLATTN_LOG_WARNING: return "warning";
    case CLATTN_LOG_ERROR: return "error";
    case CLATTN_LOG_NONE: break;
    }
    return "log";
}

void clattn__log_message(clattn_log_callback callback, void *user_data, clattn_log_level threshold,
                         clattn_log_level level, const char *message)
{
    if (level < threshold || level >= CLATTN_LOG_NONE)
        return;
    if (callback)
        callback(user_data, level, message);
    else
        fprintf(stderr, "clattn %s: %s\n", level_name(level), message);
}

void clattn__log(const clattn_context *ctx, clattn_log_level level, const char *fmt, ...)
{
    /* Without a context only CLATTN_LOG can ask for messages. */
    clattn_log_level threshold = ctx ? ctx->diag.log_level : clattn__log_threshold(CLATTN_LOG_NONE);
    if (level < threshold || level >= CLATTN_LOG_NONE)
        return;
    va_list args, copy;
    va_start(args, fmt);
    va_copy(copy, args);
    int len = vsnprintf(NULL, 0, fmt, copy);
    va_end(copy);
    char *message = len >= 0 ? malloc((size_t)len + 1) : NULL;
    if (message)
        vsnprintf(message, (size_t)len + 1, fmt, args);
    va_end(args);
    clattn__log_message(ctx ? ctx->diag.log_callback : NULL, ctx ? ctx->diag.log_user_data : NULL,
                        threshold, level,
                        message ? message : "(out of memory formatting a log message)");
    free(message);
}
