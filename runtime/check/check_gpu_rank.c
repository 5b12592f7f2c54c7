/*
 * check_gpu_rank.c - mscclrt_gpu_check_rank: the GPU check of a plan run as one rank of a
 * group of processes (or threads) joined through the bootstrap. Each rank makes its own input,
 * runs the same calls as mscclrt_gpu_check_plan, checks only its own output with the streaming
 * host reference (check_collective_rank), and then every rank exchanges its verdict over the
 * bootstrap, so that all ranks return the same result: the first failing rank's.
 */
#include "check/check_gpu.h"
#include "bootstrap/bootstrap.h"
#include "check/check.h"
#include "core/clock.h"
#include "core/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXEC_CHECK_TAG 0x4348 /* "CH": bootstrap tag of check verdicts */
#define EXEC_CHECK_VERDICT_S 600.0 /* longest wait for a peer's verdict */

/* What each rank tells every other one after its part of the check. */
typedef struct {
    int32_t res;                   /* mscclrt_result of this rank's part */
    int32_t rank;
    double usec;                   /* its mean time per back-to-back call */
    char msg[1536];                /* its error text when res != 0 */
} CheckVerdict;

/* This rank's part: buffers, iters calls, the captured graph, the wait, its own output's
 * check. *b is left for the caller to release (after the verdicts: peers may still read it). */
static mscclrt_result check_local(mscclrt_comm *c, const mscclrt_plan *plan, const Plan *p,
                                  const mscclrt_gpu_check *chk, size_t in, size_t out,
                                  CheckGpuBufs *b, double *usec) {
    const int r = c->rank;
    TRY(cu_check(cu.cuCtxSetCurrent(c->ctx), "cuCtxSetCurrent"));
    TRY(check_gpu_alloc(b, p, r, c->device, chk, in, out));
    free(b->host_in);              /* the check regenerates what it needs */
    b->host_in = NULL;
    /* back-to-back calls: the first one is the collective setup, never captured, and left out
     * of the time per call where there are others */
    int iters = chk->iters > 0 ? chk->iters : 1;
    double t0 = rt_now_s();
    for (int it = 0; it < iters; it++) {
        if (chk->inplace) TRY(check_gpu_restore(c, b, in));
        TRY(mscclrt_execute_ex(c, plan, b->send, b->recv, in, out, chk->dtype, chk->op,
                               chk->packet, b->stream));
        if (it == 0 && iters > 1) {
            TRY(check_gpu_sync(b->stream, EXEC_CHECK_DEADLINE_S, "the plan's kernels", r));
            t0 = rt_now_s();
        }
    }
    TRY(check_gpu_sync(b->stream, EXEC_CHECK_DEADLINE_S, "the plan's kernels", r));
    *usec = (rt_now_s() - t0) * 1e6 / (iters > 1 ? iters - 1 : 1);
    if (chk->graph_iters > 0) {
        cu.cuCtxSetCurrent(c->ctx);
        TRY(check_gpu_capture_begin(b, in, out));
        mscclrt_result cap = MSCCLRT_SUCCESS;
        for (int it = 0; it < chk->graph_iters && cap == MSCCLRT_SUCCESS; it++) {
            if (chk->inplace) cap = check_gpu_restore(c, b, in);
            if (cap == MSCCLRT_SUCCESS)
                cap = mscclrt_execute_ex(c, plan, b->send, b->recv, in, out, chk->dtype, chk->op,
                                         chk->packet, b->stream);
        }
        cu.cuCtxSetCurrent(c->ctx);
        TRY(check_gpu_capture_end(b, cap));
        for (int rep = 0; rep < EXEC_CHECK_REPLAYS; rep++)
            TRY(cu_check(cu.cuGraphLaunch(b->gexec, b->stream), "cuGraphLaunch"));
        TRY(check_gpu_sync(b->stream, EXEC_CHECK_DEADLINE_S, "the graph replay", r));
    }
    cu.cuCtxSetCurrent(c->ctx);
    TRY(check_gpu_fetch(b, out));
    if (!check_collective_known(p->collective)) return MSCCLRT_SUCCESS;
    CheckMismatch mm;
    if (check_collective_rank(p->collective, c->nranks, r, chk->dtype, chk->op, chk->seed, in,
                              b->host_out, out, &mm))
        return MSCCLRT_SUCCESS;
    if (mm.rank < 0) return rt_fail(MSCCLRT_ERR_SYSTEM, "%s", mm.msg);
    return check_gpu_wrong(p, chk, &mm, b->host_out, in, out);
}

mscclrt_result check_gpu_agree(Boot *boot, mscclrt_result mine, double my_usec, double *usec) {
    const int n = boot_nranks(boot), r = boot_rank(boot);
    CheckVerdict *v = calloc((size_t)n, sizeof *v);
    if (!v) return rt_fail(MSCCLRT_ERR_SYSTEM, "rank %d: out of memory for the verdicts", r);
    v[r].res = (int32_t)mine;
    v[r].rank = r;
    v[r].usec = my_usec;
    if (mine != MSCCLRT_SUCCESS) snprintf(v[r].msg, sizeof v[r].msg, "%s", mscclrt_last_error());
    mscclrt_result res = MSCCLRT_SUCCESS;
    for (int q = 0; q < n && res == MSCCLRT_SUCCESS; q++)
        if (q != r) res = boot_send(boot, q, EXEC_CHECK_TAG, &v[r], sizeof v[r]);
    /* a peer that is alive but still checking a large output may take longer than one
     * bootstrap timeout; one that left is an error at once (MSCCLRT_ERR_REMOTE) */
    double until = rt_now_s() + EXEC_CHECK_VERDICT_S;
    for (int q = 0; q < n && res == MSCCLRT_SUCCESS; q++) {
        if (q == r) continue;
        do res = boot_recv(boot, q, EXEC_CHECK_TAG, &v[q], sizeof v[q]);
        while (res == MSCCLRT_ERR_TIMEOUT && rt_now_s() < until);
    }
    if (res != MSCCLRT_SUCCESS) {
        char why[1024];
        snprintf(why, sizeof why, "%s", mscclrt_last_error());
        if (mine != MSCCLRT_SUCCESS)
            res = rt_fail(mine, "rank %d: %s (and the verdicts could not be exchanged: %s)", r,
                          v[r].msg, why);
        else
            res = rt_fail(res, "rank %d: the check's verdicts could not be exchanged: %s", r, why);
        free(v);
        return res;
    }
    int first = -1, nfail = 0;
    char list[256] = "";
    double most = 0;
    for (int q = 0; q < n; q++) {
        most = v[q].usec > most ? v[q].usec : most;
        if (v[q].res == MSCCLRT_SUCCESS) continue;
        if (first < 0) first = q;
        size_t len = strlen(list);
        if (len + 16 < sizeof list)
            snprintf(list + len, sizeof list - len, "%s%d", nfail ? ", " : "", q);
        else if (len + 5 < sizeof list && !strstr(list, "...")) strcat(list, ", ...");
        nfail++;
    }
    if (first < 0) {
        if (usec) *usec = most;
        free(v);
        return MSCCLRT_SUCCESS;
    }
    mscclrt_result code = (mscclrt_result)v[first].res;
    if ((unsigned)code > MSCCLRT_ERR_INTERNAL || code == MSCCLRT_SUCCESS) code = MSCCLRT_ERR_REMOTE;
    v[first].msg[sizeof v[first].msg - 1] = 0;
    if (nfail > 1)
        res = rt_fail(code, "rank %d: %s (%d of %d ranks failed: %s)", first, v[first].msg, nfail,
                      n, list);
    else
        res = rt_fail(code, "rank %d: %s", first, v[first].msg);
    free(v);
    return res;
}

mscclrt_result mscclrt_gpu_check_rank(mscclrt_comm *c, const mscclrt_plan *plan,
                                      const mscclrt_gpu_check *chk, double *usec) {
    if (!c || c->magic != EXEC_COMM_MAGIC)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_gpu_check_rank: comm is not a live "
                       "communicator");
    if (!c->boot)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_gpu_check_rank: rank %d's comm has no "
                       "bootstrap (it comes from mscclrt_comm_init_all: use "
                       "mscclrt_gpu_check_plan; this call takes comms of mscclrt_comm_init_rank "
                       "or mscclrt_comm_init_env)", c->rank);
    const Plan *p = exec_plan(plan);
    mscclrt_result res = MSCCLRT_SUCCESS;
    size_t in = 0, out = 0;
    /* argument errors still go through the verdicts, so no peer waits for this rank in vain */
    if (!p) res = rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_gpu_check_rank: not a plan");
    else if (!chk) res = rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_gpu_check_rank: chk is NULL");
    else if (p->ngpus != c->nranks)
        res = rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_gpu_check_rank: plan '%s' has %d ranks, "
                      "the group %d", PLAN_ESC(p->name), p->ngpus, c->nranks);
    else if (!dtype_size(chk->dtype) || (unsigned)chk->op >= MSCCLRT_REDOP_COUNT)
        res = rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_gpu_check_rank: bad dtype %d or "
                      "operator %d", (int)chk->dtype, (int)chk->op);
    else
        res = mscclrt_plan_call_sizes(plan, chk->bytes, &in, &out);
    CheckGpuBufs b;
    memset(&b, 0, sizeof b);
    double mine = 0;
    CuContext prev = NULL;
    cu.cuCtxGetCurrent(&prev);
    if (res == MSCCLRT_SUCCESS)
        res = check_local(c, plan, p, chk, in, out, &b, &mine);
    /* the verdicts are also the barrier after which no peer reads our buffers any more */
    mscclrt_result all = check_gpu_agree(c->boot, res, mine, usec);
    check_gpu_release(c, &b, res == MSCCLRT_ERR_TIMEOUT);
    cu.cuCtxSetCurrent(prev);
    return all;
}
