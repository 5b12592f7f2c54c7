/*
 * nccl_api_coll.c - the drop-in's collectives, point-to-point calls and groups: each is the
 * libmscclrt call of the same shape (whose selector picks registered plans, then native
 * algorithms), or a forward to the real NCCL when MSCCLRT_FORCE_NCCL names the collective or
 * libmscclrt has no algorithm for it (MSCCLRT_ERR_UNAVAILABLE). Types and operators keep
 * NCCL's values (mscclrt's enums were made equal), so nothing is translated but results.
 */
#include "nccl/nccl_internal.h"
#include "core/log.h"

#include <string.h>

/* ---- groups, ours and the real NCCL's ----------------------------------------------------------
 * A group opens ours at once; the real NCCL's is opened by the first forwarded call inside it
 * (its communicator may have to be made first, which must happen outside its group) and closed
 * with ours. */
static _Thread_local int depth;
static _Thread_local bool real_open;

ncclResult_t ncclGroupStart(void) {
    depth++;
    return nccl_result(mscclrt_group_start());
}

static ncclResult_t close_real(void) {
    if (!real_open) return ncclSuccess;
    real_open = false;
    const NcclReal *real = nccl_real();
    return real && real->ncclGroupEnd ? real->ncclGroupEnd() : ncclSuccess;
}

ncclResult_t ncclGroupEnd(void) {
    if (depth <= 0) return nccl_fail(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
    depth--;
    ncclResult_t res = nccl_result(mscclrt_group_end());
    if (depth == 0) {
        const ncclResult_t r = close_real();
        if (res == ncclSuccess) res = r;
    }
    return res;
}

ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t *info) {
    if (depth <= 0) return nccl_fail(ncclInvalidUsage, "ncclGroupSimulateEnd without ncclGroupStart");
    if (info && (info->magic != 0x74685283 || info->size < sizeof(size_t) * 2 + sizeof(float)))
        return nccl_fail(ncclInvalidArgument, "ncclGroupSimulateEnd: simInfo was not initialised "
                         "with NCCL_SIM_INFO_INITIALIZER (magic %#x, size %zu)", info->magic,
                         info->size);
    depth--;
    double us = 0;
    ncclResult_t res = nccl_result(mscclrt_group_simulate_end(&us));
    if (depth == 0 && real_open) {   /* forwarded calls cannot be taken back: they run */
        real_open = false;
        const NcclReal *real = nccl_real();
        if (real && real->ncclGroupEnd) real->ncclGroupEnd();
        LOG_WARN("ncclGroupSimulateEnd: calls forwarded to the real NCCL in this group ran; only "
                 "libmscclrt's own calls were simulated");
    }
    if (info && res == ncclSuccess) info->estimatedTime = (float)us;
    return res;
}

/* ---- forwarding ---------------------------------------------------------------------------------- */
ncclResult_t nccl_forward_begin(ncclComm_t comm, const NcclReal **real, ncclComm_t *rc,
                                const char *fn) {
    ncclResult_t err = ncclSuccess;
    *rc = nccl_comm_real(comm, &err);
    if (!*rc) return err;
    *real = nccl_real();
    if (depth > 0 && !real_open) {
        if ((*real)->ncclGroupStart && (err = (*real)->ncclGroupStart()) != ncclSuccess)
            return nccl_fail(err, "%s: the real NCCL's ncclGroupStart failed", fn);
        real_open = true;
    }
    LOG_TRACE(LOG_SUB_SHIM, "rank %d: %s forwarded to the real NCCL", comm->rank, fn);
    return ncclSuccess;
}

/* Our PreMulSum operators are ours: the real NCCL cannot take them. */
static ncclResult_t premul_fwd(ncclRedOp_t op) {
    if ((int)op < ncclNumOps) return ncclSuccess;
    return nccl_fail(ncclInvalidUsage, "a PreMulSum operator of libmscclrt (%d) cannot be handed to "
                     "the real NCCL (MSCCLRT_FORCE_NCCL names this collective)", (int)op);
}

/* Checks common to every collective; *fwd tells whether MSCCLRT_FORCE_NCCL sends it away. */
static ncclResult_t pre(ncclComm_t comm, ncclDataType_t dt, unsigned coll, bool *fwd,
                        const char *fn) {
    ncclResult_t res = nccl_comm_ready(comm, fn);
    if (res != ncclSuccess) return res;
    if ((unsigned)dt >= ncclNumTypes)
        return nccl_fail(ncclInvalidArgument, "%s: rank %d: datatype %d out of range [0, %d)", fn,
                         comm->rank, (int)dt, ncclNumTypes);
    const char *why = NULL;
    unsigned mask = 0;
    if ((res = nccl_force_mask(&mask, &why)) != ncclSuccess)
        return nccl_fail(res, "%s: MSCCLRT_FORCE_NCCL: %s", fn, why ? why : "bad value");
    *fwd = (mask & coll) != 0;
    return ncclSuccess;
}

/* A libmscclrt result: done, or forwarded when nothing of ours serves it and a real NCCL is
 * there (selection order: registered plans, native algorithms, the real NCCL). */
#define SERVE(comm, coll_bit, fn, ours, theirs)                                                \
    do {                                                                                       \
        bool fwd_ = false;                                                                     \
        ncclResult_t pr_ = pre(comm, datatype, coll_bit, &fwd_, fn);                           \
        if (pr_ != ncclSuccess) return pr_;                                                    \
        if (!fwd_) {                                                                           \
            const mscclrt_result r_ = (ours);                                                  \
            if (r_ != MSCCLRT_ERR_UNAVAILABLE || !nccl_real()) return nccl_result(r_);         \
            LOG_INFO(LOG_SUB_SHIM, "%s: %s; forwarding to the real NCCL", fn,                  \
                     mscclrt_last_error());                                                    \
        }                                                                                      \
        const NcclReal *real_;                                                                 \
        ncclComm_t rc_;                                                                        \
        if ((pr_ = nccl_forward_begin(comm, &real_, &rc_, fn)) != ncclSuccess) return pr_;     \
        return (theirs);                                                                       \
    } while (0)

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
    SERVE(comm, NCCL_COLL(ALLREDUCE), "ncclAllReduce",
          mscclrt_allreduce(comm->rt, sendbuff, recvbuff, count, (mscclrt_dtype)datatype, (int)op, stream),
          (premul_fwd(op) ? premul_fwd(op) : real_->ncclAllReduce(sendbuff, recvbuff, count, datatype, op, rc_, stream)));
}

ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
    SERVE(comm, NCCL_COLL(ALLGATHER), "ncclAllGather",
          mscclrt_allgather(comm->rt, sendbuff, recvbuff, sendcount, (mscclrt_dtype)datatype, stream),
          real_->ncclAllGather(sendbuff, recvbuff, sendcount, datatype, rc_, stream));
}

ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream) {
    SERVE(comm, NCCL_COLL(REDUCESCATTER), "ncclReduceScatter",
          mscclrt_reducescatter(comm->rt, sendbuff, recvbuff, recvcount, (mscclrt_dtype)datatype,
                                (int)op, stream),
          (premul_fwd(op) ? premul_fwd(op) : real_->ncclReduceScatter(sendbuff, recvbuff, recvcount, datatype, op, rc_, stream)));
}

ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
    SERVE(comm, NCCL_COLL(BROADCAST), "ncclBroadcast",
          mscclrt_broadcast(comm->rt, sendbuff, recvbuff, count, (mscclrt_dtype)datatype, root, stream),
          real_->ncclBroadcast(sendbuff, recvbuff, count, datatype, root, rc_, stream));
}

ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root,
                       ncclComm_t comm, cudaStream_t stream) {
    return ncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}

ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count,
                        ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                        cudaStream_t stream) {
    SERVE(comm, NCCL_COLL(REDUCE), "ncclReduce",
          mscclrt_reduce(comm->rt, sendbuff, recvbuff, count, (mscclrt_dtype)datatype, (int)op, root,
                         stream),
          (premul_fwd(op) ? premul_fwd(op) : real_->ncclReduce(sendbuff, recvbuff, count, datatype, op, root, rc_, stream)));
}

ncclResult_t ncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count,
                          ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
    SERVE(comm, NCCL_COLL(ALLTOALL), "ncclAlltoAll",
          mscclrt_alltoall(comm->rt, sendbuff, recvbuff, count, (mscclrt_dtype)datatype, stream),
          real_->ncclAlltoAll(sendbuff, recvbuff, count, datatype, rc_, stream));
}

ncclResult_t ncclGather(const void *sendbuff, void *recvbuff, size_t count,
                        ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
    SERVE(comm, NCCL_COLL(GATHER), "ncclGather",
          mscclrt_gather(comm->rt, sendbuff, recvbuff, count, (mscclrt_dtype)datatype, root, stream),
          real_->ncclGather(sendbuff, recvbuff, count, datatype, root, rc_, stream));
}

ncclResult_t ncclScatter(const void *sendbuff, void *recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
    SERVE(comm, NCCL_COLL(SCATTER), "ncclScatter",
          mscclrt_scatter(comm->rt, sendbuff, recvbuff, count, (mscclrt_dtype)datatype, root, stream),
          real_->ncclScatter(sendbuff, recvbuff, count, datatype, root, rc_, stream));
}

ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
    SERVE(comm, NCCL_COLL(SENDRECV), "ncclSend",
          mscclrt_send(comm->rt, sendbuff, count, (mscclrt_dtype)datatype, peer, stream),
          real_->ncclSend(sendbuff, count, datatype, peer, rc_, stream));
}

ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
    SERVE(comm, NCCL_COLL(SENDRECV), "ncclRecv",
          mscclrt_recv(comm->rt, recvbuff, count, (mscclrt_dtype)datatype, peer, stream),
          real_->ncclRecv(recvbuff, count, datatype, peer, rc_, stream));
}
