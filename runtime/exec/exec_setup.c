/*
 * exec_setup.c - collective setups in a single-process group (mscclrt_comm_init_all): every
 * rank's first call for new buffers deposits a request in the group's round for that sequence
 * number; the last rank to arrive sets up all ranks (it can reach every device), the others
 * wait on a condition variable with MSCCLRT_SETUP_TIMEOUT_MS. Also the NVLS binding of a
 * context's switch channels, shared with the multi-process setup.
 */
#include "exec/exec_internal.h"
#include "core/err.h"
#include "core/log.h"
#include "core/param.h"
#include "transport/transport.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The peer table of rank r (all ranks' contexts allocated). */
static void ctx_fill_table(ExecClique *q, SetupRound *rd, int r) {
    mk_u64 sb[1024], rb[1024], sc[1024], st[1024];
    for (int o = 0; o < q->nranks; o++) {
        sb[o] = (mk_u64)(uintptr_t)rd->send[o];
        rb[o] = (mk_u64)(uintptr_t)rd->recv[o];
        sc[o] = rd->ctx[o]->scratch;
        st[o] = rd->ctx[o]->state;
    }
    exec_fill_table(rd->ctx[r], r, sb, rb, sc, st);
}

/* In one process a peer device reaches cuMem (VMM) memory only once cuMemSetAccess grants it
 * (peer access covers cuMemAlloc memory only): every device of the group gets read/write access
 * to the cuMem mapping that holds ptr. cuMemAlloc memory is left as it is. */
static mscclrt_result grant_group_access(ExecClique *q, const void *ptr, int rank, const char *what) {
    CuMemHandle h;
    if (cu.cuMemRetainAllocationHandle(&h, (void *)(uintptr_t)ptr) != CU_OK)
        return MSCCLRT_SUCCESS;
    cu.cuMemRelease(h);
    CuDevPtr base = 0;
    size_t size = 0;
    TRY(cu_check(cu.cuMemGetAddressRange(&base, &size, (CuDevPtr)(uintptr_t)ptr),
                 "cuMemGetAddressRange"));
    CuMemAccessDesc *acc = calloc((size_t)q->nranks, sizeof *acc);
    if (!acc) return rt_fail(MSCCLRT_ERR_SYSTEM, "out of memory");
    int n = 0;
    for (int i = 0; i < q->nranks; i++) {
        if (!q->comms[i]) continue;
        acc[n].location.type = CU_MEM_LOC_DEVICE;
        acc[n].location.id = q->comms[i]->device;
        acc[n++].flags = CU_MEM_ACCESS_RW;
    }
    char why[160];
    snprintf(why, sizeof why, "rank %d: cuMemSetAccess giving the group's %d devices access to "
             "%s %p (a cuMem allocation)", rank, n, what, ptr);
    mscclrt_result res = cu_check(cu.cuMemSetAccess(base, size, acc, n), why);
    free(acc);
    return res;
}

static mscclrt_result setup_round(ExecClique *q, SetupRound *rd) {
    const Plan *p0 = rd->plan[0];
    for (int r = 1; r < q->nranks; r++)
        if (rd->plan[r] != p0 && strcmp(rd->plan[r]->name, p0->name) != 0)
            return rt_fail(MSCCLRT_ERR_INVALID_USAGE, "collective setup #%llu: rank 0 runs plan "
                           "'%s' but rank %d runs plan '%s' (every rank must make the same calls)",
                           (unsigned long long)rd->seq, PLAN_ESC(p0->name), r, PLAN_ESC(rd->plan[r]->name));
    if (p0->ngpus != q->nranks)
        return rt_fail(MSCCLRT_ERR_PLAN, "plan '%s' is for %d ranks; the group has %d", PLAN_ESC(p0->name),
                       p0->ngpus, q->nranks);
    CuContext prev = NULL;
    cu.cuCtxGetCurrent(&prev);
    mscclrt_result res = MSCCLRT_SUCCESS;
    size_t scratch = 0;
    for (int r = 0; r < q->nranks && res == MSCCLRT_SUCCESS; r++) {
        size_t b = 0;
        TRY_GOTO(cu_check(cu.cuCtxSetCurrent(q->comms[r]->ctx), "cuCtxSetCurrent"), res, out);
        TRY_GOTO(exec_scratch_size(rd->plan[r], r, rd->ctx[r]->keyed, rd->send[r], rd->recv[r],
                                           rd->ctx[r]->span, &b), res, out);
        if (b > scratch) scratch = b;
    }
    for (int r = 0; r < q->nranks && res == MSCCLRT_SUCCESS; r++) {
        TRY_GOTO(cu_check(cu.cuCtxSetCurrent(q->comms[r]->ctx), "cuCtxSetCurrent"), res, out);
        rd->ctx[r]->scratch_bytes = rd->plan[r]->gpus[r].scratch_chunks ? scratch : 0;
        res = exec_ctx_alloc(q->comms[r], rd->ctx[r]);
    }
    if (res != MSCCLRT_SUCCESS) goto out;
    for (int r = 0; r < q->nranks; r++) {
        /* the owner's context: cuMem memory is not found from a device without access yet */
        TRY_GOTO(cu_check(cu.cuCtxSetCurrent(q->comms[r]->ctx), "cuCtxSetCurrent"), res, out);
        if (!rd->ctx[r]->keyed) continue;   /* peers never touch this rank's user buffers */
        TRY_GOTO(grant_group_access(q, rd->send[r], r, "sendbuf"), res, out);
        TRY_GOTO(grant_group_access(q, rd->recv[r], r, "recvbuf"), res, out);
    }
    for (int r = 0; r < q->nranks; r++) ctx_fill_table(q, rd, r);
    TRY_GOTO(exec_nvls_setup(q->comms, rd->ctx, q->nranks, NULL), res, out);
    for (int r = 0; r < q->nranks && res == MSCCLRT_SUCCESS; r++) {
        TRY_GOTO(cu_check(cu.cuCtxSetCurrent(q->comms[r]->ctx), "cuCtxSetCurrent"), res, out);
        res = cu_check(cu.cuCtxSynchronize(), "cuCtxSynchronize(setup)");
    }
out:
    cu.cuCtxSetCurrent(prev);
    return res;
}

mscclrt_result exec_nvls_setup(mscclrt_comm **cs, ExecCtx **xs, int n, Boot *boot) {
    const Plan *p = xs[0]->plan;
    if (!nvls_plan_uses(p)) return MSCCLRT_SUCCESS;
    NvlsMem *m = calloc((size_t)n, sizeof *m);
    if (!m) return rt_fail(MSCCLRT_ERR_SYSTEM, "out of memory for the NVLS setup of %d ranks", n);
    for (int i = 0; i < n; i++) {
        const ExecCtx *x = xs[i];
        m[i] = (NvlsMem){.rank = cs[i]->rank, .dev = cs[i]->dev, .ctx = cs[i]->ctx,
                         .base = {(CuDevPtr)(uintptr_t)x->send, (CuDevPtr)(uintptr_t)x->recv, x->scratch},
                         .bytes = {x->send_range, x->recv_range, x->scratch_bytes},
                         .nv = &xs[i]->nvls};
    }
    mscclrt_result res = boot ? nvls_setup_boot(p, &m[0], boot) : nvls_setup_local(p, m, n);
    free(m);
    if (res != MSCCLRT_SUCCESS) return res;
    for (int i = 0; i < n; i++) /* a switch entry: its multicast mapping, offset 0 = allocation base */
        for (int sw = 0; sw < p->gpus[cs[i]->rank].nswitch; sw++)
            xs[i]->tab[xs[i]->layout.tab_switch + sw] = nvls_mc_addr(xs[i]->nvls, sw);
    return MSCCLRT_SUCCESS;
}

/* Deposits rank c's request into its next round; the last arrival performs the setup. */
SetupRound * exec_round_deposit(mscclrt_comm *c, const Plan *p, ExecCtx *x) {
    ExecClique *q = c->clique;
    uint64_t seq = c->setup_seq++;
    pthread_mutex_lock(&q->mu);
    SetupRound *rd = q->rounds;
    while (rd && rd->seq != seq) rd = rd->next;
    if (!rd) {
        rd = calloc(1, sizeof *rd);
        if (rd) {
            rd->plan = calloc((size_t)q->nranks, sizeof *rd->plan);
            rd->send = calloc((size_t)q->nranks, sizeof *rd->send);
            rd->recv = calloc((size_t)q->nranks, sizeof *rd->recv);
            rd->ctx = calloc((size_t)q->nranks, sizeof *rd->ctx);
        }
        if (!rd || !rd->plan || !rd->send || !rd->recv || !rd->ctx) {
            if (rd) { free(rd->plan); free(rd->send); free(rd->recv); free(rd->ctx); free(rd); }
            pthread_mutex_unlock(&q->mu);
            return NULL;
        }
        rd->seq = seq;
        rd->next = q->rounds;
        q->rounds = rd;
    }
    rd->plan[c->rank] = p;
    rd->send[c->rank] = x->send;
    rd->recv[c->rank] = x->recv;
    rd->ctx[c->rank] = x;
    if (++rd->arrived == q->nranks) {
        rd->res = setup_round(q, rd);
        if (rd->res != MSCCLRT_SUCCESS) snprintf(rd->err, sizeof rd->err, "%s", mscclrt_last_error());
        rd->done = true;
        pthread_cond_broadcast(&q->cv);
    }
    pthread_mutex_unlock(&q->mu);
    return rd;
}

/* Waits for rank c's round; consumes it (the last consumer frees it). */
mscclrt_result exec_round_wait(mscclrt_comm *c, SetupRound *rd) {
    ExecClique *q = c->clique;
    long long ms;
    TRY(param_int(PARAM_SETUP_TIMEOUT_MS, &ms));
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += ms / 1000;
    dl.tv_nsec += (ms % 1000) * 1000000;
    if (dl.tv_nsec >= 1000000000) { dl.tv_sec++; dl.tv_nsec -= 1000000000; }
    pthread_mutex_lock(&q->mu);
    int rc = 0;
    while (!rd->done && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&q->cv, &q->mu, &dl);
    mscclrt_result res;
    if (!rd->done) {
        char missing[256] = "";
        size_t n = 0;
        for (int r = 0; r < q->nranks && n + 8 < sizeof missing; r++)
            if (!rd->ctx[r]) n += (size_t)snprintf(missing + n, sizeof missing - n, "%s%d", n ? ", " : "", r);
        pthread_mutex_unlock(&q->mu);
        return rt_fail(MSCCLRT_ERR_TIMEOUT, "rank %d: collective setup #%llu of plan '%s': ranks "
                       "%s did not make their first call within %lld ms "
                       "(MSCCLRT_SETUP_TIMEOUT_MS)", c->rank, (unsigned long long)rd->seq,
                       rd->plan[c->rank]->name, missing, ms);
    }
    res = rd->res;
    char err[1024];
    snprintf(err, sizeof err, "%s", rd->err);
    if (++rd->consumed == q->nranks) {
        for (SetupRound **pp = &q->rounds; *pp; pp = &(*pp)->next)
            if (*pp == rd) {
                *pp = rd->next;
                break;
            }
        free(rd->plan); free(rd->send); free(rd->recv); free(rd->ctx);
        free(rd);
    }
    pthread_mutex_unlock(&q->mu);
    if (res != MSCCLRT_SUCCESS) return rt_fail(res, "%s", err);
    return MSCCLRT_SUCCESS;
}
