/*
 * exec_check.c - mscclrt_gpu_check_plan: runs a plan on a single-process GPU group with
 * deterministic inputs (runtime/check), back to back and under CUDA-graph replay, and checks
 * every rank's output against the host reference. Used by the GPU tests and offered to
 * mscclrt-run --backend gpu. Waits for the GPU with a deadline so a hung plan is reported
 * as MSCCLRT_ERR_TIMEOUT instead of blocking forever.
 */
#include "exec/exec.h"
#include "check/check.h"
#include "core/err.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    CuStream stream;
    CuDevPtr sbuf, rbuf;           /* allocations (rbuf 0 when in place) */
    CuDevPtr pristine;             /* device copy of the input, restored before in-place calls */
    const void *send;
    void *recv;
    void *host_in, *host_out;
    CuGraphExec gexec;
    CuGraph graph;
} RankBufs;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Waits for a stream with a deadline (seconds). */
static mscclrt_result sync_deadline(CuStream s, double secs, const char *what, int rank) {
    double t0 = now_s();
    for (;;) {
        CuResult r = cu.cuStreamQuery(s);
        if (r == CU_OK) return MSCCLRT_SUCCESS;
        if (r != CU_ERR_NOT_READY) return cu_check(r, what);
        if (now_s() - t0 > secs)
            return rt_fail(MSCCLRT_ERR_TIMEOUT, "rank %d: %s did not finish within %.0f s (a "
                           "plan waiting for data that never comes?)", rank, what, secs);
        usleep(50);
    }
}

static mscclrt_result run_once(mscclrt_comm *const *comms, int n, const mscclrt_plan *plan,
                               RankBufs *rb, size_t in, size_t out,
                               const mscclrt_gpu_check *chk, bool restore) {
    mscclrt_result res = MSCCLRT_SUCCESS;
    if (restore)
        for (int r = 0; r < n; r++) {
            CuContext prev;
            cu.cuCtxGetCurrent(&prev);
            cu.cuCtxSetCurrent(comms[r]->ctx);
            res = cu_check(cu.cuMemcpyDtoDAsync((CuDevPtr)(uintptr_t)rb[r].send, rb[r].pristine,
                                                in, rb[r].stream), "cuMemcpyDtoDAsync(input)");
            cu.cuCtxSetCurrent(prev);
            TRY(res);
        }
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
                       "%d comms given", p->name, p->ngpus, n);
    for (int r = 0; r < n; r++)
        if (!comms[r] || comms[r]->magic != EXEC_COMM_MAGIC || comms[r]->rank != r)
            return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_gpu_check_plan: comms[%d] is not "
                           "rank %d of a live group", r, r);
    size_t esz = check_dtype_size(chk->dtype);
    if (!esz) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_gpu_check_plan: bad dtype %d", (int)chk->dtype);
    uint64_t in64 = 0, out64 = 0;
    plan_call_sizes(p, chk->bytes, &in64, &out64);
    size_t in = (size_t)in64, out = (size_t)out64;
    RankBufs *rb = calloc((size_t)n, sizeof *rb);
    if (!rb) return rt_fail(MSCCLRT_ERR_SYSTEM, "out of memory");
    mscclrt_result res = MSCCLRT_SUCCESS;
    CuContext prev = NULL;
    cu.cuCtxGetCurrent(&prev);
    const bool restore = chk->inplace != 0;
    for (int r = 0; r < n; r++) {
        TRY_GOTO(cu_check(cu.cuCtxSetCurrent(comms[r]->ctx), "cuCtxSetCurrent"), res, out);
        TRY_GOTO(cu_check(cu.cuStreamCreate(&rb[r].stream, CU_STREAM_FLAG_NON_BLOCKING),
                          "cuStreamCreate"), res, out);
        rb[r].host_in = malloc(in ? in : 1);
        rb[r].host_out = malloc(out ? out : 1);
        if (!rb[r].host_in || !rb[r].host_out) {
            res = rt_fail(MSCCLRT_ERR_SYSTEM, "out of memory");
            goto out;
        }
        check_fill(chk->dtype, chk->op, rb[r].host_in, in / esz, chk->seed, r);
        size_t big = in > out ? in : out;
        if (!chk->inplace) {
            TRY_GOTO(cu_check(cu.cuMemAlloc(&rb[r].sbuf, in ? in : 16), "cuMemAlloc(send)"), res, out);
            TRY_GOTO(cu_check(cu.cuMemAlloc(&rb[r].rbuf, out ? out : 16), "cuMemAlloc(recv)"), res, out);
            TRY_GOTO(cu_check(cu.cuMemsetD8(rb[r].rbuf, 0xcd, out), "cuMemsetD8(recv)"), res, out);
            rb[r].send = (const void *)(uintptr_t)rb[r].sbuf;
            rb[r].recv = (void *)(uintptr_t)rb[r].rbuf;
        } else {
            TRY_GOTO(cu_check(cu.cuMemAlloc(&rb[r].sbuf, big ? big : 16), "cuMemAlloc(buffer)"), res, out);
            TRY_GOTO(cu_check(cu.cuMemsetD8(rb[r].sbuf, 0xcd, big), "cuMemsetD8(buffer)"), res, out);
            CuDevPtr s = rb[r].sbuf, d = rb[r].sbuf;
            if (p->collective == PLAN_COLL_ALLGATHER) s = d + (CuDevPtr)r * in;
            if (p->collective == PLAN_COLL_REDUCESCATTER) d = s + (CuDevPtr)r * out;
            rb[r].send = (const void *)(uintptr_t)s;
            rb[r].recv = (void *)(uintptr_t)d;
            TRY_GOTO(cu_check(cu.cuMemAlloc(&rb[r].pristine, in ? in : 16), "cuMemAlloc(pristine)"), res, out);
            TRY_GOTO(cu_check(cu.cuMemcpyHtoD(rb[r].pristine, rb[r].host_in, in), "cuMemcpyHtoD"), res, out);
        }
        TRY_GOTO(cu_check(cu.cuMemcpyHtoD((CuDevPtr)(uintptr_t)rb[r].send, rb[r].host_in, in),
                          "cuMemcpyHtoD(input)"), res, out);
        TRY_GOTO(cu_check(cu.cuCtxSynchronize(), "cuCtxSynchronize"), res, out);
    }
    /* back-to-back calls (the first one sets up) */
    int iters = chk->iters > 0 ? chk->iters : 1;
    double t0 = now_s();
    for (int it = 0; it < iters; it++)
        TRY_GOTO(run_once(comms, n, plan, rb, in, out, chk, restore), res, out);
    for (int r = 0; r < n; r++)
        TRY_GOTO(sync_deadline(rb[r].stream, 15, "the plan's kernels", r), res, out);
    if (usec) *usec = (now_s() - t0) * 1e6 / iters;
    /* CUDA graph: capture graph_iters calls per rank, replay once */
    if (chk->graph_iters > 0) {
        for (int r = 0; r < n; r++) {
            cu.cuCtxSetCurrent(comms[r]->ctx);
            TRY_GOTO(cu_check(cu.cuMemsetD8Async(rb[r].rbuf ? rb[r].rbuf : rb[r].sbuf, 0xcd,
                                                 rb[r].rbuf ? out : (in > out ? in : out), rb[r].stream),
                              "cuMemsetD8Async"), res, out);
            TRY_GOTO(cu_check(cu.cuStreamBeginCapture(rb[r].stream, CU_CAPTURE_MODE_RELAXED),
                              "cuStreamBeginCapture"), res, out);
        }
        mscclrt_result cap = MSCCLRT_SUCCESS;
        for (int it = 0; it < chk->graph_iters && cap == MSCCLRT_SUCCESS; it++)
            cap = run_once(comms, n, plan, rb, in, out, chk, restore);
        for (int r = 0; r < n; r++) {
            cu.cuCtxSetCurrent(comms[r]->ctx);
            mscclrt_result e = cu_check(cu.cuStreamEndCapture(rb[r].stream, &rb[r].graph),
                                        "cuStreamEndCapture");
            if (cap == MSCCLRT_SUCCESS) cap = e;
        }
        TRY_GOTO(cap, res, out);
        for (int r = 0; r < n; r++) {
            cu.cuCtxSetCurrent(comms[r]->ctx);
            TRY_GOTO(cu_check(cu.cuGraphInstantiate(&rb[r].gexec, rb[r].graph, 0),
                              "cuGraphInstantiate"), res, out);
        }
        for (int rep = 0; rep < 2; rep++)
            for (int r = 0; r < n; r++) {
                cu.cuCtxSetCurrent(comms[r]->ctx);
                TRY_GOTO(cu_check(cu.cuGraphLaunch(rb[r].gexec, rb[r].stream), "cuGraphLaunch"),
                         res, out);
            }
        for (int r = 0; r < n; r++)
            TRY_GOTO(sync_deadline(rb[r].stream, 15, "the graph replay", r), res, out);
    }
    /* check */
    for (int r = 0; r < n; r++) {
        cu.cuCtxSetCurrent(comms[r]->ctx);
        TRY_GOTO(cu_check(cu.cuMemcpyDtoH(rb[r].host_out, (CuDevPtr)(uintptr_t)rb[r].recv, out),
                          "cuMemcpyDtoH(output)"), res, out);
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
        if (!ok)
            res = rt_fail(MSCCLRT_ERR_INTERNAL, "plan '%s' on GPUs, %zu bytes, %s %s, %s%s: wrong "
                          "result: %s", p->name, chk->bytes, check_dtype_name(chk->dtype),
                          check_redop_name(chk->op), chk->inplace ? "in place" : "out of place",
                          chk->graph_iters > 0 ? ", after graph replay" : "", mm.msg);
    }
out:
    for (int r = 0; r < n; r++) {
        if (res != MSCCLRT_ERR_TIMEOUT && rb[r].send) {
            exec_drop_contexts(comms[r], rb[r].send);
            exec_drop_contexts(comms[r], rb[r].recv);
        }
        if (comms[r] && comms[r]->ctx) cu.cuCtxSetCurrent(comms[r]->ctx);
        if (rb[r].stream && res != MSCCLRT_ERR_TIMEOUT) cu.cuStreamSynchronize(rb[r].stream);
        if (rb[r].gexec) cu.cuGraphExecDestroy(rb[r].gexec);
        if (rb[r].graph) cu.cuGraphDestroy(rb[r].graph);
        if (res != MSCCLRT_ERR_TIMEOUT) {
            if (rb[r].sbuf) cu.cuMemFree(rb[r].sbuf);
            if (rb[r].rbuf) cu.cuMemFree(rb[r].rbuf);
            if (rb[r].pristine) cu.cuMemFree(rb[r].pristine);
            if (rb[r].stream) cu.cuStreamDestroy(rb[r].stream);
        }
        free(rb[r].host_in);
        free(rb[r].host_out);
    }
    cu.cuCtxSetCurrent(prev);
    free(rb);
    return res;
}
