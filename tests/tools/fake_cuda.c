/*
 * fake_cuda.c - a stand-in for the CUDA driver (libcuda.so.1) in tests that need no GPU: built as
 * $(BUILD)/tests/fake_cuda/libcuda.so.1 (runtime/cuda/module.mk) and found by cu_load's dlopen
 * through LD_LIBRARY_PATH. Exports every symbol of cuda_driver.h's X-macro lists, under the
 * versioned names cu_open resolves; a function not written out below answers
 * CUDA_ERROR_NOT_SUPPORTED (801).
 *
 * What works: FAKE_CUDA_DEVICES devices (default 2) of compute capability 9.0 that all reach each
 * other, primary contexts (reference counted), the current context (per thread), peer access,
 * and memory: host and device allocations are both malloc'd, a device pointer is the host address,
 * so copies and memsets are memcpy and memset; streams and events exist, and their work is done
 * at once (an asynchronous copy is a memcpy, a stream write a store). Enough for
 * mscclrt_comm_init_all and mscclrt_comm_destroy, the port proxy's thread and the socket
 * transport's device mode, and
 * under ASan a leaked device or host allocation is a leaked malloc.
 *
 * Fault injection: FAKE_CUDA_FAIL=name:N[,name:N...] makes the N-th call (from 1) of the named
 * function return CUDA_ERROR_OUT_OF_MEMORY (2) and do nothing; the name is the plain CUDA name
 * (cuMemAlloc) or the versioned symbol (cuMemAlloc_v2).
 * Tests ask what is still held through fake_cuda_ctx_refs() and fake_cuda_allocs(), how many
 * threads chose the relaxed capture mode through fake_cuda_relaxed_threads(), and how often a
 * function was called through fake_cuda_calls() (dlsym).
 * Test-only code: never part of libmscclrt.
 */
#include "cuda/cuda_driver.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAKE_EXPORT __attribute__((visibility("default")))
enum {
    FAKE_ERR_INVALID_VALUE = 1, FAKE_ERR_OUT_OF_MEMORY = 2, FAKE_ERR_INVALID_DEVICE = 101,
    FAKE_ERR_INVALID_CONTEXT = 201, FAKE_ERR_NOT_SUPPORTED = 801,
    FAKE_MAX_DEVICES = 64,
};

/* Every function cu_open can resolve: the driver's, the multicast and the optional lists. */
#define FAKE_ALL_FUNCTIONS(X) CU_DRIVER_FUNCTIONS(X) CU_MULTICAST_FUNCTIONS(X) CU_OPTIONAL_FUNCTIONS(X)

/* Prototypes from the lists, each with its versioned symbol as assembler name: defining
 * cuMemAlloc below defines "cuMemAlloc_v2", and a definition whose signature drifted from the
 * list does not compile. */
#define FAKE_PROTO(field, sym, ret, params) FAKE_EXPORT ret field params __asm__(sym);
FAKE_ALL_FUNCTIONS(FAKE_PROTO)

/* ---- call counts and fault injection ---------------------------------------------------- */
#define FAKE_INDEX(field, sym, ret, params) FAKE_IX_##field,
enum { FAKE_ALL_FUNCTIONS(FAKE_INDEX) FAKE_NFUNCS };
#define FAKE_NAME(field, sym, ret, params) #field,
static const char *const fake_names[FAKE_NFUNCS] = {FAKE_ALL_FUNCTIONS(FAKE_NAME)};
#define FAKE_SYM(field, sym, ret, params) sym,
static const char *const fake_syms[FAKE_NFUNCS] = {FAKE_ALL_FUNCTIONS(FAKE_SYM)};

static pthread_mutex_t fake_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t fake_once = PTHREAD_ONCE_INIT;
static long fake_calls[FAKE_NFUNCS];
static long fake_fail_at[FAKE_NFUNCS];     /* the call (from 1) that fails; 0: none */
static int fake_ndev = 2;

/* The index of the function named by the len bytes at name (its plain or versioned name), or
 * FAKE_NFUNCS */
static int fake_index(const char *name, size_t len) {
    int i = 0;
    while (i < FAKE_NFUNCS && !((strlen(fake_names[i]) == len && !strncmp(name, fake_names[i], len)) ||
                                (strlen(fake_syms[i]) == len && !strncmp(name, fake_syms[i], len))))
        i++;
    return i;
}

static void fake_setup(void) {
    const char *s = getenv("FAKE_CUDA_DEVICES");
    if (s && *s) {
        fake_ndev = atoi(s);
        if (fake_ndev < 0 || fake_ndev > FAKE_MAX_DEVICES) {
            fprintf(stderr, "fake_cuda: FAKE_CUDA_DEVICES=%s out of range [0, %d]\n", s,
                    FAKE_MAX_DEVICES);
            abort();
        }
    }
    const char *f = getenv("FAKE_CUDA_FAIL");
    while (f && *f) {   /* name:N[,name:N...]; a typo must not silently test nothing */
        size_t len = strcspn(f, ":,");
        char *end = NULL;
        long n = f[len] == ':' ? strtol(f + len + 1, &end, 10) : 0;
        const int i = fake_index(f, len);
        if (i == FAKE_NFUNCS || n < 1 || (*end && *end != ',')) {
            fprintf(stderr, "fake_cuda: bad FAKE_CUDA_FAIL entry at '%s' (want name:N, N >= 1, "
                    "name a driver function)\n", f);
            abort();
        }
        fake_fail_at[i] = n;
        f = *end ? end + 1 : end;
    }
}

/* Counts a call of function ix; true when this is the call to fail. */
static int fake_enter(int ix) {
    pthread_once(&fake_once, fake_setup);
    pthread_mutex_lock(&fake_mu);
    long n = ++fake_calls[ix];
    pthread_mutex_unlock(&fake_mu);
    return n == fake_fail_at[ix];
}
#define FAKE_ENTER(field) do { if (fake_enter(FAKE_IX_##field)) return FAKE_ERR_OUT_OF_MEMORY; } while (0)

/* ---- functions that are not written out below: CUDA_ERROR_NOT_SUPPORTED ------------------ */
/* FAKE_HAS_<field> is "~, 1" for every function defined by hand; FAKE_IS_DEFINED(field) then
 * expands to 1, and to 0 for all others (the probe idiom of the Linux kernel's IS_ENABLED).
 * A function defined by hand but missing here is defined twice and does not compile; one listed
 * here but not defined is missing from the library, and cu_load fails naming it. */
#define FAKE_HAS_cuInit ~, 1
#define FAKE_HAS_cuDriverGetVersion ~, 1
#define FAKE_HAS_cuGetErrorName ~, 1
#define FAKE_HAS_cuGetErrorString ~, 1
#define FAKE_HAS_cuDeviceGet ~, 1
#define FAKE_HAS_cuDeviceGetCount ~, 1
#define FAKE_HAS_cuDeviceGetAttribute ~, 1
#define FAKE_HAS_cuDeviceGetName ~, 1
#define FAKE_HAS_cuDeviceCanAccessPeer ~, 1
#define FAKE_HAS_cuDevicePrimaryCtxRetain ~, 1
#define FAKE_HAS_cuDevicePrimaryCtxRelease ~, 1
#define FAKE_HAS_cuCtxSetCurrent ~, 1
#define FAKE_HAS_cuCtxGetCurrent ~, 1
#define FAKE_HAS_cuCtxGetDevice ~, 1
#define FAKE_HAS_cuCtxSynchronize ~, 1
#define FAKE_HAS_cuCtxEnablePeerAccess ~, 1
#define FAKE_HAS_cuMemAlloc ~, 1
#define FAKE_HAS_cuMemFree ~, 1
#define FAKE_HAS_cuMemHostAlloc ~, 1
#define FAKE_HAS_cuMemFreeHost ~, 1
#define FAKE_HAS_cuMemHostGetDevicePointer ~, 1
#define FAKE_HAS_cuMemcpyHtoD ~, 1
#define FAKE_HAS_cuMemcpyDtoH ~, 1
#define FAKE_HAS_cuMemsetD8 ~, 1
#define FAKE_HAS_cuMemcpyHtoDAsync ~, 1
#define FAKE_HAS_cuMemcpyAsync ~, 1
#define FAKE_HAS_cuMemcpyDtoHAsync ~, 1
#define FAKE_HAS_cuStreamCreate ~, 1
#define FAKE_HAS_cuStreamDestroy ~, 1
#define FAKE_HAS_cuStreamSynchronize ~, 1
#define FAKE_HAS_cuStreamWriteValue64 ~, 1
#define FAKE_HAS_cuEventCreate ~, 1
#define FAKE_HAS_cuEventDestroy ~, 1
#define FAKE_HAS_cuEventRecord ~, 1
#define FAKE_HAS_cuEventSynchronize ~, 1
#define FAKE_HAS_cuEventQuery ~, 1
#define FAKE_HAS_cuStreamQuery ~, 1
#define FAKE_HAS_cuThreadExchangeStreamCaptureMode ~, 1

#define FAKE_CAT_(a, b) a##b
#define FAKE_CAT(a, b) FAKE_CAT_(a, b)
#define FAKE_SECOND_(a, b, ...) b
#define FAKE_SECOND(...) FAKE_SECOND_(__VA_ARGS__)
#define FAKE_IS_DEFINED(field) FAKE_SECOND(FAKE_CAT(FAKE_HAS_, field), 0, ~)
#define FAKE_IF_1(yes, no) yes
#define FAKE_IF_0(yes, no) no
#define FAKE_STUB(field, sym, ret, params) \
    FAKE_CAT(FAKE_IF_, FAKE_IS_DEFINED(field))(, \
        ret field params { FAKE_ENTER(field); return FAKE_ERR_NOT_SUPPORTED; })
FAKE_ALL_FUNCTIONS(FAKE_STUB)

/* ---- errors ---------------------------------------------------------------------------------- */
static const struct { CuResult r; const char *name, *text; } fake_errors[] = {
    {0, "CUDA_SUCCESS", "no error"},
    {FAKE_ERR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {FAKE_ERR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {FAKE_ERR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {FAKE_ERR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CU_ERR_PEER_ACCESS_ALREADY_ENABLED, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED",
     "peer access is already enabled"},
    {FAKE_ERR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported (fake driver)"},
};

static CuResult fake_error(CuResult e, const char **s, int text) {
    for (size_t i = 0; i < sizeof fake_errors / sizeof fake_errors[0]; i++)
        if (fake_errors[i].r == e) {
            *s = text ? fake_errors[i].text : fake_errors[i].name;
            return 0;
        }
    *s = NULL;   /* as the real driver: an unknown code is CUDA_ERROR_INVALID_VALUE */
    return FAKE_ERR_INVALID_VALUE;
}
CuResult cuGetErrorName(CuResult e, const char **s) { FAKE_ENTER(cuGetErrorName); return fake_error(e, s, 0); }
CuResult cuGetErrorString(CuResult e, const char **s) { FAKE_ENTER(cuGetErrorString); return fake_error(e, s, 1); }

/* ---- devices ------------------------------------------------------------------------------- */
CuResult cuInit(unsigned flags) { FAKE_ENTER(cuInit); return 0; }
CuResult cuDriverGetVersion(int *v) { FAKE_ENTER(cuDriverGetVersion); *v = 13000; return 0; }
CuResult cuDeviceGetCount(int *n) { FAKE_ENTER(cuDeviceGetCount); *n = fake_ndev; return 0; }

CuResult cuDeviceGet(CuDevice *d, int ordinal) {
    FAKE_ENTER(cuDeviceGet);
    if (ordinal < 0 || ordinal >= fake_ndev) return FAKE_ERR_INVALID_DEVICE;
    *d = ordinal;
    return 0;
}

CuResult cuDeviceGetAttribute(int *v, int attr, CuDevice d) {
    FAKE_ENTER(cuDeviceGetAttribute);
    if (d < 0 || d >= fake_ndev) return FAKE_ERR_INVALID_DEVICE;
    switch (attr) {
    case CU_ATTR_CC_MAJOR: *v = 9; break;
    case CU_ATTR_CC_MINOR: *v = 0; break;
    case CU_ATTR_SM_COUNT: *v = 132; break;
    case CU_ATTR_PCI_BUS_ID: *v = 0x18 + d; break;
    default: *v = 0; break;   /* no VMM, no POSIX fd handles, no multicast: the plain paths */
    }
    return 0;
}

CuResult cuDeviceGetName(char *name, int len, CuDevice d) {
    FAKE_ENTER(cuDeviceGetName);
    if (d < 0 || d >= fake_ndev) return FAKE_ERR_INVALID_DEVICE;
    snprintf(name, (size_t)len, "Fake CUDA device %d", d);
    return 0;
}

CuResult cuDeviceCanAccessPeer(int *can, CuDevice d, CuDevice peer) {
    FAKE_ENTER(cuDeviceCanAccessPeer);
    if (d < 0 || d >= fake_ndev || peer < 0 || peer >= fake_ndev) return FAKE_ERR_INVALID_DEVICE;
    *can = d != peer;
    return 0;
}

/* ---- contexts: one primary context per device; the handle points into fake_ctx ------------ */
struct CUctx_st {
    int dev;
    int refs;                          /* primary context retains not yet released */
    unsigned char peer[FAKE_MAX_DEVICES];   /* peer access enabled to device i */
};
static struct CUctx_st fake_ctx[FAKE_MAX_DEVICES];
static _Thread_local CuContext fake_current;

static int fake_ctx_valid(CuContext c) {   /* a retained primary context of this driver */
    const uintptr_t a = (uintptr_t)c, lo = (uintptr_t)fake_ctx;
    return a >= lo && a < lo + (uintptr_t)fake_ndev * sizeof *fake_ctx &&
           (a - lo) % sizeof *fake_ctx == 0 && c->refs > 0;
}

CuResult cuDevicePrimaryCtxRetain(CuContext *c, CuDevice d) {
    FAKE_ENTER(cuDevicePrimaryCtxRetain);
    if (d < 0 || d >= fake_ndev) return FAKE_ERR_INVALID_DEVICE;
    pthread_mutex_lock(&fake_mu);
    fake_ctx[d].dev = d;
    fake_ctx[d].refs++;
    pthread_mutex_unlock(&fake_mu);
    *c = &fake_ctx[d];
    return 0;
}

CuResult cuDevicePrimaryCtxRelease(CuDevice d) {
    FAKE_ENTER(cuDevicePrimaryCtxRelease);
    if (d < 0 || d >= fake_ndev) return FAKE_ERR_INVALID_DEVICE;
    CuResult r = 0;
    pthread_mutex_lock(&fake_mu);
    if (fake_ctx[d].refs == 0) r = FAKE_ERR_INVALID_CONTEXT;   /* released more than retained */
    else if (--fake_ctx[d].refs == 0) memset(fake_ctx[d].peer, 0, sizeof fake_ctx[d].peer);
    pthread_mutex_unlock(&fake_mu);
    return r;
}

CuResult cuCtxSetCurrent(CuContext c) {
    FAKE_ENTER(cuCtxSetCurrent);
    if (c && !fake_ctx_valid(c)) return FAKE_ERR_INVALID_CONTEXT;
    fake_current = c;
    return 0;
}
CuResult cuCtxGetCurrent(CuContext *c) { FAKE_ENTER(cuCtxGetCurrent); *c = fake_current; return 0; }

CuResult cuCtxGetDevice(CuDevice *d) {
    FAKE_ENTER(cuCtxGetDevice);
    if (!fake_ctx_valid(fake_current)) return FAKE_ERR_INVALID_CONTEXT;
    *d = fake_current->dev;
    return 0;
}

CuResult cuCtxSynchronize(void) {
    FAKE_ENTER(cuCtxSynchronize);
    return fake_ctx_valid(fake_current) ? 0 : FAKE_ERR_INVALID_CONTEXT;
}

CuResult cuCtxEnablePeerAccess(CuContext peer, unsigned flags) {
    FAKE_ENTER(cuCtxEnablePeerAccess);
    if (!fake_ctx_valid(fake_current) || !fake_ctx_valid(peer) || peer == fake_current)
        return FAKE_ERR_INVALID_CONTEXT;
    pthread_mutex_lock(&fake_mu);
    CuResult r = fake_current->peer[peer->dev] ? CU_ERR_PEER_ACCESS_ALREADY_ENABLED : 0;
    fake_current->peer[peer->dev] = 1;
    pthread_mutex_unlock(&fake_mu);
    return r;
}

/* ---- memory: malloc'd; a device pointer is the host address --------------------------------- */
static long fake_nallocs;                  /* host and device allocations not yet freed */

static void *fake_alloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (p) {
        pthread_mutex_lock(&fake_mu);
        fake_nallocs++;
        pthread_mutex_unlock(&fake_mu);
    }
    return p;
}
static void fake_free(void *p) {
    if (!p) return;
    pthread_mutex_lock(&fake_mu);
    fake_nallocs--;
    pthread_mutex_unlock(&fake_mu);
    free(p);
}

CuResult cuMemAlloc(CuDevPtr *p, size_t n) {
    FAKE_ENTER(cuMemAlloc);
    if (!fake_ctx_valid(fake_current)) return FAKE_ERR_INVALID_CONTEXT;
    void *h = fake_alloc(n);
    if (!h) return FAKE_ERR_OUT_OF_MEMORY;
    *p = (CuDevPtr)(uintptr_t)h;
    return 0;
}
CuResult cuMemFree(CuDevPtr p) { FAKE_ENTER(cuMemFree); fake_free((void *)(uintptr_t)p); return 0; }

CuResult cuMemHostAlloc(void **p, size_t n, unsigned flags) {
    FAKE_ENTER(cuMemHostAlloc);
    if (!fake_ctx_valid(fake_current)) return FAKE_ERR_INVALID_CONTEXT;
    return (*p = fake_alloc(n)) ? 0 : FAKE_ERR_OUT_OF_MEMORY;
}
CuResult cuMemFreeHost(void *p) { FAKE_ENTER(cuMemFreeHost); fake_free(p); return 0; }

CuResult cuMemHostGetDevicePointer(CuDevPtr *d, void *h, unsigned flags) {
    FAKE_ENTER(cuMemHostGetDevicePointer);
    *d = (CuDevPtr)(uintptr_t)h;
    return 0;
}

CuResult cuMemcpyHtoD(CuDevPtr dst, const void *src, size_t n) {
    FAKE_ENTER(cuMemcpyHtoD);
    memcpy((void *)(uintptr_t)dst, src, n);
    return 0;
}
CuResult cuMemcpyDtoH(void *dst, CuDevPtr src, size_t n) {
    FAKE_ENTER(cuMemcpyDtoH);
    memcpy(dst, (const void *)(uintptr_t)src, n);
    return 0;
}
CuResult cuMemsetD8(CuDevPtr p, unsigned char v, size_t n) {
    FAKE_ENTER(cuMemsetD8);
    memset((void *)(uintptr_t)p, v, n);
    return 0;
}

/* ---- streams and events: work runs at once, in the calling thread ---------------------------
 * An "asynchronous" copy is done when its call returns, so every stream is always idle and
 * every event complete; what this checks is the calling code's bookkeeping (each stream and
 * event created in a context and destroyed once, copies aimed at allocations), not its timing.
 * Handles are allocations, so a leaked stream or event shows in fake_cuda_allocs. */
CuResult cuMemcpyHtoDAsync(CuDevPtr dst, const void *src, size_t n, CuStream st) {
    FAKE_ENTER(cuMemcpyHtoDAsync);
    if (!st) return FAKE_ERR_INVALID_VALUE;   /* the callers here never use the legacy stream */
    memcpy((void *)(uintptr_t)dst, src, n);
    return 0;
}
CuResult cuMemcpyAsync(CuDevPtr dst, CuDevPtr src, size_t n, CuStream st) {
    FAKE_ENTER(cuMemcpyAsync);
    if (!st) return FAKE_ERR_INVALID_VALUE;
    memcpy((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
    return 0;
}
CuResult cuMemcpyDtoHAsync(void *dst, CuDevPtr src, size_t n, CuStream st) {
    FAKE_ENTER(cuMemcpyDtoHAsync);
    if (!st) return FAKE_ERR_INVALID_VALUE;
    memcpy(dst, (const void *)(uintptr_t)src, n);
    return 0;
}
CuResult cuStreamCreate(CuStream *st, unsigned flags) {
    FAKE_ENTER(cuStreamCreate);
    if (!fake_ctx_valid(fake_current)) return FAKE_ERR_INVALID_CONTEXT;
    return (*st = fake_alloc(16)) ? 0 : FAKE_ERR_OUT_OF_MEMORY;
}
CuResult cuStreamDestroy(CuStream st) { FAKE_ENTER(cuStreamDestroy); fake_free(st); return 0; }
CuResult cuStreamSynchronize(CuStream st) {
    FAKE_ENTER(cuStreamSynchronize);
    return st ? 0 : FAKE_ERR_INVALID_VALUE;
}
CuResult cuStreamWriteValue64(CuStream st, CuDevPtr addr, uint64_t v, unsigned flags) {
    FAKE_ENTER(cuStreamWriteValue64);
    if (!st || addr % 8) return FAKE_ERR_INVALID_VALUE;
    __atomic_store_n((uint64_t *)(uintptr_t)addr, v, __ATOMIC_RELEASE);
    return 0;
}
CuResult cuEventCreate(CuEvent *e, unsigned flags) {
    FAKE_ENTER(cuEventCreate);
    if (!fake_ctx_valid(fake_current)) return FAKE_ERR_INVALID_CONTEXT;
    return (*e = fake_alloc(16)) ? 0 : FAKE_ERR_OUT_OF_MEMORY;
}
CuResult cuEventDestroy(CuEvent e) { FAKE_ENTER(cuEventDestroy); fake_free(e); return 0; }
CuResult cuEventRecord(CuEvent e, CuStream st) {
    FAKE_ENTER(cuEventRecord);
    return e && st ? 0 : FAKE_ERR_INVALID_VALUE;
}
CuResult cuEventSynchronize(CuEvent e) {
    FAKE_ENTER(cuEventSynchronize);
    return e ? 0 : FAKE_ERR_INVALID_VALUE;
}

/* Queries: work is done at once here (copies are synchronous), but every other query answers
 * "not ready" first, so a caller's polling loop is exercised and must ask again */
static unsigned fake_queries;
static CuResult fake_query(void) {
    return __atomic_fetch_add(&fake_queries, 1, __ATOMIC_RELAXED) % 2 ? 0 : CU_ERR_NOT_READY;
}
CuResult cuEventQuery(CuEvent e) {
    FAKE_ENTER(cuEventQuery);
    return e ? fake_query() : FAKE_ERR_INVALID_VALUE;
}
CuResult cuStreamQuery(CuStream st) {
    FAKE_ENTER(cuStreamQuery);
    return st ? fake_query() : FAKE_ERR_INVALID_VALUE;
}

/* ---- capture interaction mode: per thread, and how many threads chose the relaxed one ---- */
static _Thread_local int fake_capture_mode;   /* CU_STREAM_CAPTURE_MODE_GLOBAL */
static long fake_relaxed_threads;
CuResult cuThreadExchangeStreamCaptureMode(int *mode) {
    FAKE_ENTER(cuThreadExchangeStreamCaptureMode);
    if (!mode || *mode < 0 || *mode > CU_STREAM_CAPTURE_MODE_RELAXED) return FAKE_ERR_INVALID_VALUE;
    const int old = fake_capture_mode;
    fake_capture_mode = *mode;
    if (*mode == CU_STREAM_CAPTURE_MODE_RELAXED && old != CU_STREAM_CAPTURE_MODE_RELAXED) {
        pthread_mutex_lock(&fake_mu);
        fake_relaxed_threads++;
        pthread_mutex_unlock(&fake_mu);
    }
    *mode = old;
    return 0;
}

/* ---- for the tests (dlsym) ------------------------------------------------------------------ */
FAKE_EXPORT int fake_cuda_ctx_refs(int dev);
FAKE_EXPORT long fake_cuda_allocs(void);
FAKE_EXPORT long fake_cuda_relaxed_threads(void);
FAKE_EXPORT long fake_cuda_calls(const char *name);
/* Calls so far of the driver function `name` (its plain or versioned name); -1: no such one. */
long fake_cuda_calls(const char *name) {
    const int i = fake_index(name, strlen(name));
    if (i == FAKE_NFUNCS) return -1;
    pthread_mutex_lock(&fake_mu);
    long n = fake_calls[i];
    pthread_mutex_unlock(&fake_mu);
    return n;
}
/* Threads that switched themselves to the relaxed capture mode (cu_capture_relaxed). */
long fake_cuda_relaxed_threads(void) {
    pthread_mutex_lock(&fake_mu);
    long n = fake_relaxed_threads;
    pthread_mutex_unlock(&fake_mu);
    return n;
}
/* Primary context retains of dev not yet released (-1: no such device). */
int fake_cuda_ctx_refs(int dev) {
    if (dev < 0 || dev >= fake_ndev) return -1;
    pthread_mutex_lock(&fake_mu);
    int r = fake_ctx[dev].refs;
    pthread_mutex_unlock(&fake_mu);
    return r;
}
/* Host and device allocations not yet freed. */
long fake_cuda_allocs(void) {
    pthread_mutex_lock(&fake_mu);
    long n = fake_nallocs;
    pthread_mutex_unlock(&fake_mu);
    return n;
}
