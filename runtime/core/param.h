/*
 * param.h - typed getters for the environment variables of params.def, and the one strict
 * parser every environment number in libmscclrt goes through (launchers' RANK, WORLD_SIZE,
 * MASTER_PORT... included). Numbers are decimal only (no octal, no hex, no sign but '-', no
 * spaces) and range-checked, never truncated; a bad value is an error of the call that reads it.
 */
#ifndef MSCCLRT_PARAM_H
#define MSCCLRT_PARAM_H

#include <stdbool.h>

#include "mscclrt.h"

typedef enum {
#define PARAM(e, env, type, def, lo, hi, help) PARAM_##e,
#include "core/params.def"
#undef PARAM
    PARAM_COUNT
} ParamId;

/* Each row's range as constants (PARAM_MIN_CHECK_THREADS...), for static_asserts beside the
 * code that depends on it. */
enum {
#define PARAM(e, env, type, def, lo, hi, help) PARAM_MIN_##e = (lo), PARAM_MAX_##e = (hi),
#include "core/params.def"
#undef PARAM
};

/* The value of an INT variable: its default when unset or empty. A value that is not a
 * decimal integer in the row's [min, max] is MSCCLRT_ERR_INVALID_ARG, with a message naming the
 * variable, its value and the range (every read fails the same way); *out is then the default.
 * The environment is read once per process (pthread_once). */
mscclrt_result param_int(ParamId id, long long *out);
const char *param_str(ParamId id);      /* never NULL; "" when unset */
const char *param_env_name(ParamId id);
/* The row's range; false for a STR row. */
bool param_range(ParamId id, long long *lo, long long *hi);

/* The strict parser: text must be an optional '-' and decimal digits (leading zeros allowed)
 * whose value lies in [lo, hi]. Otherwise MSCCLRT_ERR_INVALID_ARG: "environment variable NAME is 'TEXT': not a
 * decimal integer (allowed range [lo, hi])" or "...: out of range [lo, hi]". */
mscclrt_result param_parse_int(const char *name, const char *text, long long lo, long long hi,
                               long long *out);

#endif
