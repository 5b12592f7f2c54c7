/*
 * nccl_forward.c - loads the real NCCL (dlopen) into an NcclReal table and parses
 * MSCCLRT_FORCE_NCCL; see nccl_forward.h for the contract and why the library is opened with
 * RTLD_DEEPBIND. The process-wide table is filled under pthread_once and never changes after.
 */
#include "nccl/nccl_forward.h"
#include "nccl/nccl_config.h"
#include "core/log.h"
#include "core/param.h"

#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

const char ncclMscclrtShim[] = "libmscclrt_nccl";


/* A sanitizer runtime (ASan, TSan, MSan) intercepts dlopen and dies on RTLD_DEEPBIND; every one
 * of them defines __sanitizer_set_report_path. Checked at run time too, because the drop-in may
 * be preloaded into an instrumented program. */
static bool sanitizer_present(void) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    return true;
#else
    return dlsym(RTLD_DEFAULT, "__sanitizer_set_report_path") != NULL;
#endif
}

/* The object (shared library or program) that holds this code, by base address. */
static void *self_base(void) {
    Dl_info info;
    return dladdr((void *)&ncclMscclrtShim, &info) ? info.dli_fbase : NULL;
}

void nccl_forward_close(NcclReal *r) {
    if (r->handle) dlclose(r->handle);
    memset(r, 0, sizeof *r);
}

ncclResult_t nccl_forward_open(NcclReal *r, const char *path, char *why, size_t why_len) {
    char resolved[PATH_MAX];
    struct stat st;
    Dl_info info;
    void *sym;
    int flags = RTLD_LAZY | RTLD_LOCAL;

    memset(r, 0, sizeof *r);
    if (!path || !*path) {
        nccl_say(why, why_len, "no path to the real NCCL library was given");
        return ncclInvalidUsage;
    }
    if (!realpath(path, resolved)) {
        nccl_say(why, why_len, "cannot load the real NCCL from '%s': %s", path, strerror(errno));
        return ncclInvalidUsage;
    }
    if (stat(resolved, &st) != 0) {
        nccl_say(why, why_len, "cannot load the real NCCL from '%s': %s", path, strerror(errno));
        return ncclInvalidUsage;
    }
    if (!S_ISREG(st.st_mode)) {
        nccl_say(why, why_len, "cannot load the real NCCL from '%s': %s; give the library file "
            "(e.g. .../lib/libnccl.so.2)", path,
            S_ISDIR(st.st_mode) ? "it is a directory" : "it is not a regular file");
        return ncclInvalidUsage;
    }
    if (dladdr((void *)&ncclMscclrtShim, &info) && info.dli_fname) {
        char self[PATH_MAX];
        if (realpath(info.dli_fname, self) && strcmp(self, resolved) == 0) {
            nccl_say(why, why_len, "cannot load the real NCCL from '%s': it is this library "
                "(libmscclrt_nccl), which would call itself", path);
            return ncclInvalidUsage;
        }
    }
    r->deepbind = !sanitizer_present();
    if (r->deepbind) flags |= RTLD_DEEPBIND;
    r->handle = dlopen(resolved, flags);
    if (!r->handle) {
        const char *e = dlerror();
        nccl_say(why, why_len, "cannot load the real NCCL from '%s': %s", path, e ? e : "dlopen failed");
        return ncclInvalidUsage;
    }
    if (dlsym(r->handle, "ncclMscclrtShim")) {
        nccl_say(why, why_len, "cannot load the real NCCL from '%s': it is a copy of libmscclrt_nccl "
            "(it exports ncclMscclrtShim), not NVIDIA's NCCL", path);
        goto fail;
    }
    sym = dlsym(r->handle, "ncclGetVersion");
    if (!sym) {
        nccl_say(why, why_len, "cannot load the real NCCL from '%s': it has no ncclGetVersion, so it "
            "is not an NCCL library", path);
        goto fail;
    }
    if (dladdr(sym, &info) && info.dli_fbase == self_base()) {
        nccl_say(why, why_len, "cannot load the real NCCL from '%s': its ncclGetVersion is this "
            "library's (libmscclrt_nccl), which would call itself", path);
        goto fail;
    }
#define NCCL_FN(ret, name, params, args)                                                        \
    sym = dlsym(r->handle, #name);                                                              \
    memcpy(&r->name, &sym, sizeof sym);     /* object to function pointer, without a cast */    \
    if (!sym) r->missing++;
#include "nccl/nccl_funcs.def"
    if (r->ncclGetVersion(&r->version) != ncclSuccess) {
        nccl_say(why, why_len, "cannot load the real NCCL from '%s': its ncclGetVersion failed", path);
        goto fail;
    }
    snprintf(r->path, sizeof r->path, "%s", resolved);
    return ncclSuccess;
fail:
    nccl_forward_close(r);
    return ncclInvalidUsage;
}

/* ---- the process-wide table ------------------------------------------------------------------ */
static pthread_once_t real_once = PTHREAD_ONCE_INIT;
static NcclReal real;
static bool real_ok;
static char real_why[PATH_MAX + 256];

static void real_load(void) {
    const char *path = param_str(PARAM_NCCL_LIB_PATH);
    if (!*path) {
        snprintf(real_why, sizeof real_why, "MSCCLRT_NCCL_LIB_PATH is not set");
        return;
    }
    real_ok = nccl_forward_open(&real, path, real_why, sizeof real_why) == ncclSuccess;
    if (real_ok) {
        real_why[0] = 0;
        LOG_INFO(LOG_SUB_SHIM, "real NCCL %d loaded from %s%s (%d functions missing)",
                 real.version, real.path, real.deepbind ? "" : " without RTLD_DEEPBIND (sanitizer)",
                 real.missing);
    } else {
        LOG_INFO(LOG_SUB_SHIM, "no real NCCL: %s", real_why);
    }
}

const NcclReal *nccl_real(void) {
    pthread_once(&real_once, real_load);
    return real_ok ? &real : NULL;
}

const char *nccl_real_why(void) {
    pthread_once(&real_once, real_load);
    return real_why;
}

char *nccl_forward_explain(char *buf, size_t len, const char *fn) {
    const NcclReal *r = nccl_real();
    if (!r)
        nccl_say(buf, len, "%s needs the real NCCL, and none is loaded: %s", fn, nccl_real_why());
    else
        nccl_say(buf, len, "%s needs the real NCCL, and the one loaded (version %d, %s) does not "
            "export it", fn, r->version, r->path);
    return buf;
}

/* ---- MSCCLRT_FORCE_NCCL ---------------------------------------------------------------------- */
static const char *const coll_names[NCCL_COLL_COUNT] = {
#define NCCL_COLL_NAME(e, s) s,
    NCCL_COLLS(NCCL_COLL_NAME)
#undef NCCL_COLL_NAME
};

ncclResult_t nccl_force_parse(const char *list, unsigned *mask, char *why, size_t why_len) {
    const char *p = list ? list : "";
    *mask = 0;
    while (*p) {
        const char *start, *end;
        while (*p == ',' || isspace((unsigned char)*p)) p++;
        if (!*p) break;
        start = p;
        while (*p && *p != ',') p++;
        end = p;
        while (end > start && isspace((unsigned char)end[-1])) end--;
        size_t n = (size_t)(end - start);
        int hit = -1;
        if (n == 3 && strncasecmp(start, "all", 3) == 0) {
            *mask |= NCCL_COLL_ALL;
            continue;
        }
        for (int i = 0; i < NCCL_COLL_COUNT; i++)
            if (strlen(coll_names[i]) == n && strncasecmp(start, coll_names[i], n) == 0) hit = i;
        if (hit < 0) {
            nccl_say(why, why_len, "MSCCLRT_FORCE_NCCL: unknown collective '%.*s' (known: all, "
                "allreduce, allgather, reducescatter, broadcast, reduce, alltoall, gather, "
                "scatter, sendrecv)", (int)(n > 64 ? 64 : n), start);
            *mask = 0;
            return ncclInvalidArgument;
        }
        *mask |= 1u << hit;
    }
    return ncclSuccess;
}

static pthread_once_t force_once = PTHREAD_ONCE_INIT;
static unsigned force_bits;
static ncclResult_t force_res;
static char force_why[256];

static void force_load(void) {
    force_res = nccl_force_parse(param_str(PARAM_FORCE_NCCL), &force_bits, force_why,
                                 sizeof force_why);
    if (force_res != ncclSuccess) LOG_WARN("%s", force_why);
}

ncclResult_t nccl_force_mask(unsigned *mask, const char **why) {
    pthread_once(&force_once, force_load);
    *mask = force_bits;
    if (why) *why = force_why;
    return force_res;
}
