/*
 * nccl_api_comm.c - the drop-in's communicator calls: ids, creation (blocking and
 * non-blocking, by rank, for all devices of a process, scalable, split, shrink), queries,
 * health, finalize/destroy/abort/revoke, version and error strings. Each is a libmscclrt call;
 * the real NCCL's mirror communicator (for forwarded calls) is made here on first need.
 */
#include "nccl/nccl_internal.h"
#include "core/log.h"
#include "cuda/cuda_driver.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct NcclClique {
    pthread_mutex_t mu;
    int n;
    ncclComm_t *comms;             /* ours, [n] */
    int *devs;
    bool real_made;
    int live;
};

/* ---- errors ---------------------------------------------------------------------------------- */
static _Thread_local char last_error[1024];

void nccl_set_last_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
}

ncclResult_t nccl_fail(ncclResult_t r, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    LOG_WARN("nccl: %s", last_error);
    return r;
}

ncclResult_t nccl_result(mscclrt_result r) {
    if (r == MSCCLRT_SUCCESS) return ncclSuccess;
    snprintf(last_error, sizeof last_error, "%s", mscclrt_last_error());
    switch (r) {
    case MSCCLRT_ERR_INVALID_ARG: return ncclInvalidArgument;
    case MSCCLRT_ERR_INVALID_USAGE: case MSCCLRT_ERR_PLAN: case MSCCLRT_ERR_UNAVAILABLE:
        return ncclInvalidUsage;
    case MSCCLRT_ERR_SYSTEM: return ncclSystemError;
    case MSCCLRT_ERR_CUDA: return ncclUnhandledCudaError;
    case MSCCLRT_ERR_REMOTE: case MSCCLRT_ERR_TIMEOUT: return ncclRemoteError;
    default: return ncclInternalError;
    }
}

ncclResult_t nccl_result_init(mscclrt_result r) {
    const ncclResult_t n = nccl_result(r);
    /* MSCCLRT_ERR_UNAVAILABLE is also "no usable CUDA driver" (cu_load, which only repeats its
     * first answer): NCCL reports that as a system error, not as a misuse by the caller */
    if (r == MSCCLRT_ERR_UNAVAILABLE) {
        char saved[sizeof last_error];
        memcpy(saved, last_error, sizeof saved);
        const bool no_driver = cu_load() != MSCCLRT_SUCCESS;
        memcpy(last_error, saved, sizeof saved);
        if (no_driver) return ncclSystemError;
    }
    return n;
}

const char *ncclGetErrorString(ncclResult_t r) {
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with MSCCLRT_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with MSCCLRT_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the libmscclrt developers";
    case ncclInvalidArgument: return "invalid argument (run with MSCCLRT_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with MSCCLRT_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
    }
}

const char *ncclGetLastError(ncclComm_t comm) {
    (void)comm;   /* NCCL keeps one per thread too */
    return last_error;
}

void ncclResetDebugInit(void) { /* our logging reads its environment once; nothing to reset */ }

ncclResult_t ncclGetVersion(int *version) {
    if (!version) return nccl_fail(ncclInvalidArgument, "ncclGetVersion: version is NULL");
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
    if (!id) return nccl_fail(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
    mscclrt_unique_id u;
    const mscclrt_result r = mscclrt_get_unique_id(&u);
    if (r != MSCCLRT_SUCCESS) return nccl_result(r);
    memcpy(id, &u, sizeof *id);
    return ncclSuccess;
}

/* ---- communicators ---------------------------------------------------------------------------- */
ncclResult_t nccl_comm_ready(ncclComm_t comm, const char *fn) {
    if (!comm) return nccl_fail(ncclInvalidArgument, "%s: comm is NULL", fn);
    if (comm->magic != NCCL_SHIM_MAGIC)
        return nccl_fail(ncclInvalidArgument, "%s: comm %p is not a live communicator", fn,
                         (void *)comm);
    const int st = atomic_load(&comm->state);
    if (st == ncclInProgress)
        return nccl_fail(ncclInvalidUsage, "%s: rank %d: the communicator is still being "
                         "initialised (poll ncclCommGetAsyncError until it is ncclSuccess)", fn,
                         comm->rank);
    if (st != ncclSuccess || !comm->rt)
        return nccl_fail(ncclInvalidUsage, "%s: rank %d: the communicator failed to initialise: "
                         "%s", fn, comm->rank, comm->init_err);
    return ncclSuccess;
}

/* The calling thread's CUDA device (as cudaGetDevice): its current context's, else 0. */
static int current_device(void) {
    if (cu_load() != MSCCLRT_SUCCESS) return 0;
    CuContext ctx = NULL;
    CuDevice d = 0;
    if (cu.cuCtxGetCurrent(&ctx) == CU_OK && ctx && cu.cuCtxGetDevice(&d) == CU_OK) return (int)d;
    return 0;
}

static ncclComm_t comm_new(int nranks, int rank, int device) {
    ncclComm_t c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->magic = NCCL_SHIM_MAGIC;
    c->nranks = nranks;
    c->rank = rank;
    c->device = device;
    atomic_init(&c->state, ncclInProgress);
    pthread_mutex_init(&c->mu, NULL);
    return c;
}

static void comm_free(ncclComm_t c) {
    nccl_config_free(&c->cfg);
    pthread_mutex_destroy(&c->mu);
    c->magic = 0;
    free(c);
}

typedef struct {
    ncclComm_t comm;
    mscclrt_unique_id id;
} InitJob;

static void *init_thread(void *arg) {
    InitJob *j = arg;
    cu_capture_relaxed();   /* a non-blocking init beside the application's graph captures */
    ncclComm_t c = j->comm;
    mscclrt_comm *rt = NULL;
    const mscclrt_result r = mscclrt_comm_init_rank(&rt, c->nranks, j->id, c->rank, c->device);
    if (r != MSCCLRT_SUCCESS) snprintf(c->init_err, sizeof c->init_err, "%s", mscclrt_last_error());
    c->rt = rt;
    atomic_store(&c->state, r == MSCCLRT_SUCCESS ? ncclSuccess : (int)nccl_result_init(r));
    free(j);
    return NULL;
}

/* Creation by rank with a config: blocking runs in the caller; non-blocking in a thread, with
 * ncclInProgress until ncclCommGetAsyncError says otherwise. */
static ncclResult_t init_rank(ncclComm_t *out, int nranks, ncclUniqueId id, int rank,
                              const ncclConfig_t *config, const char *fn) {
    if (!out) return nccl_fail(ncclInvalidArgument, "%s: comm is NULL", fn);
    *out = NULL;
    if (nranks < 1 || rank < 0 || rank >= nranks)
        return nccl_fail(ncclInvalidArgument, "%s: rank %d of %d", fn, rank, nranks);
    char why[512];
    NcclConfig cfg;
    ncclResult_t res = nccl_config_read(&cfg, config, why, sizeof why);
    if (res != ncclSuccess) return nccl_fail(res, "%s: %s", fn, why);
    ncclComm_t c = comm_new(nranks, rank, current_device());
    if (!c) {
        nccl_config_free(&cfg);
        return nccl_fail(ncclSystemError, "%s: out of memory", fn);
    }
    c->cfg = cfg;
    InitJob *j = malloc(sizeof *j);
    if (!j) {
        comm_free(c);
        return nccl_fail(ncclSystemError, "%s: out of memory", fn);
    }
    j->comm = c;
    memcpy(&j->id, &id, sizeof j->id);
    if (!cfg.blocking && pthread_create(&c->init_thread, NULL, init_thread, j) == 0) {
        c->init_joinable = true;
        *out = c;
        return ncclInProgress;
    }
    init_thread(j);
    const int st = atomic_load(&c->state);
    if (st != ncclSuccess) {
        const ncclResult_t r = nccl_fail((ncclResult_t)st, "%s: %s", fn, c->init_err);
        comm_free(c);
        return r;
    }
    LOG_INFO(LOG_SUB_SHIM, "%s: rank %d of %d on device %d", fn, rank, nranks, c->device);
    *out = c;
    return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank) {
    return init_rank(comm, nranks, id, rank, NULL, "ncclCommInitRank");
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t *config) {
    return init_rank(comm, nranks, id, rank, config, "ncclCommInitRankConfig");
}

ncclResult_t ncclCommInitRankScalable(ncclComm_t *comm, int nranks, int myrank, int nId,
                                      ncclUniqueId *ids, ncclConfig_t *config) {
    if (nId < 1 || !ids)
        return nccl_fail(ncclInvalidArgument, "ncclCommInitRankScalable: %d unique ids at %p",
                         nId, (void *)ids);
    /* several roots spread NCCL's rendezvous; ours has one: every rank uses the first id, which
     * every rank holds (NCCL requires all nId ids on every rank) */
    return init_rank(comm, nranks, ids[0], myrank, config, "ncclCommInitRankScalable");
}

ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist) {
    if (!comms || ndev < 1)
        return nccl_fail(ncclInvalidArgument, "ncclCommInitAll: %d devices into %p", ndev,
                         (void *)comms);
    mscclrt_comm **rt = calloc((size_t)ndev, sizeof *rt);
    NcclClique *q = calloc(1, sizeof *q);
    int *devs = malloc((size_t)ndev * sizeof *devs);
    ncclComm_t *mine = calloc((size_t)ndev, sizeof *mine);
    if (!rt || !q || !devs || !mine) {
        free(rt); free(q); free(devs); free(mine);
        return nccl_fail(ncclSystemError, "ncclCommInitAll: out of memory");
    }
    for (int i = 0; i < ndev; i++) devs[i] = devlist ? devlist[i] : i;
    for (int i = 0; i < ndev; i++)
        for (int j = 0; j < i; j++)
            if (devs[i] == devs[j])
                LOG_INFO(LOG_SUB_SHIM, "ncclCommInitAll: ranks %d and %d share device %d (NCCL "
                         "refuses this; libmscclrt allows it, e.g. for tests)", j, i, devs[i]);
    const mscclrt_result r = mscclrt_comm_init_all(rt, ndev, devs);
    if (r != MSCCLRT_SUCCESS) {
        free(rt); free(q); free(devs); free(mine);
        return nccl_result_init(r);
    }
    pthread_mutex_init(&q->mu, NULL);
    q->n = q->live = ndev;
    q->comms = mine;
    q->devs = devs;
    for (int i = 0; i < ndev; i++) {
        ncclComm_t c = comm_new(ndev, i, devs[i]);
        if (!c) {   /* unwind: nothing of the group must survive */
            for (int k = 0; k < ndev; k++) mscclrt_comm_destroy(rt[k]);
            for (int k = 0; k < i; k++) comm_free(mine[k]);
            pthread_mutex_destroy(&q->mu);
            free(rt); free(q); free(devs); free(mine);
            return nccl_fail(ncclSystemError, "ncclCommInitAll: out of memory");
        }
        c->rt = rt[i];
        nccl_config_read(&c->cfg, NULL, NULL, 0);
        atomic_store(&c->state, ncclSuccess);
        c->clique = q;
        c->clique_index = i;
        mine[i] = comms[i] = c;
    }
    free(rt);
    return ncclSuccess;
}

/* split and shrink: a child by libmscclrt's split/shrink, with the given or the parent's config */
static ncclResult_t child(ncclComm_t parent, mscclrt_comm *rt, const ncclConfig_t *config,
                          ncclComm_t *out, const char *fn) {
    char why[512];
    ncclComm_t c = comm_new(0, 0, parent->device);
    if (!c) {
        mscclrt_comm_destroy(rt);
        return nccl_fail(ncclSystemError, "%s: out of memory", fn);
    }
    ncclResult_t res = config ? nccl_config_read(&c->cfg, config, why, sizeof why)
                              : nccl_config_dup(&c->cfg, &parent->cfg, why, sizeof why);
    if (res != ncclSuccess) {
        mscclrt_comm_destroy(rt);
        comm_free(c);
        return nccl_fail(res, "%s: %s", fn, why);
    }
    c->rt = rt;
    mscclrt_comm_rank(rt, &c->rank);
    mscclrt_comm_size(rt, &c->nranks);
    atomic_store(&c->state, ncclSuccess);
    *out = c;
    return ncclSuccess;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                           ncclConfig_t *config) {
    if (!newcomm) return nccl_fail(ncclInvalidArgument, "ncclCommSplit: newcomm is NULL");
    *newcomm = NULL;
    ncclResult_t res = nccl_comm_ready(comm, "ncclCommSplit");
    if (res != ncclSuccess) return res;
    if (color < 0 && color != NCCL_SPLIT_NOCOLOR)
        return nccl_fail(ncclInvalidArgument, "ncclCommSplit: color %d (a color is >= 0, or "
                         "NCCL_SPLIT_NOCOLOR)", color);
    mscclrt_comm *rt = NULL;
    res = nccl_result(mscclrt_comm_split(comm->rt, color, key, &rt));
    if (res != ncclSuccess || !rt) return res;   /* NOCOLOR: *newcomm stays NULL */
    return child(comm, rt, config, newcomm, "ncclCommSplit");
}

ncclResult_t ncclCommShrink(ncclComm_t comm, int *exclude, int nexclude, ncclComm_t *newcomm,
                            ncclConfig_t *config, int flags) {
    if (!newcomm) return nccl_fail(ncclInvalidArgument, "ncclCommShrink: newcomm is NULL");
    *newcomm = NULL;
    ncclResult_t res = nccl_comm_ready(comm, "ncclCommShrink");
    if (res != ncclSuccess) return res;
    if (flags & ~NCCL_SHRINK_ABORT)
        return nccl_fail(ncclInvalidArgument, "ncclCommShrink: flags %#x", flags);
    /* NCCL_SHRINK_ABORT: the parent's pending work is stopped first (dead peers won't finish it) */
    if (flags & NCCL_SHRINK_ABORT) mscclrt_comm_revoke(comm->rt);
    mscclrt_comm *rt = NULL;
    res = nccl_result(mscclrt_comm_shrink(comm->rt, exclude, nexclude, &rt));
    if (res != ncclSuccess) return res;
    return child(comm, rt, config, newcomm, "ncclCommShrink");
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int *count) {
    ncclResult_t res = nccl_comm_ready(comm, "ncclCommCount");
    if (res != ncclSuccess) return res;
    if (!count) return nccl_fail(ncclInvalidArgument, "ncclCommCount: count is NULL");
    *count = comm->nranks;
    return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device) {
    ncclResult_t res = nccl_comm_ready(comm, "ncclCommCuDevice");
    if (res != ncclSuccess) return res;
    if (!device) return nccl_fail(ncclInvalidArgument, "ncclCommCuDevice: device is NULL");
    return nccl_result(mscclrt_comm_device(comm->rt, device));
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank) {
    ncclResult_t res = nccl_comm_ready(comm, "ncclCommUserRank");
    if (res != ncclSuccess) return res;
    if (!rank) return nccl_fail(ncclInvalidArgument, "ncclCommUserRank: rank is NULL");
    *rank = comm->rank;
    return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *err) {
    if (!comm || comm->magic != NCCL_SHIM_MAGIC || !err)
        return nccl_fail(ncclInvalidArgument, "ncclCommGetAsyncError: %s",
                         !err ? "asyncError is NULL" : "comm is not a live communicator");
    const int st = atomic_load(&comm->state);
    if (st != ncclSuccess) {
        if (st != ncclInProgress && comm->init_err[0]) nccl_set_last_error("%s", comm->init_err);
        *err = (ncclResult_t)st;
        return ncclSuccess;
    }
    if (comm->init_joinable) {   /* a finished non-blocking init: reap its thread */
        pthread_join(comm->init_thread, NULL);
        comm->init_joinable = false;
    }
    const mscclrt_result r = mscclrt_comm_get_async_error(comm->rt);
    *err = r == MSCCLRT_SUCCESS ? ncclSuccess : nccl_result(r);
    if (comm->real) {   /* the forwarded side's errors count too */
        const NcclReal *real = nccl_real();
        ncclResult_t re = ncclSuccess;
        if (*err == ncclSuccess && real && real->ncclCommGetAsyncError &&
            real->ncclCommGetAsyncError(comm->real, &re) == ncclSuccess && re != ncclSuccess)
            *err = re;
    }
    return ncclSuccess;
}

/* ---- the end of a communicator ------------------------------------------------------------------ */
static void reap_init(ncclComm_t c) {
    if (c->init_joinable) {
        pthread_join(c->init_thread, NULL);
        c->init_joinable = false;
    }
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
    if (!comm || comm->magic != NCCL_SHIM_MAGIC)
        return nccl_fail(ncclInvalidArgument, "ncclCommFinalize: comm is not a live communicator");
    reap_init(comm);
    ncclResult_t res = nccl_comm_ready(comm, "ncclCommFinalize");
    if (res != ncclSuccess) return res;
    /* everything this rank queued completes: the device's work, then the real NCCL's */
    int dev = 0;
    mscclrt_comm_device(comm->rt, &dev);
    if (cu_load() == MSCCLRT_SUCCESS) {
        CuContext prev = NULL, ctx = NULL;
        CuDevice d;
        cu.cuCtxGetCurrent(&prev);
        if (cu.cuDeviceGet(&d, dev) == CU_OK && cu_primary_ctx(d, &ctx) == MSCCLRT_SUCCESS) {
            cu.cuCtxSetCurrent(ctx);
            const CuResult e = cu.cuCtxSynchronize();
            cu.cuCtxSetCurrent(prev);
            if (e != CU_OK)
                return nccl_fail(ncclUnhandledCudaError, "ncclCommFinalize: rank %d: the device's "
                                 "work failed (CUDA error %d)", comm->rank, e);
        }
    }
    const NcclReal *real = nccl_real();
    if (comm->real && real && real->ncclCommFinalize) return real->ncclCommFinalize(comm->real);
    return ncclSuccess;
}

static void clique_leave(ncclComm_t c) {
    NcclClique *q = c->clique;
    if (!q) return;
    pthread_mutex_lock(&q->mu);
    q->comms[c->clique_index] = NULL;
    const int left = --q->live;
    pthread_mutex_unlock(&q->mu);
    if (left) return;
    pthread_mutex_destroy(&q->mu);
    free(q->comms);
    free(q->devs);
    free(q);
}

static ncclResult_t release(ncclComm_t comm, bool abort, const char *fn) {
    if (!comm || comm->magic != NCCL_SHIM_MAGIC)
        return comm ? nccl_fail(ncclInvalidArgument, "%s: comm is not a live communicator", fn)
                    : ncclSuccess;
    if (abort && comm->rt) mscclrt_comm_revoke(comm->rt);   /* kernels stop before we wait */
    reap_init(comm);
    ncclResult_t res = ncclSuccess;
    const NcclReal *real = nccl_real();
    if (comm->real && real) {
        if (abort && real->ncclCommAbort) real->ncclCommAbort(comm->real);
        else if (real->ncclCommDestroy) res = real->ncclCommDestroy(comm->real);
    }
    if (comm->rt) {
        const mscclrt_result r = abort ? mscclrt_comm_abort(comm->rt) : mscclrt_comm_destroy(comm->rt);
        if (res == ncclSuccess) res = nccl_result(r);
    }
    comm->rt = NULL;
    clique_leave(comm);
    if (abort) {   /* the struct stays, dead: a watchdog may abort while another thread calls */
        nccl_config_free(&comm->cfg);
        comm->magic = 0;
    } else {
        comm_free(comm);
    }
    return res;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) { return release(comm, false, "ncclCommDestroy"); }
ncclResult_t ncclCommAbort(ncclComm_t comm) { return release(comm, true, "ncclCommAbort"); }

ncclResult_t ncclCommRevoke(ncclComm_t comm, int flags) {
    ncclResult_t res = nccl_comm_ready(comm, "ncclCommRevoke");
    if (res != ncclSuccess) return res;
    if (flags != NCCL_REVOKE_DEFAULT)
        return nccl_fail(ncclInvalidArgument, "ncclCommRevoke: flags %#x (only "
                         "NCCL_REVOKE_DEFAULT)", flags);
    return nccl_result(mscclrt_comm_revoke(comm->rt));
}

/* ---- the real NCCL's mirror communicator ---------------------------------------------------- */
ncclComm_t nccl_comm_real(ncclComm_t ours, ncclResult_t *err) {
    ncclResult_t res = nccl_comm_ready(ours, "forwarding to the real NCCL");
    if (res != ncclSuccess) {
        *err = res;
        return NULL;
    }
    if (ours->real) return ours->real;
    const NcclReal *real = nccl_real();
    char why[512];
    if (!real || !real->ncclGetUniqueId || !real->ncclCommInitRank || !real->ncclCommInitAll) {
        *err = nccl_fail(ncclInvalidUsage, "%s", nccl_forward_explain(why, sizeof why,
                                                                      "ncclCommInitRank"));
        return NULL;
    }
    /* made collectively: every rank forwards the same call (the selection is the same
     * everywhere), so every rank gets here in the same order */
    if (ours->clique) {   /* one process holds every rank: the real ncclCommInitAll makes all */
        NcclClique *q = ours->clique;
        pthread_mutex_lock(&q->mu);
        if (!q->real_made) {
            ncclComm_t *rc = calloc((size_t)q->n, sizeof *rc);
            res = rc ? real->ncclCommInitAll(rc, q->n, q->devs) : ncclSystemError;
            for (int i = 0; res == ncclSuccess && i < q->n; i++)
                if (q->comms[i]) q->comms[i]->real = rc[i];
            q->real_made = res == ncclSuccess;
            free(rc);
        }
        pthread_mutex_unlock(&q->mu);
        if (res != ncclSuccess) {
            *err = nccl_fail(res, "the real NCCL's ncclCommInitAll failed: %s",
                             real->ncclGetErrorString ? real->ncclGetErrorString(res) : "?");
            return NULL;
        }
        return ours->real;
    }
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (ours->rank == 0 && (res = real->ncclGetUniqueId(&id)) != ncclSuccess) {
        *err = nccl_fail(res, "the real NCCL's ncclGetUniqueId failed");
        /* the others wait for the id: send them a zero id so they fail instead of hanging */
    }
    mscclrt_result r = mscclrt_comm_host_bcast(ours->rt, &id, sizeof id, 0);
    if (r != MSCCLRT_SUCCESS) {
        *err = nccl_result(r);
        return NULL;
    }
    if (res != ncclSuccess) return NULL;
    static const char zero[sizeof(ncclUniqueId)];
    if (memcmp(&id, zero, sizeof id) == 0) {
        *err = nccl_fail(ncclRemoteError, "rank 0 could not make the real NCCL's unique id");
        return NULL;
    }
    ncclComm_t rc = NULL;
    res = real->ncclCommInitRank(&rc, ours->nranks, id, ours->rank);
    if (res != ncclSuccess) {
        *err = nccl_fail(res, "rank %d: the real NCCL's ncclCommInitRank failed: %s (%s)",
                         ours->rank, real->ncclGetErrorString ? real->ncclGetErrorString(res) : "?",
                         real->ncclGetLastError ? real->ncclGetLastError(NULL) : "");
        return NULL;
    }
    LOG_INFO(LOG_SUB_SHIM, "rank %d: the real NCCL's communicator is made (first forwarded call)",
             ours->rank);
    ours->real = rc;
    return rc;
}
