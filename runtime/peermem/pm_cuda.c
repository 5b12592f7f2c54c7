/*
 * pm_cuda.c - peer memory's driver side (PmOps for real GPUs): allocations found with
 * cuMemGetAddressRange and told apart by their CUDA buffer id, described and mapped through
 * the communicator's IPC transport (legacy cuIpc handles; cuMem/VMM memory by its POSIX fd,
 * which travels in the announcement's datagram; between threads of one process the pointer
 * itself), and the kernels' table in device memory, written through a stream of its own
 * that waits for nothing else (a copy on the legacy stream would wait for kernels that may be
 * waiting for a peer).
 */
#include "peermem/pm_internal.h"
#include "core/err.h"
#include "cuda/cuda_driver.h"
#include "transport/ipc_abi.h"

#include <string.h>
#include <unistd.h>

static mscclrt_result cuda_resolve(void *ctx, uint64_t ptr, uint64_t *base, uint64_t *size, uint64_t *id) {
    (void)ctx;
    CuDevPtr b = 0;
    size_t n = 0;
    if (cu.cuMemGetAddressRange(&b, &n, (CuDevPtr)ptr) != CU_OK)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "%#llx is not device memory", (unsigned long long)ptr);
    unsigned long long buffer_id = 0;
    if (cu.cuPointerGetAttribute(&buffer_id, IPC_PTR_ATTR_BUFFER_ID, (CuDevPtr)ptr) != CU_OK)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "%#llx has no CUDA buffer id", (unsigned long long)ptr);
    *base = b, *size = n, *id = buffer_id;
    return MSCCLRT_SUCCESS;
}

static mscclrt_result cuda_describe(void *ctx, uint64_t base, uint64_t size, IpcDesc *desc, int *fd) {
    XportIpc *x = ctx;
    *fd = -1;
    TRY(xport_ipc_export(x, (CuDevPtr)base, (size_t)size, desc));
    if (desc->kind == IPC_KIND_VMM) *fd = xport_ipc_export_fd(x, desc);   /* travels with it */
    return MSCCLRT_SUCCESS;
}

static void cuda_forget(void *ctx, uint64_t base) { xport_ipc_deregister(ctx, (CuDevPtr)base); }

static mscclrt_result cuda_map(void *ctx, const IpcDesc *desc, int fd, uint64_t *base) {
    CuDevPtr p = 0;
    if (fd >= 0) TRY(xport_ipc_adopt_fd(ctx, desc, fd));
    TRY(xport_ipc_import(ctx, desc, &p));
    *base = p;
    return MSCCLRT_SUCCESS;
}

static void cuda_unmap(void *ctx, uint64_t base) { (void)xport_ipc_close(ctx, (CuDevPtr)base); }

static mscclrt_result cuda_table_alloc(void *ctx, size_t bytes, uint64_t *dev) {
    (void)ctx;
    CuDevPtr d = 0;
    TRY(cu_check(cu.cuMemAlloc(&d, bytes), "cuMemAlloc(peer memory table)"));
    mscclrt_result res = cu_check(cu.cuMemsetD8(d, 0, bytes), "cuMemsetD8(peer memory table)");
    if (res != MSCCLRT_SUCCESS) {
        cu.cuMemFree(d);
        return res;
    }
    *dev = d;
    return MSCCLRT_SUCCESS;
}

static mscclrt_result cuda_table_write(void *ctx, uint64_t dev, const void *src, size_t bytes) {
    (void)ctx;
    /* a stream per write: it belongs to the current context (the comm's), and tables change
     * only when an allocation is announced or retired */
    CuStream st = NULL;
    mscclrt_result res = cu_check(cu.cuStreamCreate(&st, CU_STREAM_FLAG_NON_BLOCKING),
                                  "cuStreamCreate(peer memory table)");
    if (res == MSCCLRT_SUCCESS)
        res = cu_check(cu.cuMemcpyHtoDAsync((CuDevPtr)dev, src, bytes, st),
                       "cuMemcpyHtoDAsync(peer memory table)");
    if (res == MSCCLRT_SUCCESS)
        res = cu_check(cu.cuStreamSynchronize(st), "cuStreamSynchronize(peer memory table)");
    if (st) cu.cuStreamDestroy(st);
    return res;
}

static void cuda_table_free(void *ctx, uint64_t dev) {
    (void)ctx;
    cu.cuMemFree((CuDevPtr)dev);
}

const PmOps pm_cuda_ops = {cuda_resolve, cuda_describe, cuda_forget, cuda_map, cuda_unmap,
                           cuda_table_alloc, cuda_table_write, cuda_table_free};

/* ---- the ranks of one process: the pointer itself ------------------------------------------ */
static mscclrt_result local_describe(void *ctx, uint64_t base, uint64_t size, IpcDesc *desc, int *fd) {
    const PmLocalRank *me = ctx;
    *fd = -1;
    memset(desc, 0, sizeof *desc);
    desc->magic = IPC_DESC_MAGIC;
    desc->version = IPC_DESC_VERSION;
    desc->kind = IPC_KIND_LEGACY;   /* nothing to open: the importer uses base */
    desc->owner_rank = me->rank;
    desc->owner_pid = (int32_t)getpid();
    desc->base = base;
    desc->size = size;
    desc->bytes = size;
    desc->device = me->device;
    return MSCCLRT_SUCCESS;
}

static void local_forget(void *ctx, uint64_t base) { (void)ctx, (void)base; }

/* the importer's device may reach the owner's memory: peer access from the current context to
 * the one that owns it (nothing to do on the same device) */
static mscclrt_result local_map(void *ctx, const IpcDesc *desc, int fd, uint64_t *base) {
    const PmLocalRank *me = ctx;
    if (fd >= 0) close(fd);
    if (desc->device != me->device) {
        CuContext owner = NULL;
        TRY(cu_check(cu.cuPointerGetAttribute(&owner, IPC_PTR_ATTR_CONTEXT, (CuDevPtr)desc->base),
                     "peer memory: cuPointerGetAttribute(CONTEXT) of a rank's allocation"));
        const CuResult r = cu.cuCtxEnablePeerAccess(owner, 0);
        if (r != CU_OK && r != CU_ERR_PEER_ACCESS_ALREADY_ENABLED)
            return cu_check(r, "peer memory: cuCtxEnablePeerAccess");
    }
    *base = desc->base;
    return MSCCLRT_SUCCESS;
}

static void local_unmap(void *ctx, uint64_t base) { (void)ctx, (void)base; }

const PmOps pm_local_ops = {cuda_resolve, local_describe, local_forget, local_map, local_unmap,
                            cuda_table_alloc, cuda_table_write, cuda_table_free};
