/*
 * exec.c - GPU communicators (single-process groups), NCCL-style group calls, and one call of
 * a plan: find the context (collective setup on first use), the kernel (generated and compiled
 * on first use) and the per-size arguments, then cuLaunchKernel on the caller's stream.
 * Single-process setup: every rank's first call for new buffers deposits a request in the
 * group's round for that sequence number; the last rank to arrive sets up all ranks (it can
 * reach every device), the others wait on a condition variable with MSCCLRT_SETUP_TIMEOUT_MS.
 */
#include "exec/exec.h"
#include "core/api_plan.h"
#include "core/clock.h"
#include "core/err.h"
#include "core/log.h"
#include "core/param.h"
#include "transport/transport.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* ---- the group shared by the comms of one mscclrt_comm_init_all ---------------------------- */
typedef struct SetupRound {
    uint64_t seq;
    int arrived, consumed;
    bool done;
    mscclrt_result res;
    char err[1024];
    const Plan **plan;             /* [nranks] */
    const void **send, **recv;     /* [nranks] */
    ExecCtx **ctx;                 /* [nranks] placeholders to fill */
    struct SetupRound *next;
} SetupRound;

struct ExecClique {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int nranks;
    int live;                      /* comms not yet destroyed */
    mscclrt_comm **comms;          /* [nranks], borrowed */
    SetupRound *rounds;
};

const Plan *exec_plan(const mscclrt_plan *plan) { return api_plan_model(plan); }

static mscclrt_result comm_check(const mscclrt_comm *c, const char *fn) {
    if (!c) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "%s: comm is NULL", fn);
    if (c->magic != EXEC_COMM_MAGIC)
        return rt_fail(MSCCLRT_ERR_INVALID_USAGE, "%s: comm %p is not a live communicator", fn,
                       (const void *)c);
    return MSCCLRT_SUCCESS;
}

/* Makes c's context current; *prev gets the one to restore. */
static mscclrt_result ctx_push(const mscclrt_comm *c, CuContext *prev) {
    *prev = NULL;
    TRY(cu_check(cu.cuCtxGetCurrent(prev), "cuCtxGetCurrent"));
    if (*prev != c->ctx) TRY(cu_check(cu.cuCtxSetCurrent(c->ctx), "cuCtxSetCurrent"));
    return MSCCLRT_SUCCESS;
}
static void ctx_pop(const mscclrt_comm *c, CuContext prev) {
    if (prev != c->ctx) cu.cuCtxSetCurrent(prev);
}

/* ---- contexts -------------------------------------------------------------------------------- */
/* Context key of a call: the allocations holding sendbuf and recvbuf (spec §7.3). */
typedef struct { const void *send, *recv; size_t srange, rrange; } BufKey;

static mscclrt_result buf_key(const mscclrt_comm *c, const void *send, const void *recv,
                              size_t in, size_t out, BufKey *k) {
    const void *ptr[2] = {send, recv};
    const size_t len[2] = {in, out};
    static const char *const what[2] = {"sendbuf", "recvbuf"};
    for (int i = 0; i < 2; i++) {
        CuDevPtr b = 0;
        size_t n = 0;
        CuResult r = cu.cuMemGetAddressRange(&b, &n, (CuDevPtr)(uintptr_t)ptr[i]);
        if (r != CU_OK)
            return rt_fail(MSCCLRT_ERR_INVALID_ARG, "rank %d: %s %p is not device memory "
                           "(cuMemGetAddressRange: %d)", c->rank, what[i], ptr[i], r);
        /* peers map exactly this allocation (one cuMem mapping, or one cuMemAlloc block) */
        if ((CuDevPtr)(uintptr_t)ptr[i] - b + len[i] > n)
            return rt_fail(MSCCLRT_ERR_INVALID_ARG, "rank %d: %s %p + %zu bytes runs past the end "
                           "of its allocation (%#llx, %zu bytes): a buffer must lie in one "
                           "allocation or cuMem mapping, the unit peers map", c->rank, what[i],
                           ptr[i], len[i], (unsigned long long)b, n);
        if (i == 0) {
            k->send = (const void *)(uintptr_t)b;
            k->srange = n;
        } else {
            k->recv = (const void *)(uintptr_t)b;
            k->rrange = n;
        }
    }
    return MSCCLRT_SUCCESS;
}

static ExecCtx *ctx_find(mscclrt_comm *c, const Plan *p, const BufKey *k) {
    for (ExecCtx *x = c->ctxs; x; x = x->next)
        if (x->plan == p && x->send == k->send && x->recv == k->recv &&
            x->send_range == k->srange && x->recv_range == k->rrange)
            return x;
    return NULL;
}

void exec_ctx_free(ExecCtx *x) {
    if (!x) return;
    if (x->proxy) { /* its copies into peers and signals must be over before peers reuse memory */
        if (proxy_drain(x->proxy, 10) != MSCCLRT_SUCCESS)
            LOG_WARN("freeing a context: %s", mscclrt_last_error());
        proxy_unregister(x->proxy, x->tab + x->layout.tab_chan[1], x->layout.nchan[1]);
    }
    nvls_ctx_free(x->nvls);   /* unbinds the multicast groups; frees a cuMem scratch */
    if (x->scratch && !x->scratch_vmm) cu.cuMemFree(x->scratch);
    if (x->state) cu.cuMemFree(x->state);
    free(x);
}

static void ctx_unlink(mscclrt_comm *c, ExecCtx *x) {
    for (ExecCtx **pp = &c->ctxs; *pp; pp = &(*pp)->next)
        if (*pp == x) {
            *pp = x->next;
            break;
        }
    if (c->hot.ctx == x) memset(&c->hot, 0, sizeof c->hot);
}

/* Bytes of the allocation after ptr (the largest message that can start there). */
static mscclrt_result alloc_room(const void *ptr, const char *what, int rank, size_t *room) {
    CuDevPtr base = 0;
    size_t size = 0;
    CuResult r = cu.cuMemGetAddressRange(&base, &size, (CuDevPtr)(uintptr_t)ptr);
    if (r != CU_OK)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "rank %d: %s %p is not device memory of this "
                       "group (cuMemGetAddressRange: %d)", rank, what, ptr, r);
    *room = size - (size_t)((CuDevPtr)(uintptr_t)ptr - base);
    return MSCCLRT_SUCCESS;
}

/* Scratch of one rank's context (spec §3.5, from the allocations capped by max_message_size;
 * reuse_resources plans get their own scratch too). */
uint64_t exec_scratch_bytes(const Plan *p, int rank, uint64_t in_room, uint64_t out_room) {
    const PlanGpu *g = &p->gpus[rank];
    if (g->scratch_chunks == 0) return 0;
    uint64_t in = in_room < p->max_size ? in_room : p->max_size;
    uint64_t out = out_room < p->max_size ? out_room : p->max_size;
    uint64_t per = g->input_chunks ? (in + g->input_chunks - 1) / g->input_chunks
                                   : (out + g->output_chunks - 1) / (g->output_chunks ? g->output_chunks : 1);
    uint64_t a = p->alignment ? p->alignment : 16;
    per = (per + a - 1) / a * a;
    /* halves of a multiple of 256 bytes: exact, and the second one starts aligned (rounding
     * the doubled size instead once left a half of 0 and silently stopped double buffering) */
    return plan_scratch_bytes(p, rank, per, 256);
}

mscclrt_result exec_scratch_size(const Plan *p, int rank, const void *send, const void *recv,
                                   size_t *bytes) {
    *bytes = 0;
    if (p->gpus[rank].scratch_chunks == 0) return MSCCLRT_SUCCESS;
    size_t in_room = 0, out_room = 0;
    TRY(alloc_room(send, "sendbuf", rank, &in_room));
    TRY(alloc_room(recv, "recvbuf", rank, &out_room));
    *bytes = (size_t)exec_scratch_bytes(p, rank, in_room, out_room);
    return MSCCLRT_SUCCESS;
}

/* Allocations of rank r's context; the device's context is current. */
mscclrt_result exec_ctx_alloc(mscclrt_comm *c, ExecCtx *x) {
    const Plan *p = x->plan;
    TRY(cg_layout(p, c->rank, &x->layout));
    /* switch channels anywhere in the plan: every rank takes part in the multicast setup, so
     * every rank passes the NVLS gate (the refusal when MSCCLRT_ENABLE_NVLS is not 1) */
    const bool nvls = nvls_plan_uses(p);
    if (nvls) TRY(nvls_check_enabled(p, c->rank, c->dev));
    /* x->scratch_bytes: set by the caller (the same on every rank, so that the double-buffer
     * half, which a rank also applies to its peers' scratch, is the same everywhere) */
    x->scratch_half = p->double_scratch ? x->scratch_bytes / 2 : 0; /* 256-aligned halves */
    if (x->scratch_bytes && nvls && nvls_plan_binds(p, c->rank, PLAN_BUF_SCRATCH)) {
        /* multicast binds cuMem memory only; in one process every device of the group reaches
         * the scratch as a peer, which cuMem memory allows only through cuMemSetAccess */
        int acc[1024], nacc = 0;   /* a clique has at most 1024 ranks */
        for (int i = 0; c->clique && i < c->clique->nranks && nacc < 1024; i++)
            if (c->clique->comms[i]) acc[nacc++] = c->clique->comms[i]->device;
        TRY(nvls_scratch_alloc(&x->nvls, p, c->rank, c->device, x->scratch_bytes, acc, nacc,
                               &x->scratch));
        x->scratch_vmm = true;
        TRY(cu_check(cu.cuMemsetD8(x->scratch, 0, x->scratch_bytes), "cuMemsetD8(scratch)"));
    } else if (x->scratch_bytes) {
        TRY(cu_check(cu.cuMemAlloc(&x->scratch, x->scratch_bytes), "cuMemAlloc(scratch)"));
        TRY(cu_check(cu.cuMemsetD8(x->scratch, 0, x->scratch_bytes), "cuMemsetD8(scratch)"));
    }
    TRY(cu_check(cu.cuMemAlloc(&x->state, x->layout.state_bytes), "cuMemAlloc(state)"));
    TRY(cu_check(cu.cuMemsetD8(x->state, 0, x->layout.state_bytes), "cuMemsetD8(state)"));
    const PlanGpu *g = &p->gpus[c->rank];
    if (g->nsems > 0)
        TRY(cu_check(cu.cuMemcpyHtoD(x->state + x->layout.off_sem, g->sem_init,
                                     (size_t)g->nsems * sizeof(int)), "cuMemcpyHtoD(semaphores)"));
    LOG_INFO(LOG_SUB_EXEC, "rank %d: context for plan '%s' (allocations %p, %p): scratch %zu bytes",
             c->rank, p->name, x->send, x->recv, x->scratch_bytes);
    return MSCCLRT_SUCCESS;
}

void exec_fill_table(ExecCtx *x, int r, const mk_u64 *sendb, const mk_u64 *recvb,
                     const mk_u64 *scratch, const mk_u64 *state) {
    const Plan *p = x->plan;
    const PlanGpu *g = &p->gpus[r];
    const CgLayout *l = &x->layout;
    memset(x->tab, 0, sizeof x->tab);
    for (int t = 0; t < 2; t++) {
        int k = 0;
        for (int b = 0; b < g->nremotes; b++) {
            if (!g->remotes[b].access[t]) continue;
            int o = g->remotes[b].rank;
            x->tab[l->tab_remote[t] + k++] = g->remotes[b].type == PLAN_BUF_INPUT ? sendb[o]
                                           : g->remotes[b].type == PLAN_BUF_OUTPUT ? recvb[o]
                                           : scratch[o];
        }
        for (int ch = 0; ch < g->npeers[t]; ch++) {
            int peer = g->peers[t][ch], occ = 0;
            for (int j = 0; j < ch; j++) occ += g->peers[t][j] == peer;
            int slot = cg_inbound_slot(p, peer, t, r, occ);
            CgLayout pl;
            if (cg_layout(p, peer, &pl) != MSCCLRT_SUCCESS || slot < 0) continue;
            x->tab[l->tab_chan[t] + ch] = state[peer] + pl.off_inbound + (mk_u64)slot * 8;
        }
    }
}

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
                           (unsigned long long)rd->seq, p0->name, r, rd->plan[r]->name);
    if (p0->ngpus != q->nranks)
        return rt_fail(MSCCLRT_ERR_PLAN, "plan '%s' is for %d ranks; the group has %d", p0->name,
                       p0->ngpus, q->nranks);
    CuContext prev = NULL;
    cu.cuCtxGetCurrent(&prev);
    mscclrt_result res = MSCCLRT_SUCCESS;
    size_t scratch = 0;
    for (int r = 0; r < q->nranks && res == MSCCLRT_SUCCESS; r++) {
        size_t b = 0;
        TRY_GOTO(cu_check(cu.cuCtxSetCurrent(q->comms[r]->ctx), "cuCtxSetCurrent"), res, out);
        TRY_GOTO(exec_scratch_size(rd->plan[r], r, rd->send[r], rd->recv[r], &b), res, out);
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
static SetupRound *round_deposit(mscclrt_comm *c, const Plan *p, ExecCtx *x) {
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
static mscclrt_result round_wait(mscclrt_comm *c, SetupRound *rd) {
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

/* A new placeholder context, linked into the comm (ready once its round is done). */
static mscclrt_result ctx_placeholder(mscclrt_comm *c, const Plan *p, const BufKey *k,
                                      ExecCtx **out) {
    ExecCtx *x = calloc(1, sizeof *x);
    if (!x) return rt_fail(MSCCLRT_ERR_SYSTEM, "rank %d: out of memory for a context", c->rank);
    x->plan = p;
    x->send = k->send;
    x->recv = k->recv;
    x->send_range = k->srange;
    x->recv_range = k->rrange;
    x->next = c->ctxs;
    c->ctxs = x;
    *out = x;
    return MSCCLRT_SUCCESS;
}

/* Port channels through the proxy: start the comm's proxy on first need, register the peers'
 * counters this context signals, and give the kernel table the FIFO's address. */
static mscclrt_result ctx_attach_proxy(mscclrt_comm *c, ExecCtx *x) {
    if (!x->layout.uses_proxy) return MSCCLRT_SUCCESS;
    if (!c->proxy) {
        CuContext prev;
        TRY(ctx_push(c, &prev));
        mscclrt_result r = proxy_create(&c->proxy, c->ctx, c->rank);
        ctx_pop(c, prev);
        TRY(r);
    }
    TRY(proxy_register(c->proxy, x->tab + x->layout.tab_chan[1], x->layout.nchan[1]));
    x->proxy = c->proxy;
    x->tab[x->layout.tab_proxy] = proxy_fifo_addr(c->proxy);
    return MSCCLRT_SUCCESS;
}

/* The end of a context's collective setup (res: its outcome), whichever way it ran: the port
 * proxy, then ready; on failure the placeholder is unlinked and freed. */
static mscclrt_result ctx_finish(mscclrt_comm *c, ExecCtx *x, mscclrt_result res) {
    if (res == MSCCLRT_SUCCESS) res = ctx_attach_proxy(c, x);
    if (res != MSCCLRT_SUCCESS) {
        ctx_unlink(c, x);
        exec_ctx_free(x);
        return res;
    }
    x->ready = true;
    return MSCCLRT_SUCCESS;
}

static mscclrt_result ctx_setup(mscclrt_comm *c, const Plan *p, const BufKey *k,
                                void *stream, ExecCtx **out) {
    const void *send = k->send, *recv = k->recv;
    int st = CU_CAPTURE_STATUS_NONE;
    if (cu.cuStreamIsCapturing((CuStream)stream, &st) == CU_OK && st != CU_CAPTURE_STATUS_NONE)
        return rt_fail(MSCCLRT_ERR_INVALID_USAGE, "rank %d: the first call of plan '%s' for "
                       "sendbuf %p / recvbuf %p sets up memory and cannot be captured into a CUDA "
                       "graph; make one call before capturing", c->rank, p->name, send, recv);
    ExecCtx *x = NULL;
    const double t0 = rt_now_s();
    TRY(ctx_placeholder(c, p, k, &x));
    mscclrt_result res;
    if (c->boot) { /* one process per rank: collective through the bootstrap */
        res = exec_mp_setup(c, x);
    } else {
        SetupRound *rd = round_deposit(c, p, x);
        if (!rd) {
            ctx_unlink(c, x);
            free(x);
            return rt_fail(MSCCLRT_ERR_SYSTEM, "rank %d: out of memory for a setup round", c->rank);
        }
        res = round_wait(c, rd);
    }
    TRY(ctx_finish(c, x, res));
    *out = x;
    LOG_INFO(LOG_SUB_EXEC, "rank %d: context of plan '%s' set up in %.2f ms", c->rank, p->name,
             (rt_now_s() - t0) * 1e3);
    return MSCCLRT_SUCCESS;
}

/* ---- kernels ---------------------------------------------------------------------------------- */
static mscclrt_result kernel_get(mscclrt_comm *c, const ExecCtx *x, int dt, int op, int pk,
                                 ExecKernel **out) {
    const CgLayout *l = &x->layout;
    int kdt = l->has_reduce ? dt : -1, kop = l->has_reduce ? op : -1;
    int kpk = l->has_packets ? pk : -1;
    for (ExecKernel *k = c->kernels; k; k = k->next)
        if (k->plan == x->plan && k->dtype == kdt && k->op == kop && k->packet == kpk) {
            *out = k;
            return MSCCLRT_SUCCESS;
        }
    char *src = NULL;
    void *cubin = NULL;
    size_t len = 0;
    bool cached = false;
    ExecKernel *k = NULL;
    mscclrt_result res;
    char what[300];
    snprintf(what, sizeof what, "plan '%s' rank %d (%s, %s, LL%d)", x->plan->name, c->rank,
             mscclrt_dtype_name((mscclrt_dtype)dt), mscclrt_redop_name((mscclrt_redop)op),
             pk == MSCCLRT_LL8 ? 8 : 16);
    const double t0 = rt_now_s();
    TRY_GOTO(cg_generate(x->plan, c->rank, (mscclrt_dtype)dt, (mscclrt_redop)op,
                         (mscclrt_packet)pk, &src), res, fail);
    const double t1 = rt_now_s();
    const char *dump = param_str(PARAM_CG_DUMP_DIR);
    if (*dump) {
        char path[1024];
        mkdir(dump, 0755);
        snprintf(path, sizeof path, "%s/%s.r%d.%d.%d.%d.cu", dump, x->plan->name, c->rank, kdt,
                 kop, kpk);
        FILE *f = fopen(path, "w");
        if (f) {
            fputs(src, f);
            fclose(f);
        }
    }
    TRY_GOTO(cg_compile(src, c->arch, what, &cubin, &len, &cached), res, fail);
    const double t2 = rt_now_s();
    k = calloc(1, sizeof *k);
    if (!k) {
        res = rt_fail(MSCCLRT_ERR_SYSTEM, "out of memory");
        goto fail;
    }
    TRY_GOTO(cu_check(cu.cuModuleLoadData(&k->module, cubin), "cuModuleLoadData"), res, fail);
    TRY_GOTO(cu_check(cu.cuModuleGetFunction(&k->fn, k->module, CG_KERNEL_NAME),
                      "cuModuleGetFunction"), res, fail);
    LOG_INFO(LOG_SUB_EXEC, "%s: kernel ready in %.2f ms (source %.2f ms, %s %.2f ms, %zu-byte "
             "cubin, module load %.2f ms)", what, (rt_now_s() - t0) * 1e3, (t1 - t0) * 1e3,
             cached ? "cache hit" : "NVRTC", (t2 - t1) * 1e3, len, (rt_now_s() - t2) * 1e3);
    k->plan = x->plan;
    k->dtype = kdt;
    k->op = kop;
    k->packet = kpk;
    k->next = c->kernels;
    c->kernels = k;
    free(src);
    free(cubin);
    *out = k;
    return MSCCLRT_SUCCESS;
fail:
    if (k && k->module) cu.cuModuleUnload(k->module);
    free(k);
    free(src);
    free(cubin);
    return res;
}

/* ---- per-size arguments ---------------------------------------------------------------------- */
static mscclrt_result size_get(mscclrt_comm *c, ExecCtx *x, const void *send, const void *recv,
                               uint64_t in, uint64_t out, const MkArgs **args) {
    const uint64_t in_off = (uint64_t)((const char *)send - (const char *)x->send);
    const uint64_t out_off = (uint64_t)((const char *)recv - (const char *)x->recv);
    for (int i = 0; i < x->nsizes; i++)
        if (x->sizes[i].in_bytes == in && x->sizes[i].out_bytes == out &&
            x->sizes[i].in_off == in_off && x->sizes[i].out_off == out_off) {
            if (i) { /* move to front */
                ExecSize s = x->sizes[i];
                memmove(&x->sizes[1], &x->sizes[0], (size_t)i * sizeof s);
                x->sizes[0] = s;
            }
            *args = &x->sizes[0].args;
            return MSCCLRT_SUCCESS;
        }
    PlanGeom g;
    PlanErr err;
    if (!plan_geom(x->plan, c->rank, in, out, &g, &err))
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "rank %d: %s", c->rank, err.msg);
    uint64_t need = g.scratch_bytes;
    if (need > x->scratch_bytes)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "rank %d: plan '%s' needs %llu scratch bytes for "
                       "in %llu / out %llu bytes, but the buffers' allocations gave this context "
                       "%zu", c->rank, x->plan->name, (unsigned long long)need,
                       (unsigned long long)in, (unsigned long long)out, x->scratch_bytes);
    ExecSize s;
    memset(&s, 0, sizeof s);
    s.in_bytes = in;
    s.out_bytes = out;
    s.in_off = in_off;
    s.out_off = out_off;
    s.args.in = (mk_u64)(uintptr_t)send;
    s.args.out = (mk_u64)(uintptr_t)recv;
    s.args.in_off = in_off;
    s.args.out_off = out_off;
    s.args.scratch = x->scratch;
    s.args.chunk = g.chunk_bytes;
    s.args.scratch_half = x->scratch_half;
    s.args.state = x->state;
    s.args.out_bytes = out;
    s.args.nranks = (mk_u32)c->nranks;
    s.args.rank = (mk_u32)c->rank;
    int n = x->nsizes < EXEC_SIZES ? x->nsizes : EXEC_SIZES - 1;
    memmove(&x->sizes[1], &x->sizes[0], (size_t)n * sizeof s);
    x->sizes[0] = s;
    x->nsizes = n + 1;
    /* the hot entry may point into the moved array: recomputed by the caller */
    *args = &x->sizes[0].args;
    return MSCCLRT_SUCCESS;
}

static mscclrt_result launch(mscclrt_comm *c, CuFunction fn, const ExecCtx *x,
                             const MkArgs *args, void *stream) {
    /* a failed proxy would leave the kernel waiting for signals that never come */
    if (x->proxy) TRY(proxy_check(x->proxy));
    void *params[2] = {(void *)args, (void *)x->tab};
    CuContext prev;
    TRY(ctx_push(c, &prev));
    CuResult r = cu.cuLaunchKernel(fn, (unsigned)x->layout.ntb, 1, 1, (unsigned)x->layout.threads,
                                   1, 1, 0, (CuStream)stream, params, NULL);
    ctx_pop(c, prev);
    if (r != CU_OK) {
        char what[200];
        snprintf(what, sizeof what, "rank %d: launch of plan '%s' (%d blocks x %d threads)",
                 c->rank, x->plan->name, x->layout.ntb, x->layout.threads);
        return cu_check(r, what);
    }
    return MSCCLRT_SUCCESS;
}

/* Everything of one call but the launch: context (setup if needed), kernel, arguments. Module
 * loads and allocations may wait for running kernels of the device, so a group prepares all
 * its calls before it launches any (two ranks on one GPU would deadlock otherwise). */
static mscclrt_result exec_prepare(mscclrt_comm *c, const Plan *p, const void *send, void *recv,
                                   size_t in, size_t out, int dt, int op, int pk, void *stream,
                                   ExecCtx **xo, CuFunction *fn, MkArgs *args) {
    CuContext prev;
    TRY(ctx_push(c, &prev));
    mscclrt_result res = MSCCLRT_SUCCESS;
    BufKey key;
    TRY_GOTO(buf_key(c, send, recv, in, out, &key), res, out);
    ExecCtx *x = ctx_find(c, p, &key);
    if (x && !x->ready) {
        res = rt_fail(MSCCLRT_ERR_INTERNAL, "rank %d: context of plan '%s' used before its "
                      "setup finished", c->rank, p->name);
        goto out;
    }
    if (!x) TRY_GOTO(ctx_setup(c, p, &key, stream, &x), res, out);
    ExecKernel *k;
    const MkArgs *a;
    TRY_GOTO(kernel_get(c, x, dt, op, pk, &k), res, out);
    TRY_GOTO(size_get(c, x, send, recv, in, out, &a), res, out);
    *xo = x;
    *fn = k->fn;
    *args = *a;
    c->hot.plan = p;
    c->hot.send = send;
    c->hot.recv = recv;
    c->hot.in_bytes = in;
    c->hot.out_bytes = out;
    c->hot.dtype = dt;
    c->hot.op = op;
    c->hot.packet = pk;
    c->hot.ctx = x;
    c->hot.args = a;
    c->hot.fn = k->fn;
out:
    ctx_pop(c, prev);
    return res;
}

static mscclrt_result exec_call(mscclrt_comm *c, const Plan *p, const void *send, void *recv,
                                size_t in, size_t out, int dt, int op, int pk, void *stream) {
    ExecCtx *x;
    CuFunction fn;
    MkArgs args;
    TRY(exec_prepare(c, p, send, recv, in, out, dt, op, pk, stream, &x, &fn, &args));
    return launch(c, fn, x, &args, stream);
}

/* Whether a call is the comm's previous one (the hot path: no lookups at all). */
static inline bool hot_match(const mscclrt_comm *c, const Plan *p, const void *send,
                             const void *recv, size_t in, size_t out, int dt, int op, int pk) {
    return c->hot.plan == p && c->hot.send == send && c->hot.recv == recv &&
           c->hot.in_bytes == in && c->hot.out_bytes == out && c->hot.dtype == dt &&
           c->hot.op == op && c->hot.packet == pk;
}

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
    struct Pending *next;
} Pending;

/* Prepares one queued call (hot: copy the previous call's kernel and arguments). */
static void prepare_one(Pending *q) {
    if (q->res != MSCCLRT_SUCCESS) return;
    if (hot_match(q->comm, q->plan, q->send, q->recv, q->in, q->out, q->dt, q->op, q->pk)) {
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
    PrepJob *j = arg;
    for (Pending *q = j->list; q; q = q->next)
        if (q->comm == j->comm) prepare_one(q);
    return NULL;
}

static _Thread_local int tl_depth;
static _Thread_local Pending *tl_head, *tl_tail;
static _Thread_local Pending *tl_free;   /* recycled Pending records */

mscclrt_result mscclrt_group_start(void) {
    tl_depth++;
    return MSCCLRT_SUCCESS;
}

mscclrt_result mscclrt_group_end(void) {
    if (tl_depth <= 0)
        return rt_fail(MSCCLRT_ERR_INVALID_USAGE, "mscclrt_group_end without mscclrt_group_start");
    if (--tl_depth > 0) return MSCCLRT_SUCCESS;
    Pending *list = tl_head;
    tl_head = tl_tail = NULL;
    mscclrt_result first = MSCCLRT_SUCCESS;
    char first_msg[1024] = "";
    /* 1: deposit every setup (never blocks; the last arrival performs it) */
    for (Pending *q = list; q; q = q->next) {
        mscclrt_comm *c = q->comm;
        if (hot_match(c, q->plan, q->send, q->recv, q->in, q->out, q->dt, q->op, q->pk)) continue;
        BufKey key;
        CuContext prev;
        q->res = ctx_push(c, &prev);
        if (q->res != MSCCLRT_SUCCESS) continue;
        q->res = buf_key(c, q->send, q->recv, q->in, q->out, &key);
        ctx_pop(c, prev);
        if (q->res != MSCCLRT_SUCCESS || ctx_find(c, q->plan, &key)) continue;
        if (!c->clique) continue; /* multi-process: set up (collectively) when prepared */
        int st = CU_CAPTURE_STATUS_NONE;
        if (cu.cuStreamIsCapturing((CuStream)q->stream, &st) == CU_OK && st != CU_CAPTURE_STATUS_NONE) {
            q->res = rt_fail(MSCCLRT_ERR_INVALID_USAGE, "rank %d: the first call of plan '%s' for "
                             "new buffers cannot be captured into a CUDA graph", c->rank, q->plan->name);
            continue;
        }
        q->res = ctx_placeholder(c, q->plan, &key, &q->ctx);
        if (q->res != MSCCLRT_SUCCESS) continue;
        q->round = round_deposit(c, q->plan, q->ctx);
        if (!q->round) {
            ctx_unlink(c, q->ctx);
            free(q->ctx);
            q->ctx = NULL;
            q->res = rt_fail(MSCCLRT_ERR_SYSTEM, "out of memory for a setup round");
        }
    }
    /* 2: wait for them */
    for (Pending *q = list; q; q = q->next) {
        if (!q->round) continue;
        q->res = ctx_finish(q->comm, q->ctx, round_wait(q->comm, q->round));
    }
    /* 3: prepare every call (compile, load, arguments): one thread per comm when kernels may
     * have to be generated for several GPUs (NVRTC runs in parallel); then launch in order */
    mscclrt_comm *cs[64];
    int ncomm = 0;
    bool cold = false, overflow = false;
    for (Pending *q = list; q; q = q->next) {
        if (q->res == MSCCLRT_SUCCESS &&
            !hot_match(q->comm, q->plan, q->send, q->recv, q->in, q->out, q->dt, q->op, q->pk))
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
    for (Pending *q = list; q && !done; q = q->next) prepare_one(q);
    for (Pending *q = list; q; q = q->next) {
        if (q->res == MSCCLRT_SUCCESS) q->res = launch(q->comm, q->fn, q->ctx, &q->args, q->stream);
        if (q->res != MSCCLRT_SUCCESS && first == MSCCLRT_SUCCESS) {
            first = q->res;
            snprintf(first_msg, sizeof first_msg, "%s", q->err[0] ? q->err : mscclrt_last_error());
        }
    }
    while (list) { /* recycle: a group of calls allocates nothing in steady state */
        Pending *n = list->next;
        list->next = tl_free;
        tl_free = list;
        list = n;
    }
    if (first != MSCCLRT_SUCCESS) return rt_fail(first, "%s", first_msg);
    return MSCCLRT_SUCCESS;
}

/* ---- execute ------------------------------------------------------------------------------- */
mscclrt_result mscclrt_execute_ex(mscclrt_comm *c, const mscclrt_plan *plan, const void *send,
                                  void *recv, size_t in, size_t out, mscclrt_dtype dt,
                                  mscclrt_redop op, mscclrt_packet pk, void *stream) {
    const Plan *p = exec_plan(plan);
    /* hot path: the same call as the previous one on this comm */
    if (tl_depth == 0 && c && c->magic == EXEC_COMM_MAGIC && p &&
        hot_match(c, p, send, recv, in, out, (int)dt, (int)op, (int)pk))
        return launch(c, c->hot.fn, c->hot.ctx, c->hot.args, stream);
    TRY(comm_check(c, "mscclrt_execute"));
    if (!p) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_execute: plan is NULL or not a plan");
    if ((unsigned)dt >= MSCCLRT_DTYPE_COUNT)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_execute: dtype %d out of range [0, %d)",
                       (int)dt, MSCCLRT_DTYPE_COUNT);
    if ((unsigned)op >= MSCCLRT_REDOP_COUNT)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_execute: op %d out of range [0, %d)",
                       (int)op, MSCCLRT_REDOP_COUNT);
    if (pk != MSCCLRT_LL16 && pk != MSCCLRT_LL8)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_execute: packet type %d is neither "
                       "LL16 (0) nor LL8 (1)", (int)pk);
    if (p->ngpus != c->nranks)
        return rt_fail(MSCCLRT_ERR_PLAN, "mscclrt_execute: plan '%s' is for %d ranks; the comm's "
                       "group has %d", p->name, p->ngpus, c->nranks);
    if (!send || !recv)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_execute: rank %d: %s is NULL", c->rank,
                       !send ? "sendbuf" : "recvbuf");
    if (tl_depth > 0) {
        Pending *q = tl_free;
        if (q) {
            tl_free = q->next;
            memset(q, 0, sizeof *q);
        } else if (!(q = calloc(1, sizeof *q))) {
            return rt_fail(MSCCLRT_ERR_SYSTEM, "mscclrt_execute: out of memory");
        }
        q->comm = c;
        q->plan = p;
        q->send = send;
        q->recv = recv;
        q->in = in;
        q->out = out;
        q->dt = (int)dt;
        q->op = (int)op;
        q->pk = (int)pk;
        q->stream = stream;
        if (tl_tail) tl_tail->next = q;
        else tl_head = q;
        tl_tail = q;
        return MSCCLRT_SUCCESS;
    }
    return exec_call(c, p, send, recv, in, out, (int)dt, (int)op, (int)pk, stream);
}

mscclrt_result mscclrt_execute(mscclrt_comm *c, const mscclrt_plan *plan, const void *send,
                               void *recv, size_t in, size_t out, mscclrt_dtype dt,
                               mscclrt_redop op, void *stream) {
    return mscclrt_execute_ex(c, plan, send, recv, in, out, dt, op, MSCCLRT_LL16, stream);
}

void exec_drop_contexts(mscclrt_comm *c, const void *ptr) {
    bool synced = false;
    for (ExecCtx **pp = &c->ctxs; *pp;) {
        ExecCtx *x = *pp;
        const char *cp = ptr, *sb = x->send, *rb = x->recv;
        if (!(cp >= sb && cp < sb + x->send_range) && !(cp >= rb && cp < rb + x->recv_range)) {
            pp = &x->next;
            continue;
        }
        if (!synced) {
            CuContext prev;
            if (ctx_push(c, &prev) == MSCCLRT_SUCCESS) {
                cu.cuCtxSynchronize();
                ctx_pop(c, prev);
            }
            synced = true;
        }
        *pp = x->next;
        if (c->hot.ctx == x) memset(&c->hot, 0, sizeof c->hot);
        exec_ctx_free(x);
    }
}

/* ---- communicators ----------------------------------------------------------------------------- */
void exec_comm_release(mscclrt_comm *c) {
    CuContext prev = NULL;
    if (c->ctx) {
        cu.cuCtxGetCurrent(&prev);
        cu.cuCtxSetCurrent(c->ctx);
        cu.cuCtxSynchronize();
    }
    if (c->proxy && proxy_drain(c->proxy, 10) != MSCCLRT_SUCCESS)
        LOG_WARN("rank %d: %s", c->rank, mscclrt_last_error());
    exec_mp_quiesce(c); /* multi-process: every rank idle before memory goes away */
    while (c->ctxs) {
        ExecCtx *x = c->ctxs;
        c->ctxs = x->next;
        exec_ctx_free(x);
    }
    while (c->kernels) {
        ExecKernel *k = c->kernels;
        c->kernels = k->next;
        if (k->module) cu.cuModuleUnload(k->module);
        free(k);
    }
    proxy_destroy(c->proxy);
    c->proxy = NULL;
    exec_mp_close(c);
    if (c->ctx) {
        cu.cuCtxSetCurrent(prev == c->ctx ? NULL : prev);
        cu.cuDevicePrimaryCtxRelease(c->dev);
    }
    c->magic = 0;
    free(c);
}

static void clique_drop(ExecClique *q) {
    pthread_mutex_lock(&q->mu);
    int left = --q->live;
    pthread_mutex_unlock(&q->mu);
    if (left > 0) return;
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
    for (int i = 0; i < ndev; i++) comms[i] = q->comms[i];
    LOG_INFO(LOG_SUB_INIT, "single-process group of %d ranks (sm_%d)", ndev, q->comms[0]->arch);
    return MSCCLRT_SUCCESS;
fail:
    cu.cuCtxSetCurrent(prev);
    for (int i = 0; i < ndev; i++)
        if (q->comms[i]) {
            mscclrt_comm *c = q->comms[i];
            q->comms[i] = NULL;
            exec_comm_release(c);
            clique_drop(q);
        }
    if (q->live == 0 && ndev > 0 && !q->comms[0]) { /* freed by the last clique_drop */ }
    return res;
}

mscclrt_result mscclrt_comm_destroy(mscclrt_comm *c) {
    if (!c) return MSCCLRT_SUCCESS;
    TRY(comm_check(c, "mscclrt_comm_destroy"));
    ExecClique *q = c->clique;
    if (!q) {
        exec_comm_release(c);
        return MSCCLRT_SUCCESS;
    }
    pthread_mutex_lock(&q->mu);
    q->comms[c->rank] = NULL;
    pthread_mutex_unlock(&q->mu);
    exec_comm_release(c);
    clique_drop(q);
    return MSCCLRT_SUCCESS;
}

mscclrt_result mscclrt_comm_rank(const mscclrt_comm *c, int *rank) {
    TRY(comm_check(c, "mscclrt_comm_rank"));
    if (!rank) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_comm_rank: rank is NULL");
    *rank = c->rank;
    return MSCCLRT_SUCCESS;
}
mscclrt_result mscclrt_comm_size(const mscclrt_comm *c, int *size) {
    TRY(comm_check(c, "mscclrt_comm_size"));
    if (!size) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_comm_size: size is NULL");
    *size = c->nranks;
    return MSCCLRT_SUCCESS;
}
mscclrt_result mscclrt_comm_device(const mscclrt_comm *c, int *device) {
    TRY(comm_check(c, "mscclrt_comm_device"));
    if (!device) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_comm_device: device is NULL");
    *device = c->device;
    return MSCCLRT_SUCCESS;
}
