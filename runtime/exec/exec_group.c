/*
 * exec_group.c - NCCL-style group calls, per thread: between mscclrt_group_start and
 * mscclrt_group_end, mscclrt_execute only queues; group end deposits every collective setup the
 * queued calls need (so ranks driven by one thread meet), waits for them, prepares every call
 * (one thread per comm when kernels must be compiled) and launches in call order.
 */
#include "exec/exec_internal.h"
#include "core/err.h"
#include "core/log.h"
#include "core/clock.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ---- groups (per thread) ---------------------------------------------------------------------- */
typedef struct Pending {
    mscclrt_comm *comm;
    const Plan *plan;
    const void *send;
    void *recv;
    size_t in, out;
    int dt, op, pk;
    void *stream;
    SetupRound *round;             /* the setup this call deposited, if any */
    ExecCtx *ctx;                  /* its placeholder, then its context */
    CuFunction fn;                 /* prepared kernel */
    MkArgs args;                   /* prepared arguments (a copy: size caches move) */
    mscclrt_result res;
    char err[512];                 /* the failure text of a preparation (worker threads) */
    ExecDeferredFn deferred;       /* not a plan call: a prepared launch of another layer */
    void *deferred_arg;            /* malloc'd; freed after the group */
    const uint64_t *bytes;         /* deferred: where its message size is (simulation) */
    struct Pending *next;
} Pending;

/* Prepares one queued call (hot: copy the previous call's kernel and arguments). */
static void prepare_one(Pending *q) {
    if (q->res != MSCCLRT_SUCCESS) return;
    if (q->deferred) {   /* its kernels loaded before any call of the group launches */
        q->res = q->deferred(q->deferred_arg, EXEC_DEFER_PREPARE);
        if (q->res != MSCCLRT_SUCCESS) snprintf(q->err, sizeof q->err, "%s", mscclrt_last_error());
        return;
    }
    if (exec_hot_match(q->comm, q->plan, q->send, q->recv, q->in, q->out, q->dt, q->op, q->pk)) {
        q->ctx = (ExecCtx *)q->comm->hot.ctx;
        q->fn = q->comm->hot.fn;
        q->args = *q->comm->hot.args;
        return;
    }
    q->res = exec_prepare(q->comm, q->plan, q->send, q->recv, q->in, q->out, q->dt, q->op, q->pk,
                          q->stream, &q->ctx, &q->fn, &q->args);
    if (q->res != MSCCLRT_SUCCESS) snprintf(q->err, sizeof q->err, "%s", mscclrt_last_error());
}

typedef struct { Pending *list; mscclrt_comm *comm; } PrepJob;

/* Prepares, in order, the queued calls of one comm (a comm is touched by one thread only). */
static void *prep_worker(void *arg) {
    exec_group_depth = 1;   /* a group's preparation: nothing here waits for the others */
    cu_capture_relaxed();   /* its module loads while the caller's stream is being captured */
    PrepJob *j = arg;
    for (Pending *q = j->list; q; q = q->next)
        if (q->comm == j->comm) prepare_one(q);
    return NULL;
}

_Thread_local int exec_group_depth;
static _Thread_local Pending *tl_head, *tl_tail;
static _Thread_local Pending *tl_free;   /* recycled Pending records */

mscclrt_result mscclrt_group_start(void) {
    exec_group_depth++;
    return MSCCLRT_SUCCESS;
}

mscclrt_result mscclrt_group_end(void) {
    if (exec_group_depth <= 0)
        return rt_fail(MSCCLRT_ERR_INVALID_USAGE, "mscclrt_group_end without mscclrt_group_start");
    if (--exec_group_depth > 0) return MSCCLRT_SUCCESS;
    Pending *list = tl_head;
    tl_head = tl_tail = NULL;
    mscclrt_result first = MSCCLRT_SUCCESS;
    char first_msg[1024] = "";
    /* 1: deposit every setup (never blocks; the last arrival performs it) */
    for (Pending *q = list; q; q = q->next) {
        mscclrt_comm *c = q->comm;
        if (q->deferred ||
            exec_hot_match(c, q->plan, q->send, q->recv, q->in, q->out, q->dt, q->op, q->pk)) continue;
        BufKey key;
        CuContext prev;
        q->res = exec_cuda_current(c, &prev);
        if (q->res != MSCCLRT_SUCCESS) continue;
        q->res = exec_buf_key(c, q->send, q->recv, q->in, q->out, &key);
        exec_cuda_restore(c, prev);
        if (q->res != MSCCLRT_SUCCESS || exec_ctx_find(c, q->plan, &key)) continue;
        if (!c->clique) continue; /* multi-process: set up (collectively) when prepared */
        int st = CU_CAPTURE_STATUS_NONE;
        if (cu.cuStreamIsCapturing((CuStream)q->stream, &st) == CU_OK && st != CU_CAPTURE_STATUS_NONE) {
            q->res = rt_fail(MSCCLRT_ERR_INVALID_USAGE, "rank %d: the first call of plan '%s' for "
                             "new buffers cannot be captured into a CUDA graph", c->rank, PLAN_ESC(q->plan->name));
            continue;
        }
        q->res = exec_ctx_placeholder(c, q->plan, &key, &q->ctx);
        if (q->res != MSCCLRT_SUCCESS) continue;
        q->round = exec_round_deposit(c, q->plan, q->ctx);
        if (!q->round) {
            exec_ctx_unlink(c, q->ctx);
            free(q->ctx);
            q->ctx = NULL;
            q->res = rt_fail(MSCCLRT_ERR_SYSTEM, "out of memory for a setup round");
        }
    }
    /* 2: wait for them */
    for (Pending *q = list; q; q = q->next) {
        if (!q->round) continue;
        q->res = exec_ctx_finish(q->comm, q->ctx, exec_round_wait(q->comm, q->round));
    }
    /* 3: prepare every call (compile, load, arguments): one thread per comm when kernels may
     * have to be generated for several GPUs (NVRTC runs in parallel); then launch in order */
    mscclrt_comm *cs[64];
    int ncomm = 0;
    bool cold = false, overflow = false;
    for (Pending *q = list; q; q = q->next) {
        if (q->res == MSCCLRT_SUCCESS && !q->deferred &&
            !exec_hot_match(q->comm, q->plan, q->send, q->recv, q->in, q->out, q->dt, q->op, q->pk))
            cold = true;
        int k = 0;
        while (k < ncomm && cs[k] != q->comm) k++;
        if (k == ncomm) {
            if (ncomm < 64) cs[ncomm++] = q->comm;
            else overflow = true;
        }
    }
    bool done = false;
    if (cold && ncomm > 1 && !overflow) {
        pthread_t th[64];
        PrepJob jobs[64];
        bool started[64] = {false};
        for (int k = 0; k < ncomm; k++) {
            jobs[k] = (PrepJob){list, cs[k]};
            started[k] = pthread_create(&th[k], NULL, prep_worker, &jobs[k]) == 0;
        }
        for (int k = 0; k < ncomm; k++) {
            if (started[k]) pthread_join(th[k], NULL);
            else prep_worker(&jobs[k]);
        }
        done = true;
    }
    /* this thread prepares every rank: inside the group still, so a kernel load does not wait
     * at the barrier of ranks sharing a device for loads only this thread would make
     * (exec_share_after_load; test_gpu_coll 4 on 2 GPUs waited out its timeout per load) */
    exec_group_depth = 1;
    for (Pending *q = list; q && !done; q = q->next) prepare_one(q);
    exec_group_depth = 0;
    for (Pending *q = list; q; q = q->next) {
        if (q->res == MSCCLRT_SUCCESS)
            q->res = q->deferred ? q->deferred(q->deferred_arg, EXEC_DEFER_RUN)
                                 : exec_launch(q->comm, q->fn, q->ctx, &q->args, q->stream);
        if (q->res != MSCCLRT_SUCCESS && first == MSCCLRT_SUCCESS) {
            first = q->res;
            snprintf(first_msg, sizeof first_msg, "%s", q->err[0] ? q->err : mscclrt_last_error());
        }
    }
    while (list) { /* recycle: a group of calls allocates nothing in steady state */
        free(list->deferred_arg);
        Pending *n = list->next;
        list->next = tl_free;
        tl_free = list;
        list = n;
    }
    if (first != MSCCLRT_SUCCESS) return rt_fail(first, "%s", first_msg);
    return MSCCLRT_SUCCESS;
}

/* A cleared record for c at the end of the thread's queue (recycled ones first); NULL with the
 * error set when memory runs out. */
static Pending *pending_append(mscclrt_comm *c) {
    Pending *q = tl_free;
    if (q) {
        tl_free = q->next;
        memset(q, 0, sizeof *q);
    } else if (!(q = calloc(1, sizeof *q))) {
        rt_fail(MSCCLRT_ERR_SYSTEM, "rank %d: out of memory queueing a group call", c->rank);
        return NULL;
    }
    q->comm = c;
    if (tl_tail) tl_tail->next = q;
    else tl_head = q;
    tl_tail = q;
    return q;
}

/* Queues one call of the calling thread's open group (mscclrt_execute_ex inside a group). */
mscclrt_result exec_group_enqueue(mscclrt_comm *c, const Plan *p, const void *send, void *recv,
                                  size_t in, size_t out, int dt, int op, int pk, void *stream) {
    Pending *q = pending_append(c);
    if (!q) return MSCCLRT_ERR_SYSTEM;
    q->plan = p;
    q->send = send;
    q->recv = recv;
    q->in = in;
    q->out = out;
    q->dt = dt;
    q->op = op;
    q->pk = pk;
    q->stream = stream;
    return MSCCLRT_SUCCESS;
}

bool exec_in_group(void) { return exec_group_depth > 0; }

mscclrt_result exec_group_defer(mscclrt_comm *c, ExecDeferredFn fn, void *arg,
                                const uint64_t *bytes) {
    Pending *q = pending_append(c);
    if (!q) {
        free(arg);
        return MSCCLRT_ERR_SYSTEM;
    }
    q->deferred = fn;
    q->deferred_arg = arg;
    q->bytes = bytes;
    return MSCCLRT_SUCCESS;
}

/* The model behind simulation: a launch and a synchronisation round trip, then the bytes at a
 * conservative NVLink rate (H200 measurements of the stdlib: 5-10 us small, ~300 GB/s large). */
static double model_us(uint64_t bytes) { return 6.0 + (double)bytes / 300e3; }

mscclrt_result mscclrt_group_simulate_end(double *usec) {
    if (exec_group_depth <= 0)
        return rt_fail(MSCCLRT_ERR_INVALID_USAGE, "mscclrt_group_simulate_end without "
                       "mscclrt_group_start");
    if (--exec_group_depth > 0) {
        if (usec) *usec = 0;
        return MSCCLRT_SUCCESS;
    }
    Pending *list = tl_head;
    tl_head = tl_tail = NULL;
    double t = 0;
    while (list) {   /* estimate and drop: nothing was set up or launched */
        t += model_us(list->deferred ? (list->bytes ? *list->bytes : 0)
                                     : (list->in > list->out ? list->in : list->out));
        if (list->deferred) list->deferred(list->deferred_arg, EXEC_DEFER_DISCARD);
        free(list->deferred_arg);
        Pending *n = list->next;
        list->next = tl_free;
        tl_free = list;
        list = n;
    }
    if (usec) *usec = t;
    return MSCCLRT_SUCCESS;
}
