/*
 * param.c - reads every variable of params.def once, on first use, into a table, and the one
 * strict number parser of the library. A bad number is kept as text and reported (as an error
 * of the caller, never a silent default) each time the variable is read.
 */
#include "core/param.h"
#include "core/err.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

enum { PT_INT, PT_STR };
#define DEF_INT(d) .idef = (d), .sdef = ""
#define DEF_STR(d) .idef = 0, .sdef = (d)
static const struct {
    const char *env;
    int type;            /* PT_INT or PT_STR */
    long long idef;      /* PT_INT: default */
    const char *sdef;    /* PT_STR: default */
    long long lo, hi;    /* PT_INT: allowed range, inclusive */
} table[] = {
/* text: the one-line description kept beside the row in params.def for readers of the source */
#define PARAM(e, name, ty, def, min, max, text) \
    {.env = name, .type = PT_##ty, DEF_##ty(def), .lo = (min), .hi = (max)},
#include "core/params.def"
#undef PARAM
};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static const char *sval[PARAM_COUNT];   /* the environment's text, or the STR default */
static bool set[PARAM_COUNT];           /* set and non-empty */

static void load(void) {
    for (int i = 0; i < PARAM_COUNT; i++) {
        const char *v = getenv(table[i].env);
        set[i] = v && *v;
        sval[i] = v ? v : table[i].sdef;
    }
}

/* Parses without reporting: 0 ok, 1 not a decimal integer, 2 out of [lo, hi]. */
static int parse(const char *text, long long lo, long long hi, long long *out) {
    const char *p = text;
    bool neg = *p == '-';
    if (neg) p++;
    if (!*p) return 1;
    long long v = 0;
    int digits = 0;
    for (; *p; p++) {
        if (*p < '0' || *p > '9') return 1;
        if ((v || *p != '0') && ++digits > 18) {   /* beyond any range; look for a non-digit */
            for (p++; *p; p++)
                if (*p < '0' || *p > '9') return 1;
            return 2;
        }
        v = v * 10 + (*p - '0');
    }
    if (neg) v = -v;
    if (v < lo || v > hi) return 2;
    *out = v;
    return 0;
}

mscclrt_result param_parse_int(const char *name, const char *text, long long lo, long long hi,
                               long long *out) {
    int r = parse(text, lo, hi, out);
    if (r == 0) return MSCCLRT_SUCCESS;
    size_t len = 0;
    while (text[len] && len < 41) len++;
    const char *cut = len > 40 ? "..." : "";
    if (r == 1)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "environment variable %s is '%.40s%s': not a decimal "
                       "integer (allowed range [%lld, %lld])", name, text, cut, lo, hi);
    return rt_fail(MSCCLRT_ERR_INVALID_ARG, "environment variable %s is '%.40s%s': out of range "
                   "[%lld, %lld]", name, text, cut, lo, hi);
}

mscclrt_result param_int(ParamId id, long long *out) {
    pthread_once(&once, load);
    *out = table[id].idef;
    if (!set[id]) return MSCCLRT_SUCCESS;
    long long v;
    TRY(param_parse_int(table[id].env, sval[id], table[id].lo, table[id].hi, &v));
    *out = v;
    return MSCCLRT_SUCCESS;
}

const char *param_str(ParamId id) {
    pthread_once(&once, load);
    return sval[id];
}

bool param_range(ParamId id, long long *lo, long long *hi) {
    *lo = table[id].lo;
    *hi = table[id].hi;
    return table[id].type == PT_INT;
}

const char *param_env_name(ParamId id) { return table[id].env; }
