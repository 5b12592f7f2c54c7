/*
 * cuda_driver.c - opens libcuda.so.1 and libnvrtc with dlopen on first use and fills the
 * function tables of cuda_driver.h. Nothing here runs until a GPU path asks for it, so the
 * library loads on hosts with no driver; absence is MSCCLRT_ERR_UNAVAILABLE, never a crash.
 */
#include "cuda/cuda_driver.h"
#include "core/err.h"
#include "core/log.h"
#include "core/param.h"

#include <dlfcn.h>
#include <limits.h>
#include <sys/stat.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

CudaDriver cu;
Nvrtc nvrtc;

static pthread_once_t cu_once = PTHREAD_ONCE_INIT;
static mscclrt_result cu_status = MSCCLRT_ERR_INTERNAL;
static char cu_why[512];

static pthread_once_t nvrtc_once = PTHREAD_ONCE_INIT;
static mscclrt_result nvrtc_status = MSCCLRT_ERR_INTERNAL;
static char nvrtc_why[1024];

static void *sym(void *lib, const char *name) {
    dlerror();
    return dlsym(lib, name);
}

static void cu_open(void) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        snprintf(cu_why, sizeof cu_why, "CUDA driver not available: dlopen(libcuda.so.1): %s",
                 e ? e : "unknown error");
        cu_status = MSCCLRT_ERR_UNAVAILABLE;
        return;
    }
#define CU_RESOLVE(field, name, ret, params) \
    if (!(*(void **)&cu.field = sym(lib, name))) { \
        snprintf(cu_why, sizeof cu_why, "CUDA driver too old: libcuda.so.1 lacks %s", name); \
        cu_status = MSCCLRT_ERR_UNAVAILABLE; \
        return; \
    }
    CU_DRIVER_FUNCTIONS(CU_RESOLVE)
#undef CU_RESOLVE
#define CU_RESOLVE_OPT(field, name, ret, params) *(void **)&cu.field = sym(lib, name);
    CU_OPTIONAL_FUNCTIONS(CU_RESOLVE_OPT)
#undef CU_RESOLVE_OPT
    /* multicast: only when explicitly enabled (see cuda_driver.h); a bad value fails every
     * cu_load with its message, as any other reason the driver cannot be used */
    long long nvls;
    if (param_int(PARAM_ENABLE_NVLS, &nvls) != MSCCLRT_SUCCESS) {
        snprintf(cu_why, sizeof cu_why, "%s", mscclrt_last_error());
        cu_status = MSCCLRT_ERR_INVALID_ARG;
        return;
    }
    if (nvls == 1) {
        int ok = 1;
#define CU_RESOLVE_MC(field, name, ret, params) \
        if (!(*(void **)&cu.field = sym(lib, name))) ok = 0;
        CU_MULTICAST_FUNCTIONS(CU_RESOLVE_MC)
#undef CU_RESOLVE_MC
        cu.multicast = ok;
        if (!ok) LOG_WARN("MSCCLRT_ENABLE_NVLS=1 but the driver lacks the multicast API");
    }
    if (log_enabled(LOG_LEVEL_TRACE, LOG_SUB_ALLOC)) cu_trace_install(&cu);
    CuResult r = cu.cuInit(0);
    if (r != CU_OK) {
        const char *name = "?";
        if (cu.cuGetErrorName(r, &name) != CU_OK) name = "?";
        snprintf(cu_why, sizeof cu_why, "CUDA driver not usable: cuInit: %s (%d)", name, r);
        cu_status = MSCCLRT_ERR_UNAVAILABLE;
        return;
    }
    cu.cuDriverGetVersion(&cu.version);
    LOG_INFO(LOG_SUB_INIT, "CUDA driver %d.%d loaded%s", cu.version / 1000, cu.version % 1000 / 10,
             cu.multicast ? " (multicast enabled)" : "");
    cu_status = MSCCLRT_SUCCESS;
}

mscclrt_result cu_load(void) {
    pthread_once(&cu_once, cu_open);
    if (cu_status != MSCCLRT_SUCCESS) return rt_fail(cu_status, "%s", cu_why);
    return MSCCLRT_SUCCESS;
}

static int nvrtc_try(const char *path) {
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        size_t len = strlen(nvrtc_why);
        const char *e = dlerror();
        if (len < sizeof nvrtc_why - 1)
            snprintf(nvrtc_why + len, sizeof nvrtc_why - len, "%s%s", len ? "; " : "",
                     e ? e : path);
        return 0;
    }
#define NV_RESOLVE(field, name, ret, params) \
    if (!(*(void **)&nvrtc.field = sym(lib, name))) { \
        dlclose(lib); \
        return 0; \
    }
    NVRTC_FUNCTIONS(NV_RESOLVE)
#undef NV_RESOLVE
    snprintf(nvrtc.path, sizeof nvrtc.path, "%s", path);
    nvrtc.nvrtcVersion(&nvrtc.major, &nvrtc.minor);
    return 1;
}

static const char *const nvrtc_names[] = {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"};

#define NVRTC_NNAMES (sizeof nvrtc_names / sizeof nvrtc_names[0])

/* The i-th explicit path searched first: each name under $CUDA_HOME/lib64, then under
 * /usr/local/cuda/lib64. false past the last. nvrtc_open and nvrtc_identity walk the same list. */
static bool nvrtc_candidate(size_t i, char *path, size_t len) {
    const char *home = getenv("CUDA_HOME");
    const char *dirs[2];
    size_t nd = 0;
    if (home && *home) dirs[nd++] = home;
    dirs[nd++] = "/usr/local/cuda";
    if (i >= nd * NVRTC_NNAMES) return false;
    snprintf(path, len, "%s/lib64/%s", dirs[i / NVRTC_NNAMES], nvrtc_names[i % NVRTC_NNAMES]);
    return true;
}

bool nvrtc_identity(char *buf, size_t len) {
    char path[512], real[PATH_MAX];
    struct stat st;
    for (size_t i = 0; nvrtc_candidate(i, path, sizeof path); i++) {
        if (!realpath(path, real) || stat(real, &st) != 0) continue;
        snprintf(buf, len, "%s:%lld:%lld", real, (long long)st.st_size, (long long)st.st_mtime);
        return true;
    }
    return false;
}

static void nvrtc_open(void) {
    char path[512];
    for (size_t i = 0; nvrtc_candidate(i, path, sizeof path); i++)
        if (nvrtc_try(path)) goto found;
    for (size_t n = 0; n < NVRTC_NNAMES; n++) /* then the default search path */
        if (nvrtc_try(nvrtc_names[n])) goto found;
    nvrtc_status = MSCCLRT_ERR_UNAVAILABLE;
    return;
found:
    LOG_INFO(LOG_SUB_CG, "NVRTC %d.%d from %s", nvrtc.major, nvrtc.minor, nvrtc.path);
    nvrtc_status = MSCCLRT_SUCCESS;
}

mscclrt_result nvrtc_load(void) {
    pthread_once(&nvrtc_once, nvrtc_open);
    if (nvrtc_status != MSCCLRT_SUCCESS)
        return rt_fail(nvrtc_status, "NVRTC not available (searched $CUDA_HOME/lib64, "
                       "/usr/local/cuda/lib64 and the default path): %s", nvrtc_why);
    return MSCCLRT_SUCCESS;
}

mscclrt_result cu_check(CuResult r, const char *what) {
    if (r == CU_OK) return MSCCLRT_SUCCESS;
    const char *name = "CUDA_ERROR_UNKNOWN", *text = "";
    if (cu.cuGetErrorName) cu.cuGetErrorName(r, &name);
    if (cu.cuGetErrorString) cu.cuGetErrorString(r, &text);
    return rt_fail(MSCCLRT_ERR_CUDA, "%s: %s (%d: %s)", what, name ? name : "?", r,
                   text ? text : "");
}

mscclrt_result nvrtc_check(NvrtcResult r, const char *what) {
    if (r == 0) return MSCCLRT_SUCCESS;
    const char *text = nvrtc.nvrtcGetErrorString ? nvrtc.nvrtcGetErrorString(r) : "?";
    return rt_fail(MSCCLRT_ERR_CUDA, "%s: %s (%d)", what, text ? text : "?", r);
}

bool cu_device_pci(CuDevice d, char *buf, size_t len) {
    int bus = 0, slot = 0, dom = 0;
    if (cu.cuDeviceGetAttribute(&bus, CU_ATTR_PCI_BUS_ID, d) != CU_OK ||
        cu.cuDeviceGetAttribute(&slot, CU_ATTR_PCI_DEVICE_ID, d) != CU_OK ||
        cu.cuDeviceGetAttribute(&dom, CU_ATTR_PCI_DOMAIN_ID, d) != CU_OK)
        return false;
    snprintf(buf, len, "%04x:%02x:%02x.0", dom, bus, slot);
    return true;
}

mscclrt_result cu_device_arch(int ordinal, int *arch) {
    CuDevice d;
    int major = 0, minor = 0;
    TRY(cu_check(cu.cuDeviceGet(&d, ordinal), "cuDeviceGet"));
    TRY(cu_check(cu.cuDeviceGetAttribute(&major, CU_ATTR_CC_MAJOR, d), "cuDeviceGetAttribute"));
    TRY(cu_check(cu.cuDeviceGetAttribute(&minor, CU_ATTR_CC_MINOR, d), "cuDeviceGetAttribute"));
    *arch = major * 10 + minor;
    return MSCCLRT_SUCCESS;
}
