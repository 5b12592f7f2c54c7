/*
 * param.c - reads every variable of params.def once, on first use, into a table.
 * Numbers accept decimal or 0x hex; anything else keeps the default and logs a warning.
 */
#include "core/param.h"
#include "core/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

enum { PT_INT, PT_STR };
#define DEF_INT(d) .idef = (d), .sdef = ""
#define DEF_STR(d) .idef = 0, .sdef = (d)
static const struct { const char *env; int type; long long idef; const char *sdef; const char *help; } table[] = {
#define PARAM(e, name, ty, def, text) {.env = name, .type = PT_##ty, DEF_##ty(def), .help = text},
#include "core/params.def"
#undef PARAM
};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static long long ival[PARAM_COUNT];
static const char *sval[PARAM_COUNT];
static char bad[PARAM_COUNT];

static void load(void) {
    for (int i = 0; i < PARAM_COUNT; i++) {
        const char *v = getenv(table[i].env);
        ival[i] = table[i].idef;
        sval[i] = v ? v : table[i].sdef;
        if (table[i].type == PT_INT && v && *v) {
            char *end;
            errno = 0;
            long long x = strtoll(v, &end, 0);
            if (errno || *end) bad[i] = 1;
            else ival[i] = x;
        }
    }
}

long long param_int(ParamId id) {
    pthread_once(&once, load);
    if (bad[id]) {
        bad[id] = 0;
        LOG_WARN("%s=%s is not a number; using %lld", table[id].env, sval[id], ival[id]);
    }
    return ival[id];
}

const char *param_str(ParamId id) {
    pthread_once(&once, load);
    return sval[id];
}

const char *param_env_name(ParamId id) { return table[id].env; }
const char *param_help(ParamId id) { return table[id].help; }
