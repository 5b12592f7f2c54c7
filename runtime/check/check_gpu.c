/*
 * check_gpu.c - mscclrt_gpu_check_plan: runs a plan on a single-process GPU group with
 * deterministic inputs (runtime/check), back to back and under CUDA-graph replay, and checks
 * every rank's output against the host reference. Used by the GPU tests and offered to
 * mscclrt-run --backend gpu. Waits for the GPU with a deadline so a hung plan is reported
 * as MSCCLRT_ERR_TIMEOUT instead of blocking forever. The per-rank pieces (check_gpu.h) are
 * shared with mscclrt_gpu_check_rank.
 */
#include "check/check_gpu.h"
#include "check/check.h"
#include "core/clock.h"
#include "core/err.h"
#include "cuda/cumem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

mscclrt_result check_gpu_sync(CuStream s, double secs, const char *what, int rank) {
    double t0 = rt_now_s();
    for (;;) {
        CuResult r = cu.cuStreamQuery(s);
        if (r == CU_OK) return MSCCLRT_SUCCESS;
        if (r != CU_ERR_NOT_READY) return cu_check(r, what);
        if (rt_now_s() - t0 > secs)
            return rt_fail(MSCCLRT_ERR_TIMEOUT, "rank %d: %s did not finish within %.0f s (a "
                           "plan waiting for data that never comes?)", rank, what, secs);
        usleep(50);
    }
}

/* One device buffer of a check: cuMemAlloc, or a cuMem allocation (cumem.h; peers get
 * access when a context is set up). */
static mscclrt_result check_buf(CuDevPtr *ptr, size_t *size, size_t bytes, bool cumem, int device,
                                const char *what) {
    char why[96];
    snprintf(why, sizeof why, "%s(%s)", cumem ? "cumem_alloc" : "cuMemAlloc", what);
    if (!cumem) {
        *size = bytes;
        return cu_check(cu.cuMemAlloc(ptr, bytes), why);
    }
    mscclrt_result r = cumem_alloc(ptr, size, bytes, device);
    if (r == MSCCLRT_SUCCESS) return r;
    char cause[512];   /* rt_fail rewrites the thread's message: copy it first */
    snprintf(cause, sizeof cause, "%s", mscclrt_last_error());
    return rt_fail(r, "%s: %s", why, cause);
}

static void check_buf_free(CuDevPtr p, size_t size, bool cumem) {
    if (cumem) cumem_free(p, size);
    else if (p) cu.cuMemFree(p);
}

mscclrt_result check_gpu_alloc(CheckGpuBufs *b, const Plan *p, int r, int device,
                                const mscclrt_gpu_check *chk, size_t in, size_t out) {
    size_t esz = dtype_size(chk->dtype);
    b->cumem = chk->cumem != 0;
    TRY(cu_check(cu.cuStreamCreate(&b->stream, CU_STREAM_FLAG_NON_BLOCKING), "cuStreamCreate"));
    b->host_in = malloc(in ? in : 1);
    b->host_out = malloc(out ? out : 1);
    if (!b->host_in || !b->host_out) return rt_fail(MSCCLRT_ERR_SYSTEM, "out of memory");
    TRY(check_fill(chk->dtype, chk->op, b->host_in, in / esz, chk->seed, r));
    size_t big = in > out ? in : out;
    if (!chk->inplace) {
        TRY(check_buf(&b->sbuf, &b->sbuf_size, in ? in : 16, b->cumem, device, "send"));
        TRY(check_buf(&b->rbuf, &b->rbuf_size, out ? out : 16, b->cumem, device, "recv"));
        TRY(cu_check(cu.cuMemsetD8(b->rbuf, EXEC_CHECK_FILL, out), "cuMemsetD8(recv)"));
        b->send = (const void *)(uintptr_t)b->sbuf;
        b->recv = (void *)(uintptr_t)b->rbuf;
    } else {
        TRY(check_buf(&b->sbuf, &b->sbuf_size, big ? big : 16, b->cumem, device, "buffer"));
        TRY(cu_check(cu.cuMemsetD8(b->sbuf, EXEC_CHECK_FILL, big), "cuMemsetD8(buffer)"));
        CuDevPtr s = b->sbuf, d = b->sbuf;
        if (p->collective == PLAN_COLL_ALLGATHER) s = d + (CuDevPtr)r * in;
        if (p->collective == PLAN_COLL_REDUCESCATTER) d = s + (CuDevPtr)r * out;
        b->send = (const void *)(uintptr_t)s;
        b->recv = (void *)(uintptr_t)d;
        TRY(cu_check(cu.cuMemAlloc(&b->pristine, in ? in : 16), "cuMemAlloc(pristine)"));
        TRY(cu_check(cu.cuMemcpyHtoD(b->pristine, b->host_in, in), "cuMemcpyHtoD"));
    }
    TRY(cu_check(cu.cuMemcpyHtoD((CuDevPtr)(uintptr_t)b->send, b->host_in, in),
                 "cuMemcpyHtoD(input)"));
    return cu_check(cu.cuCtxSynchronize(), "cuCtxSynchronize");
}

mscclrt_result check_gpu_restore(mscclrt_comm *c, CheckGpuBufs *b, size_t in) {
    CuContext prev;
    cu.cuCtxGetCurrent(&prev);
    cu.cuCtxSetCurrent(c->ctx);
    mscclrt_result res = cu_check(cu.cuMemcpyDtoDAsync((CuDevPtr)(uintptr_t)b->send, b->pristine,
                                                       in, b->stream), "cuMemcpyDtoDAsync(input)");
    cu.cuCtxSetCurrent(prev);
    return res;
}

mscclrt_result check_gpu_capture_begin(CheckGpuBufs *b, size_t in, size_t out) {
    TRY(cu_check(cu.cuMemsetD8Async(b->rbuf ? b->rbuf : b->sbuf, EXEC_CHECK_FILL,
                                    b->rbuf ? out : (in > out ? in : out), b->stream),
                 "cuMemsetD8Async"));
    return cu_check(cu.cuStreamBeginCapture(b->stream, CU_CAPTURE_MODE_RELAXED),
                    "cuStreamBeginCapture");
}

mscclrt_result check_gpu_capture_end(CheckGpuBufs *b, mscclrt_result so_far) {
    mscclrt_result e = cu_check(cu.cuStreamEndCapture(b->stream, &b->graph), "cuStreamEndCapture");
    TRY(so_far);
    TRY(e);
    return cu_check(cu.cuGraphInstantiate(&b->gexec, b->graph, 0), "cuGraphInstantiate");
}

mscclrt_result check_gpu_fetch(CheckGpuBufs *b, size_t out) {
    return cu_check(cu.cuMemcpyDtoH(b->host_out, (CuDevPtr)(uintptr_t)b->recv, out),
                    "cuMemcpyDtoH(output)");
}

mscclrt_result check_gpu_wrong(const Plan *p, const mscclrt_gpu_check *chk,
                                const CheckMismatch *mm, const void *host_out, size_t in,
                                size_t out) {
    /* which ops write the wrong element's chunk, and whether it still holds the fill */
    char why[1024] = "";
    size_t es = mscclrt_dtype_size(chk->dtype);
    if (mm->rank >= 0 && host_out && es)
        check_explain(p, chk->inplace != 0, mm->rank, mm->elem, es,
                      (const unsigned char *)host_out + mm->elem * es, EXEC_CHECK_FILL, in, out,
                      why, sizeof why);
    return rt_fail(MSCCLRT_ERR_INTERNAL, "plan '%s' on GPUs, %zu bytes, %s %s, %s%s: wrong "
                   "result: %s%s", PLAN_ESC(p->name), chk->bytes, dtype_name(chk->dtype),
                   dtype_redop_name(chk->op), chk->inplace ? "in place" : "out of place",
                   chk->graph_iters > 0 ? ", after graph replay" : "", mm->msg, why);
}

void check_gpu_release(mscclrt_comm *c, CheckGpuBufs *b, bool timed_out) {
    if (!timed_out && b->send) {
        exec_drop_contexts(c, b->send);
        exec_drop_contexts(c, b->recv);
    }
    if (c && c->ctx) cu.cuCtxSetCurrent(c->ctx);
    if (b->stream && !timed_out) cu.cuStreamSynchronize(b->stream);
    if (b->gexec) cu.cuGraphExecDestroy(b->gexec);
    if (b->graph) cu.cuGraphDestroy(b->graph);
    if (!timed_out) {
        check_buf_free(b->sbuf, b->sbuf_size, b->cumem);
        check_buf_free(b->rbuf, b->rbuf_size, b->cumem);
        if (b->pristine) cu.cuMemFree(b->pristine);
        if (b->stream) cu.cuStreamDestroy(b->stream);
    }
    free(b->host_in);
    free(b->host_out);
    memset(b, 0, sizeof *b);
}

static mscclrt_result run_once(mscclrt_comm *const *comms, int n, const mscclrt_plan *plan,
                               CheckGpuBufs *rb, size_t in, size_t out,
                               const mscclrt_gpu_check *chk, bool restore) {
    mscclrt_result res = MSCCLRT_SUCCESS;
    if (restore)
        for (int r = 0; r < n; r++) TRY(check_gpu_restore(comms[r], &rb[r], in));
    TRY(mscclrt_group_start());
    for (int r = 0; r < n; r++) {
        mscclrt_result e = mscclrt_execute_ex(comms[r], plan, rb[r].send, rb[r].recv, in, out,
                                              chk->dtype, chk->op, chk->packet, rb[r].stream);
        if (e != MSCCLRT_SUCCESS && res == MSCCLRT_SUCCESS) res = e;
    }
    mscclrt_result e = mscclrt_group_end();
    return res != MSCCLRT_SUCCESS ? res : e;
}

mscclrt_result mscclrt_gpu_check_plan(mscclrt_comm *const *comms, int n, const mscclrt_plan *plan,
                                      const mscclrt_gpu_check *chk, double *usec) {
    const Plan *p = exec_plan(plan);
    if (!p) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_gpu_check_plan: not a plan");
    if (!comms || !chk) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_gpu_check_plan: NULL argument");
    if (n != p->ngpus)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_gpu_check_plan: plan '%s' has %d ranks, "
                       "%d comms given", PLAN_ESC(p->name), p->ngpus, n);
    for (int r = 0; r < n; r++)
        if (!comms[r] || comms[r]->magic != EXEC_COMM_MAGIC || comms[r]->rank != r)
            return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_gpu_check_plan: comms[%d] is not "
                           "rank %d of a live group", r, r);
    size_t esz = dtype_size(chk->dtype);
    if (!esz) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_gpu_check_plan: bad dtype %d", (int)chk->dtype);
    uint64_t in64 = 0, out64 = 0;
    plan_call_sizes(p, chk->bytes, &in64, &out64);
    size_t in = (size_t)in64, out = (size_t)out64;
    CheckGpuBufs *rb = calloc((size_t)n, sizeof *rb);
    if (!rb) return rt_fail(MSCCLRT_ERR_SYSTEM, "out of memory");
    mscclrt_result res = MSCCLRT_SUCCESS;
    CuContext prev = NULL;
    cu.cuCtxGetCurrent(&prev);
    const bool restore = chk->inplace != 0;
    for (int r = 0; r < n; r++) {
        TRY_GOTO(cu_check(cu.cuCtxSetCurrent(comms[r]->ctx), "cuCtxSetCurrent"), res, out);
        TRY_GOTO(check_gpu_alloc(&rb[r], p, r, comms[r]->device, chk, in, out), res, out);
    }
    /* back-to-back calls; the first one sets up (memory, connections, kernels), so the time
     * per call is the mean of the others where there are others */
    int iters = chk->iters > 0 ? chk->iters : 1;
    double t0 = rt_now_s();
    for (int it = 0; it < iters; it++) {
        TRY_GOTO(run_once(comms, n, plan, rb, in, out, chk, restore), res, out);
        if (it == 0 && iters > 1) {
            for (int r = 0; r < n; r++)
                TRY_GOTO(check_gpu_sync(rb[r].stream, EXEC_CHECK_DEADLINE_S, "the plan's kernels",
                                        r), res, out);
            t0 = rt_now_s();
        }
    }
    for (int r = 0; r < n; r++)
        TRY_GOTO(check_gpu_sync(rb[r].stream, EXEC_CHECK_DEADLINE_S, "the plan's kernels", r),
                 res, out);
    if (usec) *usec = (rt_now_s() - t0) * 1e6 / (iters > 1 ? iters - 1 : 1);
    /* CUDA graph: capture graph_iters calls per rank, replay it */
    if (chk->graph_iters > 0) {
        for (int r = 0; r < n; r++) {
            cu.cuCtxSetCurrent(comms[r]->ctx);
            TRY_GOTO(check_gpu_capture_begin(&rb[r], in, out), res, out);
        }
        mscclrt_result cap = MSCCLRT_SUCCESS;
        for (int it = 0; it < chk->graph_iters && cap == MSCCLRT_SUCCESS; it++)
            cap = run_once(comms, n, plan, rb, in, out, chk, restore);
        for (int r = 0; r < n; r++) {
            cu.cuCtxSetCurrent(comms[r]->ctx);
            mscclrt_result e = check_gpu_capture_end(&rb[r], cap);
            if (res == MSCCLRT_SUCCESS) res = e;
        }
        TRY_GOTO(res, res, out);
        for (int rep = 0; rep < EXEC_CHECK_REPLAYS; rep++)
            for (int r = 0; r < n; r++) {
                cu.cuCtxSetCurrent(comms[r]->ctx);
                TRY_GOTO(cu_check(cu.cuGraphLaunch(rb[r].gexec, rb[r].stream), "cuGraphLaunch"),
                         res, out);
            }
        for (int r = 0; r < n; r++)
            TRY_GOTO(check_gpu_sync(rb[r].stream, EXEC_CHECK_DEADLINE_S, "the graph replay", r),
                     res, out);
    }
    /* check */
    for (int r = 0; r < n; r++) {
        cu.cuCtxSetCurrent(comms[r]->ctx);
        TRY_GOTO(check_gpu_fetch(&rb[r], out), res, out);
    }
    if (check_collective_known(p->collective)) {
        const void **ins = calloc((size_t)n, sizeof *ins), **outs = calloc((size_t)n, sizeof *outs);
        if (!ins || !outs) {
            free(ins);
            free(outs);
            res = rt_fail(MSCCLRT_ERR_SYSTEM, "out of memory");
            goto out;
        }
        for (int r = 0; r < n; r++) {
            ins[r] = rb[r].host_in;
            outs[r] = rb[r].host_out;
        }
        CheckMismatch mm;
        bool ok = check_collective(p->collective, n, chk->dtype, chk->op, ins, in, outs, out, &mm);
        free(ins);
        free(outs);
        if (!ok) res = check_gpu_wrong(p, chk, &mm, mm.rank >= 0 ? rb[mm.rank].host_out : NULL,
                                        in, out);
    }
out:
    for (int r = 0; r < n; r++) check_gpu_release(comms[r], &rb[r], res == MSCCLRT_ERR_TIMEOUT);
    cu.cuCtxSetCurrent(prev);
    free(rb);
    return res;
}
