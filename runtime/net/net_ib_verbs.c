/*
 * net_ib_verbs.c - opens libibverbs with dlopen, once per process, and resolves the entry points
 * the ib backend calls (net_ib.h). MSCCLRT_IBVERBS_LIB names another library (tests load a
 * fake one); a machine without libibverbs simply has no ib backend.
 */
#include "net/net_ib.h"
#include "core/err.h"
#include "core/log.h"
#include "core/param.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

IbVerbs iv;

static pthread_once_t iv_once = PTHREAD_ONCE_INIT;
static mscclrt_result iv_status = MSCCLRT_ERR_INTERNAL;
static char iv_why[512];

static void iv_open(void) {
    const char *want = param_str(PARAM_IBVERBS_LIB);
    const char *path = want && *want ? want : "libibverbs.so.1";
    snprintf(iv.path, sizeof iv.path, "%s", path);
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        snprintf(iv_why, sizeof iv_why, "RDMA not available: dlopen(%s): %s", path,
                 e ? e : "unknown error");
        iv_status = MSCCLRT_ERR_UNAVAILABLE;
        return;
    }
#define IB_RESOLVE(field, name, ret, params) \
    if (!(*(void **)&iv.field = dlsym(lib, name))) { \
        snprintf(iv_why, sizeof iv_why, "RDMA not available: %s lacks %s", path, name); \
        iv_status = MSCCLRT_ERR_UNAVAILABLE; \
        dlclose(lib); \
        return; \
    }
    IB_VERBS_FUNCTIONS(IB_RESOLVE)
#undef IB_RESOLVE
#define IB_RESOLVE_OPT(field, name, ret, params) *(void **)&iv.field = dlsym(lib, name);
    IB_VERBS_OPTIONAL(IB_RESOLVE_OPT)
#undef IB_RESOLVE_OPT
    LOG_INFO(LOG_SUB_XPORT, "ib: loaded %s (dmabuf registration %s)", path,
             iv.reg_dmabuf_mr ? "available" : "not available");
    iv_status = MSCCLRT_SUCCESS;
}

bool ib_verbs_try(void) {
    pthread_once(&iv_once, iv_open);
    return iv_status == MSCCLRT_SUCCESS;
}

mscclrt_result ib_verbs_load(void) {
    pthread_once(&iv_once, iv_open);
    if (iv_status != MSCCLRT_SUCCESS) return rt_fail(iv_status, "%s", iv_why);
    return MSCCLRT_SUCCESS;
}

const char *ib_status_name(enum ibv_wc_status s, char *buf, size_t len) {
    const char *t = iv.wc_status_str ? iv.wc_status_str(s) : NULL;
    snprintf(buf, len, "%s (status %d)", t ? t : "?", (int)s);
    return buf;
}
