/*
 * err.h - error reporting inside libmscclrt: the message is made once, where the failure is
 * detected (rt_fail), kept per thread for mscclrt_last_error(), logged at WARN, and the
 * result code travels up unchanged (TRY / TRY_GOTO).
 */
#ifndef MSCCLRT_ERR_H
#define MSCCLRT_ERR_H

#include "mscclrt.h"

/* Formats into this thread's error buffer, logs it at WARN, returns code. */
mscclrt_result rt_fail(mscclrt_result code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Like rt_fail, for an errno-setting OS call: appends ": strerror(errno)". */
mscclrt_result rt_fail_errno(mscclrt_result code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Clears this thread's error text (a successful API call does not clear it, as errno). */
void rt_clear_error(void);

#define TRY(call) do { mscclrt_result r_ = (call); if (r_ != MSCCLRT_SUCCESS) return r_; } while (0)
#define TRY_GOTO(call, res, label) \
    do { (res) = (call); if ((res) != MSCCLRT_SUCCESS) goto label; } while (0)

/* Internal invariant; never triggered by user input. */
#define RT_ASSERT(c) do { if (!(c)) rt_assert_fail(#c, __FILE__, __LINE__); } while (0)
void rt_assert_fail(const char *expr, const char *file, int line) __attribute__((noreturn));

#endif
