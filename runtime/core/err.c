/*
 * err.c - per-thread error text and the result-code strings of the public API.
 * libmscclrt keeps no global error state: each thread sees only its own last failure.
 */
#include "core/err.h"
#include "core/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local char last_error[2048];

static mscclrt_result vfail(mscclrt_result code, int err, const char *fmt, va_list ap) {
    int n = vsnprintf(last_error, sizeof last_error, fmt, ap);
    if (err && n >= 0 && (size_t)n < sizeof last_error)
        snprintf(last_error + n, sizeof last_error - (size_t)n, ": %s", strerror(err));
    log_msg(LOG_LEVEL_WARN, 0, __FILE__, __LINE__, "%s", last_error);
    return code;
}

mscclrt_result rt_fail(mscclrt_result code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vfail(code, 0, fmt, ap);
    va_end(ap);
    return code;
}

mscclrt_result rt_fail_errno(mscclrt_result code, const char *fmt, ...) {
    int e = errno;
    va_list ap;
    va_start(ap, fmt);
    vfail(code, e, fmt, ap);
    va_end(ap);
    return code;
}

void rt_clear_error(void) {
    last_error[0] = '\0';
}

void rt_assert_fail(const char *expr, const char *file, int line) {
    fprintf(stderr, "libmscclrt: internal error: %s at %s:%d (please report)\n", expr, file, line);
    abort();
}

MSCCLRT_API const char *mscclrt_last_error(void) {
    return last_error;
}

MSCCLRT_API const char *mscclrt_result_string(mscclrt_result r) {
    switch (r) {
    case MSCCLRT_SUCCESS: return "success";
    case MSCCLRT_ERR_INVALID_ARG: return "invalid argument";
    case MSCCLRT_ERR_INVALID_USAGE: return "invalid usage";
    case MSCCLRT_ERR_PLAN: return "invalid or unsupported plan";
    case MSCCLRT_ERR_SYSTEM: return "system error";
    case MSCCLRT_ERR_CUDA: return "CUDA error";
    case MSCCLRT_ERR_REMOTE: return "remote peer error";
    case MSCCLRT_ERR_TIMEOUT: return "timeout";
    case MSCCLRT_ERR_UNAVAILABLE: return "unavailable on this machine";
    case MSCCLRT_ERR_INTERNAL: return "internal error (please report)";
    }
    return "unknown result code";
}

MSCCLRT_API const char *mscclrt_version(void) {
    return MSCCLRT_VERSION_STRING;
}
