/*
 * nccl_api_mem.c - the drop-in's memory calls: ncclMemAlloc/Free (cuMem memory exportable as
 * POSIX file descriptors, as NCCL makes it), buffer registration (ncclCommRegister: checked and
 * recorded; libmscclrt's collectives on unregistered buffers already need no exchange, so it
 * changes nothing but is kept honest), windows (ncclCommWindowRegister: libmscclrt windows,
 * which let zero-copy algorithms read and write peers' buffers) and PreMulSum operators.
 */
#include "nccl/nccl_internal.h"
#include "core/log.h"
#include "cuda/cuda_driver.h"
#include "cuda/cumem.h"

#include <stdlib.h>
#include <string.h>

/* ---- ncclMemAlloc ------------------------------------------------------------------------------- */
typedef struct MemBlock {
    CuDevPtr ptr;
    size_t size;
    struct MemBlock *next;
} MemBlock;
static pthread_mutex_t mem_mu = PTHREAD_MUTEX_INITIALIZER;
static MemBlock *mem_blocks;

ncclResult_t ncclMemAlloc(void **ptr, size_t size) {
    if (!ptr) return nccl_fail(ncclInvalidArgument, "ncclMemAlloc: ptr is NULL");
    *ptr = NULL;
    if (size == 0) return ncclSuccess;   /* as NCCL: nothing to allocate */
    if (cu_load() != MSCCLRT_SUCCESS) return nccl_result_init(MSCCLRT_ERR_UNAVAILABLE);
    CuContext ctx = NULL;
    CuDevice dev = 0;
    if (cu.cuCtxGetCurrent(&ctx) != CU_OK || !ctx || cu.cuCtxGetDevice(&dev) != CU_OK)
        return nccl_fail(ncclInvalidUsage, "ncclMemAlloc: no current CUDA device (call "
                         "cudaSetDevice first)");
    MemBlock *b = calloc(1, sizeof *b);
    if (!b) return nccl_fail(ncclSystemError, "ncclMemAlloc: out of memory");
    const mscclrt_result r = cumem_alloc(&b->ptr, &b->size, size, (int)dev);
    if (r != MSCCLRT_SUCCESS) {
        free(b);
        return nccl_result(r);
    }
    pthread_mutex_lock(&mem_mu);
    b->next = mem_blocks;
    mem_blocks = b;
    pthread_mutex_unlock(&mem_mu);
    *ptr = (void *)(uintptr_t)b->ptr;
    return ncclSuccess;
}

ncclResult_t ncclMemFree(void *ptr) {
    if (!ptr) return ncclSuccess;
    pthread_mutex_lock(&mem_mu);
    MemBlock *b = NULL;
    for (MemBlock **pp = &mem_blocks; *pp; pp = &(*pp)->next)
        if ((*pp)->ptr == (CuDevPtr)(uintptr_t)ptr) {
            b = *pp;
            *pp = b->next;
            break;
        }
    pthread_mutex_unlock(&mem_mu);
    if (!b) return nccl_fail(ncclInvalidArgument, "ncclMemFree: %p was not returned by "
                             "ncclMemAlloc (or was freed already)", ptr);
    cumem_free(b->ptr, b->size);
    free(b);
    return ncclSuccess;
}

/* ---- ncclCommRegister ------------------------------------------------------------------------------ */
typedef struct NcclReg {
    void *buf;
    size_t size;
    void *real;                    /* the real NCCL's handle when it has a mirror communicator */
    struct NcclReg *next;
} NcclReg;

ncclResult_t ncclCommRegister(const ncclComm_t comm, void *buff, size_t size, void **handle) {
    ncclResult_t res = nccl_comm_ready(comm, "ncclCommRegister");
    if (res != ncclSuccess) return res;
    if (!buff || !handle || size == 0)
        return nccl_fail(ncclInvalidArgument, "ncclCommRegister: rank %d: %s", comm->rank,
                         !buff ? "buff is NULL" : !handle ? "handle is NULL" : "size 0");
    /* the buffer must be device memory of one allocation: what a registration promises */
    CuDevPtr base = 0;
    size_t n = 0;
    if (cu.cuMemGetAddressRange(&base, &n, (CuDevPtr)(uintptr_t)buff) != CU_OK ||
        (CuDevPtr)(uintptr_t)buff - base + size > n)
        return nccl_fail(ncclInvalidArgument, "ncclCommRegister: rank %d: %p + %zu bytes is not "
                         "inside one device allocation", comm->rank, buff, size);
    NcclReg *g = calloc(1, sizeof *g);
    if (!g) return nccl_fail(ncclSystemError, "ncclCommRegister: out of memory");
    g->buf = buff;
    g->size = size;
    const NcclReal *real = nccl_real();
    if (comm->real && real && real->ncclCommRegister)
        real->ncclCommRegister(comm->real, buff, size, &g->real);
    g->next = comm->regs;
    comm->regs = g;
    *handle = g;
    return ncclSuccess;
}

ncclResult_t ncclCommDeregister(const ncclComm_t comm, void *handle) {
    ncclResult_t res = nccl_comm_ready(comm, "ncclCommDeregister");
    if (res != ncclSuccess) return res;
    for (NcclReg **pp = &comm->regs; *pp; pp = &(*pp)->next)
        if (*pp == handle) {
            NcclReg *g = *pp;
            *pp = g->next;
            const NcclReal *real = nccl_real();
            if (g->real && comm->real && real && real->ncclCommDeregister)
                real->ncclCommDeregister(comm->real, g->real);
            free(g);
            return ncclSuccess;
        }
    return nccl_fail(ncclInvalidArgument, "ncclCommDeregister: rank %d: %p is not a registration "
                     "handle of this communicator", comm->rank, handle);
}

/* ---- windows ------------------------------------------------------------------------------------- */
ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win,
                                    int flags) {
    ncclResult_t res = nccl_comm_ready(comm, "ncclCommWindowRegister");
    if (res != ncclSuccess) return res;
    if (!win) return nccl_fail(ncclInvalidArgument, "ncclCommWindowRegister: win is NULL");
    if (flags & ~NCCL_WIN_COLL_SYMMETRIC)
        return nccl_fail(ncclInvalidArgument, "ncclCommWindowRegister: flags %#x", flags);
    mscclrt_window *w = NULL;
    res = nccl_result(mscclrt_window_register(comm->rt, buff, size, &w));
    if (res == ncclSuccess) *win = (ncclWindow_t)w;
    return res;
}

ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
    ncclResult_t res = nccl_comm_ready(comm, "ncclCommWindowDeregister");
    if (res != ncclSuccess) return res;
    return nccl_result(mscclrt_window_deregister(comm->rt, (mscclrt_window *)win));
}

/* ---- PreMulSum ------------------------------------------------------------------------------------ */
ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm) {
    ncclResult_t res = nccl_comm_ready(comm, "ncclRedOpCreatePreMulSum");
    if (res != ncclSuccess) return res;
    if (!op) return nccl_fail(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: op is NULL");
    if ((unsigned)datatype >= ncclNumTypes)
        return nccl_fail(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: datatype %d", (int)datatype);
    if (residence != ncclScalarDevice && residence != ncclScalarHostImmediate)
        return nccl_fail(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: residence %d", (int)residence);
    int o = 0;
    res = nccl_result(mscclrt_redop_create_premulsum(comm->rt, &o, scalar, (mscclrt_dtype)datatype,
                                                     residence == ncclScalarHostImmediate
                                                         ? MSCCLRT_SCALAR_HOST : MSCCLRT_SCALAR_DEVICE));
    if (res == ncclSuccess) *op = (ncclRedOp_t)o;
    return res;
}

ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
    ncclResult_t res = nccl_comm_ready(comm, "ncclRedOpDestroy");
    if (res != ncclSuccess) return res;
    if ((int)op < ncclNumOps)
        return nccl_fail(ncclInvalidArgument, "ncclRedOpDestroy: %d is a built-in operator", (int)op);
    return nccl_result(mscclrt_redop_destroy(comm->rt, (int)op));
}
