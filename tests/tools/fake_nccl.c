/*
 * fake_nccl.c - a stand-in for the real libnccl.so.2 in tests that need no GPU: exports every
 * function of runtime/nccl/nccl_funcs.def (with nccl_abi.h's prototypes, so a signature that
 * drifts does not compile), appends one line per call ("name key=value ...") to the file named by
 * FAKE_NCCL_LOG, and returns ncclSuccess with plausible outputs (version 22809, comm handles that
 * remember nranks/rank, a filled unique id, teams, handles). Built three ways (module.mk):
 *   libfake_nccl.so         the above
 *   libfake_nccl_old.so     -DFAKE_NCCL_OLD: an NCCL 2.27.3 without 2.28's calls (revoke and the
 *                           device API), to test missing symbols
 *   libfake_nccl_marked.so  -DFAKE_NCCL_MARKED: exports ncclMscclrtShim, as a copy of the drop-in
 *                           does, and reports version 29999 (to see which library served a call)
 * Test-only code: never part of the drop-in.
 */
#define MSCCLRT_NCCL_DEVICE_TYPES
#include "nccl/nccl_abi.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(FAKE_NCCL_MARKED)
#define FAKE_VERSION 29999
NCCL_ABI_EXPORT extern const char ncclMscclrtShim[];
const char ncclMscclrtShim[] = "fake copy of libmscclrt_nccl";
#elif defined(FAKE_NCCL_OLD)
#define FAKE_VERSION 22703
#else
#define FAKE_VERSION 22809
#endif

#define FAKE_MAGIC 0xfa4ec033u

/* What a fake communicator handle points to. */
struct ncclComm {
    unsigned magic;             /* FAKE_MAGIC while alive */
    int nranks, rank;
};

static void flog(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void flog(const char *fmt, ...) {
    const char *path = getenv("FAKE_NCCL_LOG");
    char line[512];
    va_list ap;
    int n, fd;

    if (!path || !*path) return;
    va_start(ap, fmt);
    n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n > sizeof line - 2) n = (int)sizeof line - 2;
    line[n++] = '\n';
    fd = open(path, O_WRONLY | O_APPEND | O_CREAT, 0644);
    if (fd < 0) return;
    if (write(fd, line, (size_t)n) != n) { /* a test reading the log will notice */ }
    close(fd);
}

static ncclComm_t new_comm(int nranks, int rank) {
    ncclComm_t c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->magic = FAKE_MAGIC;
    c->nranks = nranks;
    c->rank = rank;
    return c;
}

static int comm_ok(ncclComm_t c) { return c && c->magic == FAKE_MAGIC; }

/* ---- memory, version, ids, communicators ----------------------------------------------------- */
ncclResult_t ncclMemAlloc(void **ptr, size_t size) {
    flog("ncclMemAlloc size=%zu", size);
    *ptr = malloc(size ? size : 1);
    return *ptr ? ncclSuccess : ncclSystemError;
}

ncclResult_t ncclMemFree(void *ptr) {
    flog("ncclMemFree ptr=%p", ptr);
    free(ptr);
    return ncclSuccess;
}

ncclResult_t ncclGetVersion(int *version) {
    flog("ncclGetVersion");
    *version = FAKE_VERSION;
    return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId) {
    flog("ncclGetUniqueId");
    memset(uniqueId->internal, 'F', sizeof uniqueId->internal);
    return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t *config) {
    flog("ncclCommInitRankConfig nranks=%d rank=%d id=%c config.version=%u", nranks, rank,
         commId.internal[0], config ? config->version : 0);
    *comm = new_comm(nranks, rank);
    return *comm ? ncclSuccess : ncclSystemError;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank) {
    int v = 0;
    /* called through the PLT: with RTLD_DEEPBIND this is our own ncclGetVersion even when another
     * library exporting one sits in the global scope */
    ncclGetVersion(&v);
    flog("ncclCommInitRank nranks=%d rank=%d id=%c via_version=%d", nranks, rank,
         commId.internal[0], v);
    *comm = new_comm(nranks, rank);
    return *comm ? ncclSuccess : ncclSystemError;
}

ncclResult_t ncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist) {
    flog("ncclCommInitAll ndev=%d devlist=%p", ndev, (const void *)devlist);
    for (int i = 0; i < ndev; i++) comm[i] = new_comm(ndev, i);
    return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
    flog("ncclCommFinalize comm=%p", (void *)comm);
    return comm_ok(comm) ? ncclSuccess : ncclInvalidArgument;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
    flog("ncclCommDestroy comm=%p", (void *)comm);
    if (!comm_ok(comm)) return ncclInvalidArgument;
    comm->magic = 0;
    free(comm);
    return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
    flog("ncclCommAbort comm=%p", (void *)comm);
    if (!comm_ok(comm)) return ncclInvalidArgument;
    comm->magic = 0;
    free(comm);
    return ncclSuccess;
}

#ifndef FAKE_NCCL_OLD
ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags) {
    flog("ncclCommRevoke comm=%p flags=%d", (void *)comm, revokeFlags);
    return comm_ok(comm) ? ncclSuccess : ncclInvalidArgument;
}
#endif

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                           ncclConfig_t *config) {
    flog("ncclCommSplit comm=%p color=%d key=%d config=%p", (void *)comm, color, key,
         (void *)config);
    *newcomm = color == NCCL_SPLIT_NOCOLOR ? NULL : new_comm(1, 0);
    return ncclSuccess;
}

ncclResult_t ncclCommShrink(ncclComm_t comm, int *excludeRanksList, int excludeRanksCount,
                            ncclComm_t *newcomm, ncclConfig_t *config, int shrinkFlags) {
    flog("ncclCommShrink comm=%p exclude=%d flags=%d", (void *)comm, excludeRanksCount,
         shrinkFlags);
    *newcomm = new_comm(comm_ok(comm) ? comm->nranks - excludeRanksCount : 1, 0);
    return ncclSuccess;
}

ncclResult_t ncclCommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank, int nId,
                                      ncclUniqueId *commIds, ncclConfig_t *config) {
    flog("ncclCommInitRankScalable nranks=%d rank=%d nId=%d", nranks, myrank, nId);
    *newcomm = new_comm(nranks, myrank);
    return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t result) {
    flog("ncclGetErrorString result=%d", (int)result);
    return result == ncclSuccess ? "fake: no error" : "fake: error";
}

const char *ncclGetLastError(ncclComm_t comm) {
    flog("ncclGetLastError comm=%p", (void *)comm);
    return "fake: no last error";
}

void ncclResetDebugInit(void) { flog("ncclResetDebugInit"); }

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError) {
    flog("ncclCommGetAsyncError comm=%p", (void *)comm);
    *asyncError = ncclSuccess;
    return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int *count) {
    flog("ncclCommCount comm=%p", (void *)comm);
    if (!comm_ok(comm)) return ncclInvalidArgument;
    *count = comm->nranks;
    return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device) {
    flog("ncclCommCuDevice comm=%p", (void *)comm);
    *device = 0;
    return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank) {
    flog("ncclCommUserRank comm=%p", (void *)comm);
    if (!comm_ok(comm)) return ncclInvalidArgument;
    *rank = comm->rank;
    return ncclSuccess;
}

ncclResult_t ncclCommRegister(const ncclComm_t comm, void *buff, size_t size, void **handle) {
    flog("ncclCommRegister comm=%p buff=%p size=%zu", (void *)comm, buff, size);
    *handle = buff;
    return ncclSuccess;
}

ncclResult_t ncclCommDeregister(const ncclComm_t comm, void *handle) {
    flog("ncclCommDeregister comm=%p handle=%p", (void *)comm, handle);
    return ncclSuccess;
}

ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win,
                                    int winFlags) {
    flog("ncclCommWindowRegister comm=%p buff=%p size=%zu flags=%d", (void *)comm, buff, size,
         winFlags);
    *win = (ncclWindow_t)buff;
    return ncclSuccess;
}

ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
    flog("ncclCommWindowDeregister comm=%p win=%p", (void *)comm, (void *)win);
    return ncclSuccess;
}

/* ---- reduction operators --------------------------------------------------------------------- */
ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm) {
    flog("ncclRedOpCreatePreMulSum datatype=%d residence=%d comm=%p", (int)datatype,
         (int)residence, (void *)comm);
    *op = (ncclRedOp_t)ncclNumOps;
    return ncclSuccess;
}

ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
    flog("ncclRedOpDestroy op=%d comm=%p", (int)op, (void *)comm);
    return ncclSuccess;
}

/* ---- collectives and point-to-point: logged, nothing moved ----------------------------------- */
ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count,
                        ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                        cudaStream_t stream) {
    flog("ncclReduce sendbuff=%p recvbuff=%p count=%zu datatype=%d op=%d root=%d comm=%p "
         "stream=%p", sendbuff, recvbuff, count, (int)datatype, (int)op, root, (void *)comm,
         (void *)stream);
    return ncclSuccess;
}

ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root,
                       ncclComm_t comm, cudaStream_t stream) {
    flog("ncclBcast buff=%p count=%zu datatype=%d root=%d comm=%p stream=%p", buff, count,
         (int)datatype, root, (void *)comm, (void *)stream);
    return ncclSuccess;
}

ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream) {
    flog("ncclBroadcast sendbuff=%p recvbuff=%p count=%zu datatype=%d root=%d comm=%p stream=%p",
         sendbuff, recvbuff, count, (int)datatype, root, (void *)comm, (void *)stream);
    return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
    flog("ncclAllReduce sendbuff=%p recvbuff=%p count=%zu datatype=%d op=%d comm=%p stream=%p",
         sendbuff, recvbuff, count, (int)datatype, (int)op, (void *)comm, (void *)stream);
    return ncclSuccess;
}

ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream) {
    flog("ncclReduceScatter sendbuff=%p recvbuff=%p recvcount=%zu datatype=%d op=%d comm=%p "
         "stream=%p", sendbuff, recvbuff, recvcount, (int)datatype, (int)op, (void *)comm,
         (void *)stream);
    return ncclSuccess;
}

ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
    flog("ncclAllGather sendbuff=%p recvbuff=%p sendcount=%zu datatype=%d comm=%p stream=%p",
         sendbuff, recvbuff, sendcount, (int)datatype, (void *)comm, (void *)stream);
    return ncclSuccess;
}

ncclResult_t ncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count,
                          ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
    flog("ncclAlltoAll sendbuff=%p recvbuff=%p count=%zu datatype=%d comm=%p stream=%p",
         sendbuff, recvbuff, count, (int)datatype, (void *)comm, (void *)stream);
    return ncclSuccess;
}

ncclResult_t ncclGather(const void *sendbuff, void *recvbuff, size_t count,
                        ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
    flog("ncclGather sendbuff=%p recvbuff=%p count=%zu datatype=%d root=%d comm=%p stream=%p",
         sendbuff, recvbuff, count, (int)datatype, root, (void *)comm, (void *)stream);
    return ncclSuccess;
}

ncclResult_t ncclScatter(const void *sendbuff, void *recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
    flog("ncclScatter sendbuff=%p recvbuff=%p count=%zu datatype=%d root=%d comm=%p stream=%p",
         sendbuff, recvbuff, count, (int)datatype, root, (void *)comm, (void *)stream);
    return ncclSuccess;
}

ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
    flog("ncclSend sendbuff=%p count=%zu datatype=%d peer=%d comm=%p stream=%p", sendbuff, count,
         (int)datatype, peer, (void *)comm, (void *)stream);
    return ncclSuccess;
}

ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
    flog("ncclRecv recvbuff=%p count=%zu datatype=%d peer=%d comm=%p stream=%p", recvbuff, count,
         (int)datatype, peer, (void *)comm, (void *)stream);
    return ncclSuccess;
}

/* ---- groups ---------------------------------------------------------------------------------- */
ncclResult_t ncclGroupStart(void) { flog("ncclGroupStart"); return ncclSuccess; }
ncclResult_t ncclGroupEnd(void) { flog("ncclGroupEnd"); return ncclSuccess; }

ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t *simInfo) {
    flog("ncclGroupSimulateEnd");
    simInfo->estimatedTime = 1.0f;
    return ncclSuccess;
}

#ifndef FAKE_NCCL_OLD
/* ---- device API host calls ------------------------------------------------------------------- */
ncclResult_t ncclDevCommCreate(ncclComm_t comm, ncclDevCommRequirements_t const *reqs,
                               ncclDevComm_t *outDevComm) {
    flog("ncclDevCommCreate comm=%p lsaBarrierCount=%d", (void *)comm,
         reqs ? reqs->lsaBarrierCount : -1);
    if (!comm_ok(comm)) return ncclInvalidArgument;
    memset(outDevComm, 0, sizeof *outDevComm);
    outDevComm->rank = outDevComm->lsaRank = comm->rank;
    outDevComm->nRanks = outDevComm->lsaSize = comm->nranks;
    return ncclSuccess;
}

ncclResult_t ncclDevCommDestroy(ncclComm_t comm, ncclDevComm_t const *devComm) {
    flog("ncclDevCommDestroy comm=%p devComm.nRanks=%d", (void *)comm, devComm->nRanks);
    return ncclSuccess;
}

static ncclTeam_t team_of(ncclComm_t comm, int stride) {
    ncclTeam_t t = {comm_ok(comm) ? comm->nranks : 0, comm_ok(comm) ? comm->rank : 0, stride};
    return t;
}

ncclTeam_t ncclTeamWorld(ncclComm_t comm) {
    flog("ncclTeamWorld comm=%p", (void *)comm);
    return team_of(comm, 1);
}

ncclTeam_t ncclTeamLsa(ncclComm_t comm) {
    flog("ncclTeamLsa comm=%p", (void *)comm);
    return team_of(comm, 1);
}

ncclTeam_t ncclTeamRail(ncclComm_t comm) {
    ncclTeam_t t = {1, 0, comm_ok(comm) ? comm->nranks : 1};
    flog("ncclTeamRail comm=%p", (void *)comm);
    return t;
}

int ncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank) {
    flog("ncclTeamRankToWorld comm=%p team.nRanks=%d rank=%d", (void *)comm, team.nRanks, rank);
    return rank * team.stride;
}

int ncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, int rank) {
    flog("ncclTeamRankToLsa comm=%p team.nRanks=%d rank=%d", (void *)comm, team.nRanks, rank);
    return rank * team.stride;
}

ncclResult_t ncclLsaBarrierCreateRequirement(ncclTeam_t team, int nBarriers,
                                             ncclLsaBarrierHandle_t *outHandle,
                                             ncclDevResourceRequirements_t *outReq) {
    flog("ncclLsaBarrierCreateRequirement team.nRanks=%d nBarriers=%d", team.nRanks, nBarriers);
    memset(outReq, 0, sizeof *outReq);
    outReq->bufferSize = (size_t)nBarriers * (size_t)(3 + team.nRanks) * 4;
    outReq->bufferAlign = 16;
    outReq->outBufferHandle = &outHandle->bufHandle;
    outHandle->nBarriers = nBarriers;
    return ncclSuccess;
}

ncclResult_t ncclGinBarrierCreateRequirement(ncclComm_t comm, ncclTeam_t team, int nBarriers,
                                             ncclGinBarrierHandle_t *outHandle,
                                             ncclDevResourceRequirements_t *outReq) {
    flog("ncclGinBarrierCreateRequirement comm=%p team.nRanks=%d nBarriers=%d", (void *)comm,
         team.nRanks, nBarriers);
    memset(outReq, 0, sizeof *outReq);
    outReq->ginSignalCount = nBarriers;
    outReq->outGinSignalStart = &outHandle->signal0;
    outReq->outBufferHandle = &outHandle->bufHandle;
    return ncclSuccess;
}

int ncclLLA2ACalcSlots(int maxElts, int maxEltSize) {
    flog("ncclLLA2ACalcSlots maxElts=%d maxEltSize=%d", maxElts, maxEltSize);
    return maxElts * ((maxEltSize + 7) / 8);
}

ncclResult_t ncclLLA2ACreateRequirement(int nBlocks, int nSlots, ncclLLA2AHandle_t *outHandle,
                                        ncclDevResourceRequirements_t *outReq) {
    flog("ncclLLA2ACreateRequirement nBlocks=%d nSlots=%d", nBlocks, nSlots);
    memset(outReq, 0, sizeof *outReq);
    outReq->bufferSize = (size_t)nBlocks * (size_t)(1 + 2 * nSlots) * 16;
    outReq->bufferAlign = 16;
    outReq->outBufferHandle = &outHandle->bufHandle;
    outHandle->nSlots = (uint32_t)nSlots;
    return ncclSuccess;
}

void ncclResetDebugInitInternal(void) { flog("ncclResetDebugInitInternal"); }
#endif /* !FAKE_NCCL_OLD */
