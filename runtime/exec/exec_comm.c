/*
 * exec_comm.c - the executor's side of a communicator's life; the public calls that make and
 * destroy communicators (runtime/comm) drive it step by step, with the algorithm layer's own
 * steps in between:
 *   make: exec_comm_new, then exec_comm_attach (the device: primary context, architecture,
 *   abort word), then either exec_comm_connect (a bootstrap group: CUDA IPC, the network,
 *   which ranks share a GPU) or a clique (mscclrt_comm_init_all's single-process group, its
 *   setup rounds and peer access between its devices);
 *   release: exec_comm_quiesce (device idle, proxy drained, peers idle), exec_comm_drop_state
 *   (contexts and kernels), exec_comm_close (proxy, transports, device).
 * Also the helpers every entry point uses: the liveness check and making the comm's CUDA
 * context current.
 */
#include "exec/exec_internal.h"
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

mscclrt_result exec_cuda_current(const mscclrt_comm *c, CuContext *prev) {
    *prev = NULL;
    TRY(cu_check(cu.cuCtxGetCurrent(prev), "cuCtxGetCurrent"));
    if (*prev != c->ctx) TRY(cu_check(cu.cuCtxSetCurrent(c->ctx), "cuCtxSetCurrent"));
    return MSCCLRT_SUCCESS;
}
void exec_cuda_restore(const mscclrt_comm *c, CuContext prev) {
    if (prev != c->ctx) cu.cuCtxSetCurrent(prev);
}

mscclrt_result exec_module_arm(const mscclrt_comm *c, CuModule m) {
    CuDevPtr g = 0;
    size_t n = 0;
    if (cu.cuModuleGetGlobal(&g, &n, m, "mscclrt_abort_word") != CU_OK || n != 8)
        return MSCCLRT_SUCCESS;   /* a native module that does not include the device library */
    const uint64_t v = c->abort_dev;
    return cu_check(cu.cuMemcpyHtoD(g, &v, sizeof v), "cuMemcpyHtoD(abort word address)");
}

/* ---- making one ------------------------------------------------------------------------------ */
mscclrt_comm *exec_comm_new(int rank, int nranks, int device) {
    mscclrt_comm *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->magic = EXEC_COMM_MAGIC;
    c->rank = rank;
    c->nranks = nranks;
    c->device = device;
    return c;
}

/* The comm's abort word (mapped host memory); its context is current. */
static mscclrt_result abort_word_init(mscclrt_comm *c) {
    void *h = NULL;
    TRY(cu_check(cu.cuMemHostAlloc(&h, 64, CU_HOSTALLOC_PORTABLE | CU_HOSTALLOC_DEVICEMAP),
                 "cuMemHostAlloc(abort word)"));
    memset(h, 0, 64);
    c->abort_host = h;
    return cu_check(cu.cuMemHostGetDevicePointer(&c->abort_dev, h, 0),
                    "cuMemHostGetDevicePointer(abort word)");
}

mscclrt_result exec_comm_attach(mscclrt_comm *c) {
    TRY(cu_check(cu.cuDeviceGet(&c->dev, c->device), "cuDeviceGet"));
    TRY(cu_primary_ctx(c->dev, &c->ctx));   /* the process's reference: never released */
    TRY(cu_device_arch(c->device, &c->arch));
    TRY(cu_check(cu.cuCtxSetCurrent(c->ctx), "cuCtxSetCurrent"));
    return abort_word_init(c);
}

/* ---- the single-process group ---------------------------------------------------------------- */
ExecClique *exec_clique_new(int n) {
    ExecClique *q = calloc(1, sizeof *q);
    if (!q || !(q->comms = calloc((size_t)n, sizeof *q->comms))) {
        free(q);
        return NULL;
    }
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv, NULL);
    q->nranks = n;
    return q;
}

void exec_clique_add(ExecClique *q, mscclrt_comm *c) {
    c->clique = q;
    q->comms[c->rank] = c;
    q->live++;
}

mscclrt_comm *exec_clique_comm(const ExecClique *q, int rank) { return q->comms[rank]; }

bool exec_clique_leave(mscclrt_comm *c) {
    ExecClique *q = c->clique;
    pthread_mutex_lock(&q->mu);
    q->comms[c->rank] = NULL;
    const int left = --q->live;
    pthread_mutex_unlock(&q->mu);
    return left == 0;
}

void exec_clique_free(ExecClique *q) {
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

mscclrt_result exec_clique_peer_access(ExecClique *q, const char *fn) {
    const int n = q->nranks;
    for (int i = 0; i < n; i++) {
        TRY(cu_check(cu.cuCtxSetCurrent(q->comms[i]->ctx), "cuCtxSetCurrent"));
        for (int j = 0; j < n; j++) {
            if (q->comms[j]->device == q->comms[i]->device) continue;
            int can = 0;
            TRY(cu_check(cu.cuDeviceCanAccessPeer(&can, q->comms[i]->dev, q->comms[j]->dev),
                         "cuDeviceCanAccessPeer"));
            if (!can)
                return rt_fail(MSCCLRT_ERR_UNAVAILABLE, "%s: device %d cannot access device %d "
                               "(no peer-to-peer path)", fn, q->comms[i]->device,
                               q->comms[j]->device);
            CuResult r = cu.cuCtxEnablePeerAccess(q->comms[j]->ctx, 0);
            if (r != CU_OK && r != CU_ERR_PEER_ACCESS_ALREADY_ENABLED)
                return cu_check(r, "cuCtxEnablePeerAccess");
        }
    }
    return MSCCLRT_SUCCESS;
}

/* ---- releasing one ---------------------------------------------------------------------------- */
void exec_comm_quiesce(mscclrt_comm *c, CuContext *prev) {
    *prev = NULL;
    if (c->ctx) {
        cu.cuCtxGetCurrent(prev);
        cu.cuCtxSetCurrent(c->ctx);
        if (!c->aborted) cu.cuCtxSynchronize();   /* an abort waited (with a deadline) already */
    }
    if (c->proxy && proxy_drain(c->proxy, 10) != MSCCLRT_SUCCESS)
        LOG_WARN("rank %d: %s", c->rank, mscclrt_last_error());
    if (!c->aborted) exec_mp_quiesce(c); /* multi-process: every rank idle before memory goes */
}

void exec_comm_drop_state(mscclrt_comm *c) {
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
}

void exec_comm_close(mscclrt_comm *c, CuContext prev) {
    proxy_destroy(c->proxy);
    c->proxy = NULL;
    exec_mp_close(c);
    if (c->abort_host) cu.cuMemFreeHost((void *)c->abort_host);
    if (c->ctx) cu.cuCtxSetCurrent(prev);   /* the context lives on (cu_primary_ctx) */
    c->magic = 0;
    /* an aborted comm's struct stays (a few hundred bytes): another thread may still be inside a
     * call on it (NCCL lets a watchdog abort while the main thread issues collectives), and now
     * sees a dead comm instead of freed memory */
    if (!c->aborted) free(c);
}
