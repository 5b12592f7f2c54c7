/*
 * exec_comm.c - GPU communicators of a single-process group (mscclrt_comm_init_all: one
 * primary context per rank, peer access between devices), their release and destruction, and
 * the small accessors shared by every entry point (liveness check, context push/pop).
 */
#include "exec/exec_internal.h"
#include "algo/algo.h"
#include "algo/algo_native.h"
#include "core/err.h"
#include "core/log.h"

#include <stdlib.h>
#include <string.h>

mscclrt_result exec_comm_check(const mscclrt_comm *c, const char *fn) {
    if (!c) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "%s: comm is NULL", fn);
    if (c->magic != EXEC_COMM_MAGIC)
        return rt_fail(MSCCLRT_ERR_INVALID_USAGE, "%s: comm %p is not a live communicator", fn,
                       (const void *)c);
    return MSCCLRT_SUCCESS;
}

/* Makes c's context current; *prev gets the one to restore. */
mscclrt_result exec_ctx_push(const mscclrt_comm *c, CuContext *prev) {
    *prev = NULL;
    TRY(cu_check(cu.cuCtxGetCurrent(prev), "cuCtxGetCurrent"));
    if (*prev != c->ctx) TRY(cu_check(cu.cuCtxSetCurrent(c->ctx), "cuCtxSetCurrent"));
    return MSCCLRT_SUCCESS;
}
void exec_ctx_pop(const mscclrt_comm *c, CuContext prev) {
    if (prev != c->ctx) cu.cuCtxSetCurrent(prev);
}

/* ---- communicators ----------------------------------------------------------------------------- */
mscclrt_result exec_abort_word_init(mscclrt_comm *c) {
    void *h = NULL;
    TRY(cu_check(cu.cuMemHostAlloc(&h, 64, CU_HOSTALLOC_PORTABLE | CU_HOSTALLOC_DEVICEMAP),
                 "cuMemHostAlloc(abort word)"));
    memset(h, 0, 64);
    c->abort_host = h;
    return cu_check(cu.cuMemHostGetDevicePointer(&c->abort_dev, h, 0),
                    "cuMemHostGetDevicePointer(abort word)");
}

mscclrt_result exec_module_arm(const mscclrt_comm *c, CuModule m) {
    CuDevPtr g = 0;
    size_t n = 0;
    if (cu.cuModuleGetGlobal(&g, &n, m, "mscclrt_abort_word") != CU_OK || n != 8)
        return MSCCLRT_SUCCESS;   /* a native module that does not include the device library */
    const uint64_t v = c->abort_dev;
    return cu_check(cu.cuMemcpyHtoD(g, &v, sizeof v), "cuMemcpyHtoD(abort word address)");
}

void exec_comm_release(mscclrt_comm *c) {
    CuContext prev = NULL;
    if (c->ctx) {
        cu.cuCtxGetCurrent(&prev);
        cu.cuCtxSetCurrent(c->ctx);
        if (!c->aborted) cu.cuCtxSynchronize();   /* an abort waited (with a deadline) already */
    }
    if (c->proxy && proxy_drain(c->proxy, 10) != MSCCLRT_SUCCESS)
        LOG_WARN("rank %d: %s", c->rank, mscclrt_last_error());
    if (!c->aborted) exec_mp_quiesce(c); /* multi-process: every rank idle before memory goes */
    while (c->ctxs) {
        ExecCtx *x = c->ctxs;
        c->ctxs = x->next;
        exec_ctx_free(x);
    }
    exec_ctx_free_retired(c);
    while (c->kernels) {
        ExecKernel *k = c->kernels;
        c->kernels = k->next;
        if (k->module) cu.cuModuleUnload(k->module);
        free(k);
    }
    algo_comm_free(c);   /* after the contexts (the native one's plan lives there), with the
                            device context current, peers idle and the bootstrap open */
    proxy_destroy(c->proxy);
    c->proxy = NULL;
    exec_mp_close(c);
    if (c->abort_host) cu.cuMemFreeHost((void *)c->abort_host);
    if (c->ctx) {
        cu.cuCtxSetCurrent(prev == c->ctx ? NULL : prev);
        cu.cuDevicePrimaryCtxRelease(c->dev);
    }
    c->magic = 0;
    /* an aborted comm's struct stays (a few hundred bytes): another thread may still be inside a
     * call on it (NCCL lets a watchdog abort while the main thread issues collectives), and now
     * sees a dead comm instead of freed memory */
    if (!c->aborted) free(c);
}

/* One comm of q is gone; true when it was the last, and the caller must clique_free(q). */
static bool clique_drop(ExecClique *q) {
    pthread_mutex_lock(&q->mu);
    int left = --q->live;
    pthread_mutex_unlock(&q->mu);
    return left == 0;
}

/* Frees q and the setup rounds it still holds. Only when no comm refers to it any more. */
static void clique_free(ExecClique *q) {
    while (q->rounds) {
        SetupRound *rd = q->rounds;
        q->rounds = rd->next;
        free(rd->plan); free(rd->send); free(rd->recv); free(rd->ctx);
        free(rd);
    }
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->cv);
    free(q->comms);
    free(q);
}

mscclrt_result mscclrt_comm_init_all(mscclrt_comm **comms, int ndev, const int *devlist) {
    if (!comms) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_comm_init_all: comms is NULL");
    if (ndev < 1 || ndev > 1024)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_comm_init_all: ndev %d out of range "
                       "[1, 1024]", ndev);
    for (int i = 0; i < ndev; i++) comms[i] = NULL;
    TRY(cu_load());
    int count = 0;
    TRY(cu_check(cu.cuDeviceGetCount(&count), "cuDeviceGetCount"));
    for (int i = 0; i < ndev; i++) {
        int d = devlist ? devlist[i] : i;
        if (d < 0 || d >= count)
            return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_comm_init_all: devlist[%d] = %d out "
                           "of range [0, %d)", i, d, count);
    }
    ExecClique *q = calloc(1, sizeof *q);
    if (!q || !(q->comms = calloc((size_t)ndev, sizeof *q->comms))) {
        free(q);
        return rt_fail(MSCCLRT_ERR_SYSTEM, "mscclrt_comm_init_all: out of memory");
    }
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv, NULL);
    q->nranks = ndev;
    mscclrt_result res = MSCCLRT_SUCCESS;
    CuContext prev = NULL;
    cu.cuCtxGetCurrent(&prev);
    for (int i = 0; i < ndev; i++) {
        mscclrt_comm *c = calloc(1, sizeof *c);
        if (!c) {
            res = rt_fail(MSCCLRT_ERR_SYSTEM, "mscclrt_comm_init_all: out of memory");
            goto fail;
        }
        c->magic = EXEC_COMM_MAGIC;
        c->rank = i;
        c->nranks = ndev;
        c->device = devlist ? devlist[i] : i;
        c->clique = q;
        q->comms[i] = c;
        q->live++;
        TRY_GOTO(cu_check(cu.cuDeviceGet(&c->dev, c->device), "cuDeviceGet"), res, fail);
        TRY_GOTO(cu_check(cu.cuDevicePrimaryCtxRetain(&c->ctx, c->dev), "cuDevicePrimaryCtxRetain"),
                 res, fail);
        TRY_GOTO(cu_device_arch(c->device, &c->arch), res, fail);
        TRY_GOTO(cu_check(cu.cuCtxSetCurrent(c->ctx), "cuCtxSetCurrent"), res, fail);
        TRY_GOTO(exec_abort_word_init(c), res, fail);
    }
    /* peer access between every pair of distinct devices */
    for (int i = 0; i < ndev; i++) {
        TRY_GOTO(cu_check(cu.cuCtxSetCurrent(q->comms[i]->ctx), "cuCtxSetCurrent"), res, fail);
        for (int j = 0; j < ndev; j++) {
            if (q->comms[j]->device == q->comms[i]->device) continue;
            int can = 0;
            TRY_GOTO(cu_check(cu.cuDeviceCanAccessPeer(&can, q->comms[i]->dev, q->comms[j]->dev),
                              "cuDeviceCanAccessPeer"), res, fail);
            if (!can) {
                res = rt_fail(MSCCLRT_ERR_UNAVAILABLE, "mscclrt_comm_init_all: device %d cannot "
                              "access device %d (no peer-to-peer path)", q->comms[i]->device,
                              q->comms[j]->device);
                goto fail;
            }
            CuResult r = cu.cuCtxEnablePeerAccess(q->comms[j]->ctx, 0);
            if (r != CU_OK && r != CU_ERR_PEER_ACCESS_ALREADY_ENABLED) {
                res = cu_check(r, "cuCtxEnablePeerAccess");
                goto fail;
            }
        }
    }
    cu.cuCtxSetCurrent(prev);
    /* the native algorithms' context of every rank: one setup round for the whole group */
    TRY_GOTO(algo_native_init(q->comms, ndev), res, fail);
    for (int i = 0; i < ndev; i++) comms[i] = q->comms[i];
    LOG_INFO(LOG_SUB_INIT, "single-process group of %d ranks (sm_%d)", ndev, q->comms[0]->arch);
    return MSCCLRT_SUCCESS;
fail:
    cu.cuCtxSetCurrent(prev);
    /* no comm has reached the caller, so nothing else holds q: release every comm made so far,
     * then free q once, here, whatever q->live says (0 when comm 0's calloc failed) */
    for (int i = 0; i < ndev; i++)
        if (q->comms[i]) {
            mscclrt_comm *c = q->comms[i];
            q->comms[i] = NULL;
            exec_comm_release(c);
        }
    clique_free(q);
    return res;
}

mscclrt_result mscclrt_comm_destroy(mscclrt_comm *c) {
    if (!c) return MSCCLRT_SUCCESS;
    TRY(exec_comm_check(c, "mscclrt_comm_destroy"));
    ExecClique *q = c->clique;
    if (!q) {
        exec_comm_release(c);
        return MSCCLRT_SUCCESS;
    }
    pthread_mutex_lock(&q->mu);
    q->comms[c->rank] = NULL;
    pthread_mutex_unlock(&q->mu);
    exec_comm_release(c);
    if (clique_drop(q)) clique_free(q);
    return MSCCLRT_SUCCESS;
}

mscclrt_result mscclrt_comm_rank(const mscclrt_comm *c, int *rank) {
    TRY(exec_comm_check(c, "mscclrt_comm_rank"));
    if (!rank) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_comm_rank: rank is NULL");
    *rank = c->rank;
    return MSCCLRT_SUCCESS;
}
mscclrt_result mscclrt_comm_size(const mscclrt_comm *c, int *size) {
    TRY(exec_comm_check(c, "mscclrt_comm_size"));
    if (!size) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_comm_size: size is NULL");
    *size = c->nranks;
    return MSCCLRT_SUCCESS;
}
mscclrt_result mscclrt_comm_device(const mscclrt_comm *c, int *device) {
    TRY(exec_comm_check(c, "mscclrt_comm_device"));
    if (!device) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_comm_device: device is NULL");
    *device = c->device;
    return MSCCLRT_SUCCESS;
}
