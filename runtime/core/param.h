/*
 * param.h - typed getters for the environment variables of params.def. Each variable is read
 * once per process (pthread_once); a value that does not parse is a WARN and the default is used.
 */
#ifndef MSCCLRT_PARAM_H
#define MSCCLRT_PARAM_H

typedef enum {
#define PARAM(e, env, type, def, help) PARAM_##e,
#include "core/params.def"
#undef PARAM
    PARAM_COUNT
} ParamId;

long long param_int(ParamId id);
const char *param_str(ParamId id);      /* never NULL; "" when unset */
const char *param_env_name(ParamId id);
const char *param_help(ParamId id);

#endif
