/*
 * plan_internal.h - what the plan room's loader and validator share: the one way an error is
 * worded (the plan's name or file, the JSON path, the message) and how paths are built.
 */
#ifndef MSCCLRT_PLAN_INTERNAL_H
#define MSCCLRT_PLAN_INTERNAL_H

#include "plan.h"

#include <stdarg.h>
#include <stdbool.h>

/* JSON paths of messages ("gpus[1].threadblocks[0].ops[3]"): at most PLAN_PATH_MAX bytes,
 * written into dst (which may alias base), truncated harmlessly. */
#define PLAN_PATH_MAX 256
void plan_path_fmt(char *dst, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void plan_path_key(char *dst, const char *base, const char *key);   /* base.key, or key */
void plan_path_idx(char *dst, const char *base, int i);             /* base[i] */

/* Fills *err with "WHAT: PATH: message" (printf-style); returns false for `return vfail(...)`. */
bool plan_vfail(PlanErr *err, const char *what, const char *path, const char *fmt, va_list ap);

#endif
