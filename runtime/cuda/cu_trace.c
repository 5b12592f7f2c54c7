/*
 * cu_trace.c - MSCCLRT_DEBUG=TRACE with ALLOC among MSCCLRT_DEBUG_SUBSYS: every device
 * allocation, free, IPC open and close, and VMM reserve/map/unmap/free the library makes is
 * logged with its address, size, result and the library code that asked (shared object and
 * offset: `addr2line -f -e libmscclrt.so.0 OFFSET` names the function). cu_open installs these
 * wrappers in place of the driver's entries; the application's own allocations are not seen.
 * Why it exists: a range the library releases twice, or releases while another owner (the
 * application's caching allocator) has since been given it, shows up much later as an illegal
 * address in someone else's kernel; this log names the release.
 */
#include "cuda/cuda_driver.h"
#include "core/log.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>

static __typeof__(cu.cuMemAlloc) real_alloc;
static __typeof__(cu.cuMemFree) real_free;
static __typeof__(cu.cuIpcOpenMemHandle) real_ipc_open;
static __typeof__(cu.cuIpcCloseMemHandle) real_ipc_close;
static __typeof__(cu.cuMemAddressReserve) real_reserve;
static __typeof__(cu.cuMemAddressFree) real_addr_free;
static __typeof__(cu.cuMemMap) real_map;
static __typeof__(cu.cuMemUnmap) real_unmap;

/* "libmscclrt.so.0+0x1234": where in which object the call came from */
static void where(const void *ra, char *buf, size_t len) {
    Dl_info di;
    if (ra && dladdr(ra, &di) && di.dli_fname) {
        const char *base = di.dli_fname;
        for (const char *p = base; *p; p++)
            if (*p == '/') base = p + 1;
        snprintf(buf, len, "%s+%#lx%s%s", base,
                 (unsigned long)((uintptr_t)ra - (uintptr_t)di.dli_fbase),
                 di.dli_sname ? " near " : "", di.dli_sname ? di.dli_sname : "");
    } else {
        snprintf(buf, len, "%p", ra);
    }
}

#define TRACE_CALL(fmt, ...) do { \
        char at_[256]; \
        where(__builtin_return_address(0), at_, sizeof at_); \
        LOG_TRACE(LOG_SUB_ALLOC, fmt " from %s", __VA_ARGS__, at_); \
    } while (0)

/* the address a call returned through *p, or 0 when it failed (*p is then not set) */
static unsigned long long got(CuResult r, const CuDevPtr *p) {
    return r == CU_OK ? (unsigned long long)*p : 0ull;
}

static CuResult t_alloc(CuDevPtr *p, size_t n) {
    CuResult r = real_alloc(p, n);
    TRACE_CALL("cuMemAlloc(%zu) = %#llx (result %d)", n, got(r, p), (int)r);
    return r;
}
static CuResult t_free(CuDevPtr p) {
    CuResult r = real_free(p);
    TRACE_CALL("cuMemFree(%#llx) (result %d)", (unsigned long long)p, (int)r);
    return r;
}
static CuResult t_ipc_open(CuDevPtr *p, CuIpcMemHandle h, unsigned flags) {
    CuResult r = real_ipc_open(p, h, flags);
    TRACE_CALL("cuIpcOpenMemHandle = %#llx (result %d)", got(r, p), (int)r);
    return r;
}
static CuResult t_ipc_close(CuDevPtr p) {
    CuResult r = real_ipc_close(p);
    TRACE_CALL("cuIpcCloseMemHandle(%#llx) (result %d)", (unsigned long long)p, (int)r);
    return r;
}
static CuResult t_reserve(CuDevPtr *p, size_t n, size_t align, CuDevPtr addr,
                          unsigned long long flags) {
    CuResult r = real_reserve(p, n, align, addr, flags);
    TRACE_CALL("cuMemAddressReserve(%zu) = %#llx (result %d)", n, got(r, p), (int)r);
    return r;
}
static CuResult t_addr_free(CuDevPtr p, size_t n) {
    CuResult r = real_addr_free(p, n);
    TRACE_CALL("cuMemAddressFree(%#llx, %zu) (result %d)", (unsigned long long)p, n, (int)r);
    return r;
}
static CuResult t_map(CuDevPtr p, size_t n, size_t off, CuMemHandle h, unsigned long long flags) {
    CuResult r = real_map(p, n, off, h, flags);
    TRACE_CALL("cuMemMap(%#llx, %zu) (result %d)", (unsigned long long)p, n, (int)r);
    return r;
}
static CuResult t_unmap(CuDevPtr p, size_t n) {
    CuResult r = real_unmap(p, n);
    TRACE_CALL("cuMemUnmap(%#llx, %zu) (result %d)", (unsigned long long)p, n, (int)r);
    return r;
}

void cu_trace_install(CudaDriver *d) {
    real_alloc = d->cuMemAlloc, d->cuMemAlloc = t_alloc;
    real_free = d->cuMemFree, d->cuMemFree = t_free;
    real_ipc_open = d->cuIpcOpenMemHandle, d->cuIpcOpenMemHandle = t_ipc_open;
    real_ipc_close = d->cuIpcCloseMemHandle, d->cuIpcCloseMemHandle = t_ipc_close;
    real_reserve = d->cuMemAddressReserve, d->cuMemAddressReserve = t_reserve;
    real_addr_free = d->cuMemAddressFree, d->cuMemAddressFree = t_addr_free;
    real_map = d->cuMemMap, d->cuMemMap = t_map;
    real_unmap = d->cuMemUnmap, d->cuMemUnmap = t_unmap;
    LOG_TRACE(LOG_SUB_ALLOC, "tracing the library's device allocations, frees and mappings");
}
